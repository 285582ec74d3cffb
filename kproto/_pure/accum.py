"""Pure-Python twin of kproto/_accum.pxi: the producer's ``send()`` path (the bases
of ``Producer``, ``RecordAccumulator``, ``ProducerBatch`` and ``RecordFuture``). Same
fields, same behaviour, readable: the oracle the Cython classes are tested against."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from ..errors import EncodeError
from ..structs import RecordMetadata
from .encode import murmur2

#: records/batch.py's RECORD_OVERHEAD and HEADER_SIZE (a test checks they agree)
SEND_RECORD_OVERHEAD = 12
SEND_BATCH_OVERHEAD = 61


class BatchCore:
    """The fields of a producer batch and its records' metadata (``ProducerBatch`` adds the
    rest)."""

    __slots__ = ("topic", "partition", "records", "created", "payload", "table", "sequence",
                 "producer_id", "producer_epoch", "sequence_reset", "stamped", "attempts",
                 "next_try", "base_offset", "log_append_time", "error", "event", "callbacks",
                 "done", "split_into", "deliveries", "size", "charged", "count")
    topic: str
    partition: int
    records: Any
    created: float
    payload: bytes | bytearray | None
    table: Any
    sequence: int
    producer_id: int
    producer_epoch: int
    sequence_reset: bool
    stamped: tuple[int, int, int] | None
    attempts: int
    next_try: float
    base_offset: int
    log_append_time: int
    error: BaseException | None
    event: threading.Event
    callbacks: list[tuple[int, Any]]
    done: bool
    split_into: list[Any]
    deliveries: list[Any]
    size: int
    charged: int
    count: int

    def timestamp(self, index: int) -> int:
        """The timestamp of send()'s record ``index`` (-1 for send_batch's batches)."""
        built = self.records
        return built.timestamp(index) if built is not None and index < built.count else -1

    def metadata(self, index: int) -> RecordMetadata:
        """Where send()'s record ``index`` was written, once the batch is done: a
        RecordMetadata (the broker's time on LogAppendTime topics)."""
        return RecordMetadata(self.topic, self.partition,
                              -1 if self.base_offset < 0 else self.base_offset + index,
                              self.log_append_time if self.log_append_time >= 0
                              else self.timestamp(index))


_log = logging.getLogger("kproto.producer")


def deliver(batch: BatchCore, items: list[Any], error: BaseException | None) -> None:
    """Run send()'s ``on_delivery`` callbacks of a batch that is done: ``items[i]`` is
    record i's callback (None: it has none); each ``fn(error, None)``, or
    ``fn(None, batch.metadata(i))``. A callback that raises is logged, not raised."""
    for index, fn in enumerate(items):
        if fn is None:
            continue
        try:
            fn(error, None if error is not None else batch.metadata(index))
        except Exception:       # a user callback must not kill the sender
            _log.exception("delivery callback raised")


class FutureCore:
    """A record's batch and index in it (``RecordFuture`` adds the methods)."""

    __slots__ = ("_batch", "_index")
    _batch: Any
    _index: int

    def __init__(self, batch: Any, index: int) -> None:
        self._batch, self._index = batch, index


class AccumulatorCore:
    """The fields ``append`` needs and ``append`` itself (``RecordAccumulator`` adds the
    rest). Subclasses provide ``check_usable()``, ``_wait_for_buffer(size)``,
    ``_seal(tp)`` and ``_open_batch(topic, partition)`` (a new open batch)."""

    check_usable: Any
    _wait_for_buffer: Any
    _seal: Any
    _open_batch: Any

    def __init__(self, config: Mapping[str, Any], partitioner: Any) -> None:
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.partitioner = partitioner
        self.batch_size: int = config["batch_size"]
        self.buffer_memory: int = config["buffer_memory"]
        self._open: dict[tuple[str, int], Any] = {}
        self.queued_bytes = 0
        self.closing = False
        self.fatal: BaseException | None = None
        self.future_type: Any = None

    def append(self, topic: str, partition: int | None, key: bytes | None,
               value: bytes | None, timestamp: int, headers: Any, size: int,
               partitions: list[int], on_done: Any = None, delivery: Any = None
               ) -> tuple[Any, int]:
        """Add a record of about ``size`` bytes to its partition's open batch (a new
        one once that is full); returns the batch and the record's index in it.

        ``partition`` None: sticky for a null key (KIP-480: the partitioner moves
        on when the sticky partition's batch is full), else murmur2 of ``key``
        over ``partitions``. ``on_done(batch, index)`` runs once the record is
        written or failed; ``delivery(error, metadata)`` likewise (send()'s
        ``on_delivery``). Blocks while ``buffer_memory`` is full.
        """
        sticky = partition is None and key is None
        with self.lock:
            if self.closing or self.fatal is not None:
                self.check_usable()
            if self.queued_bytes + size > self.buffer_memory:
                self._wait_for_buffer(size)
            if partition is None:
                if sticky:
                    partition = self.partitioner.sticky.get(topic)
                    if partition is None:
                        partition = self.partitioner.partition(topic, key, partitions)
                else:
                    assert key is not None
                    partition = partitions[(murmur2(key) & 0x7FFFFFFF) % len(partitions)]
            tp = (topic, partition)
            batch = self._open.get(tp)
            if batch is not None and batch.size + size > self.batch_size:
                self._seal(tp)
                batch = None
                if sticky:   # the sticky partition's batch is full: move on (KIP-480)
                    self.partitioner.new_batch(topic, partitions)
                    partition = self.partitioner.partition(topic, key, partitions)
                    tp = (topic, partition)
                    batch = self._open.get(tp)
            if batch is None:
                batch = self._open_batch(topic, partition)
            index = batch.records.append(key, value, timestamp, headers)
            batch.count = index + 1
            batch.size += size
            batch.charged += size
            self.queued_bytes += size
            if on_done is not None:
                batch.callbacks.append((index, on_done))
            if delivery is not None:     # record i's callback at deliveries[i]
                batch.deliveries += [None] * (index - len(batch.deliveries))
                batch.deliveries.append(delivery)
        return batch, index


def _record_bytes(v: Any, producer: Any, what: str) -> bytes | None:
    if v is None or type(v) is bytes:
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return producer._as_bytes(v, what)


class ProducerCore:
    """``send()`` (``Producer`` adds the rest). Subclasses provide ``_partitions(topic)``,
    ``_as_bytes(v, what)`` and ``_header_pairs(headers)`` -> (pairs, bytes)."""

    _txn: Any
    _cluster: Any
    _parts_cache: Any
    _accumulator: Any
    _max_request_size: int
    _partitions: Any
    _header_pairs: Any

    def send(self, topic: str, value: Any = None, key: Any = None, headers: Any = None,
             partition: int | None = None, timestamp: int | None = None,
             on_delivery: Any = None) -> Any:
        """Queue one record; returns a :class:`RecordFuture`.

        ``value``/``key``: bytes or str (UTF-8) or None; ``headers``: a list of
        ``(str, bytes | None)`` or a dict; ``partition``: explicit, else
        murmur2 of the key (Java's choice) or sticky for null keys;
        ``timestamp``: ms since the epoch (default now). ``on_delivery(error,
        metadata)`` runs on the sender thread once the record is written or failed.
        """
        if self._txn is not None:
            self._txn.check_send()
        v = _record_bytes(value, self, "value")
        k = _record_bytes(key, self, "key")
        size = SEND_RECORD_OVERHEAD + (len(v) if v is not None else 0) \
            + (len(k) if k is not None else 0)
        pairs = None
        if headers:
            pairs, extra = self._header_pairs(headers)
            size += extra
        if size + SEND_BATCH_OVERHEAD > self._max_request_size:
            raise EncodeError(f"record of ~{size} bytes is larger than max_request_size "
                              f"({self._max_request_size})")
        ts = int(time.time() * 1000) if timestamp is None else int(timestamp)
        snapshot, cache = self._parts_cache
        partitions = cache.get(topic) if snapshot is self._cluster.metadata else None
        if not partitions:
            partitions = self._partitions(topic)
        if partition is not None and partition not in partitions:
            raise ValueError(f"topic {topic!r} has no partition {partition} "
                             f"(it has {len(partitions)})")
        acc = self._accumulator
        batch, index = acc.append(topic, partition, k, v, ts, pairs, size, partitions, None,
                                  on_delivery)
        future = acc.future_type.__new__(acc.future_type)
        FutureCore.__init__(future, batch, index)
        return future
