"""Hypothesis strategies for random JSON Schemas and values of them (valid ones, and ones
mutated at a random node), and the oracle the differential tests hold kproto to:
:func:`project`, a value as the Arrow type of its schema holds it, or Unrepresentable.

A schema is drawn as a :class:`Shape` (what kproto reads it as) and then spelled in one
of the ways JSON Schema allows: nullable as ``"type": [T, "null"]``, ``oneOf``/``anyOf``
with ``{"type": "null"}`` or an enum holding null; any subschema moved under ``$defs`` or
``definitions`` (names with ``/``, ``~`` and spaces, escaped in the pointer) and
referenced; integer and string enums with or without a ``type``; constraints kproto does
not check (``required``, ``minimum``, ``maxLength``)."""

from __future__ import annotations

import calendar
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pyarrow as pa
from hypothesis import strategies as st

SCALARS = ("string", "date-time", "integer", "number", "boolean", "enum-string", "enum-integer")
INT64 = (-(2**63), 2**63 - 1)


@dataclass
class Shape:
    kind: str                       # a SCALARS kind, "object" or "array"
    nullable: bool = False
    properties: dict[str, Shape] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    items: Shape | None = None
    enum: tuple[Any, ...] = ()

    def arrow(self) -> pa.DataType:
        """The Arrow type kproto reads the shape as (timestamps as their microseconds)."""
        if self.kind == "object":
            return pa.struct([(n, s.arrow()) for n, s in self.properties.items()])
        if self.kind == "array":
            assert self.items is not None
            return pa.list_(self.items.arrow())
        return {"string": pa.string(), "enum-string": pa.string(), "integer": pa.int64(),
                "enum-integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_(),
                "date-time": pa.int64()}[self.kind]


NAMES = st.text(st.sampled_from("ab_-. é/~$"), max_size=3)


def shapes(depth: int = 0) -> st.SearchStrategy[Shape]:
    kinds = list(SCALARS) + (["object", "array", "object"] if depth < 3 else [])
    return st.sampled_from(kinds).flatmap(lambda kind: _shape(kind, depth))


def _shape(kind: str, depth: int) -> st.SearchStrategy[Shape]:
    nullable = st.booleans()
    if kind == "object":
        return st.dictionaries(NAMES, shapes(depth + 1), min_size=1, max_size=4).flatmap(
            lambda props: st.builds(Shape, st.just("object"), nullable, st.just(props),
                                    st.frozensets(st.sampled_from(sorted(props)))))
    if kind == "array":
        return st.builds(lambda s, n: Shape("array", n, items=s), shapes(depth + 1), nullable)
    if kind == "enum-string":
        return st.builds(lambda v, n: Shape(kind, n, enum=tuple(v)),
                         st.lists(st.text(max_size=3), min_size=1, max_size=3, unique=True),
                         nullable)
    if kind == "enum-integer":
        return st.builds(lambda v, n: Shape(kind, n, enum=tuple(v)),
                         st.lists(st.integers(-3, 2**62), min_size=1, max_size=3, unique=True),
                         nullable)
    return st.builds(Shape, st.just(kind), nullable)


def top_shapes() -> st.SearchStrategy[Shape]:
    """An object (a row): not nullable, at least one property."""
    return _shape("object", 0).map(lambda s: Shape("object", False, s.properties, s.required))


# --------------------------------------------------------------------------- spelling


@st.composite
def schemas(draw: Any, shape: Shape) -> dict[str, Any]:
    """A JSON Schema of ``shape``, spelled at random (see the module)."""
    defs: dict[str, Any] = {}
    defs_key = draw(st.sampled_from(["$defs", "definitions"]))
    top = _spell(draw, shape, defs, defs_key)
    if defs:
        top = {**top, defs_key: defs}
    draft = draw(st.sampled_from(["http://json-schema.org/draft-07/schema#",
                                  "https://json-schema.org/draft/2020-12/schema"]))
    return {"$schema": draft, **top}


def _spell(draw: Any, shape: Shape, defs: dict[str, Any], defs_key: str) -> dict[str, Any]:
    base = _base(draw, shape, defs, defs_key)
    if shape.nullable:
        ways = ["oneOf", "anyOf"] + (["type"] if isinstance(base.get("type"), str) else []) \
            + (["enum"] if "enum" in base else [])
        way = draw(st.sampled_from(ways))
        if way == "type":
            base = {**base, "type": [base["type"], "null"]}
        elif way == "enum":
            base = {**base, "enum": [*base["enum"], None]}
            base.pop("type", None)
        else:
            branches = [{"type": "null"}, base]
            base = {way: branches if draw(st.booleans()) else branches[::-1]}
    if draw(st.integers(0, 3)) == 0:            # referenced from $defs
        name = draw(st.sampled_from(["a", "x/y", "t~1", "sp ace", "é"])) + str(len(defs))
        defs[name] = base
        pointer = name.replace("~", "~0").replace("/", "~1")
        return {"$ref": f"#/{defs_key}/" + quote(pointer, safe="/~$")}
    return base


