"""AIOProducer: :class:`~kproto.producer.Producer` for asyncio.

The producer's logic is unchanged: ``send()`` appends to the accumulator and
the sender thread (the producer's driver, as in Java and librdkafka) batches,
sends and resolves the futures. On the loop, ``await producer.send(...)``
returns once the record is queued, with its :class:`~kproto.producer.RecordFuture`:
awaiting it gives the record's :class:`~kproto.structs.RecordMetadata` (or
raises its delivery error). The sender thread hands finished deliveries to the
loop in bulk (kproto/producer/handoff.py): one ``call_soon_threadsafe`` wakes
every waiter done since the last one.

``send`` never blocks the loop: the two things the blocking ``send`` may wait
for - a topic's metadata, room in ``buffer_memory`` - are awaited first (in a
worker thread); only then is the record appended, on the loop. A cancelled
``send`` therefore either queued its record (it returned) or not (it raised).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from ..producer.producer import BatchFuture, BatchMetadata, Producer, RecordFuture
from ..structs import ConsumerGroupMetadata, OffsetAndMetadata, RecordMetadata

__all__ = ["AIOProducer"]

#: about what a record costs the buffer beyond its key and value (a bound is
#: enough: it only decides whether to wait for room before the append)
_RECORD_OVERHEAD = 96


class AIOProducer:
    """A Kafka producer for asyncio with :class:`~kproto.producer.Producer`'s
    settings (``acks``, ``linger_ms``, ``compression_type``, idempotence,
    ``transactional_id``, TLS, SASL...).

    >>> async with AIOProducer(bootstrap_servers="127.0.0.1:9092") as p:  # doctest: +SKIP
    ...     await p.send_and_wait("events", b"v", key=b"k")
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self._producer = p = Producer(config, **settings)
        self.config = p.config
        self._send, self._acc, self._cluster = p.send, p._accumulator, p._cluster
        #: topics whose partitions send() knows without waiting, for this metadata
        self._known: tuple[object, set[str]] = (None, set())
        #: below this many queued bytes, any record fits (max_request_size bounds one)
        self._roomy = max(0, p.config["buffer_memory"] - p.config["max_request_size"])

    async def send(self, topic: str, value: Any = None, key: Any = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Any = None) -> RecordFuture:
        """Queue one record (:meth:`Producer.send`'s values, aiokafka's argument
        order); returns once it is queued, with its future: ``await`` it for the
        record's metadata."""
        meta, known = self._known
        if topic not in known or meta is not self._cluster.metadata \
                or self._acc.queued_bytes > self._roomy:
            await self._make_room(topic, _RECORD_OVERHEAD + _size(value) + _size(key))
        return self._send(topic, value, key, headers, partition, timestamp_ms)

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None,
                            partition: int | None = None, timestamp_ms: int | None = None,
                            headers: Any = None) -> RecordMetadata:
        """:meth:`send` and wait for the delivery."""
        return await (await self.send(topic, value, key, partition, timestamp_ms, headers))

    async def send_batch(self, topic: str, data: Any, **options: Any) -> BatchFuture:
        """:meth:`Producer.send_batch` (a pyarrow Table or RecordBatch with Spark's
        columns) in a worker thread: encoding and queueing off the loop. Returns
        the :class:`~kproto.producer.BatchFuture`; :meth:`wait_batch` awaits it.
        Cancelled, the thread still queues the whole table (never part of it)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, lambda: self._producer.send_batch(topic, data, **options))

    async def wait_batch(self, future: BatchFuture, timeout: float | None = None
                         ) -> list[BatchMetadata]:
        """The :class:`~kproto.producer.BatchMetadata` of a :meth:`send_batch`."""
        return await asyncio.get_running_loop().run_in_executor(None, future.result, timeout)

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued and wait until it is written or failed."""
        await self._blocking(self._producer.flush, timeout)

    async def close(self, timeout: float | None = None) -> None:
        """Flush, stop the sender thread and close the connections."""
        await self._blocking(self._producer.close, timeout)

    async def start(self) -> None:
        """aiokafka's ``start()``: nothing to do (connections open on first use)."""

    async def stop(self) -> None:
        """aiokafka's name for :meth:`close`."""
        await self.close()

    async def partitions_for(self, topic: str) -> list[int]:
        """The partition indexes of ``topic`` (waiting for its metadata)."""
        return await self._blocking(self._producer.partitions_for, topic)

    # ------------------------------------------------------------------ transactions

    async def init_transactions(self, timeout: float | None = None) -> None:
        """:meth:`Producer.init_transactions` (InitProducerId) off the loop."""
        await self._blocking(self._producer.init_transactions, timeout)

    def begin_transaction(self) -> None:
        """Start a transaction (local: no request)."""
        self._producer.begin_transaction()

    async def send_offsets_to_transaction(
            self, offsets: Mapping[Any, int | OffsetAndMetadata],
            group_metadata: ConsumerGroupMetadata | str, timeout: float | None = None) -> None:
        """Commit a consumer group's offsets as part of the transaction."""
        await self._blocking(self._producer.send_offsets_to_transaction, offsets,
                             group_metadata, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Send what is queued, then commit the transaction (EndTxn)."""
        await self._blocking(self._producer.commit_transaction, timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction."""
        await self._blocking(self._producer.abort_transaction, timeout)

    def transaction(self) -> _Transaction:
        """``async with producer.transaction():`` - begin, then commit (abort when
        the block raises), as aiokafka's."""
        return _Transaction(self)

    def metrics(self) -> dict[Any, float]:
        """:meth:`Producer.metrics`."""
        return self._producer.metrics()

    async def __aenter__(self) -> AIOProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AIOProducer {self._producer!r}>"

    # ------------------------------------------------------------------ internals

    async def _make_room(self, topic: str, size: int) -> None:
        """The topic's metadata and room for ``size`` bytes (``max_block_ms`` at most
        each, as the blocking send): at once when there are, else in a worker thread."""
        p, acc = self._producer, self._acc
        acc.check_usable()
        meta = self._cluster.metadata
        if meta.partitions(topic) and acc.queued_bytes + size <= acc.buffer_memory:
            pass
        else:
            def wait() -> None:
                p._partitions(topic)
                with acc.cond:
                    acc._wait_for_buffer(size)
            await asyncio.get_running_loop().run_in_executor(None, wait)
            meta = self._cluster.metadata
        if meta.partitions(topic):
            seen, known = self._known
            if seen is not meta:
                known = set()
            known.add(topic)
            self._known = (meta, known)

    async def _blocking(self, call: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, call, *args)


def _size(v: Any) -> int:
    """About the bytes of a key or value (0 for what send() will refuse or encode)."""
    return len(v) if isinstance(v, (bytes, str, bytearray, memoryview)) else 0


class _Transaction:
    def __init__(self, producer: AIOProducer) -> None:
        self._producer = producer

    async def __aenter__(self) -> None:
        self._producer.begin_transaction()

    async def __aexit__(self, et: type[BaseException] | None, *exc: object) -> None:
        if et is None:
            await self._producer.commit_transaction()
        else:
            await self._producer.abort_transaction()
