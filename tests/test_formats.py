"""kproto.formats over Confluent's wire format with Avro and Protobuf: golden bytes from
confluent-kafka's AvroSerializer / ProtobufSerializer through the test registry, several
schema ids in one column (schema evolution), framing errors, and what kproto encodes
their deserializers read. (JSON: tests/test_formats_json.py; the Avro core:
tests/test_avro*.py.)"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto import formats
from kproto.errors import FormatError
from kproto.formats import _wire
from kproto.schema_registry import SchemaRegistryClient
from kproto.testing import SchemaRegistryServer

V1 = {"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "name", "type": "string"},
    {"name": "age", "type": ["null", "int"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}}]}
V2 = {**V1, "fields": V1["fields"] + [
    {"name": "email", "type": "string", "default": "none"},
    {"name": "score", "type": "double", "default": 0.0}]}
ROWS_V1 = [{"name": "Zoë 東京", "age": 31, "tags": ["x", ""], "kind": "B"},
           {"name": "", "age": None, "tags": [], "kind": "A"}]
ROWS_V2 = [{"name": "b", "age": 2, "tags": ["y"], "kind": "A", "email": "b@x", "score": 1.5}]


@pytest.fixture(scope="module")
def registry():
    with SchemaRegistryServer() as server:
        yield server


def avro_serialize(url: str, topic: str, schema: dict, rows: list[dict]) -> list[bytes]:
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    with Confluent({"url": url}) as client:
        serialize = AvroSerializer(client, json.dumps(schema))
        context = SerializationContext(topic, MessageField.VALUE)
        return [serialize(row, context) for row in rows]


def test_two_schema_ids_in_one_column_unify_to_the_newest(registry):
    old = avro_serialize(registry.url, "users", V1, ROWS_V1)
    new = avro_serialize(registry.url, "users", V2, ROWS_V2)
    ids = {v[1:5] for v in old + new}
    assert len(ids) == 2
    values = pa.array([new[0], old[0], None, old[1]])
    decoded = formats.decode(values, "avro", registry=registry.url)
    defaults = {"email": "none", "score": 0.0}
    assert decoded.to_pylist() == [ROWS_V2[0], {**ROWS_V1[0], **defaults}, None,
                                   {**ROWS_V1[1], **defaults}]
    # the subject's latest version as the reader; or an explicit reader schema
    assert formats.decode(values.slice(1), "avro", registry=registry.url,
                          subject="users-value").to_pylist()[0] == {**ROWS_V1[0], **defaults}
    narrow = {"type": "record", "name": "User", "namespace": "shop",
              "fields": [{"name": "name", "type": "string"}]}
    assert formats.decode(values, "avro", registry=registry.url, schema=narrow).to_pylist() \
        == [{"name": "b"}, {"name": "Zoë 東京"}, None, {"name": ""}]


def test_framing_errors_name_the_row_or_become_null(registry):
    good = avro_serialize(registry.url, "framing", V1, ROWS_V1)
    values = pa.array([good[0], b"\x01" + good[1][1:], good[1][:3],
                       b"\x00\x00\x00\x03\xe7" + good[1][5:], good[1][:8], good[1]])
    with pytest.raises(FormatError) as info:
        formats.decode(values, "avro", registry=registry.url)
    assert info.value.row == 1 and "magic byte 1" in str(info.value)
    with pytest.raises(FormatError) as info:
        formats.decode(values.slice(3), "avro", registry=registry.url)
    assert info.value.row == 0 and "999" in str(info.value)
    got = formats.decode_with_bad_rows(values, "avro", registry=registry.url, errors="null")
    assert got.bad_rows.tolist() == [1, 2, 3, 4]                   # 4: a truncated datum
    assert got.array.to_pylist() == [ROWS_V1[0], None, None, None, None, ROWS_V1[1]]


def test_what_kproto_encodes_confluents_avro_deserializer_reads(registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    array = formats.decode(pa.array(avro_serialize(registry.url, "enc", V2, ROWS_V2)), "avro",
                           registry=registry.url)
    encoded = formats.encode(array, "avro", schema=V2, registry=registry.url,
                             subject="enc-out-value")
    schema_id = SchemaRegistryClient(registry.url).get_latest("enc-out-value").schema_id
    assert encoded[0].as_py()[:5] == _wire.header(schema_id)
    with Confluent({"url": registry.url}) as client:
        deserialize = AvroDeserializer(client)
        context = SerializationContext("enc-out", MessageField.VALUE)
        assert [deserialize(v, context) for v in encoded.to_pylist()] == ROWS_V2
    # no schema: the subject's latest version, looked up, not registered again
    again = formats.encode(array, "avro", registry=registry.url, subject="enc-out-value")
    assert again.to_pylist() == encoded.to_pylist()
    plain = formats.encode(array, "avro", schema=V2)
    assert plain[0].as_py() == encoded[0].as_py()[5:]
    assert formats.decode(plain, "avro", schema=V2).to_pylist() == ROWS_V2


def _order_type():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"])
    first = proto.message_type.add(name="Other")
    first.field.add(name="x", number=1, type=field.TYPE_INT32)
    order = proto.message_type.add(name="Order")
    for name, number, kind, extra in [
            ("id", 1, field.TYPE_INT64, {}), ("customer", 2, field.TYPE_STRING, {}),
            ("tags", 3, field.TYPE_STRING, {"label": field.LABEL_REPEATED}),
            ("status", 4, field.TYPE_ENUM, {"type_name": ".shop.Order.Status"}),
            ("at", 5, field.TYPE_MESSAGE, {"type_name": ".google.protobuf.Timestamp"}),
            ("counts", 6, field.TYPE_MESSAGE, {"type_name": ".shop.Order.CountsEntry",
                                               "label": field.LABEL_REPEATED}),
            ("lines", 7, field.TYPE_MESSAGE, {"type_name": ".shop.Order.Line",
                                              "label": field.LABEL_REPEATED}),
            ("big", 8, field.TYPE_UINT64, {}), ("raw", 9, field.TYPE_BYTES, {})]:
        order.field.add(name=name, number=number, type=kind, **extra)
    status = order.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=field.TYPE_STRING)
    entry.field.add(name="value", number=2, type=field.TYPE_INT32)
    order.nested_type.add(name="Line").field.add(name="sku", number=1, type=field.TYPE_STRING)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(
        timestamp_pb2.DESCRIPTOR.serialized_pb))
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_golden_bytes_message_indexes_and_back(registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer,
        ProtobufSerializer,
    )
    from confluent_kafka.serialization import MessageField, SerializationContext

    order_cls = _order_type()
    full = order_cls(id=-5, customer="Zoë", tags=["a", "b"], status=1, big=2**64 - 1,
                     raw=b"\x00\xff")
    full.at.seconds = 1_700_000_000
    full.counts["x"] = 3
    full.lines.add(sku="s1")
    context = SerializationContext("orders", MessageField.VALUE)
    with Confluent({"url": registry.url}) as client:
        serialize = ProtobufSerializer(order_cls, client, {"use.deprecated.format": False})
        values = pa.array([serialize(full, context), None, serialize(order_cls(), context)])
    assert values[0].as_py()[5:7] == b"\x02\x02"        # one index: 1 (the second message)
    decoded = formats.decode(values, "protobuf", registry=registry.url)
    expected = {"id": -5, "customer": "Zoë", "tags": ["a", "b"], "status": "PAID",
                "at": {"seconds": 1_700_000_000, "nanos": 0}, "counts": [("x", 3)],
                "lines": [{"sku": "s1"}], "big": 2**64 - 1, "raw": b"\x00\xff"}
    empty = {"id": 0, "customer": "", "tags": [], "status": "NEW", "at": None, "counts": [],
             "lines": [], "big": 0, "raw": b""}
    assert decoded.to_pylist() == [expected, None, empty]
    encoded = formats.encode(decoded, "protobuf", schema=order_cls, registry=registry.url,
                             subject="orders-out-value")
    deserialize = ProtobufDeserializer(order_cls, {"use.deprecated.format": False})
    assert [deserialize(v, context) for v in encoded.to_pylist()] == [full, None, order_cls()]
    plain = pa.array([full.SerializeToString(), b"\xff\xff"])
    with pytest.raises(FormatError) as info:
        formats.decode(plain, "protobuf", schema=order_cls)
    assert info.value.row == 1 and "shop.Order" in str(info.value)
    bad_index = pa.array([values[0].as_py()[:5] + b"\x02\x14" + values[0].as_py()[7:]])
    got = formats.decode_with_bad_rows(bad_index, "protobuf", registry=registry.url,
                                       errors="null")
    assert got.bad_rows.tolist() == [0] and got.array.to_pylist() == [None]


def test_message_indexes_wire_form():
    assert _wire.encode_message_indexes((0,)) == b"\x00"
    assert _wire.encode_message_indexes((1,)) == b"\x02\x02"
    assert _wire.encode_message_indexes((2, 0, 70)) == b"\x06\x04\x00\x8c\x01"
    for indexes in [(0,), (1,), (3, 1), (2, 0, 70)]:
        data = b"\x00" * 5 + _wire.encode_message_indexes(indexes) + b"payload"
        assert _wire.message_indexes(data, 5) == (indexes, len(data) - 7)
    with pytest.raises(ValueError):
        _wire.message_indexes(b"\x00" * 5 + b"\x02", 5)       # count 1, no index


@pytest.mark.broker
def test_send_batch_encodes_a_struct_column_and_registers(registry, tansu):
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from kproto import Admin, Consumer, Producer

    topic = "formats-send-batch"
    users = pa.array(ROWS_V1 * 50, formats.reader_type("avro", schema=V1))
    with Admin(bootstrap_servers=tansu.bootstrap) as admin:
        admin.create_topics({topic: 1}, exist_ok=True)
    with Producer(bootstrap_servers=tansu.bootstrap) as producer:
        producer.send_batch(topic, pa.table({"value": users}), value_format="avro",
                            value_schema=V1, registry=registry.url).result(30)
        producer.send_batch(topic, pa.table({"value": users.slice(0, 1)}), value_format="avro",
                            value_schema=V1, registry=registry.url,
                            subject_name_strategy="RecordNameStrategy").result(30)
    subjects = SchemaRegistryClient(registry.url).get_subjects()
    assert f"{topic}-value" in subjects and "shop.User" in subjects
    with Consumer(bootstrap_servers=tansu.bootstrap) as consumer:
        table = consumer.read_range(topic)
    values = table.column("value")
    assert formats.decode(values, "avro", registry=registry.url).to_pylist() == \
        ROWS_V1 * 50 + ROWS_V1[:1]
    with Confluent({"url": registry.url}) as client:
        deserialize = AvroDeserializer(client)
        context = SerializationContext(topic, MessageField.VALUE)
        assert [deserialize(v, context) for v in values.to_pylist()[:2]] == ROWS_V1


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.binary(max_size=40), st.builds(
    lambda tail, schema_id: b"\x00" + schema_id.to_bytes(4, "big") + tail,
    st.binary(max_size=40), st.sampled_from([1, 2, 3, 99]))), max_size=25))
def test_hostile_framed_values_never_crash_nor_misplace_rows(values, hostile_registry):
    """Random bytes with real and unknown ids: every row decodes or is reported bad;
    with errors='raise' only FormatError comes out."""
    column = pa.array(values, pa.binary())
    url, protobuf_id = hostile_registry
    for fmt in ("avro", "json", "protobuf"):
        got = formats.decode_with_bad_rows(column, fmt, registry=url, errors="null")
        assert len(got.array) == len(values)
        nulls = {i for i, v in enumerate(values) if v is None}
        bad = set(got.bad_rows.tolist())
        assert not bad & nulls
        assert {i for i in range(len(values)) if not got.array[i].is_valid} >= bad | nulls
        try:
            formats.decode(column, fmt, registry=url)
        except FormatError as exc:
            assert exc.row is not None and exc.row in bad
        else:
            assert not bad


@pytest.fixture(scope="module")
def hostile_registry():
    """A registry whose ids 1, 2, 3 are an Avro, a JSON and a Protobuf schema."""
    import base64

    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto(name="h.proto", package="h", syntax="proto3")
    message = proto.message_type.add(name="M")
    message.field.add(name="a", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64)
    message.field.add(name="s", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    with SchemaRegistryServer() as server:
        client = SchemaRegistryClient(server.url)
        client.register("a", json.dumps(V1))
        client.register("j", json.dumps({"type": "object", "properties": {
            "a": {"type": "integer"}, "s": {"type": "string"}}}), "JSON")
        protobuf_id = client.register("p", base64.b64encode(proto.SerializeToString()).decode(),
                                      "PROTOBUF")
        yield server.url, protobuf_id


def test_an_unreachable_registry_is_not_a_bad_row():
    from kproto.errors import SchemaRegistryError

    values = pa.array([_wire.header(1) + b"\x02a"])
    dead = SchemaRegistryClient("http://127.0.0.1:9", max_retries=0, timeout=2)
    with pytest.raises(SchemaRegistryError):
        formats.decode(values, "avro", registry=dead, errors="null")


def test_protobuf_two_schema_versions_unify_to_the_newest(registry):
    import base64

    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    def version(fields: list[tuple[str, int, int]]):
        proto = descriptor_pb2.FileDescriptorProto(name="evo.proto", package="evo",
                                                   syntax="proto3")
        message = proto.message_type.add(name="M")
        for name, number, kind in fields:
            message.field.add(name=name, number=number, type=kind)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        text = base64.b64encode(proto.SerializeToString()).decode()
        return message_factory.GetMessageClass(pool.FindMessageTypeByName("evo.M")), text

    kind = __import__("google.protobuf.descriptor_pb2", fromlist=["x"]).FieldDescriptorProto
    old_cls, old_text = version([("a", 1, kind.TYPE_INT64)])
    new_cls, new_text = version([("a", 1, kind.TYPE_INT64), ("b", 2, kind.TYPE_STRING)])
    client = SchemaRegistryClient(registry.url)
    client.set_compatibility("NONE", "evo-value")
    old_id = client.register("evo-value", old_text, "PROTOBUF")
    new_id = client.register("evo-value", new_text, "PROTOBUF")
    values = pa.array([_wire.header(new_id) + b"\x00" + new_cls(a=1, b="x").SerializeToString(),
                       _wire.header(old_id) + b"\x00" + old_cls(a=2).SerializeToString()])
    assert formats.decode(values, "protobuf", registry=client).to_pylist() == [
        {"a": 1, "b": "x"}, {"a": 2, "b": None}]
