#!/usr/bin/env python3
"""The floor under the record loop: kproto's decode beside two stand-alone C loops.

Writes the uncompressed corpus of ``benchmarks/bench_decode.py`` (200,000 records,
``KPROTO_BENCH_RECORDS`` to change it), builds ``tools/parse_floor.c`` with the
compiler and optimisation Python's extensions use, and prints in one run, in ns a
record (thread CPU time, best of 5):

* ``minimal`` / ``checked``: the C loops (see parse_floor.c), no CRC, no Python;
* ``records.decode(binary_view=True)``: the decoder, CRC pass and Python included;
* the CRC-32C pass of the ``crc32c`` package: what binary_view is compared with;

for a prefix of the corpus that stays in cache (1 MB) and for all of it.

    .venv/bin/python tools/parse_floor.py
"""

from __future__ import annotations

import os
import shlex
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from functools import partial

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))


def best_ns(fn: Callable[[], object], records: int, passes: int) -> float:
    """Best of 5 rounds of ``passes`` calls, thread CPU ns a record."""
    fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.thread_time()
        for _ in range(passes):
            fn()
        best = min(best, (time.thread_time() - t0) / passes / records * 1e9)
    return best


def crc_all(crc: Callable[[memoryview], int], spans: list[memoryview]) -> None:
    for span in spans:
        crc(span)


def main() -> None:
    import crc32c

    from benchmarks.conftest import corpus, whole_batches
    from kproto import records

    work = tempfile.mkdtemp(prefix="kproto-floor-")
    data = corpus("none")
    path = os.path.join(work, "batches.bin")
    with open(path, "wb") as f:
        f.write(data)
    exe = os.path.join(work, "parse_floor")
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    subprocess.run([*cc, "-O2", "-o", exe, os.path.join(HERE, "parse_floor.c")], check=True)
    for label, size, passes in (("in cache (1 MB)", 1 << 20, 400), ("whole corpus", 0, 20)):
        part = whole_batches(data, size) if size else data
        n = len(records.decode(part, binary_view=True))
        spans, pos = [], 0
        view = memoryview(part)
        while pos < len(part):
            stop = pos + 12 + struct.unpack_from(">i", part, pos + 8)[0]
            spans.append(view[pos + 21:stop])
            pos = stop
        print(f"## {label}: {n} records, {len(part)} bytes")
        out = subprocess.run([exe, path, str(len(part)), str(passes)], check=True,
                             capture_output=True, text=True).stdout
        print(out, end="")
        decode = best_ns(partial(records.decode, part, binary_view=True), n, passes)
        crc = best_ns(partial(crc_all, crc32c.crc32c, spans), n, passes)
        print(f"records.decode(binary_view=True): {decode:.2f} ns a record")
        print(f"crc32c package pass: {crc:.2f} ns a record "
              f"(binary_view at {crc / decode:.0%} of it; 50 % leaves {2 * crc:.2f} ns)")


if __name__ == "__main__":
    main()
