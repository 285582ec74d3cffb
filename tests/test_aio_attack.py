"""kproto.aio attacked as a hostile asyncio user would: a poll racing close(),
two tasks reading one consumer, a consumer carried to another event loop,
cancellations at await points, secrets in reprs. Real brokers (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from kproto import Producer
from kproto.aio import AIOConsumer, AIOShareConsumer
from kproto.errors import IllegalStateError
from tests.aio_support import FAST, GROUP, new_loop, run_on_loops  # noqa: F401 - the run fixture
from tests.share_support import SHARE_BROKERS, share_topic

pytestmark = pytest.mark.broker

def produce(broker: Any, topic: str, n: int, partition: int = 0) -> None:
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
        for i in range(n):
            producer.send(topic, f"v{i}".encode(), partition=partition)
        producer.flush(30)


async def until(condition: Any, turns: int = 100_000) -> None:
    """Yields to the loop until ``condition()`` holds (bounded: fails otherwise)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


def test_a_poll_that_started_before_close_does_not_read_a_closed_consumer(
        broker, unique_topic, run) -> None:
    broker.create_topic(unique_topic, 1)
    produce(broker, unique_topic, 5)

    async def main() -> Any:
        consumer = AIOConsumer(bootstrap_servers=broker.bootstrap, **FAST)
        consumer.assign([(unique_topic, 0)])
        polling = asyncio.ensure_future(consumer.poll(5000))
        await asyncio.sleep(0)              # the poll has begun: its turn of the loop
        await consumer.close()
        try:
            return await polling
        except IllegalStateError as exc:
            return exc

    got = run(main())
    assert isinstance(got, IllegalStateError), got


def test_two_tasks_reading_one_consumer_lose_no_record(broker, unique_topic, run) -> None:
    broker.create_topic(unique_topic, 1)
    produce(broker, unique_topic, 40)

    async def main() -> list[int]:
        async with AIOConsumer(bootstrap_servers=broker.bootstrap, max_poll_records=10,
                               **FAST) as consumer:
            consumer.assign([(unique_topic, 0)])
            seen: list[int] = []

            async def iterate() -> None:
                async for record in consumer:
                    seen.append(record.offset)
                    if len(seen) >= 40:
                        return

            async def many() -> None:
                for _ in range(2):
                    got = await consumer.getmany(timeout_ms=5000, max_records=10)
                    seen.extend(r.offset for rs in got.values() for r in rs)

            iterating = asyncio.ensure_future(iterate())
            await many()
            try:
                await asyncio.wait_for(iterating, 15)
            except asyncio.TimeoutError:
                pass
            return seen

    seen = run(main())
    assert sorted(seen) == list(range(40)), sorted(seen)


@pytest.mark.brokers(needs=("groups",))
def test_close_while_a_poll_is_in_flight_commits_only_what_was_handed_out(
        broker, unique_topic, run) -> None:
    broker.create_topic(unique_topic, 1)
    produce(broker, unique_topic, 10)
    group = f"g-{unique_topic}"

    async def main() -> tuple[list[int], Any, list[int]]:
        consumer = AIOConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                               enable_auto_commit=True, **GROUP)
        consumer.subscribe([unique_topic])
        handed: list[int] = []
        while len(handed) < 10:                  # joined, everything read
            handed.extend(r.offset for r in await consumer.poll(1000))
        got_one = asyncio.Event()

        async def iterate() -> None:
            async for record in consumer:
                handed.append(record.offset)
                got_one.set()
                await asyncio.sleep(3600)       # busy with it: cancelled below

        iterating = asyncio.ensure_future(iterate())
        await until(consumer._serial.lock.locked)   # its poll waits for records
        produce(broker, unique_topic, 10)
        await consumer.close()                  # waits for that poll
        at_close = list(handed)
        iterating.cancel()
        after: list[int] = []
        async for record in consumer:            # closed: nothing more
            after.append(record.offset)
        async with AIOConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                               **FAST) as check:
            committed = await check.committed((unique_topic, 0))
        return at_close, committed, after

    at_close, committed, after = run(main())
    assert after == []
    assert committed == len(at_close), (at_close, committed)


def test_a_consumer_outlives_the_event_loop_of_a_cancelled_poll(
        broker, unique_topic, request: pytest.FixtureRequest) -> None:
    """asyncio.run() twice (a service's main, then its shutdown): the first loop
    ended while a poll's blocking exchange ran in a thread; the second loop's
    calls wait for that thread, not for a future of the closed loop."""
    broker.create_topic(unique_topic, 1)
    produce(broker, unique_topic, 5)
    consumer = AIOConsumer(bootstrap_servers=broker.bootstrap, **FAST)
    consumer.assign([(unique_topic, 0)])

    async def first() -> None:
        polling = asyncio.ensure_future(consumer.poll(5000))
        await until(lambda: consumer._driver._busy is not None)   # in its Offload
        polling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await polling

    async def second() -> list[int]:
        async def one() -> list[int]:
            return [r.offset for r in await consumer.poll(5000)]
        got = await asyncio.gather(one(), one())      # two tasks: the lock contended
        await consumer.close()
        return sorted(got[0] + got[1])

    for step in (first, second):
        loop = new_loop("asyncio")
        try:
            got = loop.run_until_complete(asyncio.wait_for(step(), 60))
        finally:
            loop.close()                # (its executor's thread goes on)
    assert got == [0, 1, 2, 3, 4]


