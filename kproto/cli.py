"""The ``kproto`` command: look at a cluster, move records in and out, debug captures.

    kproto -b broker:9092 metadata
    kproto -b broker:9092 topics create events --partitions 12
    kproto -b broker:9092 produce events < lines.txt
    kproto -b broker:9092 produce events --file table.parquet
    kproto -b broker:9092 consume events --from earliest --to end -o out.parquet
    kproto -b broker:9092 consume events --format json --count 10
    kproto -b broker:9092 offsets events
    kproto -b broker:9092 groups list --type consumer --state Stable
    kproto -b broker:9092 groups describe etl
    kproto -b broker:9092 groups lag etl
    kproto -b broker:9092 consume users --format avro --registry http://registry:8081
    kproto -b broker:9092 configs describe topic events
    kproto -b broker:9092 acls list --topic events
    kproto -b broker:9092 cluster
    kproto decode capture.bin --fetch-version 12
    kproto bench
    kproto demo

``-b`` defaults to ``$KPROTO_BOOTSTRAP_SERVERS``; ``-X key=value`` passes any
client setting (Kafka's names); ``--json`` prints machine-readable output.
Every error is one line on stderr (secrets masked) and exit 1, a malformed
command line too; 130 on ^C; ``--debug`` (or ``KPROTO_DEBUG=1``)
shows the traceback and logs the protocol traffic.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from .cli_args import CliError, UsageError, mask, parser, secrets
from .cli_records import jsonable, progress_bar, typed_decoder, write_parquet
from .config import setting_key
from .errors import EncodeError, KafkaConnectionError, KafkaTimeoutError, KprotoError
from .producer import columns as producer_columns

__all__ = ["main"]


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    if not args.bootstrap_servers:
        raise UsageError("no broker given: use -b HOST:PORT or set "
                         "KPROTO_BOOTSTRAP_SERVERS")
    given = dict(args.X or [])
    named = {setting_key(k) for k in given}
    base = {"bootstrap.servers": args.bootstrap_servers, "client.id": "kproto-cli"}
    # -X wins over -b and the defaults under any of a setting's names (client_id too)
    return {**{k: v for k, v in base.items() if setting_key(k) not in named}, **given}


def _filtered(settings: dict[str, Any], client: str) -> dict[str, Any]:
    """The settings that apply to ``client`` (others are for the other clients)."""
    from .config import ALIASES, OPTIONS

    out = {}
    for key, value in settings.items():
        name = ALIASES.get(setting_key(key), setting_key(key))
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
        every = admin.list_topics(internal=True)
    for name in args.topic:
        _check_topic(name, every)
    topics = {n: t for n, t in every.items() if not args.topic or n in args.topic}
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


def _check_topic(name: str, topics: Any) -> None:
    """A CliError naming ``name`` (and the closest topic) unless it is in ``topics``."""
    if name not in topics:
        import difflib

        close = difflib.get_close_matches(name, list(topics), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (kproto topics list)"
        raise CliError(f"topic {name!r} does not exist{hint}")


def _names(args: argparse.Namespace, wanted: bool, what: str) -> None:
    """Refuse positional names that the action does not take, or lacks."""
    action = f"{args.command} {args.action}"
    if wanted and not args.names:
        raise UsageError(f"{action} needs {what}")
    if not wanted and args.names:
        raise UsageError(f"{action} takes no {what} (got {' '.join(args.names)})")


def cmd_topics(args: argparse.Namespace) -> None:
    from .admin import Admin

    _names(args, args.action != "list", "topic names")
    with Admin(_filtered(_settings(args), "admin")) as admin:
        if args.action == "create":
            admin.create_topics({t: args.partitions or -1 for t in args.names},
                                replication_factor=args.replication_factor or -1,
                                configs=dict(args.config or []),
                                exist_ok=args.if_not_exists)
            if args.json:
                _out(args, {"created": args.names})
            else:
                print(f"created {', '.join(args.names)}")
        elif args.action == "add-partitions":
            from .cli_admin import add_partitions

            add_partitions(args, admin, _out)
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


def _offsets_of(consumer: Any, topic: str, partitions: list[int], spec: str
                ) -> dict[int, int]:
    """``earliest``, ``latest``/``end``, an offset, or ``@<ms>`` / ``-<n>`` (last n):
    a spec :func:`kproto.cli_args.offset_spec` accepted (user input is checked
    before any broker is asked)."""
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
    return _wanted(topic, meta.partitions(topic), wanted)


def _wanted(topic: str, have: list[int], wanted: list[int] | None) -> list[int]:
    """The ``-p`` partitions of ``topic`` (every one it ``have`` without -p)."""
    if wanted:
        missing = sorted(set(wanted) - set(have))
        if missing:
            raise CliError(f"topic {topic!r} has no partition {missing[0]} "
                           f"(it has {len(have)})")
        return sorted(set(wanted))
    return sorted(have)


def cmd_offsets(args: argparse.Namespace) -> None:
    from .consumer.consumer import Consumer

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
    from .cli_groups import groups

    _names(args, args.action != "list", "group ids")
    if args.action != "list" and (args.type or args.state):
        raise UsageError(f"groups {args.action} takes no --type/--state (they filter groups "
                         "list)")
    groups(args, _settings(args), _filtered, _out)


def _admin_command(args: argparse.Namespace, name: str) -> None:
    from . import cli_admin
    from .admin import Admin

    with Admin(_filtered(_settings(args), "admin")) as admin:
        getattr(cli_admin, name)(args, admin, _out)


def cmd_configs(args: argparse.Namespace) -> None:
    _admin_command(args, "configs")


def cmd_acls(args: argparse.Namespace) -> None:
    _admin_command(args, "acls")


def cmd_cluster(args: argparse.Namespace) -> None:
    _admin_command(args, "cluster")


def cmd_log_dirs(args: argparse.Namespace) -> None:
    _admin_command(args, "log_dirs")


def cmd_records(args: argparse.Namespace) -> None:
    _admin_command(args, "records")


def cmd_transactions(args: argparse.Namespace) -> None:
    from .admin import Admin

    with Admin(_filtered(_settings(args), "admin")) as admin:
        if args.action == "list":
            _names(args, False, "names")
            found = admin.list_transactions(states=args.state or ())
            _out(args, [t.__dict__ for t in found],
                 [(t.transactional_id, t.producer_id, t.state) for t in found],
                 ("transactional id", "producer id", "state"))
        elif args.action == "describe":
            _names(args, True, "transactional ids")
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
                raise UsageError("transactions producers needs one topic")
            topic = args.names[0]
            topics = admin.list_topics()
            _check_topic(topic, topics)
            parts = _wanted(topic, list(topics[topic].partitions), args.partition)
            producers = admin.describe_producers([(topic, p) for p in parts])
            rows = [{"partition": tp.partition, **s.__dict__}
                    for tp, states in producers.items() for s in states]
            _out(args, rows, [tuple(r.values()) for r in rows],
                 ("partition", "producer id", "epoch", "last sequence", "last timestamp",
                  "coordinator epoch", "open transaction from"))


#: the columns Kafka sets, in a file ``consume -o`` wrote: not the producer's to write
_READ_ONLY = ("topic", "offset", "timestampType")


def _read_table(path: str) -> Any:
    """A .parquet/.arrow file as a pyarrow Table (in a file of Kafka's columns, the
    ones Kafka sets are dropped: what ``consume -o`` wrote produces back)."""
    import pyarrow as pa

    if not os.path.exists(path):       # (a directory: a Parquet dataset, as Spark writes)
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    kind = "Parquet" if path.endswith((".parquet", ".pq")) else "Arrow IPC"
    try:
        if kind == "Parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        else:
            import pyarrow.feather as feather

            table = feather.read_table(path)
    except pa.ArrowException as exc:
        raise CliError(f"{path} is not a readable {kind} file: {exc}") from None
    if set(_READ_ONLY) <= set(table.schema.names):
        table = table.drop_columns(list(_READ_ONLY))
    return table


def _read_input(args: argparse.Namespace) -> Any:
    """The records to produce, as a pyarrow Table."""
    import pyarrow as pa

    if args.file and args.file.endswith((".parquet", ".pq", ".arrow", ".feather", ".ipc")):
        return _read_table(args.file)
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

    from .producer.producer import Producer

    table = _read_input(args)
    if args.header:
        if "headers" in table.schema.names:
            raise CliError(f"{args.file} has a headers column: -H would replace it")
        hdrs = [(k, None if v is None else v.encode()) for k, v in args.header]
        header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
        table = table.append_column("headers", pa.array(
            [[{"key": k, "value": v} for k, v in hdrs]] * table.num_rows, header_type))
    if args.file:               # checked before connecting; the error names the file
        try:
            table = producer_columns.checked_table(table, args.partition)
        except EncodeError as exc:
            raise CliError(f"{args.file}: {exc}") from None
    settings = _filtered(_settings(args), "producer")
    if args.compression:
        settings["compression.type"] = args.compression
    start = time.perf_counter()
    # on a terminal, in slices: the progress line counts the records acknowledged
    step = max(10_000, table.num_rows // 100) if args.progress else max(table.num_rows, 1)
    with Producer(settings) as producer, progress_bar(table.num_rows, args.progress) as bar:
        futures = [(producer.send_batch(args.topic, table.slice(i, step),
                                        partition=args.partition), min(step, table.num_rows - i))
                   for i in range(0, max(table.num_rows, 1), step)]
        written = []
        for future, rows in futures:
            written += future.result()
            bar.update(rows)
    elapsed = time.perf_counter() - start
    count = sum(b.record_count for b in written)
    parts = sorted({b.partition for b in written})
    if args.json:
        _out(args, {"topic": args.topic, "records": count, "partitions": parts,
                    "seconds": round(elapsed, 3)})
    else:
        print(f"produced {count:,} records to {args.topic} (partitions {parts}) in "
              f"{elapsed:.2f} s", file=sys.stderr)


def _batches(args: argparse.Namespace, consumer: Any, parts: list[int]
             ) -> Iterator[Any]:
    """Arrow batches from --from to --to (or forever with --follow), at most --count,
    with a progress line on a terminal."""
    start = _offsets_of(consumer, args.topic, parts, args.from_)
    ends = None if args.follow else _offsets_of(consumer, args.topic, parts, args.to)
    consumer.assign([(args.topic, p) for p in parts])
    for p in parts:
        consumer.seek((args.topic, p), start[p])
    remaining = args.count
    todo = {p: (start[p], ends[p]) for p in parts if ends[p] > start[p]} if ends else {}
    total = None if ends is None else sum(b - a for a, b in todo.values())
    if remaining is not None:
        total = remaining if total is None else min(total, remaining)
    import numpy as np

    end_of = np.full(max(parts) + 1, -1, np.int64)
    for p, (_, e) in todo.items():
        end_of[p] = e
    bar = progress_bar(total, args.progress)
    nbytes = 0
    try:
        while (ends is None or any(consumer.position((args.topic, p)) < e
                                   for p, (_, e) in todo.items())) \
                and (remaining is None or remaining > 0):
            batch = consumer.poll_batch(1000)
            if not batch.num_rows:
                bar.refresh()                               # the rate and time stay live
                continue
            offsets = batch.column("offset").to_numpy()
            partitions = batch.column("partition").to_numpy()
            if ends is not None:
                batch = batch.filter(offsets < end_of[partitions])  # each partition to its end
            if remaining is not None:
                batch = batch.slice(0, remaining)
                remaining -= batch.num_rows
            nbytes += batch.nbytes
            bar.set_postfix_str(f"{nbytes / 1e6:,.1f} MB", refresh=False)
            bar.update(batch.num_rows)
            if batch.num_rows:
                yield batch
    finally:
        bar.close()


def cmd_consume(args: argparse.Namespace) -> None:
    from .consumer.consumer import Consumer

    decode = typed_decoder(args)
    settings = _filtered(_settings(args), "consumer")
    settings.setdefault("allow.auto.create.topics", "false")    # reading creates no topic
    if args.output:
        open(args.output, "wb").close()     # a path it cannot write fails before reading
    with Consumer(settings) as consumer:
        parts = _partitions(consumer, args.topic, args.partition)
        batches = _batches(args, consumer, parts)
        if decode is not None:
            batches = map(decode, batches)
        if args.output:
            write_parquet(args.output, batches)
            return
        for batch in batches:
            _print_batch(args, batch, typed=decode is not None)


def _print_batch(args: argparse.Namespace, batch: Any, typed: bool = False) -> None:
    def text(b: bytes | None) -> str | None:
        return None if b is None else b.decode("utf-8", "backslashreplace")

    rows = batch.to_pylist()
    fmt = getattr(args, "format", "table")
    if typed:                               # decoded values: JSON lines
        for r in rows:
            print(json.dumps({
                "topic": r["topic"], "partition": r["partition"], "offset": r["offset"],
                "key": text(r["key"]), "value": r["value"]}, default=jsonable))
    elif fmt == "raw":
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
        whole = _whole_record_sets(data)
        if data and not whole:
            raise CliError(f"{args.file}: no whole record set in its {len(data):,} bytes "
                           "(a Fetch response body? give --fetch-version)")
        if whole < len(data):
            print(f"kproto decode: note: the last {len(data) - whole:,} bytes of {args.file} "
                  "are not a whole record set (ignored)", file=sys.stderr)
    table = cols.to_arrow()
    if args.json:
        _out(args, {"partitions": parts, "records": len(cols)})
        _print_batch(args, table)
    else:
        print(f"{len(cols):,} records")
        _print_batch(args, table)


def _whole_record_sets(data: bytes) -> int:
    """How many leading bytes of ``data`` are whole record sets (each: an int64
    offset, an int32 length, that many bytes)."""
    import struct

    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if length < 0 or pos + 12 + length > len(data):
            break
        pos += 12 + length
    return pos


def cmd_bench(args: argparse.Namespace) -> None:
    from .bench import run_decode_bench

    run_decode_bench(args.records, json_output=args.json, progress=args.progress)


def cmd_demo(args: argparse.Namespace, rest: list[str]) -> int:
    from . import demo

    extra = ["-b", args.bootstrap_servers] if args.bootstrap_servers else []
    return demo.main([*extra, *rest])


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``kproto`` command; returns the exit code: 0, 1 (an error, a malformed
    command line too: one line on stderr), 130 (^C)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    hidden = secrets(argv)
    prog, bootstrap = "kproto", None
    debug = os.environ.get("KPROTO_DEBUG", "") not in ("", "0")
    try:
        args, rest = parser(__doc__).parse_known_args(argv)
        prog, bootstrap = f"kproto {args.command}", args.bootstrap_servers
        debug = debug or args.debug
        if args.command != "demo" and rest:
            raise UsageError(f"unrecognized arguments: {' '.join(rest)}")
        if debug:
            logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                                format="%(asctime)s %(name)s %(message)s")
        if args.command == "demo":
            return cmd_demo(args, rest)
        globals()[f"cmd_{args.command.replace('-', '_')}"](args)
        sys.stdout.flush()              # a closed pipe shows here, not at exit
        return 0
    except SystemExit as exc:           # --help (0); argparse's own errors go through _Parser
        return 1 if isinstance(exc.code, int) and exc.code else 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:             # kproto consume ... | head
        _stdout_to_devnull()
        return 0
    except CliError as exc:
        where = getattr(exc, "prog", None) or prog
        text = str(exc) + (f" (see {where} --help)" if isinstance(exc, UsageError) else "")
        if text:                        # (empty: each failed resource has its line already)
            _report(where, text, hidden)
        return exc.code
    except Exception as exc:
        if debug:
            print(mask("".join(traceback.format_exception(exc)), hidden), file=sys.stderr)
            return 1
        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)):
            text += (f" (is the broker running? -b {bootstrap} or "
                     "KPROTO_BOOTSTRAP_SERVERS)")
        elif not isinstance(exc, (KprotoError, OSError)):
            text += " (unexpected: run with --debug for the traceback, and please report it)"
        _report(prog, text, hidden)
        return 1


def _report(prog: str, text: str, hidden: list[str]) -> None:
    """One line on stderr, secrets masked."""
    print(f"{prog}: error: {mask(' '.join(text.split()), hidden)}", file=sys.stderr)


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null: its unflushed output cannot fail again at exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
