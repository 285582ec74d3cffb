"""KIP-848 consumer group read throughput on librdkafka's mock, alternating runs:

    .venv/bin/python benchmarks/consumer_groups.py [--partitions P] [--records R]
        [--passes K] [--rounds N] [--batch-bytes B] [--paths ...] [--profile FILE]

One topic of P partitions (default 16) holds R records per partition (default
30,000; 16-byte keys, 100-byte values) in record batches of at most B bytes
(default 1 MiB, what ``send_batch`` writes). The mock answers a Fetch with one
record batch per partition (rdkafka_mock_handlers.c: "FIXME: Multiple
messageSets ?") where a broker gives up to ``max_partition_fetch_bytes`` (1 MiB)
of them, so B is how many records a partition brings per Fetch round trip: 1 MiB
batches read like a broker's answers; ``--batch-bytes 16384`` (a per-record
producer's ``batch.size``) makes each answer ~120 records a partition, a
benchmark of the clients' cost per Fetch. The mock keeps at most 5 MiB of record
batches per partition (``mpart->max_size`` in rdkafka_mock.c, fixed: no API or
setting changes it) and drops whole batches beyond that, so R x ~140 bytes stays
under it; the benchmark checks that every partition still holds all R records
from offset 0 before it reads.

Each run is one consumer, the only member of a ``group.protocol=consumer`` group
of its own (the coordinator assigns all P partitions; auto-commit on, as by
default). It reads the whole topic once untimed (the join, the first Fetches
and the warm-up), then seeks every partition to offset 0 and reads it K more
times (default 3), seeking back to 0 after each pass; those K x P x R records
are timed. Paths:

- ``kproto_poll``: kproto ``Consumer.poll`` (``group_protocol="consumer"``;
  Records, key, value and offset touched);
- ``confluent_consume``: confluent-kafka's ``Consumer.consume(500)``
  (``group.protocol=consumer``; each message's error, key, value and offset),
  tuned as bench_clients.py's ``confluent_tuned`` (``fetch.queue.backoff.ms``
  0, ``queued.min.messages`` 1,000,000): by default librdkafka stops fetching
  a partition for a second whenever its prefetch queue holds 100,000 messages,
  which throttled it to ~170 k/s with 16 KiB batches here;
- ``confluent_consume_defaults`` (only when asked for): the same untuned;
- ``kproto_poll_batch``: kproto ``Consumer.poll_batch`` (Arrow batches);
- ``kproto_assign_poll``: kproto ``Consumer.poll`` with ``assign()`` and no group
  (what the membership costs, by difference).

Both clients ask the brokers to hold an empty Fetch at most 10 ms
(``fetch_max_wait_ms`` / ``fetch.wait.max.ms``, default 500): at the end of a
pass each has one in flight, which the seek back then waits for.

The mock runs in a child process, so this process's CPU time in the timed part
(all its threads: kproto's heartbeat thread, librdkafka's fetch threads) is the
client's CPU per record. Every round runs each path once, the order rotating
from round to round (the machine is shared); printed as JSON: each path's
median rate, its spread (min-max), its client CPU per record, and kproto's
ratios to confluent, each round's kproto rate / confluent rate (``vs_confluent``)
and confluent CPU per record / kproto's (``cpu_vs_confluent``): the median of
the rounds' ratios and their min-max.
``--profile FILE`` runs ``kproto_poll`` once more under cProfile (pstats file).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import multiprocessing as mp
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from kproto import Consumer, Producer

TOPIC = "group-bench"
MOCK_PARTITION_BYTES = 5 * 1024 * 1024      # rdkafka_mock.c: mpart->max_size
#: how long a broker holds a Fetch with nothing to answer (both clients)
FETCH_WAIT_MS = 10


def host_mock(partitions: int, conn: Any) -> None:
    """The child process: a 3-broker mock with TOPIC, until the parent says stop."""
    from kproto.testing import MockCluster

    with MockCluster(3) as mock:
        mock.create_topic(TOPIC, partitions)
        conn.send(mock.bootstrap)
        conn.recv()


def produce(bootstrap: str, partitions: int, records: int, batch_bytes: int) -> None:
    """R records into each partition, then a check that the mock kept them all."""
    table = pa.table({"key": pa.array([b"k%015d" % i for i in range(records)], pa.binary()),
                      "value": pa.array([b"x" * 100] * records, pa.binary())})
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=min(batch_bytes, 16384),
                  max_request_size=batch_bytes + 1024) as producer:
        for p in range(partitions):
            producer.send_batch(TOPIC, table, partition=p).result(300)
    with Consumer(bootstrap_servers=bootstrap) as c:
        tps = [(TOPIC, p) for p in range(partitions)]
        low, high = c.beginning_offsets(tps), c.end_offsets(tps)
    lost = {tp.partition: low[tp] for tp in low if low[tp] != 0}
    if lost or any(v != records for v in high.values()):
        raise RuntimeError(
            f"the mock dropped the first records of partitions {lost} (it keeps "
            f"{MOCK_PARTITION_BYTES} bytes a partition): fewer --records or smaller values")


def timed(n: int, passes: int, poll: Callable[[], int],
          rewind: Callable[[], None], limit: float = 300.0) -> dict[str, float]:
    """Read the n records once untimed (join, warm-up), then ``passes`` times timed,
    ``rewind()`` (every partition to offset 0) before each: records/s and this
    process's CPU microseconds per record over the timed passes."""
    deadline = time.monotonic() + limit

    def read(want: int) -> None:
        got = 0
        while got < want:
            got += poll()
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {got} of {want} records")
        if got != want:
            raise RuntimeError(f"{got} records where {want} were written")

    read(n)
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(passes):
        rewind()
        read(n)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"rate": n * passes / wall, "client_cpu_us": cpu / (n * passes) * 1e6}


