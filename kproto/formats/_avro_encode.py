"""Arrow -> Avro datums, one per row: the producing side of ``kproto.formats.avro``.

The array is first turned into plain Python values column by column (timestamps, dates
and times as their integer counts in the schema's unit; a dense union as (branch, value)
pairs), then an encoder compiled from the schema writes each row's datum.
"""

from __future__ import annotations

import decimal
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kproto.errors import EncodeError

from ._avro_schema import NO_DEFAULT, Node, encode_default, nullable_branch

_UNITS = {"timestamp-millis": "ms", "timestamp-micros": "us", "timestamp-nanos": "ns",
          "local-timestamp-millis": "ms", "local-timestamp-micros": "us",
          "local-timestamp-nanos": "ns"}
_Enc = Callable[[Any, bytearray], None]


class _Branch:
    """A value with its union branch chosen (from a dense union's type codes)."""

    __slots__ = ("index", "value")

    def __init__(self, index: int, value: Any) -> None:
        self.index, self.value = index, value


def _long(n: int, out: bytearray) -> None:
    u = (n << 1) ^ (n >> 63)
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


# --------------------------------------------------------------------------- Arrow -> Python


def _values(arr: pa.Array, node: Node) -> list[Any]:
    """The values of ``arr`` as Python objects ready for ``node``'s encoder (None: null)."""
    if node.type == "union":
        inner = nullable_branch(node)
        if inner is not None:
            return _values(arr, inner)
        if pa.types.is_union(arr.type):
            if arr.type.mode != "dense":
                raise EncodeError("only dense unions encode to Avro unions")
            codes = arr.type.type_codes
            children = [_values(arr.field(i), _branch_node(node, arr.type.field(i).name, i))
                        for i in range(arr.type.num_fields)]
            # from the buffers: type_codes and offsets ignore a slice's offset
            n, start = len(arr), arr.offset
            types = np.frombuffer(arr.buffers()[1], np.int8)[start:start + n]
            offsets = np.frombuffer(arr.buffers()[2], np.int32)[start:start + n]
            picks = {code: i for i, code in enumerate(codes)}
            out: list[Any] = []
            for t, off in zip(types.tolist(), offsets.tolist(), strict=True):
                i = picks[t]
                out.append(_Branch(_branch_index(node, arr.type.field(i).name, i),
                                   children[i][off]))
            return out
        if len(node.branches) == 1:
            return _values(arr, node.branches[0])
        return arr.to_pylist()                    # branch picked per value by its type
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    t = node.type
    if t == "record":
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if not pa.types.is_struct(arr.type):
            raise EncodeError(f"record {node.name} needs a struct column, not {arr.type}")
        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        columns: list[list[Any] | None] = []
        for f in node.fields:
            if f.name in names:
                columns.append(_values(arr.field(names.index(f.name)), f.type))
            elif f.default is not NO_DEFAULT:
                columns.append(None)
            else:
                raise EncodeError(f"record {node.name}: the column has no field {f.name!r} "
                                  "and the schema gives it no default")
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        rows = zip(*(c if c is not None else [_DEFAULT] * len(arr) for c in columns), strict=True) \
            if columns else (() for _ in range(len(arr)))
        return [r if ok else None for r, ok in zip(rows, valid.tolist(), strict=True)]
    if t in ("array", "map"):
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)
                or pa.types.is_map(arr.type)):
            raise EncodeError(f"{t} needs a list or map column, not {arr.type}")
        offsets = arr.offsets.to_numpy(zero_copy_only=False).tolist()
        if t == "array":
            assert node.items is not None
            items = _values(arr.values, node.items)
            pieces = [items[a:b] for a, b in zip(offsets, offsets[1:], strict=False)]
        else:
            assert node.values is not None
            # a map's entries, or a list<struct<key, value>>: offsets index the whole child
            keys = arr.values.field(0).to_pylist()
            vals = _values(arr.values.field(1), node.values)
            pieces = [list(zip(keys[a:b], vals[a:b], strict=True))
                      for a, b in zip(offsets, offsets[1:], strict=False)]
        valid = arr.is_valid().to_numpy(zero_copy_only=False).tolist()
        return [p if ok else None for p, ok in zip(pieces, valid, strict=True)]
    if node.logical in _UNITS and pa.types.is_timestamp(arr.type):
        arr = pc.cast(arr, pa.timestamp(_UNITS[node.logical], arr.type.tz), safe=False)
        return arr.cast(pa.int64()).to_pylist()
    if pa.types.is_date(arr.type) or pa.types.is_time(arr.type) \
            or pa.types.is_timestamp(arr.type):
        width = pa.int32() if arr.type.bit_width == 32 else pa.int64()
        if node.logical == "time-micros" and pa.types.is_time(arr.type):
            arr = pc.cast(arr, pa.time64("us"))
            width = pa.int64()
        elif node.logical == "time-millis" and pa.types.is_time(arr.type):
            arr = pc.cast(arr, pa.time32("ms"), safe=False)
            width = pa.int32()
        elif node.logical == "date" and pa.types.is_date64(arr.type):
            arr = pc.cast(arr, pa.date32())
            width = pa.int32()
        return arr.cast(width).to_pylist()
    return arr.to_pylist()


