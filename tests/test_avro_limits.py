"""Avro schemas past what Arrow or the stack can hold: unions of more than 128 branches
and deeply nested types are SchemaErrors naming the limit, never an OverflowError or a
RecursionError."""

from __future__ import annotations

import contextlib
import inspect
import json
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from kproto import formats
from kproto.errors import EncodeError, SchemaError
from kproto.formats import avro

from .avro_support import (
    arrow_values,
    loop,  # noqa: F401  (the fixture: both decoder loops)
    plain,
    read,
    write,
)

# --------------------------------------------------------------------------- unions


def _branches(n: int) -> list[dict[str, Any]]:
    return [{"type": "record", "name": f"U{i}", "fields": [{"name": "x", "type": "int"}]}
            for i in range(n)]


def _in_record(union: list[Any]) -> dict[str, Any]:
    inner = {"type": "record", "name": "In", "fields": [{"name": "u", "type": union}]}
    return {"type": "record", "name": "Top", "fields": [{"name": "inner", "type": inner}]}


@pytest.mark.parametrize("union", [_branches(127), _branches(128), ["null", *_branches(127)]],
                         ids=["127", "128", "null+127"])
@pytest.mark.usefixtures("loop")
def test_a_union_of_up_to_128_branches_decodes(union: list[Any]) -> None:
    """Arrow's dense union holds 128 type codes (0-127), null's branch among them."""
    schema = _in_record(union)
    last = union[-1]["name"]
    datums = write(schema, [{"inner": {"u": (last, {"x": 7})}},
                            {"inner": {"u": ("U0", {"x": 1})}}])
    array, bad = avro.decode(pa.array(datums, pa.binary()), avro.parse_schema(schema))
    assert len(bad) == 0
    union_array = array.field("inner").field("u")
    assert union_array.type_codes.to_pylist() == [len(union) - 1, int(union[0] == "null")]
    assert union_array.to_pylist() == [{"x": 7}, {"x": 1}]
    assert [v["inner"]["u"] for v in read(schema, datums)] == [{"x": 7}, {"x": 1}]


@pytest.mark.parametrize("union", [_branches(129), _branches(300), ["null", *_branches(128)]],
                         ids=["129", "300", "null+128"])
@pytest.mark.usefixtures("loop")
def test_a_union_of_more_than_128_branches_is_a_schema_error(union: list[Any]) -> None:
    """Avro allows any number of branches; past 128 there is no Arrow type for them: a
    SchemaError naming the union's field and the limit (was an OverflowError from
    pyarrow: 'value too large to convert to int8_t'), from arrow_type, reader_type and
    decode."""
    schema = avro.parse_schema(_in_record(union))
    expected = rf"union at inner\.u \(in record In\) has {len(union)} branches.* at most 128"
    with pytest.raises(SchemaError, match=expected):
        avro.arrow_type(schema)
    with pytest.raises(SchemaError, match=expected):
        formats.reader_type("avro", schema=schema.json)
    datums = write(_in_record(union), [{"inner": {"u": ("U0", {"x": 1})}}])
    with pytest.raises(SchemaError, match=expected):
        avro.decode(pa.array(datums, pa.binary()), schema)
    with pytest.raises(SchemaError, match="schema's root has 129 branches"):
        avro.arrow_type(avro.parse_schema(_branches(129)))


@pytest.mark.usefixtures("loop")
def test_a_wide_writer_union_reads_with_a_narrower_reader_and_encodes() -> None:
    """What the error suggests works: a 300-branch writer read with a reader of fewer
    branches; and encoding into the wide union (no Arrow union type involved) is
    fastavro's datum."""
    wide = _in_record([*_branches(299), "string"])
    narrow = _in_record(["string", _branches(4)[3]])
    datums = write(wide, [{"inner": {"u": "hi"}}, {"inner": {"u": ("U3", {"x": 5})}}])
    array, bad = avro.decode(pa.array(datums, pa.binary()), avro.parse_schema(wide),
                             avro.parse_schema(narrow))
    assert len(bad) == 0
    assert array.field("inner").field("u").to_pylist() == ["hi", {"x": 5}]
    encoded = avro.encode(pa.array([{"inner": {"u": "hi"}}]), avro.parse_schema(wide))
    assert encoded.to_pylist() == datums[:1]


# --------------------------------------------------------------------------- nesting

