"""Typed values: Avro, JSON and Protobuf payloads decoded into Arrow columns, and back.

Kafka hands values over as bytes; :func:`decode` turns a whole binary column
(the ``value`` or ``key`` of a ``poll_batch``, a ``read_range``...) into a
typed Arrow array in one call, and :func:`encode` does the reverse::

    from kproto import formats

    users = formats.decode(batch.column("value"), "avro", registry="http://registry:8081")
    users.field("name")                      # a struct array: one child per field

With ``registry`` (a URL, a confluent-style settings dict or a
:class:`~kproto.schema_registry.SchemaRegistryClient`) the values are in
Confluent's wire format (magic byte 0, a 4-byte schema id, the payload;
Protobuf adds message indexes): each schema id in the column is resolved once,
and rows written with different schemas are decoded per id and unified to one
reader schema (``schema`` or ``reader_schema``; else the latest version of
``subject``; else the newest id's schema). Without a registry the values are
plain payloads of ``schema``.

Bad values (wrong magic byte, unknown schema id, truncated or malformed
payload) raise :class:`~kproto.errors.FormatError` naming the row and the
reason; with ``errors="null"`` they become nulls, and
:func:`decode_with_bad_rows` also tells which rows they were. Never wrong data.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, FormatError, SchemaError, SchemaRegistryError
from ..schema_registry import RegisteredSchema, SchemaRegistryClient, as_client
from . import _references, _wire
from . import json as json_format

__all__ = ["FORMATS", "STRATEGIES", "Decoded", "decode", "decode_with_bad_rows", "encode",
           "reader_type", "record_name", "resolve_schema", "subject_name"]

#: The formats :func:`decode` and :func:`encode` know.
FORMATS = ("avro", "json", "protobuf")
_REGISTRY_TYPES = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}


class Decoded(NamedTuple):
    """What :func:`decode_with_bad_rows` returns: the array, and the indexes of the
    rows that could not be decoded (null in ``array``)."""

    array: pa.Array
    bad_rows: np.ndarray

    @property
    def bad_count(self) -> int:
        return int(len(self.bad_rows))


def decode(values: Any, format: str, *, schema: Any = None, registry: Any = None,
           reader_schema: Any = None, subject: str | None = None,
           errors: str = "raise") -> pa.Array:
    """Decode a binary column of ``format`` values into a typed Arrow array
    (a struct array for records): see the module. ``errors``: ``"raise"`` (the
    first bad row raises FormatError) or ``"null"`` (bad rows are null)."""
    return decode_with_bad_rows(values, format, schema=schema, registry=registry,
                                reader_schema=reader_schema, subject=subject,
                                errors=errors).array


def decode_with_bad_rows(values: Any, format: str, *, schema: Any = None, registry: Any = None,
                         reader_schema: Any = None, subject: str | None = None,
                         errors: str = "raise") -> Decoded:
    """:func:`decode`, returning also the rows that could not be decoded
    (``errors="null"``: nulls in the array, counted in ``bad_count``)."""
    format = _check_format(format)
    if errors not in ("raise", "null"):
        raise ConfigError(f"errors must be 'raise' or 'null', not {errors!r}")
    column = _wire.as_binary(values)
    client = as_client(registry)
    schema, reader_schema = _reader(schema, format, client), _reader(reader_schema, format, client)
    if client is not None and schema is not None and reader_schema is not None:
        raise ConfigError("with a registry the writer schemas come from the ids: give the "
                          "reader schema as schema= or reader_schema=, not both")
    if client is not None:
        return _decode_framed(column, format, client, reader_schema if reader_schema is not None
                              else schema, subject, errors)
    if schema is None and format != "json":
        raise ConfigError(f"decoding {format} needs schema= (plain payloads) or registry= "
                          "(Confluent's wire format)")
    if format == "avro":
        from . import avro

        writer = _parse_avro(schema)
        reader = None if reader_schema is None else _parse_avro(reader_schema)
        array, bad = avro.decode(column, writer, reader, errors=errors)
        return Decoded(array, np.asarray(bad, np.int64))
    if format == "json":
        array, bad = json_format.decode(column, _json_type(schema), errors=errors)
        return Decoded(array, bad)
    from . import protobuf

    array, bad = protobuf.decode(column, protobuf.message_descriptor(schema), errors=errors)
    return Decoded(array, bad)


def reader_type(format: str, *, schema: Any = None, registry: Any = None,
                subject: str | None = None) -> pa.DataType:
    """The Arrow type :func:`decode` gives values of ``format``, known before any
    value is seen: from ``schema``, or from the latest version of ``subject`` in
    the registry (what a Spark DataFrame's schema is planned from)."""
    format = _check_format(format)
    client = as_client(registry)
    schema = _reader(schema, format, client)
    if format == "protobuf" and hasattr(schema, "message_types_by_name"):
        from . import protobuf

        schema = protobuf.message_in(schema)      # a registered file: its only message
    named = format == "protobuf" and isinstance(schema, str)     # a message of the subject's
    if schema is None or named:
        if client is None or subject is None:
            raise ConfigError(f"the type of {format} values needs a schema, or a registry and "
                              "a subject")
        latest = client.get_latest(subject, format="serialized" if format == "protobuf"
                                   else None)
        found = _registered(latest, format, client)
        if format == "protobuf":
            from . import protobuf

            found = protobuf.message_in(found, schema)
        schema = found
    if format == "avro":
        from . import avro

        return avro.arrow_type(_parse_avro(schema))
    if format == "json":
        found = _json_type(schema)
        if found is None:
            raise ConfigError("JSON values without a schema have no type before reading")
        return found
    from . import protobuf

    return protobuf.arrow_type(protobuf.message_descriptor(schema))


def encode(array: Any, format: str, *, schema: Any = None, registry: Any = None,
           subject: str | None = None, auto_register: bool = True) -> pa.BinaryArray:
    """Encode a (struct) array into one ``format`` value per row.

    With ``registry`` and ``subject`` the schema is registered under the subject
    (``auto_register``, else looked up; without ``schema``, the subject's latest
    version is used) and each value is framed with its id in Confluent's wire
    format. ``schema``: an Avro schema (JSON text, dict or parsed), a JSON
    Schema (optional: derived from the Arrow type), a Protobuf message class
    or descriptor. Null rows stay null."""
    format = _check_format(format)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    client = as_client(registry)
    registered = schema if isinstance(schema, RegisteredSchema) else None
    if client is not None and subject is None and registered is None:
        raise ConfigError("encoding with a registry needs the subject to register under "
                          "(e.g. '<topic>-value')")
    if registered is None and client is not None and (
            schema is None or (format == "protobuf" and isinstance(schema, str))):
        # the subject's latest schema, framed with its id: nothing registered
        assert subject is not None
        try:
            registered = client.get_latest(subject, format="serialized"
                                           if format == "protobuf" else None)
        except SchemaRegistryError as exc:
            if exc.error_code != 40401 or format != "json":    # JSON: derived below
                raise
    schema_id = None
    if registered is not None:
        if client is None:
            raise ConfigError("encoding with a registered schema needs registry=")
        if registered.schema_id is None:
            raise ConfigError(f"the registered schema of {registered.subject} has no id")
        schema_id = registered.schema_id
        found = _registered(registered, format, client)
        if format == "protobuf":        # a message of the file: by name, or the first
            from . import protobuf

            found = protobuf.message_in(found, schema if isinstance(schema, str) else None)
        schema = found
    prefix = b""
    if format == "protobuf":
        from . import protobuf

        if schema is None or isinstance(schema, str):
            raise ConfigError("encoding protobuf needs the message class (schema=), or a "
                              "registry subject whose schema holds the message")
        descriptor = protobuf.message_descriptor(schema)
        if client is not None:
            if schema_id is None:
                assert subject is not None
                schema_id = protobuf.register(client, subject, descriptor, auto_register)
            prefix = _wire.header(schema_id) + _wire.encode_message_indexes(
                protobuf.indexes_of(descriptor))
        return protobuf.encode(array, descriptor, prefix=prefix)
    if format == "json" and schema is None:
        schema = json_format.json_schema(array.type)
    if client is not None:
        if schema_id is None:
            assert subject is not None
            text = _schema_text(schema, format)
            kind = _REGISTRY_TYPES[format]
            schema_id = client.register(subject, text, kind) if auto_register \
                else _lookup_id(client, subject, text, kind)
        prefix = _wire.header(schema_id)
    if format == "json":
        return json_format.encode(array, prefix=prefix)
    from . import avro

    if schema is None:
        raise ConfigError("encoding avro needs the schema (schema=, or a registry subject)")
    return avro.encode(array, _parse_avro(schema), prefix=prefix)


#: Confluent's subject naming strategies, by their Java and short names.
STRATEGIES = {"topicnamestrategy": "topic", "topic": "topic",
              "recordnamestrategy": "record", "record": "record",
              "topicrecordnamestrategy": "topic-record", "topic-record": "topic-record"}


def subject_name(topic: str, column: str, strategy: str = "TopicNameStrategy",
                 record: str | None = None) -> str:
    """The subject a ``column`` ("key" or "value") schema is registered under:
    ``TopicNameStrategy`` -> ``<topic>-<column>``, ``RecordNameStrategy`` -> the
    record's full name, ``TopicRecordNameStrategy`` -> ``<topic>-<record>``."""
    kind = STRATEGIES.get(strategy.strip().lower())
    if kind is None:
        raise ConfigError(f"unknown subject name strategy {strategy!r} (TopicNameStrategy, "
                          "RecordNameStrategy, TopicRecordNameStrategy)")
    if kind == "topic":
        return f"{topic}-{column}"
    if not record:
        raise ConfigError(f"{strategy} needs a record name (a named Avro record, a JSON "
                          "Schema title, a Protobuf message)")
    return record if kind == "record" else f"{topic}-{record}"


def record_name(schema: Any, format: str) -> str | None:
    """The full name a schema gives its record (Avro name, JSON Schema title,
    Protobuf message), for the record naming strategies."""
    if isinstance(schema, RegisteredSchema):
        schema = schema.schema
    if isinstance(schema, str) and format != "protobuf":
        import json

        try:
            schema = json.loads(schema)
        except ValueError:
            return None
    if isinstance(schema, Mapping):
        if format == "avro" and schema.get("name"):
            space = schema.get("namespace")
            name = str(schema["name"])
            return f"{space}.{name}" if space and "." not in name else name
        return str(schema["title"]) if schema.get("title") else None
    descriptor = getattr(schema, "DESCRIPTOR", schema)
    found = getattr(descriptor, "full_name", None) or getattr(schema, "name", None)
    return None if found is None else str(found)


# --------------------------------------------------------------------------- framed values


def _decode_framed(column: pa.Array, format: str, client: SchemaRegistryClient,
                   reader: Any, subject: str | None, errors: str) -> Decoded:
    # bad rows (framing, unknown ids) are kept, not raised here: with errors="raise" the
    # decoders below raise the first bad row of all, whatever made it bad
    framing = _wire.frame(column)
    bad = dict(framing.bad)
    ids = framing.ids
    writers: dict[int, Any] = {}
    known = ids[ids >= 0]
    single = known.size and known.min() == known.max()       # the usual case: one id
    for schema_id in ([int(known[0])] if single else np.unique(known).tolist()):
        rows = np.flatnonzero(ids == schema_id)
        try:
            found = client.get_schema(schema_id, format="serialized" if format == "protobuf"
                                      else None)
            writer = _registered(found, format, client)
            if format == "json":
                _json_type(writer)          # a schema with no Arrow type: its rows are bad
            writers[schema_id] = writer
        except (SchemaRegistryError, SchemaError) as exc:
            if isinstance(exc, SchemaRegistryError) and exc.error_code != 40403:
                raise           # the registry failed, not the row: never a bad row
            reason = (f"unknown schema id {schema_id}" if isinstance(exc, SchemaRegistryError)
                      else f"schema id {schema_id}: {exc}")
            bad.update(dict.fromkeys(rows.tolist(), reason))
            ids[rows] = -1
    if format == "protobuf" and isinstance(reader, str):   # a message name: of which file
        from . import protobuf

        latest = client.get_latest(subject, format="serialized") if subject is not None \
            else None
        file = _registered(latest, format, client) if latest is not None \
            else writers[max(writers)] if writers else None
        reader = None if file is None else protobuf.message_in(file, reader)
    elif reader is None and subject is not None:
        latest = client.get_latest(subject, format="serialized" if format == "protobuf"
                                   else None)
        reader = _registered(latest, format, client)
    if reader is None and writers and format != "protobuf":
        reader = writers[max(writers)]      # (protobuf: the message the newest rows name)
    if reader is None and not writers and format != "json":
        # no value to decode, no schema given: no type to decode into (all rows null)
        if errors == "raise" and bad:
            row = min(bad)
            raise FormatError(row=row, reason=bad[row], format=format)
        return Decoded(pa.nulls(len(column)), np.array(sorted(bad), np.int64))
    if format == "avro":
        return _decode_avro(column, ids, writers, reader, bad, errors)
    if format == "json":
        type = _json_type(reader) if reader is not None else None
        array, bad_rows = json_format.decode(column, type, skip=_wire.HEADER, skip_rows=bad,
                                             errors=errors)
        return Decoded(array, bad_rows)
    from . import protobuf

    array, bad_rows = protobuf.decode_framed(column, ids, writers, reader, bad, errors)
    return Decoded(array, bad_rows)


def _decode_avro(column: pa.Array, ids: np.ndarray, writers: dict[int, Any], reader: Any,
                 bad: dict[int, str], errors: str) -> Decoded:
    from . import avro

    parsed_reader = _parse_avro(reader) if reader is not None else None
    if parsed_reader is None:
        raise ConfigError("no reader schema: the column holds no decodable value and no "
                          "subject or schema was given")
    type = avro.arrow_type(parsed_reader)
    pieces = []
    bad_rows = set(bad)
    single = len(writers) == 1 and not bad
    first: FormatError | None = None        # errors="raise": the first bad row of any id
    for schema_id, writer in writers.items():
        parsed = _parse_avro(writer)
        # the writer is the reader: no resolution to make
        same = None if writer is reader or parsed == parsed_reader else parsed_reader
        rows = None if single else np.flatnonzero(ids == schema_id).astype(np.int64)
        try:
            array, found = avro.decode(column, parsed, same, skip=_wire.HEADER, rows=rows,
                                       errors=errors)
        except FormatError as exc:
            if first is None or (exc.row or 0) < (first.row or 0):
                first = exc
            continue
        except SchemaError as exc:
            # this writer's rows cannot be resolved to the reader (FORWARD compatibility:
            # a reader field without default that the old writer lacks): bad rows, the
            # others decode
            mine = np.flatnonzero(ids == schema_id).tolist() if rows is None else rows.tolist()
            reason = f"schema id {schema_id} cannot be read as the reader schema: {exc}"
            bad.update(dict.fromkeys(mine, reason))
            bad_rows.update(mine)
            continue
        if rows is None:                    # (single)
            return Decoded(array, np.asarray(found, np.int64))
        pieces.append((rows, array))
        bad_rows.update(np.asarray(found).tolist())
    if errors == "raise" and (first is not None or bad):
        row = min(bad, default=None)
        if first is not None and (row is None or (first.row or 0) < row):
            raise first
        assert row is not None
        raise FormatError(row=row, reason=bad[row], format="avro")
    return Decoded(_wire.assemble(len(column), pieces, type),
                   np.array(sorted(bad_rows), np.int64))


# --------------------------------------------------------------------------- schemas


def _check_format(format: str) -> str:
    name = str(format).strip().lower()
    if name not in FORMATS:
        raise ConfigError(f"unknown format {format!r} (known: {', '.join(FORMATS)})")
    return name


def resolve_schema(found: RegisteredSchema, format: str, registry: Any) -> Any:
    """The schema of a registry answer (``client.get_version(...)``, ``get_schema(id)``)
    as :func:`decode` and :func:`encode` take it, the schemas it references resolved
    through ``registry``: an Avro schema parsed with them, a JSON Schema with them bundled
    under ``$defs``, a Protobuf file descriptor with its imports. Kept per registry: each
    referenced version is asked once."""
    client = as_client(registry)
    if client is None:
        raise ConfigError("resolve_schema needs a registry")
    return _registered(found, _check_format(format), client)


def _registered(found: Any, format: str, client: SchemaRegistryClient) -> Any:
    """The schema of a registry answer, checked to be of ``format``, with the schemas it
    references resolved (recursively, each once): an AvroSchema parsed with them, a JSON
    Schema with them bundled, a Protobuf file descriptor with its imports. Kept per
    client (whose credentials fetched them), so it asks for each referenced version once."""
    kind = _REGISTRY_TYPES[format]
    if found.schema_type != kind:
        raise SchemaError(f"schema id {found.schema_id} is a {found.schema_type} schema, not "
                          f"{kind}")
    with _RESOLVED_LOCK:
        mine = _RESOLVED.setdefault(client, {})
        hit = mine.get((found, format))
    if hit is not None:
        return hit
    if format == "protobuf":
        from . import protobuf

        schema = protobuf.from_registry(found, client)
    elif not found.references:
        schema = found.schema if format == "json" else _parse_avro(found.schema)
    else:
        refs = _references.resolve(client, found)
        if format == "avro":
            from . import avro

            schema = avro.parse_schema(found.schema, [r.schema for _, r in refs])
        else:
            schema = json_format.bundle(found.schema, {name: r.schema for name, r in refs})
    with _RESOLVED_LOCK:
        mine[(found, format)] = schema
        while len(mine) > 256:
            mine.pop(next(iter(mine)))
    return schema


#: Resolved schemas per client (dropped with it): (RegisteredSchema, format) -> schema
_RESOLVED: weakref.WeakKeyDictionary[SchemaRegistryClient, dict[tuple[Any, str], Any]] = \
    weakref.WeakKeyDictionary()
_RESOLVED_LOCK = threading.Lock()


def _reader(schema: Any, format: str, client: SchemaRegistryClient | None) -> Any:
    """A schema argument as the decoders take it: a RegisteredSchema (from
    ``client.get_version``...) with its references resolved through ``client``."""
    if not isinstance(schema, RegisteredSchema):
        return schema
    if client is None and not schema.references and format != "protobuf":
        return schema.schema
    if client is None:
        raise ConfigError("a registered schema (RegisteredSchema) needs registry= to resolve "
                          "its references")
    return _registered(schema, format, client)


def _parse_avro(schema: Any) -> Any:
    from . import avro

    if isinstance(schema, (str, Mapping, list)):
        return avro.parse_schema(schema)
    return schema


def _json_type(schema: Any) -> pa.DataType | None:
    if schema is None:
        return None
    if isinstance(schema, pa.Schema):
        return pa.struct(list(schema))
    if isinstance(schema, pa.DataType):
        return schema
    return json_format.arrow_type(schema)


def _schema_text(schema: Any, format: str) -> str:
    import json

    if isinstance(schema, str):
        return schema
    if isinstance(schema, Mapping):
        return json.dumps(schema)
    if format == "avro" and isinstance(getattr(schema, "json", None), str):
        return str(schema.json)          # the full text (the canonical form drops defaults)
    raise ConfigError(f"cannot register a {format} schema given as {type(schema).__name__}; "
                      "give its JSON text")


def _lookup_id(client: SchemaRegistryClient, subject: str, text: str, kind: str) -> int:
    found = client.lookup(subject, text, kind)
    assert found.schema_id is not None
    return found.schema_id
