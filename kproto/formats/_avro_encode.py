"""Arrow -> Avro datums, one per row: the producing side of ``kproto.formats.avro``.

The array is described column by column (a *source* per Arrow array: validity, offsets,
values, each indexed from 0 for that array), and the schema is compiled against those
sources into a program of encode steps, the decoder's mirror: the loop
(``kproto._avro.run_encode``, or its pure twin) walks each row through it and appends the
row's datum, GIL released. Values are brought to the one physical form each step reads
first, column-wise with pyarrow (ints as int64, floats as float64, text and bytes as
large_binary, timestamps in the schema's unit, decimals at the schema's precision and
scale, enum symbols as their indexes).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# the step and error codes: defined beside the pure loop, mirrored by _avro_enc.pxi
from kproto._pure import avro as _ops
from kproto.errors import EncodeError

from ._avro_schema import NO_DEFAULT, Node, encode_default, nullable_branch

_UNITS = {"timestamp-millis": "ms", "timestamp-micros": "us", "timestamp-nanos": "ns",
          "local-timestamp-millis": "ms", "local-timestamp-micros": "us",
          "local-timestamp-nanos": "ns"}


class EncodeProgram:
    """The steps and sources of one (array, schema) pair."""

    def __init__(self, array: pa.Array, node: Node) -> None:
        self.nodes: list[list[int]] = []
        self.table: list[int] = []
        self.paths: list[str] = []
        self.defaults = bytearray()
        self.valid: list[Any] = []
        self.offsets: list[Any] = []
        self.data: list[Any] = []
        self.widths: list[int] = []
        self.root = self._compile(array, node, "value")
        self.root_src = self.nodes[self.root][1]
        self.holds_null = node.type == "null" or (node.type == "union" and any(
            b.type == "null" for b in node.branches))

    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.array(self.nodes, np.int64).reshape(-1, 6),
                np.array(self.table or [0], np.int64))

    def reason(self, code: int, node: int, value: int) -> str:
        path = self.paths[node]
        return {
            _ops.EERR_NULL: f"{path}: null, but the schema does not allow null there",
            _ops.EERR_INT: f"{path}: {value} is out of range for an Avro int",
            _ops.EERR_BRANCH: f"{path}: union type code {value} is not a branch of the schema",
            _ops.EERR_DECIMAL: f"{path}: decimal does not fit {value} bytes",
            _ops.EERR_TOO_BIG: "the encoded values pass 2 GiB: encode fewer rows at a time",
        }.get(code, f"{path}: error {code}")

    # ------------------------------------------------------------------ sources

    def _source(self, arr: pa.Array, *, offsets: Any = None, data: Any = None,
                width: int = 0) -> int:
        valid = None
        if arr.null_count:
            valid = np.ascontiguousarray(arr.is_valid().to_numpy(zero_copy_only=False),
                                         np.uint8)
        self.valid.append(valid)
        self.offsets.append(None if offsets is None else np.ascontiguousarray(offsets,
                                                                              np.int64))
        self.data.append(b"" if data is None else data)
        self.widths.append(width)
        return len(self.widths) - 1

    def _values(self, arr: pa.Array, target: pa.DataType) -> tuple[Any, int]:
        """The values of a fixed-width array as bytes of ``target``, from its first row."""
        if arr.type != target:
            arr = pc.cast(arr, target)
        width = target.byte_width
        buf = arr.buffers()[1]
        if buf is None:
            return b"", width
        view = np.frombuffer(buf, np.uint8)[arr.offset * width:(arr.offset + len(arr)) * width]
        return view, width

    # ------------------------------------------------------------------ steps

    def _node(self, op: int, src: int, path: str, a: int = 0, b: int = 0, c: int = 0,
              d: int = 0) -> int:
        self.nodes.append([op, src, a, b, c, d])
        self.paths.append(path)
        return len(self.nodes) - 1

    def _compile(self, arr: pa.Array, node: Node, path: str) -> int:
        try:
            return self._step(arr, node, path)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise EncodeError(f"{path}: cannot be brought to the schema's type: {exc}") from None

    def _step(self, arr: pa.Array, node: Node, path: str) -> int:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if pa.types.is_dictionary(arr.type) and node.type != "enum":
            arr = arr.dictionary_decode()
        t = node.type
        if t == "union":
            return self._union(arr, node, path)
        if t == "null":
            return self._node(_ops.E_NULL, self._source(arr), path)
        if t == "boolean":
            values = np.ascontiguousarray(pc.cast(arr, pa.bool_()).fill_null(False)
                                          .to_numpy(zero_copy_only=False), np.uint8)
            return self._node(_ops.E_BOOL, self._source(arr, data=values, width=1), path)
        if t in ("int", "long"):
            arr = _integers(arr, node)
            data, width = self._values(arr, pa.int64())
            return self._node(_ops.E_INT if t == "int" else _ops.E_LONG,
                              self._source(arr, data=data, width=width), path)
        if t in ("float", "double"):
            data, width = self._values(arr, pa.float64())
            return self._node(_ops.E_FLOAT if t == "float" else _ops.E_DOUBLE,
                              self._source(arr, data=data, width=width), path)
        if node.logical == "decimal":
            make = pa.decimal128 if node.precision <= 38 else pa.decimal256
            data, width = self._values(arr, make(node.precision, node.scale))
            src = self._source(arr, data=data, width=width)
            if t == "fixed":
                return self._node(_ops.E_DEC_FIXED, src, path, c=node.size)
            return self._node(_ops.E_DEC_BYTES, src, path)
        if t in ("bytes", "string"):
            return self._node(_ops.E_BYTES, self._binary(arr), path)
        if t == "fixed":
            if not pa.types.is_fixed_size_binary(arr.type) or arr.type.byte_width != node.size:
                arr = pc.cast(arr, pa.binary(node.size))
            data, width = self._values(arr, pa.binary(node.size))
            return self._node(_ops.E_FIXED, self._source(arr, data=data, width=width), path,
                              c=node.size)
        if t == "enum":
            return self._enum(arr, node, path)
        if t in ("array", "map"):
            return self._list(arr, node, path)
        assert t == "record"
        return self._record(arr, node, path)

    def _binary(self, arr: pa.Array) -> int:
        if not pa.types.is_large_binary(arr.type):
            arr = pc.cast(arr, pa.large_binary())
        bufs = arr.buffers()
        offsets = np.frombuffer(bufs[1], np.int64)[arr.offset:arr.offset + len(arr) + 1] \
            if len(arr) else np.zeros(1, np.int64)
        data = bufs[2] if bufs[2] is not None else b""
        return self._source(arr, offsets=offsets, data=data)

    def _enum(self, arr: pa.Array, node: Node, path: str) -> int:
        text = arr.dictionary_decode() if pa.types.is_dictionary(arr.type) else arr
        text = pc.cast(text, pa.string())
        indexes = pc.index_in(text, value_set=pa.array(node.symbols, pa.string()))
        unknown = pc.and_(pc.is_valid(text), pc.is_null(indexes))
        if pc.any(unknown).as_py():
            row = int(np.flatnonzero(unknown.to_numpy(zero_copy_only=False))[0])
            raise EncodeError(f"row {row}: {path}: {text[row].as_py()!r} is not a symbol of "
                              f"enum {node.name}")
        data, width = self._values(indexes.fill_null(0), pa.int32())
        return self._node(_ops.E_ENUM, self._source(arr, data=data, width=width), path)

    def _list(self, arr: pa.Array, node: Node, path: str) -> int:
        t = arr.type
        if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t)):
            raise EncodeError(f"{path}: an Avro {node.type} needs a list or map column, not {t}")
        offsets = arr.offsets.to_numpy(zero_copy_only=False)
        values = arr.values
        if node.type == "array":
            assert node.items is not None
            child = self._compile(values, node.items, path + "[]")
            return self._node(_ops.E_ARRAY, self._source(arr, offsets=offsets), path, a=child)
        assert node.values is not None
        if not pa.types.is_struct(values.type) or values.type.num_fields != 2:
            raise EncodeError(f"{path}: an Avro map needs a map or list<struct<key, value>> "
                              f"column, not {t}")
        keys = self._binary(values.field(0))
        child = self._compile(values.field(1), node.values, path + "{}")
        return self._node(_ops.E_MAP, self._source(arr, offsets=offsets), path, a=child, c=keys)

    def _record(self, arr: pa.Array, node: Node, path: str) -> int:
        if not pa.types.is_struct(arr.type):
            raise EncodeError(f"{path}: record {node.name} needs a struct column, not "
                              f"{arr.type}")
        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        steps = []
        for f in node.fields:
            inner = f"{path}.{f.name}" if path != "value" else f.name
            if f.name in names:
                steps.append(self._compile(arr.field(names.index(f.name)), f.type, inner))
            elif f.default is not NO_DEFAULT:
                data = encode_default(f.type, f.default)
                steps.append(self._node(_ops.E_DEFAULT, -1, inner, c=len(self.defaults),
                                        d=len(data)))
                self.defaults += data
            else:
                raise EncodeError(f"{path}: the column has no field {f.name!r} and the schema "
                                  "gives it no default")
        start = len(self.table)
        self.table += steps
        return self._node(_ops.E_RECORD, self._source(arr), path, a=start, b=len(steps))

    def _union(self, arr: pa.Array, node: Node, path: str) -> int:
        null = next((i for i, b in enumerate(node.branches) if b.type == "null"), -1)
        inner = nullable_branch(node)
        if inner is not None:
            child = self._compile(arr, inner, path)
            return self._node(_ops.E_NULLABLE, self.nodes[child][1], path, a=child, c=null,
                              d=1 - null)
        if pa.types.is_union(arr.type):
            if arr.type.mode != "dense":
                raise EncodeError(f"{path}: only dense unions encode to Avro unions")
            n, start = len(arr), arr.offset
            codes = np.frombuffer(arr.buffers()[1], np.int8)[start:start + n]
            value_offsets = np.frombuffer(arr.buffers()[2], np.int32)[start:start + n]
            table: list[int] = []
            mapped = np.full(128, -1, np.int64)
            for i, code in enumerate(arr.type.type_codes):
                branch = _branch_index(node, arr.type.field(i).name, i)
                mapped[code] = len(table)
                table.append(branch)
                table.append(self._compile(arr.field(i), node.branches[branch], path))
            picks = np.ascontiguousarray(mapped[codes.astype(np.int64)], np.int64)
            src = self._source(arr, offsets=value_offsets, data=picks.view(np.uint8),
                               width=8)
            start_t = len(self.table)
            self.table += table
            return self._node(_ops.E_UNION, src, path, a=start_t, b=len(table) // 2)
        branch = _branch_for_type(node, arr.type)
        if branch < 0:
            raise EncodeError(f"{path}: a {arr.type} column fits no branch of the union "
                              "(give a dense union column)")
        child = self._compile(arr, node.branches[branch], path)
        return self._node(_ops.E_BRANCH, self.nodes[child][1], path, a=child, c=branch, d=null)


def _integers(arr: pa.Array, node: Node) -> pa.Array:
    """Dates, times and timestamps as the integer counts the schema's logical type wants."""
    t = arr.type
    if pa.types.is_timestamp(t):
        unit = _UNITS.get(node.logical or "", t.unit)
        return pc.cast(pc.cast(arr, pa.timestamp(unit, t.tz), safe=False), pa.int64())
    if pa.types.is_date(t):
        return pc.cast(pc.cast(arr, pa.date32()), pa.int32())
    if pa.types.is_time(t):
        want = pa.time32("ms") if node.logical == "time-millis" else pa.time64("us") \
            if node.logical == "time-micros" else t
        arr = pc.cast(arr, want, safe=False)
        return pc.cast(arr, pa.int32() if want.bit_width == 32 else pa.int64())
    return arr


