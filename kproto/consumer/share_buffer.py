"""Records a share consumer acquired and has not handed out yet (Java's
``ShareFetchBuffer`` / ``ShareCompletedFetch``).

Each answer of a ShareFetch becomes one :class:`ShareCompletedFetch` per
partition: the decoded columns of the record batches the broker sent, the rows
of them this consumer acquired (``rows``) and the partition's
:class:`~kproto.consumer.share_acks.InFlight` state (acquired offsets, delivery
counts, acknowledgements). :meth:`ShareBuffer.collect` hands rows out in
arrival order (up to a limit) and marks them delivered; a
:class:`ShareCollected` turns what it handed out into one Arrow batch (the
consumer's columns plus ``delivery_count``) or :class:`ShareRecord` objects.

An error met while handling an answer waits in line as in the consumer's fetch
buffer: raised by the collect that finds it first, after the records before it.
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..columns import Record, RecordColumns
from ..structs import TopicPartition
from .fetch_buffer import _records
from .share_acks import InFlight

if TYPE_CHECKING:
    import pyarrow

__all__ = ["ShareRecord", "ShareCompletedFetch", "ShareBuffer", "ShareCollected"]


class ShareRecord(NamedTuple):
    """One record of a share group: :class:`~kproto.records.Record`'s fields and the
    number of times it has been delivered (1 the first time; Java's ``deliveryCount``)."""

    topic: str | None
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    delivery_count: int


#: ``ShareRecord`` of a 9-tuple without the Python-level ``__new__`` of a NamedTuple
_share_record = partial(tuple.__new__, ShareRecord)


@dataclass(eq=False)
class ShareCompletedFetch:
    """One partition's part of a ShareFetch answer: rows ``rows`` of ``cols`` are this
    consumer's (``inflight`` row ``pos[i]`` is row ``rows[i]``), or an error."""

    tp: TopicPartition | None
    cols: RecordColumns | None = None
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    inflight: InFlight | None = None
    error: BaseException | None = None
    taken: int = 0
    pos: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        if self.cols is not None and self.inflight is not None:
            self.pos = self.inflight.rows_of(self.cols.offset[self.rows])
        else:
            self.pos = np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(eq=False)
class ShareCollected:
    """Rows handed out by one :meth:`ShareBuffer.collect`: (fetch, lo, hi) pieces."""

    pieces: list[tuple[ShareCompletedFetch, int, int]]

    def __len__(self) -> int:
        return sum(hi - lo for _, lo, hi in self.pieces)

    def to_arrow(self, *, headers: bool = True) -> pyarrow.RecordBatch:
        """One ``pyarrow.RecordBatch``: the consumer's columns plus ``delivery_count``
        (int16)."""
        import pyarrow as pa

        batches = []
        for f, lo, hi in self.pieces:
            assert f.cols is not None and f.inflight is not None
            whole = f.cols.to_arrow(headers=headers)
            rows = f.rows[lo:hi]
            if len(rows) and rows[-1] - rows[0] == len(rows) - 1:
                part = whole.slice(int(rows[0]), len(rows))        # zero-copy
            else:
                part = whole.take(pa.array(rows))
            counts = f.inflight.delivery_counts[f.pos[lo:hi]]
            batches.append(part.append_column("delivery_count", pa.array(counts, pa.int16())))
        if not batches:
            empty = RecordColumns.empty().to_arrow(headers=headers)
            return empty.append_column("delivery_count", pa.array([], pa.int16()))
        return batches[0] if len(batches) == 1 else pa.concat_batches(batches)

    def to_records(self) -> list[ShareRecord]:
        """Every row as a :class:`ShareRecord`."""
        out: list[ShareRecord] = []
        for f, lo, hi in self.pieces:
            assert f.cols is not None and f.inflight is not None
            rows = f.rows[lo:hi]
            counts = f.inflight.delivery_counts[f.pos[lo:hi]].tolist()
            plain: list[Record] = []
            # contiguous runs of rows go through the codec's row maker at once
            breaks = np.flatnonzero(np.diff(rows) != 1) + 1
            for run in np.split(rows, breaks) if len(rows) else []:
                _records(f.cols, int(run[0]), int(run[-1]) + 1, plain)
            assert len(plain) == len(counts)
            # a Record and its count as one ShareRecord, all in C (half the cost per record)
            out.extend(map(_share_record, map(operator.add, plain, zip(counts))))
        return out


class ShareBuffer:
    """Completed share fetches in arrival order."""

    def __init__(self) -> None:
        self._queue: deque[ShareCompletedFetch] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, fetches: list[ShareCompletedFetch]) -> None:
        self._queue.extend(fetches)

    def partitions(self) -> set[TopicPartition]:
        """Partitions with records (or an error) waiting."""
        return {f.tp for f in self._queue if f.tp is not None}

    def drain(self, keep: Callable[[TopicPartition], bool]) -> list[ShareCompletedFetch]:
        """Take out (and return) the fetches of partitions for which ``keep`` is false."""
        gone = [f for f in self._queue if f.tp is not None and not keep(f.tp)]
        self._queue = deque(f for f in self._queue if f.tp is None or keep(f.tp))
        return gone

    def collect(self, max_records: int | None) -> ShareCollected:
        """Hand out up to ``max_records`` rows (all when None), marking them delivered.
        An error first in line is raised when nothing was collected in this call."""
        pieces: list[tuple[ShareCompletedFetch, int, int]] = []
        left = -1 if max_records is None else max_records
        queue = self._queue
        while queue and left != 0:
            f = queue[0]
            if f.error is not None:
                if pieces:
                    break
                queue.popleft()
                raise f.error
            n = len(f) - f.taken if left < 0 else min(left, len(f) - f.taken)
            if n:
                assert f.inflight is not None
                pieces.append((f, f.taken, f.taken + n))
                f.inflight.deliver(f.pos[f.taken:f.taken + n])
                f.taken += n
                if left > 0:
                    left -= n
            if f.taken == len(f):
                queue.popleft()
        return ShareCollected(pieces)
