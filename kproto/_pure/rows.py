"""Decoded columns back to one object per record: the twin of ``_codec.record_rows``."""

from __future__ import annotations

from typing import Any


def record_rows(cols: Any, lo: int, hi: int, record_type: type, out: list) -> list:
    """Append rows ``lo:hi`` of one partition's ``RecordColumns`` to ``out`` as
    ``record_type(topic, partition, offset, timestamp, timestamp_type, key, value,
    headers)`` instances; returns ``out``."""
    if not 0 <= lo <= hi <= len(cols.offset):
        raise IndexError(f"rows {lo}:{hi} of {len(cols.offset)}")
    if record_type.__base__ is not tuple or len(getattr(record_type, "_fields", ())) != 8:
        raise TypeError(f"{record_type!r} is not an 8-field tuple subclass")
    topic, partition = cols.topic, cols.partition
    offsets = cols.offset[lo:hi].tolist()
    stamps = cols.timestamp[lo:hi].tolist()
    types = cols.timestamp_type[lo:hi].tolist()
    key, value, headers = cols.key.get, cols.value.get, cols.headers.get
    out += [record_type(topic, partition, offsets[j], stamps[j], types[j], key(i), value(i),
                        headers(i))
            for j, i in enumerate(range(lo, hi))]
    return out
