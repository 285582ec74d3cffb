"""Avro schemas as data: parsing (named types, namespaces, aliases, logical types), the
Parsing Canonical Form and its CRC-64-AVRO fingerprint, default values as Avro bytes, and
the Arrow type of every schema.

Follows the Avro 1.11 specification ("Schema Declaration", "Parsing Canonical Form",
"Logical Types"): a logical type on the wrong base type, or with invalid parameters, is
ignored (the value reads as its base type), as the specification asks.
"""

from __future__ import annotations

import json
import math
import re
import struct
from typing import Any

import pyarrow as pa

from kproto.errors import SchemaError

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
NAMED = ("record", "enum", "fixed")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Deepest nesting of types a schema may have, named types counted where they are used: far
#: beyond real schemas, and a bound that keeps every walk of a schema (parsing, the
#: canonical form, the Arrow type, the decode and encode programs) well inside Python's
#: recursion limit.
MAX_DEPTH = 100
# Logical types and the base types they annotate (anything else is ignored).
_LOGICAL = {
    "date": ("int",), "time-millis": ("int",), "time-micros": ("long",),
    "timestamp-millis": ("long",), "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",), "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",), "local-timestamp-nanos": ("long",),
    "uuid": ("string", "fixed"), "decimal": ("bytes", "fixed"), "duration": ("fixed",),
}
NO_DEFAULT = object()


class Node:
    """One Avro type. ``type`` is a primitive name or record/enum/fixed/array/map/union;
    named types are shared by reference (a recursive schema is a cyclic graph)."""

    __slots__ = ("type", "logical", "name", "aliases", "fields", "symbols", "enum_default",
                 "items", "values", "branches", "size", "precision", "scale")

    def __init__(self, type: str) -> None:
        self.type = type
        self.logical: str | None = None
        self.name = ""                       # full name of a named type
        self.aliases: tuple[str, ...] = ()   # full names
        self.fields: list[Field] = []
        self.symbols: list[str] = []
        self.enum_default: str | None = None
        self.items: Node | None = None
        self.values: Node | None = None
        self.branches: list[Node] = []
        self.size = 0
        self.precision = 0
        self.scale = 0

    @property
    def short_name(self) -> str:
        return self.name.rpartition(".")[2]

    def __repr__(self) -> str:
        return f"<avro {self.name or self.type}>"


class Field:
    """A record field: name, type, aliases and default (``NO_DEFAULT`` when it has none)."""

    __slots__ = ("name", "type", "default", "aliases")

    def __init__(self, name: str, type: Node, default: Any, aliases: tuple[str, ...]) -> None:
        self.name = name
        self.type = type
        self.default = default
        self.aliases = aliases


# --------------------------------------------------------------------------- parsing


