"""AIOProducer: :class:`~kproto.producer.Producer` for asyncio.

The producer's logic is unchanged: ``send()`` appends to the accumulator and
the sender thread (the producer's driver, as in Java and librdkafka) batches,
sends and resolves the futures. On the loop, ``await producer.send(...)``
returns once the record is queued, with a :class:`RecordDelivery`: awaiting it
gives the record's :class:`~kproto.structs.RecordMetadata` (or raises its
delivery error). The sender thread hands finished deliveries to the loop in
bulk: one ``call_soon_threadsafe`` wakes every waiter done since the last one.

``send`` never blocks the loop: the two things the blocking ``send`` may wait
for - a topic's metadata, room in ``buffer_memory`` - are awaited first (in a
worker thread); only then is the record appended, on the loop. A cancelled
``send`` therefore either queued its record (it returned) or not (it raised).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Generator, Mapping
from typing import Any

from ..producer.producer import BatchFuture, BatchMetadata, Producer, RecordFuture
from ..structs import ConsumerGroupMetadata, OffsetAndMetadata, RecordMetadata

__all__ = ["AIOProducer", "RecordDelivery"]

#: about what a record costs the buffer beyond its key and value (a bound is
#: enough: it only decides whether to wait for room before the append)
_RECORD_OVERHEAD = 96


class _Handoff:
    """Deliveries finished on the sender thread, handed to the loop's waiters."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._done: deque[asyncio.Future[None]] = deque()
        self._scheduled = False

    def waiter(self, future: RecordFuture) -> asyncio.Future[None]:
        """A loop future done once ``future`` is."""
        waiter: asyncio.Future[None] = self.loop.create_future()
        future.add_done_callback(lambda _f: self._finished(waiter))
        return waiter

    def _finished(self, waiter: asyncio.Future[None]) -> None:
        """On the sender thread (or the loop's, if already done): one wake-up for
        every waiter finished until the loop runs it."""
        self._done.append(waiter)
        if not self._scheduled:
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._wake)
            except RuntimeError:        # the loop is closed: nobody waits any more
                pass

    def _wake(self) -> None:
        self._scheduled = False
        done = self._done
        while done:
            waiter = done.popleft()
            if not waiter.done():
                waiter.set_result(None)


class RecordDelivery:
    """The outcome of one :meth:`AIOProducer.send`: ``await`` it for the record's
    :class:`~kproto.structs.RecordMetadata` (raises its delivery error).
    ``future`` is the producer's :class:`~kproto.producer.RecordFuture`."""

    __slots__ = ("future", "_handoff")

    def __init__(self, future: RecordFuture, handoff: _Handoff) -> None:
        self.future = future
        self._handoff = handoff

    def done(self) -> bool:
        return self.future.done()

    def result(self) -> RecordMetadata:
        """The metadata of a delivery that is done (else it would block: await it)."""
        return self.future.result(0)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        future = self.future
        if not future.done():
            yield from self._handoff.waiter(future).__await__()
        return future.result(0)


class AIOProducer:
    """A Kafka producer for asyncio with :class:`~kproto.producer.Producer`'s
    settings (``acks``, ``linger_ms``, ``compression_type``, idempotence,
    ``transactional_id``, TLS, SASL...).

    >>> async with AIOProducer(bootstrap_servers="127.0.0.1:9092") as p:  # doctest: +SKIP
    ...     await p.send_and_wait("events", b"v", key=b"k")
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self._producer = Producer(config, **settings)
        self.config = self._producer.config
        self._handoffs: dict[asyncio.AbstractEventLoop, _Handoff] = {}

    async def send(self, topic: str, value: Any = None, key: Any = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Any = None) -> RecordDelivery:
        """Queue one record (:meth:`Producer.send`'s values, aiokafka's argument
        order); returns once it is queued, with its :class:`RecordDelivery`."""
        p = self._producer
        acc = p._accumulator
        size = _RECORD_OVERHEAD + _size(value) + _size(key)
        snapshot, cache = p._parts_cache
        if snapshot is not p._cluster.metadata or topic not in cache \
                or acc.queued_bytes + size > acc.buffer_memory:
            await asyncio.get_running_loop().run_in_executor(None, self._make_room, topic, size)
        future = p.send(topic, value, key, headers, partition, timestamp_ms)
        return RecordDelivery(future, self._handoff())

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

    def _handoff(self) -> _Handoff:
        loop = asyncio.get_running_loop()
        handoff = self._handoffs.get(loop)
        if handoff is None:
            self._handoffs = {lp: h for lp, h in self._handoffs.items() if not lp.is_closed()}
            handoff = self._handoffs[loop] = _Handoff(loop)
        return handoff

    def _make_room(self, topic: str, size: int) -> None:
        """On a worker thread: the topic's metadata and room for ``size`` bytes
        (``max_block_ms`` at most each, as the blocking send)."""
        p = self._producer
        p._accumulator.check_usable()
        p._partitions(topic)
        acc = p._accumulator
        with acc.cond:
            acc._wait_for_buffer(size)

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