def _kproto(bootstrap: str, group: bool) -> Consumer:
    if not group:
        return Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                        fetch_max_wait_ms=FETCH_WAIT_MS)
    c = Consumer(bootstrap_servers=bootstrap, group_id=f"k-{uuid.uuid4().hex[:8]}",
                 group_protocol="consumer", auto_offset_reset="earliest",
                 fetch_max_wait_ms=FETCH_WAIT_MS)
    c.subscribe([TOPIC])
    return c


def _kproto_run(bootstrap: str, n: int, passes: int, poll_of: Callable[[Consumer], int],
                group: bool = True, partitions: int = 0) -> dict[str, float]:
    c = _kproto(bootstrap, group)
    if not group:
        c.assign([(TOPIC, p) for p in range(partitions)])

    def rewind() -> None:
        for tp in c.assignment():
            c.seek(tp, 0)
    try:
        return timed(n, passes, lambda: poll_of(c), rewind)
    finally:
        c.close()


def _records(c: Consumer) -> int:
    records = c.poll(500)
    for r in records:
        r.key, r.value, r.offset         # noqa: B018 - what an application touches
    return len(records)


def kproto_poll(bootstrap: str, n: int, passes: int, partitions: int) -> dict[str, float]:
    return _kproto_run(bootstrap, n, passes, _records)


def kproto_assign_poll(bootstrap: str, n: int, passes: int, partitions: int) -> dict[str, float]:
    return _kproto_run(bootstrap, n, passes, _records, group=False, partitions=partitions)


def kproto_poll_batch(bootstrap: str, n: int, passes: int, partitions: int) -> dict[str, float]:
    return _kproto_run(bootstrap, n, passes, lambda c: c.poll_batch(500).num_rows)


#: bench_clients.py's confluent_tuned
CONFLUENT_TUNED = {"fetch.queue.backoff.ms": 0, "queued.min.messages": 1_000_000}


