"""Typed values under schema evolution and schema references (issue 26): schemas that
import others (Confluent's references, for Avro, JSON Schema and Protobuf) decoded as
confluent-kafka's deserializers decode them, reference cycles and missing references as
bad rows, writer schemas the reader cannot resolve as bad rows naming their id, and a
registered schema (its id, its references) used for encoding as it is."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from kproto import formats
from kproto.errors import FormatError, SchemaError
from kproto.formats import _references
from kproto.schema_registry import RegisteredSchema, SchemaReference, SchemaRegistryClient
from kproto.testing import SchemaRegistryServer

COUNTRY = {"type": "record", "name": "Country", "namespace": "com.acme",
           "fields": [{"name": "code", "type": "string"}]}
ADDRESS = {"type": "record", "name": "Address", "namespace": "com.acme", "fields": [
    {"name": "street", "type": "string"},
    {"name": "country", "type": ["null", "com.acme.Country"], "default": None}]}
USER = {"type": "record", "name": "User", "namespace": "com.acme", "fields": [
    {"name": "name", "type": "string"},
    {"name": "home", "type": "com.acme.Address"},
    {"name": "others", "type": {"type": "array", "items": "com.acme.Address"}}]}
USERS = [{"name": "Zoë", "home": {"street": "Main 1", "country": {"code": "NO"}},
          "others": [{"street": "x", "country": None}]},
         {"name": "", "home": {"street": "", "country": None}, "others": []}]


@pytest.fixture
def registry():
    with SchemaRegistryServer() as server:
        yield server


def _register(url: str, subject: str, schema: object, kind: str = "AVRO",
              refs: tuple[tuple[str, str, int], ...] = ()) -> int:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return SchemaRegistryClient(url).register(
        subject, text, kind, references=tuple(SchemaReference(*r) for r in refs))


def _avro_tree(url: str) -> None:
    """User -> Address -> Country, each under its own subject."""
    _register(url, "country", COUNTRY)
    _register(url, "address", ADDRESS, refs=(("com.acme.Country", "country", 1),))
    _register(url, "users-value", USER, refs=(("com.acme.Address", "address", 1),))


def _confluent(url: str, kind: str, objects: list, topic: str = "users",
               **conf: object) -> list[bytes]:
    """``objects`` serialized by confluent-kafka with the subject's latest schema."""
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.serialization import MessageField, SerializationContext

    context = SerializationContext(topic, MessageField.VALUE)
    options = {"auto.register.schemas": False, "use.latest.version": True, **conf}
    with Confluent({"url": url}) as client:
        if kind == "avro":
            from confluent_kafka.schema_registry.avro import AvroSerializer

            serialize = AvroSerializer(client, None, conf=options)
        else:
            from confluent_kafka.schema_registry.json_schema import JSONSerializer

            serialize = JSONSerializer(None, client, conf=options)
        return [serialize(o, context) for o in objects]


def _confluent_read(url: str, values: list[bytes]) -> list:
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    context = SerializationContext("users", MessageField.VALUE)
    with Confluent({"url": url}) as client:
        deserialize = AvroDeserializer(client)
        return [deserialize(v, context) for v in values]


def test_avro_references_decode_as_confluent_reads_them(registry):
    _avro_tree(registry.url)
    values = _confluent(registry.url, "avro", USERS)
    assert _confluent_read(registry.url, values) == USERS
    column = pa.array([values[0], None, values[1]])
    for errors in ("raise", "null"):
        decoded = formats.decode_with_bad_rows(column, "avro", registry=registry.url,
                                               errors=errors)
        assert decoded.array.to_pylist() == [USERS[0], None, USERS[1]]
        assert decoded.bad_count == 0
    # the reader planned from the subject (the Spark source's way), and its Arrow type
    t = formats.reader_type("avro", registry=registry.url, subject="users-value")
    assert t.field("home").type.field("country").type.field("code").type == pa.string()
    decoded = formats.decode(column, "avro", registry=registry.url, subject="users-value")
    assert decoded.type == t


