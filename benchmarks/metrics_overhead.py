"""What recording metrics costs the client paths (issue 33): send(), poll() and
poll_batch() with ``metrics_enabled`` on and off, on one Tansu broker.

    .venv/bin/python benchmarks/metrics_overhead.py [RECORDS] [ROUNDS]

Runs alternate (off, on, off, on...) so drift on a shared machine hits both
alike; prints each path's median throughput (M records/s) with metrics off and
on and the ratio on/off as JSON (BENCHMARKS.md records it).
"""

from __future__ import annotations

import json
import statistics
import sys
import time


def _send(bootstrap: str, topic: str, keys: list[bytes], value: bytes, on: bool) -> float:
    from kproto import Producer

    with Producer(bootstrap_servers=bootstrap, compression_type="lz4", metrics_enabled=on,
                  enable_metrics_push=False) as producer:
        send = producer.send
        start = time.perf_counter()
        for key in keys:
            send(topic, value, key=key)
        producer.flush(300)
        return len(keys) / (time.perf_counter() - start) / 1e6


def _poll(bootstrap: str, topic: str, n: int, on: bool, batch: bool) -> float:
    from kproto import Consumer

    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=50, metrics_enabled=on,
                  enable_metrics_push=False) as consumer:
        consumer.assign([(topic, p) for p in range(4)])
        got, touched, start = 0, 0, time.perf_counter()
        while got < n:
            if batch:
                got += consumer.poll_batch(1000).num_rows
            else:
                for record in consumer.poll(1000):
                    touched += len(record.key) + len(record.value) + record.offset
                    got += 1
        return n / (time.perf_counter() - start) / 1e6


def main(n: int, rounds: int) -> dict[str, dict[str, float]]:
    import pyarrow as pa

    from kproto import Admin, Producer
    from kproto.testing import TansuBroker

    keys = [b"k%015d" % i for i in range(n)]
    value = b"x" * 100
    runs: dict[str, dict[bool, list[float]]] = {p: {False: [], True: []}
                                                for p in ("send", "poll", "poll_batch")}
    with TansuBroker() as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics({"t": 4, **{f"s{i}": 4 for i in range(2 * rounds)}})
        table = pa.table({"key": pa.array(keys, pa.binary()),
                          "value": pa.array([value] * n, pa.binary())})
        with Producer(bootstrap_servers=broker.bootstrap, compression_type="lz4") as producer:
            producer.send_batch("t", table).result(300)
        for r in range(rounds):
            for on in (False, True) if r % 2 == 0 else (True, False):
                topic = f"s{2 * r + int(on)}"
                runs["send"][on].append(_send(broker.bootstrap, topic, keys, value, on))
                runs["poll"][on].append(_poll(broker.bootstrap, "t", n, on, batch=False))
                runs["poll_batch"][on].append(_poll(broker.bootstrap, "t", n, on, batch=True))
    out = {}
    for path, by in runs.items():
        off, on = statistics.median(by[False]), statistics.median(by[True])
        out[path] = {"off": round(off, 4), "on": round(on, 4), "ratio": round(on / off, 3)}
    return out


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    print(json.dumps(main(n, rounds), indent=1))
