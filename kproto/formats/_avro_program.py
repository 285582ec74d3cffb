"""The Avro decoder's program: a (writer, reader) schema pair compiled once into flat
tables that the decoder loop (``kproto._avro``, or its pure twin ``kproto._pure.avro``)
runs over every value, and the Arrow arrays built from what it fills.

Two tables describe the output and the reading:

* **slots** (one row per Arrow array of the reader's type, in tree order):
  ``kind, width, first child (in tables), child count``. Kinds: ``null`` (a length),
  ``fixed`` (``width`` bytes a value: ints, floats, fixed, decimals, enum indexes),
  ``bool`` (a byte a value, packed into bits at the end), ``binary`` (int32 offsets + data),
  ``list`` and ``map`` (int32 offsets; children: items / keys and values), ``struct``
  (children) and ``union`` (dense: int8 type ids in data + int32 offsets; children).
  Every slot keeps a validity bitmap, started at its first null.
* **nodes** (one row per step of the reading, 8 int64 each):
  ``op, slot, a, b, c, d, 0, 0``. The writer schema drives: a record node runs its
  writer fields in order (fields the reader drops run skip nodes, slot -1), then one
  ``default`` node per reader field the writer lacks (the default's Avro bytes, run through
  the reader's own program). A writer union's node has a branch table (a node per branch,
  -1 for a branch the reader cannot read: an error for that value, as the specification
  says). Promotions (int -> long/float/double, long -> float/double, float -> double,
  string <-> bytes) are ops of their own.

The op codes, slot kinds and error codes below are the contract with both decoder loops.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

# The op codes, slot kinds and error codes: defined beside the pure loop, mirrored by the C
# enums of kproto/_avro.pyx (tests/test_avro_core.py checks they agree).
from kproto._pure.avro import (  # noqa: E402
    ERR_BOOL,
    ERR_BRANCH,
    ERR_COUNT,
    ERR_DECIMAL,
    ERR_DEPTH,
    ERR_ENUM,
    ERR_ENUM_SYMBOL,
    ERR_NEG_LENGTH,
    ERR_SHORT,
    ERR_TOO_BIG,
    ERR_TRAILING,
    ERR_TRUNCATED,
    ERR_UNREADABLE_BRANCH,
    ERR_UTF8,
    ERR_VARINT,
    K_BINARY,
    K_BOOL,
    K_FIXED,
    K_LIST,
    K_MAP,
    K_NULL,
    K_STRUCT,
    K_UNION,
    OP_ARRAY,
    OP_BOOL,
    OP_BYTES,
    OP_DEC_BYTES,
    OP_DEC_FIXED,
    OP_DEFAULT,
    OP_DOUBLE,
    OP_ENUM,
    OP_FIXED,
    OP_FLOAT,
    OP_FLOAT_TO_DOUBLE,
    OP_INT,
    OP_INT_TO_DOUBLE,
    OP_INT_TO_FLOAT,
    OP_INT_TO_LONG,
    OP_LONG,
    OP_LONG_TO_DOUBLE,
    OP_LONG_TO_FLOAT,
    OP_MAP,
    OP_NULL,
    OP_NULLS_INTO,
    OP_RECORD,
    OP_SKIP_ARRAY,
    OP_SKIP_BYTES,
    OP_SKIP_MAP,
    OP_SKIP_N,
    OP_SKIP_RECORD,
    OP_SKIP_UNION,
    OP_SKIP_VARINT,
    OP_STRING,
    OP_TAG,
    OP_UNION,
)
from kproto.errors import SchemaError

from ._avro_schema import (
    NO_DEFAULT,
    Node,
    encode_default,
    is_nullable,
    nullable_branch,
    to_arrow,
)


def reason(code: int, a: int, b: int) -> str:
    """The words for an error a decoder loop reported."""
    return {
        ERR_TRUNCATED: f"truncated datum: {a} more bytes needed, {b} left",
        ERR_VARINT: "malformed varint (too long, or over its type's range)",
        ERR_NEG_LENGTH: f"negative length {a}",
        ERR_BOOL: f"boolean byte is {a}, not 0 or 1",
        ERR_UTF8: "string is not valid UTF-8",
        ERR_ENUM: f"enum index {a} out of range (the enum has {b} symbols)",
        ERR_BRANCH: f"union branch {a} out of range (the union has {b} branches)",
        ERR_UNREADABLE_BRANCH: f"writer union branch {a} cannot be read with the reader schema",
        ERR_ENUM_SYMBOL: f"enum symbol {a} of the writer is not in the reader's enum "
                         "(which has no default)",
        ERR_DECIMAL: f"decimal does not fit precision {a}",
        ERR_COUNT: f"block count {a} is more than the {b} bytes left can hold",
        ERR_TRAILING: f"{a} bytes left over after the datum",
        ERR_DEPTH: f"values nested deeper than {a} levels",
        ERR_SHORT: f"value of {a} bytes is shorter than its {b}-byte header",
        ERR_TOO_BIG: "a decoded column passed 2 GiB (decode fewer values at a time)",
    }.get(code, f"error {code} ({a}, {b})")


class _Slot:
    __slots__ = ("index", "kind", "type", "children", "node")

    def __init__(self, index: int, kind: int, type: pa.DataType, node: Node) -> None:
        self.index, self.kind, self.type, self.node = index, kind, type, node
        self.children: list[_Slot] = []


def _width(node: Node, arrow: pa.DataType) -> int:
    if pa.types.is_dictionary(arrow):
        return 4
    return arrow.byte_width


class Program:
    """A compiled (writer, reader) pair: the tables both decoder loops run."""

    def __init__(self, writer: Node, reader: Node) -> None:
        self.slots: list[_Slot] = []
        self.slot_rows: list[list[int]] = []
        self.nodes: list[list[int]] = []
        self.tables: list[int] = []
        self.defaults = bytearray()
        self._skips: dict[int, int] = {}
        self._minsize: dict[int, int] = {}
        #: Why each writer union branch the reader cannot read is unreadable (its table
        #: entry is -1 - its index here, which the loops report).
        self.unreadable: list[str] = []
        self.arrow_type = to_arrow(reader)
        self.root_slot = self._slot(reader, self.arrow_type)
        self.root = self._compile(writer, reader, self.root_slot, top=True)
        self.node_table = np.array(self.nodes, dtype=np.int64).reshape(-1, 8)
        self.slot_table = np.array(self.slot_rows, dtype=np.int64).reshape(-1, 4)
        self.table = np.array(self.tables or [0], dtype=np.int64)
        self.default_bytes = bytes(self.defaults)

    def reason(self, code: int, a: int, b: int) -> str:
        """The words for an error a decoder loop reported running this program."""
        if code == ERR_UNREADABLE_BRANCH and -len(self.unreadable) <= b < 0:
            return f"writer union branch {a} cannot be read: {self.unreadable[-b - 1]}"
        return reason(code, a, b)

    # ------------------------------------------------------------------ slots

    def _slot(self, node: Node, arrow: pa.DataType) -> _Slot:
        inner = nullable_branch(node)
        if inner is not None:
            return self._slot(inner, arrow)
        if node.type == "union" and len(node.branches) == 1:
            return self._slot(node.branches[0], arrow)
        t = node.type
        if t == "null":
            kind = K_NULL
        elif t == "boolean":
            kind = K_BOOL
        elif t in ("bytes", "string") and node.logical != "decimal":
            kind = K_BINARY
        elif t in ("int", "long", "float", "double", "fixed", "enum", "bytes"):
            kind = K_FIXED
        else:
            kind = {"record": K_STRUCT, "array": K_LIST, "map": K_MAP, "union": K_UNION}[t]
        slot = _Slot(len(self.slots), kind, arrow, node)
        self.slots.append(slot)
        row = [kind, _width(node, arrow) if kind == K_FIXED else 1, 0, 0]
        self.slot_rows.append(row)
        if kind == K_STRUCT:
            slot.children = [self._slot(f.type, arrow.field(i).type)
                             for i, f in enumerate(node.fields)]
        elif kind == K_LIST:
            assert node.items is not None
            slot.children = [self._slot(node.items, arrow.value_type)]
        elif kind == K_MAP:
            assert node.values is not None
            slot.children = [self._slot(Node("string"), pa.string()),
                             self._slot(node.values, arrow.item_type)]
        elif kind == K_UNION:
            slot.children = [self._slot(b, arrow.field(i).type)
                             for i, b in enumerate(node.branches)]
        row[2], row[3] = self._table([c.index for c in slot.children]), len(slot.children)
        return slot

    # ------------------------------------------------------------------ nodes

    def _table(self, values: list[int]) -> int:
        start = len(self.tables)
        self.tables.extend(values)
        return start

    def _node(self, op: int, slot: int = -1, a: int = 0, b: int = 0, c: int = 0,
              d: int = 0) -> int:
        self.nodes.append([op, slot, a, b, c, d, 0, 0])
        return len(self.nodes) - 1

    def _compile(self, w: Node, r: Node, slot: _Slot, top: bool = False) -> int:
        """The node that reads a value of ``w`` into ``slot`` (the reader's ``r``)."""
        if w.type == "union":
            # each writer branch on its own (Java's Resolver): one the reader cannot read
            # is an error for the values written in it, not for the pair
            table, why = [], []
            for b in w.branches:
                try:
                    node = self._branch(b, r, slot)
                except SchemaError as exc:
                    node, reason = -1, str(exc)
                else:
                    reason = f"the writer's {_name(b)} cannot be read as the reader's {_name(r)}"
                if node < 0:
                    why.append(reason)
                    node = -len(self.unreadable) - 1
                    self.unreadable.append(reason)
                table.append(node)
            if len(why) == len(table):
                raise SchemaError(f"no branch of the writer's union can be read as {_name(r)} "
                                  f"({'; '.join(why)})")
            return self._node(OP_UNION, -1, self._table(table), len(table))
        node = self._branch(w, r, slot)
        if node < 0:
            raise SchemaError(f"the writer's {_name(w)} cannot be read as {_name(r)}")
        return node

    def _branch(self, w: Node, r: Node, slot: _Slot) -> int:
        """A non-union writer type against the reader type: a node, or -1 (no match)."""
        if r.type == "union":
            inner = nullable_branch(r)
            if inner is not None:
                if w.type == "null":
                    return self._node(OP_NULLS_INTO, slot.index)
                return self._branch(w, inner, slot) if _matches(w, inner) else -1
            if len(r.branches) == 1:
                return self._branch(w, r.branches[0], slot)
            for pick in _candidates(w, r.branches):
                child = slot.children[pick]
                try:
                    inner_node = self._branch(w, r.branches[pick], child)
                except SchemaError:
                    if _exact(w, r.branches[pick]):
                        raise
                    continue           # a namesake that does not resolve: try the next
                return self._node(OP_TAG, slot.index, inner_node, 0, pick, child.index)
            return -1
        if not _matches(w, r):
            return -1
        return self._resolve(w, r, slot)

    def _resolve(self, w: Node, r: Node, slot: _Slot) -> int:
        wt, rt, s = w.type, r.type, slot.index
        if wt == "null":
            return self._node(OP_NULL, s)
        if wt == "boolean":
            return self._node(OP_BOOL, s)
        if wt in ("int", "long", "float", "double"):
            return self._node(_NUMERIC[wt, rt], s)
        if w.logical == "decimal" and r.logical == "decimal" and w.scale != r.scale:
            raise SchemaError(f"decimal scale {w.scale} cannot be read as scale {r.scale}")
        if wt in ("bytes", "string"):
            if r.logical == "decimal" and rt == "bytes":
                return self._node(OP_DEC_BYTES, s, 0, 0, 0, self._decimal(r))
            return self._node(OP_STRING if rt == "string" else OP_BYTES, s)
        if wt == "fixed":
            if r.logical == "decimal":
                return self._node(OP_DEC_FIXED, s, 0, 0, w.size, self._decimal(r))
            return self._node(OP_FIXED, s, 0, 0, w.size)
        if wt == "enum":
            mapping = []
            for symbol in w.symbols:
                if symbol in r.symbols:
                    mapping.append(r.symbols.index(symbol))
                elif r.enum_default is not None:
                    mapping.append(r.symbols.index(r.enum_default))
                else:
                    mapping.append(-1)
            return self._node(OP_ENUM, s, self._table(mapping), len(mapping))
        if wt == "array":
            assert w.items is not None and r.items is not None
            child = self._compile(w.items, r.items, slot.children[0])
            return self._node(OP_ARRAY, s, child, 0, self._min_size(w.items))
        if wt == "map":
            assert w.values is not None and r.values is not None
            child = self._compile(w.values, r.values, slot.children[1])
            return self._node(OP_MAP, s, child, 0, slot.children[0].index,
                              1 + self._min_size(w.values))
        assert wt == "record"
        return self._record(w, r, slot)

    def _record(self, w: Node, r: Node, slot: _Slot) -> int:
        source = _field_sources(w, r)
        steps, written = [], set()
        for wf in w.fields:
            i = source.get(wf.name, -1)
            if i < 0:
                steps.append(self._skip(wf.type))
                continue
            written.add(i)
            rf = r.fields[i]
            try:
                steps.append(self._compile(wf.type, rf.type, slot.children[i]))
            except SchemaError as exc:
                raise SchemaError(f"record {r.name}, field {rf.name}: {exc}") from None
        for i, rf in enumerate(r.fields):
            if i in written:
                continue
            if rf.default is NO_DEFAULT:
                raise SchemaError(f"record {r.name}: reader field {rf.name!r} is not in the "
                                  "writer's schema and has no default")
            data = encode_default(rf.type, rf.default)
            child = self._compile(rf.type, rf.type, slot.children[i])
            start = len(self.defaults)
            self.defaults += data
            steps.append(self._node(OP_DEFAULT, -1, child, 0, start, len(data)))
        return self._node(OP_RECORD, slot.index, self._table(steps), len(steps))

    def _decimal(self, r: Node) -> int:
        """The table row of a decimal: output width, precision, then the limbs of 10**p."""
        width = 16 if r.precision <= 38 else 32
        limit = 10 ** r.precision
        limbs = [(limit >> (64 * i)) & (2**64 - 1) for i in range(width // 8)]
        return self._table([width, r.precision, *(x - 2**64 if x >= 2**63 else x
                                                  for x in limbs)])

    # ------------------------------------------------------------------ skipping

    def _skip(self, w: Node) -> int:
        """A node that reads past a value of ``w`` and keeps nothing (memoized per named
        type, so a recursive writer schema compiles to a cyclic program)."""
        key = id(w)
        if key in self._skips:
            return self._skips[key]
        t = w.type
        if t == "null":
            return self._node(OP_SKIP_N, -1, 0, 0, 0)
        if t in ("boolean", "float", "double", "fixed"):
            size = {"boolean": 1, "float": 4, "double": 8}.get(t, w.size)
            return self._node(OP_SKIP_N, -1, 0, 0, size)
        if t in ("int", "long", "enum"):
            return self._node(OP_SKIP_VARINT)
        if t in ("bytes", "string"):
            return self._node(OP_SKIP_BYTES)
        index = self._node(OP_NULL)                   # placeholder, filled below
        self._skips[key] = index
        if t == "array":
            assert w.items is not None
            row = [OP_SKIP_ARRAY, -1, self._skip(w.items), 0, self._min_size(w.items), 0]
        elif t == "map":
            assert w.values is not None
            row = [OP_SKIP_MAP, -1, self._skip(w.values), 0, 0, 1 + self._min_size(w.values)]
        elif t == "record":
            steps = [self._skip(f.type) for f in w.fields]
            row = [OP_SKIP_RECORD, -1, self._table(steps), len(steps), 0, 0]
        else:
            steps = [self._skip(b) for b in w.branches]
            row = [OP_SKIP_UNION, -1, self._table(steps), len(steps), 0, 0]
        self.nodes[index] = [*row, 0, 0]
        return index

    def _min_size(self, w: Node, stack: frozenset[int] = frozenset()) -> int:
        """The fewest bytes a value of ``w`` takes (0 for null, empty records...)."""
        t = w.type
        if t == "null":
            return 0
        if t in ("boolean", "int", "long", "enum", "bytes", "string", "array", "map", "union"):
            return 1
        if t in ("float", "double"):
            return 4 if t == "float" else 8
        if t == "fixed":
            return w.size
        if id(w) in stack:
            return 1   # a recursive record holds at least one union/array/map byte
        return sum(self._min_size(f.type, stack | {id(w)}) for f in w.fields)

    # ------------------------------------------------------------------ assembly

    def assemble(self, outs: list[tuple[Any, ...]]) -> pa.Array:
        """The Arrow array of the root slot from what a decoder loop filled: per slot
        (length, nulls, validity bitmap or None, data, offsets) as NumPy arrays."""
        return self._array(self.root_slot, outs)

    def _array(self, slot: _Slot, outs: list[tuple[Any, ...]]) -> pa.Array:
        length, nulls, validity, data, offsets = outs[slot.index]
        valid = pa.py_buffer(validity) if nulls else None
        kind, typ = slot.kind, slot.type
        if kind == K_NULL:
            return pa.nulls(length)
        if kind == K_BOOL:
            bits = np.packbits(data[:length], bitorder="little")
            return pa.Array.from_buffers(typ, length, [valid, pa.py_buffer(bits)], nulls)
        if kind == K_FIXED:
            if pa.types.is_dictionary(typ):
                indices = pa.Array.from_buffers(pa.int32(), length, [valid, pa.py_buffer(data)],
                                                nulls)
                return pa.DictionaryArray.from_arrays(indices, pa.array(slot.node.symbols,
                                                                        pa.string()))
            return pa.Array.from_buffers(typ, length, [valid, pa.py_buffer(data)], nulls)
        if kind == K_BINARY:
            return pa.Array.from_buffers(typ, length, [valid, pa.py_buffer(offsets),
                                                       pa.py_buffer(data)], nulls)
        children = [self._array(c, outs) for c in slot.children]
        if kind == K_STRUCT:
            return pa.Array.from_buffers(typ, length, [valid], nulls, children=children)
        if kind == K_LIST:
            return pa.Array.from_buffers(typ, length, [valid, pa.py_buffer(offsets)], nulls,
                                         children=children)
        if kind == K_MAP:
            entries = pa.StructArray.from_arrays(children, fields=[typ.key_field,
                                                                   typ.item_field])
            return pa.Array.from_buffers(typ, length, [valid, pa.py_buffer(offsets)], nulls,
                                         children=[entries])
        assert kind == K_UNION
        return pa.Array.from_buffers(typ, length, [None, pa.py_buffer(data),
                                                   pa.py_buffer(offsets)], 0,
                                     children=children)


_NUMERIC = {
    ("int", "int"): OP_INT, ("int", "long"): OP_INT_TO_LONG, ("int", "float"): OP_INT_TO_FLOAT,
    ("int", "double"): OP_INT_TO_DOUBLE, ("long", "long"): OP_LONG,
    ("long", "float"): OP_LONG_TO_FLOAT, ("long", "double"): OP_LONG_TO_DOUBLE,
    ("float", "float"): OP_FLOAT, ("float", "double"): OP_FLOAT_TO_DOUBLE,
    ("double", "double"): OP_DOUBLE,
}
_PROMOTIONS = {"int": ("long", "float", "double"), "long": ("float", "double"),
               "float": ("double",), "string": ("bytes",), "bytes": ("string",)}


def _name(n: Node) -> str:
    return n.name or n.type


def _names_match(w: Node, r: Node) -> bool:
    """Named types resolve when their unqualified names agree or the writer's full name is
    one of the reader's aliases (full names, qualified by the reader's namespace): the
    specification, and Java's SchemaCompatibility.schemaNameEquals. (fastavro also takes a
    bare alias equal to the writer's unqualified name.)"""
    return w.short_name == r.short_name or w.name in r.aliases


def _same(w: Node, r: Node) -> bool:
    """Same kind (and, for named types, matching names; for fixed, the same size)."""
    if w.type != r.type:
        return False
    if w.type in ("record", "enum", "fixed"):
        return _names_match(w, r) and (w.type != "fixed" or w.size == r.size)
    return True


def _exact(w: Node, r: Node) -> bool:
    """Same kind and, for named types, the same full name (or an alias of the reader's):
    the first choice of a reader union's branch."""
    return _same(w, r) and (w.type not in ("record", "enum", "fixed") or w.name == r.name
                            or w.name in r.aliases)


def _matches(w: Node, r: Node) -> bool:
    """The specification's "match": same kind, or a promotion."""
    return _same(w, r) or r.type in _PROMOTIONS.get(w.type, ())


def _candidates(w: Node, branches: list[Node]) -> list[int]:
    """The reader union's branches a writer type may be read as, best first (Java's
    ResolvingGrammarGenerator/Resolver.firstMatchingBranch): the same kind with the same
    full name, then the same kind with a matching unqualified name, then the first
    promotion. Java also reads a record as a structurally compatible record of another
    name; the specification does not, and neither does this."""
    exact = [i for i, b in enumerate(branches) if _exact(w, b)]
    if exact:
        return exact[:1]
    same = [i for i, b in enumerate(branches) if _same(w, b)]
    promoted = [i for i, b in enumerate(branches) if b.type in _PROMOTIONS.get(w.type, ())]
    return same + promoted[:1]


def _field_sources(w: Node, r: Node) -> dict[str, int]:
    """Which reader field each writer field is read into (by writer field name).

    The reader's aliases rename the writer's fields first (the specification; Java's
    Schema.applyAliases), but only for a reader field whose own name the writer lacks:
    a field of the same name always wins, so an alias never takes another field's value.
    A reader field whose aliases name several writer fields, or a writer field that
    several reader fields' aliases name, is a SchemaError."""
    names = {f.name for f in w.fields}
    source: dict[str, int] = {}
    renamed: dict[str, str] = {}
    for i, rf in enumerate(r.fields):
        if rf.name in names:
            continue
        hits = [a for a in rf.aliases if a in names]
        if len(hits) > 1:
            raise SchemaError(f"record {r.name}: the aliases of reader field {rf.name!r} "
                              f"name several writer fields ({', '.join(hits)})")
        if hits:
            if hits[0] in renamed:
                raise SchemaError(f"record {r.name}: reader fields {renamed[hits[0]]!r} and "
                                  f"{rf.name!r} both have the alias {hits[0]!r}")
            renamed[hits[0]] = rf.name
            source[hits[0]] = i
    for i, rf in enumerate(r.fields):
        if rf.name in names and rf.name not in renamed:
            source[rf.name] = i
    return source


__all__ = ["Program", "reason", "is_nullable"]
