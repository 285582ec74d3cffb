"""JSON values pyarrow's JSON reader cannot read into their Arrow type as they
are written: read into a type it can read them as, then converted column-wise.

- Timestamps with a zone (JSON Schema's ``"format": "date-time"``) are read as
  strings and converted here: exactly RFC 3339 (``T``, ``t`` or a space between date
  and time, ``Z``, ``z`` or a ``±hh:mm`` offset, any fraction whose digits past the
  unit are zeros). The reader itself would also take a date alone or a time without
  an offset, reading it as UTC: a guess, not what the schema allows.
- Integers written as numbers with a fraction or an exponent (``2.0``, ``1e2``,
  ``-0.0``: valid JSON Schema integers, and what Python's ``json`` writes for a
  float) fail the reader's integer columns. When a read fails, integers are read
  as float64 (:func:`reading` with ``keep``) and converted: integral values within
  range are the integer, values with a fraction or beyond the range are bad rows.
  A double is exact below 2**53 only, so rows with larger values are *ambiguous*
  and read again with their integers exact (:func:`integral_text` rewrites such a
  row's fractional numbers when that fails too).

Every conversion is a bad row naming the field when it cannot be exact: never a
rounded or wrapped value.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Found", "convert", "integral_text", "reading"]

Path = tuple[str, ...]

#: Integers a double holds exactly: below this magnitude, every one.
_EXACT = 2.0 ** 53


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def reading(t: pa.DataType, keep: Collection[Path] | None = None, path: Path = ()
            ) -> pa.DataType:
    """The type values of ``t`` are read as: zoned timestamps as strings; with
    ``keep`` (paths of integer fields to keep), integers elsewhere as float64."""
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(reading(f.type, keep, (*path, f.name))) for f in t])
    if _is_list(t):
        item = t.value_field.with_type(reading(t.value_type, keep, (*path, "[]")))
        return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
    if pa.types.is_timestamp(t) and t.tz is not None:
        return pa.string()
    if pa.types.is_integer(t) and keep is not None and path not in keep:
        return pa.float64()
    return t


def _name(path: Path) -> str:
    return ".".join(path).replace(".[]", "[]")


@dataclass
class Found:
    """What :func:`convert` found: bad rows (row -> reason), and the rows (and the
    paths of their integer fields) whose doubles may not be their exact integers."""

    bad: dict[int, str] = field(default_factory=dict)
    ambiguous: set[int] = field(default_factory=set)
    paths: set[Path] = field(default_factory=set)


def convert(array: pa.Array, t: pa.DataType, owners: np.ndarray, found: Found,
            path: Path = ()) -> pa.Array:
    """``array`` (read as :func:`reading` says) as type ``t``. ``owners``: the row each
    element belongs to. Elements that cannot be converted exactly are null, their
    rows recorded in ``found`` (the caller drops them)."""
    if array.type == t and not _has_floats(t):
        return array
    if pa.types.is_floating(t):
        _finite(array, owners, found, _name(path))
        return array
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(t):
        children = [convert(child, f.type, owners, found, (*path, f.name))
                    for child, f in zip(array.flatten(), t, strict=True)]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    if _is_list(t):
        parents = pc.list_parent_indices(array).to_numpy()
        items = convert(array.flatten(), t.value_type, owners[parents], found, (*path, "[]"))
        offsets = pc.subtract(array.offsets, array.offsets[0])
        kind = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        return kind.from_arrays(offsets, items, type=t, mask=mask)
    if pa.types.is_timestamp(t) and pa.types.is_string(array.type):
        return _timestamps(array, t, owners, found, _name(path))
    if pa.types.is_integer(t) and pa.types.is_floating(array.type):
        return _integers(array, t, owners, found, path)
    return array.cast(t)        # (the reader's type for one it was asked for: none known)


def _has_floats(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return any(_has_floats(f.type) for f in t)
    if _is_list(t):
        return _has_floats(t.value_type)
    return bool(pa.types.is_floating(t))


def _finite(array: pa.Array, owners: np.ndarray, found: Found, name: str) -> None:
    """An infinity in a float column: the reader's for an integer literal past a double's
    range (it refuses ``1e400``), no number JSON can write: a bad row."""
    infinite = pc.is_inf(array)
    if not pc.any(infinite).as_py():
        return
    for e in np.flatnonzero(np.asarray(infinite.fill_null(False))).tolist():
        found.bad.setdefault(int(owners[e]), f"field {name}: a number beyond a double's range")


def _integers(array: pa.Array, t: pa.DataType, owners: np.ndarray, found: Found,
              path: Path) -> pa.Array:
    values = array.to_numpy(zero_copy_only=False)
    valid = np.asarray(array.is_valid())    # (not ~isnan: the reader takes NaN, Python's)
    limits = np.iinfo(t.to_pandas_dtype())
    with np.errstate(invalid="ignore"):
        fraction = valid & ~(np.trunc(values) == values)     # NaN too; trunc(inf) == inf
        outside = valid & ~fraction & ((values < float(limits.min)) |
                                       (values > float(limits.max)) | np.isinf(values))
    unsure = valid & ~fraction & ~outside & (np.abs(values) >= _EXACT)
    for e in np.flatnonzero(fraction | outside).tolist():
        value = float(values[e])
        shown = int(value) if value.is_integer() and abs(value) < _EXACT else value
        what = "is not an integer" if fraction[e] else f"is out of {t}'s range"
        found.bad.setdefault(int(owners[e]), f"field {_name(path)}: {shown!r} {what}")
    if unsure.any():
        found.ambiguous.update(owners[unsure].tolist())
        found.paths.add(path)
    keep = valid & ~fraction & ~outside & ~unsure
    return pa.array(np.where(keep, values, 0).astype(t.to_pandas_dtype()), t, mask=~keep)


#: The digits of a second's fraction a timestamp unit holds.
_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _rfc3339(digits: int) -> str:
    """RFC 3339's date-time (section 5.6; a space for the T, as its note allows), upper
    case, year 0 left out (no such year), with at most ``digits`` digits of fraction
    before trailing zeros. The day within its month is the cast's to check."""
    fraction = rf"(?:\.\d{{1,{digits}}}0*)?" if digits else r"(?:\.0+)?"
    return (r"^(?:\d{3}[1-9]|\d\d[1-9]\d|\d[1-9]\d\d|[1-9]\d{3})-(?:0[1-9]|1[0-2])-"
            r"(?:0[1-9]|[12]\d|3[01])[T ](?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d" + fraction +
            r"(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$")


