"""One call at a time per async client: a lock around its driver's runs and offloads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .driver import AsyncioDriver

__all__ = ["Serial"]


class Serial:
    """The lock a client's calls take (its sync core is not thread-safe) and the
    driver that runs their blocking exchanges in a worker thread."""

    def __init__(self, driver: AsyncioDriver) -> None:
        self.lock = asyncio.Lock()
        self.driver = driver

    async def offload(self, call: Callable[[], Any]) -> Any:
        """``call()`` in a worker thread, after the calls before it (a cancelled one's
        thread included: see :meth:`AsyncioDriver.settle`)."""
        async with self.lock:
            return await self.driver.offload(call)
