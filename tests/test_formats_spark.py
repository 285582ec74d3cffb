"""Spark: a topic of Confluent-framed Avro (written by confluent-kafka's AvroSerializer)
read as a typed DataFrame through the test registry, written back as Avro with
registration, and read again. One local[2] session; two Spark jobs each way."""

from __future__ import annotations

import datetime
import json

import pyarrow as pa
import pytest

from kproto import Admin, Producer
from kproto.schema_registry import SchemaRegistryClient
from kproto.testing import SchemaRegistryServer

from .spark_support import local_spark

pytestmark = pytest.mark.broker

SCHEMA = {"type": "record", "name": "Event", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "who", "type": {"type": "record", "name": "Who", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"]}]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12,
                               "scale": 2}}]}
N = 300


def rows():
    import decimal

    out = []
    for i in range(N):
        out.append({"id": i, "who": {"name": f"Zoë-{i}", "age": None if i % 3 else i},
                    "tags": [f"t{j}" for j in range(i % 3)], "attrs": {"n": i} if i % 2 else {},
                    "kind": "AB"[i % 2],
                    "at": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
                    + datetime.timedelta(milliseconds=i),
                    "price": decimal.Decimal(i) / 100})
    return out


def confluent_values(url: str, serializer, topic: str, objects) -> list[bytes]:
    """``objects`` as ``topic``'s values, serialized by a confluent-kafka serializer
    (``serializer(client)``) that registers its schema with the registry at ``url``."""
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.serialization import MessageField, SerializationContext

    with Confluent({"url": url}) as client:
        serialize = serializer(client)
        context = SerializationContext(topic, MessageField.VALUE)
        return [serialize(o, context) for o in objects]


@pytest.fixture(scope="module")
def spark():
    yield from local_spark("kproto-formats", {"spark.sql.session.timeZone": "UTC"})


def test_read_typed_write_back_read_again(spark, tansu):
    from confluent_kafka.schema_registry.avro import AvroSerializer

    written = rows()
    with SchemaRegistryServer() as registry:
        values = confluent_values(registry.url, lambda c: AvroSerializer(c, json.dumps(SCHEMA)),
                                  "events-avro", written)
        with Admin(bootstrap_servers=tansu.bootstrap) as admin:
            admin.create_topics({"events-avro": 2, "events-avro-copy": 1}, exist_ok=True)
        keys = pa.array([{"k": i, "who": f"Zoë-{i}"} for i in range(N)])
        with Producer(bootstrap_servers=tansu.bootstrap) as producer:   # keys: kproto's JSON
            producer.send_batch("events-avro", pa.table({"key": keys, "value": values}),
                                key_format="json", registry=registry.url).result(30)

        def read(topic: str):
            return (spark.read.format("kproto")
                    .option("kafka.bootstrap.servers", tansu.bootstrap)
                    .option("subscribe", topic).option("valueFormat", "avro")
                    .option("keyFormat", "json")
                    .option("schema.registry.url", registry.url).load())

        df = read("events-avro")
        value_type = df.schema["value"].dataType
        assert value_type.simpleString().startswith("struct<id:bigint,who:struct<name:string")
        assert df.schema["key"].dataType.simpleString() == "struct<k:bigint,who:string>"
        pairs = sorted((r.asDict(recursive=True) for r in df.select("key", "value").collect()),
                       key=lambda r: r["key"]["k"])
        assert [p["key"] for p in pairs] == keys.to_pylist()
        got = [p["value"] for p in pairs]
        # Spark hands timestamps back naive, in the session's time zone (UTC here)
        expected = [{**r, "at": r["at"].replace(tzinfo=None)} for r in written]
        assert got == expected

        (df.select("key", "value").write.format("kproto")
         .option("kafka.bootstrap.servers", tansu.bootstrap)
         .option("topic", "events-avro-copy").option("valueFormat", "avro")
         .option("keyFormat", "json")
         .option("valueSubjectNameStrategy", "TopicRecordNameStrategy")
         .option("valueSchema", json.dumps(SCHEMA))
         .option("schema.registry.url", registry.url).mode("append").save())
        ours = SchemaRegistryClient(registry.url)
        assert "events-avro-copy-shop.Event" in ours.get_subjects()
        again = (spark.read.format("kproto")
                 .option("kafka.bootstrap.servers", tansu.bootstrap)
                 .option("subscribe", "events-avro-copy").option("valueFormat", "avro")
                 .option("valueSubject", "events-avro-copy-shop.Event")
                 .option("keyFormat", "json")
                 .option("schema.registry.url", registry.url).load())
        back = sorted((r.asDict(recursive=True) for r in again.select("key", "value").collect()),
                      key=lambda r: r["key"]["k"])
        assert [b["value"] for b in back] == expected
        assert [b["key"] for b in back] == keys.to_pylist()


