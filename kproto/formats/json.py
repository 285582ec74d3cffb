"""JSON values into Arrow with pyarrow's JSON reader (no parser of our own).

The values of a column are joined into one newline-delimited buffer in one
pass (``_wire.json_lines``: Confluent headers cut off, null values left out and
nulled afterwards) and read by ``pyarrow.json.read_json`` in one call, on its
threads. A raw newline (or carriage return) inside a value can only be
whitespace between tokens (JSON strings must escape them), so each one is
replaced by a space: the value means the same and stays on its line.

The Arrow type comes from an Arrow schema, from a JSON Schema
(:func:`arrow_type`: objects with properties, arrays, strings, integers,
numbers, booleans, nullable unions, local ``$ref``) or from pyarrow's
inference. A value that does not parse, is not one object, or does not fit
the type is found by bisection (only when the reader fails) and reported by
row, or nulled with ``errors="null"``.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote, urldefrag, urljoin

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson

from ..errors import EncodeError, FormatError, SchemaError
from ._json_convert import Found, convert, integral_text, reading
from ._wire import assemble, buffers, json_lines

__all__ = ["arrow_type", "bundle", "decode", "encode", "json_schema"]

def arrow_type(schema: str | Mapping[str, Any]) -> pa.DataType:
    """The Arrow type pyarrow's JSON reader reads values of a JSON Schema into."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise SchemaError(f"JSON Schema is not JSON: {exc}") from None
    if not isinstance(schema, Mapping):
        raise SchemaError(f"a JSON Schema is an object, not {type(schema).__name__}")
    return _convert(schema, schema, "$")


def bundle(schema: str | Mapping[str, Any],
           references: Mapping[str, str | Mapping[str, Any]]) -> dict[str, Any]:
    """One JSON Schema made of a registered schema and the schemas it references
    (Confluent's schema references), each referenced schema moved under ``$defs`` and
    every ``$ref`` made local, so that :func:`arrow_type` (local ``$ref`` only) reads it.
    ``references``: name -> schema, in any order, those the referenced ones reference too.

    A ``$ref`` is resolved as confluent-kafka's deserializer resolves it: against the
    base URI of the document it is in (its ``$id``, else the name it is referenced by,
    relative to the top schema's ``$id``), to a reference of that name or ``$id``
    (``"address.json"``, ``"https://acme.com/address.json#/$defs/Street"``); a name
    matching its last path segments also does. Fragments are JSON pointers or anchors."""
    docs = {name: _load(text, f"reference {name!r}") for name, text in references.items()}
    keys = {name: f"kproto-ref-{i}" for i, name in enumerate(docs)}
    out = _load(schema, "the schema")
    if not isinstance(out, Mapping):
        raise SchemaError("a JSON Schema with references must be an object")
    top = _id(out, "")
    bases: dict[str | None, str] = {None: top}
    known: dict[str, str | None] = {}              # a URI -> the document it names
    for name, doc in docs.items():
        bases[name] = _id(doc, urljoin(top, name))
        for uri in (name, urljoin(top, name), bases[name]):
            known.setdefault(urldefrag(uri)[0], name)
    if top:
        known[urldefrag(top)[0]] = None

    def target_of(ref: str, home: str | None) -> str | None:
        uri = urldefrag(urljoin(bases[home], ref))[0]
        if not uri or uri == urldefrag(bases[home])[0]:
            return home
        for candidate in (uri, urldefrag(ref)[0]):
            if candidate in known:
                return known[candidate]
        for name in docs:       # a URL naming a reference by its last segments
            if uri.endswith("/" + name.lstrip("./")):
                return name
        raise SchemaError(f"$ref {ref!r} names no schema reference (references: "
                          f"{', '.join(sorted(docs)) or 'none'})")

    def local(ref: str, home: str | None) -> str:
        name = target_of(ref, home)
        fragment = urldefrag(ref)[1]
        if fragment and not fragment.startswith("/"):       # an anchor: its pointer
            fragment = _anchor(out if name is None else docs[name], unquote(fragment), ref)
        return "#" + ("" if name is None else f"/$defs/{keys[name]}") + fragment

    def rewrite(node: Any, home: str | None) -> Any:
        if isinstance(node, list):
            return [rewrite(v, home) for v in node]
        if not isinstance(node, Mapping):
            return node
        return {k: local(v, home) if k == "$ref" and isinstance(v, str) else rewrite(v, home)
                for k, v in node.items()}

    result = rewrite(out, None)
    defs = dict(result.get("$defs") or {})
    defs.update({keys[name]: rewrite(doc, name) for name, doc in docs.items()})
    result["$defs"] = defs
    return result


