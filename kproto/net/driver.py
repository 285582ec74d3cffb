"""Where a client waits for the network: the I/O driver.

kproto's connections are sans-I/O state machines (:mod:`kproto.net.connection`)
behind a socket (:mod:`kproto.net.blocking`). Where a client waits for answers
on several connections at once - the consumer for its Fetches, the producer's
sender for its Produce answers, a bounded read for its lanes, the cluster for
requests sent to many brokers - it does not wait on the sockets itself: it asks
its driver which of those connections have bytes to read before a deadline,
and reads them with :meth:`~kproto.net.blocking.BrokerConnection.receive`,
which then does not wait.

Client logic that waits more than once in one call is written as *steps*: a
generator that yields a :class:`Wait` each time it needs the network and is sent
back the connections that became readable (the consumer's poll is one)::

    def answers(conn: BrokerConnection, deadline: float) -> Steps[list[Response]]:
        conn.send(ApiKey.METADATA, {"topics": None})
        got: list[Response] = []
        while not got and time.monotonic() < deadline:
            if (yield Wait([conn], deadline)):
                got = conn.receive(deadline)
        return got

    SelectorDriver().run(answers(conn, time.monotonic() + 5))

A step that must make a blocking exchange (a metadata refresh, resolving
positions, a group's commit, opening a connection) yields an :class:`Offload`
of it instead of making it in place: the blocking driver calls it there and
then, the asyncio driver (:mod:`kproto.aio`) in a worker thread, so that its
event loop never waits on a socket.

:class:`SelectorDriver` is the blocking driver (a selector kept across waits).
A driver for another I/O model - the asyncio API - implements the same two
calls, ``wait`` and ``run``, around the same steps: its ``run`` awaits the
readiness of each :class:`Wait` on the event loop instead of blocking a thread
(docs/design.md, "The I/O driver").
"""

from __future__ import annotations

import selectors
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, TypeVar

from ..errors import KafkaConnectionError
from .blocking import BrokerConnection

__all__ = ["Wait", "Offload", "Steps", "Driver", "SelectorDriver"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Wait:
    """What a step waits for: any of ``conns`` to have bytes to read, or
    ``deadline`` (a ``time.monotonic()`` value). No connections: a pause until
    the deadline."""

    conns: Sequence[BrokerConnection]
    deadline: float


@dataclass(frozen=True, slots=True)
class Offload:
    """A blocking exchange a step needs made (``call()``, its result unused): where
    the driver's I/O model allows blocking, in place; else off its event loop.
    The step is sent back no connections once it is done; an exception it raises
    ends the steps with it."""

    call: Callable[[], object]


#: Client logic that waits: yields what it waits for (or a blocking exchange to
#: make), is sent what became ready, returns its result.
Steps = Generator[Wait | Offload, list[BrokerConnection], T]


class Driver(Protocol):
    """Waits for the network on a client's behalf (the seam between the clients'
    logic and an I/O model)."""

    def wait(self, conns: Sequence[BrokerConnection], deadline: float
             ) -> list[BrokerConnection]:
        """The connections of ``conns`` with bytes to read, or with answers already
        read (``buffered``: while they re-authenticated), as soon as there is one,
        or none at ``deadline``. Each must be open or buffered."""
        ...

    def run(self, steps: Steps[T]) -> T:
        """Drive ``steps`` to its end, waiting for each :class:`Wait` it yields."""
        ...

    def close(self) -> None:
        """Let go of what the driver holds (its selector); it may not be used after."""
        ...


class SelectorDriver:
    """The blocking driver: waits on the calling thread with one selector, kept
    across waits (a client waits on much the same connections every time) and
    brought up to date with the connections of each wait. A socket closed since
    it was registered (its connection closed or reconnected) costs a new
    selector: the kernel keeps the old registration while any process still
    holds that socket (a child forked since), out of reach of an unregister by
    its number, and its events would wake the next socket on that number. Not
    for two threads at once: each waiting thread has its own.

    >>> with SelectorDriver() as driver:                    # doctest: +SKIP
    ...     ready = driver.wait([conn_a, conn_b], time.monotonic() + 1.0)
    """

    def __init__(self) -> None:
        self._selector: selectors.BaseSelector | None = None

    def wait(self, conns: Sequence[BrokerConnection], deadline: float
             ) -> list[BrokerConnection]:
        kept = [conn for conn in conns if conn.buffered]
        if kept:
            return kept                 # answers read while re-authenticating: no wait
        timeout = max(0.0, deadline - time.monotonic())
        if not conns:
            if timeout:
                time.sleep(timeout)
            return []
        selector = self._watch(conns)
        return [key.data[0] for key, _ in selector.select(timeout)]

    def run(self, steps: Steps[T]) -> T:
        try:
            wait = next(steps)
            while True:
                if isinstance(wait, Offload):
                    wait.call()
                    wait = steps.send([])
                else:
                    wait = steps.send(self.wait(wait.conns, wait.deadline))
        except StopIteration as done:
            result: T = done.value
            return result

    def _watch(self, conns: Sequence[BrokerConnection]) -> selectors.BaseSelector:
        """The selector, registered for exactly ``conns``."""
        wanted = {conn.fileno(): conn for conn in conns}
        if self._selector is not None and not all(
                _same_socket(key) for key in self._selector.get_map().values()):
            # A socket closed since it was registered. The kernel drops it from the
            # selector only when no process holds it any more (a child forked since
            # may), and unregistering by its number cannot reach it then: its events
            # would wake the next socket on that number, or every wait with nothing.
            # A new selector holds none of them.
            self.close()
        if self._selector is None:
            self._selector = selectors.DefaultSelector()
        selector = self._selector
        registered = selector.get_map()
        for fd in [fd for fd in registered if fd not in wanted]:
            selector.unregister(fd)              # (every registered socket is still its own)
        for fd, conn in wanted.items():
            if fd not in registered:
                selector.register(fd, selectors.EVENT_READ, (conn, conn.opened))
        return selector

    def close(self) -> None:
        if self._selector is not None:
            self._selector.close()
            self._selector = None

    def __enter__(self) -> SelectorDriver:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _same_socket(key: selectors.SelectorKey) -> bool:
    """Whether the socket registered under ``key`` is still its connection's."""
    conn, opened = key.data
    if conn.opened != opened:
        return False
    try:
        return bool(conn.fileno() == key.fd)
    except KafkaConnectionError:        # closed
        return False
