"""Fetched records waiting to be handed out, and the one rule that moves positions.

The consumer's *position* of a partition is the offset of the next record it
will hand to the application, as in Kafka's Java client (``SubscriptionState``).
Fetch answers are decoded as they arrive into one :class:`CompletedFetch` per
partition and queued here; :meth:`FetchBuffer.collect` hands records out in
arrival order and moves each position only past the records it returns
(``FetchCollector.fetchRecords``). So ``position()``, ``commit()``, auto-commit
and ``close()`` never count records that were fetched but not returned.

A completed fetch is handed out only while it still fits the consumer's state:
its partition is assigned and not paused, and it starts exactly at the
partition's position. One that no longer fits (after ``seek``, ``pause``,
``assign`` or a rebalance) is dropped, and the partition is fetched again from
its position.

An error met while handling an answer (a partition error, a damaged record
set, a damaged answer) is queued in its place, after the records that came
before it: ``collect`` returns the records gathered so far and raises the error
on the next call, when it is first in line, as Java's collector does. Nothing
fetched before an error is lost, and no position moves past an error.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._backend import backend
from .._pure.rows import record_rows
from ..columns import BinaryColumn, Record, RecordColumns
from ..structs import TopicPartition

if TYPE_CHECKING:
    import pyarrow

    from .fetch_metrics import FetchMetrics, Handed

__all__ = ["CompletedFetch", "FetchBuffer", "Collected"]

log = logging.getLogger("kproto.consumer")


@dataclass(eq=False)
class CompletedFetch:
    """One partition's part of a Fetch answer: decoded records, or an error.

    ``fetch_offset`` is the position the partition was fetched from; ``next_offset``
    is where its position goes once every record here has been handed out (past
    control batches, aborted transactions and compacted gaps; -1 when the answer
    did not advance it). ``tp`` is None for an error about the whole answer.
    """

    tp: TopicPartition | None
    fetch_offset: int
    cols: RecordColumns | None = None
    next_offset: int = -1
    error: BaseException | None = None
    taken: int = 0                      # rows already handed out
    #: for the metrics: bytes of the record set, the answer's high watermark and last
    #: stable offset, and which of the two the lag counts to (-1: unknown)
    nbytes: int = 0
    bytes_counted: int = 0              # of nbytes, counted as handed out so far
    high_watermark: int = -1
    last_stable: int = -1
    watermark: int = -1

    def __len__(self) -> int:
        return 0 if self.cols is None else len(self.cols)

    _end: int = field(default=-1, init=False, repr=False)

    @property
    def end_position(self) -> int:
        """The position once every record here has been handed out (asked every
        poll step while the fetch waits: worked out once)."""
        if self._end < 0:
            last = int(self.cols.offset[-1]) + 1 if self.cols is not None and len(self.cols) \
                else self.fetch_offset
            self._end = max(self.next_offset, last)
        return self._end

    @property
    def expected_position(self) -> int:
        """The position this fetch continues from (moves as rows are handed out)."""
        if self.taken == 0 or self.cols is None:
            return self.fetch_offset
        return int(self.cols.offset[self.taken - 1]) + 1


@dataclass(eq=False)
class Collected:
    """What :meth:`FetchBuffer.collect` handed out: row ranges of completed fetches."""

    pieces: list[tuple[RecordColumns, int, int]]

    def __len__(self) -> int:
        return sum(hi - lo for _, lo, hi in self.pieces)

    def to_arrow(self, *, headers: bool = True) -> pyarrow.RecordBatch:
        """One ``pyarrow.RecordBatch`` of every row (zero-copy for one whole fetch)."""
        whole = [cols for cols, lo, hi in self.pieces if lo == 0 and hi == len(cols)]
        if len(whole) == len(self.pieces):
            cols = RecordColumns.concat(whole) if whole else RecordColumns.empty()
            return cols.to_arrow(headers=headers)
        import pyarrow as pa

        batches = [cols.to_arrow(headers=headers).slice(lo, hi - lo)
                   for cols, lo, hi in self.pieces]
        return pa.concat_batches(batches)

    def to_records(self) -> list[Record]:
        """Every row as a :class:`~kproto.records.Record`."""
        out: list[Record] = []
        for cols, lo, hi in self.pieces:
            _records(cols, lo, hi, out)
        return out


def _records(cols: RecordColumns, lo: int, hi: int, out: list[Record]) -> None:
    """Rows ``lo:hi`` of one partition's columns appended to ``out`` as Records."""
    rows = backend.record_rows if type(cols.key) is type(cols.value) is BinaryColumn \
        else record_rows                # binary_view columns: the pure twin's .get
    rows(cols, lo, hi, Record, out)