def _id(doc: Any, base: str) -> str:
    """A document's base URI: its ``$id`` (``id`` before draft 6) against ``base``."""
    found = doc.get("$id", doc.get("id")) if isinstance(doc, Mapping) else None
    return urljoin(base, found) if isinstance(found, str) and not found.startswith("#") \
        else base


def _anchor(doc: Any, name: str, ref: str) -> str:
    """The JSON pointer (as a URI fragment) of the subschema of ``doc`` that an anchor
    names (``$anchor``, or draft 7's ``$id: "#name"``)."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(doc, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, Mapping):
            if node.get("$anchor") == name or node.get("$id") == "#" + name:
                return "".join("/" + quote(p.replace("~", "~0").replace("/", "~1"), safe="~$")
                               for p in path)
            stack += [(v, (*path, str(k))) for k, v in node.items()]
        elif isinstance(node, list):
            stack += [(v, (*path, str(i))) for i, v in enumerate(node)]
    raise SchemaError(f"$ref {ref!r}: no anchor {name!r}")


def _load(schema: str | Mapping[str, Any], what: str) -> Any:
    if not isinstance(schema, str):
        return schema
    try:
        return json.loads(schema)
    except ValueError as exc:
        raise SchemaError(f"JSON Schema ({what}) is not JSON: {exc}") from None


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    seen = 0
    while "$ref" in node:
        ref = str(node["$ref"])
        uri, fragment = urldefrag(urljoin(_id(root, ""), ref))
        if uri != urldefrag(_id(root, ""))[0]:      # (by the schema's own $id: local too)
            raise SchemaError(f"{path}: only local $ref are supported, not {ref!r}")
        target = _pointer(root, unquote(fragment))
        if not isinstance(target, Mapping):
            raise SchemaError(f"{path}: $ref {ref!r} points at nothing")
        node = target
        seen += 1
        if seen > 64:
            raise SchemaError(f"{path}: $ref {ref!r} is recursive (Arrow types are finite)")
    return node


def _pointer(root: Any, fragment: str) -> Any:
    """What a URI fragment (percent-decoded) names in ``root``: a JSON pointer (``/$defs/a~1b``:
    ``~1`` a slash, ``~0`` a tilde; numbers index arrays), the whole document (empty), or
    the subschema with that ``$anchor`` (``$id`` ``#name`` in draft 7)."""
    if fragment and not fragment.startswith("/"):          # an anchor: its pointer
        try:
            fragment = unquote(_anchor(root, fragment, fragment))
        except SchemaError:
            return None
    target = root
    for part in fragment.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping):
            target = target.get(part)
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target


#: The deepest nesting of a JSON Schema read into an Arrow type.
MAX_DEPTH = 64


