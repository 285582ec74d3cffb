"""Avro schema resolution against fastavro on generated writer/reader pairs (issue 26's
checking): for pairs made as each compatibility mode changes schemas
(tests/avro_pairs.py), fastavro writes values with the writer schema and
``schemaless_reader(writer, reader)`` reads them; both kproto decoder loops must give the
same values, fail exactly the values fastavro fails, and raise SchemaError for the pairs
no reader can resolve. kproto's encoding of what it decoded is fastavro's bytes. A fixed
set of pairs also goes through confluent-kafka's AvroSerializer/AvroDeserializer and
the in-memory registry.

Where fastavro and Java differ, the pairs avoid the difference and
tests/test_avro_resolution.py names it (field aliases that clash with names, bare
aliases of named types, union branches picked by promotion before the same type).
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import os
import struct
import uuid
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kproto._pure.avro
from kproto.errors import SchemaError
from kproto.formats import avro

from . import avro_pairs
from .avro_support import column, extension, fastavro, write

#: KPROTO_AVRO_PAIRS=2000 runs a deeper search (the default keeps the suite quick).
SETTINGS = settings(max_examples=int(os.environ.get("KPROTO_AVRO_PAIRS", "200")),
                    deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
UTC = datetime.timezone.utc


# --------------------------------------------------------------------------- one form


def arrow_py(arr: pa.Array) -> list[Any]:
    """Arrow values as fastavro's Python values (maps as dicts, unions as their branch's
    value, aware datetimes in UTC, nanosecond timestamps as their counts)."""
    t = arr.type
    if pa.types.is_union(t):
        children = [arrow_py(arr.field(i)) for i in range(t.num_fields)]
        child = {code: i for i, code in enumerate(t.type_codes)}
        return [children[child[c]][o] for c, o in zip(arr.type_codes.to_pylist(),
                                                      arr.offsets.to_pylist(), strict=True)]
    valid = arr.is_valid().to_pylist()
    if pa.types.is_struct(t):
        # (not flatten(): pyarrow 26 aborts flattening a union child under struct nulls)
        cols = {t.field(i).name: arrow_py(arr.field(i)) for i in range(t.num_fields)}
        return [{n: c[j] for n, c in cols.items()} if ok else None
                for j, ok in enumerate(valid)]
    if pa.types.is_map(t) or pa.types.is_list(t):
        offsets = arr.offsets.to_pylist()
        if pa.types.is_map(t):
            keys, items = arr.keys.to_pylist(), arrow_py(arr.items)
            return [dict(zip(keys[s:e], items[s:e], strict=True)) if ok else None
                    for s, e, ok in zip(offsets, offsets[1:], valid, strict=False)]
        items = arrow_py(arr.values)
        return [items[s:e] if ok else None
                for s, e, ok in zip(offsets, offsets[1:], valid, strict=False)]
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return arr.cast(pa.int64()).to_pylist()
    out = arr.to_pylist()
    if pa.types.is_timestamp(t) and t.tz is not None:
        return [None if v is None else v.astimezone(UTC) for v in out]
    return out


_CLASSES = [(bool, "int"), (int, "int"), (float, "float"), (str, "str"), (uuid.UUID, "str"),
            (bytes, "bytes"), (decimal.Decimal, "decimal"), (datetime.date, "date"),
            (datetime.time, "time"), (dict, "dict"), (list, "list")]


def normalized(t: Any, v: Any) -> Any:
    """fastavro's value ``v`` read as the reader type ``t``, in arrow_py's form: a float
    rounded to 32 bits (fastavro keeps a long promoted to float as a double; Java rounds),
    UUIDs as text, aware datetimes in UTC."""
    if v is None:
        return None
    if isinstance(t, list):
        kind = next(k for cls, k in _CLASSES if isinstance(v, cls))
        same = [b for b in t if avro_pairs.klass(b) == kind]
        return normalized(same[0], v) if len(same) == 1 else v
    s = avro_pairs.spec(t)
    k = s["type"]
    if k == "float":
        return struct.unpack("<f", struct.pack("<f", v))[0]
    if k == "record":
        return {f["name"]: normalized(f["type"], v[f["name"]]) for f in s["fields"]}
    if k == "array":
        return [normalized(s["items"], x) for x in v]
    if k == "map":
        return {key: normalized(s["values"], x) for key, x in v.items()}
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return v.astimezone(UTC)
    return v


# --------------------------------------------------------------------------- the check


def fastavro_reads(writer: Any, reader: Any, datums: list[bytes]) -> list[Any]:
    """fastavro's value of each datum (with the reader's defaults as the values they
    stand for), or the exception it raised."""
    # expanded: fastavro fails resolving a writer's named type used by name against a
    # reader's union or definition (TypeError: unhashable type)
    w = fastavro.parse_schema(avro_pairs.dedupe(writer), expand=True)
    r = fastavro.parse_schema(avro_pairs.dedupe(avro_pairs.with_py_defaults(reader)),
                              expand=True, _ignore_default_error=True)
    out: list[Any] = []
    for d in datums:
        try:
            out.append(normalized(reader, fastavro.schemaless_reader(io.BytesIO(d), w, r)))
        except Exception as exc:                  # noqa: BLE001 - the reference failed
            out.append(exc)
    return out


def kproto_reads(writer: Any, reader: Any,
                 datums: list[bytes]) -> list[tuple[list[Any], list[int]]]:
    """Both loops' (values, bad rows), errors="null"."""
    ws, rs = avro.parse_schema(avro_pairs.dedupe(writer)), avro.parse_schema(
        avro_pairs.dedupe(reader))
    out = []
    saved = avro._loop
    for module in (extension(), kproto._pure.avro):
        avro._loop = module
        try:
            array, bad = avro.decode(column(datums), ws, rs, errors="null")
        finally:
            avro._loop = saved
        array.validate(full=True)
        assert array.type == avro.arrow_type(rs)
        out.append((arrow_py(array), bad.tolist()))
    return out