def _timestamps(array: pa.Array, t: pa.DataType, owners: np.ndarray, found: Found,
                name: str) -> pa.Array:
    digits = _DIGITS[t.unit]
    text = pc.ascii_upper(array)
    fine = np.asarray(pc.match_substring_regex(text, _rfc3339(digits)).fill_null(True))
    if fine.all():
        try:
            return pc.cast(text, t)
        except pa.ArrowInvalid:     # zeros past the unit, a day past its month, beyond ns
            pass
    # zeros past the unit's digits are no loss: dropped (".500000000Z" is 500 ms)
    text = pc.replace_substring_regex(text, rf"(\.\d{{{digits}}})0+", r"\1") if digits \
        else pc.replace_substring_regex(text, r"\.0+", "")
    dated = pc.if_else(pa.array(fine), text, "2000-01-01").fill_null("2000-01-01")
    y, m, d = (np.asarray(pc.cast(pc.utf8_slice_codeunits(dated, a, b), pa.int64()))
               for a, b in ((0, 4), (5, 7), (8, 10)))
    fine &= d <= _month_days(y, m)
    strings = array.to_pylist()
    for e in np.flatnonzero(~fine).tolist():
        found.bad.setdefault(int(owners[e]), f"field {name}: {strings[e]!r} is "
                             f"{_why(strings[e], digits, t.unit)}")
    kept = pc.if_else(pa.array(fine), text, None)
    try:
        return pc.cast(kept, t)
    except pa.ArrowInvalid:         # beyond the unit's range (nanoseconds: 1677-2262)
        pass
    out: list[int | None] = []
    for e, one in enumerate(kept.to_pylist()):
        try:
            out.append(None if one is None else
                       pc.cast(pa.array([one]), t).cast(pa.int64())[0].as_py())
        except pa.ArrowInvalid:
            found.bad.setdefault(int(owners[e]), f"field {name}: {one!r} is out of {t}'s range")
            out.append(None)
    return pa.array(out, pa.int64()).cast(t)


def _why(text: str, digits: int, unit: str) -> str:
    fraction = re.search(r"\.(\d+)", text)
    if re.fullmatch(_rfc3339(99), text.upper()) and fraction and \
            len(fraction.group(1).rstrip("0")) > digits:
        return f"finer than {unit}"
    return "not an RFC 3339 date-time"


def _month_days(year: np.ndarray, month: np.ndarray) -> np.ndarray:
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    days = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[np.clip(month, 0, 12)]
    return days + ((month == 2) & leap)


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?')


def _integral(match: re.Match[bytes]) -> bytes:
    token = match.group()
    if token[:1] == b'"' or not any(c in token for c in b".eE"):
        return token
    value = float(token)
    if not value.is_integer() or abs(value) > 2.0 ** 64:
        return token
    return b"-0" if value == 0 and token[:1] == b"-" else str(int(value)).encode()


def integral_text(text: bytes) -> bytes:
    """One JSON value's text with each number written with a fraction or an exponent
    whose double is an integer (within 2**64) rewritten as that integer: ``2.0`` ->
    ``2``, ``4e18`` -> ``4000000000000000000``, ``-0.0`` -> ``-0`` (still -0.0 for a
    float64), so the reader reads it into an integer column exactly. Strings are kept."""
    return _TOKEN.sub(_integral, text)
