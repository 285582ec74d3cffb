#!/usr/bin/env python3
"""Peak memory of a bounded read of one big partition: all at once vs in steps.

Starts a Tansu broker on loopback, writes ``--records`` records (100-byte
values) to partition 0 of a topic, then reads offsets [0, records) in a fresh
child process per variant and prints its wall time and peak RSS (ru_maxrss)
above the RSS after imports and connecting:

- ``all``: :func:`kproto.consumer.reader.read_ranges_result` (what ``Consumer.read_range``
  runs: the whole range is held until the end);
- ``steps``: :func:`kproto.consumer.reader.iter_ranges` with ``--step-mb`` (what a Spark
  task and ``Consumer.iter_range`` run), each step dropped once counted.

    .venv/bin/python tools/read_memory.py --records 6000000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from kproto.config import resolve
from kproto.net.cluster import Cluster
from kproto.consumer.reader import iter_ranges, read_ranges_result

bootstrap, how, n, step_mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
config = resolve("consumer", bootstrap_servers=bootstrap)
cluster = Cluster(config)
cluster.refresh_metadata(["big"])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start = time.perf_counter()
if how == "all":
    rows = read_ranges_result(cluster, config, {("big", 0): (0, n)}).num_rows
else:
    rows = sum(step.num_rows for step in iter_ranges(
        config, {("big", 0): (0, n)}, step_bytes=step_mb << 20))
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
cluster.close()
print(json.dumps({"rows": rows, "seconds": round(seconds, 2),
                  "peak_over_base_mb": round(peak - base, 1)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=6_000_000)
    ap.add_argument("--step-mb", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import pyarrow as pa

    from kproto import Producer
    from kproto.testing import TansuBroker

    broker = TansuBroker()
    broker.start()
    try:
        chunk = pa.table({"value": pa.array([b"v" * 100] * 100_000)})
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            for _ in range(args.records // 100_000):
                producer.send_batch("big", chunk, partition=0)
            producer.flush(300)
        n = args.records // 100_000 * 100_000
        print(f"{n:,} records of 100 B in one partition; step {args.step_mb} MiB")
        for _ in range(args.rounds):
            for how in ("all", "steps"):
                out = subprocess.run([sys.executable, "-c", CHILD, broker.bootstrap, how,
                                      str(n), str(args.step_mb)],
                                     capture_output=True, text=True, check=True)
                got = json.loads(out.stdout)
                assert got["rows"] == n, got
                print(f"{how:5}  {got['seconds']:6.2f} s  peak +{got['peak_over_base_mb']} MB")
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
