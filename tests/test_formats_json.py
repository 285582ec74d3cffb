"""kproto.formats with JSON: golden bytes from confluent-kafka's JSONSerializer (framed,
through the test registry), plain newline-delimited values, bad rows, and round trips."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto import formats
from kproto.errors import ConfigError, FormatError, SchemaError
from kproto.formats import json as json_format
from kproto.formats._wire import json_lines
from kproto.schema_registry import SchemaRegistryClient
from kproto.testing import SchemaRegistryServer

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "customer": {"type": "string"},
        "total": {"type": "number"},
        "paid": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
        "items": {"type": "array", "items": {"$ref": "#/definitions/item"}},
        "address": {"$ref": "#/definitions/address"},
    },
    "required": ["id", "customer"],
    "definitions": {
        "item": {"type": "object", "properties": {"sku": {"type": "string"},
                                                   "qty": {"type": "integer"}}},
        "address": {"oneOf": [{"type": "null"}, {"type": "object", "properties": {
            "city": {"type": "string"}, "zip": {"type": "string"}}}]},
    },
}
ORDERS = [
    {"id": 1, "customer": "Zoë Ærø 東京", "total": 12.5, "paid": True, "note": None,
     "items": [{"sku": "a-1", "qty": 2}, {"sku": "b", "qty": 1}],
     "address": {"city": "Zürich", "zip": "8000"}},
    {"id": 2, "customer": "", "total": 0.0, "paid": False, "note": "line one\nline two",
     "items": [], "address": None},
    {"id": -9007199254740993, "customer": "x" * 300, "total": -1e300, "paid": True,
     "note": "🙂", "items": [{"sku": "", "qty": 0}], "address": {"city": "", "zip": "0"}},
]


@pytest.fixture(scope="module")
def registry():
    with SchemaRegistryServer() as server:
        yield server


def confluent_serialize(url: str, topic: str, rows: list[dict]) -> list[bytes]:
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    with Confluent({"url": url}) as client:
        serialize = JSONSerializer(json.dumps(SCHEMA), client)
        context = SerializationContext(topic, MessageField.VALUE)
        return [serialize(row, context) for row in rows]


def test_json_schema_to_arrow_type():
    t = json_format.arrow_type(SCHEMA)
    assert t == pa.struct([
        ("id", pa.int64()), ("customer", pa.string()), ("total", pa.float64()),
        ("paid", pa.bool_()), ("note", pa.string()),
        ("items", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int64())]))),
        ("address", pa.struct([("city", pa.string()), ("zip", pa.string())]))])
    for bad in ({"type": "object"}, {"type": ["string", "integer"]},
                {"properties": {"a": {"$ref": "http://elsewhere/x"}}},
                {"type": "object", "properties": {"a": {}}}):
        with pytest.raises(SchemaError):
            json_format.arrow_type(bad)


def test_decodes_confluents_json_serializer_exactly(registry):
    values = pa.array(confluent_serialize(registry.url, "orders", ORDERS) + [None])
    assert values[0].as_py()[:1] == b"\x00"
    decoded = formats.decode(values, "json", registry=registry.url)
    assert decoded.to_pylist() == ORDERS + [None]
    assert decoded.type == json_format.arrow_type(SCHEMA)


def test_what_kproto_encodes_confluents_deserializer_reads(registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    array = pa.array(ORDERS, json_format.arrow_type(SCHEMA))
    encoded = formats.encode(array, "json", schema=SCHEMA, registry=registry.url,
                             subject="orders-out-value")
    schema_id = SchemaRegistryClient(registry.url).get_latest("orders-out-value").schema_id
    assert all(v[:5] == b"\x00" + schema_id.to_bytes(4, "big") for v in encoded.to_pylist())
    with Confluent({"url": registry.url}) as client:
        deserialize = JSONDeserializer(json.dumps(SCHEMA), schema_registry_client=client)
        context = SerializationContext("orders-out", MessageField.VALUE)
        assert [deserialize(v, context) for v in encoded.to_pylist()] == ORDERS
    # no schema given: one is derived from the Arrow type and registered
    derived = formats.encode(array, "json", registry=registry.url, subject="derived-value")
    assert formats.decode(derived, "json", registry=registry.url).to_pylist() == ORDERS


def test_plain_values_inferred_or_typed_and_pretty_printed():
    rows = [json.dumps(o, indent=2, ensure_ascii=False).encode() for o in ORDERS]
    assert all(b"\n" in r for r in rows)              # newlines between tokens
    values = pa.array(rows + [None], pa.binary())
    typed = formats.decode(values, "json", schema=SCHEMA)
    assert typed.to_pylist() == ORDERS + [None]
    inferred = formats.decode(values, "json")
    assert inferred.field("customer").to_pylist() == [o["customer"] for o in ORDERS] + [None]
    arrow = pa.schema([("id", pa.int64()), ("note", pa.string())])
    assert formats.decode(values, "json", schema=arrow).to_pylist() == [
        {"id": o["id"], "note": o["note"]} for o in ORDERS] + [None]
    for kind in (pa.large_binary(), pa.binary_view(), pa.string()):
        other = values.cast(kind) if kind != pa.string() else pa.array(
            [r.decode() for r in rows] + [None])
        assert formats.decode(other, "json", schema=SCHEMA).to_pylist() == ORDERS + [None]
    chunked = pa.chunked_array([values.slice(0, 2), values.slice(2)])
    assert formats.decode(chunked, "json", schema=SCHEMA).to_pylist() == ORDERS + [None]


BAD = [
    (b'{"id": 1}', None),
    (b'{"id": ', "not a JSON object"),                       # truncated
    (b'{"id": }', "Invalid value"),                          # malformed inside
    (b'{"id": 1} {"id": 2}', "several values"),             # two objects in one value
    (b'', "not a JSON object"),
    (b'   ', "not a JSON object"),
    (b'{"id": "one"}', "changed from number to string"),    # does not fit the type
    (b'[1, 2]', "not a JSON object"),
    (b'{"id": 3}', None),
]


def test_bad_values_raise_by_row_or_become_null():
    values = pa.array([v for v, _ in BAD])
    arrow = pa.schema([("id", pa.int64())])
    with pytest.raises(FormatError) as info:
        formats.decode(values, "json", schema=arrow)
    assert (info.value.row, info.value.format) == (1, "json")
    assert "row 1" in str(info.value)
    got = formats.decode_with_bad_rows(values, "json", schema=arrow, errors="null")
    expected_bad = [i for i, (_, why) in enumerate(BAD) if why]
    assert got.bad_rows.tolist() == expected_bad and got.bad_count == len(expected_bad)
    assert got.array.to_pylist() == [{"id": 1}] + [None] * 7 + [{"id": 3}]
    _, others = json_lines(values, np.ones(len(BAD), bool), 0)
    found = dict.fromkeys(others.tolist(), json_format._NOT_OBJECT)
    rest = np.array([i for i in range(len(BAD)) if i not in found])
    found.update(json_format._bad_rows(values, rest, 0, pa.struct(list(arrow)), False))
    for row, (_, why) in enumerate(BAD):
        if why:
            assert why in found[row], (row, found[row])


def test_framing_errors_and_unknown_ids(registry):
    client = SchemaRegistryClient(registry.url)
    schema_id = client.register("framing-value", json.dumps(SCHEMA), "JSON")
    head = b"\x00" + schema_id.to_bytes(4, "big")
    values = pa.array([head + b'{"id": 1, "customer": "a"}',
                       b"\x01" + schema_id.to_bytes(4, "big") + b'{"id": 2}',   # magic 1
                       b"\x00\x00",                                               # short
                       b"\x00" + (999).to_bytes(4, "big") + b'{"id": 3}',       # unknown id
                       head + b'{"id": 4, "customer": "d"}'])
    with pytest.raises(FormatError) as info:
        formats.decode(values, "json", registry=client)
    assert info.value.row == 1 and "magic byte 1" in info.value.reason
    tail = values.slice(3)
    with pytest.raises(FormatError) as info:
        formats.decode(tail, "json", registry=client)
    assert info.value.row == 0 and "999" in info.value.reason
    got = formats.decode_with_bad_rows(values, "json", registry=client, errors="null")
    assert got.bad_rows.tolist() == [1, 2, 3]
    assert got.array.field("id").to_pylist() == [1, None, None, None, 4]
    with pytest.raises(ConfigError):
        formats.decode(values, "yaml")
    with pytest.raises(ConfigError):
        formats.decode(values, "json", errors="ignore")


struct_rows = st.lists(st.fixed_dictionaries({
    "n": st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
    "s": st.one_of(st.none(), st.text()),
    "f": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=64)),
    "l": st.lists(st.booleans(), max_size=4),
}), max_size=30)
ROW_TYPE = pa.struct([("n", pa.int64()), ("s", pa.string()), ("f", pa.float64()),
                      ("l", pa.list_(pa.bool_()))])


@settings(max_examples=60, deadline=None)
@given(rows=struct_rows, framed=st.booleans())
def test_round_trip_random_rows(rows, framed):
    array = pa.array(rows, ROW_TYPE)
    prefix = b"\x00\x00\x00\x00\x07" if framed else b""
    encoded = json_format.encode(array, prefix=prefix)
    back, bad = json_format.decode(encoded, ROW_TYPE, skip=len(prefix))
    assert bad.size == 0 and back.to_pylist() == rows


TIMES = {"type": "object", "properties": {
    "t": {"type": "string", "format": "date-time"},
    "n": {"type": ["string", "null"], "format": "date-time"},
    "d": {"type": "string", "format": "date"}}}


def test_date_time_format_reads_as_utc_microseconds(registry):
    """RFC 3339 strings (confluent-kafka's JSONSerializer frames them) -> timestamp[us, UTC]:
    offsets applied, a fraction past microseconds a bad row; "date" stays a string
    (pyarrow's reader makes a date32 of a number of days only)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    utc = pa.timestamp("us", tz="UTC")
    assert json_format.arrow_type(TIMES) == pa.struct([("t", utc), ("n", utc),
                                                       ("d", pa.string())])
    rows = [{"t": "2024-05-06T07:08:09Z", "n": None, "d": "2024-05-06"},
            {"t": "2024-05-06T09:08:09.123456+02:00", "n": "1969-12-31T23:59:59.5Z",
             "d": "1999-12-31"},
            {"t": "2024-05-06T07:08:09.1234567Z", "n": None, "d": "x"}]
    with Confluent({"url": registry.url}) as client:
        serialize = JSONSerializer(json.dumps(TIMES), client)
        context = SerializationContext("times", MessageField.VALUE)
        values = pa.array([serialize(r, context) for r in rows])
    got = formats.decode_with_bad_rows(values, "json", registry=registry.url, errors="null")
    assert got.bad_rows.tolist() == [2]                   # 7 digits: past microseconds
    micros = got.array.field("t").cast(pa.int64()).to_pylist()
    assert micros == [1714979289_000000, 1714979289_123456, None]   # date -u -d ... +%s
    assert got.array.field("n").cast(pa.int64()).to_pylist() == [None, -500000, None]
    assert got.array.field("d").to_pylist() == ["2024-05-06", "1999-12-31", None]


def test_timestamps_encode_as_date_time_that_confluent_and_jsonschema_accept(registry):
    import datetime as dt

    import jsonschema
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    utc = dt.timezone.utc
    kind = pa.struct([("t", pa.timestamp("us", tz="UTC")),
                      ("p", pa.timestamp("ms", tz="Europe/Paris")),
                      ("d", pa.date32()), ("local", pa.timestamp("us"))])
    schema = json_format.json_schema(kind)
    props = schema["properties"]
    assert props["t"] == props["p"] == {"type": ["string", "null"], "format": "date-time"}
    assert props["d"] == {"type": ["string", "null"], "format": "date"}
    assert props["local"] == {"type": ["string", "null"]}   # no offset: not RFC 3339
    assert json_format.json_schema(pa.timestamp("us", tz="UTC")) == {
        "type": "string", "format": "date-time",
        "$schema": "http://json-schema.org/draft-07/schema#"}
    when = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=utc)
    array = pa.array([{"t": when, "p": when.replace(microsecond=123000),
                       "d": dt.date(2024, 5, 6), "local": dt.datetime(2024, 5, 6, 7, 8)},
                      {"t": dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=utc),
                       "p": None, "d": None, "local": None}], kind)
    encoded = formats.encode(array, "json", registry=registry.url, subject="times-out-value")
    check = jsonschema.Draft7Validator(
        schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    assert not check.is_valid({"t": "2024-05-06T07:08:09"})      # the checker checks
    with Confluent({"url": registry.url}) as client:
        deserialize = JSONDeserializer(None, schema_registry_client=client)
        context = SerializationContext("times-out", MessageField.VALUE)
        docs = [deserialize(v, context) for v in encoded.to_pylist()]
    for doc in docs:
        check.validate(doc)
    assert docs[0] == {"t": "2024-05-06T07:08:09.123456+00:00",
                       "p": "2024-05-06T09:08:09.123000+02:00", "d": "2024-05-06",
                       "local": "2024-05-06T07:08:00"}
    back = formats.decode(encoded, "json", registry=registry.url)
    assert back.field("t").equals(array.field("t"))
    assert back.field("p").cast(pa.timestamp("ms", tz="UTC")).to_pylist() == \
        array.field("p").to_pylist()


INTS = {"type": "object", "properties": {
    "n": {"type": "integer"}, "f": {"type": "number"},
    "l": {"type": "array", "items": {"type": "integer"}}}}


def test_issue_26_item_8_an_integer_written_with_a_fraction_is_the_integer(registry):
    """JSON Schema (draft 6 on) calls any number with a zero fraction an integer, and
    confluent-kafka's JSONSerializer sends a Python float as ``2.0``: the integer 2, not
    a bad row. A fraction, or a value beyond int64, is a bad row naming the field, never
    a rounded or wrapped value; integers beyond 2**53 stay exact."""
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    objects = [{"n": 2.0, "f": 1, "l": [1.0, -0.0, 3]}, {"n": 1e18, "l": []},
               {"n": 2**63 - 1, "f": 2**53 + 1, "l": [2**53 + 1]}, {"n": -2.0**63}]
    with Confluent({"url": registry.url}) as client:
        serialize = JSONSerializer(json.dumps(INTS), client)
        context = SerializationContext("ints", MessageField.VALUE)
        framed = [serialize(o, context) for o in objects]
    assert b'"n":2.0' in framed[0] and b'"n":1e+18' in framed[1]
    decoded = formats.decode(pa.array(framed), "json", registry=registry.url)
    assert decoded.to_pylist() == [
        {"n": 2, "f": 1.0, "l": [1, 0, 3]}, {"n": 10**18, "f": None, "l": []},
        {"n": 2**63 - 1, "f": float(2**53), "l": [2**53 + 1]},     # a double rounds
        {"n": -2**63, "f": None, "l": None}]
    values = [b'{"n": 1e2}', b'{"n": 2.5}', b'{"n": -0.0, "f": -0.0}', b'{"l": [1, 7.25]}',
              b'{"n": 9223372036854775808}', b'{"n": 1e19}', b'{"n": -9223372036854775809}',
              b'{"n": 4e18, "l": [9007199254740993]}', b'{"n": 9007199254740993.0}',
              b'{"n": 2, "f": 0.5}']
    got = formats.decode_with_bad_rows(pa.array(values), "json", schema=INTS, errors="null")
    assert got.bad_rows.tolist() == [1, 3, 4, 5, 6]
    rows = got.array.to_pylist()
    assert [r and r["n"] for r in rows] == [100, None, 0, None, None, None, None,
                                           4 * 10**18, 9007199254740992, 2]
    assert str(rows[2]["f"]) == "-0.0" and rows[7]["l"] == [9007199254740993]
    with pytest.raises(FormatError, match=r"row 1: field n: 2.5 is not an integer"):
        formats.decode(pa.array(values), "json", schema=INTS)
    with pytest.raises(FormatError, match=r"row 0: field l\[\]: 7.25 is not an integer"):
        formats.decode(pa.array(values[3:]), "json", schema=INTS)
    with pytest.raises(FormatError, match=r"row 0: .*int64.*9223372036854775808"):
        formats.decode(pa.array(values[4:]), "json", schema=INTS)
    with pytest.raises(FormatError, match=r"row 0: field n: 1e\+19 is out of int64's range"):
        formats.decode(pa.array(values[5:6]), "json", schema=INTS)


def test_date_time_is_rfc_3339_exactly():
    """A "date-time" string is RFC 3339 (as jsonschema's format checker has it): its
    lower-case t and z, and zeros past microseconds, read; a time without an offset, a
    date alone, a time without seconds or a compact offset are bad rows naming the
    field (pyarrow's reader took them, an offset-less time as UTC: a guess)."""
    good = {"2024-05-06t07:08:09z": 1714979289_000000,
            "2024-05-06T07:08:09.123456000Z": 1714979289_123456,
            "2024-05-06 07:08:09-00:30": 1714981089_000000,
            "2024-02-29T23:59:59.5+23:59": 1709164859_500000}
    bad = ["2024-05-06T07:08:09", "2024-05-06", "2024-05-06T07:08Z", "2024-05-06T07:08:09+0200",
           "2023-02-29T00:00:00Z", "0000-01-01T00:00:00Z", "2024-05-06T07:08:60Z"]
    values = pa.array([json.dumps({"t": s, "a": [s]}).encode() for s in [*good, *bad]])
    got = formats.decode_with_bad_rows(values, "json", schema={
        "properties": {"t": TIMES["properties"]["t"], "a": {"items": TIMES["properties"]["t"],
                                                            "type": "array"}}}, errors="null")
    assert got.bad_rows.tolist() == list(range(len(good), len(good) + len(bad)))
    assert got.array.field("t").cast(pa.int64()).to_pylist()[:len(good)] == list(good.values())
    with pytest.raises(FormatError, match="row 4: field t: '2024-05-06T07:08:09' is not an "
                                          "RFC 3339 date-time"):
        formats.decode(values, "json", schema=TIMES)
    arrow = pa.schema([("t", pa.timestamp("ms", tz="UTC"))])      # an Arrow schema: the same
    with pytest.raises(FormatError, match=r"row 1: field t: .*\.123456000Z' is finer than ms"):
        formats.decode(values, "json", schema=arrow)


def test_json_references_resolve_as_confluents_serializer_resolves_them(registry):
    """Schema references the way confluent-kafka resolves them (the referencing library):
    a ``$ref`` relative to its document's ``$id`` (the top schema's, or a referenced
    one's), references named by absolute URLs, a referenced schema referencing a third
    one, an anchor, a percent-encoded pointer, the top schema naming itself by its
    ``$id``. confluent's JSONSerializer validates with them; kproto decodes the same."""
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from kproto.schema_registry import SchemaReference

    base = "https://acme.com/schemas/"
    country = {"$schema": "https://json-schema.org/draft/2020-12/schema",
               "$id": base + "geo/country.json", "type": "object",
               "properties": {"code": {"$ref": "#code"}},
               "$defs": {"c": {"$anchor": "code", "type": "string"}}}
    address = {"$id": base + "address.json", "type": "object", "properties": {
        "street": {"$ref": "#/$defs/a%20b~1c"}, "country": {"$ref": "geo/country.json"}},
        "$defs": {"a b/c": {"type": "string"}}}
    user = {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": base + "user.json", "type": "object", "properties": {
                "home": {"$ref": "address.json"},
                "zip": {"$ref": base + "user.json#/$defs/Zip"},
                "code": {"$ref": "geo/country.json#/properties/code"}},
            "$defs": {"Zip": {"type": "integer"}}}
    client = SchemaRegistryClient(registry.url)
    client.register("country", json.dumps(country), "JSON")
    client.register("address", json.dumps(address), "JSON", references=(
        SchemaReference(base + "geo/country.json", "country", 1),))
    client.register("refs-value", json.dumps(user), "JSON", references=(
        SchemaReference(base + "address.json", "address", 1),))
    rows = [{"home": {"street": "Main 1", "country": {"code": "NO"}}, "zip": 7, "code": "SE"},
            {"home": {"street": "", "country": None}, "zip": None, "code": None}]
    with Confluent({"url": registry.url}) as confluent:
        serialize = JSONSerializer(None, confluent, conf={"auto.register.schemas": False,
                                                          "use.latest.version": True})
        context = SerializationContext("refs", MessageField.VALUE)
        framed = [serialize(r, context) for r in rows[:1]]
        with pytest.raises(Exception, match="is not of type 'string'"):    # it validates
            serialize({"home": {"street": 5}}, context)
    framed.append(framed[0][:5] + json.dumps(rows[1]).encode())
    decoded = formats.decode(pa.array(framed), "json", registry=registry.url)
    assert decoded.to_pylist() == rows
    assert decoded.type.field("home").type.field("country").type == pa.struct(
        [("code", pa.string())])


