"""kproto.aio on the broker matrix: the asyncio clients' own promises.

What the sync clients promise is tested over the asyncio driver by the
parametrised suites (tests/aio_support.py: test_consumer_semantics.py,
test_consumer_contract.py's cancelled polls, test_groups.py...). Here: the async
API itself (send returns once queued, deliveries awaited, send_batch, poll,
poll_batch, getone/getmany, ``async for``, read_range, groups and commits,
transactions), event-loop citizenship (the loop runs while a poll's blocking
exchange waits on a stalled broker; ``asyncio.timeout``; cancelled sends and
polls), ``async with`` flushing, on asyncio's loop and uvloop's.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pyarrow as pa
import pytest

from kproto import Consumer, Producer, TopicPartition
from kproto.aio import AIOAdmin, AIOConsumer, AIOProducer
from kproto.errors import IllegalStateError, KprotoError
from kproto.producer.handoff import for_running_loop
from tests.aio_support import FAST, GROUP, Ticker, run_on_loops  # noqa: F401 - the run fixture
from tests.test_reauth import ca_file, fresh, gateway, oidc  # noqa: F401 - the SASL gateway

pytestmark = pytest.mark.broker

def test_send_then_await_the_delivery_and_read_it_back(broker, unique_topic, run) -> None:
    broker.create_topic(unique_topic, 2)

    async def main() -> tuple[list, list, Any]:
        async with AIOProducer(bootstrap_servers=broker.bootstrap, linger_ms=5) as producer:
            deliveries = [await producer.send(unique_topic, b"v%d" % i, key=b"k%d" % i,
                                              partition=i % 2, headers=[("h", b"%d" % i)])
                          for i in range(100)]
            metas = [await d for d in deliveries]
            one = await producer.send_and_wait(unique_topic, "text", partition=0,
                                               timestamp_ms=1_700_000_000_000)
            batch = await producer.send_batch(unique_topic, pa.table(
                {"value": [b"b%d" % i for i in range(50)]}), partition=1)
            written = await producer.wait_batch(batch, 30)
        return metas, written, one

    metas, written, one = run(main())
    assert [(m.partition, m.offset) for m in metas] == [(i % 2, i // 2) for i in range(100)]
    assert (one.partition, one.offset) == (0, 50)
    assert sum(b.record_count for b in written) == 50 and written[0].base_offset == 50
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        table = c.read_range(unique_topic)
    assert table.num_rows == 151
    rows = {(r["partition"], r["offset"]): r for r in table.to_pylist()}
    assert rows[(0, 0)]["value"] == b"v0" and rows[(0, 0)]["key"] == b"k0"
    assert rows[(1, 0)]["headers"] == [{"key": "h", "value": b"1"}]
    assert rows[(0, 50)]["value"] == b"text"
    assert rows[(1, 99)]["value"] == b"b49"


def _fill(broker, topic: str, n: int, partitions: int = 1) -> None:
    broker.create_topic(topic, partitions)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
        for p in range(partitions):
            producer.send_batch(topic, pa.table({"value": [b"%d-%d" % (p, i) for i in range(n)]}),
                                partition=p).result(30)


def test_every_way_of_reading(broker, unique_topic, run) -> None:
    """poll, getone, getmany, async for, poll_batch, read_range: each continues
    where the one before ended, every record once."""
    _fill(broker, unique_topic, 200, 2)
    tps = [TopicPartition(unique_topic, p) for p in (0, 1)]

    async def main() -> list[tuple[int, int]]:
        got: list[tuple[int, int]] = []
        async with AIOConsumer(bootstrap_servers=broker.bootstrap, **FAST) as c:
            c.assign(tps)
            while len(got) < 50:
                got += [(r.partition, r.offset) for r in await c.poll(500, max_records=10)]
            for _ in range(30):
                r = await c.getone()
                got.append((r.partition, r.offset))
            r = await c.getone(tps[1])
            assert r.partition == 1
            got.append((r.partition, r.offset))
            many = await c.getmany(timeout_ms=500, max_records=40)
            got += [(r.partition, r.offset) for rs in many.values() for r in rs]
            async for r in c:
                got.append((r.partition, r.offset))
                if len(got) >= 250:
                    break
            for tp in tps:      # the position starts at the first record not handed out
                assert await c.position(tp) == 1 + max(o for p, o in got if p == tp.partition)
            while len(got) < 400:
                batch = await c.poll_batch(500)
                got += list(zip(batch.column("partition").to_pylist(),
                                batch.column("offset").to_pylist(), strict=True))
            table = await c.read_range(unique_topic, {0: (10, 20)})
            assert table.column("offset").to_pylist() == list(range(10, 20))
            assert await c.end_offsets(tps) == {tp: 200 for tp in tps}
        return got

    got = run(main())
    assert sorted(got) == [(p, o) for p in (0, 1) for o in range(200)]


@pytest.mark.brokers(needs=("groups",))
def test_a_group_member_commits_what_it_handed_out(broker, unique_topic, run) -> None:
    _fill(broker, unique_topic, 100, 2)
    group = f"g-{unique_topic}"
    tps = [TopicPartition(unique_topic, p) for p in (0, 1)]

    async def first() -> int:
        async with AIOConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                               enable_auto_commit=False, **GROUP) as c:
            c.subscribe([unique_topic])
            seen = 0
            async for _ in c:
                seen += 1
                if seen == 120:
                    break
            await c.commit()            # where the records handed out end
            committed = await c.committed(tps)
            assert sum(committed.values()) == 120
            assert await c.committed(tps[0]) == committed[tps[0]]
            return seen

    async def second() -> int:
        async with AIOConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                               **GROUP) as c:
            c.subscribe([unique_topic])
            n = 0
            while n < 80:
                n += len(await c.poll(500))
            assert await c.poll(300) == []
            return n

    assert run(first()) == 120
    assert run(second()) == 80


@pytest.mark.brokers(needs=("transactions",))
def test_transactions(broker, unique_topic, run) -> None:
    broker.create_topic(unique_topic, 1)

    async def main() -> list[bytes]:
        async with AIOProducer(bootstrap_servers=broker.bootstrap,
                               transactional_id=f"t-{unique_topic}") as producer:
            await producer.init_transactions()
            async with producer.transaction():
                await producer.send(unique_topic, b"kept", partition=0)
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    await producer.send(unique_topic, b"aborted", partition=0)
                    raise RuntimeError("abort it")
            async with producer.transaction():
                await producer.send(unique_topic, b"kept too", partition=0)
        async with AIOConsumer(bootstrap_servers=broker.bootstrap,
                               isolation_level="read_committed", **FAST) as c:
            c.assign([(unique_topic, 0)])
            values: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(values) < 2 and time.monotonic() < deadline:
                values += [r.value for r in await c.poll(300)]
            return values

    assert run(main()) == [b"kept", b"kept too"]


def test_the_loop_runs_while_a_poll_waits_on_a_stalled_broker(broker, unique_topic,
                                                             run) -> None:
    """A poll's blocking exchanges (here: ListOffsets, to resolve the position, and
    metadata) run off the loop: with the broker answering them 1.5 s late, other
    tasks keep running on time. (Made on the loop, they would block it 1.5 s.)"""
    _fill(broker, unique_topic, 10)
    LIST_OFFSETS = 2

    slowed: list[int] = []
    with broker.proxied() as proxied:
        def slow(key: int, version: int, body: dict) -> None:
            if key == LIST_OFFSETS:
                slowed.append(key)
                time.sleep(1.5)
            return None
        for proxy in proxied.proxies:
            proxy.answer_hook = slow

        async def main() -> tuple[int, float]:
            async with AIOConsumer(bootstrap_servers=proxied.bootstrap, **FAST) as c:
                c.assign([(unique_topic, 0)])
                async with Ticker() as ticker:
                    got: list = []
                    deadline = time.monotonic() + 30
                    while len(got) < 10 and time.monotonic() < deadline:
                        got += await c.poll(500)
                return len(got), ticker.worst

        n, worst = run(main())
    assert n == 10 and slowed
    assert worst < 0.5, f"the event loop was blocked {worst * 1000:.0f} ms"


def test_asyncio_timeout_and_cancelled_polls_lose_nothing(broker, unique_topic, run) -> None:
    broker.create_topic(unique_topic, 1)

    async def main() -> list[int]:
        async with AIOConsumer(bootstrap_servers=broker.bootstrap, **FAST) as c, \
                AIOProducer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
            c.assign([(unique_topic, 0)])
            start = time.monotonic()
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await c.poll(10_000)            # nothing to read: waits on the Fetch
            assert time.monotonic() - start < 2.0
            got: list[int] = []
            for i in range(20):
                await p.send_and_wait(unique_topic, b"%d" % i, partition=0)
                # a poll cancelled as soon as it runs, then one left to finish
                task = asyncio.ensure_future(c.poll(2000, max_records=1))
                await asyncio.sleep(0)
                task.cancel()
                try:
                    got += [r.offset for r in await task]
                except asyncio.CancelledError:
                    pass
                deadline = time.monotonic() + 10
                while len(got) <= i and time.monotonic() < deadline:
                    got += [r.offset for r in await c.poll(500, max_records=1)]
                assert await c.position((unique_topic, 0)) == len(got)
            return got

    assert run(main()) == list(range(20))


def test_a_cancelled_send_queued_nothing_and_async_with_flushes(broker, unique_topic,
                                                               run) -> None:
    """A send waiting for its topic's metadata, cancelled, queued nothing; one that
    returned is delivered by the time ``async with`` ends."""
    broker.create_topic(unique_topic, 1)

    async def main() -> list:
        async with AIOProducer(bootstrap_servers=broker.bootstrap, linger_ms=500,
                               max_block_ms=2000) as producer:
            task = asyncio.ensure_future(producer.send("never-there-" + unique_topic, b"x"))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            deliveries = [await producer.send(unique_topic, b"%d" % i, partition=0)
                          for i in range(30)]
            assert not any(d.done() for d in deliveries)    # linger: not sent yet
        return [d.result().offset for d in deliveries]

    assert run(main()) == list(range(30))
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        assert c.read_range(unique_topic).num_rows == 30


def test_a_delivery_error_is_raised_by_its_await(broker, unique_topic, run) -> None:
    """The broker refuses the records (INVALID_RECORD, not retriable): the await
    of each delivery raises that error; a closed producer refuses to send."""
    broker.create_topic(unique_topic, 1)
    PRODUCE, INVALID_RECORD = 0, 87

    def refuse(key: int, version: int, body: dict) -> dict | None:
        if key != PRODUCE:
            return None
        for topic in body["responses"]:
            for part in topic["partition_responses"]:
                part["error_code"] = INVALID_RECORD
        return body

    with broker.proxied() as proxied:
        for proxy in proxied.proxies:
            proxy.answer_hook = refuse

        async def main() -> None:
            producer = AIOProducer(bootstrap_servers=proxied.bootstrap, linger_ms=0)
            try:
                delivery = await producer.send(unique_topic, b"x", partition=0)
                with pytest.raises(KprotoError, match="INVALID_RECORD|invalid"):
                    await delivery
            finally:
                await producer.close()
            with pytest.raises(IllegalStateError):
                await producer.send(unique_topic, b"x")

        run(main())


def test_deliveries_are_handed_to_the_loop_in_bulk(broker, unique_topic, run) -> None:
    """10 000 deliveries awaited together: every one resolves with its offset, the
    sender thread waking the loop far fewer times than there are records. A
    blocking Producer's futures are awaitable the same way."""
    broker.create_topic(unique_topic, 1)

    async def main() -> tuple[list[int], int, int]:
        # The last batch lingers until the flush, which comes only once every
        # delivery is awaited: a delivery already done when awaited takes no wake-up
        # (a linger expiring while a loaded machine set the 10 000 awaits up left
        # none to count).
        async with AIOProducer(bootstrap_servers=broker.bootstrap,
                               linger_ms=600_000) as producer:
            deliveries = [await producer.send(unique_topic, b"v", partition=0)
                          for _ in range(10_000)]
            assert not deliveries[-1].done()        # (lingering)
            handoff = for_running_loop()
            before = handoff.wakeups
            gathered = asyncio.gather(*deliveries)
            await asyncio.sleep(0)          # every delivery's first step: its waiter made
            assert not deliveries[-1].done()
            await producer.flush(60)
            metas = await gathered
            wakeups = handoff.wakeups - before
        with Producer(bootstrap_servers=broker.bootstrap) as blocking:
            more = await blocking.send(unique_topic, b"w", partition=0)
        return [m.offset for m in metas], wakeups, more.offset

    offsets, wakeups, more = run(main())
    assert offsets == list(range(10_000)) and more == 10_000
    assert 0 < wakeups < 1000, wakeups


