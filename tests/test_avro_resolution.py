"""Avro schema resolution, rule by rule, against fastavro's reader (and, where the two
differ, Java's: ``Resolver``/``Schema.applyAliases`` for decoding, ``SchemaCompatibility``
for what resolves at all), both decoder loops. The generated writer/reader pairs are in
tests/test_avro_pairs.py; these are the named cases and regressions."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kproto.errors import FormatError, SchemaError
from kproto.formats import avro

from .avro_support import (
    D,
    arrow_values,
    column,
    loop,  # noqa: F401  (the fixture: both decoder loops)
    plain,
    read,
    write,
)

UTC = datetime.timezone.utc


def _decode(writer: Any, reader: Any, records: list[Any], **kw: Any) -> tuple[list[Any], Any]:
    array, bad = avro.decode(column(write(writer, records)), avro.parse_schema(writer),
                             avro.parse_schema(reader), **kw)
    array.validate(full=True)
    return arrow_values(array), bad


def _record(name: str, *fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


# --------------------------------------------------------------------------- fields

ACCOUNT = _record("Account",
                  {"name": "account_id", "type": "string", "aliases": ["user_id"]},
                  {"name": "user_id", "type": "string", "default": "unknown"})


@pytest.mark.usefixtures("loop")
def test_field_alias_does_not_take_another_fields_value() -> None:
    """Issue 26 item 4: a reader field's alias naming another reader field took that
    field's written value (the alias won over the field's own name)."""
    records = [{"account_id": "a1", "user_id": "u1"}]
    datums = write(ACCOUNT, records)
    expected = read(ACCOUNT, datums, ACCOUNT)
    assert expected == records
    for reader in (None, ACCOUNT):
        array, _ = avro.decode(column(datums), avro.parse_schema(ACCOUNT),
                               None if reader is None else avro.parse_schema(reader))
        assert array.to_pylist() == expected


@pytest.mark.usefixtures("loop")
def test_field_rename_reads_the_old_field_into_the_aliased_one() -> None:
    """v1 wrote ``user_id``; v2 renamed it ``account_id`` (alias ``user_id``) and added a
    new ``user_id`` with a default. Aliases rewrite the writer's names first (the
    specification, Java's Schema.applyAliases), and only for a reader field whose own name
    the writer lacks: account_id gets the old value, user_id its default. (fastavro
    matches writer names against reader names before aliases: user_id takes the value and
    account_id, which has no default, cannot be filled.)"""
    v1 = _record("Account", {"name": "user_id", "type": "string"})
    got, _ = _decode(v1, ACCOUNT, [{"user_id": "u1"}])
    assert got == [{"account_id": "u1", "user_id": "unknown"}]
    from fastavro.read import SchemaResolutionError

    with pytest.raises(SchemaResolutionError, match="account_id"):
        read(v1, write(v1, [{"user_id": "u1"}]), ACCOUNT)


def test_ambiguous_field_aliases_are_schema_errors() -> None:
    writer = _record("R", {"name": "a", "type": "int"}, {"name": "b", "type": "int"})
    for reader in [
        # one reader field whose aliases name two writer fields (Java: "matches multiple
        # fields in writer record schema")
        _record("R", {"name": "x", "type": "int", "aliases": ["a", "b"]}),
        # two reader fields whose aliases name one writer field
        _record("R", {"name": "x", "type": "int", "aliases": ["a"]},
                {"name": "y", "type": "int", "aliases": ["a"]}),
    ]:
        with pytest.raises(SchemaError, match="alias"):
            avro.decode(column([]), avro.parse_schema(writer), avro.parse_schema(reader))


@pytest.mark.usefixtures("loop")
def test_missing_reader_fields_take_their_defaults_of_every_type() -> None:
    fixed = {"type": "fixed", "name": "F2", "size": 2}
    reader = _record(
        "R", {"name": "keep", "type": "int"},
        {"name": "b", "type": "bytes", "default": "\u00ff\u0000"},
        {"name": "fx", "type": fixed, "default": "ab"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]},
         "default": "Y"},
        {"name": "arr", "type": {"type": "array", "items": "F2"}, "default": ["cd"]},
        {"name": "m", "type": {"type": "map", "values": "long"}, "default": {"k": 7}},
        {"name": "rec", "type": _record("In", {"name": "x", "type": "string",
                                               "default": "é"},
                                        {"name": "y", "type": "double"}),
         "default": {"y": 1.5}},
        {"name": "u_null", "type": ["null", "string"], "default": None},
        {"name": "u_first", "type": ["string", "null"], "default": "s"},
        # Avro 1.12: a union's default is of the first branch it fits (1.11 allowed only
        # the first branch; where 1.11 accepts a default the two agree)
        {"name": "u_later", "type": ["null", "long"], "default": 5},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4,
                                 "scale": 2}, "default": "\u0004\u00d2"},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}, "default": 19724},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"},
         "default": 1500},
    )
    got, _ = _decode(_record("R", {"name": "keep", "type": "int"}), reader, [{"keep": 1}])
    assert got == [{
        "keep": 1, "b": b"\xff\x00", "fx": b"ab", "e": "Y", "arr": [b"cd"], "m": {"k": 7},
        "rec": {"x": "é", "y": 1.5}, "u_null": None, "u_first": "s", "u_later": 5,
        "dec": D("12.34"), "day": datetime.date(2024, 1, 2),
        "ts": datetime.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)}]


def test_a_default_that_fits_no_branch_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="fits no branch"):
        avro.parse_schema(_record("R", {"name": "u", "type": ["null", "int"],
                                        "default": "x"}))


# --------------------------------------------------------------------------- named types


def _enum(name: str, symbols: list[str], **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": symbols, **extra}


@pytest.mark.usefixtures("loop")
def test_named_types_match_by_unqualified_name_or_reader_alias() -> None:
    """The specification (and Java's SchemaCompatibility): the same unqualified name, or
    the writer's full name among the reader's aliases (which are qualified by the
    reader's namespace)."""
    writer = _enum("E", ["A", "B"], namespace="a")
    assert _decode(writer, _enum("E", ["B", "A"], namespace="b"), ["A"])[0] == ["A"]
    assert _decode(writer, _enum("New", ["A", "B"], namespace="b", aliases=["a.E"]),
                   ["B"])[0] == ["B"]
    # alias "E" in namespace b is b.E, not a.E (fastavro compares the bare alias too)
    with pytest.raises(SchemaError):
        _decode(writer, _enum("New", ["A", "B"], namespace="b", aliases=["E"]), ["A"])
    with pytest.raises(SchemaError):
        _decode(_record("a.R", {"name": "x", "type": "int"}),
                _record("b.Other", {"name": "x", "type": "int"}), [{"x": 1}])


@pytest.mark.usefixtures("loop")
def test_reader_union_prefers_the_branch_of_the_same_full_name() -> None:
    """Java's firstMatchingBranch: the exact full name first, then unqualified names,
    then promotions."""
    writer = _enum("E", ["A", "B"], namespace="b")
    reader = [_enum("E", ["A", "B", "C"], namespace="a"), _enum("E", ["B", "A"], namespace="b")]
    array, _ = avro.decode(column(write(writer, ["A"])), avro.parse_schema(writer),
                           avro.parse_schema(reader))
    assert array.type_codes.to_pylist() == [1]
    assert arrow_values(array) == ["A"]
    # without the exact one, the same unqualified name; a long before an int: int first
    array, _ = avro.decode(column(write(writer, ["B"])), avro.parse_schema(writer),
                           avro.parse_schema([reader[0], "string"]))
    assert array.type_codes.to_pylist() == [0]
    array, _ = avro.decode(column(write("int", [3])), avro.parse_schema('"int"'),
                           avro.parse_schema('["long", "int", "string"]'))
    assert array.type_codes.to_pylist() == [1]


@pytest.mark.usefixtures("loop")
def test_a_value_stays_in_its_branch_of_the_same_union() -> None:
    """A union of string and bytes read with one that also holds null: a bytes value
    reads as bytes (Java: the same type before a promotion). fastavro reads it into the
    first branch it matches, the string."""
    union, reader = ["string", "bytes"], ["string", "bytes", "null"]
    got, _ = _decode(union, reader, [b"x", "y"])
    assert got == [b"x", "y"]
    assert read(union, write(union, [b"x"]), reader) == ["x"]          # fastavro


@pytest.mark.usefixtures("loop")
def test_fixed_needs_the_same_size_and_name() -> None:
    f4 = {"type": "fixed", "name": "F", "size": 4}
    assert _decode(f4, {**f4, "namespace": "other"}, [b"abcd"])[0] == [b"abcd"]
    for reader in ({**f4, "size": 5}, {**f4, "name": "G"}):
        with pytest.raises(SchemaError):
            _decode(f4, reader, [b"abcd"])


# --------------------------------------------------------------------------- unions


@pytest.mark.usefixtures("loop")
def test_writer_union_branch_that_cannot_be_resolved_fails_its_rows_only() -> None:
    """A writer branch the reader cannot read (here: a record whose field changed type)
    is an error for the values written in it, as Java's and fastavro's decoders do; the
    reason says why."""
    inner = _record("In", {"name": "x", "type": "int"})
    writer = _record("R", {"name": "u", "type": ["null", inner]})
    reader = _record("R", {"name": "u", "type": ["null", _record(
        "In", {"name": "x", "type": "string"})]})
    got, bad = _decode(writer, reader, [{"u": None}, {"u": {"x": 1}}], errors="null")
    assert got == [{"u": None}, None] and bad.tolist() == [1]
    with pytest.raises(FormatError, match="branch 1 .*field x: .*int cannot be read as string"):
        _decode(writer, reader, [{"u": {"x": 1}}])
    with pytest.raises(SchemaError):               # no branch at all: the pair is unusable
        _decode(["int", "boolean"], '"string"', [1])


@pytest.mark.usefixtures("loop")
def test_enum_symbols_with_and_without_reader_default() -> None:
    writer = _enum("E", ["A", "B", "NEW"])
    got, _ = _decode(writer, _enum("E", ["B", "A", "UNKNOWN"], default="UNKNOWN"),
                     ["A", "NEW"])
    assert got == ["A", "UNKNOWN"]
    got, bad = _decode(writer, _enum("E", ["B", "A"]), ["A", "NEW"], errors="null")
    assert got == ["A", None] and bad.tolist() == [1]


@pytest.mark.usefixtures("loop")
def test_promotions_and_what_is_not_one() -> None:
    assert _decode("int", '"double"', [2**31 - 1])[0] == [2**31 - 1]
    assert _decode("long", '"float"', [2**40 + 1])[0] == [float(2**40)]
    assert _decode("string", '"bytes"', ["é"])[0] == ["é".encode()]
    assert _decode("bytes", '"string"', [b"ok"])[0] == ["ok"]
    for w, r in [("long", '"int"'), ("double", '"float"'), ("float", '"long"'),
                 ("int", '"string"'), ("boolean", '"int"'), ("null", '"int"')]:
        with pytest.raises(SchemaError):
            _decode(w, r, [None if w == "null" else 1])


@pytest.mark.usefixtures("loop")
def test_logical_types_on_both_sides() -> None:
    """Logical types ride on their base types: the same on both sides reads as itself;
    a decimal's precision may widen (a value too big for the reader's is a row error)
    but not its scale."""
    dec = {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}
    assert _decode(dec, {**dec, "precision": 10}, [D("1234.56")])[0] == [D("1234.56")]
    got, bad = _decode({**dec, "precision": 10}, dec, [D("12345678.90"), D("1.5")],
                       errors="null")
    assert got == [None, D("1.50")] and bad.tolist() == [0]
    with pytest.raises(SchemaError, match="scale"):
        _decode(dec, {**dec, "scale": 3}, [D("1.5")])
    date = {"type": "int", "logicalType": "date"}
    assert _decode(date, date, [datetime.date(1, 1, 1)])[0] == [datetime.date(1, 1, 1)]
    assert plain(read(date, write(date, [datetime.date(2024, 1, 2)]), date)[0]) == \
        datetime.date(2024, 1, 2)
