"""Avro against independent implementations: fastavro's writer and reader, and
confluent-kafka's AvroSerializer/AvroDeserializer (Confluent's wire format). Every type the
issue lists, nulls, empty arrays and maps, non-ASCII text, big decimals; both decoder
loops (the ``loop`` fixture); schema resolution against fastavro's."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pyarrow as pa
import pytest

from kproto.errors import FormatError, SchemaError
from kproto.formats import avro

from .avro_support import (
    D,
    arrow_values,
    column,
    loop,  # noqa: F401  (the fixture: both decoder loops)
    plain,
    read,
    write,
)

UTC = datetime.timezone.utc

ALL_TYPES = {
    "type": "record", "name": "All", "namespace": "t.kproto", "fields": [
        {"name": "n", "type": "null"},
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "by", "type": "bytes"},
        {"name": "s", "type": "string"},
        {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "x", "type": "int"},
            {"name": "tags", "type": {"type": "array", "items": "string"}}]}},
        {"name": "arr", "type": {"type": "array", "items": "Inner"}},
        {"name": "m", "type": {"type": "map", "values": ["null", "long"]}},
        {"name": "e", "type": {"type": "enum", "name": "Color",
                               "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "opt", "type": ["null", "string"]},
        {"name": "opt_last", "type": ["double", "null"]},
        {"name": "opt_rec", "type": ["null", "Inner"]},
        {"name": "u", "type": ["null", "int", "string", "Inner"]},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal",
                                 "precision": 12, "scale": 3}},
        {"name": "dec_fixed", "type": {"type": "fixed", "name": "D9", "size": 9,
                                       "logicalType": "decimal", "precision": 20,
                                       "scale": 2}},
        {"name": "big", "type": {"type": "bytes", "logicalType": "decimal",
                                 "precision": 60, "scale": 10}},
        {"name": "date", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "ltm", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "ltu", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    ]}


def _record(i: int) -> dict[str, Any]:
    text = ["", "plain", "non-ASCII: é漢🙂", "x" * 300][i % 4]
    inner = {"x": -i, "tags": [text] * (i % 3)}
    return {
        "n": None, "b": i % 2 == 1, "i": [0, -1, 2**31 - 1, -(2**31)][i % 4],
        "l": [0, 2**63 - 1, -(2**63), 1234567890123][i % 4], "f": i / 8, "d": -i * 1e300,
        "by": bytes(range(i % 256)), "s": text, "inner": inner,
        "arr": [inner] * (i % 3),                              # empty every third row
        "m": {} if i % 3 == 0 else {"k": i, "ключ": None, text: -i},
        "e": ["RED", "GREEN", "BLUE"][i % 3], "fx": bytes([i % 256] * 4),
        "opt": None if i % 2 else text, "opt_last": None if i % 3 else i / 2,
        "opt_rec": None if i % 2 else inner,
        "u": [None, i, text, inner][i % 4],
        "dec": D(i * 1000 - 500_000) / 1000 * (-1) ** i,
        "dec_fixed": D("-123456789012345678.91") if i % 2 else D("0.01"),
        "big": D("12345678901234567890123456789012345678901234567890.0123456789") * (-1) ** i,
        "date": datetime.date(1970, 1, 1) + datetime.timedelta(days=i * 1000 - 3000),
        "tm": datetime.time(23, 59, 59, 999000) if i % 2 else datetime.time(0, 0, 0),
        "tu": datetime.time(12, 30, 1, i),
        "tsm": datetime.datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=UTC)
        + datetime.timedelta(days=i),
        "tsu": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "ltm": datetime.datetime(2000, 1, 1, 0, 0, 0, 1000),
        "ltu": datetime.datetime(2038, 1, 19, 3, 14, 8, 7),
        "id": str(uuid.UUID(int=i * 7919)),
    }


RECORDS = [_record(i) for i in range(12)]


def test_arrow_type_of_every_avro_type() -> None:
    t = avro.arrow_type(avro.parse_schema(ALL_TYPES))
    inner = pa.struct([pa.field("x", pa.int32(), False),
                       pa.field("tags", pa.list_(pa.field("item", pa.string(), False)), False)])
    expected = {
        "n": pa.null(), "b": pa.bool_(), "i": pa.int32(), "l": pa.int64(), "f": pa.float32(),
        "d": pa.float64(), "by": pa.binary(), "s": pa.string(), "inner": inner,
        "arr": pa.list_(pa.field("item", inner, False)),
        "m": pa.map_(pa.string(), pa.field("value", pa.int64(), True)),
        "e": pa.dictionary(pa.int32(), pa.string()), "fx": pa.binary(4),
        "opt": pa.string(), "opt_last": pa.float64(), "opt_rec": inner,
        "u": pa.dense_union([pa.field("null", pa.null()), pa.field("int", pa.int32(), False),
                             pa.field("string", pa.string(), False),
                             pa.field("t.kproto.Inner", inner, False)], [0, 1, 2, 3]),
        "dec": pa.decimal128(12, 3), "dec_fixed": pa.decimal128(20, 2),
        "big": pa.decimal256(60, 10), "date": pa.date32(), "tm": pa.time32("ms"),
        "tu": pa.time64("us"), "tsm": pa.timestamp("ms", tz="UTC"),
        "tsu": pa.timestamp("us", tz="UTC"), "ltm": pa.timestamp("ms"),
        "ltu": pa.timestamp("us"), "id": pa.string(),
    }
    assert [f.name for f in t] == list(expected)
    for f in t:
        assert f.type == expected[f.name], f.name
        assert f.nullable == (f.name in ("n", "opt", "opt_last", "opt_rec", "u")), f.name


@pytest.mark.parametrize("kind", ["binary", "large", "view"])
@pytest.mark.usefixtures("loop")
def test_fastavro_golden_bytes_decode_exactly(kind: str) -> None:
    datums = write(ALL_TYPES, RECORDS)
    values = column([*datums, None], kind)
    array, bad = avro.decode(values, avro.parse_schema(ALL_TYPES))
    array.validate(full=True)
    assert len(bad) == 0 and array.type == avro.arrow_type(avro.parse_schema(ALL_TYPES))
    got = arrow_values(array)
    assert got[-1] is None and array.null_count == 1
    assert got[:-1] == [plain(r) for r in read(ALL_TYPES, datums)]
    assert got[:-1] == [plain(r) for r in RECORDS]


@pytest.mark.usefixtures("loop")
def test_what_kproto_encodes_fastavro_decodes() -> None:
    schema = avro.parse_schema(ALL_TYPES)
    array, _ = avro.decode(column(write(ALL_TYPES, RECORDS)), schema)
    encoded = avro.encode(array, schema)
    assert encoded.type == pa.binary() and encoded.null_count == 0
    assert [plain(r) for r in read(ALL_TYPES, encoded.to_pylist())] == \
        [plain(r) for r in RECORDS]
    # and byte for byte what fastavro writes (Avro's encoding has one form per value)
    assert encoded.to_pylist() == write(ALL_TYPES, RECORDS)


def test_encode_keeps_null_rows_and_sliced_input() -> None:
    schema = avro.parse_schema(ALL_TYPES)
    array, _ = avro.decode(column([*write(ALL_TYPES, RECORDS), None]), schema)
    encoded = avro.encode(array.slice(3), schema)
    assert encoded.to_pylist() == [*write(ALL_TYPES, RECORDS[3:]), None]


def test_encode_struct_with_spark_shaped_columns() -> None:
    """A struct whose timestamp is in microseconds (Spark's) and whose enum is a plain
    string encodes to the schema's millis and symbol index."""
    schema = avro.parse_schema({"type": "record", "name": "R", "fields": [
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "missing", "type": "int", "default": 7}]})
    ts = datetime.datetime(2024, 5, 1, 1, 2, 3, 456789, tzinfo=UTC)
    table = pa.table({"ts": pa.array([ts], pa.timestamp("us", tz="UTC")),
                      "e": pa.array(["B"])})
    out = avro.encode(table, schema).to_pylist()
    assert read(schema.json and {"type": "record", "name": "R", "fields": [
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "missing", "type": "int", "default": 7}]}, out) == [
        {"ts": ts.replace(microsecond=456000), "e": "B", "missing": 7}]


