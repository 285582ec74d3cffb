"""The producer: per-record ``send()`` with batching, and a bulk path from Arrow.

>>> p = Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5,     # doctest: +SKIP
...              compression_type="lz4")
>>> p.send("events", b"value", key=b"user-1").result()              # doctest: +SKIP
RecordMetadata(topic='events', partition=2, offset=41, timestamp=1700000000000)
>>> p.send_batch("events", arrow_table).result()                    # doctest: +SKIP
>>> p.close()                                                       # doctest: +SKIP

Records are collected per partition into batches (``batch_size`` bytes or
``linger_ms`` after the first record, whichever comes first) and sent by one
background thread, which owns the broker connections: it encodes each batch
with the Cython codec, routes it to the partition's leader (one Produce
request per broker carrying every ready partition), keeps up to
``max_in_flight_requests_per_connection`` requests in flight per broker and at
most one batch in flight per partition (so retries never reorder records), and
retries retriable errors after a metadata refresh until ``delivery_timeout_ms``.
A batch the broker refuses as too large (MESSAGE_TOO_LARGE) is split in halves
and re-sent. With ``enable_idempotence`` it gets a producer id (InitProducerId)
and stamps sequence numbers so a retried batch is never written twice; a batch
that fails for good leaves a gap in the sequences, after which the partition
goes on with a new producer id (see :mod:`kproto.producer_state`). Each
partition has one queue, in call order, for ``send()`` and ``send_batch()``.

``send_batch`` takes a whole pyarrow Table: it partitions the rows (a
``partition`` column, murmur2 of ``key`` vectorised in Cython, or sticky
chunks for null keys), encodes each partition's rows into record batches in
Cython straight from the Arrow buffers, and queues them for the sender thread.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

from . import records
from ._impl import codec
from .config import resolve
from .errors import (
    BrokerError,
    ConfigError,
    EncodeError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    KprotoError,
    error_for_code,
)
from .net.blocking import BrokerConnection
from .net.cluster import Cluster
from .partitioner import StickyPartitioner, partitions_for_keys
from .producer_state import IdempotenceState
from .protocol import ApiKey

__all__ = ["Producer", "RecordMetadata", "BatchMetadata", "RecordFuture", "BatchFuture"]

log = logging.getLogger("kproto.producer")

_MESSAGE_TOO_LARGE = 10
_DUPLICATE_SEQUENCE = 46
_RECORD_OVERHEAD = 12          # attributes, deltas, lengths: a few varints per record
_BATCH_OVERHEAD = 61


class RecordMetadata(NamedTuple):
    """Where a record was written."""

    topic: str
    partition: int
    #: -1 with ``acks=0`` (no answer) and for a duplicate the broker had already written.
    offset: int
    #: The record's timestamp (the broker's time for LogAppendTime topics), ms.
    timestamp: int


class BatchMetadata(NamedTuple):
    """Where one record batch of a :meth:`Producer.send_batch` call was written."""

    topic: str
    partition: int
    base_offset: int
    record_count: int


class _Batch:
    """Records of one partition travelling together (and their delivery state)."""

    __slots__ = ("topic", "partition", "rows", "timestamps", "size", "charged",
                 "created", "payload", "table", "count", "sequence", "producer_id",
                 "producer_epoch", "sequence_reset", "stamped", "attempts", "next_try",
                 "base_offset", "log_append_time", "error", "event", "callbacks", "done",
                 "has_headers", "split_into")

    def __init__(self, topic: str, partition: int, now: float) -> None:
        self.topic, self.partition = topic, partition
        #: (key, value, timestamp, headers) per record, until encoded
        self.rows: list[tuple[bytes | None, bytes | None, int, Any]] = []
        self.timestamps: tuple[int, ...] = ()
        self.has_headers = False
        self.size = _BATCH_OVERHEAD
        #: bytes of buffer_memory this batch holds (given back once, when it is done)
        self.charged = 0
        self.created = now
        self.payload: bytes | bytearray | None = None
        #: the Arrow rows of a send_batch() batch (to split it)
        self.table: Any = None
        self.count = 0
        #: idempotence: base sequence, producer id and epoch (see producer_state)
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
        self.callbacks: list[tuple[int, Callable[..., Any]]] = []
        self.done = False
        self.split_into: list[_Batch] = []

    def finish(self, base_offset: int, log_append_time: int, error: BaseException | None
               ) -> None:
        self.base_offset, self.log_append_time, self.error = base_offset, log_append_time, error
        if self.rows:
            self.timestamps = tuple(r[2] for r in self.rows)
        self.rows = []            # free the memory; the timestamps stay for the metadata
        self.payload = self.table = None
        with _CALLBACK_LOCK:      # (a callback added now either runs here or at once)
            self.done = True
            callbacks, self.callbacks = self.callbacks, []
        self.event.set()
        for index, fn in callbacks:
            try:
                fn(index)
            except Exception:  # a user callback must not kill the sender
                log.exception("delivery callback raised")

    def metadata(self, index: int) -> RecordMetadata:
        offset = -1 if self.base_offset < 0 else self.base_offset + index
        ts = self.log_append_time if self.log_append_time >= 0 else (
            self.timestamps[index] if index < len(self.timestamps) else -1)
        return RecordMetadata(self.topic, self.partition, offset, ts)


#: Guards each batch's ``done``, ``callbacks`` and ``split_into`` against
#: add_done_callback() on another thread: a callback is never added to a batch
#: that has already run its callbacks or moved them to its parts.
_CALLBACK_LOCK = threading.Lock()


def _leaf(batch: _Batch, index: int) -> tuple[_Batch, int]:
    """The batch (and index in it) that carries record ``index`` of ``batch`` now,
    following splits (a batch the broker found too large is re-sent in parts)."""
    while batch.split_into:
        for part in batch.split_into:
            if index < part.count:
                batch = part
                break
            index -= part.count
    return batch, index


def _leaves(batches: Iterable[_Batch]) -> list[_Batch]:
    out: list[_Batch] = []
    for b in batches:
        out += _leaves(b.split_into) if b.split_into else [b]
    return out


def _wait_done(batches: Iterable[_Batch], deadline: float | None,
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


class RecordFuture:
    """The outcome of one :meth:`Producer.send`: a :class:`RecordMetadata` or an error.

    Like :class:`concurrent.futures.Future`: ``result()``, ``exception()``,
    ``done()``, ``add_done_callback()`` (called on the sender thread).
    """

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: _Batch, index: int) -> None:
        self._batch, self._index = batch, index

    def done(self) -> bool:
        return _leaf(self._batch, self._index)[0].done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for delivery; raise the delivery error, or KafkaTimeoutError at ``timeout``."""
        exc = self.exception(timeout)
        if exc is not None:
            raise exc
        batch, index = _leaf(self._batch, self._index)
        return batch.metadata(index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        if not _wait_done([self._batch], deadline):
            raise KafkaTimeoutError(f"record not delivered within {timeout} s")
        return _leaf(self._batch, self._index)[0].error

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        with _CALLBACK_LOCK:
            batch, index = _leaf(self._batch, self._index)
            if not batch.done:
                batch.callbacks.append((index, lambda _i: fn(self)))
                return
        fn(self)

    def __repr__(self) -> str:
        batch, _ = _leaf(self._batch, self._index)
        state = "pending" if not batch.done else ("error" if batch.error else "done")
        return f"<RecordFuture {batch.topic}[{batch.partition}] {state}>"


class BatchFuture:
    """The outcome of one :meth:`Producer.send_batch`: a list of :class:`BatchMetadata`
    (one per record batch written: a batch the broker found too large is written
    in parts)."""

    def __init__(self, batches: list[_Batch]) -> None:
        self._batches = batches

    def done(self) -> bool:
        return all(b.done for b in _leaves(self._batches))

    def result(self, timeout: float | None = None) -> list[BatchMetadata]:
        """Wait for every batch; raise the first error (the others may still have
        been written: see each batch through ``exception``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not _wait_done(self._batches, deadline):
            raise KafkaTimeoutError(f"batch not delivered within {timeout} s")
        leaves = _leaves(self._batches)
        for b in leaves:
            if b.error is not None:
                raise b.error
        return [BatchMetadata(b.topic, b.partition, b.base_offset, b.count) for b in leaves]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            self.result(timeout)
        except KafkaTimeoutError:
            raise
        except KprotoError as exc:
            return exc
        return None


def _as_bytes(v: Any, what: str) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"{what} must be bytes, str or None, not {type(v).__name__}")


def stamp_batch(payload: bytes | bytearray, producer_id: int, producer_epoch: int,
                base_sequence: int) -> bytearray:
    """Set a record batch's producer id, epoch and base sequence, and its CRC."""
    buf = bytearray(payload)
    struct.pack_into(">qhi", buf, 43, producer_id, producer_epoch, base_sequence)
    struct.pack_into(">I", buf, 17, codec.crc32c(memoryview(buf)[21:]))
    return buf


class Producer:
    """A Kafka producer; see the module docstring. Settings are Kafka's config keys
    (``acks``, ``linger_ms``, ``compression_type``, ``enable_idempotence``...) as
    keyword arguments, or a dict with Kafka's dotted names. Thread-safe."""

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = resolve("producer", config, **settings)
        c = self.config
        if c["enable_idempotence"]:
            if c["acks"] != -1:
                raise ConfigError("enable_idempotence needs acks='all'")
            if c["max_in_flight_requests_per_connection"] > 5:
                raise ConfigError("enable_idempotence allows at most 5 requests in flight")
        self._cluster = Cluster(c)
        self._partitioner = StickyPartitioner()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._open: dict[tuple[str, int], _Batch] = {}
        self._ready: dict[tuple[str, int], deque[_Batch]] = {}
        self._busy: set[tuple[str, int]] = set()          # partitions with a batch in flight
        #: connections with Produce requests in flight (each request's context is a
        #: _Sent); the connection's own in-flight queue is the one record of them
        self._conns: set[BrokerConnection] = set()
        self._queued_bytes = 0                              # buffer_memory in use
        #: batches not done yet (flush waits for those there when it starts)
        self._incomplete: set[_Batch] = set()
        self._wanted_topics: set[str] = set()
        self._topic_used: dict[str, float] = {}             # topic -> last batch opened
        self._max_idle = c["metadata_max_idle_ms"] / 1000
        self._topic_errors: dict[str, BaseException] = {}
        self._flushing = 0
        self._closing = False
        self._closed = False
        self._force_close = False
        self._sender_done = False
        self._fatal: BaseException | None = None
        self._idem = IdempotenceState() if c["enable_idempotence"] else None
        self._pid_retry_at = 0.0
        self._had_producer_id = False
        self._linger = c["linger_ms"] / 1000
        self._batch_size = c["batch_size"]
        self._max_request_size = c["max_request_size"]
        self._buffer_memory = c["buffer_memory"]
        self._parts_cache: tuple[Any, dict[str, list[int]]] = (None, {})
        self._selector: Any = None
        self._watched: dict[int, tuple[int, int]] = {}
        self._sender = threading.Thread(target=self._run, name="kproto-producer", daemon=True)
        self._sender.start()

    # ------------------------------------------------------------------ public API

    def send(self, topic: str, value: Any = None, key: Any = None, headers: Any = None,
             partition: int | None = None, timestamp: int | None = None,
             on_delivery: Callable[[BaseException | None, RecordMetadata | None], Any]
             | None = None) -> RecordFuture:
        """Queue one record; returns a :class:`RecordFuture`.

        ``value``/``key``: bytes or str (UTF-8) or None; ``headers``: a list of
        ``(str, bytes | None)`` or a dict; ``partition``: explicit, else
        murmur2 of the key (Java's choice) or sticky for null keys;
        ``timestamp``: ms since the epoch (default now). ``on_delivery(error,
        metadata)`` runs on the sender thread once the record is written or failed.
        """
        v = value if type(value) is bytes else _as_bytes(value, "value")
        k = key if type(key) is bytes else _as_bytes(key, "key")
        size = _RECORD_OVERHEAD + (len(v) if v else 0) + (len(k) if k else 0)
        hdrs = None
        if headers:
            items = headers.items() if isinstance(headers, Mapping) else headers
            hdrs = [(hk, _as_bytes(hv, "header value")) for hk, hv in items]
            size += sum(len(hk) + (len(hv) if hv else 0) + 4 for hk, hv in hdrs)
            if size + _BATCH_OVERHEAD > self._max_request_size:
                raise EncodeError(f"record of ~{size} bytes is larger than max_request_size "
                                  f"({self._max_request_size})")
        elif size + _BATCH_OVERHEAD > self._max_request_size:
            raise EncodeError(f"record of ~{size} bytes is larger than max_request_size "
                              f"({self._max_request_size})")
        ts = int(time.time() * 1000) if timestamp is None else int(timestamp)
        snapshot, cache = self._parts_cache
        partitions = cache.get(topic) if snapshot is self._cluster.metadata else None
        if not partitions:
            partitions = self._partitions(topic)
        sticky = partition is None and k is None
        if partition is not None and partition not in partitions:
            raise ValueError(f"topic {topic!r} has no partition {partition} "
                             f"(it has {len(partitions)})")
        limit = self._batch_size
        with self._lock:
            if self._closing or self._fatal is not None:
                self._check_usable()
            if self._queued_bytes + size > self._buffer_memory:
                self._wait_for_buffer(size)
            if partition is None:
                partition = self._partitioner.sticky.get(topic) if sticky else None
                if partition is None:
                    partition = self._partitioner.partition(topic, k, partitions)
            tp = (topic, partition)
            batch = self._open.get(tp)
            if batch is not None and batch.size + size > limit:
                self._seal(tp)
                batch = None
                if sticky:   # the sticky partition's batch is full: move on (KIP-480)
                    self._partitioner.new_batch(topic, partitions)
                    partition = self._partitioner.partition(topic, k, partitions)
                    tp = (topic, partition)
                    batch = self._open.get(tp)
            if batch is None:
                batch = self._open[tp] = _Batch(topic, partition, time.monotonic())
                self._topic_used[topic] = batch.created
                self._incomplete.add(batch)
                self._cond.notify()
            index = batch.count
            batch.rows.append((k, v, ts, hdrs))
            if hdrs:
                batch.has_headers = True
            batch.count = index + 1
            batch.size += size
            self._charge(batch, size)
            future = RecordFuture(batch, index)
            if on_delivery is not None:
                batch.callbacks.append((index, lambda i, b=batch: on_delivery(
                    b.error, None if b.error else b.metadata(i))))
        return future

    def send_batch(self, topic: str, data: Any, *, partition: int | None = None
                   ) -> BatchFuture:
        """Queue a whole pyarrow ``Table``/``RecordBatch`` (or a dict of columns).

        Columns: ``value`` (binary/string), optional ``key``, ``headers``
        (``list<struct<key: string, value: binary>>``), ``timestamp``
        (timestamp or int64 ms) and ``partition`` (int). Rows go to
        ``partition`` (the argument, else the column, else murmur2 of the key,
        else sticky chunks of ``batch_size`` bytes). Each partition's rows are
        encoded in Cython into record batches of at most ``max_request_size``
        bytes. Returns a :class:`BatchFuture`.
        """
        import pyarrow as pa

        if isinstance(data, Mapping):
            data = pa.table(dict(data))
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not isinstance(data, pa.Table):
            raise TypeError(f"send_batch takes a pyarrow Table/RecordBatch or a dict of "
                            f"columns, not {type(data).__name__}")
        n = data.num_rows
        if n == 0:
            return BatchFuture([])
        partitions = self._partitions(topic)
        names = data.schema.names
        if partition is not None:
            parts = np.full(n, partition, np.int32)
        elif "partition" in names and data.column("partition").null_count < n:
            col = data.column("partition")
            parts = np.asarray(col.fill_null(-1).to_numpy(zero_copy_only=False), np.int32)
        else:
            parts = np.full(n, -1, np.int32)
        if "key" in names and (parts < 0).any():
            keyed = partitions_for_keys(data.column("key"), len(partitions))
            parts = np.where(parts < 0, keyed, parts).astype(np.int32)
        bad = parts[(parts >= 0) & ~np.isin(parts, partitions)]
        if bad.size:
            raise ValueError(f"topic {topic!r} has no partition {int(bad[0])}")
        sizes = self._row_sizes(data)
        if (parts < 0).any():
            self._sticky_chunks(topic, parts, sizes, partitions)
        keep = [c for c in ("key", "value", "timestamp", "headers") if c in names]
        table = data.select(keep)
        order = np.argsort(parts, kind="stable")
        sorted_parts = parts[order]
        bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
        limit = self.config["max_request_size"] - _BATCH_OVERHEAD - 64
        batches = []
        now = time.monotonic()
        for rows in np.split(order, bounds):
            p = int(parts[rows[0]])
            sub = table.take(pa.array(rows)) if len(rows) != n else table
            for start, stop in self._chunks(sizes[rows], limit):
                chunk = sub.slice(start, stop - start)
                b = _Batch(topic, p, now)
                b.table = chunk
                b.payload = self._encode_table(chunk)
                b.count = stop - start
                b.size = len(b.payload)
                batches.append(b)
                with self._cond:      # queued at once: the sender sends while we encode on
                    self._check_usable()
                    self._wait_for_buffer(b.size)
                    self._charge(b, b.size)
                    self._incomplete.add(b)
                    self._topic_used[topic] = b.created
                    # after the records send() has collected for the partition: one
                    # queue per partition, in call order (Java's accumulator deque)
                    self._seal((b.topic, b.partition))
                    self._ready.setdefault((b.topic, b.partition), deque()).append(b)
                    self._cond.notify_all()
        return BatchFuture(batches)

    def _encode_table(self, table: Any) -> bytes:
        return records.encode(table, compression=self.config["compression_type"],
                              compression_level=self.config["compression_level"])

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now (ignoring ``linger_ms``) and wait until every
        record sent before this call is written or failed (records other threads
        send meanwhile are not waited for); KafkaTimeoutError at ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            pending = list(self._incomplete)     # Java's beginFlush snapshot
            self._flushing += 1
            self._cond.notify_all()
        try:
            if not _wait_done(pending, deadline, self._sender.is_alive) \
                    and self._sender.is_alive():
                left = sum(not b.done for b in _leaves(pending))
                raise KafkaTimeoutError(f"flush: {left} batches still unsent after "
                                        f"{timeout} s")
        finally:
            with self._cond:
                self._flushing -= 1

    #: How long close() waits for the sender thread to stop once told to stop now.
    _FORCE_CLOSE_WAIT = 5.0

    def close(self, timeout: float | None = None) -> None:
        """Flush, stop the sender thread and close the connections, within
        ``timeout`` seconds in all. Records still unsent then fail with
        KafkaConnectionError: the sender thread is told to stop at once (its
        connections are shut down under it) and fails them (Java's forceClose)."""
        if self._closed:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            if self._sender.is_alive():
                self.flush(timeout)
        except KafkaTimeoutError:
            log.warning("closing the producer with records unsent")
        finally:
            with self._cond:
                self._closing = True
                self._cond.notify_all()
            self._sender.join(None if deadline is None
                              else max(0.0, deadline - time.monotonic()))
            if self._sender.is_alive():
                with self._cond:
                    self._force_close = True
                    self._cond.notify_all()
                self._cluster.abort()       # a blocked socket call fails at once
                self._sender.join(self._FORCE_CLOSE_WAIT)
            self._fail_everything(KafkaConnectionError("the producer was closed"))
            with self._cond:
                self._closed = True
                # whoever is last closes the connections: never under a running sender
                sender_done = self._sender_done
            if sender_done:
                self._cluster.close()

    def partitions_for(self, topic: str) -> list[int]:
        """The partition indexes of ``topic`` (waiting for its metadata)."""
        return list(self._partitions(topic))

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Producer {','.join(self._cluster.bootstrap_servers)}>"

    # ------------------------------------------------------------------ caller side helpers

    def _check_usable(self) -> None:
        if self._closing or self._closed:
            raise IllegalStateError("the producer is closed")
        if self._fatal is not None:
            raise self._fatal

    def _partitions(self, topic: str) -> list[int]:
        meta = self._cluster.metadata
        snapshot, cache = self._parts_cache
        if snapshot is meta:
            parts = cache.get(topic)
            if parts:
                return parts
        else:
            cache = {}
            self._parts_cache = (meta, cache)
        parts = cache[topic] = meta.partitions(topic)
        if parts:
            return parts
        deadline = time.monotonic() + self.config["max_block_ms"] / 1000
        with self._cond:
            self._check_usable()
            self._topic_errors.pop(topic, None)
            self._wanted_topics.add(topic)
            self._topic_used[topic] = time.monotonic()
            self._cond.notify_all()
            while True:
                parts = self._cluster.metadata.partitions(topic)
                if parts:
                    return parts
                err = self._topic_errors.get(topic)
                if err is not None and not getattr(err, "retriable", False):
                    raise err
                left = deadline - time.monotonic()
                if left <= 0:
                    raise KafkaTimeoutError(f"no metadata for topic {topic!r} within "
                                            f"max_block_ms ({self.config['max_block_ms']})")
                self._cond.wait(min(left, 0.1))
                self._check_usable()

    def _charge(self, batch: _Batch, size: int) -> None:
        """Under the lock: ``size`` more bytes of buffer_memory held by ``batch``
        (all given back by _release, so the count cannot drift)."""
        batch.charged += size
        self._queued_bytes += size

    def _release(self, batch: _Batch) -> None:
        """Under the lock: give back everything ``batch`` holds."""
        self._queued_bytes -= batch.charged
        batch.charged = 0

    def _wait_for_buffer(self, size: int) -> None:
        limit = self.config["buffer_memory"]
        if self._queued_bytes + size <= limit or not self._queued_bytes:
            return
        deadline = time.monotonic() + self.config["max_block_ms"] / 1000
        while self._queued_bytes + size > limit and self._queued_bytes:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaTimeoutError(f"buffer_memory ({limit} bytes) stayed full for "
                                        f"max_block_ms")
            self._cond.notify_all()
            self._cond.wait(left)
            self._check_usable()

    @staticmethod
    def _row_sizes(table: Any) -> np.ndarray:
        sizes = np.full(table.num_rows, _RECORD_OVERHEAD, np.int64)
        import pyarrow.compute as pc

        for name in ("key", "value"):
            if name in table.schema.names:
                lengths = pc.fill_null(pc.binary_length(table.column(name)), 0)
                sizes += np.asarray(lengths.to_numpy(), np.int64)
        if "headers" in table.schema.names:
            sizes += np.asarray(pc.fill_null(pc.list_value_length(table.column("headers")), 0)
                                .to_numpy(zero_copy_only=False), np.int64) * 32
        return sizes

    def _sticky_chunks(self, topic: str, parts: np.ndarray, sizes: np.ndarray,
                       partitions: list[int]) -> None:
        """Null-key rows: consecutive chunks of ``batch_size`` bytes, each to the
        partitioner's sticky partition, switching after each chunk (as Java does)."""
        free = np.flatnonzero(parts < 0)
        cum = np.cumsum(sizes[free])
        chunk = np.maximum(cum - 1, 0) // max(self.config["batch_size"], 1)
        with self._cond:
            for c in np.unique(chunk):
                p = self._partitioner.partition(topic, None, partitions)
                parts[free[chunk == c]] = p
                self._partitioner.new_batch(topic, partitions)

    @staticmethod
    def _chunks(sizes: np.ndarray, limit: int) -> Iterable[tuple[int, int]]:
        """Split rows (by size) into runs of at most ``limit`` bytes (at least one row)."""
        cum = np.cumsum(sizes)
        start, base, n = 0, 0, len(sizes)
        while start < n:
            stop = int(np.searchsorted(cum, base + limit, side="right"))
            stop = max(stop, start + 1)
            yield start, stop
            base = int(cum[stop - 1])
            start = stop

    def _seal(self, tp: tuple[str, int]) -> None:
        batch = self._open.pop(tp, None)
        if batch is not None:
            self._ready.setdefault(tp, deque()).append(batch)
            self._cond.notify_all()

    # ------------------------------------------------------------------ sender thread

    def _run(self) -> None:
        try:
            self._loop()
            if self._force_close:
                self._fail_everything(KafkaConnectionError("the producer was closed"))
        except BaseException as exc:  # noqa: BLE001 - reported to every waiting caller
            log.exception("producer sender thread died")
            fatal = exc if isinstance(exc, KprotoError) else KafkaConnectionError(
                f"producer sender thread died: {exc!r}")
            if fatal is not exc:
                fatal.__cause__ = exc
            with self._cond:
                self._fatal = fatal
                self._cond.notify_all()
            self._fail_everything(fatal)
        finally:
            if self._selector is not None:
                self._selector.close()
            with self._cond:
                self._sender_done = True
                closed = self._closed
            if closed:          # close() gave up waiting for this thread: clean up here
                self._cluster.close()

    def _loop(self) -> None:
        while True:
            if self._idem is not None and self._idem.needs_producer_id \
                    and time.monotonic() >= self._pid_retry_at:
                self._init_producer_id()
            with self._cond:
                if self._force_close:
                    return
                if self._idem is not None:
                    self._idem.resolve()
                due = self._collect_due()
                if self._cluster.needs_refresh:
                    self._forget_idle_topics()
                if self._closing and not self._incomplete and not self._has_in_flight():
                    return
                idle = not due and not self._has_in_flight() and not self._wanted_topics
                if idle:
                    self._cond.wait(self._idle_wait())
                wanted = set(self._wanted_topics)
            if not idle:
                if wanted or self._cluster.needs_refresh:
                    self._refresh(wanted)
                if due:
                    self._dispatch(due)
                self._poll_responses()
            self._expire()

    def _forget_idle_topics(self) -> None:
        """Under the lock: stop refreshing metadata of topics with no batch opened for
        ``metadata_max_idle_ms`` and none waiting or in flight (Java's producer does
        the same)."""
        now = time.monotonic()
        idle = {t for t, used in self._topic_used.items() if now - used > self._max_idle}
        if not idle:
            return
        idle -= {t for t, _ in self._open} | {t for (t, _), q in self._ready.items() if q} \
            | {t for t, _ in self._busy} | self._wanted_topics
        if idle:
            log.debug("forgetting idle topics %s", sorted(idle))
            self._cluster.forget_topics(idle)
            for t in idle:
                del self._topic_used[t]

    def _has_in_flight(self) -> bool:
        return any(c.in_flight for c in self._conns)

    def _idle_wait(self) -> float:
        """Under the lock: how long nothing is due (lingering batches, backoffs,
        the next InitProducerId attempt); at most 1 s (expiry runs meanwhile)."""
        now = time.monotonic()
        wake = now + 1.0
        if self._open:
            wake = min(wake, min(b.created for b in self._open.values()) + self._linger)
        for q in self._ready.values():
            if q and q[0].next_try > now:
                wake = min(wake, q[0].next_try)
        if self._idem is not None and self._idem.needs_producer_id:
            wake = min(wake, self._pid_retry_at)
        return max(0.0, wake - now)

    def _collect_due(self) -> list[_Batch]:
        """Under the lock: seal lingering batches, and take the first ready batch of
        every partition without one in flight (whose backoff has passed, and that
        idempotence lets go: see producer_state)."""
        now = time.monotonic()
        flushing = self._flushing or self._closing
        for tp, batch in list(self._open.items()):
            if flushing or now - batch.created >= self._linger:
                self._seal(tp)
        due = []
        for tp, queue in self._ready.items():
            if queue and tp not in self._busy and queue[0].next_try <= now and (
                    self._idem is None or self._idem.can_send(queue[0])):
                due.append(queue.popleft())
                self._busy.add(tp)
        return due

    def _refresh(self, wanted: set[str]) -> None:
        try:
            self._cluster.refresh_metadata(wanted)
        except KprotoError as exc:
            log.debug("metadata refresh failed: %s", exc)
            with self._cond:
                for t in wanted:
                    self._topic_errors[t] = exc
                self._cond.notify_all()
            time.sleep(self.config["retry_backoff_ms"] / 1000)
            return
        meta = self._cluster.metadata
        with self._cond:
            for t in wanted:
                info = meta.topics.get(t)
                if info is not None and info.partitions:
                    self._wanted_topics.discard(t)
                elif info is not None and info.error_code:
                    cls = error_for_code(info.error_code)
                    assert cls is not None
                    self._topic_errors[t] = cls(topic=t)
                    if not cls.retriable:
                        self._wanted_topics.discard(t)
            self._cond.notify_all()

    def _dispatch(self, due: list[_Batch]) -> None:
        by_node: dict[int, list[_Batch]] = {}
        meta = self._cluster.metadata
        for b in due:
            node = meta.leader(b.topic, b.partition)
            if node < 0:
                self._cluster.mark_stale()
                self._retry(b, None)
                continue
            by_node.setdefault(node, []).append(b)
        limit = self.config["max_request_size"]
        for node, batches in by_node.items():
            conn = self._cluster._connections.get(node)
            in_flight = conn.in_flight if conn is not None else 0
            request: list[_Batch] = []
            size = 0
            for b in batches:
                self._prepare(b)
                assert b.payload is not None
                if request and (size + len(b.payload) > limit or in_flight >=
                                self.config["max_in_flight_requests_per_connection"]):
                    self._send_request(node, request)
                    in_flight += 1
                    request, size = [], 0
                request.append(b)
                size += len(b.payload)
            if request:
                self._send_request(node, request)

    def _prepare(self, b: _Batch) -> None:
        """Encode a batch once, and stamp its producer id, epoch and sequence (given
        on its first try, changed only by producer_state when it resets them)."""
        if b.payload is None:
            if b.table is not None:
                b.payload = self._encode_table(b.table)
            else:
                keys, values, stamps, headers = zip(*b.rows, strict=True)
                b.timestamps = stamps
                b.payload = records.encode(
                    key=_binary(keys), value=_binary(values),
                    timestamp=np.array(stamps, np.int64),
                    headers=headers if b.has_headers else None,
                    compression=self.config["compression_type"],
                    compression_level=self.config["compression_level"])
            b.stamped = None
        if self._idem is not None:
            if b.sequence < 0:
                self._idem.assign(b)
            stamp = (b.producer_id, b.producer_epoch, b.sequence)
            if b.stamped != stamp:
                b.payload = stamp_batch(b.payload, *stamp)
                b.stamped = stamp

    def _send_request(self, node: int, batches: list[_Batch]) -> None:
        acks = self.config["acks"]
        topics: dict[str, list[dict[str, Any]]] = {}
        for b in batches:
            topics.setdefault(b.topic, []).append({"index": b.partition, "records": b.payload})
            b.attempts += 1
        meta = self._cluster.metadata
        fields = {
            "transactional_id": None, "acks": acks,
            "timeout_ms": self.config["request_timeout_ms"],
            "topic_data": [{"name": t, "topic_id": _topic_id(meta, t), "partition_data": parts}
                           for t, parts in topics.items()],
        }
        conn = None
        try:
            conn = self._cluster.connection(node)
            conn.send(ApiKey.PRODUCE, fields, expect_response=acks != 0,
                      context=_Sent(batches, time.monotonic()))
        except KprotoError as exc:
            self._cluster.mark_stale()
            for b in batches:
                self._retry(b, exc)
            if conn is not None:     # the write failed: its other requests are lost too
                self._retry_lost(conn, exc)
            return
        if acks == 0:
            for b in batches:
                self._complete(b, -1, -1, None)
            return
        self._conns.add(conn)

    def _poll_responses(self) -> None:
        """Wait (briefly) for answers on every connection with requests in flight."""
        self._retry_lost_everywhere()
        conns = [c for c in self._conns if c.in_flight]
        if not conns:
            return
        with self._cond:
            timeout = min(0.05, self._idle_wait())
            if any(q for q in self._ready.values()):
                timeout = 0.0 if self._free_partitions_ready() else timeout
        for conn in self._select(conns, timeout):
            try:
                responses = conn.receive(time.monotonic() + self._cluster.request_timeout)
            except KprotoError as exc:      # the connection closed itself
                self._cluster.mark_stale()
                self._retry_lost(conn, exc)
                continue
            for resp in responses:
                batches = resp.request.context.batches
                if resp.error is not None:
                    for b in batches:
                        self._retry(b, resp.error)
                else:
                    self._handle_response(resp.body, batches)
        # requests unanswered for too long: give up on the connection (Java does too)
        now = time.monotonic()
        for conn in conns:
            sent = conn.requests_in_flight()
            if sent and now - sent[0].context.sent > self._cluster.request_timeout:
                conn.close()
                self._cluster.mark_stale()
                self._retry_lost(conn, KafkaTimeoutError(
                    f"{conn.address} did not answer a Produce request within "
                    "request_timeout_ms"))
        self._retry_lost_everywhere()

    def _retry_lost(self, conn: BrokerConnection, exc: BaseException) -> None:
        """Retry the batches of the requests ``conn`` lost when it closed."""
        for req in conn.take_lost():
            for b in req.context.batches:
                self._retry(b, exc)
        if not conn.in_flight:
            self._conns.discard(conn)

    def _retry_lost_everywhere(self) -> None:
        """Connections may close anywhere (a metadata refresh that fails closes them
        all): retry what they had in flight."""
        for conn in list(self._conns):
            self._retry_lost(conn, KafkaConnectionError(
                f"the connection to {conn.address} closed with a Produce request in flight"))

    def _select(self, conns: list[BrokerConnection], timeout: float) -> list[BrokerConnection]:
        """The connections of ``conns`` readable within ``timeout``, on one selector
        kept across calls and re-registered when a connection changes (a reconnect
        may reuse the fd number of a closed socket, which the kernel has already
        dropped from the selector)."""
        import selectors

        watched = {id(c): (c.fileno(), c.opened) for c in conns}
        if self._selector is None or watched != self._watched:
            if self._selector is not None:
                self._selector.close()
            self._selector = selectors.DefaultSelector()
            for c in conns:
                self._selector.register(c.fileno(), selectors.EVENT_READ, c)
            self._watched = watched
        return [key.data for key, _ in self._selector.select(timeout)]

    def _free_partitions_ready(self) -> bool:
        now = time.monotonic()
        return any(q and tp not in self._busy and q[0].next_try <= now
                   and (self._idem is None or self._idem.can_send(q[0]))
                   for tp, q in self._ready.items())

    def _handle_response(self, body: dict[str, Any], batches: list[_Batch]) -> None:
        names = self._cluster.metadata.topic_names()
        results: dict[tuple[str, int], dict[str, Any]] = {}
        for t in body["responses"]:
            name = t.get("name") or names.get(t.get("topic_id"), "")
            for p in t["partition_responses"]:
                results[(name, p["index"])] = p
        for b in batches:
            p = results.get((b.topic, b.partition))
            if p is None:
                self._retry(b, KafkaConnectionError(
                    f"Produce response has no answer for {b.topic}[{b.partition}]"))
                continue
            code = p["error_code"]
            if code == 0:
                self._complete(b, p["base_offset"], p.get("log_append_time_ms", -1), None)
            elif code == _DUPLICATE_SEQUENCE:
                self._complete(b, -1, -1, None)
            elif code == _MESSAGE_TOO_LARGE and b.count > 1:
                self._split(b)
            else:
                cls = error_for_code(code)
                assert cls is not None
                err = cls(p.get("error_message"), topic=b.topic, partition=b.partition)
                if cls.invalid_metadata:
                    self._cluster.mark_stale()
                self._retry(b, err, code)

    def _split(self, b: _Batch) -> None:
        """The broker refused ``b`` as too large: send its records again in two
        batches, first in the partition's queue (Java's splitAndReenqueue; halves,
        until a single record is refused with MessageTooLargeError)."""
        if b.done:
            return
        half = b.count // 2
        parts = []
        for lo, hi in ((0, half), (half, b.count)):
            part = _Batch(b.topic, b.partition, b.created)   # same delivery deadline
            part.count = hi - lo
            if b.table is not None:
                part.table = b.table.slice(lo, hi - lo)
            else:
                part.rows = b.rows[lo:hi]
                part.has_headers = b.has_headers
                part.size = _BATCH_OVERHEAD + b.size * part.count // b.count
            parts.append(part)
        log.debug("%s[%d]: batch of %d records too large, split in two", b.topic,
                  b.partition, b.count)
        if self._idem is not None and b.sequence >= 0:
            self._idem.split(b, parts)
        with self._cond:
            charged = b.charged
            self._release(b)
            self._charge(parts[0], charged * parts[0].count // b.count)
            self._charge(parts[1], charged - parts[0].charged)
            with _CALLBACK_LOCK:
                for index, fn in b.callbacks:
                    leaf, i = parts[0], index
                    if i >= leaf.count:
                        leaf, i = parts[1], i - leaf.count
                    leaf.callbacks.append((i, fn))
                b.callbacks = []
                b.split_into = parts
            self._incomplete.discard(b)
            self._incomplete.update(parts)
            b.rows, b.payload, b.table = [], None, None
            tp = (b.topic, b.partition)
            self._ready.setdefault(tp, deque()).extendleft(reversed(parts))
            self._busy.discard(tp)
            self._cond.notify_all()
        b.event.set()     # wakes whoever waits on it: they follow split_into

    def _retry(self, b: _Batch, exc: BaseException | None, code: int = 0) -> None:
        """Send ``b`` again after a backoff if ``exc`` (the error of broker answer
        ``code``, 0 for others) allows it, else fail it."""
        if b.done:
            return
        retriable = None
        if self._idem is not None and code:
            retriable = self._idem.can_retry(b, code)
        if retriable is None:
            retriable = exc is None or isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)) \
                or (isinstance(exc, BrokerError) and exc.retriable)
        too_old = time.monotonic() - b.created > self.config["delivery_timeout_ms"] / 1000
        if not retriable or b.attempts > self.config["retries"] or too_old or self._closed:
            if exc is None or too_old:
                exc = KafkaTimeoutError(f"{b.topic}[{b.partition}]: not delivered within "
                                        f"delivery_timeout_ms (last error: {exc})")
            # refused: the broker answered that it did not write it (Java's
            # adjustSequenceNumbers); otherwise it may have been written
            self._fail(b, exc, refused=bool(code) and not retriable
                       and b.attempts <= self.config["retries"])
            return
        log.debug("retrying %s[%d] after %s", b.topic, b.partition, exc)
        delay = min(self.config["retry_backoff_ms"] * 2 ** max(0, b.attempts - 1),
                    self.config["retry_backoff_max_ms"])
        b.next_try = time.monotonic() + delay / 1000
        with self._cond:
            self._busy.discard((b.topic, b.partition))
            self._ready.setdefault((b.topic, b.partition), deque()).appendleft(b)

    def _fail(self, b: _Batch, exc: BaseException, *, refused: bool) -> None:
        if self._idem is not None and b.sequence >= 0:
            self._idem.failed(b, refused=refused)
        self._complete(b, -1, -1, exc)

    def _complete(self, b: _Batch, base_offset: int, log_append_time: int,
                  error: BaseException | None) -> None:
        """Finish ``b`` (once: later calls do nothing) and give back what it held."""
        with self._cond:
            if b.done or b not in self._incomplete:
                return
            self._incomplete.discard(b)
            self._release(b)
            self._busy.discard((b.topic, b.partition))
            self._cond.notify_all()
        if error is None and self._idem is not None and b.sequence >= 0:
            self._idem.completed(b)
        b.finish(base_offset, log_append_time, error)

    def _expire(self) -> None:
        """Fail queued batches older than delivery_timeout_ms."""
        limit = self.config["delivery_timeout_ms"] / 1000
        now = time.monotonic()
        expired = []
        with self._cond:
            for queue in self._ready.values():
                while queue and now - queue[0].created > limit:
                    expired.append(queue.popleft())
        for b in expired:
            self._fail(b, KafkaTimeoutError(
                f"{b.topic}[{b.partition}]: not sent within delivery_timeout_ms"),
                refused=False)

    def _fail_everything(self, exc: BaseException) -> None:
        """Fail every batch not done yet (safe from any thread: completion happens once)."""
        with self._cond:
            pending = list(self._incomplete)
            self._ready.clear()
            self._open.clear()
        for b in pending:
            self._complete(b, -1, -1, exc)

    def _init_producer_id(self) -> None:
        """Get a producer id (InitProducerId): the first, or a new one after a
        sequence gap (see producer_state). The first must come within
        max_block_ms, else the producer fails; later ones are tried again after
        a backoff while the broker is unreachable (records expire meanwhile)."""
        def attempt() -> dict[str, Any]:
            body = self._cluster.request_any(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": None, "transaction_timeout_ms": 60000})
            cls = error_for_code(body["error_code"])
            if cls is not None:
                raise cls("InitProducerId failed")
            return body

        assert self._idem is not None
        first = not self._had_producer_id
        try:
            body = self._cluster.call(attempt, "InitProducerId", timeout=(
                self.config["max_block_ms"] / 1000 if first else self._cluster.request_timeout))
        except KprotoError as exc:
            if self._force_close:
                return              # close() gave up: the loop ends at its next turn
            if first or not exc.retriable:
                raise
            log.debug("InitProducerId failed (%s); trying again", exc)
            self._pid_retry_at = time.monotonic() + self.config["retry_backoff_max_ms"] / 1000
            return
        self._had_producer_id = True
        self._idem.set_producer_id(body["producer_id"], body["producer_epoch"])


class _Sent(NamedTuple):
    """A Produce request's context on its connection: its batches, when it was sent."""

    batches: list[_Batch]
    sent: float


class _BinaryRows:
    """Python bytes (or None) laid out as an Arrow-style binary column for the encoder,
    without going through pyarrow (cheaper for the few hundred rows of a batch)."""

    def __init__(self, items: tuple[bytes | None, ...]) -> None:
        n = len(items)
        if None in items:
            lengths = [0 if x is None else len(x) for x in items]
            valid = np.fromiter((x is not None for x in items), bool, n)
            self.validity: np.ndarray | None = np.packbits(valid, bitorder="little")
            data = b"".join(x for x in items if x is not None)
        else:
            lengths = [len(x) for x in items]  # type: ignore[arg-type]
            self.validity = None
            data = b"".join(items)  # type: ignore[arg-type]
        self.offsets = np.zeros(n + 1, np.int64 if len(data) > 0x7FFFFFFF else np.int32)
        np.cumsum(lengths, out=self.offsets[1:])
        self.data = np.frombuffer(data, np.uint8)
        self.n = n


def _binary(items: tuple[bytes | None, ...]) -> Any:
    col = _BinaryRows(items)
    return records.RawBinary(col.offsets, col.data, col.validity)


def _topic_id(meta: Any, topic: str) -> Any:
    import uuid

    info = meta.topics.get(topic)
    return info.topic_id if info is not None and info.topic_id is not None else uuid.UUID(int=0)
