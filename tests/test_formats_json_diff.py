"""Differential tests of kproto's JSON decoding against jsonschema (issue 26's checking):
random JSON Schemas (objects, nested objects, arrays, strings, integers, numbers,
booleans, date-times, enums, nullable unions spelled every way, ``$ref`` into ``$defs``;
tests/json_schema_strategies.py) and random values, valid and mutated.

The oracle is exact: a row decodes (is not a bad row) if and only if its value has an
Arrow value of the schema's type (``project``), and then it decodes to that value (and
what kproto encodes of it decodes the same). On top, against jsonschema's validation
(format checking on): every valid value decodes, except
the documented few kproto cannot hold (integers past int64, fractions past microseconds,
lone surrogates); every invalid value that decodes is invalid only for what kproto
documents it does not check (docs/formats.md). And values confluent-kafka's
JSONSerializer writes decode through the registry to the object it serialized."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from kproto import formats
from kproto.errors import EncodeError, FormatError
from kproto.testing import SchemaRegistryServer

from .json_schema_strategies import (
    Shape,
    Unrepresentable,
    dumps,
    nan_free,
    project,
    schemas,
    top_shapes,
    values,
)

SETTINGS = settings(max_examples=500, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: What kproto documents it does not check (docs/formats.md, "JSON"): constraints beyond
#: the type, and null where the schema has no null (every Arrow field is nullable).
UNCHECKED = {"required", "enum", "const", "minimum", "maxLength"}


def _explained(error: jsonschema.ValidationError) -> bool:
    """Whether a validation error is one kproto documents it does not check."""
    if error.validator in UNCHECKED:
        return True
    if error.validator == "type" and error.instance is None:
        return True
    if error.validator == "format" and isinstance(error.instance, str) and \
            error.instance[10:11] == " ":               # RFC 3339's note: a space for the T
        return True
    if error.validator in ("oneOf", "anyOf"):           # some branch fails only so
        branches: dict[Any, list[jsonschema.ValidationError]] = {}
        for sub in error.context or ():
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        return any(all(_explained(e) for e in errs) for errs in branches.values())
    return False


def _validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _plain(array: pa.Array, shape: Shape) -> list[Any]:
    """A decoded array as Python values, its timestamps as their microseconds, its NaNs
    as "NaN" (as ``project`` has them)."""
    return nan_free(array.cast(shape.arrow()).to_pylist())


def check(shape: Shape, schema: dict[str, Any], texts: list[bytes]) -> list[Any]:
    """Decode ``texts`` (plain values of ``schema``) with kproto and hold every row to
    the oracle; returns the expected rows."""
    validate = _validator(schema)
    expected: list[Any] = []
    bad: list[int] = []
    for row, text in enumerate(texts):
        try:
            value = json.loads(text)
        except ValueError:
            value = Unrepresentable
        try:
            if not isinstance(value, dict):
                raise Unrepresentable("not one JSON object")
            expected.append(project(value, shape))
            valid_anyway = True
        except Unrepresentable as exc:
            expected.append(None)
            bad.append(row)
            valid_anyway = exc.documented
        if value is not Unrepresentable and validate.is_valid(value):
            assert valid_anyway, (row, value, "valid, yet kproto has no value for it")
        elif row not in bad:        # invalid, yet it decodes: only for what is unchecked
            errors = list(validate.iter_errors(value))
            assert all(_explained(e) for e in errors), (row, value, [e.message for e in errors])
    decoded = formats.decode_with_bad_rows(pa.array(texts, pa.binary()), "json", schema=schema,
                                           errors="null")
    assert decoded.bad_rows.tolist() == bad
    assert _plain(decoded.array, shape) == expected
    # what kproto encodes of it reads back the same; a time Python has no datetime for
    # (before year 1 or past 9999 in UTC: 0001-01-01T00:00:00+01:00) has no text either
    timeless = [row for row, value in enumerate(expected) if _timeless(value, shape)]
    if timeless:
        with pytest.raises(EncodeError, match=f"row {timeless[0]}: a value with no JSON"):
            formats.encode(decoded.array, "json", schema=schema)
    else:
        again = formats.decode_with_bad_rows(formats.encode(decoded.array, "json",
                                                            schema=schema), "json", schema=schema)
        assert again.bad_count == 0 and _plain(again.array, shape) == expected
    if bad:
        with pytest.raises(FormatError) as info:
            formats.decode(pa.array(texts, pa.binary()), "json", schema=schema)
        assert info.value.row == bad[0]
    return expected


#: The microseconds of 0001-01-01T00:00:00Z and of 10000-01-01T00:00:00Z.
_YEARS = (-62135596800 * 10**6, 253402300800 * 10**6)


def _timeless(value: Any, shape: Shape) -> bool:
    """Whether an expected value holds a date-time outside Python's years."""
    if value is None:
        return False
    if shape.kind == "object":
        return any(_timeless(value[n], s) for n, s in shape.properties.items())
    if shape.kind == "array":
        assert shape.items is not None
        return any(_timeless(v, shape.items) for v in value)
    return shape.kind == "date-time" and not _YEARS[0] <= value < _YEARS[1]


