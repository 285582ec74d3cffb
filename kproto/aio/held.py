"""Records an async client's poll returned to its iteration, not handed out yet.

One deque per client, changed in place only: ``async for`` in one task and a
poll, ``getmany`` or a seek in another share it, and a task that replaced it
would drop (or hand out twice) what the other had taken in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..errors import IllegalStateError

__all__ = ["next_held", "take_held"]

T = TypeVar("T")


async def next_held(held: deque[T], more: Callable[[], Awaitable[list[T]]],
                    closed: Callable[[], bool]) -> T:
    """The first of ``held``, polled for with ``more()`` while there is none (what
    another task's poll added meanwhile counts too); ``StopAsyncIteration`` once
    the client is ``closed()`` (by another task while this one waited, too)."""
    while not held:
        if closed():
            raise StopAsyncIteration
        try:
            held.extend(await more())
        except IllegalStateError:
            if closed():
                raise StopAsyncIteration from None
            raise
    return held.popleft()


def take_held(held: deque[T], limit: int) -> list[T]:
    """Up to ``limit`` held records, handed out (first come, first out)."""
    return [held.popleft() for _ in range(min(limit, len(held)))]
