"""End-to-end client throughput against a real broker (Tansu on loopback): kproto's
consumer and producer vs confluent-kafka (librdkafka), aiokafka and kafka-python,
all measured in the same run so the ratios mean something on a shared machine.

Consume: a 4-partition topic pre-filled once per module (``KPROTO_BENCH_RECORDS``
records, default 1,000,000: 16-byte keys, 100-byte text-like values, lz4 and none)
is read from offset 0 by each client, every partition assigned (no group). Offsets
are given explicitly (assign + seek 0): asked for OFFSET_BEGINNING, librdkafka sits
~500 ms in its offset-query state against Tansu before its first Fetch.
Produce: the same records sent to a fresh topic every round, in bulk (kproto's
``send_batch`` from a pyarrow Table) or one call per record.

Each round reports wall time (client creation to the last record read / acknowledged;
``close()`` is left out), the CPU seconds of this process (``time.process_time()``
deltas, which include librdkafka's and kproto's background threads, not the broker,
a separate process) and, for consumers, the time from creating the consumer to the
first record handed to the caller.

    python3 dev.py bench -k bench_clients                 # pytest-benchmark output
    python benchmarks/bench_clients.py --table            # runs it, prints markdown
    python benchmarks/bench_clients.py --table --benchmark-json=bench.json   # ...and keeps it
    python benchmarks/bench_clients.py --table bench.json # tables from a saved run
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pytest

import kproto
from kproto.testing import TansuBroker

confluent_kafka = pytest.importorskip("confluent_kafka")
aiokafka = pytest.importorskip("aiokafka")
kafka = pytest.importorskip("kafka")
_ = kproto.Consumer, kproto.Producer       # import them now, not inside a timed round

RECORDS = int(os.environ.get("KPROTO_BENCH_RECORDS", "1000000"))
QUICK = RECORDS < 100_000
KAFKA_PYTHON_RECORDS = min(RECORDS, 200_000)   # it is slow: a prefix, rates per record
KEY_BYTES, VALUE_BYTES = 16, 100
PARTITIONS = 4                                  # Tansu auto-creates topics with 4
CODECS = ["none", "lz4"]
ROUNDS = 1 if QUICK else 3
TIMEOUT = 60 + RECORDS / 10_000                 # a hang guard, never a timing check


# ---------------------------------------------------------------- data and fixtures


def make_table(n: int, seed: int = 0) -> pa.Table:
    """``n`` records: unique 16-byte decimal keys, 100-byte values compressible like text."""
    digits = (np.arange(n, dtype=np.int64)[:, None] // 10 ** np.arange(15, -1, -1)) % 10
    keys = (digits + ord("0")).astype(np.uint8).reshape(-1)
    alphabet = np.frombuffer(b'abcdefghijklmnopqrstuvwxyz0123456789 ,:{}"', np.uint8)
    rng = np.random.default_rng(seed)
    values = alphabet[rng.integers(0, 14, n * VALUE_BYTES) * 3 % len(alphabet)]

    def binary(data: np.ndarray, width: int) -> pa.Array:
        offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                      pa.py_buffer(data)])

    return pa.table({"key": binary(keys, KEY_BYTES), "value": binary(values, VALUE_BYTES)})


class Filled(NamedTuple):
    codec: str
    topic: str
    ends: dict[int, int]        # partition -> end offset (Tansu's ListOffsets LATEST is off)


@pytest.fixture(scope="module")
def broker() -> Any:
    with TansuBroker() as b:
        yield b.bootstrap


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return make_table(RECORDS)


@pytest.fixture(scope="module")
def payloads(table: pa.Table) -> tuple[list[bytes], list[bytes]]:
    """The same records as Python bytes, for the per-record APIs (built outside timing)."""
    return table.column("key").to_pylist(), table.column("value").to_pylist()


@pytest.fixture(scope="module", params=CODECS)
def filled(request: pytest.FixtureRequest, broker: str, table: pa.Table) -> Filled:
    """A topic holding ``table`` compressed with the codec, written once by kproto."""
    codec = request.param
    topic = f"bench-consume-{codec}-{uuid.uuid4().hex[:8]}"
    with kproto.Producer(bootstrap_servers=broker, compression_type=codec) as p:
        meta = p.send_batch(topic, table).result(timeout=TIMEOUT)
    ends = dict.fromkeys(range(PARTITIONS), 0)
    for m in meta:
        ends[m.partition] = max(ends[m.partition], m.base_offset + m.record_count)
    assert sum(ends.values()) == RECORDS
    return Filled(codec, topic, ends)


class Clock:
    """Wall and CPU time of one round, and when the first record came."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.records = 0
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    def first_record(self) -> None:
        if self.first is None:
            self.first = time.perf_counter() - self.t0

    def stop(self, records: int) -> None:
        self.wall = time.perf_counter() - self.t0
        self.cpu = time.process_time() - self.c0
        self.records = records

    def check(self, n: int) -> None:
        if time.perf_counter() - self.t0 > TIMEOUT:
            raise AssertionError(f"stuck: {n:,} records after {TIMEOUT:.0f} s")


