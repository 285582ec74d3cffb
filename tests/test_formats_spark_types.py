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
from kproto.schema_registry import SchemaRegistryClient  # noqa: E402
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


def test_timestamp_nanos_read_as_exact_long_nanoseconds():
    """Issue 26 item 6: a valid timestamp-nanos value failed the Spark task (ArrowInvalid
    'would lose data' in the cast to microseconds). Spark has no nanosecond timestamp;
    spark-avro reads timestamp-nanos as a long: so does kproto, exactly."""
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-nanos"}},
        {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}
    nanos = [1_700_000_000_123_456_789, -1, 2**63 - 1]
    arrow = formats.reader_type("avro", schema=schema)
    t = typed.spark_type(arrow)
    assert t == pa.struct([("ts", pa.int64()), ("local", pa.int64()),
                           ("us", pa.timestamp("us", tz="UTC"))])
    array = pa.array([{"ts": n, "local": n, "us": 5} for n in nanos],
                     pa.struct([("ts", pa.int64()), ("local", pa.int64()), ("us", pa.int64())]))
    values = formats.encode(array.cast(arrow), "avro", schema=schema)
    column = typed.ColumnFormat("value", "avro", None, schema, None, arrow, t, "raise")
    out = column.decode(values)
    assert out.field("ts").to_pylist() == nanos and out.field("local").to_pylist() == nanos


def test_planned_reader_schema_is_kept_when_the_subject_evolves():
    """Issue 26 item 1: executors decoded with the subject's `latest`, asked per batch, so
    a v2 registered under a running query changed the type under Spark's feet. The
    reader schema is fixed on the driver (the version the query was planned with) and
    executors never ask for `latest`; a reader created after v2 was registered, for a
    query planned before, keeps the planned version."""
    v1 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
    v2 = {**v1, "fields": v1["fields"] + [{"name": "age", "type": "int", "default": 0}]}
    with SchemaRegistryServer() as registry:
        client = SchemaRegistryClient(registry.url)
        client.register("users-value", v1)
        options = {"subscribe": "users", "valueFormat": "avro",
                   "schema.registry.url": registry.url}
        planned = typed.spark_schema(pa.schema([("value", pa.binary())]),
                                     typed.read_formats(options))
        old = formats.encode(pa.array([{"name": "a"}]), "avro", schema=v1, registry=client,
                             subject="users-value")
        client.register("users-value", v2)
        new = formats.encode(pa.array([{"name": "b", "age": 3}]), "avro", schema=v2,
                             registry=client, subject="users-value")
        (column,) = typed.read_formats(options, planned)
        assert column.spark == pa.struct([("name", pa.string())])
        import pickle

        shipped = pickle.loads(pickle.dumps(column))        # as a task gets it
        before = len(registry.requests)
        values = pa.concat_arrays([old, new])
        for _ in range(3):
            assert shipped.decode(values).to_pylist() == [{"name": "a"}, {"name": "b"}]
        asked = registry.requests[before:]
        assert not [r for r in asked if "latest" in r[1]]
        assert len(asked) <= 1                      # v2's id, once
        # planned now: the latest
        (column,) = typed.read_formats(options)
        assert column.spark == pa.struct([("name", pa.string()), ("age", pa.int32())])
        # a planned type no version has: a ConfigError, not a task failure later
        other = typed.spark_schema(pa.schema([("value", pa.binary())]), typed.read_formats(
            {**options, "valueSchema": '{"type": "record", "name": "X", "fields": ['
             '{"name": "z", "type": "long"}]}'}))
        with pytest.raises(ConfigError, match="no version of subject users-value"):
            typed.read_formats(options, other)


def test_sink_options_name_what_is_wrong():
    """A record naming strategy without a schema has no record name for the subject (the
    sink took <topic>-value's latest instead, and registered under another record's
    subject); inline schema JSON that does not parse names its option."""
    base = {"valueFormat": "json", "schema.registry.url": "http://127.0.0.1:1"}
    for strategy in ("RecordNameStrategy", "TopicRecordNameStrategy"):
        with pytest.raises(ConfigError, match=f"valueSubjectNameStrategy={strategy} needs "
                                              "valueSchema"):
            typed.SinkFormats.from_options({**base, "valueSubjectNameStrategy": strategy})
        assert typed.SinkFormats.from_options(
            {**base, "valueSubjectNameStrategy": strategy, "valueSubject": "s"}) is not None
    with SchemaRegistryServer() as registry:
        # Avro: the schema derived from the column (record <topic>_value) names the
        # subject; <topic>-value's latest (another record) is not asked
        client = SchemaRegistryClient(registry.url)
        client.register("t-value", {"type": "record", "name": "User", "namespace": "shop",
                                    "fields": [{"name": "name", "type": "string"}]})
        sink = typed.SinkFormats.from_options({
            "valueFormat": "avro", "schema.registry.url": registry.url,
            "valueSubjectNameStrategy": "TopicRecordNameStrategy"})
        sink.encode("t", pa.table({"value": pa.array([{"id": 1}])}))
        assert client.get_subjects() == ["t-t_value", "t-value"]
    with pytest.raises(ConfigError, match="option valueSchema is not valid JSON"):
        typed.SinkFormats.from_options({**base, "valueSchema": '{"type": "record",'})
    with pytest.raises(ConfigError, match="option keySchema is not valid JSON"):
        typed.read_formats({"keyFormat": "avro", "keySchema": "[bad"})
    (column,) = typed.read_formats({"valueFormat": "avro", "valueSchema": " string "})
    assert column.spark == pa.string()
