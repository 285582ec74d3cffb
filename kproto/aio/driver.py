"""The asyncio driver: the clients' steps (kproto/net/driver.py) run on an event loop.

The same client logic the blocking driver runs - the consumer's poll, the
share consumer's, their commits' steps - is driven here by awaiting each
:class:`~kproto.net.driver.Wait` on the running loop (``loop.add_reader`` on
the connections' sockets and a timer at its deadline) instead of blocking a
thread in a selector. A step's :class:`~kproto.net.driver.Offload` (a blocking
exchange: metadata, positions, a group's join or commit, opening a connection)
runs in a worker thread, so the loop never waits on a socket.

Cancellation: a task cancelled while its steps wait is cancelled there (the
connections are let go of, the steps closed where they yielded: a client's
steps hand nothing out before their last segment, see ``Consumer._poll_steps``).
A task cancelled during an Offload cannot stop the thread: the next :meth:`run`
of this driver waits for it first, so two exchanges of one client never overlap
(a poll waits for it only until its own deadline: :meth:`settle`).

Works with any asyncio event loop that implements ``add_reader`` (the default
selector loop on Linux and macOS, uvloop); not the Windows proactor loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..net.blocking import BrokerConnection
from ..net.driver import Offload, Steps

__all__ = ["AsyncioDriver"]

T = TypeVar("T")


class AsyncioDriver:
    """Runs steps on the running event loop; one per client, one run at a time
    (the async clients hold a lock around each).

    >>> driver = AsyncioDriver()                                   # doctest: +SKIP
    >>> batch = await driver.run(consumer._poll_steps(deadline, None))  # doctest: +SKIP
    """

    def __init__(self) -> None:
        #: the thread of an Offload whose caller was cancelled: waited for first
        self._busy: tuple[asyncio.Future[Any], threading.Event] | None = None
        #: the thread running an Offload now (its own calls must not wait for it)
        self._worker: int | None = None
        #: the caller of the Offload in ``_busy`` was cancelled: nobody awaits it
        self._orphaned = False

    async def wait(self, conns: Sequence[BrokerConnection], deadline: float
                   ) -> list[BrokerConnection]:
        """The connections of ``conns`` with bytes to read (or answers already read),
        as soon as there is one, or none at ``deadline`` (a ``time.monotonic()``
        value); the loop runs other tasks meanwhile."""
        kept = [conn for conn in conns if conn.buffered]
        if kept:
            return kept
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(max(0.0, deadline - time.monotonic()), _wake, woken)
        ready: list[BrokerConnection] = []

        def readable(conn: BrokerConnection) -> None:
            if conn not in ready:
                ready.append(conn)
            _wake(woken)

        fds = []
        try:
            for conn in conns:
                fd = conn.fileno()
                loop.add_reader(fd, readable, conn)
                fds.append(fd)
            await woken
        finally:
            timer.cancel()
            for fd in fds:
                loop.remove_reader(fd)
        return ready

    async def run(self, steps: Steps[T]) -> T:
        """Drive ``steps`` to its end on the running loop (its Offloads in a thread)."""
        try:
            await self.settle()
            wait = next(steps)
            while True:
                if isinstance(wait, Offload):
                    await self.offload(wait.call)
                    wait = steps.send([])
                else:
                    wait = steps.send(await self.wait(wait.conns, wait.deadline))
        except StopIteration as done:
            result: T = done.value
            return result
        finally:
            steps.close()

    async def offload(self, call: Callable[[], Any]) -> Any:
        """``call()`` in a worker thread (a blocking exchange), its result or error;
        cancelling the caller leaves the thread to finish, waited for by the next
        :meth:`run` or :meth:`settle`."""
        await self.settle()
        finished = threading.Event()

        def work() -> Any:
            self._worker = threading.get_ident()
            try:
                return call()
            finally:
                self._worker = None
                finished.set()

        future = asyncio.get_running_loop().run_in_executor(None, work)
        self._busy = (future, finished)
        try:
            result = await asyncio.shield(future)
        except asyncio.CancelledError:
            self._orphaned = True   # the thread goes on: settle() waits for it
            raise
        self._busy = None
        return result

    async def settle(self, deadline: float | None = None) -> bool:
        """Wait for the thread of an Offload whose caller was cancelled (its error,
        if any, was its caller's to see: dropped here) - on this loop or, when that
        caller's loop has gone, by the thread itself (never two threads at once).
        False if it still runs at ``deadline`` (a ``time.monotonic()`` value: a
        poll's own), left to finish in the background; True once it has."""
        if self._busy is None:
            return True
        busy, finished = self._busy
        loop = asyncio.get_running_loop()
        if not finished.is_set():
            if busy.get_loop() is not loop:     # another loop's: may never finish
                busy = loop.run_in_executor(None, finished.wait)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            await asyncio.wait([busy], timeout=left)    # (a cancel leaves it be)
            if not finished.is_set():
                return False
            if busy.done() and not busy.cancelled():
                busy.exception()            # the cancelled caller's error: dropped
        self._busy, self._orphaned = None, False
        return True

    def join(self) -> None:
        """Block until the thread of a cancelled call's Offload has finished (for
        the clients' plain, synchronous calls - seek, assign...: that thread would
        otherwise overwrite what they set). Not from that thread itself (a rebalance
        listener's seek), nor while the call that runs it is still awaited (its
        listener may be waiting on the loop for a coroutine that seeks)."""
        if self._busy is not None and self._orphaned \
                and self._worker != threading.get_ident():
            self._busy[1].wait()

    def close(self) -> None:
        """Nothing held between runs (the readers are removed after each wait)."""


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
