"""Typed ``key``/``value`` columns for the "kproto" source and sink.

Reading with ``valueFormat`` (``avro``, ``json``, ``protobuf``; ``keyFormat``
too) gives a struct column instead of binary. Its type is resolved on the
driver, before anything is read (a DataFrame's schema must be known): from
``valueSchema`` (an Avro schema or a JSON Schema, inline), else from the
registry at ``schema.registry.url`` as the latest version of ``valueSubject``
(default ``<topic>-value``, Confluent's TopicNameStrategy). Executors decode
each Arrow batch's column with :func:`kproto.formats.decode` inside the same
batches, the registry client (its cache filled on the driver) shipped with
the task, and bring the result to the types Spark knows
(:func:`spark_type`). ``formatErrors``: ``raise`` (default) fails the task on
a bad value, naming its row; ``null`` reads it as null. A recursive Avro schema
(a record that contains itself) has no Spark type: ``recursiveFieldMaxDepth``
(1-15, as spark-avro's ``from_avro``) reads it unrolled, each record at most that
many times on a path, the fields that would go deeper dropped
(:func:`kproto.formats.avro.unroll`); without it such a schema is a ConfigError.

Writing with ``valueFormat`` encodes a struct ``value`` column (``key`` with
``keyFormat``) with :func:`kproto.formats.encode`, registering the schema
(``valueSchema``, else the subject's latest version, else for Avro and JSON
one derived from the column's type) under the subject that
``valueSubjectNameStrategy`` names: ``TopicNameStrategy`` (``<topic>-value``,
the default), ``RecordNameStrategy`` (the record's full name) or
``TopicRecordNameStrategy`` (``<topic>-<record>``).

Registry settings: ``schema.registry.url`` and any other
``schema.registry.``-prefixed option under confluent-kafka's name
(``schema.registry.basic.auth.user.info``, ``schema.registry.ssl.ca.location``...).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import formats
from ..errors import ConfigError, SchemaError
from ..schema_registry import RegisteredSchema, SchemaRegistryClient
from .options import _option

STRATEGIES = formats.STRATEGIES
subject_name = formats.subject_name


def registry_client(options: Mapping[str, str]) -> SchemaRegistryClient | None:
    """The client the ``schema.registry.*`` options describe, if any."""
    conf = {}
    for key, value in options.items():
        if key.lower().startswith("schema.registry."):
            conf[key[len("schema.registry."):].lower()] = value
    if not conf:
        return None
    return SchemaRegistryClient.from_config(conf)


def _inline(text: str | None, option: str) -> Any:
    """An inline schema option: JSON, or a plain name (an Avro type such as "string", a
    Protobuf message); JSON that does not parse is a ConfigError naming the option."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        if text.strip().startswith(("{", "[", '"')):
            raise ConfigError(f"option {option} is not valid JSON: {exc}") from None
        return text.strip()


def spark_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Spark reads a decoded column as: enums as strings, unions as
    structs of their branches (``member0``...), unsigned ints widened, times as
    microseconds (long), fixed as binary, timestamps in microseconds."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, spark_type(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(pa.field("element", spark_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(spark_type(t.key_type), spark_type(t.item_type))
    if pa.types.is_union(t):            # as Spark's from_avro: null branches make it nullable
        branches = [f for f in t if not pa.types.is_null(f.type)]
        return pa.struct([pa.field(f"member{i}", spark_type(f.type))
                          for i, f in enumerate(branches)])
    if pa.types.is_dictionary(t):
        return spark_type(t.value_type)
    if pa.types.is_timestamp(t):    # nanoseconds: a long, as spark-avro reads timestamp-nanos
        return pa.int64() if t.unit == "ns" else pa.timestamp("us", tz="UTC" if t.tz else None)
    if pa.types.is_time(t):
        return pa.int64()
    if t == pa.uint8():
        return pa.int16()
    if t == pa.uint16():
        return pa.int32()
    if t == pa.uint32():
        return pa.int64()
    if t == pa.uint64():
        return pa.decimal128(20, 0)
    if pa.types.is_fixed_size_binary(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_decimal(t) and t.precision > 38:
        return pa.string()
    return t


def to_spark(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as ``target`` (a :func:`spark_type` of its type, names and nullability
    as Spark gives them)."""
    t = array.type
    if pa.types.is_struct(t) and pa.types.is_struct(target):
        children = [to_spark(array.field(i), target.field(i).type) for i in range(t.num_fields)]
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_union(t):
        kinds = array.type_codes.to_numpy(zero_copy_only=False)
        children = []
        null = np.zeros(len(array), bool)
        for i in range(t.num_fields):
            mine = kinds == t.type_codes[i]
            if pa.types.is_null(t.field(i).type):
                null |= mine
                continue
            branch = to_spark(_branch(array, i), target.field(len(children)).type)
            children.append(pc.if_else(pa.array(mine), branch,
                                       pa.nulls(len(array), branch.type)))
        return pa.StructArray.from_arrays(children, fields=list(target),
                                          mask=pa.array(null) if null.any() else None)
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_list(target):
        values = to_spark(array.flatten(), target.value_type)
        offsets = array.offsets if pa.types.is_list(t) else array.offsets.cast(pa.int32())
        mask = array.is_null() if array.null_count else None
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=mask)
    if pa.types.is_map(t) and pa.types.is_map(target):
        keys = to_spark(array.keys, target.key_type)
        items = to_spark(array.items, target.item_type)
        mask = array.is_null() if array.null_count else None
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=target, mask=mask)
    if pa.types.is_dictionary(t):
        return to_spark(array.dictionary_decode(), target)
    if pa.types.is_timestamp(t) and t.unit == "ns":     # exact: nanoseconds, as a long
        return array.cast(pa.int64())
    if pa.types.is_time(t):                  # microseconds since midnight, as a long
        raw = array.cast(pa.int32() if pa.types.is_time32(t) else pa.int64()).cast(pa.int64())
        factor = {"s": 1_000_000, "ms": 1000, "us": 1}.get(t.unit)
        return pc.multiply(raw, factor) if factor else pc.divide(raw, 1000)
    return array if array.type == target else array.cast(target)


def _branch(array: pa.Array, i: int) -> pa.Array:
    """Branch ``i`` of a dense union, one value per row (null where another branch)."""
    t = array.type
    child = array.field(i)
    kinds = array.type_codes.to_numpy(zero_copy_only=False)
    offsets = array.offsets.to_numpy(zero_copy_only=False)
    mine = kinds == t.type_codes[i]
    if len(child) == 0:
        return pa.nulls(len(array), child.type)
    return child.take(pa.array(np.where(mine, offsets, 0)))


@dataclass(frozen=True)
class ColumnFormat:
    """How one column (``key`` or ``value``) is decoded: what a task needs. The reader
    schema is fixed on the driver when the query is planned (``registered``: the
    subject's version the DataFrame's type was planned from, or the inline ``schema``);
    executors resolve only the writer ids they meet against it, each once per Python
    worker, and never ask the registry for ``latest``."""

    column: str
    format: str
    registry: SchemaRegistryClient | None
    schema: Any
    subject: str | None
    arrow: pa.DataType
    spark: pa.DataType
    errors: str
    #: the reader schema of a recursive Avro schema, unrolled (recursiveFieldMaxDepth)
    reader: Any = None
    #: the registered version the reader schema is (with ``schema`` None, or a Protobuf
    #: message name)
    registered: RegisteredSchema | None = None
    #: names this query's registry client in an executor's process (see _shared_client)
    token: str = field(default_factory=lambda: uuid.uuid4().hex, compare=False)

    def decode(self, values: pa.Array) -> pa.Array:
        if self.registry is not None:
            client = _shared_client(self.token, self.registry)
            array = formats.decode(values, self.format, registry=client,
                                   reader_schema=self._reader(client), errors=self.errors)
        else:
            array = formats.decode(values, self.format, schema=self.schema,
                                   reader_schema=self.reader, errors=self.errors)
        return to_spark(array, self.spark)

    def _reader(self, client: SchemaRegistryClient) -> Any:
        if self.reader is not None:
            return self.reader
        if self.registered is None:
            return self.schema
        found = formats.resolve_schema(self.registered, self.format, client)     # (cached)
        if self.format != "protobuf":
            return found
        from ..formats import protobuf

        return protobuf.message_in(found, self.schema)   # by name, or the file's only one


#: The registry clients of running queries in this process, by ColumnFormat.token: a
#: query's tasks share one client (its caches) in a Python worker, so a writer id met in
#: one micro-batch is not asked again in the next.
_CLIENTS: dict[str, SchemaRegistryClient] = {}
_CLIENTS_LOCK = threading.Lock()


def _shared_client(token: str, client: SchemaRegistryClient) -> SchemaRegistryClient:
    with _CLIENTS_LOCK:
        found = _CLIENTS.get(token)
        if found is None:
            while len(_CLIENTS) >= 64:
                _CLIENTS.pop(next(iter(_CLIENTS)))
            found = _CLIENTS[token] = client
        return found


def read_formats(options: Mapping[str, str], planned: Any = None) -> tuple[ColumnFormat, ...]:
    """The typed columns the options ask for, resolved now, on the driver. ``planned``:
    the Spark schema (StructType) the query was planned with; a subject that gained a
    version since then is read with the version that schema came from."""
    out = []
    client = registry_client(options)
    errors = (_option(options, "formatErrors") or "raise").strip().lower()
    if errors not in ("raise", "null"):
        raise ConfigError(f"option 'formatErrors' must be raise or null, not {errors!r}")
    depth = _recursion_depth(options)
    for column in ("key", "value"):
        fmt = _option(options, f"{column}Format")
        if fmt is None or fmt.strip().lower() in ("binary", "bytes"):
            continue
        fmt = fmt.strip().lower()
        schema = _inline(_option(options, f"{column}Schema"), f"{column}Schema")
        subject = _option(options, f"{column}Subject")
        if subject is None and (schema is None or fmt == "protobuf"):   # (protobuf: a name)
            topics = [t.strip() for t in (_option(options, "subscribe") or "").split(",")
                      if t.strip()]
            if client is None or len(topics) != 1:
                raise ConfigError(
                    f"option {column}Format={fmt} needs {column}Schema, or "
                    f"schema.registry.url with {column}Subject (or one 'subscribe' topic: "
                    f"<topic>-{column})")
            subject = f"{topics[0]}-{column}"
        if client is None and fmt == "protobuf":
            raise ConfigError("protobuf values need schema.registry.url")
        want = _planned_type(planned, column)
        if client is None or (schema is not None and fmt != "protobuf"):
            found = _column(column, fmt, client, schema, subject, errors, depth, None)
        else:
            assert subject is not None
            found = _pinned(column, fmt, client, schema, subject, errors, depth, want)
        if want is not None and _spark_sql_type(found.spark) != want:
            raise ConfigError(f"the {column} column was planned as {want.simpleString()}, but "
                              f"its schema reads as {_spark_sql_type(found.spark).simpleString()}")
        out.append(found)
    return tuple(out)


def _column(column: str, fmt: str, client: SchemaRegistryClient | None, schema: Any,
            subject: str | None, errors: str, depth: int | None,
            registered: RegisteredSchema | None) -> ColumnFormat:
    """The column read with ``schema`` or the ``registered`` version, its types known."""
    cf = ColumnFormat(column, fmt, client, schema, subject, pa.null(), pa.null(), errors,
                      None, registered)
    target = cf._reader(client) if client is not None else schema
    reader = _unrolled(target, depth, column) if fmt == "avro" else None
    try:
        arrow = formats.reader_type(fmt, schema=target if reader is None else reader,
                                    registry=client)
    except SchemaError as exc:
        if fmt != "protobuf":
            raise
        raise ConfigError(f"option {column}Format=protobuf: {exc} (option {column}Schema: "
                          "the message's full name)") from None
    return replace(cf, arrow=arrow, spark=spark_type(arrow), reader=reader)


def _pinned(column: str, fmt: str, client: SchemaRegistryClient, schema: Any, subject: str,
            errors: str, depth: int | None, want: Any) -> ColumnFormat:
    """The column read with the subject's latest version, or, when the query was planned
    with an earlier one (``want``: its Spark type), the newest version of that type."""
    kind = "serialized" if fmt == "protobuf" else None
    latest = client.get_latest(subject, format=kind)
    found = _column(column, fmt, client, schema, subject, errors, depth, latest)
    if want is None or _spark_sql_type(found.spark) == want:
        return found
    for version in sorted(client.get_versions(subject), reverse=True):
        if version == latest.version:
            continue
        try:
            older = _column(column, fmt, client, schema, subject, errors, depth,
                            client.get_version(subject, version, format=kind))
        except (ConfigError, SchemaError):
            continue
        if _spark_sql_type(older.spark) == want:
            return older
    raise ConfigError(f"no version of subject {subject} has the {column} type the query was "
                      f"planned with ({want.simpleString()}): plan the query again")


def _planned_type(planned: Any, column: str) -> Any:
    """The Spark type ``column`` has in a planned StructType (None: not planned)."""
    fields = getattr(planned, "fieldNames", None)
    if fields is None or column not in fields():
        return None
    return planned[column].dataType


def _spark_sql_type(t: pa.DataType) -> Any:
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(t, prefer_timestamp_ntz=True)


#: spark-avro's bound on recursiveFieldMaxDepth
MAX_RECURSIVE_DEPTH = 15


def _recursion_depth(options: Mapping[str, str]) -> int | None:
    """Option recursiveFieldMaxDepth: 1-15, or None (unset, -1 or 0: refused, as Spark)."""
    text = _option(options, "recursiveFieldMaxDepth")
    if text is None:
        return None
    try:
        depth = int(text.strip())
    except ValueError:
        raise ConfigError(f"option recursiveFieldMaxDepth must be an integer, not "
                          f"{text!r}") from None
    if depth > MAX_RECURSIVE_DEPTH or depth < -1:
        raise ConfigError(f"option recursiveFieldMaxDepth must be -1 to {MAX_RECURSIVE_DEPTH}, "
                          f"not {depth}")
    return depth if depth > 0 else None


def _unrolled(schema: Any, depth: int | None, column: str) -> Any:
    """The reader schema a recursive Avro schema is read with (None when not recursive)."""
    from ..formats import avro

    if schema is None:
        return None
    parsed = avro.parse_schema(schema)
    if not avro.is_recursive(parsed):
        return None
    if depth is None:
        raise ConfigError(
            f"the {column} schema {parsed.name} is recursive (a record contains itself), which "
            f"Spark cannot hold: set option recursiveFieldMaxDepth to 1-{MAX_RECURSIVE_DEPTH} "
            "to read each record at most that many times on a path, the fields that would go "
            "deeper dropped (as spark-avro's from_avro)")
    return avro.unroll(parsed, depth)


def spark_schema(base: pa.Schema, typed: tuple[ColumnFormat, ...]) -> Any:
    """The source's Spark schema (a StructType) with the typed columns' types."""
    from pyspark.sql.pandas.types import from_arrow_schema

    fields = [pa.field(f.name, next((c.spark for c in typed if c.column == f.name), f.type))
              for f in base]
    return from_arrow_schema(pa.schema(fields), prefer_timestamp_ntz=True)


def decode_batch(batch: pa.RecordBatch, typed: tuple[ColumnFormat, ...],
                 target: pa.Schema) -> pa.RecordBatch:
    """A batch in Spark's layout with its typed columns decoded (schema ``target``)."""
    columns = list(batch.columns)
    for c in typed:
        i = batch.schema.get_field_index(c.column)
        columns[i] = c.decode(batch.column(i))
    return pa.RecordBatch.from_arrays(
        [col if col.type == f.type else col.cast(f.type) for col, f in zip(columns, target,
                                                                              strict=True)],
        schema=target)


def arrow_target(schema: Any) -> pa.Schema:
    """The Arrow schema Spark expects from read() for the declared StructType."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class SinkFormats:
    """How the sink encodes its typed ``key``/``value`` columns."""

    columns: tuple[tuple[str, str, Any, str | None, str], ...]   # column, format, schema,
    registry: SchemaRegistryClient | None                        # subject, strategy
    #: schemas found per (topic, column) in this task: the registry is asked once
    resolved: dict[tuple[str, str], Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SinkFormats | None:
        client = registry_client(options)
        columns = []
        for column in ("key", "value"):
            fmt = _option(options, f"{column}Format")
            if fmt is None or fmt.strip().lower() in ("binary", "bytes"):
                continue
            strategy = _option(options, f"{column}SubjectNameStrategy") or "TopicNameStrategy"
            if strategy.strip().lower() not in STRATEGIES:
                raise ConfigError(f"option {column}SubjectNameStrategy: unknown strategy "
                                  f"{strategy!r} (TopicNameStrategy, RecordNameStrategy, "
                                  "TopicRecordNameStrategy)")
            schema = _inline(_option(options, f"{column}Schema"), f"{column}Schema")
            subject = _option(options, f"{column}Subject")
            if STRATEGIES[strategy.strip().lower()] != "topic" and schema is None \
                    and subject is None and fmt == "json":
                # the record's name names the subject, and a DataFrame's rows name none
                # (Avro: the schema derived from the column's type, named <topic>_<column>)
                raise ConfigError(f"option {column}SubjectNameStrategy={strategy} needs "
                                  f"{column}Schema (its title names the subject) or "
                                  f"{column}Subject")
            columns.append((column, fmt.strip().lower(), schema, subject, strategy))
        return cls(tuple(columns), client) if columns else None

    def encode(self, topic: str, table: pa.Table) -> pa.Table:
        for column, fmt, schema, subject, strategy in self.columns:
            if column not in table.schema.names:
                continue
            values = table.column(column).combine_chunks()
            if schema is None and self.registry is None:
                raise ConfigError(f"{column}Format={fmt} needs {column}Schema or "
                                  "schema.registry.url")
            if schema is None and fmt != "protobuf" and self.registry is not None:
                key = (topic, column)       # the subject's latest (its id, its references)
                if key not in self.resolved:
                    by_topic = subject is not None or STRATEGIES[strategy.strip().lower()] \
                        == "topic"          # (a record strategy: no <topic>-value to ask)
                    self.resolved[key] = _latest_or_derived(
                        self.registry if by_topic else None, subject or f"{topic}-{column}",
                        values.type, topic, column, fmt)
                schema = self.resolved[key]
            name = formats.record_name(schema, fmt)
            where = subject or (None if self.registry is None else
                                subject_name(topic, column, strategy, name))
            encoded = formats.encode(values, fmt, schema=schema, registry=self.registry,
                                     subject=where)
            table = table.set_column(table.schema.get_field_index(column), column, encoded)
        return table


def _latest_or_derived(client: SchemaRegistryClient | None, subject: str, t: pa.DataType,
                       topic: str, column: str, fmt: str) -> Any:
    """The subject's latest version; for a subject without versions (or no ``client`` to
    ask), an Avro schema derived from the column's type (JSON: None, formats.encode
    derives one)."""
    from ..errors import SchemaRegistryError

    if client is not None:
        try:
            return client.get_latest(subject)
        except SchemaRegistryError as exc:
            if exc.error_code != 40401:
                raise
    if fmt != "avro":
        return None
    return avro_schema_for(t, f"{topic}_{column}".replace("-", "_").replace(".", "_"))


def avro_schema_for(t: pa.DataType, name: str) -> Any:
    """An Avro schema for values of an Arrow type (as Spark's to_avro derives one):
    every field nullable (``["null", T]``, default null)."""
    def of(t: pa.DataType, name: str) -> Any:
        if pa.types.is_struct(t):
            return {"type": "record", "name": name, "fields": [
                {"name": f.name, "type": ["null", of(f.type, f"{name}_{f.name}")],
                 "default": None} for f in t]}
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return {"type": "array", "items": ["null", of(t.value_type, f"{name}_item")]}
        if pa.types.is_map(t):
            return {"type": "map", "values": ["null", of(t.item_type, f"{name}_value")]}
        if pa.types.is_boolean(t):
            return "boolean"
        if t in (pa.int8(), pa.int16(), pa.int32()):
            return "int"
        if pa.types.is_integer(t):
            return "long"
        if t == pa.float32():
            return "float"
        if pa.types.is_floating(t):
            return "double"
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return "bytes"
        if pa.types.is_date(t):
            return {"type": "int", "logicalType": "date"}
        if pa.types.is_timestamp(t):
            logical = "timestamp-micros" if t.tz else "local-timestamp-micros"
            return {"type": "long", "logicalType": logical}
        if pa.types.is_decimal(t):
            return {"type": "bytes", "logicalType": "decimal", "precision": t.precision,
                    "scale": t.scale}
        return "string"

    return of(t, name)
