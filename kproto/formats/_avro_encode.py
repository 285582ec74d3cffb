"""Arrow -> Avro datums, one per row: the producing side of ``kproto.formats.avro``.

The array is described column by column (a *source* per Arrow array: validity, offsets,
values, each indexed from 0 for that array), and the schema is compiled against those
sources into a program of encode steps, the decoder's mirror: the loop
(``kproto._avro.run_encode``, or its pure twin) walks each row through it and appends the
row's datum, GIL released. Values are brought to the one physical form each step reads
first, column-wise with pyarrow (ints as int64, floats as float64, text and bytes as
large_binary, timestamps in the schema's unit, decimals at the schema's precision and
scale, enum symbols as their indexes).

A value is converted exactly or not at all: one that would change (an overflow, a
decimal rounded, a float that is not whole into an int, an unknown enum symbol, fixed
bytes of another length) is marked REFUSED in its source's validity, and the loop stops
at the first row that reaches it with an EncodeError naming the field path, the row and
the value. Temporal values keep their meaning: a date is its midnight (UTC for
timestamp-*), a naive timestamp is UTC for timestamp-*, an aware one is its wall clock in
its own zone for local-timestamp-*; a timestamp or time of a finer unit than the
schema's is floored to it (as Java, Spark's to_avro and fastavro do); a timestamp is
never written as a date or a time of day, nor a time of day as an instant. Integer
columns are the logical type's own count (its base type).
"""

from __future__ import annotations

import decimal
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# the step and error codes: defined beside the pure loop, mirrored by _avro_enc.pxi
from kproto._pure import avro as _ops
from kproto.errors import EncodeError

from ._avro_schema import MAX_DEPTH, NO_DEFAULT, Node, encode_default, nullable_branch

#: The Arrow type each temporal logical type's values are (the decoder's types).
_TEMPORAL = {
    "date": pa.date32(), "time-millis": pa.time32("ms"), "time-micros": pa.time64("us"),
    **{f"{local}timestamp-{name}": pa.timestamp(unit, None if local else "UTC")
       for local in ("", "local-") for name, unit in (("millis", "ms"), ("micros", "us"),
                                                       ("nanos", "ns"))}}


_UNIT_ORDER = {"s": 0, "ms": 1, "us": 2, "ns": 3}
_UNIT_NAMES = {"s": "second", "ms": "millisecond", "us": "microsecond", "ns": "nanosecond"}


