"""The ``kproto`` commands for the Admin's cluster operations: configs, ACLs, the
cluster, log dirs, deleting records, adding partitions.

    kproto -b broker:9092 configs describe topic events
    kproto -b broker:9092 configs alter topic events --set retention.ms=3600000 --delete x
    kproto -b broker:9092 topics add-partitions events -p 24
    kproto -b broker:9092 records delete events --before 1000 [-p 0]
    kproto -b broker:9092 acls list [--topic events] [--principal User:etl]
    kproto -b broker:9092 acls create --topic events --principal User:etl --operation read
    kproto -b broker:9092 cluster
    kproto -b broker:9092 log-dirs [--broker 1]

Each resource of a call succeeds or fails on its own: what failed is printed on
stderr, one line each, the rest on stdout, and the command exits 1 if any did.
The helpers (settings, output) come from :mod:`kproto.cli`, which passes them in.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from .cli_args import CliError, UsageError, is_secret_name

__all__ = ["Reported", "configs", "acls", "cluster", "log_dirs", "records", "add_partitions"]

Out = Callable[..., None]


def _failed(prog: str, results: Any, what: Callable[[Any], str]) -> bool:
    """Print each failed resource's error on stderr; whether any failed."""
    for key, exc in results.errors.items():
        print(f"{prog}: error: {what(key)}: {type(exc).__name__}: {exc}", file=sys.stderr)
    return bool(results.errors)


class Reported(CliError):
    """Exit 1: what failed is on stderr already (a line per resource)."""

    def __init__(self) -> None:
        super().__init__("")


def _done(failed: bool) -> None:
    if failed:
        raise Reported()


def configs(args: argparse.Namespace, admin: Any, out: Out) -> None:
    """``kproto configs describe|alter TYPE NAME``."""
    from .admin import AlterConfigOp, ConfigResource

    resource = ConfigResource.of((args.type, args.name))
    if args.action == "describe":
        if args.set or args.delete:
            raise UsageError("configs describe takes no --set/--delete")
        found = admin.describe_configs([resource], keys=args.key or None,
                                       include_synonyms=args.synonyms)
        entries = sorted(found[resource].values(), key=lambda e: e.name)

        def masked(name: str, value: str | None, sensitive: bool) -> str | None:
            # a broker that does not flag a secret config sensitive (Tansu) still
            # gets it masked by its name
            return "***" if sensitive or (value and is_secret_name(name)) else value

        data = [{"name": e.name, "value": masked(e.name, e.value, e.is_sensitive),
                 "source": e.source, "sensitive": e.is_sensitive, "read_only": e.is_read_only,
                 "synonyms": [{"name": s.name, "value": masked(s.name, s.value, e.is_sensitive),
                               "source": s.source} for s in e.synonyms]} for e in entries]
        out(args, data, [(d["name"], "" if d["value"] is None else d["value"], d["source"],
                          "yes" if d["read_only"] else "") for d in data],
            ("name", "value", "source", "read only"))
        return
    ops = [AlterConfigOp(k, v) for k, v in args.set or []] + \
        [AlterConfigOp(k, op="delete") for k in args.delete or []]
    if not ops:
        raise UsageError("configs alter needs --set KEY=VALUE or --delete KEY")
    admin.incremental_alter_configs({resource: ops}, validate_only=args.dry_run)[resource]
    shown = [(k, "***" if is_secret_name(k) else v) for k, v in args.set or []]
    done = {"resource": list(resource), "set": dict(shown),
            "deleted": args.delete or [], "validate_only": args.dry_run}
    out(args, done) if args.json else print(
        f"{'validated' if args.dry_run else 'altered'} {resource.type} {resource.name}: "
        + ", ".join([f"{k}={v}" for k, v in shown] +
                    [f"{k} deleted" for k in args.delete or []]))


def add_partitions(args: argparse.Namespace, admin: Any, out: Out) -> None:
    """``kproto topics add-partitions NAME ... -p TOTAL``."""
    if not args.partitions:
        raise UsageError("topics add-partitions needs -p/--partitions (the new total)")
    results = admin.create_partitions({t: args.partitions for t in args.names})
    failed = _failed("kproto topics", results, lambda t: f"topic {t!r}")
    if results.succeeded:
        out(args, {"topics": list(results.succeeded), "partitions": args.partitions}) \
            if args.json else print(f"{', '.join(results.succeeded)} now "
                                    f"{args.partitions} partitions")
    _done(failed)


def records(args: argparse.Namespace, admin: Any, out: Out) -> None:
    """``kproto records delete TOPIC --before OFFSET [-p N]``: truncate partitions."""
    topics = admin.list_topics()
    if args.topic not in topics:
        raise CliError(f"topic {args.topic!r} does not exist (kproto topics list)")
    have = sorted(topics[args.topic].partitions)
    parts = sorted(set(args.partition)) if args.partition else have
    results = admin.delete_records({(args.topic, p): args.before for p in parts})
    failed = _failed("kproto records", results, lambda tp: f"{tp.topic}[{tp.partition}]")
    rows = [{"partition": tp.partition, "low_watermark": lw}
            for tp, lw in results.succeeded.items()]
    if rows:
        out(args, rows, [tuple(r.values()) for r in rows], ("partition", "low watermark"))
    _done(failed)