@pytest.mark.usefixtures("loop")
def test_primitive_top_level_schemas() -> None:
    for schema, values in [("string", ["a", "é", ""]), ("long", [0, -1, 2**62]),
                           (["null", "int"], [None, 3]), ({"type": "array", "items": "int"},
                                                          [[], [1, 2]])]:
        parsed = avro.parse_schema(schema if not isinstance(schema, str) else f'"{schema}"')
        datums = write(schema, values)
        array, _ = avro.decode(column(datums), parsed)
        assert array.to_pylist() == values
        assert avro.encode(array, parsed).to_pylist() == datums


# --------------------------------------------------------------------------- resolution

WRITER = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "int"},
    {"name": "gone", "type": {"type": "map", "values": {"type": "array", "items": "string"}}},
    {"name": "amount", "type": "float"},
    {"name": "count", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "raw", "type": "bytes"},
    {"name": "color", "type": {"type": "enum", "name": "Color",
                               "symbols": ["RED", "GREEN", "PINK"]}},
    {"name": "old_name", "type": "int"},
    {"name": "either", "type": ["int", "string"]},
    {"name": "plain", "type": "int"},
    {"name": "skipped_rec", "type": ["null", {"type": "record", "name": "Skip", "fields": [
        {"name": "a", "type": {"type": "fixed", "name": "F3", "size": 3}},
        {"name": "b", "type": "double"}, {"name": "c", "type": "boolean"}]}]},
]}
READER = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"},                                  # int -> long
    {"name": "amount", "type": "double"},                            # float -> double
    {"name": "count", "type": "double"},                             # long -> double
    {"name": "name", "type": "bytes"},                               # string -> bytes
    {"name": "raw", "type": "string"},                               # bytes -> string
    {"name": "color", "type": {"type": "enum", "name": "Color",
                               "symbols": ["BLUE", "GREEN", "RED"], "default": "BLUE"}},
    {"name": "new_name", "type": "int", "aliases": ["old_name"]},
    {"name": "either", "type": ["null", "string", "long"]},          # union -> union
    {"name": "plain", "type": ["null", "double"]},                   # int -> nullable double
    {"name": "added", "type": {"type": "array", "items": "int"}, "default": [1, 2]},
    {"name": "added_rec", "type": {"type": "record", "name": "New", "fields": [
        {"name": "x", "type": "string", "default": "é"}]}, "default": {"x": "ü"}},
    {"name": "nested_default", "type": {"type": "record", "name": "New2", "fields": [
        {"name": "y", "type": "string", "default": "é"}]}, "default": {}},
]}