def confluent_consume(bootstrap: str, n: int, passes: int, partitions: int,
                      tuned: bool = True) -> dict[str, float]:
    import confluent_kafka

    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                  "group.id": f"c-{uuid.uuid4().hex[:8]}",
                                  "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest",
                                  "fetch.wait.max.ms": FETCH_WAIT_MS,
                                  **(CONFLUENT_TUNED if tuned else {})})

    def poll() -> int:
        got = 0
        for m in c.consume(num_messages=500, timeout=0.5):
            if m.error() is None:
                m.key(), m.value(), m.offset()
                got += 1
        return got

    def rewind() -> None:
        for tp in c.assignment():
            c.seek(confluent_kafka.TopicPartition(tp.topic, tp.partition, 0))
    try:
        c.subscribe([TOPIC])
        return timed(n, passes, poll, rewind)
    finally:
        c.close()


def confluent_consume_defaults(bootstrap: str, n: int, passes: int,
                               partitions: int) -> dict[str, float]:
    return confluent_consume(bootstrap, n, passes, partitions, tuned=False)


PATHS: dict[str, Callable[[str, int, int, int], dict[str, float]]] = {
    "kproto_poll": kproto_poll, "confluent_consume": confluent_consume,
    "kproto_poll_batch": kproto_poll_batch, "kproto_assign_poll": kproto_assign_poll,
    "confluent_consume_defaults": confluent_consume_defaults}
DEFAULT_PATHS = ["kproto_poll", "confluent_consume", "kproto_poll_batch", "kproto_assign_poll"]


def main(a: argparse.Namespace) -> dict[str, Any]:
    n = a.partitions * a.records
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    child = ctx.Process(target=host_mock, args=(a.partitions, there), daemon=True)
    child.start()
    try:
        if not here.poll(60):
            raise RuntimeError("the mock did not start within 60 s")
        bootstrap = here.recv()
        produce(bootstrap, a.partitions, a.records, a.batch_bytes)
        runs: dict[str, list[dict[str, float]]] = {p: [] for p in a.paths}
        for r in range(a.rounds):
            order = a.paths[r % len(a.paths):] + a.paths[:r % len(a.paths)]
            for path in order:
                runs[path].append(PATHS[path](bootstrap, n, a.passes, a.partitions))
        if a.profile:
            prof = cProfile.Profile()
            prof.runcall(kproto_poll, bootstrap, n, a.passes, a.partitions)
            prof.dump_stats(a.profile)
    finally:
        here.send("stop")
        child.join(30)
    out: dict[str, Any] = {"partitions": a.partitions, "records_per_pass": n,
                           "timed_passes": a.passes, "rounds": a.rounds,
                           "batch_bytes": a.batch_bytes}
    for path, rs in runs.items():
        rates = [x["rate"] for x in rs]
        out[path] = {"median": round(statistics.median(rates)), "min": round(min(rates)),
                     "max": round(max(rates)),
                     "client_cpu_us": round(statistics.median(x["client_cpu_us"]
                                                              for x in rs), 3)}
    if "confluent_consume" in runs:
        conf = runs["confluent_consume"]
        for path in ("kproto_poll", "kproto_poll_batch"):
            if path in runs:
                pairs = list(zip(runs[path], conf, strict=True))
                for what, ratios in (
                        ("vs_confluent", [k["rate"] / c["rate"] for k, c in pairs]),
                        ("cpu_vs_confluent",    # confluent's CPU per record / kproto's
                         [c["client_cpu_us"] / k["client_cpu_us"] for k, c in pairs])):
                    out[f"{path}_{what}"] = {
                        "median": round(statistics.median(ratios), 2),
                        "min": round(min(ratios), 2), "max": round(max(ratios), 2)}
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--records", type=int, default=30_000, help="records per partition")
    ap.add_argument("--passes", type=int, default=3, help="timed reads of the whole topic")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch-bytes", type=int, default=1048576)
    ap.add_argument("--paths", nargs="+", default=DEFAULT_PATHS, choices=list(PATHS))
    ap.add_argument("--profile", help="cProfile kproto_poll once more into this pstats file")
    print(json.dumps(main(ap.parse_args()), indent=2))
