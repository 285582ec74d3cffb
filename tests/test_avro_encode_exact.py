"""Avro encoding converts a column's values to the schema's types exactly or not at all
(issue 26 item 5): every Arrow -> Avro logical type pair the encoder takes, what fastavro
reads back from what it wrote, and an EncodeError naming the field path and the row
(the top-level row, also for values nested in lists, maps and unions) for a value that
cannot be written as it is. Both encoder loops."""

from __future__ import annotations

import datetime
import decimal
import json
import math
import re
from typing import Any

import pyarrow as pa
import pytest

from kproto.errors import EncodeError
from kproto.formats import avro

from .avro_support import loop, read, write  # noqa: F401  (loop: the fixture, both loops)

UTC = datetime.timezone.utc
pytestmark = pytest.mark.usefixtures("loop")


def _field(avro_type: Any) -> dict[str, Any]:
    return {"type": "record", "name": "R", "fields": [{"name": "v", "type": avro_type}]}


def _long(logical: str) -> dict[str, Any]:
    return {"type": "long", "logicalType": logical}


def _int(logical: str) -> dict[str, Any]:
    return {"type": "int", "logicalType": logical}


def _round_trip(avro_type: Any, values: pa.Array) -> list[Any]:
    schema = _field(avro_type)
    out = avro.encode(pa.table({"v": values}), avro.parse_schema(schema)).to_pylist()
    return [r["v"] for r in read(schema, out)]


def _refused(avro_type: Any, values: pa.Array, message: str) -> None:
    with pytest.raises(EncodeError, match=message):
        avro.encode(pa.table({"v": values}), avro.parse_schema(_field(avro_type)))


DAY = datetime.date(2024, 1, 2)
MIDNIGHT = datetime.datetime(2024, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize("unit", ["millis", "micros", "nanos"])
@pytest.mark.parametrize("date_type", [pa.date32(), pa.date64()])
def test_dates_into_timestamps_are_midnight(unit: str, date_type: pa.DataType) -> None:
    """Issue 26 item 5: a date32 column into timestamp-millis was written as its day
    count (19724 ms after the epoch). A date is its midnight: UTC for timestamp-*, the
    wall clock for local-timestamp-*."""
    values = pa.array([DAY, None], date_type)
    # fastavro reads the nanosecond types as their counts
    ns = 1_704_153_600 * 10**9
    assert _round_trip(["null", _long(f"timestamp-{unit}")], values) == [
        ns if unit == "nanos" else MIDNIGHT, None]
    assert _round_trip(["null", _long(f"local-timestamp-{unit}")], values) == [
        ns if unit == "nanos" else MIDNIGHT.replace(tzinfo=None), None]


def test_timestamp_overflowing_nanoseconds_is_refused() -> None:
    """Issue 26 item 5: 9999-12-31 as timestamp[us] into timestamp-nanos wrapped to 1816."""
    values = pa.array([datetime.datetime(2000, 1, 1), datetime.datetime(9999, 12, 31)],
                      pa.timestamp("us"))
    _refused(_long("timestamp-nanos"), values, "row 1: v: .*9999-12-31.*timestamp-nanos")
    _refused(_long("local-timestamp-nanos"), values, "row 1: v: ")
    assert _round_trip(_long("timestamp-nanos"), values[:1]) == [946_684_800 * 10**9]


def test_finer_units_floor_to_the_schemas_as_java_spark_and_fastavro_do() -> None:
    """A fraction the schema's unit cannot hold is dropped toward the past, also before
    1970 (Java's Instant.toEpochMilli, Spark's to_avro, fastavro): the bytes are
    fastavro's for the same values."""
    instants = [datetime.datetime(2024, 1, 1, 0, 0, 0, 1999, tzinfo=UTC),
                datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)]
    schema = _field(_long("timestamp-millis"))
    out = avro.encode(pa.table({"v": pa.array(instants, pa.timestamp("us", tz="UTC"))}),
                      avro.parse_schema(schema)).to_pylist()
    assert out == write(schema, [{"v": v} for v in instants])
    assert [r["v"] for r in read(schema, out)] == [
        datetime.datetime(2024, 1, 1, 0, 0, 0, 1000, tzinfo=UTC),
        datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)]
    assert _round_trip(_long("timestamp-micros"), pa.array([-1001], pa.timestamp("ns"))) \
        == [datetime.datetime(1969, 12, 31, 23, 59, 59, 999998, tzinfo=UTC)]