def test_admin(broker, unique_topic, run) -> None:
    async def main() -> None:
        async with AIOAdmin(bootstrap_servers=broker.bootstrap) as admin:
            if broker.name != "mock":
                await admin.create_topics({unique_topic: 3})
            else:
                broker.create_topic(unique_topic, 3)
            topics = await admin.list_topics()
            assert unique_topic in topics
            with pytest.raises(AttributeError):
                await admin.no_such_call()

    run(main())


def test_one_loop_thread_only(broker, unique_topic) -> None:
    """The consumer's poll steps never run on a worker thread: the offloaded parts
    are the blocking exchanges only (Fetch answers are taken on the loop)."""
    _fill(broker, unique_topic, 20)
    threads: set[str] = set()

    async def main() -> int:
        async with AIOConsumer(bootstrap_servers=broker.bootstrap, **FAST) as c:
            fetches = c._consumer._fetches
            real = fetches.take

            def take(ready, wait):
                threads.add(threading.current_thread().name)
                return real(ready, wait)
            fetches.take = take
            c.assign([(unique_topic, 0)])
            n = 0
            while n < 20:
                n += len(await c.poll(500))
            return n

    assert asyncio.run(main()) == 20
    assert threads == {threading.current_thread().name}


def test_a_consumer_reading_a_backlog_lets_other_tasks_run(broker, unique_topic, run) -> None:
    """Polls served from the fetch buffer do not wait on the network; each still
    gives the loop a turn, so a task reading a backlog never starves the others
    (a turn per poll: every max_poll_records records, every poll_batch)."""
    _fill(broker, unique_topic, 50_000)

    async def main() -> tuple[int, int, int]:
        async with AIOConsumer(bootstrap_servers=broker.bootstrap, max_poll_records=500,
                               **FAST) as c:
            c.assign([(unique_topic, 0)])
            while not await c.poll(1000, max_records=1):    # (the first Fetch answered)
                pass
            async with Ticker(0) as other:      # another task, a turn at a time
                start, n = other.ticks, 1
                async for _ in c:
                    n += 1
                    if n == 50_000:
                        break
                during = other.ticks - start
        return n, during, 0

    n, during, _ = run(main())
    assert n == 50_000
    assert during >= 90, f"another task ran {during} times during 100 polls"


