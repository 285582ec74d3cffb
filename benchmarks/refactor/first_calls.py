"""One tree's first calls on a Tansu broker: a new producer's first ``send_batch`` and a
consumer's first ``read_range`` (after polling), in milliseconds, as JSON.

    .venv/bin/python benchmarks/refactor/first_calls.py TREE [RECORDS]

First calls pay what steady-state benchmarks hide: connections, metadata and any module
imported on first use (issue 16's read_range gap was ``kproto.consumer.reader`` imported lazily).
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
            admin.create_topics({"t": 4})
        with Producer(bootstrap_servers=broker.bootstrap, compression_type="lz4") as producer:
            start = time.perf_counter()
            producer.send_batch("t", table).result(300)
            out["send_batch_ms"] = (time.perf_counter() - start) * 1000
        with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([("t", p) for p in range(4)])
            got = 0
            while got < n:
                got += c.poll_batch(1000).num_rows
            start = time.perf_counter()
            assert c.read_range("t").num_rows == n
            out["read_range_ms"] = (time.perf_counter() - start) * 1000
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 300_000)))