class _Conv(NamedTuple):
    """A column brought to a target type: its values (from ``first_bad`` on: zeros), the
    first value that cannot be converted exactly (None: all can) and why not."""
    values: pa.Array
    first_bad: int | None = None
    why: str = ""


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
        #: Per step that may meet a REFUSED value: the column as given, and why.
        self.refused: dict[int, tuple[pa.Array, str]] = {}
        self.depth = -1                 # of the type being compiled (the root: 0)
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
        }.get(code) or self._refusal(code, node, value)

    def _refusal(self, code: int, node: int, value: int) -> str:
        if code != _ops.EERR_VALUE or node not in self.refused:
            return f"{self.paths[node]}: error {code}"
        column, why = self.refused[node]
        shown = column[value].as_py()
        text = repr(shown) if isinstance(shown, str | bytes | int | float | decimal.Decimal) \
            else str(shown)
        return f"{self.paths[node]}: {text} {why}"

    # ------------------------------------------------------------------ sources

    def _source(self, arr: pa.Array, *, offsets: Any = None, data: Any = None,
                width: int = 0, first_bad: int | None = None) -> int:
        valid = None
        if arr.null_count or first_bad is not None:
            valid = np.ascontiguousarray(arr.is_valid().to_numpy(zero_copy_only=False),
                                         np.uint8)
            if first_bad is not None:       # it and all after it: none is written, the
                valid[first_bad:] = _ops.REFUSED   # row order of a child array aside
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
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:   # only a recursive schema goes as deep as the column
                raise EncodeError(f"{path}: the column nests values deeper than the "
                                  f"{MAX_DEPTH} levels an Avro schema may have")
            return self._step(arr, node, path)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise EncodeError(f"{path}: cannot be brought to the schema's type: {exc}") from None
        finally:
            self.depth -= 1

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
            conv = _integers(arr, node, path)
            return self._value(_ops.E_INT if t == "int" else _ops.E_LONG, arr, conv, path,
                               pa.int64())
        if t in ("float", "double"):
            return self._value(_ops.E_FLOAT if t == "float" else _ops.E_DOUBLE, arr,
                               _floats(arr, t), path, pa.float64())
        if node.logical == "decimal":
            make = pa.decimal128 if node.precision <= 38 else pa.decimal256
            target = make(node.precision, node.scale)
            conv = _decimals(arr, target)
            if t == "fixed":
                return self._value(_ops.E_DEC_FIXED, arr, conv, path, target, c=node.size)
            return self._value(_ops.E_DEC_BYTES, arr, conv, path, target)
        if t in ("bytes", "string"):
            return self._node(_ops.E_BYTES, self._binary(arr), path)
        if t == "fixed":
            return self._value(_ops.E_FIXED, arr, _fixed(arr, node, path), path,
                               pa.binary(node.size), c=node.size)
        if t == "enum":
            return self._enum(arr, node, path)
        if t in ("array", "map"):
            return self._list(arr, node, path)
        assert t == "record"
        return self._record(arr, node, path)

    def _value(self, op: int, arr: pa.Array, conv: _Conv, path: str, target: pa.DataType,
               c: int = 0) -> int:
        """The step of a fixed-width value: ``conv``'s values as ``target``'s bytes, the
        values it could not convert marked REFUSED (their reason kept for the error)."""
        data, width = self._values(conv.values, target)
        src = self._source(arr, data=data, width=width, first_bad=conv.first_bad)
        index = self._node(op, src, path, c=c)
        if conv.first_bad is not None:
            self.refused[index] = (arr, conv.why)
        return index

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
        first = pc.index(unknown, True).as_py()
        conv = _Conv(indexes.fill_null(0), None if first < 0 else first,
                     f"is not a symbol of enum {node.name}")
        return self._value(_ops.E_ENUM, text, conv, path, pa.int32())

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
        extra = [name for name in names if name not in {f.name for f in node.fields}]
        if extra:       # as Spark's to_avro: a column the schema lacks would be lost
            shown = ", ".join(repr(name if path == "value" else f"{path}.{name}")
                              for name in extra)
            raise EncodeError(f"{path}: the column's field{'s' * (len(extra) > 1)} {shown} "
                              f"{'are' if len(extra) > 1 else 'is'} not in record "
                              f"{node.name}: {'they' if len(extra) > 1 else 'it'} would be "
                              "lost (select the fields the schema has)")
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
        branch = 0 if len(node.branches) == 1 else _branch_for_type(node, arr.type)
        if branch < 0:
            raise EncodeError(f"{path}: a {arr.type} column fits no branch of the union "
                              "(give a dense union column)")
        child = self._compile(arr, node.branches[branch], path)
        return self._node(_ops.E_BRANCH, self.nodes[child][1], path, a=child, c=branch, d=null)


def _exact(arr: pa.Array, target: pa.DataType, what: str) -> _Conv:
    """``arr`` cast to ``target`` where pyarrow's safe cast takes every value; otherwise
    the values before the first it refuses (found by halving), and that one."""
    try:
        return _Conv(pc.cast(arr, target))
    except pa.ArrowInvalid:
        pass
    pc.cast(arr[:0], target)          # a cast no value can make raises here, for the path
    lo, hi = 0, len(arr)              # arr[:lo] casts, arr[:hi] does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            pc.cast(arr[:mid], target)
            lo = mid
        except pa.ArrowInvalid:
            hi = mid
    try:
        pc.cast(arr[lo:lo + 1], target)
        reason = ""
    except pa.ArrowInvalid as exc:
        reason = f" ({exc})"
    return _Conv(_padded(pc.cast(arr[:lo], target), len(arr)), lo,
                 f"cannot be written as {what} exactly{reason}")


def _padded(values: pa.Array, n: int) -> pa.Array:
    """``values`` followed by zeros (nulls) up to ``n`` values."""
    return pa.concat_arrays([values, pa.nulls(n - len(values), values.type)])


def _first(mask: Any) -> int | None:
    """The index of the first true value of a boolean array (nulls are not), or None."""
    first = pc.index(mask, True).as_py()
    return None if first < 0 else first


def _same_kind(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether a temporal column means what a temporal logical type does: a date is a
    date (or the midnight of one), a time of day a time of day, an instant an instant."""
    if pa.types.is_timestamp(want):
        return pa.types.is_timestamp(have) or pa.types.is_date(have)
    if pa.types.is_date(want):
        return pa.types.is_date(have)
    return pa.types.is_time(have)


def _integers(arr: pa.Array, node: Node, path: str) -> _Conv:
    """The int64 values of an Avro int or long: dates, times and timestamps as the
    counts the schema's logical type wants, other columns exactly (floats only whole,
    unsigned only up to 2**63 - 1). An Avro int's range is checked by the loop."""
    t = arr.type
    want = _TEMPORAL.get(node.logical or "")
    if pa.types.is_temporal(t):
        if want is None:               # no unit to convert to: the column's own count
            return _Conv(pc.cast(arr.view(pa.int32() if t.bit_width == 32 else pa.int64()),
                                 pa.int64()))
        if not _same_kind(t, want):
            raise EncodeError(f"{path}: a {t} column cannot be written as {node.logical} "
                              "(cast it first if that is what is meant)")
        if pa.types.is_timestamp(t) and t.tz is not None and want.tz is None:
            arr = pc.local_timestamp(arr)            # an instant's wall clock in its zone
        unit = getattr(want, "unit", "")
        if _UNIT_ORDER.get(getattr(arr.type, "unit", ""), -1) > _UNIT_ORDER.get(unit, 9):
            # floored to the schema's unit, as Java (Instant.toEpochMilli), Spark's
            # to_avro and fastavro do; toward the past also before 1970
            arr = pc.floor_temporal(arr, unit=_UNIT_NAMES[unit])
        conv = _exact(arr, want, node.logical or "")
        counts = conv.values.view(pa.int32() if want.bit_width == 32 else pa.int64())
        return conv._replace(values=pc.cast(counts, pa.int64()))
    return _exact(arr, pa.int64(), f"an Avro {node.type}")


