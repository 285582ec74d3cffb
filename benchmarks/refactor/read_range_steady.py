"""read_range in steady state (best of 3 calls after a warm-up), then a cProfile of
three more calls, for one kproto tree (BENCHMARKS.md, issue 16).

    .venv/bin/python benchmarks/refactor/read_range_steady.py TREE
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time


def main(tree: str, n: int = 300_000) -> None:
    sys.path.insert(0, tree)
    import pyarrow as pa

    from kproto import Admin, Consumer, Producer
    from kproto.testing import TansuBroker

    table = pa.table({"key": pa.array([b"k%015d" % i for i in range(n)], pa.binary()),
                      "value": pa.array([b"x" * 100] * n, pa.binary())})
    with TansuBroker() as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics({"t": 4})
        with Producer(bootstrap_servers=broker.bootstrap, compression_type="lz4") as producer:
            producer.send_batch("t", table).result(300)
        with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
            ends = consumer.end_offsets([("t", p) for p in range(4)])
            ranges = {tp.partition: (0, e) for tp, e in ends.items()}
            consumer.read_range("t", ranges)
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                consumer.read_range("t", ranges)
                best = min(best, time.perf_counter() - start)
            print("best", round(n / best / 1e6, 2), "M/s")
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(3):
                consumer.read_range("t", ranges)
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main(sys.argv[1])