_DEFAULT = object()   # a record field the column lacks: its default is encoded


def _branch_node(node: Node, name: str, i: int) -> Node:
    return node.branches[_branch_index(node, name, i)]


def _branch_index(node: Node, name: str, i: int) -> int:
    for j, b in enumerate(node.branches):
        if name == (b.name or b.type) or (b.name and name == b.short_name):
            return j
    if i < len(node.branches):
        return i
    raise EncodeError(f"union branch {name!r} is not in the schema's union")


# --------------------------------------------------------------------------- encoders


def _encoder(node: Node, memo: dict[int, _Enc]) -> _Enc:
    key = id(node)
    if key in memo:
        return memo[key]
    t = node.type
    if t in ("record", "array", "map", "union"):
        slot: list[_Enc] = []
        memo[key] = lambda v, out: slot[0](v, out)   # recursive types refer to themselves
        slot.append(_complex(node, memo))
        memo[key] = slot[0]
        return slot[0]
    enc = _simple(node)
    memo[key] = enc
    return enc


def _simple(node: Node) -> _Enc:
    t = node.type
    if t == "null":
        def enc(v: Any, out: bytearray) -> None:
            if v is not None:
                raise EncodeError(f"null expected, not {v!r}")
    elif t == "boolean":
        def enc(v: Any, out: bytearray) -> None:
            out.append(1 if _check(v, bool, t) else 0)
    elif t in ("int", "long"):
        limit = 2**31 if t == "int" else 2**63

        def enc(v: Any, out: bytearray) -> None:
            if type(v) is not int or not -limit <= v < limit:
                raise EncodeError(f"{v!r} is not an Avro {t}")
            _long(v, out)
    elif t in ("float", "double"):
        packer = struct.Struct("<f" if t == "float" else "<d")

        def enc(v: Any, out: bytearray) -> None:
            if type(v) not in (int, float):
                raise EncodeError(f"{v!r} is not an Avro {t}")
            out += packer.pack(v)
    elif node.logical == "decimal":
        scale, size = node.scale, (node.size if t == "fixed" else None)

        def enc(v: Any, out: bytearray) -> None:
            n = _unscaled(v, scale, node.precision)
            data = n.to_bytes(size or max(1, (n.bit_length() + 8) // 8), "big", signed=True)
            if size is None:
                _long(len(data), out)
            out += data
    elif t in ("bytes", "string"):
        def enc(v: Any, out: bytearray) -> None:
            if isinstance(v, str):
                v = v.encode()
            elif not isinstance(v, (bytes, bytearray)):
                raise EncodeError(f"{v!r} is not an Avro {t}")
            _long(len(v), out)
            out += v
    elif t == "fixed":
        def enc(v: Any, out: bytearray) -> None:
            if not isinstance(v, (bytes, bytearray)) or len(v) != node.size:
                raise EncodeError(f"{v!r} is not {node.size} bytes (fixed {node.name})")
            out += v
    else:
        assert t == "enum"
        index = {s: i for i, s in enumerate(node.symbols)}

        def enc(v: Any, out: bytearray) -> None:
            i = index.get(v, -1)
            if i < 0:
                raise EncodeError(f"{v!r} is not a symbol of enum {node.name}")
            _long(i, out)
    return enc


def _check(v: Any, kind: type, name: str) -> Any:
    if type(v) is not kind:
        raise EncodeError(f"{v!r} is not an Avro {name}")
    return v


def _unscaled(v: Any, scale: int, precision: int) -> int:
    if not isinstance(v, (decimal.Decimal, int)):
        raise EncodeError(f"{v!r} is not a decimal")
    sign, digits, exponent = decimal.Decimal(v).as_tuple()
    if not isinstance(exponent, int):
        raise EncodeError(f"{v!r} is not a finite decimal")
    n = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift >= 0:
        n *= 10**shift
    else:
        n, rest = divmod(n, 10**-shift)
        if rest:
            raise EncodeError(f"{v} has more than {scale} digits after the point")
    if n >= 10**precision:
        raise EncodeError(f"{v} does not fit decimal({precision}, {scale})")
    return -n if sign else n


def _complex(node: Node, memo: dict[int, _Enc]) -> _Enc:
    t = node.type
    if t == "record":
        fields = [(f, _encoder(f.type, memo),
                   encode_default(f.type, f.default) if f.default is not NO_DEFAULT else b"")
                  for f in node.fields]

        def enc(v: Any, out: bytearray) -> None:
            if v is None:
                raise EncodeError(f"null is not a record {node.name}")
            if isinstance(v, dict):
                v = tuple(v.get(f.name, _DEFAULT) for f, _, _ in fields)
            for (f, field_enc, default), x in zip(fields, v, strict=True):
                if x is _DEFAULT:
                    out += default
                    continue
                try:
                    field_enc(x, out)
                except EncodeError as exc:
                    raise EncodeError(f"{f.name}: {exc}") from None
        return enc
    if t in ("array", "map"):
        inner = _encoder(node.items if t == "array" else node.values, memo)  # type: ignore[arg-type]
        key = _simple(Node("string"))

        def enc(v: Any, out: bytearray) -> None:
            if v is None:
                raise EncodeError(f"null is not an Avro {t}")
            if isinstance(v, dict):
                v = list(v.items())
            if v:
                _long(len(v), out)
                for item in v:
                    if t == "map":
                        key(item[0], out)
                        inner(item[1], out)
                    else:
                        inner(item, out)
            out.append(0)
        return enc
    branches = [_encoder(b, memo) for b in node.branches]

    def enc_union(v: Any, out: bytearray) -> None:
        if isinstance(v, _Branch):
            _long(v.index, out)
            branches[v.index](v.value, out)
            return
        i = _pick(node, v)
        _long(i, out)
        branches[i](v, out)
    return enc_union


_PYTHON: dict[str, tuple[type, ...]] = {
    "null": (type(None),), "boolean": (bool,), "int": (int,), "long": (int,),
    "float": (float, int), "double": (float, int), "string": (str,),
    "bytes": (bytes, bytearray, decimal.Decimal), "fixed": (bytes, bytearray, decimal.Decimal),
    "enum": (str,), "record": (dict, tuple), "map": (dict, list), "array": (list,),
}


def _pick(node: Node, v: Any) -> int:
    """The union branch for a Python value: the first whose type takes it."""
    for i, b in enumerate(node.branches):
        if type(v) is bool and b.type != "boolean":
            continue
        if b.type == "int" and type(v) is int and not -(2**31) <= v < 2**31:
            continue
        if isinstance(v, _PYTHON[b.type]) and (
                not isinstance(v, decimal.Decimal) or b.logical == "decimal"):
            return i
    raise EncodeError(f"{v!r} fits no branch of the union")


def encode(array: Any, node: Node, prefix: bytes) -> pa.BinaryArray:
    """One datum of ``node`` per row of ``array``, each after ``prefix``."""
    if isinstance(array, pa.RecordBatch | pa.Table):
        array = pa.StructArray.from_arrays(
            [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
             for c in array.columns], names=array.schema.names)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if not isinstance(array, pa.Array):
        raise EncodeError(f"encode takes an Arrow array, not {type(array).__name__}")
    values = _values(array, node)
    enc = _encoder(node, {})
    holds_null = node.type == "null" or (node.type == "union" and any(
        b.type == "null" for b in node.branches))
    valid = array.is_valid().to_numpy(zero_copy_only=False).tolist()
    data = bytearray()
    ends = np.zeros(len(values) + 1, np.int64)
    nulls = []
    for i, (v, ok) in enumerate(zip(values, valid, strict=True)):
        if ok or holds_null:
            data += prefix
            try:
                enc(v, data)
            except EncodeError as exc:
                raise EncodeError(f"row {i}: {exc}") from None
        else:
            nulls.append(i)
        ends[i + 1] = len(data)
    if len(data) > 2**31 - 1:
        raise EncodeError("the encoded values pass 2 GiB: encode fewer rows at a time")
    validity = None
    if nulls:
        mask = np.ones(len(values), bool)
        mask[nulls] = False
        validity = pa.py_buffer(np.packbits(mask, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), len(values), [
        validity, pa.py_buffer(ends.astype(np.int32)), pa.py_buffer(bytes(data))],
        len(nulls))
