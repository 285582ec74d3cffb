"""Differential tests of kproto's Protobuf decoding and encoding against the protobuf
runtime (issue 26's checking): random message types built as FileDescriptorProtos
(tests/protobuf_strategies.py), random messages of them serialized by the runtime (and
mangled now and then), decoded by kproto and compared with what the runtime parses,
field by field; kproto's encoding of what it decoded parsed back by the runtime to the
same; and confluent-kafka's ProtobufSerializer / ProtobufDeserializer through the
registry, both ways."""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto import formats
from kproto.errors import EncodeError, FormatError
from kproto.formats import _wire
from kproto.schema_registry import SchemaRegistryClient
from kproto.testing import SchemaRegistryServer

from .protobuf_strategies import NotUtf8, comparable, expected, files, fill, message_class

SETTINGS = settings(max_examples=500, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _mangled(data: Any, payload: bytes) -> bytes:
    how = data.draw(st.integers(0, 9), label="mangle")
    if how == 0 and payload:
        return payload[:data.draw(st.integers(0, len(payload) - 1))]
    if how == 1:
        return payload + data.draw(st.binary(min_size=1, max_size=4))
    if how == 2:
        return data.draw(st.binary(max_size=12))
    return payload


def _oracle(cls: Any, payloads: list[bytes | None]) -> tuple[list[Any], list[int], list[Any]]:
    """What the runtime makes of each payload: (expected rows, bad rows, messages)."""
    rows, bad, messages = [], [], []
    for row, payload in enumerate(payloads):
        message = None
        if payload is not None:
            try:
                message = cls.FromString(payload)
                rows.append(expected(message))
            except NotUtf8:
                message = None
                rows.append(None)
                bad.append(row)
            except Exception:  # noqa: BLE001 - the runtime's DecodeError
                message = None
                rows.append(None)
                bad.append(row)
        else:
            rows.append(None)
        messages.append(message)
    return rows, bad, messages


@SETTINGS
@given(file=files(), data=st.data())
def test_decode_is_what_the_runtime_parses_and_encode_parses_back(file, data):
    proto, name = file
    cls = message_class(proto, name)
    descriptor = cls.DESCRIPTOR
    messages = [fill(data.draw, cls()) for _ in range(data.draw(st.integers(1, 4)))]
    payloads: list[bytes | None] = [_mangled(data, m.SerializeToString()) for m in messages]
    payloads.insert(data.draw(st.integers(0, len(payloads))), None)
    rows, bad, parsed = _oracle(cls, payloads)

    assert formats.reader_type("protobuf", schema=cls) == formats.protobuf.arrow_type(cls)
    decoded = formats.decode_with_bad_rows(pa.array(payloads, pa.binary()), "protobuf",
                                           schema=cls, errors="null")
    assert decoded.array.type == formats.protobuf.arrow_type(cls)
    assert decoded.bad_rows.tolist() == bad
    assert [comparable(r, descriptor) for r in decoded.array.to_pylist()] == rows

    # kproto's encoding of what it decoded: the runtime parses it back to the same
    missing = [i for i, m in enumerate(parsed) if m is not None and not m.IsInitialized()]
    if missing:             # a proto2 required field the payload lacked: not encodable
        with pytest.raises(EncodeError, match=f"row {missing[0]}: .*required"):
            formats.encode(decoded.array, "protobuf", schema=cls)
        return
    encoded = formats.encode(decoded.array, "protobuf", schema=cls).to_pylist()
    again = [None if v is None else expected(cls.FromString(v)) for v in encoded]
    assert again == rows


@pytest.fixture(scope="module")
def registry():
    with SchemaRegistryServer() as server:
        yield server


_topics = itertools.count()


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(file=files(), data=st.data())
def test_confluents_serializer_and_deserializer_both_ways(registry, file, data):
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer,
        ProtobufSerializer,
    )
    from confluent_kafka.serialization import MessageField, SerializationContext

    proto, name = file
    cls = message_class(proto, name)
    messages = [fill(data.draw, cls()) for _ in range(data.draw(st.integers(1, 3)))]
    topic = f"pdiff-{next(_topics)}"
    context = SerializationContext(topic, MessageField.VALUE)
    conf = {"use.deprecated.format": False}
    with Confluent({"url": registry.url}) as client:
        serialize = ProtobufSerializer(cls, client, conf)
        framed = [serialize(m, context) for m in messages]
    rows = [expected(m) for m in messages]
    decoded = formats.decode(pa.array(framed), "protobuf", registry=registry.url)
    assert [comparable(r, cls.DESCRIPTOR) for r in decoded.to_pylist()] == rows
    encoded = formats.encode(decoded, "protobuf", schema=cls, registry=registry.url,
                             subject=f"{topic}-value")
    deserialize = ProtobufDeserializer(cls, conf)
    assert [expected(deserialize(v, context)) for v in encoded.to_pylist()] == rows