@pytest.mark.usefixtures("loop")
def test_schema_resolution_matches_fastavro() -> None:
    records = [{"id": i, "gone": {"k": ["v"] * i}, "amount": i / 4, "count": 2**40 + i,
                "name": "naïve", "raw": b"ok", "color": ["RED", "GREEN", "PINK"][i % 3],
                "old_name": -i, "either": i if i % 2 else "s", "plain": i,
                "skipped_rec": None if i % 2 else {"a": b"abc", "b": 1.5, "c": True}}
               for i in range(6)]
    datums = write(WRITER, records)
    array, bad = avro.decode(column(datums), avro.parse_schema(WRITER),
                             avro.parse_schema(READER))
    array.validate(full=True)
    expected = [plain(r) for r in read(WRITER, datums, READER)]
    got = arrow_values(array)
    # a record default's missing fields take their own defaults (Java's rule; fastavro
    # leaves the record empty)
    assert all(g.pop("nested_default") == {"y": "é"} for g in got)
    assert got == [{k: v for k, v in e.items() if k != "nested_default"} for e in expected]
    assert expected[2]["color"] == "BLUE" and expected[0]["added_rec"] == {"x": "ü"}
    assert array.type == avro.arrow_type(avro.parse_schema(READER))


def test_unresolvable_pairs_are_schema_errors() -> None:
    w = avro.parse_schema({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string"}]})
    for reader in [
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]},
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"},
                                                   {"name": "b", "type": "int"}]},
        {"type": "record", "name": "Other", "fields": [{"name": "a", "type": "string"}]},
    ]:
        with pytest.raises(SchemaError):
            avro.decode(column([]), w, avro.parse_schema(reader))


@pytest.mark.usefixtures("loop")
def test_union_branch_the_reader_cannot_read_is_a_row_error() -> None:
    w = ["null", "int", "string"]
    datums = write(w, [1, "text", None])
    reader = avro.parse_schema('["null", "long"]')
    array, bad = avro.decode(column(datums), avro.parse_schema(w), reader, errors="null")
    assert array.to_pylist() == [1, None, None] and bad.tolist() == [1]


# --------------------------------------------------------------------------- Confluent


def _confluent_client() -> Any:
    registry = pytest.importorskip("confluent_kafka.schema_registry")
    return registry.SchemaRegistryClient.new_client({"url": "mock://kproto-avro-tests"})


