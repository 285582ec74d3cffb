"""kproto.aio against aiokafka, confluent_kafka.aio and kproto's own blocking client
(issue 31), one Tansu broker on loopback, the same data, every client in the same run.

Consume: a 4-partition topic filled once with ``--records`` records (16-byte keys,
100-byte values, no compression: the clients' costs, not a codec's), read from
offset 0 with every partition assigned (no group):

- per record: kproto ``for r in consumer.poll()`` (blocking), kproto.aio ``async for``
  and ``await poll()``, aiokafka ``async for``, confluent_kafka.aio ``await poll()``
  (one message per call; a prefix of ``--slow-records``: it is slow, compared by rate);
- in bulk: kproto ``poll_batch`` (blocking and ``await``), aiokafka ``getmany``.

Produce, one call per record (``--produce-records`` records to a fresh topic each
round; the rate counts until every record is acknowledged): kproto ``send`` +
``flush`` (blocking), kproto.aio ``await send()`` + ``flush``, aiokafka ``await
send()`` + ``flush``, confluent_kafka.aio ``await produce()`` + ``flush``.

The machine is shared: clients alternate within each round (``--rounds``), and the
median and the spread (min-max) of records/s are reported.

``--probe``: the event-loop latency probe - a task that sleeps 1 ms in a loop
records its worst lateness while kproto.aio consumes the topic (``async for`` and
``poll_batch``): how long the loop was blocked at most; and the part of it the
loop's thread spent on a CPU (a shared machine also deschedules it); and ``async for``
again with Python's collector off (its full collections are the longest blocks).

    .venv/bin/python benchmarks/bench_aio.py --records 1000000 --rounds 3 --probe
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiokafka
import confluent_kafka
import confluent_kafka.aio
import pyarrow as pa

import kproto
import kproto.aio
from kproto.testing import TansuBroker

sys.path.insert(0, __file__.rsplit("/", 2)[0])
from benchmarks.bench_clients import make_table  # noqa: E402

PARTITIONS = 4


class Topic:
    def __init__(self, name: str, ends: dict[int, int]) -> None:
        self.name, self.ends = name, ends

    @property
    def total(self) -> int:
        return sum(self.ends.values())


def fill(bootstrap: str, table: pa.Table) -> Topic:
    name = f"bench-aio-{uuid.uuid4().hex[:8]}"
    with kproto.Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics({name: PARTITIONS})
    with kproto.Producer(bootstrap_servers=bootstrap) as p:
        meta = p.send_batch(name, table).result(timeout=600)
    ends = dict.fromkeys(range(PARTITIONS), 0)
    for m in meta:
        ends[m.partition] = max(ends[m.partition], m.base_offset + m.record_count)
    return Topic(name, ends)


# ------------------------------------------------ consumers: each returns records read


def from_start(c: kproto.Consumer | kproto.aio.AIOConsumer, t: Topic) -> None:
    """Every partition of ``t`` assigned to the kproto consumer ``c``, from offset 0."""
    c.assign([(t.name, p) for p in t.ends])
    for p in t.ends:
        c.seek((t.name, p), 0)


async def each(records: Any, limit: int) -> int:
    """Records of the async iterator ``records`` read (each one's key, value and
    offset touched, as a reader would) until ``limit``: how many."""
    n = 0
    async for r in records:
        r.key, r.value, r.offset  # noqa: B018
        n += 1
        if n >= limit:
            break
    return n


def kproto_poll(bootstrap: str, t: Topic, limit: int) -> int:
    with kproto.Consumer(bootstrap_servers=bootstrap) as c:
        from_start(c, t)
        n = 0
        while n < limit:
            for r in c.poll(1000):
                r.key, r.value, r.offset  # noqa: B018 - touched, as a reader would
                n += 1
        return n


def kproto_poll_batch(bootstrap: str, t: Topic, limit: int) -> int:
    with kproto.Consumer(bootstrap_servers=bootstrap) as c:
        from_start(c, t)
        n = 0
        while n < limit:
            n += c.poll_batch(1000).num_rows
        return n


async def aio_async_for(bootstrap: str, t: Topic, limit: int) -> int:
    async with kproto.aio.AIOConsumer(bootstrap_servers=bootstrap) as c:
        from_start(c, t)
        return await each(c, limit)


async def aio_poll(bootstrap: str, t: Topic, limit: int) -> int:
    async with kproto.aio.AIOConsumer(bootstrap_servers=bootstrap) as c:
        from_start(c, t)
        n = 0
        while n < limit:
            for r in await c.poll(1000):
                r.key, r.value, r.offset  # noqa: B018
                n += 1
        return n


async def aio_poll_batch(bootstrap: str, t: Topic, limit: int) -> int:
    async with kproto.aio.AIOConsumer(bootstrap_servers=bootstrap) as c:
        from_start(c, t)
        n = 0
        while n < limit:
            n += (await c.poll_batch(1000)).num_rows
        return n


async def _aiokafka(bootstrap: str, t: Topic) -> Any:
    c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await c.start()
    tps = [aiokafka.TopicPartition(t.name, p) for p in t.ends]
    c.assign(tps)
    for tp in tps:
        c.seek(tp, 0)
    return c


async def aiokafka_async_for(bootstrap: str, t: Topic, limit: int) -> int:
    c = await _aiokafka(bootstrap, t)
    try:
        return await each(c, limit)
    finally:
        await c.stop()


async def aiokafka_getmany(bootstrap: str, t: Topic, limit: int) -> int:
    c = await _aiokafka(bootstrap, t)
    try:
        n = 0
        while n < limit:
            for msgs in (await c.getmany(timeout_ms=1000, max_records=100_000)).values():
                for m in msgs:
                    m.key, m.value, m.offset  # noqa: B018
                n += len(msgs)
        return n
    finally:
        await c.stop()


async def confluent_aio_poll(bootstrap: str, t: Topic, limit: int) -> int:
    c = confluent_kafka.aio.AIOConsumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                                         "enable.auto.commit": False})
    try:
        await c.assign([confluent_kafka.TopicPartition(t.name, p, 0) for p in t.ends])
        n = 0
        while n < limit:
            m = await c.poll(1.0)
            if m is None or m.error():
                continue
            m.key(), m.value(), m.offset()
            n += 1
        return n
    finally:
        await c.close()


# ------------------------------------------------ producers: each returns records acknowledged


def kproto_send(bootstrap: str, payloads: list[bytes], topic: str) -> int:
    with kproto.Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for v in payloads:
            p.send(topic, v)
        p.flush()
    return len(payloads)


async def aio_send(bootstrap: str, payloads: list[bytes], topic: str) -> int:
    async with kproto.aio.AIOProducer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for v in payloads:
            await p.send(topic, v)
        await p.flush()
    return len(payloads)


async def aiokafka_send(bootstrap: str, payloads: list[bytes], topic: str) -> int:
    p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await p.start()
    try:
        for v in payloads:
            await p.send(topic, v)
        await p.flush()
    finally:
        await p.stop()
    return len(payloads)


async def confluent_aio_produce(bootstrap: str, payloads: list[bytes], topic: str) -> int:
    p = confluent_kafka.aio.AIOProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    try:
        for v in payloads:
            await p.produce(topic, value=v)
        await p.flush()
    finally:
        await p.close()
    return len(payloads)


# ---------------------------------------------------------------- running


def timed(fn: Callable[[], Any]) -> tuple[int, float, float]:
    """(records, wall seconds, CPU seconds of this process: its threads, not the broker)."""
    start, cpu = time.perf_counter(), time.process_time()
    n = fn()
    return n, time.perf_counter() - start, time.process_time() - cpu


def on_loop(coro_fn: Callable[..., Awaitable[int]], *args: Any) -> Callable[[], int]:
    return lambda: asyncio.run(coro_fn(*args))


async def probe(coro: Awaitable[int]) -> tuple[int, float, float]:
    """``coro`` with a 1 ms sleeper beside it: (its result, the worst lateness in s,
    the worst lateness the loop's thread spent on a CPU, in s). On a shared machine
    a late tick may be the process waiting for a core (the second number leaves
    that out: lateness counts only up to the CPU time the loop's thread used
    meanwhile, i.e. the code that held the loop)."""
    worst = worst_cpu = 0.0
    ticks = 0

    async def ticker() -> None:
        nonlocal worst, worst_cpu, ticks
        while True:
            start, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0.001)
            late = time.perf_counter() - start - 0.001
            worst = max(worst, late)
            worst_cpu = max(worst_cpu, min(late, time.thread_time() - cpu))
            ticks += 1

    task = asyncio.ensure_future(ticker())
    while not ticks:
        await asyncio.sleep(0.001)
    try:
        return await coro, worst, worst_cpu
    finally:
        task.cancel()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--slow-records", type=int, default=100_000,
                    help="records for confluent_kafka.aio's per-record poll (rates compared)")
    ap.add_argument("--produce-records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--probe", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated client names")
    args = ap.parse_args()
    table = make_table(args.records)
    payloads = table.column("value").to_pylist()[:args.produce_records]
    with TansuBroker() as broker:
        b = broker.bootstrap
        t = fill(b, table)
        n, slow = t.total, min(args.slow_records, t.total)
        consumers: dict[str, Callable[[], int]] = {
            "kproto poll (blocking)": lambda: kproto_poll(b, t, n),
            "kproto.aio async for": on_loop(aio_async_for, b, t, n),
            "kproto.aio await poll()": on_loop(aio_poll, b, t, n),
            "aiokafka async for": on_loop(aiokafka_async_for, b, t, n),
            "confluent_kafka.aio await poll()": on_loop(confluent_aio_poll, b, t, slow),
            "kproto poll_batch (blocking)": lambda: kproto_poll_batch(b, t, n),
            "kproto.aio await poll_batch()": on_loop(aio_poll_batch, b, t, n),
            "aiokafka getmany": on_loop(aiokafka_getmany, b, t, n),
        }

        def producing(fn: Callable[..., Any], is_async: bool) -> Callable[[], int]:
            def go() -> int:
                topic = f"bench-aio-send-{uuid.uuid4().hex[:8]}"
                with kproto.Admin(bootstrap_servers=b) as admin:
                    admin.create_topics({topic: PARTITIONS})
                if is_async:
                    return int(asyncio.run(fn(b, payloads, topic)))
                return int(fn(b, payloads, topic))
            return go

        producers = {
            "kproto send (blocking)": producing(kproto_send, False),
            "kproto.aio await send()": producing(aio_send, True),
            "aiokafka await send()": producing(aiokafka_send, True),
            "confluent_kafka.aio await produce()": producing(confluent_aio_produce, True),
        }
        every = {**consumers, **producers}
        if args.only:
            every = {k: v for k, v in every.items() if any(o in k for o in args.only.split(","))}
        rates: dict[str, list[float]] = {k: [] for k in every}
        cpu_us: dict[str, list[float]] = {k: [] for k in every}
        for r in range(args.rounds):
            for name, fn in every.items():
                got, secs, cpu = timed(fn)
                rates[name].append(got / secs)
                cpu_us[name].append(cpu / got * 1e6)
                print(f"round {r + 1} {name}: {got:,} records in {secs:.2f} s "
                      f"({got / secs:,.0f}/s, {cpu:.2f} CPU s)", file=sys.stderr, flush=True)
        print(f"\n{t.total:,} records ({len(t.ends)} partitions, 16 + 100 bytes, no "
              f"compression) on Tansu; {args.rounds} rounds, clients alternating\n")
        print("| client | records/s (median) | spread (min-max) | CPU us/record (median) |")
        print("|---|---:|---:|---:|")
        for name, rs in rates.items():
            if not rs:
                continue
            print(f"| {name} | {statistics.median(rs):,.0f} | "
                  f"{min(rs):,.0f} - {max(rs):,.0f} | {statistics.median(cpu_us[name]):.2f} |")
        med = {k: statistics.median(v) for k, v in rates.items() if v}

        def ratio(a: str, b_: str) -> str:
            return f"{med[a] / med[b_]:.2f}x" if a in med and b_ in med else "-"
        print("\n| ratio | median |\n|---|---:|")
        for a, b_ in [("kproto.aio async for", "aiokafka async for"),
                      ("kproto.aio await poll()", "confluent_kafka.aio await poll()"),
                      ("kproto.aio async for", "confluent_kafka.aio await poll()"),
                      ("kproto.aio await send()", "aiokafka await send()"),
                      ("kproto.aio await send()", "confluent_kafka.aio await produce()"),
                      ("kproto.aio await poll_batch()", "aiokafka getmany"),
                      ("kproto.aio async for", "kproto poll (blocking)"),
                      ("kproto.aio await poll()", "kproto poll (blocking)"),
                      ("kproto.aio await poll_batch()", "kproto poll_batch (blocking)"),
                      ("kproto.aio await send()", "kproto send (blocking)")]:
            print(f"| {a} / {b_} | {ratio(a, b_)} |")
        if args.probe:
            print(f"\n| event-loop probe during a consume of {t.total:,} records | worst "
                  "lateness, ms (each round) | of it the loop's thread on a CPU, ms |"
                  "\n|---|---:|---:|")
            for name, coro_fn, collector in [
                    ("kproto.aio async for", aio_async_for, True),
                    ("kproto.aio await poll_batch()", aio_poll_batch, True),
                    ("kproto.aio async for, gc.disable()", aio_async_for, False),
                    ("kproto.aio await poll_batch(), gc.disable()", aio_poll_batch, False)]:
                worsts, cpus = [], []
                for _ in range(args.rounds):
                    if not collector:
                        gc.collect()
                        gc.disable()    # what the loop's own code blocks, without
                    try:                # Python's full collections of the heap
                        got, worst, cpu = asyncio.run(probe(coro_fn(b, t, n)))
                    finally:
                        gc.enable()
                    assert got >= n
                    worsts.append(worst * 1000)
                    cpus.append(cpu * 1000)
                print(f"| {name} | {max(worsts):.1f} ({', '.join(f'{w:.1f}' for w in worsts)})"
                      f" | {max(cpus):.1f} ({', '.join(f'{w:.1f}' for w in cpus)}) |")


if __name__ == "__main__":
    main()
