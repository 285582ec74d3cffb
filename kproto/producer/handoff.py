"""``await`` on a producer's futures: deliveries handed from the sender thread to
event loops.

The sender thread finishes a record's future; a task awaiting it waits on a
loop future. One ``call_soon_threadsafe`` wakes every waiter of a loop
finished since the last wake-up: a batch of a thousand records costs the loop
one wake-up, not a thousand (kproto.aio's producer relies on it).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["LoopHandoff", "for_running_loop"]


class LoopHandoff:
    """One event loop's side: loop futures for the producer futures awaited on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._done: deque[asyncio.Future[None]] = deque()
        self._scheduled = False
        self.wakeups = 0

    def waiter(self, future: Any) -> asyncio.Future[None]:
        """A loop future done once ``future`` (a producer future) is."""
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
        self.wakeups += 1
        done = self._done
        while done:
            waiter = done.popleft()
            if not waiter.done():
                waiter.set_result(None)


_HANDOFFS: dict[Any, LoopHandoff] = {}
_LOCK = threading.Lock()


def for_running_loop() -> LoopHandoff:
    """The hand-off of the running event loop (made on first use)."""
    import asyncio

    loop = asyncio.get_running_loop()
    handoff = _HANDOFFS.get(loop)
    if handoff is None:
        with _LOCK:
            for old in [lp for lp in _HANDOFFS if lp.is_closed()]:
                del _HANDOFFS[old]
            handoff = _HANDOFFS.setdefault(loop, LoopHandoff(loop))
    return handoff
