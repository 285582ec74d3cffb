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
goes on with a new producer id (see :mod:`kproto.producer.idempotence`). Each
partition has one queue, in call order, for ``send()`` and ``send_batch()``.

The parts, as Java's client splits them: this module is the facade (settings,
``send``/``send_batch``/``flush``/``close``, the futures);
:mod:`kproto.producer.accumulator` queues the records per partition in batches
(linger, batch size, ``buffer_memory``, splits); :mod:`kproto.producer.sender`
is the sender thread; the record batch header it stamps is
:mod:`kproto.records.batch`.

``send_batch`` takes a whole pyarrow Table: it partitions the rows (a
``partition`` column, murmur2 of ``key`` vectorised in Cython, or sticky
chunks for null keys), encodes each partition's rows into record batches in
Cython straight from the Arrow buffers, and queues them for the sender thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .. import records
from .._backend import backend
from ..config import resolve
from ..errors import (
    ConfigError,
    EncodeError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    KprotoError,
)
from ..metrics import MetricName
from ..net.cluster import Cluster
from ..records.batch import HEADER_SIZE as _BATCH_OVERHEAD
from ..structs import ConsumerGroupMetadata, OffsetAndMetadata, RecordMetadata
from ..telemetry import Instruments
from .accumulator import (
    ProducerBatch,
    RecordAccumulator,
    chunks,
    leaves,
    wait_done,
)
from .columns import checked_table
from .handoff import for_running_loop
from .idempotence import IdempotenceState
from .partitioner import partitions_for_keys
from .sender import Sender
from .sender_metrics import SenderMetrics
from .transaction_manager import TransactionManager
from .transactions import PreparedTransaction

if TYPE_CHECKING:       # the twins' fields and signatures are the Cython classes'
    from .._pure.accum import FutureCore as _FutureCore
    from .._pure.accum import ProducerCore as _ProducerCore
else:
    _FutureCore, _ProducerCore = backend.FutureCore, backend.ProducerCore

__all__ = ["Producer", "RecordMetadata", "BatchMetadata", "RecordFuture", "BatchFuture"]

log = logging.getLogger("kproto.producer")



class BatchMetadata(NamedTuple):
    """Where one record batch of a :meth:`Producer.send_batch` call was written."""

    topic: str
    partition: int
    base_offset: int
    record_count: int


class RecordFuture(_FutureCore):
    """The outcome of one :meth:`Producer.send`: a :class:`RecordMetadata` or an error.

    Like :class:`concurrent.futures.Future`: ``result()``, ``exception()``,
    ``done()``, ``add_done_callback()`` (called on the sender thread); on an
    event loop, ``await future`` gives the metadata without blocking it.
    """

    __slots__ = ()
    _batch: ProducerBatch
    _index: int

    def done(self) -> bool:
        return self._batch.leaf(self._index)[0].done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for delivery; raise the delivery error, or KafkaTimeoutError at ``timeout``."""
        exc = self.exception(timeout)
        if exc is not None:
            raise exc
        batch, index = self._batch.leaf(self._index)
        return batch.metadata(index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        if not wait_done([self._batch], deadline):
            raise KafkaTimeoutError(f"record not delivered within {timeout} s")
        return self._batch.leaf(self._index)[0].error

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        if not self._batch.add_callback(self._index, lambda _b, _i: fn(self)):
            fn(self)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        """``await future`` on an event loop: the record's metadata (or its error),
        handed from the sender thread to the loop (kproto/producer/handoff.py)."""
        if not self.done():
            yield from for_running_loop().waiter(self).__await__()
        return self.result(0)

    def __repr__(self) -> str:
        batch, _ = self._batch.leaf(self._index)
        state = "pending" if not batch.done else ("error" if batch.error else "done")
        return f"<RecordFuture {batch.topic}[{batch.partition}] {state}>"


class BatchFuture:
    """The outcome of one :meth:`Producer.send_batch`: a list of :class:`BatchMetadata`
    (one per record batch written: a batch the broker found too large is written
    in parts)."""

    def __init__(self, batches: list[ProducerBatch]) -> None:
        self._batches = batches

    def done(self) -> bool:
        return all(b.done for b in leaves(self._batches))

    def result(self, timeout: float | None = None) -> list[BatchMetadata]:
        """Wait for every batch; raise the first error (the others may still have
        been written: see each batch through ``exception``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not wait_done(self._batches, deadline):
            raise KafkaTimeoutError(f"batch not delivered within {timeout} s")
        done = leaves(self._batches)
        for b in done:
            if b.error is not None:
                raise b.error
        return [BatchMetadata(b.topic, b.partition, b.base_offset, b.count) for b in done]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            self.result(timeout)
        except KafkaTimeoutError:
            raise
        except KprotoError as exc:
            return exc
        return None


def _typed_columns(topic: str, table: Any, registry: Any, strategy: str,
                   columns: tuple[tuple[str, str | None, Any], ...]) -> Any:
    """``table`` with its struct key/value columns encoded (:mod:`kproto.formats`)."""
    from .. import formats
    from ..schema_registry import as_client

    client = as_client(registry)
    for column, fmt, schema in columns:
        if fmt is None or column not in table.schema.names:
            continue
        subject = None if client is None else formats.subject_name(
            topic, column, strategy, formats.record_name(schema, fmt))
        encoded = formats.encode(table.column(column), fmt, schema=schema, registry=client,
                                 subject=subject)
        table = table.set_column(table.schema.get_field_index(column), column, encoded)
    return table


def _as_bytes(v: Any, what: str) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"{what} must be bytes, str or None, not {type(v).__name__}")


