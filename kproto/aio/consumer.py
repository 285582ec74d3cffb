"""AIOConsumer: :class:`~kproto.consumer.Consumer`'s poll on an event loop.

The consumer's own poll logic (``Consumer._poll_steps``: group duties, the
fetch buffer, one long-poll Fetch per leader sent before a poll returns) runs
under :class:`~kproto.aio.driver.AsyncioDriver`: its waits for Fetch and
JoinGroup/SyncGroup answers are awaited on the loop, its blocking exchanges
(resolving positions, metadata, the group's join, commits and metadata checks,
opening a Fetch connection) run in a worker thread. The calls that are one
blocking exchange and nothing else (commit, committed, offsets, seek to the
ends, close, read_range) run in a worker thread too.

Cancellation-safe: a poll's steps hand records out (and move positions past
them) only in their last, synchronous segment, so a poll cancelled at any await
returned nothing and moved nothing. Records the iteration (``async for``,
:meth:`AIOConsumer.getone`) holds but has not handed out yet count as not
returned: :meth:`AIOConsumer.position` and :meth:`AIOConsumer.commit` start
from them, and the next call hands them out first. The plain calls that move
positions (seek, assign, subscribe, pause, resume) first wait for the thread
of a cancelled poll's blocking exchange still running (it would overwrite
them), for at most that exchange's own deadline; not from that thread itself
(a rebalance listener's), nor for a poll still awaited. A poll after a
cancelled one waits for that thread only until its own deadline (then returns
nothing, the thread left to finish).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..columns import Record
from ..config import check_poll_timeout
from ..consumer.consumer import Consumer
from ..consumer.fetch_buffer import Collected
from ..structs import TopicPartition, as_tp
from .driver import AsyncioDriver
from .held import next_held, take_held
from .locks import Serial

if TYPE_CHECKING:
    import pyarrow

    from ..groups.member import RebalanceListener
    from ..structs import ConsumerGroupMetadata, OffsetAndTimestamp

__all__ = ["AIOConsumer"]

#: The most rows one poll_batch hands out (the rest wait for the next): its
#: conversion to Arrow holds the GIL, so it holds the loop however it is run
#: (measured: benchmarks/bench_aio.py --probe, BENCHMARKS.md "asyncio").
_BATCH_ROWS = 1 << 16

#: fetch_max_bytes unless set: a Fetch answer is read and decoded on the loop,
#: about 1.5 ms per MiB here; 4 MiB answers keep the loop's longest block
#: under 10 ms (the blocking consumer's default is 50 MiB).
_FETCH_MAX_BYTES = 4 << 20


class AIOConsumer:
    """A Kafka consumer for asyncio: the settings and behaviour of
    :class:`kproto.consumer.Consumer` (``group_id``, ``auto_offset_reset``, TLS,
    SASL...), with ``await`` on what waits.

    >>> async with AIOConsumer(bootstrap_servers="127.0.0.1:9092",   # doctest: +SKIP
    ...                        group_id="g", auto_offset_reset="earliest") as consumer:
    ...     consumer.subscribe(["events"])
    ...     async for record in consumer:
    ...         print(record.offset, record.value)

    One task at a time per consumer (calls are serialised by a lock).
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self._consumer = Consumer(config, **settings)
        self.config = self._consumer.config
        if "fetch_max_bytes" not in self.config.explicit:
            self.config["fetch_max_bytes"] = _FETCH_MAX_BYTES
        self._driver = AsyncioDriver()
        self._serial = Serial(self._driver)
        #: records a poll returned to the iteration, not handed out yet
        self._held: deque[Record] = deque()

    # ------------------------------------------------------------------ assignment

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Read exactly these partitions (no group); see :meth:`Consumer.assign`."""
        self._driver.join()         # a poll's exchange still in its thread
        self._consumer.assign(partitions)
        self._drop_held()

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now."""
        return self._consumer.assignment()

    def subscribe(self, topics: Iterable[str] | str | None = None, *,
                  pattern: str | None = None, listener: RebalanceListener | None = None
                  ) -> None:
        """Join ``group_id`` for ``topics`` or ``pattern`` (the join itself happens
        in the polls that follow). The ``listener``'s (plain, not async) methods
        run in the poll, in a worker thread when the rebalance step is offloaded."""
        self._driver.join()
        self._consumer.subscribe(topics, pattern=pattern, listener=listener)

    async def unsubscribe(self) -> None:
        """Leave the group (committing first with auto-commit) and read nothing."""
        await self._serial.offload(self._consumer.unsubscribe)
        self._held.clear()

    # ------------------------------------------------------------------ positions

    def seek(self, partition: tuple[str, int], offset: int) -> None:
        """Read ``partition`` from ``offset`` next."""
        self._driver.join()
        self._consumer.seek(partition, offset)
        self._drop_held({as_tp(partition)})

    async def seek_to_beginning(self, *partitions: tuple[str, int]) -> None:
        """Read from the log start of these partitions (all assigned if none)."""
        await self._serial.offload(lambda: self._consumer.seek_to_beginning(*partitions))
        self._drop_held({as_tp(p) for p in partitions} or None)

    async def seek_to_end(self, *partitions: tuple[str, int]) -> None:
        """Read only records written from now on (all assigned partitions if none)."""
        await self._serial.offload(lambda: self._consumer.seek_to_end(*partitions))
        self._drop_held({as_tp(p) for p in partitions} or None)

    async def position(self, partition: tuple[str, int]) -> int:
        """The offset of the next record this consumer hands out for ``partition``."""
        tp = as_tp(partition)
        for record in self._held:
            if record.partition == tp.partition and record.topic == tp.topic:
                return record.offset
        return int(await self._serial.offload(lambda: self._consumer.position(tp)))

    def pause(self, *partitions: tuple[str, int]) -> None:
        """Return no records of these partitions until :meth:`resume`."""
        self._driver.join()
        self._consumer.pause(*partitions)
        self._drop_held({as_tp(p) for p in partitions})

    def resume(self, *partitions: tuple[str, int]) -> None:
        """Fetch these partitions again (from their positions)."""
        self._driver.join()
        self._consumer.resume(*partitions)

    def paused(self) -> set[TopicPartition]:
        """The partitions paused now (aiokafka's ``paused()``)."""
        return set(self._consumer._subs.paused)

    # ------------------------------------------------------------------ offsets

    async def beginning_offsets(self, partitions: Iterable[tuple[str, int]]
                                ) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        tps = list(partitions)
        return await self._serial.offload(lambda: self._consumer.beginning_offsets(tps))

    async def end_offsets(self, partitions: Iterable[tuple[str, int]]
                          ) -> dict[TopicPartition, int]:
        """The offset after the last record of each partition (LSO with read_committed)."""
        tps = list(partitions)
        return await self._serial.offload(lambda: self._consumer.end_offsets(tps))

    async def offsets_for_times(self, timestamps: Mapping[tuple[str, int], int]
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first offset whose timestamp is >= the given ms."""
        wanted = dict(timestamps)
        return await self._serial.offload(lambda: self._consumer.offsets_for_times(wanted))

    async def committed(self, partitions: Iterable[tuple[str, int]] | tuple[str, int]
                        ) -> Any:
        """The group's committed offset of each partition (None if none); one
        partition (a ``(topic, partition)``) gives its offset alone, as aiokafka."""
        one = isinstance(partitions, tuple) and len(partitions) == 2 \
            and isinstance(partitions[0], str)
        tps = [as_tp(partitions)] if one else [as_tp(p) for p in partitions]
        found = await self._serial.offload(lambda: self._consumer.committed(tps))
        return found[tps[0]] if one else found

    async def commit(self, offsets: Mapping[tuple[str, int], int] | None = None) -> None:
        """Commit ``offsets`` (default: where the records handed out end) for
        ``group_id``; returns once the coordinator has answered."""
        if offsets is None and self._held:
            firsts: dict[TopicPartition, int] = {}
            for record in self._held:
                firsts.setdefault(TopicPartition(record.topic or "", record.partition),
                                  record.offset)
            consumer = self._consumer

            def commit_positions() -> None:
                consumer._resolve_positions()
                todo: dict[tuple[str, int], int] = {
                    tp: firsts.get(tp, pos)
                    for tp, pos in consumer._subs.positions.items() if pos is not None}
                consumer.commit(todo)

            await self._serial.offload(commit_positions)
            return
        await self._serial.offload(lambda: self._consumer.commit(offsets))

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member, for a transactional producer's ``send_offsets_to_transaction``."""
        return self._consumer.group_metadata()

    # ------------------------------------------------------------------ reading

    async def poll(self, timeout_ms: int = 1000, max_records: int | None = None
                   ) -> list[Record]:
        """Records as :class:`~kproto.records.Record` (at most ``max_records``,
        default ``max_poll_records``), as soon as there are some, or none after
        ``timeout_ms``. Cancelled: nothing returned and nothing consumed."""
        limit = max_records or self.config["max_poll_records"]
        if self._held:
            return take_held(self._held, limit)
        return (await self._collect(timeout_ms, limit)).to_records()

    async def poll_batch(self, timeout_ms: int = 1000, max_records: int = _BATCH_ROWS
                         ) -> pyarrow.RecordBatch:
        """The records that arrive within ``timeout_ms`` (returning as soon as some
        have), at most ``max_records`` (65,536: the loop is held while they become
        Arrow columns), as one ``pyarrow.RecordBatch`` (Spark's Kafka columns; may
        be empty)."""
        if self._held:
            self._rewind_held()
        return (await self._collect(timeout_ms, max_records)).to_arrow(headers=True)

    async def getone(self, *partitions: tuple[str, int]) -> Record:
        """The next record (of ``partitions``, if given), waiting for it (aiokafka)."""
        wanted = {as_tp(p) for p in partitions}
        while True:
            for i, record in enumerate(self._held):
                if not wanted or TopicPartition(record.topic or "", record.partition) in wanted:
                    del self._held[i]
                    return record
            self._held.extend(await self._records(1000))

    async def getmany(self, *partitions: tuple[str, int], timeout_ms: int = 0,
                      max_records: int | None = None) -> dict[TopicPartition, list[Record]]:
        """Records by partition (aiokafka's ``getmany``): those arrived within
        ``timeout_ms``, at most ``max_records`` (of ``partitions``, if given)."""
        wanted = {as_tp(p) for p in partitions}
        if not self._held:
            self._held.extend(await self._records(timeout_ms, max_records))
        limit = max_records or math.inf
        out: dict[TopicPartition, list[Record]] = {}
        kept: deque[Record] = deque()
        n = 0
        for record in self._held:
            tp = TopicPartition(record.topic or "", record.partition)
            if n < limit and (not wanted or tp in wanted):
                out.setdefault(tp, []).append(record)
                n += 1
            else:
                kept.append(record)
        held = self._held           # the same deque: an iteration in another task holds it
        held.clear()
        held.extend(kept)
        return out

    def __aiter__(self) -> AsyncIterator[Record]:
        return self

    async def __anext__(self) -> Record:
        """The next record, waiting for it (records forever, until :meth:`close`)."""
        return await next_held(self._held, lambda: self._records(1000),
                               lambda: self._consumer._closed)

    async def read_range(self, topic: str, ranges: Mapping[int, tuple[Any, Any]] | None = None,
                         *, timeout_ms: int | None = None, headers: bool = True
                         ) -> pyarrow.Table:
        """:meth:`Consumer.read_range` (a bounded read into a ``pyarrow.Table``) in a
        worker thread: its own connections, decoded there (the codec releases the GIL)."""
        consumer = self._consumer
        return await self._serial.offload(lambda: consumer.read_range(
            topic, ranges, timeout_ms=timeout_ms, headers=headers))

    async def _records(self, timeout_ms: float, max_records: int | None = None
                       ) -> list[Record]:
        """A poll for the iteration: at most ``max_poll_records`` at a time (the
        loop is not held while a whole fetch becomes Record objects)."""
        limit = max_records or self.config["max_poll_records"]
        return (await self._collect(timeout_ms, limit)).to_records()

    async def _collect(self, timeout_ms: float, max_records: int | None) -> Collected:
        consumer = self._consumer
        consumer._check_open()
        check_poll_timeout(timeout_ms)
        # a turn of the loop first: a poll served from the fetch buffer would not
        # suspend, and a task reading a backlog would keep every other task waiting
        deadline = time.monotonic() + timeout_ms / 1000
        await asyncio.sleep(0)
        async with self._serial.lock:
            consumer._check_open()      # again: closed by another task meanwhile
            if not await self._driver.settle(deadline):     # a cancelled poll's thread
                return Collected([])
            return await self._driver.run(consumer._poll_steps(deadline, max_records))

    # ------------------------------------------------------------------ held records

    def _drop_held(self, tps: set[TopicPartition] | None = None) -> None:
        """Forget held records (of ``tps``): the consumer's position moved."""
        held = self._held           # (in place: an iteration in another task holds it)
        if held:
            kept = [r for r in held if tps is not None and
                    TopicPartition(r.topic or "", r.partition) not in tps]
            held.clear()
            held.extend(kept)

    def _rewind_held(self) -> None:
        """Held records go back to the consumer: it reads them again."""
        firsts: dict[TopicPartition, int] = {}
        for record in self._held:
            firsts.setdefault(TopicPartition(record.topic or "", record.partition),
                              record.offset)
        self._held.clear()
        for tp, offset in firsts.items():
            self._consumer.seek(tp, offset)

    # ------------------------------------------------------------------ life cycle

    def metrics(self) -> dict[Any, float]:
        """:meth:`Consumer.metrics`."""
        return self._consumer.metrics()

    async def start(self) -> None:
        """aiokafka's ``start()``: nothing to do (connections open on first use)."""

    async def stop(self) -> None:
        """aiokafka's name for :meth:`close`."""
        await self.close()

    async def close(self) -> None:
        """Leave the group (committing first with auto-commit) and close connections.
        Held records not handed out are not committed (the positions go back)."""
        if self._consumer._closed:
            return
        async with self._serial.lock:   # after a poll in flight in another task
            if self._held:
                self._rewind_held()
            await self._driver.offload(self._consumer.close)

    async def __aenter__(self) -> AIOConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AIOConsumer {self._consumer!r}>"