def test_zones_naive_values_are_utc_and_aware_ones_local_in_their_zone() -> None:
    """A naive timestamp is taken as UTC for timestamp-* (as the decoder gives UTC back);
    an aware one into local-timestamp-* is its wall clock in its own zone."""
    naive = pa.array([datetime.datetime(2024, 1, 1, 12)], pa.timestamp("s"))
    assert _round_trip(_long("timestamp-millis"), naive) == [
        datetime.datetime(2024, 1, 1, 12, tzinfo=UTC)]
    tokyo = pa.array([datetime.datetime(2024, 1, 1, 3, tzinfo=UTC)],
                     pa.timestamp("ms", tz="Asia/Tokyo"))
    assert _round_trip(_long("local-timestamp-micros"), tokyo) == [
        datetime.datetime(2024, 1, 1, 12)]
    assert _round_trip(_long("timestamp-micros"), tokyo) == [
        datetime.datetime(2024, 1, 1, 3, tzinfo=UTC)]


def test_times_across_units() -> None:
    values = pa.array([1, 86_399_999], pa.time32("ms"))
    assert _round_trip(_long("time-micros"), values) == [
        datetime.time(0, 0, 0, 1000), datetime.time(23, 59, 59, 999000)]
    assert _round_trip(_int("time-millis"), pa.array([5], pa.time32("s"))) == [
        datetime.time(0, 0, 5)]
    fine = pa.array([1_000, 1_999], pa.time64("us"))
    assert _round_trip(_int("time-millis"), fine) == [datetime.time(0, 0, 0, 1000)] * 2
    assert _round_trip(_long("time-micros"), pa.array([1_500], pa.time64("ns"))) == [
        datetime.time(0, 0, 0, 1)]


@pytest.mark.parametrize("avro_type,values", [
    (_int("date"), pa.array([datetime.datetime(2024, 1, 1)], pa.timestamp("ms"))),
    (_int("time-millis"), pa.array([datetime.datetime(2024, 1, 1)], pa.timestamp("ms"))),
    (_long("time-micros"), pa.array([DAY], pa.date32())),
    (_long("timestamp-millis"), pa.array([5], pa.time32("ms"))),
    (_long("local-timestamp-micros"), pa.array([5], pa.time64("us"))),
    (_int("date"), pa.array([5], pa.time32("s"))),
])
def test_temporal_kinds_that_mean_different_things_are_refused(avro_type: Any,
                                                               values: pa.Array) -> None:
    """A timestamp is not a date or a time of day, a time of day is not an instant: the
    count of one is never written as the other."""
    _refused(avro_type, values, re.escape(f"v: a {values.type} column cannot be written as"))


def test_date64_that_is_not_a_whole_day_is_refused() -> None:
    values = pa.array([86_400_000, 86_400_001], pa.int64()).cast(pa.date64())
    _refused(_int("date"), values, "row 1: v: ")
    assert _round_trip(_int("date"), values[:1]) == [datetime.date(1970, 1, 2)]


def test_integer_counts_are_the_logical_types_own() -> None:
    """An integer column is the count the logical type is made of (its base type)."""
    assert _round_trip(_long("timestamp-millis"), pa.array([1500])) == [
        datetime.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)]
    assert _round_trip(_int("date"), pa.array([1], pa.int8())) == [datetime.date(1970, 1, 2)]


def test_integers_that_do_not_fit() -> None:
    _refused("int", pa.array([1, 2**31]), "row 1: v: 2147483648 is out of range")
    _refused("long", pa.array([5, 2**64 - 1], pa.uint64()), "row 1: v: 18446744073709551615")
    assert _round_trip("long", pa.array([2**63 - 1], pa.uint64())) == [2**63 - 1]


def test_floats_into_integers_only_when_whole() -> None:
    assert _round_trip("int", pa.array([2.0, -3.0])) == [2, -3]
    for bad in (math.nan, math.inf, 1.5, 2.0**63):
        _refused("long", pa.array([1.0, bad]), "row 1: v: ")


def test_doubles_that_overflow_float_are_refused() -> None:
    assert _round_trip("float", pa.array([1.5, math.inf, -math.inf])) == [1.5, math.inf,
                                                                          -math.inf]
    assert math.isnan(_round_trip("float", pa.array([math.nan]))[0])
    _refused("float", pa.array([1.0, 1e300]), "row 1: v: 1e\\+300")
    _refused("double", pa.array([1, 2**62 + 1]), "row 1: v: ")


def _dec(precision: int, scale: int, base: str = "bytes") -> dict[str, Any]:
    out = {"type": base, "logicalType": "decimal", "precision": precision, "scale": scale}
    return {**out, "name": "D", "size": 8} if base == "fixed" else out


