"""AIOShareConsumer: :class:`~kproto.consumer.share.ShareConsumer` (KIP-932) for asyncio.

A poll is the share consumer's own: its duties before the steps (the
acknowledgement checks and callback, the membership's poll, the acknowledgements
taken, the assignment applied, the ShareFetches sent - metadata and connections
are blocking exchanges) run in a worker thread; then its poll steps
(``ShareConsumer._poll_steps``) run under the asyncio driver, their waits for
ShareFetch answers awaited on the loop. A poll cancelled while it waits hands
nothing out: the records acquired meanwhile stay in the share consumer's buffer
and the next poll returns them (they are not released, nor delivered twice).
Records the iteration (``async for``) holds but has not handed out yet count as
not returned: the next poll hands them out first (a poll in another task would
otherwise accept them implicitly). The plain calls (subscribe, acknowledge)
first wait for the thread of a cancelled poll's blocking exchange, and a poll
after a cancelled one waits for it only until its own deadline, as
:class:`~kproto.aio.AIOConsumer`'s.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..config import check_poll_timeout
from ..consumer.share import ShareConsumer
from ..consumer.share_buffer import ShareCollected
from ..errors import IllegalStateError
from .driver import AsyncioDriver
from .held import next_held, take_held
from .locks import Serial

if TYPE_CHECKING:
    import pyarrow

__all__ = ["AIOShareConsumer"]


class AIOShareConsumer:
    """A share group consumer for asyncio, with :class:`ShareConsumer`'s settings
    (``group_id``, ``share_acknowledgement_mode``...).

    >>> async with AIOShareConsumer(bootstrap_servers="127.0.0.1:9092",  # doctest: +SKIP
    ...                             group_id="workers") as consumer:
    ...     consumer.subscribe(["jobs"])
    ...     async for record in consumer:
    ...         print(record.offset, record.delivery_count)
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self._consumer = ShareConsumer(config, **settings)
        self.config = self._consumer.config
        self._driver = AsyncioDriver()
        self._serial = Serial(self._driver)
        #: records a poll returned to the iteration, not handed out yet
        self._held: deque[Any] = deque()

    def subscribe(self, topics: Iterable[str] | str) -> None:
        """Join share group ``group_id`` reading ``topics``."""
        self._driver.join()         # a cancelled poll's exchange still in its thread
        self._consumer.subscribe(topics)

    async def unsubscribe(self) -> None:
        """Send what was acknowledged, release the rest and leave the group."""
        await self._serial.offload(self._consumer.unsubscribe)

    def subscription(self) -> set[str]:
        return self._consumer.subscription()

    def assignment(self) -> set[Any]:
        return self._consumer.assignment()

    async def poll(self, timeout_ms: int = 1000) -> list[Any]:
        """Records acquired within ``timeout_ms`` (:meth:`ShareConsumer.poll`);
        those the iteration holds first."""
        if self._held:
            return take_held(self._held, self.config["max_poll_records"])
        got = await self._collect(timeout_ms, self.config["max_poll_records"])
        return got.to_records()

    async def poll_batch(self, timeout_ms: int = 1000) -> pyarrow.RecordBatch:
        """Records acquired within ``timeout_ms`` as one ``pyarrow.RecordBatch``
        (:meth:`ShareConsumer.poll_batch`)."""
        got = await self._collect(timeout_ms, None)
        return got.to_arrow()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        """The next record acquired, waiting for it (until :meth:`close`)."""
        return await next_held(self._held, self._records, lambda: self._consumer._closed)

    async def _records(self) -> list[Any]:
        got = await self._collect(1000, self.config["max_poll_records"])
        return got.to_records()

    def acknowledge(self, record: Any, type: Any = None) -> None:
        """Acknowledge one record (explicit mode); sent with the next poll or commit."""
        self._driver.join()
        if type is None:
            self._consumer.acknowledge(record)
        else:
            self._consumer.acknowledge(record, type)

    def acknowledge_batch(self, batch: Any, type: Any = None, **options: Any) -> None:
        """:meth:`ShareConsumer.acknowledge_batch`."""
        self._driver.join()
        self._consumer.acknowledge_batch(batch, type, **options)

    async def commit_sync(self, timeout_ms: int | None = None) -> dict[Any, Any]:
        """Send the acknowledgements and await the answers (the steps on the loop)."""
        c = self._consumer
        c._check_open()
        async with self._serial.lock:
            c._implicit_accept()
            c._take_acks()
            start = len(c._sessions.results)
            wait = c._cluster.request_timeout if timeout_ms is None else timeout_ms / 1000
            await self._driver.run(c._sessions.acknowledge(time.monotonic() + wait))
            return c._acknowledged(start)

    async def commit_async(self) -> None:
        """Send the acknowledgements now without waiting for the answers."""
        await self._serial.offload(self._consumer.commit_async)

    def set_acknowledgement_commit_callback(self, callback: Any) -> None:
        self._consumer.set_acknowledgement_commit_callback(callback)

    def metrics(self) -> dict[Any, float]:
        return self._consumer.metrics()

    async def close(self, timeout_ms: int = 30000) -> None:
        """:meth:`ShareConsumer.close` in a worker thread."""
        await self._serial.offload(lambda: self._consumer.close(timeout_ms))

    async def __aenter__(self) -> AIOShareConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _collect(self, timeout_ms: float, max_records: int | None) -> ShareCollected:
        c = self._consumer
        c._check_open()
        check_poll_timeout(timeout_ms)
        if c._member is None:
            raise IllegalStateError("the share consumer is not subscribed to any topics")
        deadline = time.monotonic() + timeout_ms / 1000
        member = c._member

        def duties() -> None:       # ShareConsumer._collect's, then the sends
            c._check_acknowledged()
            c._report()
            c._implicit_accept()
            member.poll()
            c._take_acks()
            c._apply_assignment()
            if not len(c._buffer):
                c._send(deadline)

        await asyncio.sleep(0)          # a turn of the loop, however much is buffered
        async with self._serial.lock:
            if not await self._driver.settle(deadline):     # a cancelled poll's thread
                return ShareCollected([])
            await self._driver.offload(duties)
            return await self._driver.run(c._poll_steps(deadline, max_records))