_ACL_FIELDS = ("resource_type", "name", "pattern_type", "principal", "host", "operation",
               "permission")


def _acl_row(b: Any) -> dict[str, Any]:
    p, e = b.pattern, b.entry
    return dict(zip(_ACL_FIELDS, (p.resource_type.name.lower(), p.name,
                                  p.pattern_type.name.lower(), e.principal, e.host,
                                  e.operation.name.lower(), e.permission_type.name.lower()),
                    strict=True))


def _resource(args: argparse.Namespace) -> tuple[str | None, str | None]:
    given = [(k, v) for k, v in (("topic", args.topic), ("group", args.group),
                                 ("transactional_id", args.transactional_id)) if v]
    if args.cluster:
        given.append(("cluster", "kafka-cluster"))
    if len(given) > 1:
        raise UsageError("name one resource: --topic, --group, --transactional-id or --cluster")
    return given[0] if given else (None, None)


def acls(args: argparse.Namespace, admin: Any, out: Out) -> None:
    """``kproto acls list|create|delete`` with Java's kafka-acls.sh options."""
    from .admin import (
        AccessControlEntry,
        AccessControlEntryFilter,
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    kind, name = _resource(args)
    pattern = PatternType[(args.pattern_type or
                           ("literal" if args.action == "create" else "any")).upper()]
    permission = AclPermissionType[(args.permission or
                                    ("allow" if args.action == "create" else "any")).upper()]
    operations = [AclOperation[o.upper()] for o in args.operation or ["any"]]
    resource_type = ResourceType[(kind or "any").upper()]
    if args.action == "create":
        if kind is None or not args.principal or not args.operation:
            raise UsageError("acls create needs a resource (--topic, --group, "
                             "--transactional-id, --cluster), --principal and --operation")
        bindings = [AclBinding(ResourcePattern(resource_type, name or "", pattern),
                               AccessControlEntry(p, args.host or "*", op, permission))
                    for p in args.principal for op in operations]
        results = admin.create_acls(bindings)
        failed = _failed("kproto acls", results, lambda b: " ".join(_acl_row(b).values()))
        rows = [_acl_row(b) for b in results.succeeded]
        if rows:
            out(args, rows, [tuple(r.values()) for r in rows], _ACL_FIELDS)
        _done(failed)
        return
    filters = [AclBindingFilter(ResourcePatternFilter(resource_type, name, pattern),
                                AccessControlEntryFilter(p, args.host, op, permission))
               for p in (args.principal or [None]) for op in operations]
    if args.action == "list":
        found = [b for f in filters for b in admin.describe_acls(f)]
        rows = [_acl_row(b) for b in dict.fromkeys(found)]
        out(args, rows, [tuple(r.values()) for r in rows], _ACL_FIELDS)
        return
    results = admin.delete_acls(filters)
    failed = _failed("kproto acls", results, lambda f: "filter " + repr(f))
    rows = [_acl_row(b) for deleted in results.succeeded.values() for b in deleted]
    out(args, rows, [tuple(r.values()) for r in rows], _ACL_FIELDS)
    _done(failed)


def cluster(args: argparse.Namespace, admin: Any, out: Out) -> None:
    """``kproto cluster``: cluster id, controller and brokers (DescribeCluster)."""
    c = admin.describe_cluster()
    data = {"cluster_id": c.cluster_id, "controller": c.controller_id, "source": c.source,
            "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                         "fenced": b.node_id in c.fenced} for b in c.nodes]}
    if args.json:
        out(args, data)
        return
    print(f"cluster {c.cluster_id}, controller {c.controller_id} (from {c.source})")
    out(args, data, [(b["id"], b["host"], b["port"], b["rack"] or "",
                      "fenced" if b["fenced"] else "") for b in data["brokers"]],
        ("broker", "host", "port", "rack", "state"))


def log_dirs(args: argparse.Namespace, admin: Any, out: Out) -> None:
    """``kproto log-dirs [--broker N]``: each broker's log dirs, sizes and lags."""
    results = admin.describe_log_dirs(args.broker or None)
    failed = _failed("kproto log-dirs", results, lambda n: f"broker {n}")
    rows = [{"broker": node, "log_dir": path,
             "error": type(d.error).__name__ if d.error else None,
             "topic": tp.topic, "partition": tp.partition, "size": r.size,
             "offset_lag": r.offset_lag, "future": r.is_future}
            for node, dirs in results.succeeded.items() for path, d in dirs.items()
            for tp, r in sorted(d.replicas.items())
            if not args.topic or tp.topic in args.topic]
    out(args, rows, [(r["broker"], r["log_dir"], r["topic"], r["partition"], r["size"],
                      r["offset_lag"], "yes" if r["future"] else "") for r in rows],
        ("broker", "log dir", "topic", "partition", "size", "offset lag", "future"))
    _done(failed)
