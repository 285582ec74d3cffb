"""What :meth:`kproto.Producer.send_batch` takes: the columns of a record table.

A table is checked before anything is sent, and refused with an
:class:`~kproto.errors.EncodeError` naming the column, rather than read as
something else: a table without a ``value`` column is not a table of tombstones
(it used to go out as one, its other columns dropped), a ``Key`` column is not
``key``, a ``timestamp`` column of text is not a time.
"""

from __future__ import annotations

import operator
from typing import Any

from ..errors import EncodeError

__all__ = ["COLUMNS", "check_names", "checked_table"]

#: The columns send_batch writes, in the order its errors name them.
COLUMNS = ("key", "value", "timestamp", "headers", "partition")

_HEADERS = "list<struct<key: string, value: binary>>"


def check_names(names: list[str], also: tuple[str, ...] = ()) -> None:
    """Refuse column ``names`` without ``value``, or with a column that would not be
    written (``also``: more columns the caller consumes itself, e.g. ``topic``)."""
    allowed = COLUMNS + also
    if "value" not in names:
        raise EncodeError(
            f"the table has no 'value' column (its columns: {names}); records need one: "
            f"{', '.join(allowed)} (a tombstone is a null in the value column, not a "
            "missing column)")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise EncodeError(f"columns {twice} appear more than once (its columns: {names})")
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise EncodeError(f"columns {unknown} are not written to Kafka: a record table "
                          f"has the columns {', '.join(allowed)}")


def checked_table(table: Any, partition: int | None) -> Any:
    """``table`` (a pyarrow Table) ready for send_batch's encoder, or an EncodeError
    naming its first column of a wrong type; also refuses a negative ``partition``
    argument or ``partition`` column value (null in the column: no partition given).
    Null-typed columns (``pa.nulls(n)``) are taken as the type they stand for."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if partition is not None and (not _is_int(partition) or partition < 0):
        raise EncodeError(f"partition {partition!r} is not a partition number (0 or more)")
    check_names(table.schema.names)
    for i, field in enumerate(table.schema):
        t, name = field.type, field.name
        if pa.types.is_null(t):
            stands_for = {"headers": _headers_type(), "timestamp": pa.int64(),
                          "partition": pa.int32()}.get(name, pa.binary())
            table = table.set_column(i, name, pa.nulls(len(table), stands_for))
        elif name in ("key", "value"):
            if not _is_bytes(t):
                raise EncodeError(f"column {name!r} must be binary or string, not {t}")
        elif name == "timestamp":
            if not (pa.types.is_timestamp(t) or pa.types.is_integer(t)):
                raise EncodeError(f"column 'timestamp' must be a timestamp or integer "
                                  f"milliseconds, not {t}")
            if pa.types.is_integer(t):
                table = table.set_column(i, name, _cast(table.column(i), name, pa.int64()))
        elif name == "partition":
            if not pa.types.is_integer(t):
                raise EncodeError(f"column 'partition' must be integers, not {t}")
            column = _cast(table.column(i), name, pa.int32())
            table = table.set_column(i, name, column)
            negative = pc.less(column, 0)
            if pc.any(negative).as_py():
                row = pc.index(negative, True).as_py()
                raise EncodeError(f"column 'partition': row {row} has partition "
                                  f"{column[row].as_py()} (0 or more; null: by key)")
        elif not _is_headers(t):
            raise EncodeError(f"column 'headers' must be {_HEADERS}, not {t}")
        elif pa.types.is_large_list(t) or _has_views(t.value_type):
            # the encoder reads list<struct<binary or string...>> (nullable or not)
            table = table.set_column(i, name, _cast(table.column(i), name, _headers_type()))
    return table


def _headers_type() -> Any:
    import pyarrow as pa

    return pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _cast(column: Any, name: str, to: Any) -> Any:
    import pyarrow as pa

    try:
        return column.cast(to)
    except pa.ArrowInvalid as exc:
        raise EncodeError(f"column {name!r}: {exc}") from None


def _is_int(v: Any) -> bool:
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


def _is_bytes(t: Any) -> bool:
    import pyarrow as pa

    return (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_binary_view(t)
            or pa.types.is_string_view(t))


def _has_views(item: Any) -> bool:
    import pyarrow as pa

    return any(pa.types.is_binary_view(f.type) or pa.types.is_string_view(f.type)
               for f in (item.field("key"), item.field("value")))


def _is_headers(t: Any) -> bool:
    import pyarrow as pa

    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return False
    item = t.value_type
    if not pa.types.is_struct(item) or {item.field(j).name for j in range(item.num_fields)} \
            != {"key", "value"}:
        return False
    key, value = item.field("key").type, item.field("value").type
    return _is_bytes(key) and _is_bytes(value)