def _convert(node: Mapping[str, Any], root: Mapping[str, Any], path: str,
             inside: tuple[int, ...] = ()) -> pa.DataType:
    """``node``'s Arrow type; ``inside``: the (resolved) schemas it is nested in, so that
    one containing itself through a ``$ref`` is a SchemaError, not a recursion."""
    node = _resolve(node, root, path)
    if id(node) in inside:
        raise SchemaError(f"{path}: the schema contains itself through a $ref (a recursive "
                          "type has no Arrow type)")
    if len(inside) >= MAX_DEPTH:
        raise SchemaError(f"{path}: nested deeper than {MAX_DEPTH}")
    inside = (*inside, id(node))
    kinds = node.get("type")
    if kinds is None:
        for key in ("oneOf", "anyOf"):
            if key in node:
                branches = [_resolve(b, root, path) for b in node[key]]
                real = [b for b in branches if b.get("type") != "null"]
                if len(real) == 1:
                    return _convert(real[0], root, path, inside)
                types = {_convert(b, root, path, inside) for b in real}
                if len(types) == 1:
                    return types.pop()
                raise SchemaError(f"{path}: {key} of different types cannot be one Arrow column")
        if "enum" in node or "const" in node:
            values = node.get("enum", [node.get("const")])
            return _convert({"type": _json_kind(values)}, root, path, inside)
        if "properties" in node:
            kinds = "object"
        else:
            raise SchemaError(f"{path}: no type (any JSON value) cannot be an Arrow column")
    if isinstance(kinds, list):
        named: list[Any] = [k for k in kinds if k != "null"]
        if len(named) != 1:
            if set(named) == {"integer", "number"}:
                named = ["number"]
            else:
                raise SchemaError(f"{path}: type {kinds} cannot be one Arrow column")
        kinds = named[0]
    if kinds == "object":
        props = node.get("properties")
        if not props:
            raise SchemaError(f"{path}: an object without properties (a map) is not read by "
                              "pyarrow's JSON reader")
        return pa.struct([pa.field(name, _convert(sub, root, f"{path}.{name}", inside))
                          for name, sub in props.items()])
    if kinds == "array":
        items = node.get("items")
        if not isinstance(items, Mapping):
            raise SchemaError(f"{path}: an array needs one 'items' schema")
        return pa.list_(_convert(items, root, f"{path}[]", inside))
    if kinds == "string" and node.get("format") == "date-time":
        # RFC 3339 text, which pyarrow's reader parses into any unit (offsets applied, UTC):
        # microseconds as Spark's timestamps and Avro's timestamp-micros (a fraction past
        # them does not parse: a bad row). "date" stays a string: the reader reads a
        # date32 only from a number of days, never from text.
        return pa.timestamp("us", tz="UTC")
    simple = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(),
              "boolean": pa.bool_(), "null": pa.null()}
    if kinds in simple:
        return simple[kinds]
    raise SchemaError(f"{path}: unknown JSON Schema type {kinds!r}")


def _json_kind(values: list[Any]) -> str:
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {str}:
        return "string"
    if kinds <= {bool}:
        return "boolean"
    if kinds <= {int}:
        return "integer"
    if kinds <= {int, float}:
        return "number"
    raise SchemaError(f"enum values {values!r} are of several JSON types")


def json_schema(type: pa.DataType, *, title: str | None = None) -> dict[str, Any]:
    """A JSON Schema (draft-07) for values of an Arrow type, as :func:`encode` writes them."""
    out = _schema_of(type)
    out["$schema"] = "http://json-schema.org/draft-07/schema#"
    if title:
        out["title"] = title
    return out


def _schema_of(t: pa.DataType) -> dict[str, Any]:
    if pa.types.is_struct(t):
        return {"type": "object", "properties": {
            f.name: _nullable(_schema_of(f.type), f.nullable) for f in t},
            "required": [f.name for f in t if not f.nullable]}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return {"type": "array", "items": _nullable(_schema_of(t.value_type), True)}
    if pa.types.is_map(t):
        return {"type": "object", "additionalProperties": _schema_of(t.item_type)}
    if pa.types.is_boolean(t):
        return {"type": "boolean"}
    if pa.types.is_integer(t):
        return {"type": "integer"}
    if pa.types.is_floating(t):
        return {"type": "number"}
    if pa.types.is_dictionary(t):
        return _schema_of(t.value_type)
    if pa.types.is_timestamp(t) and t.tz is not None:
        return {"type": "string", "format": "date-time"}     # RFC 3339: an offset is a must
    if pa.types.is_date(t):
        return {"type": "string", "format": "date"}
    return {"type": "string"}        # strings, binary (base64), local timestamps, decimals


def _nullable(schema: dict[str, Any], nullable: bool) -> dict[str, Any]:
    if nullable and isinstance(schema.get("type"), str):
        return {**schema, "type": [schema["type"], "null"]}
    return schema


# --------------------------------------------------------------------------- decode


#: Why a value is left out before reading: every value kept then reads as at least one
#: row and never runs into the next line (a line ending in ``}`` inside an open object or
#: array is followed by a ``{``, an error there), so when the reader returns as many rows
#: as there are values, each value is one row, its own.
_NOT_OBJECT = "not a JSON object (it must start with '{' and end with '}')"


def _joined(values: pa.Array, rows: np.ndarray, skip: int) -> pa.Buffer:
    """The values of ``rows`` (a bool mask of values known to be objects' text; the
    other rows are left out) as one newline-delimited buffer, ``skip`` bytes cut from
    the start of each."""
    return json_lines(values, rows, skip)[0]


