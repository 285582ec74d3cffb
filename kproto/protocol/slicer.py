"""Fetch response -> per-partition metadata + record-set views, in plain Python.

The reference twin of ``kproto._codec.slice_fetch``: it runs the generic
protocol engine over the Fetch response schema with records fields decoded as
zero-copy memoryviews, then flattens topics and partitions.
"""

from __future__ import annotations

from typing import Any

from ..fetched import FetchedPartition, FetchSlice
from .apis import FETCH
from .engine import codec_for


def slice_fetch(body: Any, version: int) -> FetchSlice:
    """Slice a Fetch response body (no header) of ``version``."""
    if version not in FETCH.versions:
        raise ValueError(f"Fetch v{version} is not a version kproto knows")
    msg, _ = codec_for(FETCH.response, version, records_view=True).decode(body, whole=False)
    partitions = []
    for t in msg["responses"]:
        topic = t["topic"] if version < 13 else None
        topic_id = t["topic_id"] if version >= 13 else None
        for p in t["partitions"]:
            aborted = p["aborted_transactions"] if version >= 4 else None
            leader = p["current_leader"]
            partitions.append(FetchedPartition(
                topic, topic_id, p["partition_index"], p["error_code"], p["high_watermark"],
                p["last_stable_offset"], p["log_start_offset"],
                None if aborted is None else [(a["producer_id"], a["first_offset"])
                                              for a in aborted],
                p["preferred_read_replica"], p["records"],
                (leader["leader_id"], leader["leader_epoch"])
                if version >= 12 and leader["leader_id"] != -1 else None,
            ))
    return FetchSlice(msg["throttle_time_ms"], msg["error_code"], msg["session_id"], partitions)
