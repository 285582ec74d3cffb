"""The Cython core before and after a change, in one run: records.decode (66 MB
uncompressed v2, and lz4) and slice_fetch (Fetch v4/v16, 2,000 partitions of
32 KiB record sets, and 20,000 one-record partitions). Trees alternate in
separate processes; each run keeps its best call; medians over runs.

    .venv/bin/python benchmarks/refactor/core_paths.py BEFORE_TREE AFTER_TREE [RUNS]

Each TREE is a kproto checkout with its extension built. (BENCHMARKS.md, issue 16.)
"""

from __future__ import annotations

import ast
import gc
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = ("none", "lz4", "fetch_v4", "fetch_v16", "fetchsmall_v4", "fetchsmall_v16")


def make(out: Path) -> None:
    """The inputs, built with this checkout (its corpus and Fetch-answer builder)."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.conftest import corpus
    from kproto import protocol
    from tests.record_sets import batch_v2, fetch_response, sample_records

    plain, lz4 = corpus("none", 465_000), corpus("lz4", 465_000)
    (out / "none.bin").write_bytes(plain)
    (out / "lz4.bin").write_bytes(lz4)
    sets, pos = [], 0
    while len(sets) < 2000:                  # the corpus's record sets, reused
        size = struct.unpack_from(">i", plain, pos + 8)[0]
        sets.append(plain[pos:pos + 12 + size])
        pos = 0 if pos + 12 + size >= len(plain) else pos + 12 + size
    small = [batch_v2(sample_records(1, seed=i)) for i in range(20000)]
    for v in (4, 16):
        (out / f"fetch_v{v}.bin").write_bytes(
            protocol.encode(1, v, "response", fetch_response(v, sets)))
        (out / f"fetchsmall_v{v}.bin").write_bytes(
            protocol.encode(1, v, "response", fetch_response(v, small)))


def measure(tree: str, data_dir: Path) -> dict[str, float]:
    """Best time of each case with ``tree``'s kproto (run in its own process)."""
    sys.path.insert(0, tree)
    from kproto import _codec, records

    assert _codec.__file__.startswith(tree), _codec.__file__
    data = {n: (data_dir / f"{n}.bin").read_bytes() for n in FILES}
    cases = {
        "decode none": (lambda: records.decode(data["none"]), 5),
        "decode lz4": (lambda: records.decode(data["lz4"]), 5),
        "slice_fetch v4": (lambda: _codec.slice_fetch(data["fetch_v4"], 4), 20),
        "slice_fetch v16": (lambda: _codec.slice_fetch(data["fetch_v16"], 16), 20),
        "slice_fetch 20k v4": (lambda: _codec.slice_fetch(data["fetchsmall_v4"], 4), 30),
        "slice_fetch 20k v16": (lambda: _codec.slice_fetch(data["fetchsmall_v16"], 16), 30),
    }
    out = {}
    for name, (fn, reps) in cases.items():
        fn()
        best = float("inf")
        for _ in range(reps):
            gc.collect()
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
        out[name] = best
    return out


def main(before: str, after: str, runs: int = 5) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        make(Path(tmp))
        res: tuple[list[dict[str, float]], ...] = ([], [])     # before, after
        for _ in range(runs):
            for tree, results in zip((before, after), res, strict=True):
                out = subprocess.run([sys.executable, __file__, "--measure", tree, tmp],
                                     capture_output=True, text=True, check=True).stdout
                results.append(ast.literal_eval(out.strip().splitlines()[-1]))
    print("| case | before ms | after ms | after/before |")
    print("|---|---|---|---|")
    for case in res[0][0]:
        b = statistics.median(r[case] for r in res[0]) * 1e3
        a = statistics.median(r[case] for r in res[1]) * 1e3
        print(f"| {case} | {b:.2f} | {a:.2f} | {a / b:.3f} |")


if __name__ == "__main__":
    if sys.argv[1] == "--measure":
        print(repr(measure(sys.argv[2], Path(sys.argv[3]))))
    else:
        main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5)
