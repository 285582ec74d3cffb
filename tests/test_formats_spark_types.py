"""kproto.spark.typed without a Spark session: decoded Arrow types brought to the types
Spark has (what read() must yield), option parsing and subject naming."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from kproto import formats  # noqa: E402
from kproto.errors import ConfigError  # noqa: E402
from kproto.spark import typed  # noqa: E402
from kproto.testing import SchemaRegistryServer  # noqa: E402


def test_avro_types_as_spark_reads_them():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
        {"name": "either", "type": ["int", "string", "null"]},
        {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "long"}}}]}
    rows = [{"kind": "B", "either": 7, "t": datetime.time(1, 2, 3, 4000),
             "ts": datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc),
             "f": b"ab", "m": {"x": [1, 2]}},
            {"kind": "A", "either": "s", "t": datetime.time(0), "ts":
             datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc), "f": b"\x00\x01",
             "m": {}},
            {"kind": "A", "either": None, "t": datetime.time(0), "ts":
             datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc), "f": b"zz", "m": {}}]
    import io

    fastavro = pytest.importorskip("fastavro")
    parsed = fastavro.parse_schema(schema)
    datums = []
    for row in rows:                   # fastavro writes them (pa.array builds no unions)
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, row)
        datums.append(out.getvalue())
    encoded = pa.array(datums, pa.binary())
    decoded = formats.decode(encoded, "avro", schema=schema)
    target = typed.spark_type(decoded.type)
    assert target == pa.struct([
        ("kind", pa.string()),
        ("either", pa.struct([("member0", pa.int32()), ("member1", pa.string())])),
        ("t", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("f", pa.binary()),
        ("m", pa.map_(pa.string(), pa.list_(pa.field("element", pa.int64()))))])
    spark = typed.to_spark(decoded, target).to_pylist()
    assert [r["kind"] for r in spark] == ["B", "A", "A"]
    assert [r["either"] for r in spark] == [{"member0": 7, "member1": None},
                                            {"member0": None, "member1": "s"},
                                            None]
    assert spark[0]["t"] == ((1 * 60 + 2) * 60 + 3) * 1_000_000 + 4000
    assert spark[0]["m"] == [("x", [1, 2])] and spark[1]["f"] == b"\x00\x01"
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type

    assert to_arrow_type(from_arrow_type(target), timezone="UTC") is not None   # all Spark types


def test_unsigned_and_big_decimals():
    assert typed.spark_type(pa.uint64()) == pa.decimal128(20, 0)
    array = pa.array([2**64 - 1, 0], pa.uint64())
    assert typed.to_spark(array, pa.decimal128(20, 0)).to_pylist() == [
        decimal.Decimal(2**64 - 1), decimal.Decimal(0)]
    assert typed.spark_type(pa.uint32()) == pa.int64()
    assert typed.spark_type(pa.decimal256(50, 3)) == pa.string()


def test_options_resolve_on_the_driver_and_name_subjects():
    schema = '{"type": "record", "name": "U", "namespace": "n", "fields": [' \
             '{"name": "a", "type": "long"}]}'
    with SchemaRegistryServer() as registry:
        from kproto.schema_registry import SchemaRegistryClient

        SchemaRegistryClient(registry.url).register("t-value", schema)
        found = typed.read_formats({"valueFormat": "avro", "subscribe": "t",
                                    "schema.registry.url": registry.url})
        assert [(c.column, c.subject, c.spark) for c in found] == [
            ("value", "t-value", pa.struct([("a", pa.int64())]))]
        with pytest.raises(ConfigError):
            typed.read_formats({"valueFormat": "avro", "subscribe": "a,b",
                                "schema.registry.url": registry.url})
    assert typed.read_formats({"valueFormat": "json", "valueSchema": '{"type": "object", '
                               '"properties": {"x": {"type": "string"}}}'})[0].spark == \
        pa.struct([("x", pa.string())])
    assert formats.subject_name("t", "value") == "t-value"
    assert formats.subject_name("t", "value", "RecordNameStrategy", "n.U") == "n.U"
    assert formats.subject_name("t", "key", "TopicRecordNameStrategy", "n.U") == "t-n.U"
    assert formats.record_name(schema, "avro") == "n.U"
    with pytest.raises(ConfigError):
        formats.subject_name("t", "value", "NoSuchStrategy")
    with pytest.raises(ConfigError):
        typed.SinkFormats.from_options({"valueFormat": "avro",
                                        "valueSubjectNameStrategy": "Nope"})
    derived = typed.avro_schema_for(pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string())),
                                               ("c", pa.timestamp("us", tz="UTC"))]), "v")
    back = formats.reader_type("avro", schema=derived)
    assert [f.name for f in back] == ["a", "b", "c"]


def test_sink_derives_registers_and_asks_once():
    rows = [{"a": 1, "b": ["x"], "c": None}, {"a": None, "b": [], "c": "é"}]
    table = pa.table({"value": pa.array(rows, pa.struct([
        ("a", pa.int64()), ("b", pa.list_(pa.string())), ("c", pa.string())]))})
    with SchemaRegistryServer() as registry:
        sink = typed.SinkFormats.from_options({"valueFormat": "avro",
                                               "schema.registry.url": registry.url})
        first = sink.encode("t", table)
        asked = len(registry.requests)
        again = sink.encode("t", table)
        assert len(registry.requests) == asked            # schema and id known in the task
        assert again.column("value").to_pylist() == first.column("value").to_pylist()
        decoded = formats.decode(first.column("value"), "avro", registry=registry.url)
        assert decoded.to_pylist() == rows
        from kproto.schema_registry import SchemaRegistryClient

        assert SchemaRegistryClient(registry.url).get_subjects() == ["t-value"]


def test_recursive_avro_schema_inline_unrolled_by_the_option():
    import io
    import json

    fastavro = pytest.importorskip("fastavro")
    tree = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "kids", "type": {"type": "array",
                                                                "items": "Node"}}]}
    options = {"valueFormat": "avro", "valueSchema": json.dumps(tree)}
    with pytest.raises(ConfigError, match="Node is recursive.*recursiveFieldMaxDepth to 1-15"):
        typed.read_formats(options)
    for bad in ("16", "x", "-2"):
        with pytest.raises(ConfigError, match="recursiveFieldMaxDepth"):
            typed.read_formats({**options, "recursiveFieldMaxDepth": bad})
    for off in ("-1", "0"):          # Spark's "not permitted"
        with pytest.raises(ConfigError, match="is recursive"):
            typed.read_formats({**options, "recursiveFieldMaxDepth": off})
    (column,) = typed.read_formats({**options, "recursiveFieldMaxDepth": "1"})
    assert column.spark == pa.struct([("v", pa.int32())])
    (column,) = typed.read_formats({**options, "RECURSIVEFIELDMAXDEPTH": "2"})
    assert column.spark == pa.struct([("v", pa.int32()),
                                      ("kids", pa.list_(pa.field("element", pa.struct(
                                          [("v", pa.int32())]))))])
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(tree),
                               {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3, "kids": []}]}]})
    got = column.decode(pa.array([buf.getvalue(), None], pa.binary()))
    assert got.to_pylist() == [{"v": 1, "kids": [{"v": 2}]}, None]
    plain = {"valueFormat": "avro", "valueSchema": json.dumps(
        {"type": "record", "name": "P", "fields": [{"name": "v", "type": "int"}]})}
    (column,) = typed.read_formats({**plain, "recursiveFieldMaxDepth": "3"})   # no effect
    assert column.reader is None
