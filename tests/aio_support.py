"""The sync client tests, run over the asyncio driver (kproto.aio) without copies.

:class:`LoopConsumer` is a :class:`kproto.Consumer` whose every call goes
through :class:`kproto.aio.AIOConsumer` on an event loop of its own (asyncio's,
or uvloop's where installed): a coroutine is run to its end, anything else is the
AIOConsumer's or, failing that, the inner consumer's (tests that look inside).
A test module parametrises its ``Consumer`` over the driver with::

    Consumer = driver_consumer()          # a module-level name the tests use
    pytestmark = [...]; use the ``consumer_driver`` fixture (autouse)

see tests/test_consumer_semantics.py.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kproto.aio import AIOConsumer, AIOShareConsumer

try:
    import uvloop
except ImportError:     # pragma: no cover - in the test extra
    uvloop = None

#: the event loops kproto.aio's own tests (test_aio, test_aio_attack) run on:
#: asyncio's and uvloop's (when installed)
LOOPS = ["asyncio"] + (["uvloop"] if uvloop is not None else [])

#: the drivers the parametrised client suites run over: the blocking one and
#: asyncio's loop. uvloop runs kproto.aio's own tests (LOOPS), not these again: the
#: driver code is the same on both loops, and a third pass of the group and fault
#: suites cost the suite minutes; KPROTO_TEST_ALL_LOOPS=1 adds it
DRIVERS = ["blocking", "asyncio"] + \
    (["uvloop"] if uvloop is not None and os.environ.get("KPROTO_TEST_ALL_LOOPS") else [])


def new_loop(kind: str) -> asyncio.AbstractEventLoop:
    """A new event loop of ``kind`` ("asyncio" or "uvloop")."""
    if kind == "uvloop":
        assert uvloop is not None
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class Ticker:
    """A task that sleeps ``period`` seconds (0: a turn of the loop) in a loop,
    counting its ``ticks`` and recording its ``worst`` lateness: how long the event
    loop was blocked at most. ``async with`` runs it (entered once it ticked)."""

    def __init__(self, period: float = 0.001) -> None:
        self.period = period
        self.worst = 0.0
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(self.period)
            self.worst = max(self.worst, time.perf_counter() - start - self.period)
            self.ticks += 1

    async def __aenter__(self) -> Ticker:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        while not self.ticks:           # running: its next sleep is under way
            await asyncio.sleep(0.001)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


#: consumer settings of kproto.aio's own tests (test_aio, test_aio_attack): short
#: fetch waits and timeouts; GROUP adds a group member's
FAST = {"auto_offset_reset": "earliest", "fetch_max_wait_ms": 100, "request_timeout_ms": 5000}
GROUP = {**FAST, "session_timeout_ms": 6000, "heartbeat_interval_ms": 500}


@pytest.fixture(params=LOOPS, name="run")
def run_on_loops(request: pytest.FixtureRequest) -> Callable[[Any], Any]:
    """The fixture ``run``: runs a coroutine to its end (within 120 s) on a new event
    loop of each kind in LOOPS. kproto.aio's own tests import it (test_aio,
    test_aio_attack) under this name, so that their ``run`` parameters shadow nothing."""
    def runner(coro: Any) -> Any:
        loop = new_loop(request.param)
        try:
            return loop.run_until_complete(asyncio.wait_for(coro, 120))
        finally:
            loop.close()
    return runner


class LoopConsumer:
    """A blocking-looking consumer over :class:`AIOConsumer` on its own loop
    (see the module docstring). ``cancel_rate``: the share of polls cancelled at
    a random point of their first await (the contract test's random cancels)."""

    loop_kind = "asyncio"
    aio_class: Any = AIOConsumer

    def __init__(self, config: dict | None = None, *, cancel_rate: float = 0.0,
                 seed: int = 0, **settings: Any) -> None:
        self.aio = self.aio_class(config, **settings)    # (a ConfigError: no loop made)
        self._loop = new_loop(self.loop_kind)
        self._cancel_rate = cancel_rate
        self._random = random.Random(seed)
        self.cancelled = 0          # polls cancelled
        self.cancelled_running = 0  # of them, once they had started

    def _run(self, coro: Any) -> Any:
        if self._loop.is_closed():      # closed: the call's own error, on a loop of its own
            return asyncio.run(coro)
        return self._loop.run_until_complete(coro)

    def __getattr__(self, name: str) -> Any:
        if name in ("aio", "_loop"):        # __init__ raised before setting them
            raise AttributeError(name)
        if hasattr(type(self.aio), name):
            attr = getattr(self.aio, name)
        else:
            return getattr(self.aio._consumer, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._run(attr(*args, **kwargs))
        return call

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list:
        return self._maybe_cancelled(lambda: self.aio.poll(timeout_ms, max_records), [])

    def poll_batch(self, timeout_ms: int = 1000) -> Any:
        import pyarrow as pa

        from kproto.columns import RecordColumns
        empty = RecordColumns.empty().to_arrow(headers=True)
        assert isinstance(empty, pa.RecordBatch)
        return self._maybe_cancelled(lambda: self.aio.poll_batch(timeout_ms), empty)

    def _maybe_cancelled(self, make: Callable[[], Any], nothing: Any) -> Any:
        """The call, or - at the cancel rate - the call cancelled after a random
        number of loop turns (0: at its first await): then ``nothing``."""
        if not self._cancel_rate or self._random.random() >= self._cancel_rate:
            return self._run(make())
        turns = self._random.randrange(0, 6)

        async def cancelled() -> Any:
            task = asyncio.ensure_future(make())
            for _ in range(turns):
                await asyncio.sleep(0)
            if task.done():
                return task.result()
            task.cancel()
            try:
                return await task
            except asyncio.CancelledError:
                self.cancelled += 1
                self.cancelled_running += turns > 0
                return nothing
        return self._run(cancelled())

    def committed(self, partitions: Any) -> Any:
        return self._run(self.aio.committed(list(partitions)))

    def __iter__(self) -> Iterator[Any]:
        while not self.aio._consumer._closed:
            try:
                yield self._run(self.aio.__anext__())
            except StopAsyncIteration:
                return

    def close(self, *args: Any) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self.aio.close(*args))
        finally:
            self._loop.close()

    def __del__(self) -> None:
        loop = getattr(self, "_loop", None)     # a test that never closed it: the loop
        if loop is not None and not loop.is_closed():   # (its self-pipe) at least
            loop.close()

    def __enter__(self) -> LoopConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class UvloopConsumer(LoopConsumer):
    loop_kind = "uvloop"


class LoopShareConsumer(LoopConsumer):
    """A blocking-looking share consumer over :class:`AIOShareConsumer`."""

    aio_class = AIOShareConsumer

    def poll(self, timeout_ms: int = 1000) -> list:     # type: ignore[override]
        return self._maybe_cancelled(lambda: self.aio.poll(timeout_ms), [])

    def poll_batch(self, timeout_ms: int = 1000) -> Any:
        return self._run(self.aio.poll_batch(timeout_ms))

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError


class UvloopShareConsumer(LoopShareConsumer):
    loop_kind = "uvloop"


def consumer_class(driver: str, name: str = "Consumer") -> type:
    """The class a test uses for ``name`` (Consumer, ShareConsumer) over ``driver``
    (one of :data:`DRIVERS`)."""
    import kproto
    if driver == "blocking":
        return getattr(kproto, name)
    share = name == "ShareConsumer"
    if driver == "uvloop":
        return UvloopShareConsumer if share else UvloopConsumer
    return LoopShareConsumer if share else LoopConsumer


def driver_fixture(module_globals: dict[str, Any], name: str = "Consumer") -> Any:
    """An autouse fixture parametrising a test module over :data:`DRIVERS`: its
    global ``name`` (``Consumer`` or ``ShareConsumer``) is the driver's class during
    each test."""

    @pytest.fixture(params=DRIVERS, autouse=True)
    def consumer_driver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
        code = getattr(request.function, "__code__", None)
        if request.param != "blocking" and code is not None \
                and not _uses(code, name, module_globals, set()):
            pytest.skip(f"no {name} in this test: once is enough")
        monkeypatch.setitem(module_globals, name, consumer_class(request.param, name))
        return str(request.param)
    return consumer_driver


def _uses(code: Any, name: str, module_globals: dict[str, Any], seen: set[str]) -> bool:
    """Whether a test's code uses ``name``, itself or through the module's own
    functions and classes it calls (nested code included)."""
    names = set(code.co_names)
    nested = [c for c in code.co_consts if inspect.iscode(c)]
    if name in names or any(_uses(c, name, module_globals, seen) for c in nested):
        return True
    for n in names - seen:
        seen.add(n)
        obj = module_globals.get(n)
        if getattr(obj, "__module__", None) != module_globals.get("__name__"):
            continue
        members = vars(obj).values() if inspect.isclass(obj) else [obj]
        for member in members:
            sub = getattr(member, "__code__", None)
            if sub is not None and _uses(sub, name, module_globals, seen):
                return True
    return False