def _base(draw: Any, shape: Shape, defs: dict[str, Any], defs_key: str) -> dict[str, Any]:
    kind = shape.kind
    if kind == "object":
        out: dict[str, Any] = {"type": "object", "properties": {
            n: _spell(draw, s, defs, defs_key) for n, s in shape.properties.items()}}
        if shape.required:
            out["required"] = sorted(shape.required)
        return out
    if kind == "array":
        assert shape.items is not None
        return {"type": "array", "items": _spell(draw, shape.items, defs, defs_key)}
    if kind.startswith("enum-"):
        out = {"enum": list(shape.enum)}
        if draw(st.booleans()):
            out["type"] = kind[5:]
        return out
    if kind == "date-time":
        return {"type": "string", "format": "date-time"}
    out = {"type": kind}
    if kind == "integer" and draw(st.booleans()):
        out["minimum"] = 0                      # a constraint: not checked
    if kind == "string" and draw(st.booleans()):
        out["maxLength"] = 2
    return out


# --------------------------------------------------------------------------- values

ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(NAMES, inner, max_size=2),
    max_leaves=4)

TIMES = st.builds(
    lambda y, mo, d, h, mi, s, frac, sep, zone: (
        f"{y:04d}-{mo:02d}-{min(d, calendar.monthrange(y, mo)[1]):02d}{sep}{h:02d}:{mi:02d}:"
        f"{s:02d}{frac}{zone}"),
    st.integers(1, 9999), st.integers(1, 12), st.integers(1, 31), st.integers(0, 23),
    st.integers(0, 59), st.integers(0, 59),
    st.sampled_from(["", ".5", ".123456", ".1234560", ".000000000", ".1234567", ".999999999"]),
    st.sampled_from(["T", "t"]),
    st.sampled_from(["Z", "z", "+00:00", "-00:00", "+23:59", "-12:30", "+05:45"]))

NOT_QUITE = {   # values of the wrong type, or of the type but not representable / not valid
    "integer": st.sampled_from([2.5, 1e300, 2**63, -(2**63) - 1, 2**64, True, "1", 1e-5,
                                math.nan]),
    "number": st.sampled_from(["1.5", True, 10**400, [1.0]]),
    "string": st.sampled_from([5, True, "\ud800", {"a": 1}, ["x"]]),
    "date-time": st.sampled_from(["2024-05-06T07:08:09", "2024-05-06", "2024-02-30T00:00:00Z",
                                  "2024-05-06 07:08:09Z", "2024-05-06T07:08Z",
                                  "2024-05-06T07:08:09+0200", "0000-01-01T00:00:00Z",
                                  "2024-05-06T07:08:60Z", 1714979289]),
    "boolean": st.sampled_from([0, 1, "true", None]),
    "object": st.sampled_from([[], "x", 0, [{}]]),
    "array": st.sampled_from([{}, "x", 0, [[]]]),
}


def values(shape: Shape, mutate: bool) -> st.SearchStrategy[Any]:
    """Values valid under ``shape``'s schema (``mutate``: now and then not: a value of the
    wrong type, not quite valid, or any JSON at a random node)."""
    valid = _valid(shape, mutate)
    if not mutate:
        return valid
    kind = "string" if shape.kind == "enum-string" else "integer" \
        if shape.kind == "enum-integer" else shape.kind
    return st.integers(0, 11).flatmap(
        lambda pick: valid if pick < 9 else NOT_QUITE[kind] if pick < 11 else ANY_JSON)


def _valid(shape: Shape, mutate: bool) -> st.SearchStrategy[Any]:
    kind = shape.kind
    if kind == "object":
        required = {n: values(s, mutate) for n, s in shape.properties.items()
                    if n in shape.required}
        optional = {n: values(s, mutate) for n, s in shape.properties.items()
                    if n not in shape.required}
        base: st.SearchStrategy[Any] = st.fixed_dictionaries(required, optional=optional)
        if mutate:
            base = st.tuples(base, st.dictionaries(NAMES, ANY_JSON, max_size=1)).map(
                lambda both: {**both[1], **both[0]})       # extra properties: dropped
    elif kind == "array":
        assert shape.items is not None
        base = st.lists(values(shape.items, mutate), max_size=3)
    elif kind.startswith("enum-"):
        base = st.sampled_from(shape.enum)
    elif kind == "integer":
        base = st.integers(*INT64) | st.integers(-(2**53), 2**53).map(float) | \
            st.sampled_from([2**63 - 1, -(2**63), 2**53 + 1, -0.0, 1e18])
    elif kind == "number":
        base = st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**70), 2**70) \
            | st.sampled_from([math.nan, math.inf, -math.inf])     # Python's json writes them
    elif kind == "string":
        base = st.text(max_size=5)
    elif kind == "date-time":
        base = TIMES
    else:
        base = st.booleans()
    return st.none() | base if shape.nullable else base