@pytest.mark.usefixtures("loop")
def test_confluent_avro_serializer_golden_bytes() -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = _confluent_client()
    text = avro.parse_schema(ALL_TYPES).json
    ctx = SerializationContext("events", MessageField.VALUE)
    framed = [AvroSerializer(client, text)(r, ctx) for r in RECORDS]
    assert all(f[0] == 0 for f in framed)
    schema_id = int.from_bytes(framed[0][1:5], "big")
    array, bad = avro.decode(column(framed), avro.parse_schema(client.get_schema(
        schema_id).schema_str), skip=5)
    assert arrow_values(array) == [plain(r) for r in RECORDS] and len(bad) == 0
    # kproto's framed encoding is what the deserializer reads
    ours = avro.encode(array, avro.parse_schema(ALL_TYPES), prefix=framed[0][:5])
    assert ours.to_pylist() == framed
    back = [AvroDeserializer(client)(v, ctx) for v in ours.to_pylist()]
    assert [plain(r) for r in back] == [plain(r) for r in RECORDS]


# --------------------------------------------------------------------------- schemas


def test_canonical_form_and_fingerprint_match_fastavro() -> None:
    from fastavro.schema import fingerprint, to_parsing_canonical_form

    for schema in (ALL_TYPES, WRITER, READER, "int", ["null", "string"]):
        ours = avro.parse_schema(schema if not isinstance(schema, str) else f'"{schema}"')
        theirs = to_parsing_canonical_form(schema)
        assert ours.canonical_form == theirs
        # fastavro gives the 8 bytes (little-endian) of the 64-bit value
        assert ours.fingerprint == int.from_bytes(
            bytes.fromhex(fingerprint(theirs, "CRC-64-AVRO")), "little")


@pytest.mark.parametrize("bad", [
    '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]}',
    '{"type": "record", "name": "1R", "fields": []}',
    '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
    '{"type": "fixed", "name": "F", "size": -1}',
    '["int", "int"]',
    '[["int"], "string"]',
    '[]',
    '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}',
    '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"},'
    ' {"name": "a", "type": "int"}]}',
    '{"type": "array"}',
    '{"type": "record", "name": "R", "fields": [], "x": 1} trailing',
    '{"type": "record", "name": "R", "fields": [{"name": "r", "type": "R"}]}',
])
def test_invalid_schemas_raise_schema_error(bad: str) -> None:
    with pytest.raises(SchemaError):
        schema = avro.parse_schema(bad)
        avro.arrow_type(schema)        # the recursive one parses, but has no Arrow type


def test_invalid_logical_types_fall_back_to_the_base_type() -> None:
    schema = avro.parse_schema({"type": "record", "name": "R", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 2,
                               "scale": 5}},
        {"name": "t", "type": {"type": "string", "logicalType": "timestamp-millis"}},
        {"name": "x", "type": {"type": "long", "logicalType": "unknown-thing"}}]})
    assert avro.arrow_type(schema) == pa.struct([
        pa.field("d", pa.binary(), False), pa.field("t", pa.string(), False),
        pa.field("x", pa.int64(), False)])


@pytest.mark.usefixtures("loop")
def test_named_type_aliases_enum_symbols_and_union_branch_choice() -> None:
    writer = avro.parse_schema({"type": "record", "name": "Rec", "namespace": "old", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y", "Z"]}},
        {"name": "n", "type": "int"}]})
    reader = avro.parse_schema({"type": "record", "name": "Renamed", "namespace": "new",
                                "aliases": ["old.Rec"], "fields": [
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["Y", "X"]}},
        {"name": "n", "type": ["null", "long", "int"]}]})
    datums = write(json_of(writer), [{"e": "X", "n": 5}, {"e": "Z", "n": 6}])
    array, bad = avro.decode(column(datums), writer, reader, errors="null")
    assert bad.tolist() == [1]                   # Z: not in the reader's enum, no default
    assert array.to_pylist() == [{"e": "X", "n": 5}, None]
    # an int goes to the reader union's int branch (the same type before a promotion)
    assert array.field("n").type_codes.to_pylist()[0] == 2
    with pytest.raises(FormatError, match="enum symbol 2 of the writer"):
        avro.decode(column(datums), writer, reader)
    fixed = avro.parse_schema('{"type": "fixed", "name": "F", "size": 4}')
    with pytest.raises(SchemaError):
        avro.decode(column([]), fixed, avro.parse_schema(
            '{"type": "fixed", "name": "F", "size": 5}'))


def json_of(schema: avro.AvroSchema) -> Any:
    import json

    return json.loads(schema.json)