def _read(buffer: pa.Buffer, type: pa.DataType | None) -> pa.Table:
    options = pajson.ParseOptions(
        explicit_schema=pa.schema(list(type)) if type is not None else None,
        unexpected_field_behavior="ignore" if type is not None else "infer")
    # a few blocks a thread: 1 MiB blocks (the default) cost a combine of many chunks
    block = max(1 << 20, min(16 << 20, buffer.size // (2 * pa.cpu_count()) + 1))
    return pajson.read_json(pa.BufferReader(buffer), parse_options=options,
                            read_options=pajson.ReadOptions(block_size=block))


def _fits(values: pa.Array, rows: np.ndarray, skip: int, type: pa.DataType | None
          ) -> str | None:
    """None when the values of ``rows`` read as one object each; else what went wrong."""
    try:
        table = _read(_joined(values, rows, skip), type)
    except pa.ArrowInvalid as exc:
        return str(exc)
    if table.num_rows != int(rows.sum()):
        return "not one JSON object (several values in one)"
    return None


def _bad_rows(values: pa.Array, candidates: np.ndarray, skip: int, type: pa.DataType | None,
              first_only: bool) -> dict[int, str]:
    """The rows among ``candidates`` that do not read, by bisection (left half
    first, so the first one found is the first one)."""
    found: dict[int, str] = {}
    stack = [candidates]
    while stack:
        part = stack.pop()
        if len(part) == 0:
            continue
        if len(part) == 1:                  # alone: no neighbour to run into
            problem = _fits(values.slice(int(part[0]), 1), np.ones(1, bool), skip, type)
        else:
            mask = np.zeros(len(values), bool)
            mask[part] = True
            problem = _fits(values, mask, skip, type)
        if problem is None:
            continue
        if len(part) == 1:
            found[int(part[0])] = re.sub(r" in row \d+$", "", problem)
            if first_only:
                return found
            continue
        half = len(part) // 2
        stack += [part[half:], part[:half]]
    return found


def decode(values: pa.Array, type: pa.DataType | None = None, *, skip: int = 0,
           skip_rows: Mapping[int, str] | None = None, errors: str = "raise"
           ) -> tuple[pa.Array, np.ndarray]:
    """JSON objects (one per value) to a struct array of ``type`` (inferred when None).

    ``skip``: bytes cut from every value (the Confluent header); ``skip_rows``:
    rows already known bad (row -> reason). Returns (array, bad rows), bad rows
    null; ``errors="raise"`` raises the first bad row as a FormatError instead.
    """
    if type is not None and not pa.types.is_struct(type):
        raise SchemaError(f"JSON values decode into a struct (an object's fields), not {type}")
    _, _, valid = buffers(values)
    bad = dict(skip_rows or {})
    rows = valid.copy()
    rows[list(bad)] = False
    buffer, others = json_lines(values, rows, skip)
    bad.update(dict.fromkeys(others.tolist(), _NOT_OBJECT))
    rows[others] = False
    if not _utf8(buffer):           # the reader does not check: its strings would be invalid
        found = _not_utf8(values, rows, skip)
        bad.update(found)
        rows[list(found)] = False
        buffer = _joined(values, rows, skip)
    pieces, found, type = _decode_rows(values, rows, skip, type, buffer, errors == "raise")
    bad.update(found)
    if errors == "raise" and bad:
        row = min(bad)
        raise FormatError(row=row, reason=bad[row], format="json")
    out = type if type is not None else pa.struct([])
    pieces = [(r, a if a.type == out else a.cast(out)) for r, a in pieces if len(r)]
    if not pieces:                          # nothing to read (pyarrow refuses empty input)
        array = pa.nulls(len(values), out) if len(values) else pa.array([], out)
        return array, np.array(sorted(bad), np.int64)
    return assemble(len(values), pieces, out), np.array(sorted(bad), np.int64)


Pieces = list[tuple[np.ndarray, pa.Array]]


def _decode_rows(values: pa.Array, rows: np.ndarray, skip: int, type: pa.DataType | None,
                 buffer: pa.Buffer, first_only: bool
                 ) -> tuple[Pieces, dict[int, str], pa.DataType | None]:
    """The values of ``rows`` (``buffer``: their lines) read: (rows, array) pieces, the
    bad rows, the type (``type``, else the one inferred). See _json_convert: a type
    is read as ``reading(type)`` and converted; if a value does not read, integers
    are read as float64 (a value may write one as ``2.0``) while the bad rows are
    found."""
    if not rows.any():
        return [], {}, type
    if type is None:
        array, read, bad, merged = _read_rows(values, rows, skip, None, buffer, first_only)
        if array is None:
            return [], bad, merged
        pieces, more = _settle(values, skip, array, np.flatnonzero(read), array.type,
                               array.type)      # (an integer past a double's range: inf)
        return pieces, {**bad, **more}, array.type
    read_type = reading(type)
    table = _attempt(buffer, read_type, rows)
    if table is not None:                   # the common case: one read
        array, read, bad = _struct_of(table), rows, {}
    else:
        relaxed = reading(type, keep=())
        array, read, bad, _ = _read_rows(values, rows, skip, relaxed, buffer if relaxed !=
                                         read_type else None, first_only)
        read_type = relaxed
    if array is None:
        return [], bad, type
    pieces, more = _settle(values, skip, array, np.flatnonzero(read), type, read_type)
    return pieces, {**bad, **more}, type


def _settle(values: pa.Array, skip: int, array: pa.Array, rows: np.ndarray,
            type: pa.DataType, read_type: pa.DataType) -> tuple[Pieces, dict[int, str]]:
    """``array`` (the values of ``rows`` read as ``read_type``) converted to ``type``:
    its good rows, and its bad ones. Rows whose integers a double may not hold
    exactly are read again, those integers exact (``keep``); rows that do not read so
    (a big integer written with an exponent...) are read once more with their numbers
    rewritten as integers where their doubles are (``integral_text``)."""
    found = Found()
    array = convert(array, type, rows, found)
    drop = found.bad.keys() | found.ambiguous
    keep = ~np.isin(rows, list(drop)) if drop else None
    pieces: Pieces = [(rows, array) if keep is None else (rows[keep], array.filter(keep))]
    bad = dict(found.bad)
    again = np.zeros(len(values), bool)
    again[list(found.ambiguous - bad.keys())] = True
    if not again.any():
        return pieces, bad
    exact = reading(type, keep=found.paths)
    array, read, failed, _ = _read_rows(values, again, skip, exact,
                                        _joined(values, again, skip), False)
    if array is not None:       # (their other integers were exact as doubles)
        more, also = _settle(values, skip, array, np.flatnonzero(read), type, exact)
        pieces += more
        bad.update(also)
    if failed:              # read exactly as their rewritten text (no double is ambiguous)
        order = np.array(sorted(failed), np.int64)
        text = pa.array([integral_text(values[row].as_py()[skip:]) for row in order.tolist()],
                        pa.binary())
        every = np.ones(len(order), bool)
        array, read, what, _ = _read_rows(text, every, 0, reading(type),
                                          json_lines(text, every, 0)[0], False)
        bad.update({int(order[r]): why for r, why in what.items()})
        if array is not None:
            more, also = _settle(text, 0, array, np.flatnonzero(read), type, reading(type))
            pieces += [(order[r], a) for r, a in more]
            bad.update({int(order[r]): why for r, why in also.items()})
    return pieces, bad


def _attempt(buffer: pa.Buffer, type: pa.DataType | None, rows: np.ndarray
             ) -> pa.Table | None:
    """The table of one read of ``buffer``, or None when it fails or its rows are not
    the values of ``rows`` one for one."""
    try:
        table = _read(buffer, type)
    except pa.ArrowInvalid:
        return None
    return table if table.num_rows == int(rows.sum()) else None


def _struct_of(table: pa.Table) -> pa.Array:
    struct = table.to_struct_array()
    return struct.chunk(0) if struct.num_chunks == 1 else struct.combine_chunks()


def _read_rows(values: pa.Array, rows: np.ndarray, skip: int, type: pa.DataType | None,
               buffer: pa.Buffer | None, first_only: bool
               ) -> tuple[pa.Array | None, np.ndarray, dict[int, str], pa.DataType | None]:
    """The values of ``rows`` read as ``type`` (inferred when None; ``buffer``: their
    lines, None when known not to read): (array of the rows read, their mask, the bad
    rows, the type read). Bad rows are found by bisection; ``first_only``: only the
    first, and the rows before it read."""
    rows = rows.copy()
    bad: dict[int, str] = {}
    table = None if buffer is None else _attempt(buffer, type, rows)
    while table is None and rows.any():     # some values do not read: which ones
        found, type = _find_bad(values, rows, skip, type, first_only)
        if not found:       # pragma: no cover - every failed read has a row to blame
            raise SchemaError("JSON values that do not read together, none alone")
        bad.update(found)
        rows[list(found)] = False
        if first_only:
            rows[min(found):] = False
        if rows.any():
            table = _attempt(_joined(values, rows, skip), type, rows)
    return (None if table is None else _struct_of(table)), rows, bad, type


def _utf8(buffer: pa.Buffer) -> bool:
    """Whether ``buffer`` is valid UTF-8 (Arrow's validator, a few percent of a read)."""
    offsets = pa.py_buffer(np.array([0, buffer.size], np.int64).tobytes())
    try:
        pa.LargeStringArray.from_buffers(1, offsets, buffer).validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _not_utf8(values: pa.Array, rows: np.ndarray, skip: int) -> dict[int, str]:
    """The rows among ``rows`` whose value is not UTF-8, as JSON text must be."""
    found = {}
    for row in np.flatnonzero(rows).tolist():
        try:
            values[row].as_py()[skip:].decode()
        except UnicodeDecodeError as exc:
            found[row] = f"not UTF-8 (byte {exc.start + skip}: {exc.reason})"
    return found


def _find_bad(values: pa.Array, rows: np.ndarray, skip: int, type: pa.DataType | None,
              first_only: bool) -> tuple[dict[int, str], pa.DataType | None]:
    """The rows that do not read (``rows``: a mask of candidates) and the type to read
    the others with. Values that do not read alone are found by bisection; without a
    type, values that each read may still not read together (a number in one, a string
    in the next: pyarrow infers one type from all): then those whose types conflict with
    the values before them are bad too, and the others are read with the types merged."""
    found = _bad_rows(values, np.flatnonzero(rows), skip, type, first_only)
    if type is not None:
        return found, type
    rest = rows.copy()
    rest[list(found)] = False
    if found and first_only:
        rest[min(found):] = False           # a conflict before the first bad row comes first
    if not rest.any() or _fits(values, rest, skip, None) is None:
        return found, None
    conflicts, merged = _conflicts(values, np.flatnonzero(rest), skip, first_only)
    if first_only and conflicts:
        return conflicts, merged
    return {**found, **conflicts}, merged


def _conflicts(values: pa.Array, candidates: np.ndarray, skip: int, first_only: bool
               ) -> tuple[dict[int, str], pa.DataType | None]:
    """Without a type: each value's inferred types merged in row order (widened as pyarrow
    widens them: integers to floats, nulls to anything); a value whose types conflict with
    those merged so far is bad. Reads each value alone: slow, and only run when the values
    disagree (a schema avoids it)."""
    found: dict[int, str] = {}
    merged: pa.Schema | None = None
    one = np.ones(1, bool)
    for row in candidates.tolist():
        try:
            schema = _read(_joined(values.slice(row, 1), one, skip), None).schema
            merged = schema if merged is None else pa.unify_schemas(
                [merged, schema], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            found[row] = ("its types conflict with those of the values before it (no schema "
                          f"was given): {exc}")
            if first_only:
                break
    return found, None if merged is None else pa.struct(list(merged))


# --------------------------------------------------------------------------- encode


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and isinstance(value[0], tuple) and len(value[0]) == 2:
            return {str(k): _plain(v) for k, v in value}       # an Arrow map
        return [_plain(v) for v in value]
    return value


def encode(array: pa.Array, *, prefix: bytes = b"") -> pa.BinaryArray:
    """One compact UTF-8 JSON document per row (null rows stay null), each after
    ``prefix``. Bytes are written as base64, times as ISO 8601, decimals as strings."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                             default=_plain).encode
    out = [None if row is None else prefix + dumps(_plain(row)).encode()
           for row in _rows(array)]
    return pa.array(out, pa.binary())


def _rows(array: pa.Array) -> list[Any]:
    """``array`` as Python values; a value Python has no type for (a timestamp before
    year 1 or past 9999 in its zone: no ISO 8601 text either) an EncodeError naming it."""
    try:
        return array.to_pylist()
    except (OverflowError, ValueError):
        pass
    for row in range(len(array)):
        try:
            array[row].as_py()
        except (OverflowError, ValueError) as exc:
            raise EncodeError(f"row {row}: a value with no JSON text ({exc}: a time outside "
                              "the years 1-9999 has no ISO 8601 form)") from None
    return array.to_pylist()        # pragma: no cover - a failure that is no row's