class FetchBuffer:
    """Completed fetches in arrival order (see the module docstring)."""

    def __init__(self) -> None:
        self._queue: deque[CompletedFetch] = deque()
        #: the consumer's fetch metrics (records and bytes handed out, lag), or None
        self.metrics: FetchMetrics | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, fetches: Iterable[CompletedFetch]) -> None:
        self._queue.extend(fetches)

    def partitions(self) -> set[TopicPartition]:
        """Partitions with records (or an error) waiting."""
        return {f.tp for f in self._queue if f.tp is not None}

    def fetch_offsets(self, positions: dict[TopicPartition, int | None]
                      ) -> dict[TopicPartition, tuple[int | None, int]]:
        """For each partition with something waiting: where its next Fetch would
        start, and how many completed fetches it has waiting.

        The offset is where the waiting records end (what the position will be once
        they are handed out) when they continue the position without a gap, each
        fetch where the one before ended; None when the partition must not be
        fetched until they are handed out or dropped (an error waits, or records
        that no longer start at the position, e.g. after a seek)."""
        out: dict[TopicPartition, tuple[int | None, int]] = {}
        for f in self._queue:
            tp = f.tp
            if tp is None:
                continue
            end, n = out.get(tp, (positions.get(tp), 0))
            if end is None or f.error is not None or f.expected_position != end:
                out[tp] = (None, n + 1)
            else:
                out[tp] = (f.end_position, n + 1)
        return out

    def discard(self, keep: Callable[[TopicPartition], bool]) -> None:
        """Drop the completed fetches of partitions for which ``keep`` is false."""
        self._queue = deque(f for f in self._queue if f.tp is None or keep(f.tp))

    def clear(self) -> None:
        self._queue.clear()

    def collect(self, positions: dict[TopicPartition, int | None],
                fetchable: Callable[[TopicPartition], bool],
                max_records: int | None = None) -> Collected:
        """Hand out up to ``max_records`` records (all when None), moving ``positions``.

        A completed fetch whose partition is not ``fetchable`` (unassigned,
        paused) or does not start at the partition's position is dropped. An
        error first in line is raised (and dropped) when nothing has been
        collected in this call; otherwise it waits for the next call.
        """
        pieces: list[tuple[RecordColumns, int, int]] = []
        handed: list[Handed] | None = [] if self.metrics is not None else None
        left = max_records if max_records is not None else -1
        queue = self._queue
        while queue and left != 0:
            f = queue[0]
            tp = f.tp
            if f.error is not None:
                if tp is not None and (positions.get(tp) is None or not fetchable(tp)):
                    queue.popleft()         # about a partition no longer read: moot
                    continue
                if pieces:
                    break                   # return what came before it; raise next time
                queue.popleft()
                self._record(handed)
                raise f.error
            assert tp is not None
            position = positions.get(tp)
            if position is None or not fetchable(tp) or position != f.expected_position:
                log.debug("dropping fetched records of %s[%d] from offset %d: the position "
                          "is now %s", tp.topic, tp.partition, f.expected_position, position)
                queue.popleft()
                continue
            n = len(f) - f.taken if left < 0 else min(left, len(f) - f.taken)
            if n:
                assert f.cols is not None
                pieces.append((f.cols, f.taken, f.taken + n))
                f.taken += n
                left -= n if left > 0 else 0
            done = f.taken == len(f)
            if done:
                queue.popleft()
                positions[tp] = f.end_position
            else:
                positions[tp] = f.expected_position
            if handed is not None:          # bytes: the record set's, pro rata
                nbytes = (f.nbytes if done else f.nbytes * f.taken // len(f)) - f.bytes_counted
                f.bytes_counted += nbytes
                handed.append((tp, n, nbytes, positions[tp],  # type: ignore[arg-type]
                               f.high_watermark, f.last_stable, f.watermark))
        self._record(handed)
        return Collected(pieces)

    def _record(self, handed: list[Handed] | None) -> None:
        """The metrics of what one collect handed out, recorded together."""
        if handed and self.metrics is not None:
            self.metrics.consumed(handed, time.monotonic())