def check_pair(writer: Any, reader: Any, records: list[Any], lazy: bool) -> None:
    """kproto reads what fastavro reads, fails what it fails (per value), never raises
    SchemaError for a pair fastavro resolves."""
    datums = write(avro_pairs.dedupe(writer), records)
    expected = fastavro_reads(writer, reader, datums)
    failed = [i for i, e in enumerate(expected) if isinstance(e, Exception)]
    if not lazy:
        assert not failed, [expected[i] for i in failed]
    for got, bad in kproto_reads(writer, reader, datums):
        assert bad == failed, (bad, [expected[i] for i in failed])
        assert [None if i in failed else g for i, g in enumerate(got)] == [
            None if i in failed else e for i, e in enumerate(expected)]


def check_encode(writer: Any, records: list[Any]) -> None:
    """kproto's encoding of the decoded values is fastavro's bytes (a negative decimal's
    -2**(8k-1) takes k bytes in Java and kproto, k + 1 in fastavro: read back then)."""
    schema = avro_pairs.dedupe(writer)
    datums = write(schema, records)
    parsed = avro.parse_schema(schema)
    array, _ = avro.decode(column(datums), parsed)
    encoded = avro.encode(array, parsed).to_pylist()
    if '"decimal"' in json.dumps(schema):
        assert fastavro_reads(writer, writer, encoded) == fastavro_reads(writer, writer, datums)
    else:
        assert encoded == datums


# --------------------------------------------------------------------------- the tests

def test_issue_26_alias_pair_through_the_differential_check() -> None:
    """Issue 26 item 4 as a pair: an alias naming another reader field took its value."""
    schema = {"type": "record", "name": "root.Account", "fields": [
        {"name": "account_id", "type": "string", "aliases": ["user_id"]},
        {"name": "user_id", "type": "string", "default": "unknown"}]}
    check_pair(schema, schema, [{"account_id": "a", "user_id": "u"}], lazy=False)


@pytest.mark.parametrize("mode", ["backward", "forward"])
@SETTINGS
@given(data=st.data())
def test_pairs_the_reader_can_read(mode: str, data: st.DataObject) -> None:
    writer, reader, records, lazy = data.draw(avro_pairs.pairs(mode, lazy=False))
    check_pair(writer, reader, records, lazy)
    check_encode(writer, records)


@SETTINGS
@given(data=st.data())
def test_full_pairs_read_both_ways(data: st.DataObject) -> None:
    writer, reader, records, lazy = data.draw(avro_pairs.pairs("full"))
    check_pair(writer, reader, records, lazy)
    back = data.draw(st.lists(avro_pairs.values(reader), min_size=1, max_size=3))
    check_pair(reader, writer, back, lazy)


