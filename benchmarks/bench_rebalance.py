"""Records read during a member join: eager against cooperative rebalancing (issue 30).

Two consumers of one group read a 6-partition topic on one Tansu broker while a
producer thread appends 20 records to every partition every 20 ms. A third
consumer joins. Measured for the two that were there, from the third's
``subscribe()`` until the group is settled again (2/2/2, the follow-up rebalance
included):

- records read in that window, and the longest time either of them read nothing;
- records read twice over the whole run (auto-commit, exactly once expected).

``sticky`` (eager: every member revokes everything before it rejoins) against
``cooperative-sticky`` (KIP-429: each keeps the two partitions it does not give
up and reads them on). Same assignment algorithm, so the difference is the
protocol. Rounds alternate between the two; the table has the median of each.
noida-db is not used: it refuses the commits of a rebalance's members
(docs/brokers.md), so there a cooperative rebalance moves everything.

    .venv/bin/python benchmarks/bench_rebalance.py --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from collections import Counter

import pyarrow as pa

from kproto import Admin, Consumer, Producer
from kproto.testing import TansuBroker

SETTINGS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 300,
            "max_poll_interval_ms": 60000, "auto_offset_reset": "earliest",
            "auto_commit_interval_ms": 200, "fetch_max_wait_ms": 100}


class Reader(threading.Thread):
    """A consumer of the group in a thread, noting when it read what."""

    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(bootstrap_servers=bootstrap, group_id=group,
                                 partition_assignment_strategy=[strategy], **SETTINGS)
        self.consumer.subscribe([topic])
        self.read: list[tuple[float, int, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                batch = self.consumer.poll_batch(100)
                now = time.monotonic()
                self.read += [(now, p, o) for p, o in zip(
                    batch.column("partition").to_pylist(), batch.column("offset").to_pylist(),
                    strict=True)]
        finally:
            self.consumer.close()


def wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


def one_round(bootstrap: str, strategy: str) -> dict[str, float]:
    topic = f"rebalance-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics({topic: 6})
    group = f"g-{topic}"
    stop = threading.Event()
    sent = [0]

    def feed() -> None:
        with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
            n = 0
            while not stop.wait(0.02):
                for part in range(6):
                    producer.send_batch(topic, pa.table({"value": [
                        f"{part}-{n + i}".encode() for i in range(20)]}), partition=part)
                    sent[0] += 20
                n += 20
            producer.flush()

    feeder = threading.Thread(target=feed, daemon=True)
    first = [Reader(bootstrap, group, topic, strategy) for _ in range(2)]
    third = None
    try:
        feeder.start()
        for r in first:
            r.start()
        wait(lambda: sorted(len(r.consumer.assignment()) for r in first) == [3, 3], 60,
             "a 3/3 split")
        wait(lambda: all(r.read for r in first), 30, "records flowing")
        time.sleep(1.0)                                 # a steady state before the join
        start = time.monotonic()
        third = Reader(bootstrap, group, topic, strategy)
        third.start()
        wait(lambda: sorted(len(r.consumer.assignment()) for r in first + [third])
             == [2, 2, 2] and not any(r.consumer._group.rebalancing for r in first + [third]),
             60, "a 2/2/2 split")
        end = time.monotonic()
        time.sleep(1.0)
        stop.set()
        feeder.join(30)
        everyone = first + [third]
        wait(lambda: sum(len(r.read) for r in everyone) >= sent[0], 60, "every record")
    finally:
        stop.set()
        for r in first + ([third] if third else []):
            r.stop.set()
        for r in first + ([third] if third else []):
            r.join(30)
    during = sum(1 for r in first for t, _, _ in r.read if start <= t <= end)
    gaps = []
    for r in first:
        times = [start] + [t for t, _, _ in r.read if start <= t <= end] + [end]
        gaps.append(max(b - a for a, b in zip(times, times[1:], strict=False)))
    counts = Counter((p, o) for r in first + [third] for _, p, o in r.read)
    return {"window_s": end - start, "during": during, "rate": during / (end - start),
            "max_gap_s": max(gaps), "duplicates": sum(n - 1 for n in counts.values()),
            "missing": sent[0] - len(counts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"sticky": [], "cooperative-sticky": []}
    with TansuBroker() as broker:
        for _ in range(args.rounds):
            for strategy in results:
                results[strategy].append(one_round(broker.bootstrap, strategy))
                print(strategy, results[strategy][-1], flush=True)
    print()
    print("| protocol (assignor) | join to settled (s) | records read by the two "
          "during it | records/s during it | longest pause of a member (s) | "
          "read twice | missing |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for strategy, rounds in results.items():
        def med(key: str, rounds=rounds) -> float:
            return statistics.median(r[key] for r in rounds)
        name = "eager (`sticky`)" if strategy == "sticky" else "cooperative (`cooperative-sticky`)"
        print(f"| {name} | {med('window_s'):.2f} | {med('during'):,.0f} | "
              f"{med('rate'):,.0f} | {med('max_gap_s'):.2f} | "
              f"{max(r['duplicates'] for r in rounds):.0f} | "
              f"{max(r['missing'] for r in rounds):.0f} |")


if __name__ == "__main__":
    main()