BOUND = 100   # MAX_DEPTH: a path of that many types inside types


def _records(n: int) -> tuple[Any, Any]:
    schema: Any = "long"
    value: Any = 1
    for i in range(n):
        schema = {"type": "record", "name": f"R{i}", "fields": [{"name": "f", "type": schema}]}
        value = {"f": value}
    return schema, value


def _nullable_records(n: int) -> tuple[Any, Any]:
    """Records in ["null", record] fields: two levels each (the long at 2n - 1)."""
    schema, value = _records(1)
    for i in range(1, n):
        schema = {"type": "record", "name": f"R{i}", "fields": [{"name": "f",
                                                                  "type": ["null", schema]}]}
        value = {"f": value}
    return schema, value


def _arrays(n: int) -> tuple[Any, Any]:
    schema: Any = "long"
    value: Any = 1
    for _ in range(n):
        schema, value = {"type": "array", "items": schema}, [value]
    return schema, value


def _maps(n: int) -> tuple[Any, Any]:
    schema: Any = "long"
    value: Any = 1
    for _ in range(n):
        schema, value = {"type": "map", "values": schema}, {"k": value}
    return schema, value


def _named(k: int) -> tuple[Any, Any]:
    """Records T0..Tk side by side at the top (the JSON is shallow), each using the one
    before it by name under 8 arrays: the types nest 9 levels a record."""
    fields: list[Any] = [{"name": "t0", "type": {"type": "record", "name": "T0",
                                                 "fields": [{"name": "x", "type": "long"}]}}]
    value: dict[str, Any] = {"t0": {"x": 1}}
    inner: Any = {"x": 1}
    for i in range(1, k + 1):
        t: Any = f"T{i - 1}"
        for _ in range(8):
            t, inner = {"type": "array", "items": t}, [inner]
        fields.append({"name": f"t{i}", "type": {"type": "record", "name": f"T{i}",
                                                 "fields": [{"name": "x", "type": t}]}})
        inner = value[f"t{i}"] = {"x": inner}
    return {"type": "record", "name": "Root", "fields": fields}, value


AT_BOUND = {"records": _records(BOUND), "arrays": _arrays(BOUND), "maps": _maps(BOUND),
            "nullable records": _nullable_records(BOUND // 2),
            "named types used deep": _named(10)}
PAST_BOUND = {"records": _records(BOUND + 1)[0], "arrays": _arrays(BOUND + 1)[0],
              "500 records": _records(500)[0], "3000 arrays": _arrays(3000)[0],
              "nullable records": _nullable_records(BOUND // 2 + 1)[0],
              "named types used deep": _named(11)[0]}


@contextlib.contextmanager
def _stack_of(frames: int) -> Iterator[None]:
    """Python's recursion limit ``frames`` above the caller's stack, for the block."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.usefixtures("loop")
@pytest.mark.parametrize("shape", AT_BOUND)
def test_a_schema_nested_to_the_bound_works_within_500_frames(shape: str) -> None:
    """At the bound every walk of the schema (parsing its JSON text and value, the
    canonical form, the Arrow type, the decode and encode programs, both loops) works, and
    in fewer than 500 frames: half of Python's default limit is left to the caller."""
    schema, value = AT_BOUND[shape]
    datum = write(schema, [value])
    text = json.dumps(schema)
    with _stack_of(500):
        parsed = avro.parse_schema(schema)
        assert avro.parse_schema(text).canonical_form == parsed.canonical_form
        assert formats.reader_type("avro", schema=text) == avro.arrow_type(parsed)
        array, bad = avro.decode(pa.array(datum, pa.binary()), parsed)
        assert len(bad) == 0
        assert avro.encode(array, parsed).to_pylist() == datum
        assert avro.is_recursive(parsed) is False
    assert arrow_values(array) == [plain(v) for v in read(schema, datum)]


@pytest.mark.usefixtures("loop")
@pytest.mark.parametrize("shape", PAST_BOUND)
def test_a_schema_nested_past_the_bound_is_a_schema_error(shape: str) -> None:
    """Past the bound: a SchemaError naming it from parse_schema (JSON text or value),
    arrow_type, reader_type, decode and encode, never a RecursionError (500 nested
    records or 3000 nested arrays were one, 'while encoding a JSON object'; named types
    used deep down nest as deep without deep JSON)."""
    schema = PAST_BOUND[shape]
    deeper = "deeper than 100 levels"
    with _stack_of(10_000):                  # 3000 arrays: 6000 JSON containers
        text = json.dumps(schema)
    for given in (schema, text):
        with pytest.raises(SchemaError, match=deeper):
            avro.parse_schema(given)
        with pytest.raises(SchemaError, match=deeper):
            formats.reader_type("avro", schema=given)
        with pytest.raises(SchemaError, match=deeper):
            avro.decode(pa.array([b"\x02"], pa.binary()), given)
        with pytest.raises(SchemaError, match=deeper):
            avro.encode(pa.array([1]), given)


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,
    '{"type": ' * 100_000 + '"long"' + "}" * 100_000,
    '{"type": "array", "items": ' * 5_000 + '"long"' + "}" * 5_000,
], ids=["lists", "type objects", "arrays"])
def test_a_deeply_nested_json_text_is_a_schema_error(text: str) -> None:
    """JSON text too deep for json.loads itself (a RecursionError there) is a SchemaError
    naming the bound, and so is its loaded value too deep for json.dumps."""
    with pytest.raises(SchemaError, match="deeper than 100 levels"):
        avro.parse_schema(text)
    value: Any = "long"
    for _ in range(100_000):
        value = [value]
    with pytest.raises(SchemaError, match="deeper than 100 levels"):
        avro.parse_schema(value)
    with pytest.raises(SchemaError, match="deeper than 100 levels"):
        avro.parse_schema('"long"', references=[value])


