"""The ``kproto`` command: look at a cluster, move records in and out, debug captures.

    kproto -b broker:9092 metadata
    kproto -b broker:9092 topics create events --partitions 12
    kproto -b broker:9092 produce events < lines.txt
    kproto -b broker:9092 produce events --file table.parquet
    kproto -b broker:9092 consume events --from earliest --to end -o out.parquet
    kproto -b broker:9092 consume events --format json --count 10
    kproto -b broker:9092 offsets events
    kproto -b broker:9092 groups describe etl
    kproto decode capture.bin --fetch-version 12
    kproto bench
    kproto demo

``-b`` defaults to ``$KPROTO_BOOTSTRAP_SERVERS``; ``-X key=value`` passes any
client setting (Kafka's names); ``--json`` prints machine-readable output.
Errors are one line on stderr with a non-zero exit code; ``--debug`` shows the
traceback and logs the protocol traffic.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from .errors import ConfigError, KprotoError

__all__ = ["main"]


class CliError(Exception):
    """A usage problem, reported as one line."""


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    if not args.bootstrap_servers:
        raise CliError("no broker given: use -b HOST:PORT or set KPROTO_BOOTSTRAP_SERVERS")
    settings: dict[str, Any] = {"bootstrap.servers": args.bootstrap_servers,
                                "client.id": "kproto-cli"}
    for item in args.X or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"malformed -X setting {item!r}: use -X key=value "
                           "(e.g. -X request.timeout.ms=5000)")
        settings[key.strip()] = value
    return settings


def _filtered(settings: dict[str, Any], client: str) -> dict[str, Any]:
    """The settings that apply to ``client`` (others are for the other clients)."""
    from .config import ALIASES, OPTIONS

    out = {}
    for key, value in settings.items():
        name = ALIASES.get(key.replace(".", "_").lower(), key.replace(".", "_").lower())
        opt = OPTIONS.get(name)
        if opt is None or client in opt.clients:
            out[key] = value           # unknown keys pass through: resolve() names them
    return out


def _out(args: argparse.Namespace, data: Any, table: list[tuple[Any, ...]] | None = None,
         header: tuple[str, ...] | None = None, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    if args.json:
        print(json.dumps(data, default=str, indent=None), file=stream)
    elif table is not None and header is not None:
        from .demo import _table

        print(_table(table, header), file=stream)
    else:
        print(data, file=stream)


# --------------------------------------------------------------------------- commands


def cmd_metadata(args: argparse.Namespace) -> None:
    from .admin import Admin

    with Admin(_filtered(_settings(args), "admin")) as admin:
        meta = admin.describe_cluster()
    topics = {n: t for n, t in sorted(meta.topics.items())
              if not args.topic or n in args.topic}
    data: dict[str, Any] = {
        "cluster_id": meta.cluster_id, "controller": meta.controller_id,
        "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in sorted(meta.brokers.values(), key=lambda b: b.node_id)],
        "topics": [{"name": n, "id": str(t.topic_id) if t.topic_id else None,
                    "error": t.error_code, "partitions": [
                        {"partition": p.partition, "leader": p.leader,
                         "replicas": list(p.replicas), "isr": list(p.isr),
                         "error": p.error_code}
                        for p in sorted(t.partitions.values(), key=lambda p: p.partition)]}
                   for n, t in topics.items()],
    }
    if args.json:
        _out(args, data)
        return
    print(f"cluster {meta.cluster_id}, controller {meta.controller_id}")
    _out(args, data, [(b["id"], b["host"], b["port"], b["rack"] or "")
                      for b in data["brokers"]], ("broker", "host", "port", "rack"))
    rows = [(t["name"], p["partition"], p["leader"], ",".join(map(str, p["replicas"])),
             ",".join(map(str, p["isr"])), p["error"])
            for t in data["topics"] for p in t["partitions"]]
    print()
    _out(args, data, rows, ("topic", "partition", "leader", "replicas", "isr", "error"))


def cmd_topics(args: argparse.Namespace) -> None:
    from .admin import Admin

    with Admin(_filtered(_settings(args), "admin")) as admin:
        if args.action == "create":
            admin.create_topics({t: args.partitions for t in args.names},
                                replication_factor=args.replication_factor,
                                configs=dict(c.split("=", 1) for c in args.config or []),
                                exist_ok=args.if_not_exists)
            if args.json:
                _out(args, {"created": args.names})
            else:
                print(f"created {', '.join(args.names)}")
        elif args.action == "delete":
            admin.delete_topics(args.names)
            if args.json:
                _out(args, {"deleted": args.names})
            else:
                print(f"deleted {', '.join(args.names)}")
        else:
            topics = admin.list_topics()
            if args.json:
                _out(args, [{"name": n, "partitions": len(t.partitions)}
                            for n, t in topics.items()])
            else:
                _out(args, None, [(n, len(t.partitions)) for n, t in topics.items()],
                     ("topic", "partitions"))


_OFFSET_SPEC = re.compile(r"earliest|latest|end|@\d+|-\d+|\d+")


def _check_offset_spec(spec: str) -> None:
    """Refuse a malformed ``--from``/``--to`` before anything is asked of a broker."""
    if not _OFFSET_SPEC.fullmatch(spec):
        raise CliError(f"bad offset {spec!r}: use earliest, latest, a number, -N (the last "
                       "N) or @MS (a time in ms)")


def _offsets_of(consumer: Any, topic: str, partitions: list[int], spec: str
                ) -> dict[int, int]:
    """``earliest``, ``latest``/``end``, an offset, or ``@<ms>`` / ``-<n>`` (last n):
    a spec :func:`_check_offset_spec` accepted (user input is checked before any
    broker is asked)."""
    tps = [(topic, p) for p in partitions]
    if spec == "earliest":
        return {tp.partition: o for tp, o in consumer.beginning_offsets(tps).items()}
    if spec in ("latest", "end"):
        return {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
    if spec.startswith("@"):
        found = consumer.offsets_for_times({tp: int(spec[1:]) for tp in tps})
        ends = consumer.end_offsets(tps)
        return {tp.partition: (o.offset if o else ends[tp]) for tp, o in found.items()}
    if spec.startswith("-"):
        ends = consumer.end_offsets(tps)
        starts = consumer.beginning_offsets(tps)
        return {tp.partition: max(starts[tp], e - int(spec[1:])) for tp, e in ends.items()}
    return dict.fromkeys(partitions, int(spec))


def _partitions(consumer: Any, topic: str, wanted: list[int] | None) -> list[int]:
    meta = consumer._cluster.wait_for_topics([topic], consumer._cluster.request_timeout,
                                             auto_create=False)
    have = meta.partitions(topic)
    if wanted:
        missing = sorted(set(wanted) - set(have))
        if missing:
            raise CliError(f"topic {topic!r} has no partition {missing[0]} "
                           f"(it has {len(have)})")
        return sorted(wanted)
    return have


def cmd_offsets(args: argparse.Namespace) -> None:
    from .consumer import Consumer

    with Consumer(_filtered(_settings(args), "consumer")) as c:
        parts = _partitions(c, args.topic, args.partition)
        first = _offsets_of(c, args.topic, parts, "earliest")
        last = _offsets_of(c, args.topic, parts, "latest")
        at = _offsets_of(c, args.topic, parts, f"@{args.time}") if args.time is not None \
            else None
    data = [{"partition": p, "earliest": first[p], "latest": last[p],
             **({"at_time": at[p]} if at else {})} for p in parts]
    header = ("partition", "earliest", "latest") + (("at time",) if at else ())
    _out(args, data, [tuple(d.values()) for d in data], header)


def cmd_groups(args: argparse.Namespace) -> None:
    from .admin import Admin
    from .consumer import Consumer

    settings = _settings(args)
    with Admin(_filtered(settings, "admin")) as admin:
        if args.action == "list":
            groups = admin.list_groups()
            _out(args, [g.__dict__ for g in groups],
                 [(g.group_id, g.protocol_type, g.state or "") for g in groups],
                 ("group", "type", "state"))
            return
        result: list[dict[str, Any]] = []
        for gid in args.groups:
            [desc] = admin.describe_groups([gid])
            committed = admin.list_consumer_group_offsets(gid)
            lag: list[dict[str, Any]] = []
            if committed:
                with Consumer(_filtered(settings, "consumer")) as c:
                    ends = c.end_offsets(list(committed))
                owner = {tp: m.member_id for m in desc.members for tp in m.assignment}
                lag = [{"topic": tp.topic, "partition": tp.partition, "committed": off,
                        "end": ends[tp], "lag": max(0, ends[tp] - off),
                        "member": owner.get(tp)} for tp, off in committed.items()]
            result.append({
                "group": gid, "state": desc.state, "protocol": desc.protocol,
                "members": [{"member_id": m.member_id, "client_id": m.client_id,
                             "host": m.client_host,
                             "assignment": sorted(f"{tp.topic}[{tp.partition}]"
                                                  for tp in m.assignment)}
                            for m in desc.members],
                "offsets": lag})
        if args.json:
            _out(args, result)
            return
        for g in result:
            print(f"group {g['group']}: {g['state']}, protocol {g['protocol'] or '-'}, "
                  f"{len(g['members'])} members")
            if g["members"]:
                _out(args, None, [(m["member_id"], m["client_id"], m["host"],
                                   " ".join(m["assignment"])) for m in g["members"]],
                     ("member", "client", "host", "assignment"))
            if g["offsets"]:
                _out(args, None, [(o["topic"], o["partition"], o["committed"], o["end"],
                                   o["lag"]) for o in g["offsets"]],
                     ("topic", "partition", "committed", "end", "lag"))


def cmd_transactions(args: argparse.Namespace) -> None:
    from .admin import Admin

    with Admin(_filtered(_settings(args), "admin")) as admin:
        if args.action == "list":
            found = admin.list_transactions(states=args.state or ())
            _out(args, [t.__dict__ for t in found],
                 [(t.transactional_id, t.producer_id, t.state) for t in found],
                 ("transactional id", "producer id", "state"))
        elif args.action == "describe":
            if not args.names:
                raise CliError("transactions describe needs transactional ids")
            descs = admin.describe_transactions(args.names)
            data = [{**d.__dict__, "partitions": sorted(f"{tp.topic}[{tp.partition}]"
                                                        for tp in d.partitions)} for d in descs]
            _out(args, data, [(d["transactional_id"], d["state"], d["producer_id"],
                               d["producer_epoch"], d["timeout_ms"], d["start_time_ms"],
                               " ".join(d["partitions"])) for d in data],
                 ("transactional id", "state", "producer id", "epoch", "timeout ms",
                  "started ms", "partitions"))
        else:
            if len(args.names) != 1:
                raise CliError("transactions producers needs one topic")
            topic = args.names[0]
            info = admin.list_topics().get(topic)
            if info is None:
                raise CliError(f"topic {topic!r} not found")
            parts = args.partition or sorted(info.partitions)
            producers = admin.describe_producers([(topic, p) for p in parts])
            rows = [{"partition": tp.partition, **s.__dict__}
                    for tp, states in producers.items() for s in states]
            _out(args, rows, [tuple(r.values()) for r in rows],
                 ("partition", "producer id", "epoch", "last sequence", "last timestamp",
                  "coordinator epoch", "open transaction from"))


def _read_input(args: argparse.Namespace) -> Any:
    """The records to produce, as a pyarrow Table."""
    import pyarrow as pa

    if args.file and args.file.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        return pq.read_table(args.file)
    if args.file and args.file.endswith((".arrow", ".feather", ".ipc")):
        import pyarrow.feather as feather

        return feather.read_table(args.file)
    stream = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: SIM115
    try:
        lines = [line.rstrip(b"\r\n") for line in stream]
    finally:
        if args.file:
            stream.close()
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    sep = args.key_separator.encode() if args.key_separator else None
    for line in lines:
        if sep is not None and sep in line:
            k, _, v = line.partition(sep)
            keys.append(k)
            values.append(v)
        else:
            keys.append(None)
            values.append(line)
    cols: dict[str, Any] = {"value": pa.array(values, pa.binary())}
    if sep is not None:
        cols["key"] = pa.array(keys, pa.binary())
    return pa.table(cols)


def cmd_produce(args: argparse.Namespace) -> None:
    import pyarrow as pa

    from .producer import Producer

    table = _read_input(args)
    if args.header:
        hdrs = [(h.split("=", 1)[0], h.split("=", 1)[1].encode() if "=" in h else None)
                for h in args.header]
        header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
        table = table.append_column("headers", pa.array(
            [[{"key": k, "value": v} for k, v in hdrs]] * table.num_rows, header_type))
    settings = _filtered(_settings(args), "producer")
    if args.compression:
        settings["compression.type"] = args.compression
    start = time.perf_counter()
    with Producer(settings) as producer:
        written = producer.send_batch(args.topic, table, partition=args.partition).result()
    elapsed = time.perf_counter() - start
    count = sum(b.record_count for b in written)
    parts = sorted({b.partition for b in written})
    if args.json:
        _out(args, {"topic": args.topic, "records": count, "partitions": parts,
                    "seconds": round(elapsed, 3)})
    else:
        print(f"produced {count:,} records to {args.topic} (partitions {parts}) in "
              f"{elapsed:.2f} s", file=sys.stderr)


class _Progress:
    """records, MB, rate and ETA on stderr (only on a terminal, or when forced)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self.start = self.last = time.perf_counter()
        self.records = self.bytes = 0

    def update(self, records: int, nbytes: int) -> None:
        self.records += records
        self.bytes += nbytes
        now = time.perf_counter()
        if self.enabled and (now - self.last > 0.2 or self.records >= self.total):
            self.last = now
            rate = self.records / max(now - self.start, 1e-9)
            left = (self.total - self.records) / rate if rate and self.total else 0
            print(f"\r{self.records:,}/{self.total:,} records  {self.bytes / 1e6:,.1f} MB  "
                  f"{rate:,.0f} rec/s  ETA {left:,.0f} s ", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled:
            print(file=sys.stderr)


def _batches(args: argparse.Namespace, consumer: Any, parts: list[int]
             ) -> Iterator[Any]:
    """Arrow batches from --from to --to (or forever with --follow), at most --count."""
    start = _offsets_of(consumer, args.topic, parts, args.from_)
    ends = None if args.follow else _offsets_of(consumer, args.topic, parts, args.to)
    consumer.assign([(args.topic, p) for p in parts])
    for p in parts:
        consumer.seek((args.topic, p), start[p])
    remaining = args.count
    if ends is not None:
        todo = {p: (start[p], ends[p]) for p in parts if ends[p] > start[p]}
        total = sum(b - a for a, b in todo.values())
        if remaining is not None:
            total = min(total, remaining)
        progress = _Progress(total, args.progress)
        import numpy as np

        end_of = np.full(max(parts) + 1, -1, np.int64)
        for p, (_, e) in todo.items():
            end_of[p] = e
        while any(consumer.position((args.topic, p)) < e for p, (_, e) in todo.items()) \
                and (remaining is None or remaining > 0):
            batch = consumer.poll_batch(1000)
            if not batch.num_rows:
                continue
            offsets = batch.column("offset").to_numpy()
            partitions = batch.column("partition").to_numpy()
            batch = batch.filter(offsets < end_of[partitions])     # each partition to its end
            if remaining is not None:
                batch = batch.slice(0, remaining)
                remaining -= batch.num_rows
            progress.update(batch.num_rows, batch.nbytes)
            if batch.num_rows:
                yield batch
        progress.close()
        return
    while remaining is None or remaining > 0:
        batch = consumer.poll_batch(1000)
        if remaining is not None:
            batch = batch.slice(0, remaining)
            remaining -= batch.num_rows
        if batch.num_rows:
            yield batch


def cmd_consume(args: argparse.Namespace) -> None:
    from .consumer import Consumer

    for spec in (args.from_, getattr(args, "to", None)):
        if spec is not None:
            _check_offset_spec(spec)
    settings = _filtered(_settings(args), "consumer")
    settings.setdefault("allow.auto.create.topics", "false")    # reading creates no topic
    with Consumer(settings) as consumer:
        parts = _partitions(consumer, args.topic, args.partition)
        if args.output:
            import pyarrow.parquet as pq

            writer = None
            written = 0
            try:
                for batch in _batches(args, consumer, parts):
                    if writer is None:
                        writer = pq.ParquetWriter(args.output, batch.schema)
                    writer.write_batch(batch)
                    written += batch.num_rows
            finally:
                if writer is not None:
                    writer.close()
            print(f"wrote {written:,} records to {args.output}", file=sys.stderr)
            return
        for batch in _batches(args, consumer, parts):
            _print_batch(args, batch)


def _print_batch(args: argparse.Namespace, batch: Any) -> None:
    def text(b: bytes | None) -> str | None:
        return None if b is None else b.decode("utf-8", "backslashreplace")

    rows = batch.to_pylist()
    fmt = getattr(args, "format", "table")
    if fmt == "raw":
        out = sys.stdout.buffer
        for r in rows:
            out.write((r["value"] or b"") + b"\n")
        out.flush()
    elif fmt == "json" or args.json:
        for r in rows:
            print(json.dumps({
                "topic": r["topic"], "partition": r["partition"], "offset": r["offset"],
                "timestamp": int(r["timestamp"].timestamp() * 1000) if r["timestamp"] else None,
                "key": text(r["key"]), "value": text(r["value"]),
                "headers": [[h["key"], text(h["value"])] for h in r["headers"] or []]}))
    else:
        from .demo import _table

        print(_table([(r["partition"], r["offset"], r["timestamp"], text(r["key"]) or "",
                       (text(r["value"]) or "")[:60]) for r in rows],
                     ("partition", "offset", "timestamp", "key", "value")))


def cmd_decode(args: argparse.Namespace) -> None:
    from . import records

    with open(args.file, "rb") as f:
        data = f.read()
    if args.fetch_version is not None:
        cols = records.decode_fetch_response(data, args.fetch_version)
        parts = [{"topic": p.topic or str(p.topic_id), "partition": p.partition,
                  "error": p.error_code, "high_watermark": p.high_watermark,
                  "bytes": len(p.records) if p.records is not None else 0}
                 for p in cols.fetch.partitions]
        if not args.json:
            _out(args, None, [tuple(p.values()) for p in parts],
                 ("topic", "partition", "error", "high watermark", "bytes"))
    else:
        cols = records.decode(data)
        parts = []
    table = cols.to_arrow()
    if args.json:
        _out(args, {"partitions": parts, "records": len(cols)})
        _print_batch(args, table)
    else:
        print(f"{len(cols):,} records")
        _print_batch(args, table)


def cmd_bench(args: argparse.Namespace) -> None:
    from .bench import run_decode_bench

    run_decode_bench(args.records, json_output=args.json)


def cmd_demo(args: argparse.Namespace, rest: list[str]) -> int:
    from . import demo

    extra = ["-b", args.bootstrap_servers] if args.bootstrap_servers else []
    return demo.main([*extra, *rest])


# --------------------------------------------------------------------------- parsing


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kproto", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-b", "--bootstrap-servers",
                   default=os.environ.get("KPROTO_BOOTSTRAP_SERVERS"),
                   help="host:port[,host:port] (default $KPROTO_BOOTSTRAP_SERVERS)")
    p.add_argument("-X", action="append", metavar="KEY=VALUE",
                   help="a client setting under its Kafka name (repeatable)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--debug", action="store_true", help="tracebacks and protocol logs")
    sub = p.add_subparsers(dest="command", required=True)

    m = sub.add_parser("metadata", help="brokers, topics, partitions, leaders, ISR")
    m.add_argument("topic", nargs="*")
    m.set_defaults(func=cmd_metadata)

    t = sub.add_parser("topics", help="list, create or delete topics")
    t.add_argument("action", choices=["list", "create", "delete"])
    t.add_argument("names", nargs="*")
    t.add_argument("-p", "--partitions", type=int, default=-1)
    t.add_argument("-r", "--replication-factor", type=int, default=-1)
    t.add_argument("-c", "--config", action="append", metavar="KEY=VALUE")
    t.add_argument("--if-not-exists", action="store_true")
    t.set_defaults(func=cmd_topics)

    pr = sub.add_parser("produce", help="records from stdin lines, a file, Parquet or Arrow")
    pr.add_argument("topic")
    pr.add_argument("-f", "--file", help="lines, .parquet or .arrow (default: stdin lines)")
    pr.add_argument("-K", "--key-separator", help="split each line into key SEP value")
    pr.add_argument("-H", "--header", action="append", metavar="KEY=VALUE")
    pr.add_argument("-p", "--partition", type=int, help="(default: murmur2 of the key)")
    pr.add_argument("-z", "--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    pr.set_defaults(func=cmd_produce)

    c = sub.add_parser("consume", help="records to stdout or a Parquet file")
    c.add_argument("topic")
    c.add_argument("-p", "--partition", type=int, action="append")
    c.add_argument("--from", dest="from_", default="earliest",
                   help="earliest, latest, OFFSET, -N (last N), @MS (time)")
    c.add_argument("--to", default="end", help="end (the current end), OFFSET, @MS")
    c.add_argument("--follow", action="store_true", help="keep reading new records")
    c.add_argument("-n", "--count", type=int, help="stop after this many records")
    c.add_argument("--format", choices=["table", "json", "raw"], default="table")
    c.add_argument("-o", "--output", help="write a Parquet file instead")
    c.add_argument("--progress", action=argparse.BooleanOptionalAction,
                   default=sys.stderr.isatty(), help="progress on stderr (default on a tty)")
    c.set_defaults(func=cmd_consume)

    o = sub.add_parser("offsets", help="earliest/latest (and by time) per partition")
    o.add_argument("topic")
    o.add_argument("-p", "--partition", type=int, action="append")
    o.add_argument("-t", "--time", type=int, help="also the offset at this time (ms)")
    o.set_defaults(func=cmd_offsets)

    g = sub.add_parser("groups", help="list groups, or describe them with lag")
    g.add_argument("action", choices=["list", "describe"])
    g.add_argument("groups", nargs="*")
    g.set_defaults(func=cmd_groups)

    tx = sub.add_parser("transactions", help="list or describe transactions; a topic's "
                        "producers")
    tx.add_argument("action", choices=["list", "describe", "producers"])
    tx.add_argument("names", nargs="*", help="transactional ids (describe), a topic (producers)")
    tx.add_argument("-s", "--state", action="append", help="list: only in this state")
    tx.add_argument("-p", "--partition", type=int, action="append", help="producers: only these")
    tx.set_defaults(func=cmd_transactions)

    d = sub.add_parser("decode", help="decode a record set or a Fetch response body file")
    d.add_argument("file")
    d.add_argument("--fetch-version", type=int,
                   help="the file is a Fetch response body of this version")
    d.set_defaults(func=cmd_decode)

    be = sub.add_parser("bench", help="decode benchmark against the installed peers")
    be.add_argument("-n", "--records", type=int, default=200_000)
    be.set_defaults(func=cmd_bench)

    de = sub.add_parser("demo", help="the end-to-end demo (embedded broker, Arrow, Spark)")
    de.set_defaults(func=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``kproto`` command; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    args, rest = p.parse_known_args(argv)
    if args.command != "demo" and rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format="%(asctime)s %(name)s %(message)s")
    try:
        if args.command == "demo":
            return cmd_demo(args, rest)
        args.func(args)
        return 0
    except (KprotoError, CliError, ConfigError, OSError, ValueError) as exc:
        if args.debug:
            raise
        print(f"kproto {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    hint = ""
    if "connect" in text.lower() or "bootstrap" in text.lower():
        hint = " (is the broker running? check -b / KPROTO_BOOTSTRAP_SERVERS)"
    return f"{type(exc).__name__}: {text}{hint}"


if __name__ == "__main__":
    sys.exit(main())