def test_avro_references_encode_with_the_registered_schema(registry):
    _avro_tree(registry.url)
    client = SchemaRegistryClient(registry.url)
    latest = client.get_latest("users-value")
    array = pa.array(USERS, formats.reader_type("avro", schema=latest, registry=client))
    before = len(registry.schemas)
    for schema in (latest, None):       # the RegisteredSchema, or the subject's latest
        values = formats.encode(array, "avro", schema=schema, registry=client,
                                subject="users-value")
        assert {bytes(v)[1:5] for v in values.to_pylist()} == {
            latest.schema_id.to_bytes(4, "big")}
        assert _confluent_read(registry.url, values.to_pylist()) == USERS
    assert len(registry.schemas) == before          # nothing registered


def test_a_reference_cycle_is_a_bad_row_not_a_recursion(registry):
    a = {"type": "record", "name": "A", "fields": [{"name": "b", "type": ["null", "B"]}]}
    b = {"type": "record", "name": "B", "fields": [{"name": "a", "type": ["null", "A"]}]}
    # a registry that does not check references (ours does not) can hold a cycle
    _register(registry.url, "a", a, refs=(("B", "b", 1),))
    _register(registry.url, "b", b, refs=(("A", "a", 1),))
    client = SchemaRegistryClient(registry.url)
    with pytest.raises(SchemaError, match="cycle"):
        _references.resolve(client, client.get_version("a", 1))
    framed = pa.array([b"\x00\x00\x00\x00\x01\x00", b"\x00\x00\x00\x00\x02\x00"])
    decoded = formats.decode_with_bad_rows(framed, "avro", registry=client, errors="null",
                                           schema={"type": "record", "name": "A",
                                                   "fields": []})
    assert decoded.bad_rows.tolist() == [0, 1]
    with pytest.raises(FormatError, match=r"row 0.*schema id 1.*cycle"):
        formats.decode(framed, "avro", registry=client, schema='"null"')


def test_a_missing_reference_is_a_bad_row_naming_it(registry):
    _register(registry.url, "users-value", USER, refs=(("com.acme.Address", "gone", 3),))
    framed = pa.array([b"\x00\x00\x00\x00\x01\x02"])
    with pytest.raises(FormatError, match=r"schema id 1.*com.acme.Address \(gone v3\) is not"):
        formats.decode(framed, "avro", registry=registry.url, schema='"null"')


def test_reference_bounds(registry, monkeypatch):
    monkeypatch.setattr(_references, "MAX_DEPTH", 3)
    _register(registry.url, "s0", {"type": "fixed", "name": "F0", "size": 1})
    for i in range(1, 6):
        _register(registry.url, f"s{i}", {"type": "record", "name": f"R{i}", "fields": [
            {"name": "x", "type": "F0" if i == 1 else f"R{i - 1}"}]},
            refs=(("F0" if i == 1 else f"R{i - 1}", f"s{i - 1}", 1),))
    client = SchemaRegistryClient(registry.url)
    assert len(_references.resolve(client, client.get_version("s3", 1))) == 3
    with pytest.raises(SchemaError, match="deeper than 3"):
        _references.resolve(client, client.get_version("s5", 1))


def test_json_schema_references_decode(registry):
    address = {"type": "object", "properties": {"street": {"type": "string"},
                                                 "zip": {"$ref": "#/$defs/Zip"}},
               "$defs": {"Zip": {"type": "integer"}}}
    user = {"type": "object", "title": "User", "properties": {
        "name": {"type": "string"},
        "home": {"$ref": "address.json"},
        "zip": {"$ref": "https://acme.com/schemas/address.json#/$defs/Zip"}}}
    _register(registry.url, "address", address, "JSON")
    _register(registry.url, "users-value", user, "JSON", refs=(("address.json", "address", 1),))
    rows = [{"name": "a", "home": {"street": "s", "zip": 7}, "zip": 8}]
    framed = pa.array([b"\x00\x00\x00\x00\x02" + json.dumps(r).encode() for r in rows])
    decoded = formats.decode(framed, "json", registry=registry.url)
    assert decoded.type.field("home").type == pa.struct([("street", pa.string()),
                                                         ("zip", pa.int64())])
    assert decoded.to_pylist() == rows
    with pytest.raises(SchemaError, match="names no schema reference"):
        formats.json.bundle({"properties": {"x": {"$ref": "other.json"}}},
                            {"address.json": address})