TREE = {"type": "record", "name": "Node", "namespace": "t", "fields": [
    {"name": "label", "type": "string"},
    {"name": "children", "type": {"type": "array", "items": "Node"}},
    {"name": "next", "type": ["null", "Node"], "default": None}]}


def test_recursive_avro_needs_recursive_field_max_depth(spark, tansu):
    """A recursive schema (confluent-kafka's AvroSerializer writes the values) has no Spark
    type: a ConfigError names the option; with it, each record is read at most that many
    times on a path, the deeper fields dropped (as spark-avro's from_avro)."""
    from confluent_kafka.schema_registry.avro import AvroSerializer

    def node(label, children=(), next=None):
        return {"label": label, "children": list(children), "next": next}

    trees = [node("a", [node("b", [node("c")]), node("d")], node("n", next=node("m"))),
             node("z")]
    with SchemaRegistryServer() as registry:
        values = confluent_values(registry.url, lambda c: AvroSerializer(c, json.dumps(TREE)),
                                  "trees", trees)
        with Admin(bootstrap_servers=tansu.bootstrap) as admin:
            admin.create_topics({"trees": 1}, exist_ok=True)
        with Producer(bootstrap_servers=tansu.bootstrap) as producer:
            producer.send_batch("trees", pa.table({"value": values})).result(30)

        def read(**options):
            reader = (spark.read.format("kproto")
                      .option("kafka.bootstrap.servers", tansu.bootstrap)
                      .option("subscribe", "trees").option("valueFormat", "avro")
                      .option("schema.registry.url", registry.url))
            for k, v in options.items():
                reader = reader.option(k, v)
            return reader.load()

        with pytest.raises(Exception, match="recursive.*recursiveFieldMaxDepth"):
            read()
        df = read(recursiveFieldMaxDepth="2")
        assert df.schema["value"].dataType.simpleString() == (
            "struct<label:string,children:array<struct<label:string>>,"
            "next:struct<label:string>>")
        got = [r.value.asDict(recursive=True) for r in df.select("value").collect()]
        assert got == [{"label": "a", "children": [{"label": "b"}, {"label": "d"}],
                        "next": {"label": "n"}},
                       {"label": "z", "children": [], "next": None}]


def test_protobuf_read_typed_write_back_read_again(spark, tansu):
    """Confluent-framed Protobuf (confluent-kafka's ProtobufSerializer: message indexes, a
    well-known Timestamp import) read as a typed DataFrame through the test registry
    (valueSchema names the message of the file), written back by the sink with the
    subject's schema (ProtobufDeserializer reads it), and read again."""
    import decimal

    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer,
        ProtobufSerializer,
    )
    from confluent_kafka.serialization import MessageField, SerializationContext

    from kproto import Consumer

    from .test_formats import _order_type

    order_cls = _order_type()
    orders = []
    for i in range(40):
        order = order_cls(id=i - 20, customer=f"Zoë-{i}", tags=[f"t{j}" for j in range(i % 3)],
                          status=i % 2, big=2**64 - 1 - i, raw=bytes([i, 255]))
        if i % 4:
            order.at.seconds, order.at.nanos = 1_700_000_000 + i, 1000 * i
        order.counts["n"] = i
        order.lines.add(sku=f"s{i}")
        orders.append(order)
    with SchemaRegistryServer() as registry:
        values = confluent_values(
            registry.url,
            lambda c: ProtobufSerializer(order_cls, c, {"use.deprecated.format": False}),
            "orders-proto", orders)
        with Admin(bootstrap_servers=tansu.bootstrap) as admin:
            admin.create_topics({"orders-proto": 2, "orders-proto-copy": 1}, exist_ok=True)
        with Producer(bootstrap_servers=tansu.bootstrap) as producer:
            producer.send_batch("orders-proto", pa.table({"value": values})).result(30)
        reader = (spark.read.format("kproto").option("kafka.bootstrap.servers", tansu.bootstrap)
                  .option("subscribe", "orders-proto").option("valueFormat", "protobuf")
                  .option("schema.registry.url", registry.url))
        with pytest.raises(Exception, match=r"several messages \(shop.Other, shop.Order\)"):
            reader.load()                 # which message of the file: valueSchema names it
        df = reader.option("valueSchema", "shop.Order").load()
        assert df.schema["value"].dataType.simpleString() == (
            "struct<id:bigint,customer:string,tags:array<string>,status:string,"
            "at:struct<seconds:bigint,nanos:int>,counts:map<string,int>,"
            "lines:array<struct<sku:string>>,big:decimal(20,0),raw:binary>")
        got = sorted((r.value.asDict(recursive=True) for r in df.select("value").collect()),
                     key=lambda v: v["id"])
        # the sink frames with the subject's schema (valueSubject) and its message
        (df.select("value").write.format("kproto")
         .option("kafka.bootstrap.servers", tansu.bootstrap)
         .option("topic", "orders-proto-copy").option("valueFormat", "protobuf")
         .option("valueSubject", "orders-proto-value").option("valueSchema", "shop.Order")
         .option("schema.registry.url", registry.url).mode("append").save())
        again = (spark.read.format("kproto").option("kafka.bootstrap.servers", tansu.bootstrap)
                 .option("subscribe", "orders-proto-copy").option("valueFormat", "protobuf")
                 .option("valueSubject", "orders-proto-value")
                 .option("valueSchema", "shop.Order")
                 .option("schema.registry.url", registry.url).load())
        back = sorted((r.value.asDict(recursive=True) for r in again.select("value").collect()),
                      key=lambda v: v["id"])
        with Consumer(bootstrap_servers=tansu.bootstrap) as consumer:
            copied = consumer.read_range("orders-proto-copy").column("value").to_pylist()
    deserialize = ProtobufDeserializer(order_cls, {"use.deprecated.format": False})
    context = SerializationContext("orders-proto", MessageField.VALUE)
    assert sorted((deserialize(v, context) for v in copied), key=lambda o: o.id) == orders
    assert back == got
    expected = [{"id": o.id, "customer": o.customer, "tags": list(o.tags),
                 "status": ["NEW", "PAID"][o.status],
                 "at": {"seconds": o.at.seconds, "nanos": o.at.nanos} if o.HasField("at")
                 else None, "counts": dict(o.counts), "lines": [{"sku": o.lines[0].sku}],
                 "big": decimal.Decimal(o.big), "raw": bytearray(o.raw)} for o in orders]
    assert got == expected