def test_schema_references_define_named_types() -> None:
    """Confluent's schema references: a schema using a record another one defines."""
    import pickle

    item = {"type": "record", "name": "Item", "namespace": "a", "fields": [
        {"name": "sku", "type": "string"}]}
    order = '{"type": "record", "name": "Order", "fields": [' \
        '{"name": "items", "type": {"type": "array", "items": "a.Item"}}]}'
    with pytest.raises(SchemaError, match="unknown Avro type 'a.Item'"):
        avro.parse_schema(order)
    schema = avro.parse_schema(order, references=[item])
    full = {"type": "record", "name": "Order", "fields": [
        {"name": "items", "type": {"type": "array", "items": item}}]}
    assert schema.canonical_form == avro.parse_schema(full).canonical_form
    assert schema.json == order and schema != avro.parse_schema(full)
    datums = write(full, [{"items": [{"sku": "é1"}]}])
    assert avro.decode(column(datums), schema)[0].to_pylist() == [{"items": [{"sku": "é1"}]}]
    assert pickle.loads(pickle.dumps(schema)) == schema


@pytest.mark.usefixtures("loop")
def test_encode_takes_columns_of_neighbouring_arrow_types() -> None:
    """What a DataFrame hands over: narrower ints, float32, string views, large lists,
    maps as list<struct<key, value>>, date64, time64[ns], timestamp[s], dictionaries."""
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "l", "type": "long"}, {"name": "i", "type": "int"},
        {"name": "d", "type": "double"}, {"name": "s", "type": "string"},
        {"name": "a", "type": {"type": "array", "items": "long"}},
        {"name": "m", "type": {"type": "map", "values": "int"}},
        {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
        {"name": "t", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "ds", "type": "string"}]}
    day = datetime.date(2024, 1, 1)
    table = pa.table({
        "l": pa.array([1, 2**32 - 1], pa.uint32()), "i": pa.array([3, -4], pa.int8()),
        "d": pa.array([1.5, 2.5], pa.float32()), "s": pa.array(["x", "é"], pa.string_view()),
        "a": pa.array([[1], []], pa.large_list(pa.int16())),
        "m": pa.array([[{"key": "k", "value": 1}], []],
                      pa.list_(pa.struct([("key", pa.string()), ("value", pa.int32())]))),
        "dt": pa.array([day] * 2, pa.date64()),
        "t": pa.array([1_000, 86_399_999_999_000], pa.time64("ns")),
        "ts": pa.array([datetime.datetime(2024, 1, 1, 12)] * 2, pa.timestamp("s")),
        "ds": pa.array(["a", "b"]).dictionary_encode()})
    out = avro.encode(table, avro.parse_schema(schema)).to_pylist()
    assert read(schema, out) == [
        {"l": 1, "i": 3, "d": 1.5, "s": "x", "a": [1], "m": {"k": 1}, "dt": day,
         "t": datetime.time(0, 0, 0, 1), "ts": datetime.datetime(2024, 1, 1, 12, tzinfo=UTC),
         "ds": "a"},
        {"l": 2**32 - 1, "i": -4, "d": 2.5, "s": "é", "a": [], "m": {}, "dt": day,
         "t": datetime.time(23, 59, 59, 999999),
         "ts": datetime.datetime(2024, 1, 1, 12, tzinfo=UTC), "ds": "b"}]


@pytest.mark.usefixtures("loop")
def test_recursive_schemas_decode_through_unroll() -> None:
    """A recursive schema has no Arrow type; unroll() gives a reader schema of bounded
    depth whose deeper fields are skipped (spark-avro's recursiveFieldMaxDepth)."""
    tree = {"type": "record", "name": "Node", "namespace": "t", "fields": [
        {"name": "label", "type": "string"},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["LEAF", "INNER"]}},
        {"name": "children", "type": {"type": "array", "items": "Node"}},
        {"name": "parent_label", "type": ["null", "string"]}]}
    writer = avro.parse_schema(tree)
    with pytest.raises(SchemaError, match="recursive"):
        avro.arrow_type(writer)

    def node(label: str, *children: dict[str, Any]) -> dict[str, Any]:
        return {"label": label, "kind": "INNER" if children else "LEAF",
                "children": list(children), "parent_label": None}

    value = node("a", node("b", node("c", node("d"))), node("e"))
    datums = write(tree, [value, node("z")])
    array, bad = avro.decode(column(datums), writer, avro.unroll(writer, depth=2))
    array.validate(full=True)
    assert len(bad) == 0
    first = array.to_pylist()[0]
    assert first["label"] == "a" and [c["label"] for c in first["children"]] == ["b", "e"]
    assert "children" not in first["children"][0]       # depth 2: the third level is skipped
    assert array.to_pylist()[1] == {"label": "z", "kind": "LEAF", "children": [],
                                    "parent_label": None}
    with pytest.raises(SchemaError):
        avro.unroll(writer, depth=0)
