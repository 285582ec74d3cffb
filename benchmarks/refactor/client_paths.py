"""One tree's client paths on a Tansu broker, for before/after runs (BENCHMARKS.md).

    .venv/bin/python benchmarks/refactor/client_paths.py TREE [RECORDS]

TREE is a kproto checkout with its extension built; prints the throughput (M
records/s) of send_batch, send (one call a record), poll_batch, poll (Records,
touching key, value and offset) and read_range as JSON.
"""

from __future__ import annotations

import json
import sys
import time


def main(tree: str, n: int) -> dict[str, float]:
    sys.path.insert(0, tree)
    import pyarrow as pa

    from kproto import Admin, Consumer, Producer
    from kproto.testing import TansuBroker

    table = pa.table({"key": pa.array([b"k%015d" % i for i in range(n)], pa.binary()),
                      "value": pa.array([b"x" * 100] * n, pa.binary())})
    out: dict[str, float] = {}
    with TansuBroker() as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics({"t": 4, "s": 4})
        with Producer(bootstrap_servers=broker.bootstrap, compression_type="lz4") as producer:
            start = time.perf_counter()
            producer.send_batch("t", table).result(300)
            out["send_batch"] = n / (time.perf_counter() - start) / 1e6
        keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
        with Producer(bootstrap_servers=broker.bootstrap, compression_type="lz4") as producer:
            start = time.perf_counter()
            send = producer.send
            for key, value in zip(keys, values, strict=True):
                send("s", value, key=key)
            producer.flush(300)
            out["send"] = n / (time.perf_counter() - start) / 1e6
        with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                      fetch_max_wait_ms=50) as consumer:
            consumer.assign([("t", p) for p in range(4)])
            got, start = 0, time.perf_counter()
            while got < n:
                got += consumer.poll_batch(1000).num_rows
            out["poll_batch"] = n / (time.perf_counter() - start) / 1e6
        with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                      fetch_max_wait_ms=50) as consumer:
            consumer.assign([("t", p) for p in range(4)])
            got, touched, start = 0, 0, time.perf_counter()
            while got < n:
                for record in consumer.poll(1000):
                    touched += len(record.key) + len(record.value) + record.offset
                    got += 1
            out["poll"] = n / (time.perf_counter() - start) / 1e6
        with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                      fetch_max_wait_ms=50) as consumer:
            ends = consumer.end_offsets([("t", p) for p in range(4)])
            start = time.perf_counter()
            rows = consumer.read_range("t", {tp.partition: (0, e) for tp, e in ends.items()})
            assert rows.num_rows == n
            out["read_range"] = n / (time.perf_counter() - start) / 1e6
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 500_000)))