def test_streaming_typed_read_survives_a_new_schema_version(spark, tansu, unique_topic):
    """Issue 26 item 1: a running typed streaming read while a compatible v2 is registered
    and v2 records arrive. Rows of both versions decode to the reader schema the query
    started with (v1), the query keeps running, and the executors never ask the registry
    for `latest`: after warm-up, batches ask nothing."""
    v1 = {"type": "record", "name": "User", "namespace": "evo", "fields": [
        {"name": "name", "type": "string"}, {"name": "n", "type": "long"}]}
    v2 = {**v1, "fields": v1["fields"] + [
        {"name": "email", "type": ["null", "string"], "default": None}]}
    topic = unique_topic
    with SchemaRegistryServer() as registry:
        client = SchemaRegistryClient(registry.url)
        with Admin(bootstrap_servers=tansu.bootstrap) as admin:
            admin.create_topics({topic: 1}, exist_ok=True)

        def send(schema: dict, first: int, n: int) -> None:
            from kproto import formats

            rows = [{"name": f"u{i}", "n": i, **({"email": f"{i}@x"} if schema is v2 else {})}
                    for i in range(first, first + n)]
            values = formats.encode(pa.array(rows), "avro", schema=schema, registry=client,
                                    subject=f"{topic}-value")
            with Producer(bootstrap_servers=tansu.bootstrap) as producer:
                producer.send_batch(topic, pa.table({"value": values})).result(30)

        send(v1, 0, 50)
        stream = (spark.readStream.format("kproto")
                  .option("kafka.bootstrap.servers", tansu.bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("valueFormat", "avro")
                  .option("schema.registry.url", registry.url).load())
        name = f"evo_{topic.replace('-', '_')}"
        query = (stream.select("value.name", "value.n").writeStream.format("memory")
                 .queryName(name).start())
        try:
            query.processAllAvailable()
            send(v2, 50, 50)                   # registers v2 under the running query
            query.processAllAvailable()
            warm = len(registry.requests)
            for first in (100, 130, 160):      # both versions, batch after batch
                send(v1, first, 10)
                send(v2, first + 10, 20)
                query.processAllAvailable()
            assert query.isActive and query.exception() is None
            asked = [(r, peer) for r, peer in zip(registry.requests[warm:],
                                                  registry.peers[warm:], strict=True)
                     if r[0] == "GET"]
            # no `latest`, only writer ids, and each id asked once per Python worker (a
            # worker that has not met v2 yet asks once; how many workers Spark keeps is
            # its own business: a worker's one keep-alive connection tells it apart)
            assert {r[1] for r, _ in asked} <= {"/schemas/ids/1", "/schemas/ids/2"}, asked
            assert len(asked) == len(set(asked)), asked
            got = sorted((r["name"], r["n"]) for r in spark.sql(f"select * from {name}")
                         .collect())
            assert got == sorted((f"u{i}", i) for i in range(190))
            assert spark.sql(f"select * from {name}").columns == ["name", "n"]
        finally:
            query.stop()