def test_named_types_from_references_count_where_they_are_used() -> None:
    """A schema reference's type used deep down in the schema that references it."""
    ref = json.dumps({"type": "record", "name": "a.T", "fields": [
        {"name": "x", "type": _arrays(60)[0]}]})
    deep = _arrays(40)[0]
    inner = deep
    while isinstance(inner["items"], dict):
        inner = inner["items"]
    inner["items"] = "a.T"     # arrays at levels 0-39, a.T 40, its arrays 41-100, long 101
    with pytest.raises(SchemaError, match="deeper than 100 levels"):
        avro.parse_schema(json.dumps(deep), references=[ref])
    avro.parse_schema(json.dumps(deep).replace('"a.T"', '"long"'), references=[ref])
    ref2 = json.dumps({"type": "record", "name": "b.T", "fields": [
        {"name": "x", "type": json.loads(json.dumps(_arrays(45)[0]).replace('"long"',
                                                                            '"a.T"'))}]})
    with pytest.raises(SchemaError, match="deeper than 100 levels"):   # a.T inside b.T
        avro.parse_schema('"b.T"', references=[ref, ref2])


def test_recursion_through_defaults_and_unroll_is_bounded() -> None:
    """A record whose field's default holds the record again (no finite value: was a
    RecursionError), unroll past the bound, and a column nested past it into a recursive
    schema (was a RecursionError from the encode compiler) are errors naming the bound; a
    recursive schema whose types are used twice at each of 40 levels is checked in linear
    time (no walk of every path)."""
    with pytest.raises(SchemaError, match=r"field r: default \{\} nests types deeper"):
        avro.parse_schema({"type": "record", "name": "R", "fields": [
            {"name": "r", "type": "R", "default": {}}]})
    tree = avro.parse_schema({"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "long"},
        {"name": "next", "type": ["null", "Node"], "default": None}]})
    assert avro.unroll(tree, 50).json.count('"Node_50"') == 1
    with pytest.raises(SchemaError, match="Node unrolled to depth 1000 nests types deeper"):
        avro.unroll(tree, 1000)
    value: Any = {"v": 0}
    for i in range(1, 400):
        value = {"v": i, "next": value}
    with pytest.raises(EncodeError, match="nests values deeper than the 100 levels"):
        avro.encode(pa.array([value]), tree)
    fields: list[Any] = [{"name": "x", "type": {"type": "record", "name": "X", "fields": [
        {"name": "a", "type": ["null", "A"]}]}}]
    for i in range(40):
        before = "X" if i == 0 else f"Y{i - 1}"
        fields.append({"name": f"y{i}", "type": {"type": "record", "name": f"Y{i}", "fields": [
            {"name": "p", "type": before}, {"name": "q", "type": before}]}})
    assert avro.is_recursive(avro.parse_schema({"type": "record", "name": "A",
                                                "fields": fields}))