@pytest.mark.parametrize("mode", ["backward", "forward"])
@SETTINGS
@given(data=st.data())
def test_values_the_reader_cannot_read_fail_one_by_one(mode: str, data: st.DataObject) -> None:
    """Enum symbols and union branches the reader lacks: those values fail (FormatError
    rows), the others read, as in fastavro and Java's decoder."""
    writer, reader, records, lazy = data.draw(avro_pairs.pairs(mode, lazy=True))
    check_pair(writer, reader, records, lazy=True)


@SETTINGS
@given(case=avro_pairs.broken_pairs())
def test_pairs_no_reader_can_resolve_are_schema_errors(case: tuple[Any, Any, list[Any],
                                                                   str]) -> None:
    writer, reader, records, how = case
    datums = write(avro_pairs.dedupe(writer), records)
    assert all(isinstance(e, Exception) for e in fastavro_reads(writer, reader, datums)), how
    with pytest.raises(SchemaError):
        kproto_reads(writer, reader, datums)


def test_the_pairs_reach_every_change() -> None:
    """The generator is not stuck: a fixed draw renames, adds defaults, promotes, adds
    branches and symbols, and uses every logical type."""
    texts: list[str] = []

    @settings(max_examples=150, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def collect(data: st.DataObject) -> None:
        w, r, _, _ = data.draw(avro_pairs.pairs(data.draw(st.sampled_from(
            ["backward", "forward", "full"]))))
        texts.append(json.dumps(w) + json.dumps(r))

    collect()
    seen = " ".join(texts)
    failing: list[bool] = []

    @settings(max_examples=100, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def lazy(data: st.DataObject) -> None:
        w, r, records, _ = data.draw(avro_pairs.pairs(data.draw(st.sampled_from(
            ["backward", "forward"])), lazy=True))
        datums = write(avro_pairs.dedupe(w), records)
        failing.append(any(isinstance(v, Exception) for v in fastavro_reads(w, r, datums)))

    lazy()
    assert 20 <= sum(failing) <= 90, sum(failing)
    for needle in ('"aliases"', '"default"', '"logicalType": "decimal"', '"timestamp-nanos"',
                   '"local-timestamp-micros"', '"time-millis"', '"uuid"', '"date"',
                   '"type": "fixed"', '"type": "enum"', '"type": "map"', '"other.ns.'):
        assert needle in seen, needle


# --------------------------------------------------------------------------- Confluent


def test_confluent_serializers_on_generated_pairs() -> None:
    """A fixed set of generated pairs through confluent-kafka: AvroSerializer registers
    the writer with the in-memory registry and frames the values, AvroDeserializer reads
    them with the reader schema; kproto decodes the framed values (skip=5) to the same,
    and encodes what it decoded with the writer to the serializer's exact bytes."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from kproto.testing import SchemaRegistryServer

    cases: list[tuple[Any, Any, list[Any]]] = []

    @settings(max_examples=40, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def collect(data: st.DataObject) -> None:
        mode = data.draw(st.sampled_from(["backward", "forward", "full"]))
        writer, reader, records, _ = data.draw(avro_pairs.pairs(mode))
        cases.append((writer, reader, records))

    collect()
    checked = 0
    with SchemaRegistryServer() as server, SchemaRegistryClient({"url": server.url}) as client:
        for n, (writer, reader, records) in enumerate(cases):
            w_text = json.dumps(avro_pairs.dedupe(writer))
            r_text = json.dumps(avro_pairs.dedupe(reader))
            ctx = SerializationContext(f"pairs-{n}", MessageField.VALUE)
            if checked == 12 or avro_pairs.with_py_defaults(reader) != reader:
                continue     # (fastavro gives a default back as its JSON: 1 for a date)
            framed = [AvroSerializer(client, w_text)(r, ctx) for r in records]
            if min(map(len, framed)) == 5:
                continue           # an empty datum: the deserializer wants 6 bytes or more
            checked += 1
            theirs = [AvroDeserializer(client, r_text)(f, ctx) for f in framed]
            expected = [normalized(reader, v) for v in theirs]
            w, r = avro.parse_schema(w_text), avro.parse_schema(r_text)
            array, bad = avro.decode(column(framed), w, r, skip=5)
            assert len(bad) == 0 and arrow_py(array) == expected, n
            own, _ = avro.decode(column(framed), w, skip=5)
            ours = avro.encode(own, w, prefix=framed[0][:5]).to_pylist()
            if '"decimal"' not in w_text:
                assert ours == framed, n
            assert [normalized(writer, AvroDeserializer(client)(v, ctx)) for v in ours] == \
                [normalized(writer, AvroDeserializer(client)(v, ctx)) for v in framed]
    assert checked == 12