def test_a_consumer_used_on_a_second_loop_after_contention_on_the_first(
        broker, unique_topic) -> None:
    broker.create_topic(unique_topic, 1)
    produce(broker, unique_topic, 5)
    consumer = AIOConsumer(bootstrap_servers=broker.bootstrap, **FAST)
    consumer.assign([(unique_topic, 0)])

    async def twice() -> list[int]:
        got = await asyncio.gather(consumer.poll(200), consumer.poll(200))
        return [r.offset for rs in got for r in rs]

    async def close() -> None:
        await consumer.close()

    seen: list[int] = []
    for step in (twice, twice, close):
        loop = new_loop("asyncio")
        try:
            seen.extend(loop.run_until_complete(asyncio.wait_for(step(), 60)) or [])
        finally:
            loop.close()
    assert sorted(seen) == [0, 1, 2, 3, 4]


def test_a_seek_after_a_cancelled_poll_is_where_the_next_poll_starts(
        broker, unique_topic, run) -> None:
    """The cancelled poll's thread (resolving the reset position) goes on after
    the cancel: a seek made then must not be overwritten by it."""
    broker.create_topic(unique_topic, 1)
    produce(broker, unique_topic, 10)

    async def main() -> int:
        async with AIOConsumer(bootstrap_servers=broker.bootstrap, **FAST) as consumer:
            consumer.assign([(unique_topic, 0)])
            polling = asyncio.ensure_future(consumer.poll(5000))
            await until(lambda: consumer._driver._busy is not None)   # in its Offload
            polling.cancel()
            with pytest.raises(asyncio.CancelledError):
                await polling
            consumer.seek((unique_topic, 0), 7)
            records = await consumer.poll(5000)
            return records[0].offset

    assert run(main()) == 7


def test_a_poll_after_a_cancelled_one_keeps_its_own_timeout(broker, unique_topic, run) -> None:
    """The cancelled poll's blocking exchange (a stalled broker) goes on in its
    thread with that poll's deadline; the next poll waits for it only until its
    own, returns nothing then, and later reads from where nothing was consumed."""
    broker.create_topic(unique_topic, 1)
    produce(broker, unique_topic, 5)

    async def main(proxies: list[Any]) -> tuple[list[int], float, list[int]]:
        async with AIOConsumer(bootstrap_servers=",".join(p.address for p in proxies),
                               **FAST) as consumer:
            consumer.assign([(unique_topic, 0)])
            for proxy in proxies:
                proxy.stall = True
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(consumer.poll(60000), 1)
            loop = asyncio.get_running_loop()
            start = loop.time()
            quick = [r.offset for r in await consumer.poll(100)]
            took = loop.time() - start
            for proxy in proxies:
                proxy.stall = False
            later: list[int] = []
            while len(later) < 5:
                got = await consumer.poll(10000)
                assert got, later
                later.extend(r.offset for r in got)
            return quick, took, later

    with broker.proxied() as proxied:
        quick, took, later = run(main(proxied.proxies))
    assert quick == []
    assert took < 2.5, took
    assert later == [0, 1, 2, 3, 4]


@pytest.mark.brokers(needs=("groups",))
def test_a_rebalance_listener_that_waits_on_the_loop_for_a_seek(
        broker, unique_topic, run) -> None:
    """on_partitions_assigned runs in the poll's worker thread and waits for a
    coroutine on the loop that seeks: the seek must not wait for that thread."""
    broker.create_topic(unique_topic, 1)
    produce(broker, unique_topic, 10)

    async def main() -> tuple[list[int], list[Any]]:
        loop = asyncio.get_running_loop()
        outcome: list[Any] = []
        async with AIOConsumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{unique_topic}",
                               **GROUP) as consumer:
            async def seek_to_3() -> None:
                consumer.seek((unique_topic, 0), 3)

            class Listener:
                def on_partitions_revoked(self, revoked: Any) -> None:
                    pass

                def on_partitions_assigned(self, assigned: Any) -> None:
                    if not assigned:
                        return
                    on_loop = threading.get_ident() == loop_thread
                    outcome.append("on the loop" if on_loop else "in a thread")
                    if on_loop:             # (the step was not offloaded)
                        consumer.seek((unique_topic, 0), 3)
                        return
                    try:
                        asyncio.run_coroutine_threadsafe(seek_to_3(), loop).result(10)
                        outcome.append("sought")
                    except Exception as exc:    # a deadlock, broken by the timeout
                        outcome.append(exc)

            loop_thread = threading.get_ident()
            consumer.subscribe([unique_topic], listener=Listener())
            got: list[int] = []
            for _ in range(60):
                got.extend(r.offset for r in await consumer.poll(1000))
                if got:
                    break
            return got, outcome

    got, outcome = run(main())
    assert outcome == ["in a thread", "sought"], outcome
    assert got and got[0] == 3, got


@SHARE_BROKERS
def test_two_tasks_iterating_one_share_consumer_lose_no_record(broker, run) -> None:
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
        topic, group = share_topic(broker, producer, 40)

        async def main() -> list[int]:
            async with AIOShareConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                                        fetch_max_wait_ms=100, max_poll_records=10) as c:
                c.subscribe([topic])
                seen: list[int] = []
                done = asyncio.Event()

                async def iterate() -> None:
                    async for record in c:
                        seen.append(record.offset)
                        if len(seen) >= 40:
                            done.set()
                        await asyncio.sleep(0.05)   # busy: the other task polls

                tasks = [asyncio.ensure_future(iterate()) for _ in range(2)]
                try:
                    await asyncio.wait_for(done.wait(), 20)
                except asyncio.TimeoutError:
                    pass
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                return seen

        seen = run(main())
    assert sorted(seen) == list(range(40)), sorted(seen)
