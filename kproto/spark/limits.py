"""Admission control by bytes for the streaming source (``maxBytesPerTrigger``):
how far a micro-batch may read so that its keys and values hold about that many
bytes at most (:func:`byte_limit`; ``maxOffsetsPerTrigger`` caps records, in
``source._rate_limit``). Kafka does not say how many bytes a range of offsets
holds, so the driver reads a small sample at the start of every partition's
backlog (one Fetch answer of each: :func:`bytes_per_offset`), and every
partition reads the same fraction of its backlog.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..consumer.reader import iter_ranges

__all__ = ["byte_limit", "bytes_per_offset", "SAMPLE_OFFSETS"]

log = logging.getLogger("kproto.spark")

TP = tuple[str, int]

#: At most this many offsets are read from the start of each partition's backlog
#: to estimate its bytes per offset, in one Fetch answer of at most about
#: SAMPLE_FETCH_BYTES (brokers that honour Fetch byte limits: Kafka does).
SAMPLE_OFFSETS = 256
SAMPLE_FETCH_BYTES = 256 << 10


def byte_limit(begin: Mapping[TP, int], end: dict[TP, int],
               per_offset: Mapping[TP, float | None], max_bytes: int) -> dict[TP, int]:
    """Cap the estimated bytes of ``begin..end`` (``per_offset`` bytes an offset,
    by partition) at ``max_bytes``: every partition reads the same fraction of
    its backlog. When not even one record fits, the partition with the most
    records waiting reads one (as Spark's file source admits a first file
    bigger than its maxBytesPerTrigger), so a stream always moves. A partition
    without an estimate takes the others' mean; with none at all, no cap."""
    lag = {tp: end[tp] - begin[tp] for tp in end if end[tp] > begin[tp]}
    known = {tp: size for tp in lag if (size := per_offset.get(tp)) is not None}
    if not lag or not known:
        return end
    mean = sum(known.values()) / len(known)
    cost = {tp: n * known.get(tp, mean) for tp, n in lag.items()}
    total = sum(cost.values())
    if total <= max_bytes:
        return end
    fraction = max_bytes / total
    out = dict(end)
    for tp, n in lag.items():
        out[tp] = begin[tp] + int(n * fraction)
    if all(out[tp] == begin[tp] for tp in lag):
        tp = max(lag, key=lambda t: (lag[t], t))
        out[tp] = begin[tp] + 1
    return out


def bytes_per_offset(settings: Mapping[str, Any], begin: Mapping[TP, int],
                     end: Mapping[TP, int]) -> dict[TP, float | None]:
    """Bytes of keys and values per offset at the start of each backlog, from one
    Fetch answer of each partition (at most :data:`SAMPLE_OFFSETS` offsets and,
    where the broker honours it, about :data:`SAMPLE_FETCH_BYTES`); None: the
    sample held no record."""
    import pyarrow.compute as pc

    ranges = {tp: (begin[tp], min(end[tp], begin[tp] + SAMPLE_OFFSETS))
              for tp in end if tp in begin and end[tp] > begin[tp]}
    if not ranges:
        return {}
    config = {**settings, "max_partition_fetch_bytes": SAMPLE_FETCH_BYTES}
    steps = iter_ranges(config, ranges, on_gap="skip", headers=False, read_ahead=False)
    try:
        first = next(steps, None)       # the first step: one Fetch answer of each
    finally:
        steps.close()
    size: dict[TP, int] = {}
    last: dict[TP, int] = {}
    for batch in first.batches if first is not None else []:
        if not batch.num_rows:
            continue
        tp = (batch.column("topic")[0].as_py(), batch.column("partition")[0].as_py())
        size[tp] = size.get(tp, 0) + sum(
            pc.sum(pc.binary_length(batch.column(c))).as_py() or 0 for c in ("key", "value"))
        last[tp] = max(last.get(tp, -1), batch.column("offset")[-1].as_py())
    out: dict[TP, float | None] = {
        tp: size[tp] / (last[tp] + 1 - a) if tp in last else None
        for tp, (a, _) in ranges.items()}
    log.debug("bytes per offset (one Fetch answer a partition): %s", out)
    return out
