"""The "kproto" Spark data source against its ceilings, all in one run (issue 5).

One local[2] SparkSession and one Tansu broker (both started by module fixtures,
sharing the machine's cores). A 4-partition topic per codec (none, lz4) is filled
once with ``KPROTO_BENCH_RECORDS`` records (default 2,000,000: 16-byte keys,
100-byte text-like values) by kproto's ``send_batch``. Then, per codec:

- read: ``spark.read.format("kproto")...load().count()`` and the same DataFrame
  written to parquet (snappy, a temporary directory), against
  (a) a synthetic Arrow Python data source in the same session: the same schema,
  row count and 4 partitions, whose ``read()`` builds 8 ``pyarrow.RecordBatch``es
  of 10,000 rows in Spark's exact Arrow layout (keys and values made like the
  topic's) and hands them out in turn (the ceiling of any Python data source
  here), and
  (b) ``kproto.Consumer.read_range`` of the whole topic outside Spark (the
  client's own rate against this broker), and ``kproto.spark.read_partition``
  called directly, partition after partition, outside Spark (the source's read
  path without Spark).
- write: the key and value columns of the topic (read by kproto's source once,
  cached in Spark's memory, untimed) written with ``df.write.format("kproto")`` to
  a fresh topic (same codec), at-least-once and with ``exactlyOnce=true`` (a
  transaction per task, committed by the driver), against an Arrow writer that
  counts the batches and discards them (the ceiling of any Python data source
  writer).

Full mode: one untimed warm-up round, then 3 timed rounds (median reported).
Each round is wall time of the whole Spark action (``load()`` and planning
included: both sides pay them) and the CPU seconds of this benchmark's process
tree over the round: this process and its descendants (Spark's JVM, its Python
workers, the Tansu broker; each kept apart, other jobs on the machine not
counted), user+system from ``/proc/<pid>/stat`` sampled every 50 ms (see
``TreeCpu``). The machine's busy CPU seconds over the same span (``/proc/stat``)
are kept too (``machine_cpu``): the difference is what other jobs took while the
round ran. Results are checked (counts, the parquet output, the records the sink
wrote), outside the timed span; benchmarks never fail on timing. Written topics
are deleted after each round (Tansu keeps them in memory).

Quick mode (``KPROTO_BENCH_RECORDS`` < 100,000, what CI runs) does one round of
codec "none" only: it proves the benchmark runs, not how fast.

    python benchmarks/bench_spark.py --table            # runs it, prints markdown
    python benchmarks/bench_spark.py --table --benchmark-json=bench-spark.json
    python benchmarks/bench_spark.py --table bench-spark.json   # tables from a saved run
    KPROTO_BENCH_RECORDS=5000 python3 dev.py bench -q --benchmark-disable   # CI smoke run
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pytest

import kproto
from kproto.testing import TansuBroker

pyspark = pytest.importorskip("pyspark")

RECORDS = int(os.environ.get("KPROTO_BENCH_RECORDS", "2000000"))
QUICK = RECORDS < 100_000
KEY_BYTES, VALUE_BYTES = 16, 100
PARTITIONS = 4                                  # Tansu auto-creates topics with 4
CODECS_ALL = ["none", "lz4"]
CODECS = CODECS_ALL[:1] if QUICK else CODECS_ALL
ROUNDS = 1 if QUICK else 3
SYNTHETIC_BATCH = 10_000                        # rows per batch of the synthetic source
SYNTHETIC_POOL = 8                              # distinct batches it cycles through
TIMEOUT = 60 + RECORDS / 10_000                 # a hang guard, never a timing check


# ---------------------------------------------------------------- data and fixtures


def make_table(n: int, seed: int = 0) -> pa.Table:
    """``n`` records: unique 16-byte decimal keys, 100-byte values compressible like text
    (the records of ``bench_clients.py``)."""
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


def _sources() -> tuple[type, type]:
    """The synthetic reader and the discarding writer. Defined in a function so that
    Spark's cloudpickle ships the classes by value: its Python workers need not
    import this benchmark module."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        InputPartition,
        WriterCommitMessage,
    )

    from kproto.spark import SCHEMA_DDL

    partitions, pool = PARTITIONS, SYNTHETIC_POOL
    topic = "bench-spark-synthetic-000"     # as long as the filled topics' names

    def columns(rows: int, count: int, seed: int) -> list[tuple[pa.Array, pa.Array]]:
        """``count`` (key, value) column pairs of ``rows`` rows, made like make_table's
        and distinct from each other, cheaply: every key is new, and the values are
        views into one random buffer at different offsets (local, so pickled by value:
        a module-level function would be imported by name in the workers)."""
        n = rows * count
        first = seed * n                    # < 10**7: the first 9 digits are zeros
        key_bytes = np.full((n, 16), ord("0"), np.uint8)
        key_bytes[:, 9:] += ((np.arange(first, first + n, dtype=np.int32)[:, None]
                              // 10 ** np.arange(6, -1, -1, dtype=np.int32)) % 10
                             ).astype(np.uint8)
        keys = pa.py_buffer(key_bytes)
        alphabet = np.frombuffer(b'abcdefghijklmnopqrstuvwxyz0123456789 ,:{}"', np.uint8)
        rng = np.random.default_rng(seed)
        values = pa.py_buffer(alphabet[rng.integers(0, 14, rows * 100 + count * 7,
                                                    dtype=np.uint8) * 3])

        def binary(data: pa.Buffer, width: int, start: int) -> pa.Array:
            offsets = np.arange(start, start + (rows + 1) * width, width, dtype=np.int32)
            return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets),
                                                             data])

        return [(binary(keys, 16, i * rows * 16), binary(values, 100, i * 7))
                for i in range(count)]

    class Slice(InputPartition):
        def __init__(self, partition: int, rows: int) -> None:
            self.partition, self.rows = partition, rows

    class SyntheticReader(DataSourceReader):
        def __init__(self, options: Any) -> None:
            self.rows = int(options["rows"])
            self.batch = int(options["batch"])

        def partitions(self) -> list[Any]:
            share = [self.rows // partitions + (p < self.rows % partitions)
                     for p in range(partitions)]
            return [Slice(p, n) for p, n in enumerate(share)]

        def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
            """``pool`` batches built before the first yield, then handed out in turn
            (distinct keys and values over ``pool`` x ``batch`` rows, so that parquet
            sees data like the topic's, not one batch repeated)."""
            import kproto.spark as ks

            rows = min(self.batch, partition.rows)
            if not rows:
                return
            batches = []
            for key, value in columns(rows, min(pool, -(-partition.rows // rows)),
                                      partition.partition):
                batches.append(pa.RecordBatch.from_arrays([
                    key, value, pa.array([topic] * rows, pa.string()),
                    pa.array(np.full(rows, partition.partition, np.int32)),
                    pa.array(np.arange(rows, dtype=np.int64)),
                    pa.array(np.full(rows, 1_700_000_000_000_000, np.int64),
                             pa.timestamp("us", tz="UTC")),
                    pa.array(np.zeros(rows, np.int32)),
                ], schema=ks.spark_arrow_schema(False)))
            left, i = partition.rows, 0
            while left > 0:
                batch = batches[i % len(batches)]
                yield batch if left >= rows else batch.slice(0, left)
                left -= rows
                i += 1

    class SyntheticSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "kproto_synthetic"

        def schema(self) -> str:
            return SCHEMA_DDL

        def reader(self, schema: Any) -> Any:
            return SyntheticReader(self.options)

    class Counted(WriterCommitMessage):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class DiscardWriter(DataSourceArrowWriter):
        def __init__(self, report: str | None) -> None:
            self.report = report

        def write(self, iterator: Iterator[Any]) -> Any:
            rows = 0
            for batch in iterator:
                rows += batch.num_rows
            return Counted(rows)

        def commit(self, messages: list[Any]) -> None:
            if self.report:     # the rows every task saw, for the benchmark to check
                with open(self.report, "w") as f:
                    f.write(str(sum(m.rows for m in messages)))

        def abort(self, messages: list[Any]) -> None:
            pass

    class DiscardSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "kproto_discard"

        def writer(self, schema: Any, overwrite: bool) -> Any:
            return DiscardWriter(self.options.get("report"))

    return SyntheticSource, DiscardSource


class Filled(NamedTuple):
    codec: str
    topic: str
    ends: dict[int, int]


@pytest.fixture(scope="module")
def broker() -> Any:
    with TansuBroker() as b:
        yield b.bootstrap


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    import kproto.spark

    builder = SparkSession.builder
    if QUICK:       # C1 only: a JVM that starts and runs a few tiny jobs sooner (~20 %)
        builder = builder.config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
    session = (builder.master("local[2]").appName("kproto-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "3g")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    kproto.spark.register(session)
    for source in _sources():
        session.dataSource.register(source)
    if not QUICK:   # warm up (the first job and Python workers cost seconds; the
        # filled fixture's check read warms kproto's source the same way)
        assert _synthetic(session, 1000).count() == 1000
    yield session
    session.stop()
    # stop the JVM now and reap it (it would otherwise outlive the session until this
    # process exits, and be left unreaped where nothing adopts orphans)
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
        SparkContext._gateway = SparkContext._jvm = None
    if proc is not None:
        proc.stdin.close()      # the JVM exits on EOF of its stdin
        try:
            proc.wait(timeout=30)
        except Exception:       # noqa: BLE001 - a hung JVM must not outlive the run
            proc.kill()
            proc.wait(timeout=30)


@pytest.fixture(scope="module", params=CODECS)
def filled(request: pytest.FixtureRequest, broker: str, spark: Any) -> Filled:
    """A 4-partition topic holding RECORDS records compressed with the codec, and one
    untimed read of it by kproto's source (a check, and the Python workers' first
    ``import kproto``)."""
    codec = request.param
    topic = f"bench-spark-{codec}-{uuid.uuid4().hex[:8]}"
    table = make_table(RECORDS)
    with kproto.Producer(bootstrap_servers=broker, compression_type=codec) as p:
        meta = p.send_batch(topic, table).result(timeout=TIMEOUT)
    del table
    ends = dict.fromkeys(range(PARTITIONS), 0)
    for m in meta:
        ends[m.partition] = max(ends[m.partition], m.base_offset + m.record_count)
    assert sum(ends.values()) == RECORDS
    f = Filled(codec, topic, ends)
    assert _kproto(spark, broker, f).count() == RECORDS
    return f


@pytest.fixture(scope="module")
def cached(spark: Any, broker: str, filled: Filled) -> Iterator[Any]:
    """key and value of the filled topic, read once by kproto's source and cached."""
    from pyspark import StorageLevel

    df = _kproto(spark, broker, filled).select("key", "value").persist(
        StorageLevel.MEMORY_AND_DISK)
    assert df.count() == RECORDS
    yield df
    df.unpersist(blocking=True)


def _kproto(spark: Any, broker: str, f: Filled) -> Any:
    return (spark.read.format("kproto").option("kafka.bootstrap.servers", broker)
            .option("subscribe", f.topic).load())


def _synthetic(spark: Any, rows: int = RECORDS) -> Any:
    return (spark.read.format("kproto_synthetic").option("rows", str(rows))
            .option("batch", str(SYNTHETIC_BATCH)).load())


# ---------------------------------------------------------------- timing


def _machine_cpu() -> float:
    """Busy CPU seconds of the whole machine so far (user+nice+system+irq+softirq+steal)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields[:3]) + sum(fields[5:8])) / TICK


TICK = os.sysconf("SC_CLK_TCK")


KINDS = ("jvm", "python", "broker")


def _tree() -> dict[int, tuple[str, float, float]]:
    """This process and its descendants (``/proc/<pid>/task/<tid>/children``):
    ``{pid: (kind, own CPU s, reaped children's CPU s)}``, kind "jvm" (Spark's JVM),
    "broker" (Tansu) or "python" (this process, Spark's Python workers)."""
    out: dict[int, tuple[str, float, float]] = {}
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/stat") as f:
                comm, rest = f.read().split(" (", 1)[1].rsplit(")", 1)
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, IndexError, ValueError):   # gone meanwhile
            continue
        fields = rest.split()
        kind = "jvm" if comm == "java" else "broker" if comm == "tansu" else "python"
        out[pid] = (kind, (int(fields[11]) + int(fields[12])) / TICK,
                    (int(fields[13]) + int(fields[14])) / TICK)
    return out


class TreeCpu:
    """CPU seconds used by this process tree between ``__init__`` and ``stop()``, by
    kind. Sampled every ``interval`` s by a thread, because a process can end within a
    round without its time reaching a parent that stays: Spark's Python daemon
    ignores SIGCHLD, so the workers it forks are reaped by the kernel and their time
    is in no one's reaped-children counters. A process is counted from its first
    sample (0 if it started after ``__init__``) to its last; a worker that lives less
    than ``interval`` is missed, one that ends loses at most ``interval`` of its time."""

    def __init__(self, interval: float = 0.05) -> None:
        self.first = _tree()
        self.last = dict(self.first)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._done.wait(interval):
            self.last.update(_tree())

    def stop(self) -> dict[str, float]:
        self._done.set()
        self._thread.join()
        self.last.update(_tree())
        used = dict.fromkeys(KINDS, 0.0)
        for pid, (kind, own, reaped) in self.last.items():
            _, own0, reaped0 = self.first.get(pid, (kind, 0.0, 0.0))
            used[kind] += (own - own0) + (reaped - reaped0)
        return used


class Clock:
    def __init__(self) -> None:
        self.records = 0
        self.tree, self.m0 = TreeCpu(), _machine_cpu()
        self.t0 = time.perf_counter()

    def stop(self, records: int) -> None:
        self.wall = time.perf_counter() - self.t0
        self.cpu_by = self.tree.stop()
        self.cpu = sum(self.cpu_by.values())
        self.machine_cpu = _machine_cpu() - self.m0
        self.records = records


def run_rounds(benchmark: Any, fn: Callable[[Clock], None], *, rounds: int = ROUNDS,
               expect: int = RECORDS, **info: Any) -> None:
    """``fn(clock)`` once per round under pytest-benchmark; the median round goes to
    extra_info (with every round's numbers and the load averages before and after)."""
    clocks: list[Clock] = []

    def once() -> None:
        clock = Clock()
        fn(clock)
        clocks.append(clock)

    load = os.getloadavg()
    if not QUICK:   # one untimed round first: first-use costs (JIT, imports in the
        once()      # Python workers, a first topic) are not what is measured
        clocks.clear()
    benchmark.pedantic(once, rounds=rounds, iterations=1)
    for c in clocks:
        assert c.records == expect, f"{c.records:,} records, expected {expect:,}"
    mid = sorted(clocks, key=lambda c: c.wall)[len(clocks) // 2]
    benchmark.extra_info.update(
        records=mid.records, bytes=mid.records * (KEY_BYTES + VALUE_BYTES), wall=mid.wall,
        cpu=mid.cpu, cpu_by=mid.cpu_by, machine_cpu=mid.machine_cpu,
        rate=mid.records / mid.wall,
        load_before=load, load_after=os.getloadavg(),
        rounds=[{"wall": c.wall, "cpu": c.cpu, "cpu_by": c.cpu_by,
                 "machine_cpu": c.machine_cpu} for c in clocks], **info)


# ---------------------------------------------------------------- reads


def _count(df: Any) -> Callable[[Clock], None]:
    def go(clock: Clock) -> None:
        clock.stop(df().count())
    return go


def _parquet(spark: Any, df: Callable[[], Any], where: str) -> Callable[[Clock], None]:
    def go(clock: Clock) -> None:
        df().write.mode("overwrite").parquet(where)
        clock.stop(RECORDS)
        assert spark.read.parquet(where).count() == RECORDS     # untimed check
    return go


READS = ["kproto_count", "synthetic_count", "kproto_parquet", "synthetic_parquet"]


@pytest.mark.parametrize("variant", READS)
def test_spark_read(benchmark: Any, spark: Any, broker: str, filled: Filled, variant: str,
                    tmp_path: Any) -> None:
    benchmark.group = f"spark read {filled.codec}"
    source, how = variant.split("_")
    make = ((lambda: _kproto(spark, broker, filled)) if source == "kproto"
            else (lambda: _synthetic(spark)))
    where = str(tmp_path / "out.parquet")
    try:
        run_rounds(benchmark, _count(make) if how == "count" else _parquet(spark, make, where))
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_read_range(benchmark: Any, broker: str, filled: Filled) -> None:
    """kproto's own bounded read of the whole topic, outside Spark, one process."""
    benchmark.group = f"spark read {filled.codec}"

    def go(clock: Clock) -> None:
        with kproto.Consumer(bootstrap_servers=broker) as c:
            t = c.read_range(filled.topic, {p: (0, e) for p, e in filled.ends.items()},
                             timeout_ms=int(TIMEOUT * 1000), headers=False)
            clock.stop(t.num_rows)

    run_rounds(benchmark, go)


def test_read_partition_direct(benchmark: Any, broker: str, filled: Filled) -> None:
    """The source's executor path (``kproto.spark.read_partition``, Arrow cast included)
    called in this process, one partition after another: the source without Spark."""
    from kproto.spark import KafkaRange, client_settings, read_partition

    benchmark.group = f"spark read {filled.codec}"
    settings = tuple(sorted(client_settings({"kafka.bootstrap.servers": broker}).items()))
    sizes: list[int] = []

    def go(clock: Clock) -> None:
        n = 0
        sizes.clear()
        for p, end in filled.ends.items():
            for batch in read_partition(KafkaRange(filled.topic, p, 0, end, settings,
                                                   False, True)):
                n += batch.num_rows
                sizes.append(batch.num_rows)
        clock.stop(n)

    run_rounds(benchmark, go)
    benchmark.extra_info["rows_per_batch"] = statistics.median(sizes)


# ---------------------------------------------------------------- writes


@pytest.mark.parametrize("variant", ["kproto", "kproto_exactly_once", "discard"])
def test_spark_write(benchmark: Any, spark: Any, broker: str, filled: Filled, cached: Any,
                     variant: str, tmp_path: Any) -> None:
    benchmark.group = f"spark write {filled.codec}"
    report = str(tmp_path / "rows")

    def go(clock: Clock) -> None:
        w = cached.write.mode("append")
        if variant == "discard":
            w.format("kproto_discard").option("report", report).save()
            clock.stop(RECORDS)
            with open(report) as f:
                assert int(f.read()) == RECORDS     # untimed check
            os.unlink(report)
            return
        topic = f"bench-spark-write-{filled.codec}-{uuid.uuid4().hex[:8]}"
        (w.format("kproto").option("kafka.bootstrap.servers", broker)
         .option("kafka.compression.type", filled.codec).option("topic", topic)
         .option("exactlyOnce", str(variant == "kproto_exactly_once").lower()).save())
        clock.stop(RECORDS)
        # untimed: every record is in the topic, then the topic goes (Tansu holds it in
        # memory); a transaction's commit marker takes an offset of each partition
        with kproto.Consumer(bootstrap_servers=broker) as c:
            ends = c.end_offsets([(topic, p) for p in range(PARTITIONS)])
            got = c.read_range(topic, headers=False).num_rows \
                if variant == "kproto_exactly_once" else sum(ends.values())
        assert got == RECORDS, (got, ends)
        with kproto.Admin(bootstrap_servers=broker) as admin:
            admin.delete_topics([topic])

    run_rounds(benchmark, go)


# ---------------------------------------------------------------- the markdown table


def tables(path: str) -> str:
    """The markdown table of BENCHMARKS.md from a pytest-benchmark JSON file."""
    got: dict[tuple[str, str], dict[str, Any]] = {}
    for b in json.load(open(path))["benchmarks"]:
        info = b["extra_info"]
        if "bench_spark" not in b.get("fullname", "") or "wall" not in info:
            continue        # another module's (a whole benchmarks/ run) or no result
        name, params = b["name"].split("[")[0], b.get("params") or {}
        codec = params["filled"] if "filled" in params else b["param"].split("-")[0]
        what = {"test_read_range": "read_range", "test_read_partition_direct":
                "read_partition_direct"}.get(name)
        if what is None:
            what = params["variant"] if name == "test_spark_read" else \
                f"write_{params['variant']}"
        got[codec, what] = info
    labels = {
        "kproto_count": "read: kproto source → count()",
        "synthetic_count": "read: synthetic Arrow source → count()",
        "kproto_parquet": "read: kproto source → parquet",
        "synthetic_parquet": "read: synthetic Arrow source → parquet",
        "read_range": "read: Consumer.read_range, no Spark",
        "read_partition_direct": "read: spark.read_partition ×4 in turn, no Spark",
        "write_kproto": "write key+value: kproto sink",
        "write_kproto_exactly_once": "write key+value: kproto sink, exactlyOnce=true",
        "write_discard": "write key+value: discarding Arrow writer",
    }
    ratios = {
        "kproto_count": [("synthetic_count", "÷ synthetic"), ("read_range", "÷ read_range")],
        "kproto_parquet": [("synthetic_parquet", "÷ synthetic"),
                           ("read_range", "÷ read_range")],
        "read_partition_direct": [("read_range", "÷ read_range")],
        "write_kproto": [("write_discard", "÷ discarding writer")],
        "write_kproto_exactly_once": [("write_kproto", "÷ at-least-once"),
                                      ("write_discard", "÷ discarding writer")],
    }
    n = max((i["records"] for i in got.values()), default=0)
    rounds = max((len(i["rounds"]) for i in got.values()), default=0)
    out = [f"Records: {n:,} (4 partitions, 16-byte keys, 100-byte values: 116 bytes a "
           f"record for MB/s); median of {rounds} rounds by wall time, after a warm-up "
           "round. CPU s: this benchmark's process tree (Spark's JVM and Python workers, "
           "the broker); machine CPU s: the whole machine over the same span.\n",
           "| codec | what | records/s | MB/s | wall s | CPU s (JVM / Python / broker) "
           "| machine CPU s | records per CPU-s | ratio |",
           "|---|---|---|---|---|---|---|---|---|"]
    loads = []
    for codec in CODECS_ALL:
        for what, label in labels.items():
            i = got.get((codec, what))
            if i is None:
                continue
            loads += [i["load_before"][0], i["load_after"][0]]
            rate = i["records"] / i["wall"]
            parts = []
            for ref, text in ratios.get(what, []):
                r = got.get((codec, ref))
                if r is not None:
                    parts.append(f"{rate / (r['records'] / r['wall']):.2f}× {text}")
            per_cpu = f"{i['records'] / i['cpu'] / 1e6:.2f} M" if i["cpu"] > 0 else "-"
            by = " / ".join(f"{i['cpu_by'][k]:.1f}" for k in KINDS)
            extra = (f" ({i['rows_per_batch']:,.0f} rows a batch)"
                     if "rows_per_batch" in i else "")
            out.append(f"| {codec} | {label}{extra} | {rate / 1e6:.2f} M/s | "
                       f"{i['records'] * (KEY_BYTES + VALUE_BYTES) / i['wall'] / 1e6:.0f} | "
                       f"{i['wall']:.2f} | {i['cpu']:.1f} ({by}) | {i.get('machine_cpu', 0):.1f} | "
                       f"{per_cpu} | {'; '.join(parts) or '-'} |")
    if loads:
        out.append(f"\n1-minute load average at the start and end of each test: "
                   f"{min(loads):.2f}-{max(loads):.2f}.")
    spread = []
    for (codec, what), i in sorted(got.items()):
        walls = [r["wall"] for r in i["rounds"]]
        if len(walls) > 1:
            spread.append(f"{codec} {what} {min(walls):.2f}-{max(walls):.2f} s")
    if spread:
        out.append("Round walls (min-max): " + "; ".join(spread) + ".")
    return "\n".join(out)


if __name__ == "__main__":
    from summarize import table_main  # benchmarks/ is sys.path[0] here

    sys.exit(table_main(__file__, __doc__, tables, sys.argv[1:]))
