"""The producer's record accumulator: records queued per partition, in batches.

Every partition has one queue of batches, in call order, for ``send()`` (records
go into the partition's *open* batch until it holds ``batch_size`` bytes or
``linger_ms`` have passed) and ``send_batch()`` (batches encoded by the caller,
queued behind whatever the partition collected before them): Java's
``RecordAccumulator`` deques. Bytes queued count against ``buffer_memory``;
``append`` blocks while it is full, for at most ``max_block_ms``.

It works without a sender; the sender thread (:mod:`kproto.producer.sender`)
talks to it through a small interface, as Java's ``Sender`` does:

- ``drain(can_send)``: seal the batches whose linger is over (all, while
  flushing or closing), and take the first ready batch of every partition that
  has none in flight; its partition is *muted* until the batch comes back;
- ``next_ready_time()``, ``has_sendable(can_send)``: when to look again;
- ``reenqueue(batch)``: a batch to try again, first in its queue (unmuted);
- ``split(batch)``: a batch the broker found too large, re-queued as two;
- ``expired(limit)``: batches queued too long, taken out to be failed;
- ``deallocate(batch)``: a batch is done: give back its bytes, unmute;
- ``abort_incomplete(error)``: fail everything not done (close, a dead sender).

One lock, ``cond``, guards it all (the producer's callers, its sender and
close() share it). Methods marked *locked* expect the caller to hold it (the
sender runs several of them as one step); the others take it themselves.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import compression, records
from .._backend import backend
from ..errors import IllegalStateError, KafkaTimeoutError
from ..records.batch import HEADER_SIZE as BATCH_OVERHEAD
from ..records.batch import RECORD_OVERHEAD
from .partitioner import StickyPartitioner

__all__ = ["ProducerBatch", "RecordAccumulator", "BATCH_OVERHEAD", "RECORD_OVERHEAD",
           "leaves", "wait_done", "row_sizes", "chunks"]

_RecordsBuilder = backend.RecordsBuilder
_deliver = backend.deliver
if TYPE_CHECKING:       # the twins' fields and signatures are the Cython classes'
    from .._pure.accum import AccumulatorCore as _AccumulatorCore
    from .._pure.accum import BatchCore as _BatchCore
else:
    _AccumulatorCore, _BatchCore = backend.AccumulatorCore, backend.BatchCore

log = logging.getLogger("kproto.producer")

TopicPartition = tuple[str, int]


class ProducerBatch(_BatchCore):
    """Records of one partition travelling together (and their delivery state); the
    fields, and each record's metadata, live in the base (``_codec.BatchCore``: send()'s
    path sets them in C)."""

    __slots__ = ()

    def __init__(self, topic: str, partition: int, now: float) -> None:
        self.topic, self.partition = topic, partition
        #: send()'s records, encoded as they come (``_codec.RecordsBuilder``); after
        #: the batch is done, only their timestamps are kept (for the metadata)
        self.records: Any = None
        self.size = BATCH_OVERHEAD
        #: bytes of buffer_memory this batch holds (given back once, when it is done)
        self.charged = 0
        self.created = now
        self.payload: bytes | bytearray | None = None
        #: the Arrow rows of a send_batch() batch (to split it)
        self.table: Any = None
        self.count = 0
        #: idempotence: base sequence, producer id and epoch (see idempotence.py)
        self.sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequence_reset = False
        self.stamped: tuple[int, int, int] | None = None
        self.attempts = 0
        self.next_try = 0.0
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        #: set when the batch is done, or split (then its records are in split_into)
        self.event = threading.Event()
        #: (record index, fn): fn(index) runs once the batch is done
        self.callbacks: list[tuple[int, Callable[[ProducerBatch, int], Any]]] = []
        #: send()'s on_delivery(error, metadata) of record i at [i] (None: none), run in C
        self.deliveries: list[Any] = []
        self.done = False
        self.split_into: list[ProducerBatch] = []

    def finish(self, base_offset: int, log_append_time: int, error: BaseException | None
               ) -> None:
        self.base_offset, self.log_append_time, self.error = base_offset, log_append_time, error
        if self.records is not None:
            self.records.release()    # free the memory; the timestamps stay (metadata)
        self.payload = self.table = None
        with _CALLBACK_LOCK:      # (a callback added now either runs here or at once)
            self.done = True
            callbacks, self.callbacks = self.callbacks, []
            deliveries, self.deliveries = self.deliveries, []
        self.event.set()
        if deliveries:
            _deliver(self, deliveries, error)
        for index, fn in callbacks:
            try:
                fn(self, index)     # (this batch: the one that carried the record)
            except Exception:  # a user callback must not kill the sender
                log.exception("delivery callback raised")

    def leaf(self, index: int) -> tuple[ProducerBatch, int]:
        """The batch (and index in it) that carries record ``index`` of this batch
        now, following splits (a batch the broker found too large is re-sent in parts)."""
        batch = self
        while batch.split_into:
            for part in batch.split_into:
                if index < part.count:
                    batch = part
                    break
                index -= part.count
        return batch, index

    def add_callback(self, index: int, fn: Callable[[ProducerBatch, int], Any]) -> bool:
        """Run ``fn(batch, i)`` once record ``index`` is done (``batch``: the one that
        carried it, a part if this one was split; ``i``: its index there); False,
        and nothing added, if it is done already."""
        with _CALLBACK_LOCK:
            batch, i = self.leaf(index)
            if batch.done:
                return False
            batch.callbacks.append((i, fn))
            return True


#: Guards each batch's ``done``, ``callbacks`` and ``split_into`` against
#: add_callback() on another thread: a callback is never added to a batch
#: that has already run its callbacks or moved them to its parts.
_CALLBACK_LOCK = threading.Lock()


def leaves(batches: Iterable[ProducerBatch]) -> list[ProducerBatch]:
    """The batches that carry the records of ``batches`` now (following splits)."""
    out: list[ProducerBatch] = []
    for b in batches:
        out += leaves(b.split_into) if b.split_into else [b]
    return out


def wait_done(batches: Iterable[ProducerBatch], deadline: float | None,
              alive: Callable[[], bool] = lambda: True) -> bool:
    """Wait until every batch (following splits) is done; False at ``deadline``
    (or once ``alive()`` says the sender thread is gone)."""
    pending = list(batches)
    while pending:
        b = pending.pop()
        while not b.done:
            if b.split_into:
                pending += b.split_into
                break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            if not b.event.wait(min(left, 1.0) if left is not None else 1.0) and not alive():
                return False
    return True


def row_sizes(table: Any) -> np.ndarray:
    """About how many bytes each row of an Arrow table takes in a record batch
    (:meth:`kproto.records.Rows.sizes`: an upper bound)."""
    return records.Rows(table).sizes()


def chunks(sizes: np.ndarray, limit: int) -> Iterable[tuple[int, int]]:
    """Split rows (by size) into runs of at most ``limit`` bytes (at least one row)."""
    cum = np.cumsum(sizes)
    start, base, n = 0, 0, len(sizes)
    while start < n:
        stop = int(np.searchsorted(cum, base + limit, side="right"))
        stop = max(stop, start + 1)
        yield start, stop
        base = int(cum[stop - 1])
        start = stop


class RecordAccumulator(_AccumulatorCore):
    """Per-partition queues of :class:`ProducerBatch`; see the module docstring.

    ``config``: the producer's settings (:func:`kproto.config.resolve`); it reads
    ``batch_size``, ``linger_ms``, ``buffer_memory``, ``max_block_ms``,
    ``compression_type`` and ``compression_level``.
    """

    def __init__(self, config: Mapping[str, Any],
                 partitioner: StickyPartitioner | None = None) -> None:
        # the base (``_codec.AccumulatorCore``: append() in C) holds lock, cond,
        # partitioner, batch_size, buffer_memory, _open, queued_bytes, closing, fatal
        super().__init__(config, partitioner if partitioner is not None
                         else StickyPartitioner())
        self.linger: float = config["linger_ms"] / 1000
        self.max_block: float = config["max_block_ms"] / 1000
        self.compression = config["compression_type"]
        self.compression_level = config["compression_level"]
        self._codec = compression.codec_id(self.compression)
        compression.check_level(self._codec, self.compression_level)
        self._ready: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._muted: set[TopicPartition] = set()     # partitions with a batch in flight
        #: batches not done yet (flush waits for those there when it starts)
        self.incomplete: set[ProducerBatch] = set()
        #: topic -> when a batch for it last opened (or its metadata was asked for)
        self.topic_used: dict[str, float] = {}
        self.flushing = 0
        self.closed = False

    # ------------------------------------------------------------------ caller side

    def check_usable(self) -> None:
        """*locked*: raise if records can no longer be appended."""
        if self.closing or self.closed:
            raise IllegalStateError("the producer is closed")
        if self.fatal is not None:
            raise self.fatal

    def _open_batch(self, topic: str, partition: int) -> ProducerBatch:
        """*locked*: a new open batch for send()'s records (append's rare case)."""
        batch = self._open[(topic, partition)] = ProducerBatch(topic, partition,
                                                               time.monotonic())
        batch.records = _RecordsBuilder()
        self.topic_used[topic] = batch.created
        self.incomplete.add(batch)
        self.cond.notify()
        return batch

    def append_batch(self, batch: ProducerBatch) -> None:
        """Queue an encoded batch (of send_batch) behind what its partition has
        collected (the open batch is sealed first: one queue per partition, in
        call order). Blocks while ``buffer_memory`` is full."""
        with self.cond:
            self.check_usable()
            self._wait_for_buffer(batch.size)
            self._charge(batch, batch.size)
            self.incomplete.add(batch)
            self.topic_used[batch.topic] = batch.created
            tp = (batch.topic, batch.partition)
            self._seal(tp)
            self._ready.setdefault(tp, deque()).append(batch)
            self.cond.notify_all()

    def assign_sticky(self, topic: str, parts: np.ndarray, sizes: np.ndarray,
                      partitions: list[int]) -> None:
        """Null-key rows (``parts`` < 0): consecutive chunks of ``batch_size``
        bytes, each to the partitioner's sticky partition, switching after each
        chunk (as Java does)."""
        free = np.flatnonzero(parts < 0)
        cum = np.cumsum(sizes[free])
        chunk = np.maximum(cum - 1, 0) // max(self.batch_size, 1)
        with self.cond:
            for c in np.unique(chunk):
                p = self.partitioner.partition(topic, None, partitions)
                parts[free[chunk == c]] = p
                self.partitioner.new_batch(topic, partitions)

    def encode_table(self, table: Any) -> bytes:
        return records.encode(table, compression=self.compression,
                              compression_level=self.compression_level)

    def encode(self, b: ProducerBatch) -> None:
        """Encode ``b`` into its payload, once (a new payload carries no stamp)."""
        if b.payload is not None:
            return
        if b.table is not None:
            b.payload = self.encode_table(b.table)
        else:
            b.payload = b.records.build(self._codec, self.compression_level)
        b.stamped = None

    def begin_flush(self) -> list[ProducerBatch]:
        """Send everything at once from now on (ignoring linger) until
        :meth:`end_flush`; returns the batches not done yet (Java's beginFlush)."""
        with self.cond:
            pending = list(self.incomplete)
            self.flushing += 1
            self.cond.notify_all()
        return pending

    def end_flush(self) -> None:
        with self.cond:
            self.flushing -= 1

    def begin_close(self) -> None:
        """No more appends; what is queued is sent at once."""
        with self.cond:
            self.closing = True
            self.cond.notify_all()

    def _charge(self, batch: ProducerBatch, size: int) -> None:
        """*locked*: ``size`` more bytes of buffer_memory held by ``batch`` (all
        given back by _release, so the count cannot drift)."""
        batch.charged += size
        self.queued_bytes += size

    def _release(self, batch: ProducerBatch) -> None:
        """*locked*: give back everything ``batch`` holds."""
        self.queued_bytes -= batch.charged
        batch.charged = 0

    def _wait_for_buffer(self, size: int) -> None:
        limit = self.buffer_memory
        if self.queued_bytes + size <= limit or not self.queued_bytes:
            return
        deadline = time.monotonic() + self.max_block
        while self.queued_bytes + size > limit and self.queued_bytes:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaTimeoutError(f"buffer_memory ({limit} bytes) stayed full for "
                                        f"max_block_ms")
            self.cond.notify_all()
            self.cond.wait(left)
            self.check_usable()

    def _seal(self, tp: TopicPartition) -> None:
        batch = self._open.pop(tp, None)
        if batch is not None:
            self._ready.setdefault(tp, deque()).append(batch)
            self.cond.notify_all()

    # ------------------------------------------------------------------ sender side

    def drain(self, can_send: Callable[[ProducerBatch], bool] | None = None
              ) -> list[ProducerBatch]:
        """*locked*: seal lingering batches, and take the first ready batch of every
        partition without one in flight (whose backoff has passed, and that
        ``can_send`` lets go: idempotence, see idempotence.py); their partitions
        stay muted until the batch is reenqueued or deallocated."""
        now = time.monotonic()
        flushing = self.flushing or self.closing
        for tp, batch in list(self._open.items()):
            if flushing or now - batch.created >= self.linger:
                self._seal(tp)
        due = []
        for tp, queue in self._ready.items():
            if queue and tp not in self._muted and queue[0].next_try <= now and (
                    can_send is None or can_send(queue[0])):
                due.append(queue.popleft())
                self._muted.add(tp)
        return due

    def has_sendable(self, can_send: Callable[[ProducerBatch], bool] | None = None) -> bool:
        """*locked*: would :meth:`drain` give a ready batch now?"""
        now = time.monotonic()
        return any(q and tp not in self._muted and q[0].next_try <= now
                   and (can_send is None or can_send(q[0]))
                   for tp, q in self._ready.items())

    def next_ready_time(self, now: float) -> float:
        """*locked*: when the first lingering batch or backoff ends (``now + 1``
        at most)."""
        wake = now + 1.0
        if self._open:
            wake = min(wake, min(b.created for b in self._open.values()) + self.linger)
        for q in self._ready.values():
            if q and q[0].next_try > now:
                wake = min(wake, q[0].next_try)
        return wake

    def topics_in_use(self) -> set[str]:
        """*locked*: topics with a batch open, queued or in flight."""
        return {t for t, _ in self._open} | {t for (t, _), q in self._ready.items() if q} \
            | {t for t, _ in self._muted}

    def reenqueue(self, b: ProducerBatch) -> None:
        """Queue ``b`` again, first in its partition (to be retried at ``b.next_try``)."""
        with self.cond:
            self._muted.discard((b.topic, b.partition))
            self._ready.setdefault((b.topic, b.partition), deque()).appendleft(b)

    def split(self, b: ProducerBatch) -> list[ProducerBatch]:
        """The broker refused ``b`` as too large: queue its records again as two
        batches, first in the partition's queue (Java's splitAndReenqueue; halves,
        until a single record is refused). Returns the parts ([] if ``b`` is done)."""
        if b.done:
            return []
        half = b.count // 2
        parts = []
        for lo, hi in ((0, half), (half, b.count)):
            part = ProducerBatch(b.topic, b.partition, b.created)   # same delivery deadline
            part.count = hi - lo
            if b.table is not None:
                part.table = b.table.slice(lo, hi - lo)
            else:
                part.records = b.records.slice(lo, hi)
                part.size = BATCH_OVERHEAD + b.size * part.count // b.count
            parts.append(part)
        log.debug("%s[%d]: batch of %d records too large, split in two", b.topic,
                  b.partition, b.count)
        with self.cond:
            charged = b.charged
            self._release(b)
            self._charge(parts[0], charged * parts[0].count // b.count)
            self._charge(parts[1], charged - parts[0].charged)
            with _CALLBACK_LOCK:
                for index, fn in b.callbacks:       # each to the part of its record
                    leaf, i = (parts[0], index) if index < parts[0].count else \
                        (parts[1], index - parts[0].count)
                    leaf.callbacks.append((i, fn))
                parts[0].deliveries = b.deliveries[:parts[0].count]
                parts[1].deliveries = b.deliveries[parts[0].count:]
                b.callbacks, b.deliveries = [], []
                b.split_into = parts
            self.incomplete.discard(b)
            self.incomplete.update(parts)
            b.payload, b.table = None, None
            if b.records is not None:
                b.records.release()
            tp = (b.topic, b.partition)
            self._ready.setdefault(tp, deque()).extendleft(reversed(parts))
            self._muted.discard(tp)
            self.cond.notify_all()
        b.event.set()     # wakes whoever waits on it: they follow split_into
        return parts

    def expired(self, limit: float) -> list[ProducerBatch]:
        """Take out the queued batches older than ``limit`` seconds (to be failed)."""
        now = time.monotonic()
        out = []
        with self.cond:
            for queue in self._ready.values():
                while queue and now - queue[0].created > limit:
                    out.append(queue.popleft())
        return out

    def deallocate(self, b: ProducerBatch) -> bool:
        """``b`` is done: give back its bytes and unmute its partition. False
        (nothing done) if it was done already: a batch completes once."""
        with self.cond:
            if b.done or b not in self.incomplete:
                return False
            self.incomplete.discard(b)
            self._release(b)
            self._muted.discard((b.topic, b.partition))
            self.cond.notify_all()
        return True

    def abort_undrained(self, error: BaseException, *, sequenced: bool = False) -> None:
        """Fail the batches not sent: those collecting records and those queued, but
        none in flight, nor (unless ``sequenced``) a retry that has its sequence
        number (Java's abortUndrainedBatches): a transaction is being aborted."""
        with self.cond:
            out = list(self._open.values())
            self._open.clear()
            for tp, queue in self._ready.items():
                if queue:
                    keep = [b for b in queue if b.sequence >= 0 and not sequenced]
                    out += [b for b in queue if not (b.sequence >= 0 and not sequenced)]
                    self._ready[tp] = deque(keep)
        for b in out:
            if self.deallocate(b):
                b.finish(-1, -1, error)

    def abort_incomplete(self, error: BaseException) -> None:
        """Fail every batch not done yet (safe from any thread: completion happens once)."""
        with self.cond:
            pending = list(self.incomplete)
            self._ready.clear()
            self._open.clear()
        for b in pending:
            if self.deallocate(b):
                b.finish(-1, -1, error)
