"""Avro values in bulk: a binary column of Avro datums -> one Arrow array, and back.

    from kproto.formats import avro

    schema = avro.parse_schema('{"type": "record", "name": "User", "fields": ['
                               '{"name": "name", "type": "string"},'
                               '{"name": "age", "type": ["null", "int"]}]}')
    users, bad = avro.decode(batch.column("value"), schema)   # struct<name, age>
    values = avro.encode(users, schema)                       # binary, a datum a row

The (writer, reader) pair is compiled once into a flat program (``_avro_program``) that
``kproto._avro`` runs over every value in C with the GIL released, writing Arrow buffers
directly (``KPROTO_PURE=1``: the pure twin ``kproto._pure.avro``); encoding is the
mirror, a program compiled from the schema and the array's columns. Schema resolution
follows the specification: fields matched by name (and the reader's aliases), reader
fields the writer lacks take their defaults, writer fields the reader lacks are skipped,
promotions int -> long -> float -> double and string <-> bytes, enums by symbol (the
reader's default for unknown ones), unions branch by branch; where it leaves a choice,
as Java does (docs/formats.md). Encoding converts each value exactly or raises an
EncodeError naming the field, the row and the value.

Arrow types: record -> struct, array -> list, map -> map<string, T>, enum ->
dictionary<int32, string>, fixed -> fixed_size_binary, [null, T] -> nullable T, other
unions -> dense union (children named by branch type), decimal -> decimal128
(decimal256 past precision 38), date -> date32, time-millis -> time32[ms], time-micros ->
time64[us], timestamp-* -> timestamp[unit, tz=UTC], local-timestamp-* -> timestamp[unit],
uuid -> string. Recursive schemas have no Arrow type (SchemaError): decode them with a
reader schema that leaves the recursion out, such as ``unroll(schema, depth)``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from kproto import _backend
from kproto.errors import FormatError, SchemaError

from . import _avro_encode, _avro_schema
from ._avro_program import Program
from ._avro_schema import Node, canonical_form, fingerprint64, parse_json, to_arrow

if _backend.IS_PURE:
    from kproto._pure import avro as _loop
else:
    try:
        from kproto import _avro as _loop  # type: ignore[no-redef]
    except ImportError as exc:  # pragma: no cover - only without a built extension
        warnings.warn(f"kproto's Avro extension is not available ({exc}); using the pure-Python"
                      " decoder, which is much slower", RuntimeWarning, stacklevel=2)
        from kproto._pure import avro as _loop

__all__ = ["AvroSchema", "arrow_type", "decode", "encode", "parse_schema", "unroll"]


class AvroSchema:
    """A parsed Avro schema (immutable; equal when their JSON is).

    ``json``: the schema's JSON text as given (what to register: the canonical form
    drops logical types, defaults and aliases); ``canonical_form``: the specification's
    Parsing Canonical Form; ``fingerprint``: its CRC-64-AVRO; ``name``: the full name of a
    named type, else the type; ``root``: the parsed type tree.
    """

    __slots__ = ("json", "references", "root", "names", "_canonical", "_arrow")

    def __init__(self, text: str, root: Node, names: dict[str, Node],
                 references: tuple[str, ...] = ()) -> None:
        self.json = text
        #: The referenced schemas' texts it was parsed with (Confluent schema references).
        self.references = references
        self.root = root
        self.names = names
        self._canonical: str | None = None
        self._arrow: pa.DataType | None = None

    @property
    def canonical_form(self) -> str:
        if self._canonical is None:
            self._canonical = canonical_form(self.root)
        return self._canonical

    @property
    def fingerprint(self) -> int:
        return fingerprint64(self.canonical_form.encode())

    @property
    def name(self) -> str:
        return self.root.name or self.root.type

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AvroSchema) and (other.json, other.references) == (
            self.json, self.references)

    def __hash__(self) -> int:
        return hash((self.json, self.references))

    def __str__(self) -> str:
        return self.json

    def __repr__(self) -> str:
        text = self.json if len(self.json) < 80 else self.json[:76] + "..."
        return f"AvroSchema({text})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (parse_schema, (self.json, self.references))


def parse_schema(schema: str | Mapping[str, Any] | list[Any] | AvroSchema,
                 references: Sequence[str | Mapping[str, Any]] = ()) -> AvroSchema:
    """Parse an Avro schema: JSON text, or its loaded value (dict, list for a union, or a
    type name). ``references``: the schemas whose named types it uses without defining
    them (Confluent's schema references), in dependency order. Raises
    :class:`~kproto.errors.SchemaError` when it is invalid. Parsed schemas are cached by
    their text::

        parse_schema('"string"').name            # 'string'
        parse_schema({"type": "array", "items": "long"})
        parse_schema('{"type": "array", "items": "a.Item"}', references=[item_schema_text])
    """
    refs = tuple(r if isinstance(r, str) else _avro_schema.dumps(r) for r in references)
    if isinstance(schema, AvroSchema):
        return schema if not refs or refs == schema.references else \
            _parse_text(schema.json, refs)
    if isinstance(schema, str):
        return _parse_text(schema, refs)
    if isinstance(schema, Mapping | list):
        return _parse_text(_avro_schema.dumps(schema), refs)
    raise SchemaError(f"an Avro schema is JSON text, a dict or a list, not "
                      f"{type(schema).__name__}")


@lru_cache(maxsize=512)
def _parse_text(text: str, references: tuple[str, ...] = ()) -> AvroSchema:
    _, root, names = parse_json(text, references)
    stripped = text.strip()
    if not stripped.startswith(("{", "[", '"')):
        text = json.dumps(stripped)   # a bare type name
    return AvroSchema(text, root, names, references)


def unroll(schema: AvroSchema, depth: int = 3) -> AvroSchema:
    """A reader schema for a recursive ``schema`` (which has no Arrow type): each record
    appears at most ``depth`` times on any path of the tree, and the fields that would go
    deeper are left out (their values are skipped when decoding), as spark-avro's
    ``recursiveFieldMaxDepth`` does::

        tree = avro.parse_schema(registry_text)          # {"name": "Node", ... "Node" ...}
        array, bad = avro.decode(values, tree, avro.unroll(tree, depth=4))
    """
    schema = parse_schema(schema)
    text = _avro_schema.unrolled(schema.root, depth)
    if text is None:
        raise SchemaError(f"nothing of {schema.name} is left at depth {depth}")
    return parse_schema(text)


def is_recursive(schema: AvroSchema) -> bool:
    """Whether a record of ``schema`` contains itself, so that it has no Arrow type (read
    it through :func:`unroll`)."""
    done: set[str] = set()

    def walk(node: Node, stack: frozenset[str]) -> bool:
        if node.type in ("array", "map"):
            inner = node.items if node.type == "array" else node.values
            return inner is not None and walk(inner, stack)
        if node.type == "union":
            return any(walk(b, stack) for b in node.branches)
        if node.type != "record" or node.name in done:
            return False            # (a record explored once would have shown its cycle)
        if node.name in stack:
            return True
        found = any(walk(f.type, stack | {node.name}) for f in node.fields)
        done.add(node.name)
        return found

    return walk(parse_schema(schema).root, frozenset())


def arrow_type(schema: AvroSchema) -> pa.DataType:
    """The Arrow type :func:`decode` gives values of ``schema`` (see the module)."""
    schema = parse_schema(schema)
    if schema._arrow is None:
        schema._arrow = to_arrow(schema.root)
    return schema._arrow


@lru_cache(maxsize=256)
def _program(writer: AvroSchema, reader: AvroSchema) -> Program:
    return Program(writer.root, reader.root)


def decode(values: Any, writer: AvroSchema, reader: AvroSchema | None = None, *,
           skip: int = 0, rows: np.ndarray | None = None,
           errors: str = "raise") -> tuple[pa.Array, np.ndarray]:
    """Decode a binary column of Avro datums written with ``writer`` into an array of
    ``arrow_type(reader or writer)``.

    ``values``: a binary, large_binary or binary_view array (a chunked array of one chunk
    is taken too). ``skip``: header bytes to skip at the start of every value (5 for
    Confluent's wire format). ``rows``: decode only these rows (int64 indexes, in that
    order). Each value must be exactly one datum. Null values decode to null.

    Returns ``(array, bad_rows)``: ``bad_rows`` are int64 indexes into ``values`` of the
    values that could not be decoded. ``errors="raise"``: the first bad value raises
    :class:`~kproto.errors.FormatError` (``row``, ``reason``); ``errors="null"``: bad
    values are null in the array.
    """
    if errors not in ("raise", "null"):
        raise ValueError(f"errors must be 'raise' or 'null', not {errors!r}")
    writer = parse_schema(writer)
    reader = writer if reader is None else parse_schema(reader)
    program = _program(writer, reader)
    if skip < 0:
        raise ValueError(f"skip must be >= 0, not {skip}")
    buffers, buf_index, starts, lengths = _locate(values, rows)
    outs, bad, error = _loop.run(
        program.node_table, program.table, program.slot_table, program.root,
        program.root_slot.index, program.default_bytes, buffers, buf_index, starts, lengths,
        int(skip), errors == "null")
    row_of = (lambda i: int(i)) if rows is None else (lambda i: int(rows[i]))
    if error is not None and errors == "raise":
        i, code, a, b, offset = error
        raise FormatError(row=row_of(i), reason=program.reason(code, a, b), format="avro",
                          offset=offset)
    bad = np.asarray(bad, np.int64)
    if rows is not None:
        bad = np.asarray(rows, np.int64)[bad]
    return program.assemble(outs), bad


def _locate(values: Any, rows: np.ndarray | None) -> tuple[list[Any], np.ndarray, np.ndarray,
                                                           np.ndarray]:
    """(buffers, buffer index, start, length) of each value to decode (length -1: null)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if not isinstance(values, pa.Array):
        values = pa.array(values, pa.binary())
    t = values.type
    n = len(values)
    bufs = values.buffers()
    if pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        views = np.frombuffer(bufs[1], np.int32).reshape(-1, 4)[values.offset:values.offset + n]
        data = [b if b is not None else b"" for b in bufs[2:]]
        lengths = views[:, 0].astype(np.int64)
        inline = lengths <= 12
        buf_index = np.where(inline, len(data), views[:, 2]).astype(np.int32)
        starts = np.where(inline, (np.arange(n, dtype=np.int64) + values.offset) * 16 + 4,
                          views[:, 3].astype(np.int64))
        buffers = [*data, bufs[1]]
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t) \
            or pa.types.is_large_string(t):
        wide = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
        offsets = np.frombuffer(bufs[1], np.int64 if wide else np.int32)[
            values.offset:values.offset + n + 1] if n else np.zeros(1, np.int64)
        starts = offsets[:-1].astype(np.int64)
        lengths = np.diff(offsets).astype(np.int64)
        buffers = [bufs[2] if bufs[2] is not None else b""]
        buf_index = np.zeros(n, np.int32)
    else:
        raise TypeError(f"Avro values must be a binary column, not {t}")
    if values.null_count:
        lengths = np.where(values.is_null().to_numpy(zero_copy_only=False), -1, lengths)
    if rows is not None:
        rows = np.asarray(rows, np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= n):
            raise IndexError(f"rows must be indexes into the {n} values")
        buf_index, starts, lengths = buf_index[rows], starts[rows], lengths[rows]
    return (buffers, np.ascontiguousarray(buf_index, np.int32),
            np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(lengths, np.int64))


def encode(array: Any, schema: AvroSchema, *, prefix: bytes = b"") -> pa.BinaryArray:
    """One Avro datum of ``schema`` per row of ``array`` (an array of ``arrow_type(schema)``
    or one whose values fit it: a struct array with the record's fields by name, a
    RecordBatch...), each after ``prefix`` (the Confluent header). Null rows stay null
    unless the schema holds null. Raises :class:`~kproto.errors.EncodeError` for a value
    that does not fit the schema, naming the row."""
    schema = parse_schema(schema)
    return _avro_encode.encode(array, schema.root, bytes(prefix), _loop)