class Producer(_ProducerCore):
    """A Kafka producer; see the module docstring. Settings are Kafka's config keys
    (``acks``, ``linger_ms``, ``compression_type``, ``enable_idempotence``...) as
    keyword arguments, or a dict with Kafka's dotted names. Thread-safe."""

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = resolve("producer", config, **settings)
        c = self.config
        if c["transactional_id"] is not None:
            c["enable_idempotence"] = True      # implied (Java refuses it off)
        if c["enable_idempotence"]:
            if c["acks"] != -1:
                raise ConfigError("enable_idempotence needs acks='all'")
            if c["max_in_flight_requests_per_connection"] > 5:
                raise ConfigError("enable_idempotence allows at most 5 requests in flight")
        self._cluster = Cluster(c)
        self._accumulator = RecordAccumulator(c)
        self._accumulator.future_type = RecordFuture
        self._max_request_size = c["max_request_size"]
        self._parts_cache: tuple[Any, dict[str, list[int]]] = (None, {})
        self._txn = None if c["transactional_id"] is None else \
            TransactionManager(c, self._cluster, self._accumulator)
        self._sender = Sender(c, self._cluster, self._accumulator,
                              IdempotenceState() if c["enable_idempotence"] else None, self._txn)
        # metrics(), stats_callback and KIP-714 pushes (kproto.metrics, kproto.telemetry)
        self._instruments = Instruments(c, "producer", self._cluster,
                                        resource={"transactional_id": c["transactional_id"]})
        if self._instruments.registry is not None:
            acc = self._accumulator
            self._sender.metrics = SenderMetrics(
                self._instruments.registry, lambda: acc.buffer_memory - acc.queued_bytes,
                acc.buffer_memory, lambda: sum(conn.in_flight for conn in self._sender._conns))
        self._sender.start()

    # ------------------------------------------------------------------ public API

    # send() is the base's (``_codec.ProducerCore``: the whole per-record path in C,
    # twin kproto/_pure/accum.py); it calls the helpers below for the rare cases

    def send_batch(self, topic: str, data: Any, *, partition: int | None = None,
                   value_format: str | None = None, key_format: str | None = None,
                   registry: Any = None, value_schema: Any = None, key_schema: Any = None,
                   subject_name_strategy: str = "TopicNameStrategy") -> BatchFuture:
        """Queue a whole pyarrow ``Table``/``RecordBatch`` (or a dict of columns).

        Columns: ``value`` (binary/string; a null is a tombstone), optional ``key``,
        ``headers`` (``list<struct<key: string, value: binary>>``), ``timestamp``
        (timestamp or int64 ms) and ``partition`` (int). A table without ``value``,
        with any other column, or with a column of another type is refused with an
        :class:`~kproto.errors.EncodeError` naming it (:mod:`kproto.producer.columns`)
        before anything is sent. Rows go to
        ``partition`` (the argument, else the column, else murmur2 of the key,
        else sticky chunks of ``batch_size`` bytes). Each partition's rows are
        encoded in Cython into record batches of at most ``max_request_size``
        bytes. Returns a :class:`BatchFuture`.

        Typed values: with ``value_format`` (``"avro"``, ``"json"``, ``"protobuf"``;
        ``key_format`` likewise) the ``value`` column is a struct column, encoded by
        :func:`kproto.formats.encode` with ``value_schema``; with ``registry`` (a URL
        or a SchemaRegistryClient) the schema is registered under the subject
        ``subject_name_strategy`` names (``<topic>-value`` by default) and each value
        framed with its id (Confluent's wire format)::

            p.send_batch("users", pa.table({"value": users}), value_format="avro",
                         value_schema=schema, registry="http://registry:8081")
        """
        import pyarrow as pa

        if self._txn is not None:
            self._txn.check_send()
        if isinstance(data, Mapping):
            data = pa.table(dict(data))
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not isinstance(data, pa.Table):
            raise TypeError(f"send_batch takes a pyarrow Table/RecordBatch or a dict of "
                            f"columns, not {type(data).__name__}")
        if value_format is not None or key_format is not None:
            data = _typed_columns(topic, data, registry, subject_name_strategy,
                                  (("value", value_format, value_schema),
                                   ("key", key_format, key_schema)))
        data = checked_table(data, partition)     # EncodeError naming a column it misreads
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
        top = int(parts.max())
        if top >= len(partitions) or (top >= 0 and partitions != list(range(len(partitions)))):
            bad = parts[(parts >= 0) & ~np.isin(parts, partitions)]
            if bad.size:
                raise EncodeError(f"topic {topic!r} has no partition {int(bad[0])} "
                                  f"(it has {len(partitions)})")
        acc = self._accumulator
        keep = [c for c in ("key", "value", "timestamp", "headers") if c in names]
        table = data.select(keep)
        # the rows are encoded where they are (records.Rows: no copy of a partition's
        # rows first; the columns prepared for the encoder once a call)
        selected = records.Rows(table)
        sizes = selected.sizes()
        if (parts < 0).any():
            acc.assign_sticky(topic, parts, sizes, partitions)
        # rows by partition, in call order within each (a radix sort on 16 bits)
        order = np.argsort(parts.astype(np.int16) if parts.max() < 1 << 15 else parts,
                           kind="stable")
        sorted_parts = parts[order]
        starts = np.flatnonzero(np.diff(sorted_parts)) + 1
        if starts.size:     # all rows to one partition: the table as it is
            selected = selected.take(order)
            sizes = sizes[order]
        starts = np.concatenate(([0], starts))
        totals = np.add.reduceat(sizes, starts)
        limit = self.config["max_request_size"] - _BATCH_OVERHEAD - 64
        batches = []
        now = time.monotonic()
        for lo, hi, total in zip(starts.tolist(), [*starts[1:].tolist(), n], totals.tolist(),
                                 strict=True):
            p = int(sorted_parts[lo])
            runs = [(lo, hi)] if total <= limit else [
                (lo + a, lo + b) for a, b in chunks(sizes[lo:hi], limit)]
            for start, stop in runs:
                chunk = selected.slice(start, stop - start)
                b = ProducerBatch(topic, p, now)
                b.table = chunk
                b.payload = acc.encode_table(chunk)
                b.count = stop - start
                b.size = len(b.payload)
                batches.append(b)
                # queued at once (the sender sends while we encode on), after the
                # records send() has collected for the partition
                acc.append_batch(b)
        return BatchFuture(batches)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now (ignoring ``linger_ms``) and wait until every
        record sent before this call is written or failed (records other threads
        send meanwhile are not waited for); KafkaTimeoutError at ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = self._accumulator.begin_flush()
        try:
            if not wait_done(pending, deadline, self._sender.is_alive) \
                    and self._sender.is_alive():
                left = sum(not b.done for b in leaves(pending))
                raise KafkaTimeoutError(f"flush: {left} batches still unsent after "
                                        f"{timeout} s")
        finally:
            self._accumulator.end_flush()

    #: How long close() waits for the sender thread to stop once told to stop now.
    _FORCE_CLOSE_WAIT = 5.0

    def close(self, timeout: float | None = None) -> None:
        """Flush, stop the sender thread and close the connections, within
        ``timeout`` seconds in all. Records still unsent then fail with
        KafkaConnectionError: the sender thread is told to stop at once (its
        connections are shut down under it) and fails them (Java's forceClose)."""
        if self._accumulator.closed:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            if self._sender.is_alive():
                self.flush(timeout)
        except KafkaTimeoutError:
            log.warning("closing the producer with records unsent")
        finally:
            self._accumulator.begin_close()
            self._sender.join(None if deadline is None
                              else max(0.0, deadline - time.monotonic()))
            if self._sender.is_alive():
                self._sender.force_close()
                self._sender.join(self._FORCE_CLOSE_WAIT)
            self._accumulator.abort_incomplete(KafkaConnectionError("the producer was closed"))
            if self._txn is not None:
                self._txn.fail_pending(KafkaConnectionError("the producer was closed"))
            self._sender.detach()
            self._instruments.close(2.0 if deadline is None else
                                    max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------------ transactions

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get the producer id and epoch of ``transactional_id`` (InitProducerId):
        once, before the first transaction. It fences every earlier producer with
        the same id (their next call raises ProducerFencedError) and aborts the
        transaction such a producer left open. ``timeout`` (s) defaults to
        ``max_block_ms``; after a KafkaTimeoutError, call it again to go on waiting."""
        self._transactional().init(timeout)

    def begin_transaction(self) -> None:
        """Start a transaction: what is sent from now until commit_transaction() or
        abort_transaction() becomes visible to read_committed readers all at once, or
        never."""
        self._transactional().begin()

    def send_offsets_to_transaction(self, offsets: Mapping[Any, int | OffsetAndMetadata],
                                    group_metadata: ConsumerGroupMetadata | str,
                                    timeout: float | None = None) -> None:
        """Commit ``offsets`` (``{(topic, partition): next offset}``, or
        :class:`~kproto.structs.OffsetAndMetadata` values with a metadata string)
        for a consumer group as part of the transaction: they take effect when it
        commits. ``group_metadata``: the consumer's ``group_metadata()`` (the group
        coordinator then refuses it from a member the group has moved on from), or
        a plain group id."""
        self._transactional().send_offsets(offsets, group_metadata, timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send what is queued, then commit the transaction (EndTxn). Raises
        AbortableTransactionError when something in it failed (abort it then),
        ProducerFencedError when another producer took the transactional id or the
        broker aborted the transaction at ``transaction_timeout_ms``. After a
        KafkaTimeoutError, call it again to go on waiting."""
        self._transactional().commit(timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: queued records fail with TransactionAbortedError,
        nothing of it becomes visible to read_committed readers."""
        self._transactional().abort(timeout)

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction | None:
        """Flush the transaction and stop before its end: another process commits or
        aborts it with :func:`kproto.producer.transactions.commit_transaction` (or this one
        with commit_transaction()). Returns its transactional id, producer id and
        epoch, or None if it holds nothing. Closing the producer leaves it open."""
        txn = self._transactional()
        txn.check_send()
        self.flush(timeout)
        return txn.prepare()

    def _transactional(self) -> TransactionManager:
        if self._txn is None:
            raise IllegalStateError("the producer has no transactional_id")
        return self._txn

    def metrics(self) -> dict[MetricName, float]:
        """The producer's metrics now, ``{MetricName: value}`` as Java's
        ``KafkaProducer.metrics()`` (docs/client.md "Metrics"): record send, retry
        and error rates, batch sizes, compression, request latency, buffer bytes,
        per-broker requests. Empty with ``metrics_enabled=False``."""
        return self._instruments.metrics()

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

    def _as_bytes(self, v: Any, what: str) -> bytes | None:
        return _as_bytes(v, what)

    @staticmethod
    def _header_pairs(headers: Any) -> tuple[list[tuple[Any, bytes | None]], int]:
        """send()'s headers as (key, value bytes) pairs, and about how many bytes they add."""
        items = headers.items() if isinstance(headers, Mapping) else headers
        pairs = [(hk, _as_bytes(hv, "header value")) for hk, hv in items]
        return pairs, sum(len(hk) + (len(hv) if hv else 0) + 4 for hk, hv in pairs)

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
        acc = self._accumulator
        with acc.cond:
            acc.check_usable()
            self._sender.want_metadata(topic)
            while True:
                parts = self._cluster.metadata.partitions(topic)
                if parts:
                    return parts
                err = self._sender.metadata_error(topic)
                if err is not None and not getattr(err, "retriable", False):
                    raise err
                left = deadline - time.monotonic()
                if left <= 0:
                    raise KafkaTimeoutError(f"no metadata for topic {topic!r} within "
                                            f"max_block_ms ({self.config['max_block_ms']})")
                acc.cond.wait(min(left, 0.1))
                acc.check_usable()