def _floats(arr: pa.Array, t: str) -> _Conv:
    """The float64 values of an Avro float or double: integers only where a double holds
    them exactly (pyarrow's safe cast: up to 2**53), and for a float no finite double
    past its range (which would become infinite). A double rounds to the nearest float."""
    conv = _exact(arr, pa.float64(), f"an Avro {t}")
    if t == "float" and conv.first_bad is None and not pa.types.is_float32(arr.type):
        values = conv.values.to_numpy(zero_copy_only=False)
        with np.errstate(over="ignore", invalid="ignore"):
            over = np.isfinite(values) & np.isinf(values.astype(np.float32))
        if over.any():
            first = int(np.argmax(over))
            return _Conv(_padded(conv.values[:first], len(arr)), first,
                         "is out of an Avro float's range")
    return conv


def _decimals(arr: pa.Array, target: pa.DataType) -> _Conv:
    """Decimal values at the schema's precision and scale, never rounded: integers via the
    widest decimal, floats only when the decimal reads back as the same float."""
    what = f"decimal({target.precision}, {target.scale})"
    if pa.types.is_integer(arr.type):
        wide = pa.decimal128(38, 0) if pa.types.is_decimal128(target) else \
            pa.decimal256(76, 0)
        return _exact(pc.cast(arr, wide), target, what)
    conv = _exact(arr, target, what)
    if pa.types.is_floating(arr.type):
        back = pc.cast(conv.values, pa.float64())
        first = _first(pc.not_equal(back, pc.cast(arr, pa.float64())))
        if first is not None and (conv.first_bad is None or first < conv.first_bad):
            return _Conv(_padded(conv.values[:first], len(arr)), first,
                         f"cannot be written as {what} exactly")
    return conv


def _fixed(arr: pa.Array, node: Node, path: str) -> _Conv:
    """Fixed values of exactly the schema's size."""
    size = node.size
    if pa.types.is_fixed_size_binary(arr.type):
        if arr.type.byte_width != size:
            raise EncodeError(f"{path}: a {arr.type} column cannot be written as fixed "
                              f"{node.name} of {size} bytes")
        return _Conv(arr)
    data = pc.cast(arr, pa.large_binary())
    first = _first(pc.not_equal(pc.binary_length(data), size))
    if first is None:
        return _Conv(pc.cast(data, pa.binary(size)))
    return _Conv(_padded(pc.cast(data[:first], pa.binary(size)), len(arr)), first,
                 f"is not {size} bytes long (fixed {node.name})")


def _branch_index(node: Node, name: str, i: int) -> int:
    for j, b in enumerate(node.branches):
        if name == (b.name or b.type) or (b.name and name == b.short_name):
            return j
    if i < len(node.branches):
        return i
    raise EncodeError(f"union branch {name!r} is not in the schema's union")


def _branch_for_type(node: Node, t: pa.DataType) -> int:
    """The branch a plain (non-union) column's values go to: the first of its kind, one
    without a logical type before one with (a decimal column: the first decimal; a
    temporal one: the first whose logical type means the same, then one it converts to)."""
    branches = node.branches
    if pa.types.is_null(t):
        return next((j for j, b in enumerate(branches) if b.type == "null"), -1)
    if pa.types.is_decimal(t):
        return next((j for j, b in enumerate(branches) if b.logical == "decimal"), -1)
    if pa.types.is_temporal(t):
        wants = [(j, _TEMPORAL.get(b.logical or "")) for j, b in enumerate(branches)]
        for j, want in wants:
            if want is not None and _same_kind(t, want) and _same_kind(want, t):
                return j
        for j, want in wants:
            if want is not None and _same_kind(t, want):
                return j
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
    for plain in (True, False):
        for kind in kinds:
            for j, b in enumerate(branches):
                if b.type == kind and (b.logical is None) == plain:
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