def test_forward_compatible_v1_rows_are_bad_rows_naming_their_id(registry):
    """Issue 26 item 7: under FORWARD compatibility v2 adds a field without a default;
    read with v2 (the latest), v1's rows cannot be resolved: bad rows naming the schema
    id, while v2's rows decode."""
    v1 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
    v2 = {**v1, "fields": v1["fields"] + [{"name": "email", "type": "string"}]}
    client = SchemaRegistryClient(registry.url)
    client.set_compatibility("FORWARD")
    id1 = client.register("users-value", v1)
    id2 = client.register("users-value", v2)
    old = formats.encode(pa.array([{"name": "a"}]), "avro", schema=v1, registry=client,
                         subject="users-value").to_pylist()
    new = formats.encode(pa.array([{"name": "b", "email": "b@x"}]), "avro", schema=v2,
                         registry=client, subject="users-value").to_pylist()
    column = pa.array([new[0], old[0], None, new[0]])
    decoded = formats.decode_with_bad_rows(column, "avro", registry=client,
                                           subject="users-value", errors="null")
    assert decoded.array.to_pylist() == [{"name": "b", "email": "b@x"}, None, None,
                                         {"name": "b", "email": "b@x"}]
    assert decoded.bad_rows.tolist() == [1]
    with pytest.raises(FormatError, match=rf"row 1.*schema id {id1} cannot be read.*email"):
        formats.decode(column, "avro", registry=client, subject="users-value")
    # one id only, all unresolvable: the same, through the one-id path
    decoded = formats.decode_with_bad_rows(pa.array([old[0], None]), "avro",
                                           registry=client, schema=v2, errors="null")
    assert decoded.bad_rows.tolist() == [0] and decoded.array.to_pylist() == [None, None]
    assert id2 != id1


def test_a_registered_schema_is_a_reader_schema(registry):
    _avro_tree(registry.url)
    client = SchemaRegistryClient(registry.url)
    latest = client.get_latest("users-value")
    assert isinstance(latest, RegisteredSchema)
    values = _confluent(registry.url, "avro", USERS)
    requests = len(registry.requests)
    decoded = formats.decode(pa.array(values), "avro", registry=client, reader_schema=latest)
    assert decoded.to_pylist() == USERS
    # the writer id is the reader's (known): only the two referenced versions are asked
    assert sorted(registry.requests[requests:]) == [
        ("GET", "/subjects/address/versions/1"), ("GET", "/subjects/country/versions/1")]
    requests = len(registry.requests)
    formats.decode(pa.array(values), "avro", registry=client, reader_schema=latest)
    assert len(registry.requests) == requests


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"next": {"$ref": "#"}}},
    {"$ref": "#/$defs/n", "$defs": {"n": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}}},
    {"type": "object", "properties": {"a": {"oneOf": [{"type": "null"}, {"$ref": "#"}]}}},
])
def test_a_recursive_json_schema_is_a_schema_error_not_a_recursion(registry, schema):
    """A JSON Schema containing itself (through a $ref, or a reference naming itself) has
    no Arrow type: a SchemaError naming the path, and for a writer id, bad rows."""
    with pytest.raises(SchemaError, match="contains itself"):
        formats.json.arrow_type(schema)
    deep = {"type": "string"}
    for _ in range(500):
        deep = {"type": "object", "properties": {"x": deep}}
    with pytest.raises(SchemaError, match="nested deeper than 64"):
        formats.json.arrow_type(deep)
    _register(registry.url, "self", {"type": "object", "properties": {
        "me": {"$ref": "self.json"}}}, "JSON", refs=(("self.json", "self", 1),))
    _register(registry.url, "loops-value", schema, "JSON")
    framed = pa.array([b"\x00\x00\x00\x00\x01{}", b"\x00\x00\x00\x00\x02{}"])
    reader = {"type": "object", "properties": {"a": {"type": "string"}}}
    decoded = formats.decode_with_bad_rows(framed, "json", registry=registry.url,
                                           errors="null", schema=reader)
    assert decoded.bad_rows.tolist() == [0, 1]