@pytest.mark.parametrize("base", ["bytes", "fixed"])
def test_decimals_that_do_not_fit_are_refused_not_rounded(base: str) -> None:
    D = decimal.Decimal
    values = pa.array([D("1.50"), D("1.55")], pa.decimal128(5, 2))
    assert _round_trip(_dec(6, 3, base), values) == [D("1.500"), D("1.550")]
    _refused(_dec(4, 1, base), values, "row 1: v: Decimal\\('1.55'\\)")
    _refused(_dec(3, 2, base), pa.array([D("1.5"), D("12.5")], pa.decimal128(5, 2)),
             "row 1: v: ")
    _refused(_dec(10, 0, base), pa.array([2.0, 2.5]), "row 1: v: 2.5")


def test_enum_symbols_and_fixed_sizes_name_the_top_level_row() -> None:
    """A bad value nested in a list is reported at the row that holds it."""
    enum = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    values = pa.array([["A"], ["B", "A"], ["A", "C"]])
    _refused({"type": "array", "items": enum}, values, "row 2: v\\[\\]: 'C' is not a symbol")
    fixed = {"type": "fixed", "name": "F", "size": 2}
    _refused({"type": "map", "values": fixed},
             pa.array([[("k", b"ab")], [("k", b"abc")]], pa.map_(pa.string(), pa.binary())),
             "row 1: v\\{\\}: b'abc' .*2 bytes")
    _refused(fixed, pa.array([b"abc"], pa.binary(3)), "v: a fixed_size_binary\\[3\\] column")


def test_values_in_a_dense_union_name_their_row() -> None:
    union = pa.UnionArray.from_dense(
        pa.array([0, 1, 1], pa.int8()), pa.array([0, 0, 1], pa.int32()),
        [pa.array(["x"]), pa.array([datetime.datetime(2024, 1, 1),
                                    datetime.datetime(9999, 1, 1)],
                                   pa.timestamp("us"))], ["string", "long"])
    schema = ["string", {"type": "long", "logicalType": "timestamp-nanos"}]
    _refused(schema, union, "row 2: v: ")


def test_encoded_bytes_are_fastavros() -> None:
    """What is written exactly is fastavro's encoding of the same values."""
    import io

    import fastavro

    schema = _field(["null", _long("timestamp-micros")])
    values = pa.array([DAY, None], pa.date32())
    out = avro.encode(pa.table({"v": values}), avro.parse_schema(schema)).to_pylist()
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(json.dumps(schema))),
                               {"v": MIDNIGHT})
    assert out[0] == buf.getvalue()


def test_plain_columns_into_unions_pick_the_branch_that_means_them() -> None:
    """Found by tests/test_avro_pairs.py: a null column into a one-branch union
    (``["null"]``) fitted no branch; a decimal column into a union found none; a date
    column went to a timestamp branch before the date one, an int column to a date
    branch before a plain int."""
    D = decimal.Decimal
    assert _round_trip(["null"], pa.nulls(2)) == [None, None]
    assert _round_trip(["null", _dec(5, 2)], pa.array([D("1.25"), None], pa.decimal128(5, 2))) \
        == [D("1.25"), None]
    assert _round_trip([_long("timestamp-millis"), _int("date")], pa.array([DAY])) == [DAY]
    assert _round_trip(["null", _int("date"), "long"], pa.array([5])) == [5]


def test_struct_fields_the_record_lacks_are_refused_not_dropped() -> None:
    """A struct column with a field the record schema does not have is an EncodeError
    naming the field's path and the record (was: the datum written without it, the
    column silently lost), as Spark's to_avro refuses it (AvroSerializer:
    validateNoExtraCatalystFields, nullable fields too) - nested, in lists and unions
    too; without the extra field it encodes (fastavro, which ignores extra dict keys, reads
    the same datum)."""
    inner = {"type": "record", "name": "In", "fields": [{"name": "x", "type": "long"}]}
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": inner}, {"name": "xs", "type": {"type": "array", "items": "In"}},
        {"name": "n", "type": ["null", "In"]}]}
    good = {"a": {"x": 1}, "xs": [{"x": 2}], "n": {"x": 3}}
    parsed = avro.parse_schema(schema)
    assert avro.encode(pa.array([good]), parsed).to_pylist() == write(schema, [good])
    cases = [({**good, "b": None}, r"value: the column's field 'b' is not in record R"),
             ({**good, "b": 1, "c": "z"}, r"fields 'b', 'c' are not in record R"),
             ({**good, "a": {"x": 1, "y": 2}}, r"a: the column's field 'a\.y' is not in "
                                               r"record In"),
             ({**good, "xs": [{"x": 2, "y": 2}]}, r"xs\[\]: .*'xs\[\]\.y' is not in record In"),
             ({**good, "n": {"x": 3, "y": None}}, r"n: .*'n\.y' is not in record In")]
    for row, message in cases:
        with pytest.raises(EncodeError, match=message + ": (it|they) would be lost"):
            avro.encode(pa.array([row]), parsed)
    assert write(schema, [{**good, "b": 1}]) == write(schema, [good])   # fastavro drops it