# --------------------------------------------------------------------------- regressions
# (what the differential tests above found, each pinned by name)


def _proto2_type() -> Any:
    """gen.M (proto2): strings plain, repeated, in a nested message and as map keys; an
    enum with aliases; a required int; a oneof; an Empty."""
    from google.protobuf import descriptor_pb2

    from .protobuf_strategies import F

    proto = descriptor_pb2.FileDescriptorProto(name="gen/r.proto", package="gen",
                                               syntax="proto2",
                                               dependency=["google/protobuf/empty.proto"])
    m = proto.message_type.add(name="M")
    inner = m.nested_type.add(name="Inner")
    inner.field.add(name="s", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry = m.nested_type.add(name="ByNameEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    kind = m.enum_type.add(name="Kind")
    kind.options.allow_alias = True
    for name, number in (("ZERO", 0), ("ONE", 1), ("UNO", 1), ("EINS", 1)):
        kind.value.add(name=name, number=number)
    m.oneof_decl.add(name="choice")
    for name, number, kind_, extra in [
            ("s", 1, F.TYPE_STRING, {}), ("many", 2, F.TYPE_STRING,
                                          {"label": F.LABEL_REPEATED}),
            ("inner", 3, F.TYPE_MESSAGE, {"type_name": ".gen.M.Inner"}),
            ("by_name", 4, F.TYPE_MESSAGE, {"type_name": ".gen.M.ByNameEntry",
                                            "label": F.LABEL_REPEATED}),
            ("kind", 5, F.TYPE_ENUM, {"type_name": ".gen.M.Kind"}),
            ("need", 6, F.TYPE_INT32, {"label": F.LABEL_REQUIRED}),
            ("left", 7, F.TYPE_INT32, {"oneof_index": 0}),
            ("right", 8, F.TYPE_STRING, {"oneof_index": 0}),
            ("nothing", 9, F.TYPE_MESSAGE, {"type_name": ".google.protobuf.Empty",
                                            "label": F.LABEL_REPEATED})]:
        m.field.add(name=name, number=number, type=kind_, **{"label": F.LABEL_OPTIONAL,
                                                               **extra})
    return message_class(proto, "gen.M")


def test_regression_an_aliased_enum_value_reads_by_its_first_name():
    """An enum number several names share read as the last of them (the runtime, its JSON
    printer and ``values_by_number[n]`` name the first)."""
    from google.protobuf.json_format import MessageToDict

    cls = _proto2_type()
    message = cls(kind=1, need=0)
    assert MessageToDict(message)["kind"] == "ONE"
    decoded = formats.decode(pa.array([message.SerializeToString()]), "protobuf", schema=cls)
    assert decoded.field("kind").to_pylist() == ["ONE"]
    encoded = formats.encode(decoded, "protobuf", schema=cls)
    assert cls.FromString(encoded[0].as_py()).kind == 1


def test_regression_a_proto2_string_that_is_not_utf8_is_a_bad_row(registry):
    """proto2 does not check a string's UTF-8: the runtime parses such a payload and hands
    the field over as bytes, which no Arrow string holds. The whole column failed with
    pyarrow's ArrowInvalid; now the row is bad, naming the field (plain and framed)."""
    from kproto.formats import protobuf

    cls = _proto2_type()
    good = cls(s="ok", need=1).SerializeToString()
    payloads = [good,
                b"\x0a\x02\xff\xfe\x30\x01",                       # s
                b"\x12\x01a\x12\x01\xc0\x30\x01",                  # many[1]
                b"\x1a\x03\x0a\x01\xff\x30\x01",                   # inner.s
                b"\x22\x05\x0a\x01\xff\x10\x01\x30\x01",           # by_name: a key
                good]
    for payload in payloads[1:-1]:
        assert cls.FromString(payload).IsInitialized()          # the runtime takes them
    decoded = formats.decode_with_bad_rows(pa.array(payloads), "protobuf", schema=cls,
                                           errors="null")
    assert decoded.bad_rows.tolist() == [1, 2, 3, 4]
    assert decoded.array.field("s").to_pylist() == ["ok", None, None, None, None, "ok"]
    with pytest.raises(FormatError, match=r"row 1: field s is not UTF-8"):
        formats.decode(pa.array(payloads), "protobuf", schema=cls)
    for row, where in ((2, r"many\[1\]"), (3, r"inner\.s"), (4, r"by_name \(a key\)")):
        with pytest.raises(FormatError, match=rf"row 0: field {where} is not UTF-8"):
            formats.decode(pa.array(payloads[row:]), "protobuf", schema=cls)
    client = SchemaRegistryClient(registry.url)
    schema_id = protobuf.register(client, "utf8-value", cls.DESCRIPTOR)
    framed = pa.array([_wire.header(schema_id) + b"\x00" + p for p in payloads])
    decoded = formats.decode_with_bad_rows(framed, "protobuf", registry=client, errors="null")
    assert decoded.bad_rows.tolist() == [1, 2, 3, 4]


def test_regression_a_message_without_fields_decodes():
    """google.protobuf.Empty (a struct with no fields): building it failed (pyarrow cannot
    count the rows of a struct without children), so every row was bad."""
    cls = _proto2_type()
    message = cls(need=3)
    message.nothing.add()
    message.nothing.add()
    decoded = formats.decode_with_bad_rows(pa.array([message.SerializeToString(), None]),
                                           "protobuf", schema=cls, errors="null")
    assert decoded.bad_count == 0
    rows = decoded.array.to_pylist()
    assert rows[0]["nothing"] == [{}, {}] and rows[1] is None
    assert decoded.array.type.field("nothing").type == pa.list_(pa.struct([]))


def test_regression_encode_refuses_what_the_runtime_would_not_write():
    """A row without a proto2 required field raised the runtime's own EncodeError (not
    kproto's, no row); a row setting two members of a oneof was written with the last
    one only (the runtime clears the others): both an EncodeError naming the row."""
    cls = _proto2_type()
    kind = formats.protobuf.arrow_type(cls)
    rows = [{"need": 1, "left": 2}, {"need": None}]
    with pytest.raises(EncodeError, match=r"row 1: .*missing required fields: need"):
        formats.encode(pa.array(rows, kind), "protobuf", schema=cls)
    rows = [{"need": 1, "left": 2}, {"need": 1, "left": 3, "right": "x"}]
    with pytest.raises(EncodeError, match=r"row 1: .*left and right are members of one "
                                          r"oneof \(choice\)"):
        formats.encode(pa.array(rows, kind), "protobuf", schema=cls)
    assert cls.FromString(formats.encode(pa.array(rows[:1], kind), "protobuf",
                                         schema=cls)[0].as_py()).left == 2