def run_rounds(benchmark: Any, fn: Callable[[Clock], None], *, rounds: int = ROUNDS,
               expect: int = RECORDS) -> None:
    """``fn(clock)`` once per round under pytest-benchmark; the medians go to extra_info."""
    clocks: list[Clock] = []

    def once() -> None:
        clock = Clock()
        fn(clock)
        clocks.append(clock)

    benchmark.pedantic(once, rounds=rounds, iterations=1)
    for c in clocks:
        assert c.records >= expect, f"{c.records:,} records, expected {expect:,}"
    mid = sorted(clocks, key=lambda c: c.wall)[len(clocks) // 2]
    benchmark.extra_info.update(
        records=mid.records, bytes=mid.records * (KEY_BYTES + VALUE_BYTES),
        wall=mid.wall, cpu=mid.cpu, ttfr=mid.first,
        cpu_median=statistics.median(c.cpu for c in clocks),
        rounds=[{"wall": c.wall, "cpu": c.cpu, "ttfr": c.first} for c in clocks])


# ---------------------------------------------------------------- consumers


def kproto_poll_batch(clock: Clock, broker: str, f: Filled) -> None:
    c = kproto.Consumer(bootstrap_servers=broker, auto_offset_reset="earliest")
    c.assign([(f.topic, p) for p in f.ends])
    for p in f.ends:
        c.seek((f.topic, p), 0)
    n, total = 0, sum(f.ends.values())
    while n < total:
        batch = c.poll_batch(timeout_ms=1000)
        if batch.num_rows:
            clock.first_record()
            n += batch.num_rows
        clock.check(n)
    clock.stop(n)
    c.close()


def kproto_poll(clock: Clock, broker: str, f: Filled) -> None:
    """The per-record API: ``poll()`` Records, touching key, value and offset."""
    c = kproto.Consumer(bootstrap_servers=broker, auto_offset_reset="earliest")
    c.assign([(f.topic, p) for p in f.ends])
    for p in f.ends:
        c.seek((f.topic, p), 0)
    n, total = 0, sum(f.ends.values())
    while n < total:
        records = c.poll(timeout_ms=1000)
        for r in records:
            r.key, r.value, r.offset  # noqa: B018 -- touch them, as a reader would
        if records:
            clock.first_record()
            n += len(records)
        clock.check(n)
    clock.stop(n)
    c.close()


def kproto_read_range(clock: Clock, broker: str, f: Filled) -> None:
    c = kproto.Consumer(bootstrap_servers=broker)
    t = c.read_range(f.topic, {p: (0, end) for p, end in f.ends.items()},
                     timeout_ms=int(TIMEOUT * 1000))
    clock.first_record()        # bounded: the first records come with the whole table
    clock.stop(t.num_rows)
    c.close()


CONFLUENT_TUNED = {"fetch.queue.backoff.ms": 0, "queued.min.messages": 1_000_000}


def _confluent_consumer(broker: str, f: Filled, extra: dict[str, Any]) -> Any:
    c = confluent_kafka.Consumer({
        "bootstrap.servers": broker, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", **extra})
    c.assign([confluent_kafka.TopicPartition(f.topic, p, 0) for p in f.ends])
    return c


def _confluent(clock: Clock, broker: str, f: Filled, extra: dict[str, Any]) -> None:
    c = _confluent_consumer(broker, f, extra)
    n, total = 0, sum(f.ends.values())
    while n < total:
        msgs = c.consume(num_messages=10_000, timeout=1.0)
        for m in msgs:
            if m.error() is not None:
                raise AssertionError(f"confluent-kafka: {m.error()}")
            m.key(), m.value(), m.offset()
        if msgs:
            clock.first_record()
            n += len(msgs)
        clock.check(n)
    clock.stop(n)
    c.close()


def confluent_default(clock: Clock, broker: str, f: Filled) -> None:
    _confluent(clock, broker, f, {})


def confluent_tuned(clock: Clock, broker: str, f: Filled) -> None:
    _confluent(clock, broker, f, CONFLUENT_TUNED)


def aiokafka_getmany(clock: Clock, broker: str, f: Filled) -> None:
    async def main() -> None:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker, auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        try:
            tps = [aiokafka.TopicPartition(f.topic, p) for p in f.ends]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, 0)
            n, total = 0, sum(f.ends.values())
            while n < total:
                got = await c.getmany(timeout_ms=1000, max_records=100_000)
                for msgs in got.values():
                    for m in msgs:
                        m.key, m.value, m.offset  # noqa: B018 -- touch them, as a reader would
                    if msgs:
                        clock.first_record()
                        n += len(msgs)
                clock.check(n)
            clock.stop(n)
        finally:
            await c.stop()

    asyncio.run(main())


def _close_kafka_python(c: Any) -> None:
    """kafka-python 3.0.12's close() leaves a socket of its network thread open, which
    pytest's unraisable-exception hook would fail a later test on: collect it now."""
    c.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def kafka_python_poll(clock: Clock, broker: str, f: Filled) -> None:
    c = kafka.KafkaConsumer(bootstrap_servers=broker, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    tps = [kafka.TopicPartition(f.topic, p) for p in f.ends]
    c.assign(tps)
    for tp in tps:
        c.seek(tp, 0)
    n = 0
    while n < KAFKA_PYTHON_RECORDS:
        got = c.poll(timeout_ms=1000, max_records=10_000)
        for msgs in got.values():
            for m in msgs:
                m.key, m.value, m.offset  # noqa: B018
            if msgs:
                clock.first_record()
                n += len(msgs)
        clock.check(n)
    clock.stop(n)
    _close_kafka_python(c)


CONSUMERS: dict[str, Callable[[Clock, str, Filled], None]] = {
    "kproto_poll_batch": kproto_poll_batch,
    "kproto_poll": kproto_poll,
    "kproto_read_range": kproto_read_range,
    "confluent_default": confluent_default,
    "confluent_tuned": confluent_tuned,
    "aiokafka": aiokafka_getmany,
    "kafka_python": kafka_python_poll,
}


@pytest.mark.parametrize("client", list(CONSUMERS))
def test_consume(benchmark: Any, broker: str, filled: Filled, client: str) -> None:
    benchmark.group = f"consume {filled.codec}"
    kafka_python = client == "kafka_python"
    expect = KAFKA_PYTHON_RECORDS if kafka_python else RECORDS
    run_rounds(benchmark, lambda clock: CONSUMERS[client](clock, broker, filled),
               rounds=1 if kafka_python else ROUNDS, expect=expect)


# ---------------------------------------------------------------- time to first record
# consume(num_messages=10000) above waits for 10,000 messages (or its timeout) before
# returning any, so its first batch is not librdkafka's latency: here each client asks
# for one record the way a latency-minded reader would (poll(), getone()).


def first_kproto(clock: Clock, broker: str, f: Filled) -> None:
    c = kproto.Consumer(bootstrap_servers=broker, auto_offset_reset="earliest")
    c.assign([(f.topic, p) for p in f.ends])
    for p in f.ends:
        c.seek((f.topic, p), 0)
    while not c.poll_batch(timeout_ms=1000).num_rows:
        clock.check(0)
    clock.first_record()
    clock.stop(1)
    c.close()


def _first_confluent(clock: Clock, broker: str, f: Filled, extra: dict[str, Any]) -> None:
    c = _confluent_consumer(broker, f, extra)
    while (m := c.poll(1.0)) is None:
        clock.check(0)
    assert m.error() is None, m.error()
    m.value()
    clock.first_record()
    clock.stop(1)
    c.close()


def first_aiokafka(clock: Clock, broker: str, f: Filled) -> None:
    async def main() -> None:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker, auto_offset_reset="earliest",
                                      enable_auto_commit=False)
        await c.start()
        try:
            tps = [aiokafka.TopicPartition(f.topic, p) for p in f.ends]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, 0)
            (await asyncio.wait_for(c.getone(), TIMEOUT)).value  # noqa: B018
            clock.first_record()
            clock.stop(1)
        finally:
            await c.stop()

    asyncio.run(main())


def first_kafka_python(clock: Clock, broker: str, f: Filled) -> None:
    c = kafka.KafkaConsumer(bootstrap_servers=broker, auto_offset_reset="earliest",
                            enable_auto_commit=False)
    tps = [kafka.TopicPartition(f.topic, p) for p in f.ends]
    c.assign(tps)
    for tp in tps:
        c.seek(tp, 0)
    while not (got := c.poll(timeout_ms=1000, max_records=1)):
        clock.check(0)
    next(iter(got.values()))[0].value  # noqa: B018
    clock.first_record()
    clock.stop(1)
    _close_kafka_python(c)


FIRST: dict[str, Callable[[Clock, str, Filled], None]] = {
    "kproto_poll_batch": first_kproto,
    "confluent_default": lambda clock, b, f: _first_confluent(clock, b, f, {}),
    "confluent_tuned": lambda clock, b, f: _first_confluent(clock, b, f, CONFLUENT_TUNED),
    "aiokafka": first_aiokafka,
    "kafka_python": first_kafka_python,
}


@pytest.mark.parametrize("client", list(FIRST))
def test_first_record(benchmark: Any, broker: str, filled: Filled, client: str) -> None:
    benchmark.group = f"first record {filled.codec}"
    run_rounds(benchmark, lambda clock: FIRST[client](clock, broker, filled), rounds=3,
               expect=1)


# ---------------------------------------------------------------- producers


def _topic(what: str) -> str:
    return f"bench-produce-{what}-{uuid.uuid4().hex[:8]}"


def kproto_send_batch(clock: Clock, broker: str, codec: str, data: pa.Table) -> None:
    p = kproto.Producer(bootstrap_servers=broker, compression_type=codec, linger_ms=5)
    meta = p.send_batch(_topic("kproto-batch"), data).result(timeout=TIMEOUT)
    clock.stop(sum(m.record_count for m in meta))
    p.close()


def kproto_send(clock: Clock, broker: str, codec: str,
                payloads: tuple[list[bytes], list[bytes]], callback: bool = False,
                **settings: Any) -> None:
    """send() a record at a time; with ``callback``, an on_delivery callback each that
    counts the records written."""
    p = kproto.Producer(bootstrap_servers=broker, compression_type=codec, linger_ms=5,
                        **settings)
    topic, send, future = _topic("kproto-send"), p.send, None
    keys, values = payloads
    written: list[int] = []
    if callback:
        def delivered(err: Any, meta: Any) -> None:
            if err is None:
                written.append(meta.offset)

        for k, v in zip(keys, values, strict=True):
            future = send(topic, v, k, on_delivery=delivered)
    else:
        for k, v in zip(keys, values, strict=True):
            future = send(topic, v, k)
    p.flush(timeout=TIMEOUT)
    assert future is not None
    future.result(timeout=0)          # raises if the last record failed
    clock.stop(len(keys))
    assert not callback or len(written) == len(keys)
    p.close()


#: raised so that produce() is not bound by BufferError (librdkafka's defaults:
#: batch.size 1,000,000 bytes, queue.buffering.max.messages 100,000)
CONFLUENT_PRODUCER_TUNED = {"batch.size": 4_000_000, "queue.buffering.max.messages": 2_000_000,
                            "queue.buffering.max.kbytes": 2_097_151}


def confluent_produce(clock: Clock, broker: str, codec: str,
                      payloads: tuple[list[bytes], list[bytes]], extra: dict[str, Any],
                      callback: bool = False) -> None:
    """produce() a record at a time; with ``callback``, an on_delivery callback each that
    counts the records written (else only errors are reported)."""
    errors: list[Any] = []
    written: list[int] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            written.append(msg.offset())
        else:
            errors.append(err)

    p = confluent_kafka.Producer({
        "bootstrap.servers": broker, "linger.ms": 5, "compression.type": codec,
        "delivery.report.only.error": not callback, "on_delivery": delivered, **extra})
    topic, produce = _topic("confluent"), p.produce
    keys, values = payloads
    for k, v in zip(keys, values, strict=True):
        try:
            produce(topic, v, k)
        except BufferError:
            while True:
                p.poll(0.01)
                try:
                    produce(topic, v, k)
                    break
                except BufferError:
                    continue
    left = p.flush(TIMEOUT)
    assert left == 0 and not errors, f"confluent-kafka: {left} unsent, errors {errors[:3]}"
    clock.stop(len(keys))
    assert not callback or len(written) == len(keys)


@pytest.mark.parametrize("codec", CODECS)
def test_produce_kproto_send_batch(benchmark: Any, broker: str, table: pa.Table,
                                   codec: str) -> None:
    benchmark.group = f"produce {codec}"
    run_rounds(benchmark, lambda clock: kproto_send_batch(clock, broker, codec, table))


@pytest.mark.parametrize("codec", CODECS)
def test_produce_kproto_send(benchmark: Any, broker: str, payloads: Any, codec: str) -> None:
    benchmark.group = f"produce {codec}"
    run_rounds(benchmark, lambda clock: kproto_send(clock, broker, codec, payloads))


@pytest.mark.parametrize("codec", CODECS)
def test_produce_confluent_default(benchmark: Any, broker: str, payloads: Any,
                                   codec: str) -> None:
    benchmark.group = f"produce {codec}"
    run_rounds(benchmark, lambda clock: confluent_produce(clock, broker, codec, payloads, {}))


@pytest.mark.parametrize("codec", CODECS)
def test_produce_confluent_tuned(benchmark: Any, broker: str, payloads: Any,
                                 codec: str) -> None:
    benchmark.group = f"produce {codec}"
    run_rounds(benchmark, lambda clock: confluent_produce(
        clock, broker, codec, payloads, CONFLUENT_PRODUCER_TUNED))


@pytest.mark.parametrize("codec", CODECS)
def test_produce_kproto_send_callback(benchmark: Any, broker: str, payloads: Any,
                                      codec: str) -> None:
    benchmark.group = f"produce {codec}"
    run_rounds(benchmark, lambda clock: kproto_send(clock, broker, codec, payloads,
                                                    callback=True))


@pytest.mark.parametrize("codec", CODECS)
def test_produce_confluent_tuned_callback(benchmark: Any, broker: str, payloads: Any,
                                          codec: str) -> None:
    benchmark.group = f"produce {codec}"
    run_rounds(benchmark, lambda clock: confluent_produce(
        clock, broker, codec, payloads, CONFLUENT_PRODUCER_TUNED, callback=True))


# ---------------------------------------------------------------- the markdown table


def tables(path: str) -> str:
    """The markdown tables of BENCHMARKS.md from a pytest-benchmark JSON file."""
    runs = json.load(open(path))["benchmarks"]
    got: dict[tuple[str, str, str], dict[str, Any]] = {}
    for b in runs:
        name, params = b["name"].split("[")[0], b.get("params") or {}
        if "wall" not in b["extra_info"]:
            continue
        what = {"test_consume": "consume", "test_first_record": "first"}.get(name, "produce")
        client = params.get("client") or name.removeprefix("test_produce_")
        codec = params.get("codec") or b["param"].split("-")[0]
        got[what, codec, client] = b["extra_info"]

    def rate(i: dict[str, Any]) -> float:
        return i["records"] / i["wall"]

    out = []
    consumers = [c for c in CONSUMERS if any(k[2] == c for k in got)]
    if consumers and any(k[0] == "consume" for k in got):
        n = max(i["records"] for k, i in got.items() if k[0] == "consume")
        out += [f"### Consume {n:,} records (4 partitions, 116-byte records, from offset 0)\n",
                "| codec | client | records/s | CPU s | CPU/record ÷ confluent tuned "
                "| first record | first batch of the run | rate ÷ confluent tuned "
                "| rate ÷ aiokafka |", "|---|---|---|---|---|---|---|---|---|"]
        for codec in CODECS:
            ref = got.get(("consume", codec, "confluent_tuned"))
            aio = got.get(("consume", codec, "aiokafka"))
            for client in consumers:
                i = got.get(("consume", codec, client))
                if i is None:
                    continue
                # CPU per record relative, so kafka-python's shorter run compares too
                cpu_ratio = (f"{i['cpu'] / i['records'] / (ref['cpu'] / ref['records']):.2f}×"
                             if ref else "-")
                batch = f"{i['ttfr'] * 1000:.0f} ms" if i.get("ttfr") is not None else "-"
                if client == "kproto_read_range":
                    batch += " (whole table)"
                one = got.get(("first", codec, client))
                first = f"{statistics.median(r['ttfr'] for r in one['rounds']) * 1000:.0f} ms" \
                    if one else "-"
                cpu = f"{i['cpu']:.2f}"
                if i["records"] != n:
                    cpu += f" ({i['records']:,} rec)"
                vs_ref = f"{rate(i) / rate(ref):.2f}×" if ref else "-"
                vs_aio = f"{rate(i) / rate(aio):.2f}×" if aio else "-"
                out.append(f"| {codec} | {client} | {rate(i) / 1e6:.2f} M/s | {cpu} | "
                           f"{cpu_ratio} | {first} | {batch} | {vs_ref} | {vs_aio} |")
    producers = ["kproto_send_batch", "kproto_send", "confluent_default", "confluent_tuned",
                 "kproto_send_callback", "confluent_tuned_callback"]
    if any(k[0] == "produce" for k in got):
        n = max(i["records"] for k, i in got.items() if k[0] == "produce")
        out += ["", f"### Produce {n:,} records (fresh topic each round, acks=all, linger 5 ms)\n",
                "| codec | client | records/s | MB/s | CPU s | rate ÷ confluent tuned "
                "(callback rows: ÷ confluent tuned with callbacks) | rate ÷ confluent default |",
                "|---|---|---|---|---|---|---|"]
        for codec in CODECS:
            dflt = got.get(("produce", codec, "confluent_default"))
            for client in producers:
                i = got.get(("produce", codec, client))
                if i is None:
                    continue
                ref = got.get(("produce", codec, "confluent_tuned_callback"
                               if client.endswith("_callback") else "confluent_tuned"))
                r = rate(i)
                out.append(f"| {codec} | {client} | {r / 1e6:.2f} M/s | "
                           f"{i['bytes'] / i['wall'] / 1e6:.0f} | {i['cpu']:.2f} | "
                           f"{r / rate(ref) if ref else 0:.2f}× | "
                           f"{r / rate(dflt) if dflt else 0:.2f}× |")
    return "\n".join(out)


if __name__ == "__main__":
    from summarize import table_main  # benchmarks/ is sys.path[0] here

    sys.exit(table_main(__file__, __doc__, tables, sys.argv[1:]))
