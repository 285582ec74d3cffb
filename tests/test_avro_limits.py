"""Avro schemas past what Arrow or the stack can hold: unions of more than 128 branches
and deeply nested types are SchemaErrors naming the limit, never an OverflowError or a
RecursionError."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from kproto import formats
from kproto.errors import SchemaError
from kproto.formats import avro

from .avro_support import (
    loop,  # noqa: F401  (the fixture: both decoder loops)
    read,
    write,
)

# --------------------------------------------------------------------------- unions


def _records(n: int) -> list[dict[str, Any]]:
    return [{"type": "record", "name": f"U{i}", "fields": [{"name": "x", "type": "int"}]}
            for i in range(n)]


def _in_record(union: list[Any]) -> dict[str, Any]:
    inner = {"type": "record", "name": "In", "fields": [{"name": "u", "type": union}]}
    return {"type": "record", "name": "Top", "fields": [{"name": "inner", "type": inner}]}


@pytest.mark.parametrize("union", [_records(127), _records(128), ["null", *_records(127)]],
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


@pytest.mark.parametrize("union", [_records(129), _records(300), ["null", *_records(128)]],
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
        avro.arrow_type(avro.parse_schema(_records(129)))


@pytest.mark.usefixtures("loop")
def test_a_wide_writer_union_reads_with_a_narrower_reader_and_encodes() -> None:
    """What the error suggests works: a 300-branch writer read with a reader of fewer
    branches; and encoding into the wide union (no Arrow union type involved) is
    fastavro's datum."""
    wide = _in_record([*_records(299), "string"])
    narrow = _in_record(["string", _records(4)[3]])
    datums = write(wide, [{"inner": {"u": "hi"}}, {"inner": {"u": ("U3", {"x": 5})}}])
    array, bad = avro.decode(pa.array(datums, pa.binary()), avro.parse_schema(wide),
                             avro.parse_schema(narrow))
    assert len(bad) == 0
    assert array.field("inner").field("u").to_pylist() == ["hi", {"x": 5}]
    encoded = avro.encode(pa.array([{"inner": {"u": "hi"}}]), avro.parse_schema(wide))
    assert encoded.to_pylist() == datums[:1]
