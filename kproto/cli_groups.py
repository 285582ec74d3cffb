"""``kproto groups``: list groups (by type and state), describe them, their lag, delete
them or their offsets.

    kproto -b broker:9092 groups list --type consumer --state Stable
    kproto -b broker:9092 groups describe etl
    kproto -b broker:9092 groups lag etl
    kproto -b broker:9092 groups delete etl old-etl
    kproto -b broker:9092 groups delete-offsets etl --topic events [-p 0]

The command's helpers (settings, output) come from :mod:`kproto.cli`, which
calls :func:`groups` with them (this module imports nothing of it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from .cli_args import CliError

__all__ = ["groups"]

Filter = Callable[[dict[str, Any], str], dict[str, Any]]
Out = Callable[..., None]


def groups(args: argparse.Namespace, settings: dict[str, Any], filtered: Filter,
           out: Out) -> None:
    """Run ``kproto groups list|describe|lag|delete|delete-offsets`` with the resolved
    ``settings``."""
    from .admin import Admin

    with Admin(filtered(settings, "admin")) as admin:
        if args.action in ("lag", "delete", "delete-offsets"):
            _manage(args, admin, out)
            return
        if args.action == "list":
            found = admin.list_groups(types=args.type or (), states=args.state or ())
            out(args, [g.__dict__ for g in found],
                [(g.group_id, g.type or "", g.protocol_type, g.state or "") for g in found],
                ("group", "type", "protocol", "state"))
            return
        result = [_described(admin, gid) for gid in args.names]
        if args.json:
            out(args, result)
            return
        for g in result:
            extra = f", epoch {g['epoch']}" if g.get("epoch") is not None else ""
            print(f"group {g['group']}: {g['type']}, {g['state']}, "
                  f"{'assignor' if g['type'] != 'classic' else 'protocol'} "
                  f"{g['protocol'] or '-'}{extra}, {len(g['members'])} members")
            if g["members"] and g["type"] == "classic":
                out(args, None, [(m["member_id"], m["client_id"], m["host"],
                                  " ".join(m["assignment"])) for m in g["members"]],
                    ("member", "client", "host", "assignment"))
            elif g["members"]:
                out(args, None, [(m["member_id"], m["client_id"], m["host"], m["epoch"],
                                  " ".join(m["assignment"]), " ".join(m["target"]))
                                 for m in g["members"]],
                    ("member", "client", "host", "epoch", "assignment", "target"))
            if g["offsets"]:
                out(args, None, [(o["topic"], o["partition"],
                                  "-" if o["committed"] is None else o["committed"],
                                  "-" if o["end"] is None else o["end"],
                                  "-" if o["lag"] is None else o["lag"]) for o in g["offsets"]],
                    ("topic", "partition", "committed", "end", "lag"))


def _tps(tps: Any) -> list[str]:
    return sorted(f"{tp.topic}[{tp.partition}]" for tp in tps)


def _described(admin: Any, gid: str) -> dict[str, Any]:
    """One group as the command shows it: type, state, members, committed offsets and lag."""
    [desc] = admin.describe_groups([gid])
    committed = {} if desc.type == "share" else admin.list_consumer_group_offsets(gid)
    if desc.state == "Dead" or (not desc.members and not committed and desc.type == "classic"):
        # Kafka answers a group it does not know as Dead (some brokers: Empty);
        # an Empty group without offsets is removed at once
        raise CliError(f"group {gid!r} does not exist (kproto groups list)")
    members: list[dict[str, Any]] = []
    for m in desc.members:
        member = {"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                  "assignment": _tps(m.assignment)}
        if desc.type != "classic":
            member.update(epoch=m.member_epoch, subscription=list(m.subscription),
                          target=_tps(getattr(m, "target_assignment", m.assignment)))
        members.append(member)
    lag: list[dict[str, Any]] = []
    if committed or (desc.members and desc.type != "share"):
        # (None: nobody committed the partition, or its topic was deleted)
        lag = [{"topic": tp.topic, "partition": tp.partition, "committed": p.committed,
                "end": p.end, "lag": p.lag, "member": p.member}
               for tp, p in admin.consumer_group_lag(gid).items()]
    return {"group": gid, "type": desc.type, "state": desc.state,
            "protocol": desc.protocol if desc.type == "classic" else desc.assignor,
            "epoch": None if desc.type == "classic" else desc.group_epoch,
            "members": members, "offsets": lag}


def _manage(args: argparse.Namespace, admin: Any, out: Out) -> None:
    """``groups lag GROUP``, ``groups delete GROUP ...``, ``groups delete-offsets GROUP``."""
    from .cli_admin import Reported

    if args.action == "lag":
        if len(args.names) != 1:
            raise CliError("groups lag takes one group")
        gid = args.names[0]
        lag = admin.consumer_group_lag(gid)
        if not lag:
            raise CliError(f"group {gid!r} has no committed offsets and no members "
                           "(kproto groups list)")
        rows = [{"topic": tp.topic, "partition": tp.partition, "committed": p.committed,
                 "end": p.end, "lag": p.lag, "member": p.member} for tp, p in lag.items()]
        # (end and lag None: the topic is gone, as kafka-consumer-groups.sh shows "-")
        out(args, rows, [(r["topic"], r["partition"],
                          "-" if r["committed"] is None else r["committed"],
                          "-" if r["end"] is None else r["end"],
                          "-" if r["lag"] is None else r["lag"], r["member"] or "-")
                         for r in rows],
            ("topic", "partition", "committed", "end", "lag", "member"))
        if not args.json:
            print(f"total lag {sum(r['lag'] or 0 for r in rows):,}")
        return
    if args.action == "delete":
        results = admin.delete_consumer_groups(args.names)
        failed = dict(results.errors)
        done = list(results.succeeded)
    else:
        if len(args.names) != 1 or not args.topic:
            raise CliError("groups delete-offsets takes one group and --topic")
        gid = args.names[0]
        topics = admin.list_topics()
        if args.topic not in topics:
            raise CliError(f"topic {args.topic!r} does not exist (kproto topics list)")
        parts = sorted(set(args.partition)) if args.partition else \
            sorted(topics[args.topic].partitions)
        results = admin.delete_consumer_group_offsets(gid, [(args.topic, p) for p in parts])
        failed = {f"{gid} {tp.topic}[{tp.partition}]": e for tp, e in results.errors.items()}
        done = [f"{tp.topic}[{tp.partition}]" for tp in results.succeeded]
    for what, exc in failed.items():
        print(f"kproto groups: error: {what}: {type(exc).__name__}: {exc}", file=sys.stderr)
    if done:
        out(args, {"deleted": done}) if args.json else print(f"deleted {', '.join(done)}")
    if failed:
        raise Reported()
