"""Hypothesis round-trips over random Avro schemas and values: fastavro writes, both kproto
loops decode to what fastavro reads back; kproto encodes those arrays back to fastavro's
bytes exactly."""

from __future__ import annotations

import datetime
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kproto._pure.avro
from kproto.formats import avro

from .avro_support import arrow_values, column, extension, plain, read, write

SETTINGS = settings(max_examples=120, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_TEXT = st.text(alphabet=st.sampled_from("abcXYZ-._é漢🙂 0"), max_size=8)
_names = itertools.count()
UTC = datetime.timezone.utc


def _name() -> str:
    return f"N{next(_names)}"


PRIMITIVE: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(), "boolean": st.booleans(),
    "int": st.integers(-(2**31), 2**31 - 1), "long": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(width=32, allow_nan=False), "double": st.floats(allow_nan=False),
    "bytes": st.binary(max_size=12), "string": _TEXT,
}


def _logical(kind: str) -> tuple[Any, st.SearchStrategy[Any]]:
    if kind == "date":
        return ({"type": "int", "logicalType": "date"},
                st.dates(datetime.date(1, 1, 1), datetime.date(9999, 12, 31)))
    if kind == "timestamp-millis":
        return ({"type": "long", "logicalType": "timestamp-millis"},
                st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1))
                .map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000,
                                         tzinfo=UTC)))
    if kind == "decimal":
        return ({"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4},
                st.decimals(min_value=-(10**15), max_value=10**15, places=4,
                            allow_nan=False, allow_infinity=False))
    assert kind == "uuid"
    return ({"type": "string", "logicalType": "uuid"},
            st.uuids().map(str))


@st.composite
def schema_and_values(draw: st.DrawFn, depth: int = 0) -> tuple[Any, st.SearchStrategy[Any]]:
    """(an Avro schema, a strategy for its values)."""
    kinds = list(PRIMITIVE) + ["date", "timestamp-millis", "decimal", "uuid", "enum", "fixed"]
    if depth < 3:
        kinds += ["record", "record", "array", "map", "nullable", "union"]
    kind = draw(st.sampled_from(kinds))
    if kind in PRIMITIVE:
        return kind, PRIMITIVE[kind]
    if kind in ("date", "timestamp-millis", "decimal", "uuid"):
        return _logical(kind)
    if kind == "enum":
        symbols = draw(st.lists(st.sampled_from(["A", "B", "C", "D_1", "é"[0:0] or "E"]),
                                min_size=1, max_size=4, unique=True))
        return {"type": "enum", "name": _name(), "symbols": symbols}, st.sampled_from(symbols)
    if kind == "fixed":
        size = draw(st.integers(0, 6))
        return ({"type": "fixed", "name": _name(), "size": size},
                st.binary(min_size=size, max_size=size))
    if kind == "record":
        n = draw(st.integers(1, 4))
        fields = [draw(schema_and_values(depth + 1)) for _ in range(n)]
        schema = {"type": "record", "name": _name(),
                  "fields": [{"name": f"f{i}", "type": s} for i, (s, _) in enumerate(fields)]}
        return schema, st.fixed_dictionaries({f"f{i}": v for i, (_, v) in enumerate(fields)})
    if kind == "array":
        items, values = draw(schema_and_values(depth + 1))
        return {"type": "array", "items": items}, st.lists(values, max_size=3)
    if kind == "map":
        inner, values = draw(schema_and_values(depth + 1))
        return {"type": "map", "values": inner}, st.dictionaries(_TEXT, values, max_size=3)
    inner, values = draw(schema_and_values(depth + 1))
    if kind == "nullable" and inner != "null" and not isinstance(inner, list):
        order = draw(st.booleans())
        return (["null", inner] if order else [inner, "null"]), st.none() | values
    return ["null", "int", "string"], st.none() | PRIMITIVE["int"] | _TEXT


@st.composite
def cases(draw: st.DrawFn) -> tuple[Any, list[Any]]:
    schema, values = draw(schema_and_values())
    return schema, draw(st.lists(values, min_size=1, max_size=6))


@pytest.mark.parametrize("which", ["cython", "pure"])
@SETTINGS
@given(case=cases())
def test_random_schemas_round_trip(which: str, case: tuple[Any, list[Any]]) -> None:
    schema, values = case
    parsed = avro.parse_schema(schema)
    datums = write(schema, values)
    expected = [plain(v) for v in read(schema, datums)]
    saved = avro._loop
    avro._loop = extension() if which == "cython" else kproto._pure.avro
    try:
        array, bad = avro.decode(column(datums), parsed)
        encoded = avro.encode(array, parsed).to_pylist()
    finally:
        avro._loop = saved
    array.validate(full=True)
    assert len(bad) == 0 and array.type == avro.arrow_type(parsed)
    got = arrow_values(array)
    if isinstance(schema, dict) and schema.get("type") == "map":
        got = [dict(v) if isinstance(v, list) else v for v in got]
    assert got == expected
    # what kproto encodes fastavro reads back; the bytes are fastavro's, except that a
    # negative decimal's unscaled -2**(8k-1) takes k bytes here (Java's toByteArray) and
    # k + 1 in fastavro
    assert [plain(v) for v in read(schema, encoded)] == expected
    if "decimal" not in str(schema):
        assert encoded == datums


def test_strategy_reaches_every_arrow_kind() -> None:
    """The generator is not stuck on primitives: a fixed draw covers the nested kinds."""
    texts: list[str] = []

    @settings(max_examples=300, database=None, deadline=None, derandomize=True)
    @given(case=cases())
    def collect(case: tuple[Any, list[Any]]) -> None:
        texts.append(str(avro.arrow_type(avro.parse_schema(case[0]))))

    collect()
    seen = " ".join(texts)
    for kind in ("struct<", "list<", "map<", "dense_union<", "dictionary<", "decimal128(",
                 "timestamp[ms, tz=UTC]", "date32", "fixed_size_binary"):
        assert kind in seen, kind