# --------------------------------------------------------------------------- the oracle


#: What a NaN is compared as (NaN is no value equal to itself). Python's json writes a
#: NaN as ``NaN`` (not JSON), which pyarrow's reader reads as NaN.
NAN = "NaN"


def nan_free(value: Any) -> Any:
    """``value`` with its NaNs as :data:`NAN`."""
    if isinstance(value, float) and math.isnan(value):
        return NAN
    if isinstance(value, dict):
        return {k: nan_free(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nan_free(v) for v in value]
    return value


class Unrepresentable(Exception):
    """The value has no exact Arrow value of the shape's type: a bad row. ``documented``:
    the value is valid JSON Schema, and docs/formats.md says why kproto cannot hold it."""

    def __init__(self, why: str, documented: bool = False) -> None:
        super().__init__(why)
        self.documented = documented


def project(value: Any, shape: Shape) -> Any:
    """``value`` as kproto's Arrow type of ``shape`` holds it (date-times as microseconds
    since the epoch, missing properties None, others dropped), or Unrepresentable."""
    if value is None:
        return None     # (a non-nullable field may be missing: null is its only form)
    kind = shape.kind
    if kind == "object":
        if not isinstance(value, dict):
            raise Unrepresentable(f"{value!r} is not an object")
        return {n: project(value.get(n), s) for n, s in shape.properties.items()}
    if kind == "array":
        if not isinstance(value, list):
            raise Unrepresentable(f"{value!r} is not an array")
        assert shape.items is not None
        return [project(v, shape.items) for v in value]
    if isinstance(value, bool) != (kind == "boolean"):
        raise Unrepresentable(f"{value!r} is not a {kind}")
    if kind == "boolean":
        return value
    if kind in ("integer", "enum-integer", "number"):
        if not isinstance(value, (int, float)):
            raise Unrepresentable(f"{value!r} is not a number")
        if kind == "number":
            try:
                number = float(value)
            except OverflowError:
                raise Unrepresentable("beyond a double", documented=True) from None
            if math.isinf(number):          # Python's json writes Infinity: not JSON
                raise Unrepresentable("Infinity", documented=True)
            return NAN if math.isnan(number) else number
        if isinstance(value, float) and not value.is_integer():
            raise Unrepresentable(f"{value!r} is not an integer")
        if not INT64[0] <= value <= INT64[1]:
            raise Unrepresentable(f"{value!r} is beyond int64", documented=True)
        return int(value)
    if not isinstance(value, str):
        raise Unrepresentable(f"{value!r} is not a string")
    if any("\ud800" <= c <= "\udfff" for c in value):
        raise Unrepresentable("a lone surrogate is no UTF-8", documented=True)
    if kind == "date-time":
        return micros(value)
    return value


_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?"
                      r"(Z|([+-])(\d\d):(\d\d))", re.ASCII)


def micros(text: str) -> int:
    """An RFC 3339 date-time's microseconds since the epoch (computed here from its
    fields, as no Python type holds all of them), or Unrepresentable."""
    from rfc3339_validator import validate_rfc3339

    if not validate_rfc3339(text.upper().replace(" ", "T", 1) if text[10:11] == " "
                            else text.upper()):
        raise Unrepresentable(f"{text!r} is not RFC 3339")
    m = _RFC3339.fullmatch(text.upper())
    assert m is not None
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    fraction = (m.group(7) or "").rstrip("0")
    if len(fraction) > 6:
        raise Unrepresentable(f"{text!r} is finer than microseconds", documented=True)
    offset = 0 if m.group(8) == "Z" else \
        (1 if m.group(9) == "+" else -1) * (int(m.group(10)) * 60 + int(m.group(11)))
    days = _days(y, mo, d)
    seconds = ((days * 24 + h) * 60 + mi - offset) * 60 + s
    return seconds * 10**6 + int(fraction.ljust(6, "0"))


def _days(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def dumps(value: Any, style: int) -> bytes:
    """``value`` as JSON text, in one of a few styles (compact, spaced, pretty, ASCII). A
    lone surrogate is escaped (``\\ud800``) in ASCII, else its bytes (no UTF-8) written."""
    if style == 0:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    elif style == 1:
        text = json.dumps(value)
    else:
        text = json.dumps(value, indent=1, ensure_ascii=style == 3)
    return text.encode("utf-8", "surrogatepass")
