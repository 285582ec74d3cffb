#!/usr/bin/env python3
"""CPU of the Spark sink's Python side, and of the broker it writes to.

Starts a Tansu broker on loopback and writes ``--records`` records (16-byte keys,
100-byte values: ``benchmarks/bench_spark.py``'s) with the ``kproto`` sink, one
warm-up round then ``--rounds`` timed rounds, each to a fresh topic. It prints
each round's CPU seconds, so that two trees can be compared in alternating runs
(``PYTHONPATH=<tree>``), which a shared 2-core machine allows where wall times
do not:

- ``--where spark`` (default): a ``local[2]`` session writes a cached DataFrame
  (read from a filled topic) with a subclass of the sink whose tasks add up their
  process's CPU over ``write()`` (reading Spark's Arrow stream, encoding, the
  producer's sender thread): the whole Python side of the write; then the same
  for a writer that only counts the batches (reading Spark's Arrow stream alone);
- ``--where direct``: ``KprotoWriter.write`` called in this process with the
  table in Spark's 10,000-row batches (the sink without Spark); also the
  broker's CPU over each round (``/proc/<pid>/stat``).

    .venv/bin/python tools/sink_cpu.py --codec lz4
    .venv/bin/python tools/sink_cpu.py --where direct --records 1000000
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def direct(bootstrap: str, broker_pid: int, table: Any, codec: str, rounds: int) -> None:
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kproto.spark.sink import KprotoWriter

    batches = table.to_batches(max_chunksize=10_000)
    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
    used = []
    for r in range(rounds + 1):
        writer = KprotoWriter({"kafka.bootstrap.servers": bootstrap, "topic": f"t-{r}",
                               "kafka.compression.type": codec}, schema)
        c0, b0, t0 = time.process_time(), _cpu(broker_pid), time.perf_counter()
        writer.write(iter(batches))
        cpu, broker = time.process_time() - c0, _cpu(broker_pid) - b0
        print(f"round {r}: sink CPU {cpu:.3f} s, broker CPU {broker:.3f} s, "
              f"wall {time.perf_counter() - t0:.3f} s", flush=True)
        if r:
            used.append(cpu)
    print(f"median sink CPU {statistics.median(used):.3f} s")


def _timed_source(out: str) -> type:
    """The sink with each task's process CPU over write() written to ``out``.*
    (a class made here, so that cloudpickle ships it by value)."""
    from kproto.spark import KprotoDataSource
    from kproto.spark.sink import KprotoCommitMessage, KprotoWriter

    class TimedWriter(KprotoWriter):
        discard = False

        def write(self, iterator: Any) -> Any:
            before = os.times()
            try:
                if self.discard:        # only Spark's Arrow stream read
                    return KprotoCommitMessage(sum(b.num_rows for b in iterator), 0)
                return super().write(iterator)
            finally:
                after = os.times()
                with open(f"{out}.{os.getpid()}.{time.time_ns()}", "w") as f:
                    f.write(str(after.user - before.user + after.system - before.system))

    class Timed(KprotoDataSource):
        @classmethod
        def name(cls) -> str:
            return "kproto_timed"

        def writer(self, schema: Any, overwrite: bool) -> Any:
            w = TimedWriter(self.options, schema)
            w.discard = self.options.get("discard") == "true"
            return w

    return Timed


def spark(bootstrap: str, table: Any, codec: str, rounds: int) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kproto
    import kproto.spark

    session = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "3g").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    kproto.spark.register(session)
    out = os.path.join(tempfile.mkdtemp(), "task")
    session.dataSource.register(_timed_source(out))
    with kproto.Producer(bootstrap_servers=bootstrap) as p:
        p.send_batch("source", table).result(120)
    df = (session.read.format("kproto").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", "source").load().select("key", "value").persist())
    assert df.count() == table.num_rows
    for discard in ("false", "true"):
        used = []
        for r in range(rounds + 1):
            for f in glob.glob(out + ".*"):
                os.unlink(f)
            t0 = time.perf_counter()
            (df.write.format("kproto_timed").mode("append").option("discard", discard)
             .option("kafka.bootstrap.servers", bootstrap).option("kafka.compression.type", codec)
             .option("topic", f"w-{uuid.uuid4().hex[:8]}").save())
            wall = time.perf_counter() - t0
            tasks = [float(open(f).read()) for f in glob.glob(out + ".*")]
            print(f"{'counting' if discard == 'true' else 'kproto'} round {r}: {len(tasks)} tasks, "
                  f"their CPU over write() {sum(tasks):.2f} s, job wall {wall:.2f} s", flush=True)
            if r:
                used.append(sum(tasks))
        print(f"{'counting writer' if discard == 'true' else 'kproto sink'}: median task CPU "
              f"{statistics.median(used):.2f} s")
    session.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--where", choices=["spark", "direct"], default="spark")
    parser.add_argument("--codec", default="none")
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from bench_spark import make_table

    from kproto.testing import TansuBroker

    table = make_table(args.records)
    with TansuBroker() as broker:
        if args.where == "direct":
            assert broker.pid is not None
            direct(broker.bootstrap, broker.pid, table, args.codec, args.rounds)
        else:
            spark(broker.bootstrap, table, args.codec, args.rounds)


if __name__ == "__main__":
    main()