def test_a_number_past_a_doubles_range_is_a_bad_row_not_infinity():
    """pyarrow's reader refuses 1e400 but reads an integer literal past a double's range
    as inf, with a schema or without: kproto makes it a bad row naming the field (found
    by the differential tests, tests/test_formats_json_diff.py)."""
    huge = b"1" + b"0" * 400
    values = pa.array([b'{"f": -' + huge + b'}', b'{"f": 1e308, "l": [' + huge + b']}',
                       b'{"f": 2}'])
    typed = {"properties": {"f": {"type": "number"}, "l": {"items": {"type": "number"},
                                                           "type": "array"}}}
    for schema in (typed, None):
        got = formats.decode_with_bad_rows(values, "json", schema=schema, errors="null")
        assert got.bad_rows.tolist() == [0, 1]
        assert got.array.field("f").to_pylist() == [None, None, 2.0]
    with pytest.raises(FormatError, match=r"row 0: field f: a number beyond a double's range"):
        formats.decode(values, "json")
    with pytest.raises(FormatError, match=r"row 0: field l\[\]: a number beyond"):
        formats.decode(values.slice(1), "json", schema=typed)


def test_local_refs_by_pointer_anchor_or_the_schemas_own_id():
    """Local ``$ref``s as JSON Schema has them: a percent-encoded pointer (``~1`` a slash),
    a pointer into an array, an anchor, the schema's own ``$id`` (absolute or relative)."""
    schema = {"$id": "https://acme.com/s/order.json", "type": "object", "properties": {
        "a": {"$ref": "#/$defs/a%20b~1c"}, "b": {"$ref": "#/$defs/list/1"},
        "c": {"$ref": "#num"}, "d": {"$ref": "https://acme.com/s/order.json#/$defs/list/0"},
        "e": {"$ref": "order.json#num"}},
        "$defs": {"a b/c": {"type": "string"}, "list": [{"type": "boolean"},
                                                        {"type": "integer"}],
                  "n": {"$anchor": "num", "type": "number"}}}
    assert json_format.arrow_type(schema) == pa.struct([
        ("a", pa.string()), ("b", pa.int64()), ("c", pa.float64()), ("d", pa.bool_()),
        ("e", pa.float64())])
    for ref in ("other.json#/$defs/n", "#nothing", "#/$defs/list/2"):
        with pytest.raises(SchemaError):
            json_format.arrow_type({**schema, "properties": {"x": {"$ref": ref}}})