def test_sasl_and_kip368_reauthentication(fresh, run) -> None:  # noqa: F811
    """SCRAM-SHA-512 through a gateway that enforces the session lifetime (KIP-368:
    tests/test_reauth.py's), with the settings a blocking client takes: kproto.aio
    produces and reads for over two session lifetimes, re-authenticating on the
    way: every record once and in order, no connection killed."""
    from tests.test_reauth import LIFETIME_MS, PASSWORD

    scram = {"bootstrap.servers": fresh.address, "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob512",
             "sasl.password": PASSWORD}
    topic = f"aio-reauth-{time.monotonic_ns()}"

    async def main() -> tuple[list[bytes], list[bytes], int]:
        async with AIOAdmin(scram) as admin:
            await admin.create_topics({topic: 1})
        sent: list[bytes] = []
        got: list[bytes] = []
        async with AIOProducer(scram, linger_ms=5) as producer, \
                AIOConsumer(scram, auto_offset_reset="earliest", fetch_max_wait_ms=200) as c:
            c.assign([(topic, 0)])
            end = time.monotonic() + 2.2 * LIFETIME_MS / 1000
            i = 0
            while time.monotonic() < end:
                sent.append(b"%d" % i)
                await producer.send_and_wait(topic, sent[-1], partition=0)
                got += [r.value for r in await c.poll(50)]
                i += 1
            deadline = time.monotonic() + 20
            while len(got) < len(sent) and time.monotonic() < deadline:
                got += [r.value for r in await c.poll(200)]
            reauths = sum(x.reauthentications for x in c._consumer._fetches._conns.values())
        return sent, got, reauths

    sent, got, reauths = run(main())
    assert got == sent and len(sent) > 10
    assert reauths >= 1 and fresh.expired_kills == 0
