"""The consumer's cost per Fetch round trip: consumer_groups.py's paths, this tree
against an earlier revision, alternating runs:

    .venv/bin/python benchmarks/fetch_round_trip.py [--before REV] [--batch-bytes B]
        [--rounds N] [--paths PATH[+nometrics] ...] [--partitions P] [--records R]
        [--passes K]

The topic, the mock (librdkafka's, 3 brokers, in a child process) and each path
are consumer_groups.py's (see its docstring): 16 partitions x 30,000 records, one
untimed read then 3 timed passes, this process's CPU per record. Each run is a
fresh Python process started in its source tree, so the revisions never share a
process: ``--before REV`` unpacks ``git archive REV`` into a temporary directory
and builds its extension modules there (a minute or two), then every round runs
each (tree, path) once, the order rotating and reversed every other round (the
machine is shared). A path ending in ``+nometrics`` runs with
``metrics_enabled=False`` (what the metrics cost, by difference); confluent's
paths run once a round (they do not depend on the tree).

Printed as JSON: per tree and path the median rate, its min-max, the median CPU
per record and its min-max; per tree, kproto's ratios to confluent's run of the
same round (``vs_confluent``: rate; ``cpu_vs_confluent``: confluent's CPU per
record / kproto's), and with a ``+nometrics`` twin the CPU ratio metrics off /
on (``metrics_cpu``: 0.97 means metrics on costs 3 % more CPU), each the median
of the rounds' ratios and their min-max.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from benchmarks import consumer_groups as cg  # noqa: E402

#: one run in a child process, in its tree: prints the path's result as JSON
CHILD = r"""
import functools, json, sys
sys.path.insert(0, ".")
import kproto
assert kproto.__file__.startswith(sys.argv[6]), kproto.__file__
import benchmarks.consumer_groups as cg
path = sys.argv[1]
if path.endswith("+nometrics"):
    path = path[:-len("+nometrics")]
    cg.Consumer = functools.partial(cg.Consumer, metrics_enabled=False)
print(json.dumps(cg.PATHS[path](sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                                int(sys.argv[5]))))
"""


def unpack(rev: str, into: Path) -> Path:
    """``git archive rev`` unpacked into ``into``, its extension modules built."""
    archive = subprocess.run(["git", "-C", str(HERE), "archive", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=into,
                   check=True, capture_output=True)
    return into


def run(tree: Path, path: str, bootstrap: str, a: argparse.Namespace) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, path, bootstrap, str(a.partitions * a.records),
         str(a.passes), str(a.partitions), str(tree)],
        cwd=tree, capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(f"{path} in {tree} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def spread(values: list[float], digits: int = 2) -> dict[str, float]:
    return {"median": round(statistics.median(values), digits),
            "min": round(min(values), digits), "max": round(max(values), digits)}


def main(a: argparse.Namespace, trees: dict[str, Path]) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    child = ctx.Process(target=cg.host_mock, args=(a.partitions, there), daemon=True)
    child.start()
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        if not here.poll(60):
            raise RuntimeError("the mock did not start within 60 s")
        bootstrap = here.recv()
        cg.produce(bootstrap, a.partitions, a.records, a.batch_bytes)
        keys = [("-" if p.startswith("confluent") else t, p) for p in a.paths
                for t in (["-"] if p.startswith("confluent") else trees)]
        for r in range(a.rounds):
            order = keys[r % len(keys):] + keys[:r % len(keys)]
            for t, p in (order[::-1] if r % 2 else order):
                res = run(trees.get(t, HERE), p, bootstrap, a)
                runs.setdefault((t, p), []).append(res)
                print(r, t, p, {k: round(v, 3) for k, v in res.items()}, file=sys.stderr,
                      flush=True)
    finally:
        here.send("stop")
        child.join(30)
    out: dict[str, Any] = {"batch_bytes": a.batch_bytes, "rounds": a.rounds,
                           "records_per_pass": a.partitions * a.records, "passes": a.passes}
    for (t, p), rs in runs.items():
        out[f"{t}:{p}" if t != "-" else p] = {
            "rate": spread([x["rate"] for x in rs], 0),
            "cpu_us": spread([x["client_cpu_us"] for x in rs], 3)}
    conf = runs.get(("-", "confluent_consume"))
    for (t, p), rs in runs.items():
        if t == "-" or p.endswith("+nometrics"):
            continue
        if conf is not None:
            out[f"{t}:{p}_vs_confluent"] = spread(
                [k["rate"] / c["rate"] for k, c in zip(rs, conf, strict=True)])
            out[f"{t}:{p}_cpu_vs_confluent"] = spread(
                [c["client_cpu_us"] / k["client_cpu_us"] for k, c in zip(rs, conf, strict=True)])
        off = runs.get((t, p + "+nometrics"))
        if off is not None:
            out[f"{t}:{p}_metrics_cpu"] = spread(
                [o["client_cpu_us"] / k["client_cpu_us"] for k, o in zip(rs, off, strict=True)])
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="a git revision to compare with (built in a temp dir)")
    ap.add_argument("--batch-bytes", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--records", type=int, default=30_000, help="records per partition")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--paths", nargs="+",
                    default=["kproto_poll", "kproto_poll_batch", "confluent_consume"],
                    help="consumer_groups.py paths; kproto's may end in +nometrics")
    args = ap.parse_args()
    for p in args.paths:
        if p.removesuffix("+nometrics") not in cg.PATHS:
            ap.error(f"unknown path {p!r}; known: {sorted(cg.PATHS)}")
    with tempfile.TemporaryDirectory(prefix="kproto-before-") as tmp:
        trees = {"after": HERE}
        if args.before:
            trees = {"before": unpack(args.before, Path(tmp)), "after": HERE}
        print(json.dumps(main(args, trees), indent=1))