def _branch_index(node: Node, name: str, i: int) -> int:
    for j, b in enumerate(node.branches):
        if name == (b.name or b.type) or (b.name and name == b.short_name):
            return j
    if i < len(node.branches):
        return i
    raise EncodeError(f"union branch {name!r} is not in the schema's union")


def _branch_for_type(node: Node, t: pa.DataType) -> int:
    """The branch a plain (non-union) column's values go to: the first of its kind."""
    kinds = (["int", "long"] if pa.types.is_integer(t) else ["double", "float"]
             if pa.types.is_floating(t) else ["string", "enum", "bytes"]
             if pa.types.is_string(t) or pa.types.is_large_string(t)
             else ["bytes", "fixed", "string"] if pa.types.is_binary(t)
             or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
             else ["boolean"] if pa.types.is_boolean(t)
             else ["record"] if pa.types.is_struct(t)
             else ["map"] if pa.types.is_map(t) else ["array"] if pa.types.is_list(t)
             or pa.types.is_large_list(t) else ["long", "int"] if pa.types.is_temporal(t)
             else [])
    for kind in kinds:
        for j, b in enumerate(node.branches):
            if b.type == kind:
                return j
    return -1


def encode(array: Any, node: Node, prefix: bytes, loop: Any) -> pa.BinaryArray:
    """One datum of ``node`` per row of ``array``, each after ``prefix``, by ``loop``."""
    if isinstance(array, pa.RecordBatch | pa.Table):
        array = pa.StructArray.from_arrays(
            [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
             for c in array.columns], names=array.schema.names)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if not isinstance(array, pa.Array):
        raise EncodeError(f"encode takes an Arrow array, not {type(array).__name__}")
    program = EncodeProgram(array, node)
    nodes, table = program.tables()
    data, offsets, validity, nulls, error = loop.run_encode(
        nodes, table, program.root, bytes(program.defaults), program.valid, program.offsets,
        program.data, program.widths, len(array), bytes(prefix), program.holds_null)
    if error is not None:
        row, code, at, value = error
        raise EncodeError(f"row {row}: {program.reason(code, at, value)}")
    return pa.Array.from_buffers(pa.binary(), len(array), [
        None if not nulls else pa.py_buffer(validity), pa.py_buffer(offsets),
        pa.py_buffer(data)], nulls)
