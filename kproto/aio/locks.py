"""One call at a time per async client: a lock around its driver's runs and offloads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..errors import IllegalStateError
from .driver import AsyncioDriver

__all__ = ["Serial"]


class Serial:
    """The lock a client's calls take (its sync core is not thread-safe) and the
    driver that runs their blocking exchanges in a worker thread."""

    def __init__(self, driver: AsyncioDriver) -> None:
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.driver = driver

    @property
    def lock(self) -> asyncio.Lock:
        """The running loop's lock: a client outlives its loop (``asyncio.run`` for
        the service, again for its shutdown); two loops at once are refused."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._lock.locked():
                raise IllegalStateError(
                    "this client is in use on another event loop: use it on one at a time")
            self._lock, self._loop = asyncio.Lock(), loop
        return self._lock

    async def offload(self, call: Callable[[], Any]) -> Any:
        """``call()`` in a worker thread, after the calls before it (a cancelled one's
        thread included: see :meth:`AsyncioDriver.settle`)."""
        async with self.lock:
            return await self.driver.offload(call)
