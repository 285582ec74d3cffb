"""What the Fetch response slicer returns: per-partition metadata and record-set views."""

from __future__ import annotations

import uuid
from typing import NamedTuple


class FetchedPartition(NamedTuple):
    """One partition of a Fetch response; ``records`` is a zero-copy view of its record set."""

    topic: str | None              #: None from v13 on (topics are identified by ``topic_id``)
    topic_id: uuid.UUID | None     #: None before v13
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int        #: -1 before v4
    log_start_offset: int          #: -1 before v5
    aborted_transactions: list[tuple[int, int]] | None  #: [(producer_id, first_offset)]
    preferred_read_replica: int    #: -1 before v11
    records: memoryview | None
    current_leader: tuple[int, int] | None  #: (leader_id, leader_epoch) when the broker sent it


class FetchSlice(NamedTuple):
    """A whole Fetch response, sliced: top-level fields and every partition."""

    throttle_time_ms: int
    error_code: int
    session_id: int
    partitions: list[FetchedPartition]