@st.composite
def cases(draw: Any, mutate: bool = True) -> tuple[Shape, dict[str, Any], list[bytes]]:
    shape = draw(top_shapes())
    schema = draw(schemas(shape))
    rows = draw(st.lists(values(shape, mutate), min_size=1, max_size=6))
    texts = [dumps(r, draw(st.integers(0, 3))) for r in rows]
    if mutate and draw(st.integers(0, 4)) == 0:         # now and then not JSON text
        at = draw(st.integers(0, len(texts) - 1))
        text = texts[at]
        texts[at] = draw(st.sampled_from([text[:-1], text + b" {}", b"[" + text + b"]",
                                          b"null", text.replace(b":", b"", 1)]))
    return shape, schema, texts


def _one(name: str, shape: Shape, schema: dict[str, Any], text: bytes) -> Any:
    return example(case=(Shape("object", properties={name: shape}),
                         {"type": "object", "properties": {name: schema}}, [text]))


@SETTINGS
@given(case=cases())
# regression: a percent-encoded JSON pointer (a $defs name with a space) pointed at nothing
@example(case=(Shape("object", properties={"a": Shape("string")}),
               {"type": "object", "properties": {"a": {"$ref": "#/$defs/sp%20ace~1x"}},
                "$defs": {"sp ace/x": {"type": "string"}}}, [b'{"a": "x"}']))
# regression: pyarrow reads an integer literal past a double's range as inf (1e400 it
# refuses): a bad row now
@_one("f", Shape("number"), {"type": "number"}, b'{"f": 1' + b"0" * 400 + b"}")
# issue 26 item 8: an integer written as 2.0, -0.0 or 1e+18 is that integer
@_one("n", Shape("array", items=Shape("integer")), {"items": {"type": "integer"},
                                                    "type": "array"},
      b'{"n": [2.0, -0.0, 1e+18, 9007199254740993, 2.5]}')
# regression: encoding a time before year 1 in UTC raised OverflowError from Python's
# datetime (no row named): an EncodeError naming the row
@_one("t", Shape("date-time"), {"type": "string", "format": "date-time"},
      b'{"t": "0001-01-01T00:00:00+23:59"}')
# regression: NaN (Python's json writes it; pyarrow reads it) in an integer field read
# as null, taken for the reader's null: a bad row
@_one("n", Shape("integer"), {"type": "integer"}, b'{"n": NaN}')
def test_kproto_decodes_what_the_schema_types_hold_and_nothing_else(case):
    shape, schema, texts = case
    assert formats.reader_type("json", schema=schema) == _with_timestamps(shape.arrow(),
                                                                          shape)
    check(shape, schema, texts)


def _with_timestamps(t: pa.DataType, shape: Shape) -> pa.DataType:
    """``shape``'s Arrow type with its date-times as timestamp[us, UTC] (as kproto reads)."""
    if shape.kind == "object":
        return pa.struct([(n, _with_timestamps(f.type, s)) for f, (n, s)
                          in zip(t, shape.properties.items(), strict=True)])
    if shape.kind == "array":
        assert shape.items is not None
        return pa.list_(_with_timestamps(t.value_type, shape.items))
    return pa.timestamp("us", tz="UTC") if shape.kind == "date-time" else t


@pytest.fixture(scope="module")
def registry():
    with SchemaRegistryServer() as server:
        yield server


_topics = iter(range(10**6))


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(case=cases(mutate=False))
def test_what_confluents_json_serializer_writes_decodes_to_the_object(registry, case):
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    shape, schema, texts = case
    valid = _validator(schema).is_valid     # (constraints: the serializer refuses others)
    objects = [o for o in map(json.loads, texts) if valid(o)]
    assume(objects)
    topic = f"diff-{next(_topics)}"
    with Confluent({"url": registry.url}) as client:
        serialize = JSONSerializer(json.dumps(schema), client)
        context = SerializationContext(topic, MessageField.VALUE)
        framed = [serialize(o, context) for o in objects]
    decoded = formats.decode_with_bad_rows(pa.array(framed), "json", registry=registry.url,
                                           errors="null")
    expected, bad = [], []
    for row, value in enumerate(objects):
        try:
            expected.append(project(value, shape))
        except Unrepresentable as exc:
            assert exc.documented, (value, exc)
            expected.append(None)
            bad.append(row)
    assert decoded.bad_rows.tolist() == bad
    assert _plain(decoded.array, shape) == expected