def _fullname(name: Any, namespace: str | None, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise SchemaError(f"{what} needs a non-empty string name, not {name!r}")
    full = name if "." in name or not namespace else f"{namespace}.{name}"
    for part in full.split("."):
        if not _NAME.fullmatch(part):
            raise SchemaError(f"invalid Avro name {full!r} (each part: [A-Za-z_][A-Za-z0-9_]*)")
    if full in PRIMITIVES:
        raise SchemaError(f"{full!r} is a primitive type and cannot name a {what}")
    return full


class Parser:
    """Turns a schema's JSON (str or already loaded) into Nodes; ``names`` are the named
    types it defined, by full name."""

    def __init__(self) -> None:
        self.names: dict[str, Node] = {}
        self.records: list[Node] = []     # their defaults are checked by ``finish``

    def parse(self, obj: Any, namespace: str | None = None, depth: int = 0) -> Node:
        if depth > MAX_DEPTH:
            raise SchemaError(_too_deep("the schema's JSON"))
        if isinstance(obj, str):
            if obj in PRIMITIVES:
                return Node(obj)
            for full in ((f"{namespace}.{obj}" if namespace and "." not in obj else obj), obj):
                if full in self.names:
                    return self.names[full]
            raise SchemaError(f"unknown Avro type {obj!r}")
        if isinstance(obj, list):
            return self._union(obj, namespace, depth)
        if not isinstance(obj, dict):
            raise SchemaError(f"an Avro schema is a string, object or array, not {obj!r}")
        kind = obj.get("type")
        if kind in PRIMITIVES:
            node = Node(kind)
        elif kind in ("record", "error"):
            node = self._record(obj, namespace, depth)
        elif kind == "enum":
            node = self._named(obj, namespace, "enum")
            symbols = obj.get("symbols")
            if not isinstance(symbols, list) or len(set(map(str, symbols))) != len(symbols):
                raise SchemaError(f"enum {node.name}: symbols must be a list of unique names")
            for s in symbols:
                if not isinstance(s, str) or not _NAME.fullmatch(s):
                    raise SchemaError(f"enum {node.name}: invalid symbol {s!r}")
            node.symbols = list(symbols)
            default = obj.get("default")
            if default is not None and default not in node.symbols:
                raise SchemaError(f"enum {node.name}: default {default!r} is not a symbol")
            node.enum_default = default
        elif kind == "fixed":
            node = self._named(obj, namespace, "fixed")
            size = obj.get("size")
            if type(size) is not int or size < 0:
                raise SchemaError(f"fixed {node.name}: size must be an int >= 0, not {size!r}")
            node.size = size
        elif kind == "array":
            if "items" not in obj:
                raise SchemaError("array schema without 'items'")
            node = Node("array")
            node.items = self.parse(obj["items"], namespace, depth + 1)
        elif kind == "map":
            if "values" not in obj:
                raise SchemaError("map schema without 'values'")
            node = Node("map")
            node.values = self.parse(obj["values"], namespace, depth + 1)
        elif isinstance(kind, (str, list, dict)):
            return self.parse(kind, namespace, depth + 1)   # {"type": "MyRecord"} etc.
        else:
            raise SchemaError(f"schema object without a valid 'type': {obj!r}")
        _logical(node, obj)
        return node

    def _named(self, obj: dict, namespace: str | None, what: str) -> Node:
        ns = obj.get("namespace", namespace)
        if ns is not None and not isinstance(ns, str):
            raise SchemaError(f"{what} namespace must be a string, not {ns!r}")
        node = Node(what)
        node.name = _fullname(obj.get("name"), ns or None, what)
        if node.name in self.names:
            raise SchemaError(f"Avro type {node.name!r} is defined twice")
        space = node.name.rpartition(".")[0] or None
        node.aliases = tuple(_fullname(a, space, "alias") for a in obj.get("aliases", ()))
        self.names[node.name] = node
        return node

    def _record(self, obj: dict, namespace: str | None, depth: int) -> Node:
        node = self._named(obj, namespace, "record")
        space = node.name.rpartition(".")[0] or None
        fields = obj.get("fields")
        if not isinstance(fields, list):
            raise SchemaError(f"record {node.name}: 'fields' must be a list")
        seen: set[str] = set()
        for f in fields:
            if not isinstance(f, dict) or "type" not in f:
                raise SchemaError(f"record {node.name}: a field needs a name and a type: {f!r}")
            name = f.get("name")
            if not isinstance(name, str) or not _NAME.fullmatch(name) or name in seen:
                raise SchemaError(f"record {node.name}: invalid or repeated field name {name!r}")
            seen.add(name)
            ftype = self.parse(f["type"], space, depth + 1)
            default = f["default"] if "default" in f else NO_DEFAULT
            aliases = f.get("aliases", ())
            if not isinstance(aliases, list | tuple) or not all(
                    isinstance(a, str) for a in aliases):
                raise SchemaError(f"record {node.name}: field {name} aliases must be strings")
            node.fields.append(Field(name, ftype, default, tuple(aliases)))
        self.records.append(node)
        return node

    def finish(self, root: Node) -> Node:
        """``root`` once every named type is known: its depth checked (named types counted
        where they are used), then the fields' defaults."""
        check_depth(root)
        for node in self.records:
            for f in node.fields:
                if f.default is not NO_DEFAULT:
                    try:
                        encode_default(f.type, f.default)
                    except SchemaError as exc:
                        raise SchemaError(f"record {node.name}: field {f.name}: {exc}") \
                            from None
        return root

    def _union(self, branches: list, namespace: str | None, depth: int) -> Node:
        node = Node("union")
        if not branches:
            raise SchemaError("a union needs at least one branch")
        seen: set[str] = set()
        for b in branches:
            branch = self.parse(b, namespace, depth + 1)
            if branch.type == "union":
                raise SchemaError("a union may not directly contain a union")
            key = branch.name or branch.type
            if key in seen:
                raise SchemaError(f"union has two branches of type {key!r}")
            seen.add(key)
            node.branches.append(branch)
        return node


def _logical(node: Node, obj: dict) -> None:
    name = obj.get("logicalType")
    if not isinstance(name, str) or node.type not in _LOGICAL.get(name, ()):
        return
    if name == "decimal":
        precision, scale = obj.get("precision"), obj.get("scale", 0)
        if type(precision) is not int or type(scale) is not int or not (
                0 < precision <= 76 and 0 <= scale <= precision):
            return
        if node.type == "fixed" and precision > math.floor(math.log10(2) * (8 * node.size - 1)):
            return
        node.precision, node.scale = precision, scale
    elif name == "uuid" and node.type == "fixed" and node.size != 16:
        return
    elif name == "duration" and node.size != 12:
        return
    node.logical = name


def _too_deep(what: str) -> str:
    return (f"{what} nests types deeper than {MAX_DEPTH} levels (the most an Avro schema may "
            "have here)")


def _load(text: str | dict | list) -> Any:
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    if not stripped.startswith(("{", "[", '"')):
        return stripped   # a bare primitive or type name: string, null
    try:
        return json.loads(stripped)
    except ValueError as exc:
        raise SchemaError(f"schema is not valid JSON: {exc}") from None
    except RecursionError:
        raise SchemaError(_too_deep("the schema's JSON")) from None


def dumps(value: Any) -> str:
    """Compact JSON text of a loaded schema (SchemaError when it nests too deeply)."""
    try:
        return json.dumps(value, separators=(",", ":"))
    except RecursionError:
        raise SchemaError(_too_deep("the schema's JSON")) from None


def check_depth(root: Node) -> None:
    """SchemaError when a path through the types of ``root`` is more than MAX_DEPTH types
    long, named types counted where they are used (one defined near the top can be used
    deep down, again and again); a recursive type's path ends where it meets itself."""
    # per type: the longest path below it, and the named types (on the path above) where
    # that walk stopped; reused wherever those are on the path above again
    known: dict[int, tuple[int, frozenset[str]]] = {}

    def height(node: Node, level: int, stack: frozenset[str]) -> tuple[int, frozenset[str]]:
        seen = known.get(id(node))
        if seen is not None and seen[1] <= stack:
            if level + seen[0] > MAX_DEPTH:
                raise SchemaError(_too_deep(f"{root.name or root.type}: the schema"))
            return seen
        if level > MAX_DEPTH:
            raise SchemaError(_too_deep(f"{root.name or root.type}: the schema"))
        if node.name in stack:
            return 0, frozenset((node.name,))
        inside = stack | {node.name} if node.name else stack
        children = ([f.type for f in node.fields] + node.branches
                    + [c for c in (node.items, node.values) if c is not None])
        most, cuts = 0, frozenset[str]()
        for child in children:
            h, cut = height(child, level + 1, inside)
            most, cuts = max(most, h + 1), cuts | cut
        known[id(node)] = most, cuts - {node.name}
        return known[id(node)]

    height(root, 0, frozenset())


def parse_json(text: str | dict | list, references: tuple[str, ...] = (),
               ) -> tuple[Any, Node, dict[str, Node]]:
    """(the schema's JSON value, its root Node, its named types). ``references``: schemas
    whose named types the schema uses (Confluent's schema references), parsed first."""
    parser = Parser()
    for ref in references:
        parser.finish(parser.parse(_load(ref)))
    obj = _load(text)
    return obj, parser.finish(parser.parse(obj)), parser.names


# --------------------------------------------------------------------------- canonical form


def canonical_form(node: Node) -> str:
    """The Parsing Canonical Form: full names, only the attributes that matter for reading
    (type, name, fields, symbols, items, values, size), no whitespace."""
    seen: set[str] = set()

    def form(n: Node) -> str:
        if n.type in PRIMITIVES:
            return json.dumps(n.type)
        if n.type == "union":
            return "[" + ",".join(form(b) for b in n.branches) + "]"
        if n.type == "array":
            assert n.items is not None
            return '{"type":"array","items":' + form(n.items) + "}"
        if n.type == "map":
            assert n.values is not None
            return '{"type":"map","values":' + form(n.values) + "}"
        if n.name in seen:
            return json.dumps(n.name)
        seen.add(n.name)
        head = '{"name":' + json.dumps(n.name) + ',"type":' + json.dumps(n.type)
        if n.type == "record":
            fields = ",".join('{"name":' + json.dumps(f.name) + ',"type":' + form(f.type) + "}"
                              for f in n.fields)
            return head + ',"fields":[' + fields + "]}"
        if n.type == "enum":
            return head + ',"symbols":' + json.dumps(n.symbols, separators=(",", ":")) + "}"
        return head + ',"size":' + str(n.size) + "}"

    return form(node)


_EMPTY = 0xC15D213AA4D7A795
_TABLE = []
for _i in range(256):
    _fp = _i
    for _ in range(8):
        _fp = (_fp >> 1) ^ (_EMPTY & -(_fp & 1))
    _TABLE.append(_fp)


def fingerprint64(data: bytes) -> int:
    """CRC-64-AVRO (the Rabin fingerprint of the Avro specification), unsigned."""
    fp = _EMPTY
    for byte in data:
        fp = (fp >> 8) ^ _TABLE[(fp ^ byte) & 0xFF]
    return fp


# --------------------------------------------------------------------------- defaults


def zigzag(n: int) -> bytes:
    """An Avro long (zigzag, then base-128 varint)."""
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_default(node: Node, value: Any, depth: int = 0) -> bytes:
    """A field's JSON default as the Avro bytes of ``node`` (bytes and fixed defaults are
    strings whose code points 0-255 are the bytes; a union's default is one of its branches,
    the first that fits). SchemaError when it does not fit."""
    if depth > MAX_DEPTH:      # a record whose defaults hold it again: no finite value
        raise SchemaError(_too_deep(f"default {value!r}"))
    t = node.type
    depth += 1
    if t == "union":
        for i, branch in enumerate(node.branches):
            try:
                return zigzag(i) + encode_default(branch, value, depth)
            except SchemaError:
                continue
        raise SchemaError(f"default {value!r} fits no branch of the union")
    bad = SchemaError(f"default {value!r} is not a valid {node.name or t}")
    if t == "null":
        if value is not None:
            raise bad
        return b""
    if t == "boolean":
        if type(value) is not bool:
            raise bad
        return b"\x01" if value else b"\x00"
    if t in ("int", "long"):
        limit = 2**31 if t == "int" else 2**63
        if type(value) is not int or not -limit <= value < limit:
            raise bad
        return zigzag(value)
    if t in ("float", "double"):
        if type(value) not in (int, float):
            raise bad
        return struct.pack("<f" if t == "float" else "<d", value)
    if t in ("bytes", "string", "fixed"):
        if not isinstance(value, str):
            raise bad
        if t == "string":
            data = value.encode()
        else:
            try:
                data = value.encode("latin-1")
            except UnicodeEncodeError:
                raise bad from None
        if t == "fixed":
            if len(data) != node.size:
                raise bad
            return data
        return zigzag(len(data)) + data
    if t == "enum":
        if value not in node.symbols:
            raise bad
        return zigzag(node.symbols.index(value))
    if t == "array":
        assert node.items is not None
        if not isinstance(value, list):
            raise bad
        items = b"".join(encode_default(node.items, v, depth) for v in value)
        return (zigzag(len(value)) + items + b"\x00") if value else b"\x00"
    if t == "map":
        assert node.values is not None
        if not isinstance(value, dict):
            raise bad
        body = b"".join(encode_default(Node("string"), k) + encode_default(node.values, v, depth)
                        for k, v in value.items())
        return (zigzag(len(value)) + body + b"\x00") if value else b"\x00"
    assert t == "record"
    if not isinstance(value, dict):
        raise bad
    out = []
    for f in node.fields:
        if f.name in value:
            out.append(encode_default(f.type, value[f.name], depth))
        elif f.default is not NO_DEFAULT:
            out.append(encode_default(f.type, f.default, depth))
        else:
            raise SchemaError(f"default for record {node.name} lacks field {f.name!r}")
    return b"".join(out)


# --------------------------------------------------------------------------- Arrow types


def nullable_branch(node: Node) -> Node | None:
    """T of a union [null, T] or [T, null]; None for any other type."""
    if node.type == "union" and len(node.branches) == 2:
        kinds = [b.type for b in node.branches]
        if kinds.count("null") == 1:
            return node.branches[1 - kinds.index("null")]
    return None


def branch_name(node: Node) -> str:
    """A union branch's name in a dense union: its type or its full name."""
    return node.name or node.type


_SIMPLE = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(),
    "string": pa.string(),
}
_LOGICAL_ARROW = {
    "date": pa.date32(), "time-millis": pa.time32("ms"), "time-micros": pa.time64("us"),
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "timestamp-nanos": pa.timestamp("ns", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"), "local-timestamp-micros": pa.timestamp("us"),
    "local-timestamp-nanos": pa.timestamp("ns"),
}


#: The most branches a general union may have: Arrow's dense union has int8 type codes 0-127.
MAX_UNION_BRANCHES = 128


def to_arrow(node: Node, stack: tuple[str, ...] = (), path: str = "") -> pa.DataType:
    """The Arrow type of values of ``node`` (see docs: record->struct, enum->dictionary...);
    ``path``: where ``node`` is (field names, ``[]`` for items, ``{}`` for map values)."""
    if node.logical in _LOGICAL_ARROW:
        return _LOGICAL_ARROW[node.logical]
    if node.logical == "decimal":
        make = pa.decimal128 if node.precision <= 38 else pa.decimal256
        return make(node.precision, node.scale)
    if node.logical == "uuid" and node.type == "string":
        return pa.string()
    t = node.type
    if t in _SIMPLE:
        return _SIMPLE[t]
    if node.name in stack:
        raise SchemaError(f"Avro type {node.name} is recursive: Arrow has no recursive types")
    if t == "fixed":
        return pa.binary(node.size)
    if t == "enum":
        return pa.dictionary(pa.int32(), pa.string())
    if t == "record":
        inner = (*stack, node.name)
        return pa.struct([pa.field(f.name, to_arrow(f.type, inner, _join(path, f.name)),
                                   nullable=is_nullable(f.type)) for f in node.fields])
    if t == "array":
        assert node.items is not None
        items = node.items
        return pa.list_(pa.field("item", to_arrow(items, stack, path + "[]"),
                                 nullable=is_nullable(items)))
    if t == "map":
        assert node.values is not None
        values = node.values
        return pa.map_(pa.string(), pa.field("value", to_arrow(values, stack, path + "{}"),
                                             nullable=is_nullable(values)))
    assert t == "union"
    inner_type = nullable_branch(node)
    if inner_type is not None:
        return to_arrow(inner_type, stack, path)
    if len(node.branches) == 1:
        return to_arrow(node.branches[0], stack, path)
    if len(node.branches) > MAX_UNION_BRANCHES:
        where = f"{path} (in record {stack[-1]})" if stack else path or "the schema's root"
        raise SchemaError(f"the union at {where} has {len(node.branches)} branches (null "
                          f"counted): an Arrow dense union holds at most {MAX_UNION_BRANCHES}; "
                          "read it with a reader schema of fewer branches")
    fields = [pa.field(branch_name(b), to_arrow(b, stack, path), nullable=is_nullable(b))
              for b in node.branches]
    return pa.dense_union(fields, list(range(len(fields))))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def is_nullable(node: Node) -> bool:
    """Whether values of ``node`` can be null in Arrow (null, or a union holding null)."""
    if node.type == "null":
        return True
    return node.type == "union" and any(b.type == "null" for b in node.branches)


# --------------------------------------------------------------------------- recursion


def unrolled(node: Node, depth: int) -> Any:
    """The JSON of a schema like ``node`` without recursion: a named record appears at most
    ``depth`` times on any path, its copies renamed (``Name_2``...) with the original name
    as an alias, and a field whose type would need one more copy is left out (a reader
    schema: those fields of the writer's data are skipped). None when nothing is left."""
    names: dict[str, int] = {}

    def walk(n: Node, seen: dict[str, int], nest: int = 0) -> Any:
        if nest > MAX_DEPTH:
            raise SchemaError(_too_deep(f"{node.name} unrolled to depth {depth}"))
        t = n.type
        nest += 1
        if t in PRIMITIVES:
            if n.logical is None:
                return t
            out: dict[str, Any] = {"type": t, "logicalType": n.logical}
            if n.logical == "decimal":
                out.update(precision=n.precision, scale=n.scale)
            return out
        if t == "array" or t == "map":
            inner = walk(n.items if t == "array" else n.values,  # type: ignore[arg-type]
                         seen, nest)
            return None if inner is None else {"type": t, "items" if t == "array"
                                               else "values": inner}
        if t == "union":
            branches = [walk(b, seen, nest) for b in n.branches]
            return None if any(b is None for b in branches) else branches
        level = seen.get(n.name, 0)
        if level >= depth:
            return None
        names[n.name] = names.get(n.name, 0) + 1
        copy = n.name if names[n.name] == 1 else f"{n.name}_{names[n.name]}"
        out = {"type": t, "name": copy}
        if copy != n.name:
            out["aliases"] = [n.name]
        if t == "enum":
            out["symbols"] = list(n.symbols)
            if n.enum_default is not None:
                out["default"] = n.enum_default
        elif t == "fixed":
            out["size"] = n.size
            if n.logical is not None:
                out["logicalType"] = n.logical
                if n.logical == "decimal":
                    out.update(precision=n.precision, scale=n.scale)
        else:
            inner_seen = {**seen, n.name: level + 1}
            fields = []
            for f in n.fields:
                ftype = walk(f.type, inner_seen, nest)
                if ftype is not None:
                    fields.append({"name": f.name, "type": ftype})
            out["fields"] = fields
        return out

    if depth < 1:
        raise SchemaError(f"depth must be at least 1, not {depth}")
    return walk(node, {})
