"""Memory of decoding a ~100 MB fetch: extra peak RSS ÷ decompressed record-set bytes.

    .venv/bin/python benchmarks/memory.py [none lz4 zstd ...]

Each measurement runs in a fresh process that reads the record sets from a file,
then decodes them once; the extra is peak RSS after minus RSS before the decode.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile

RECORDS = 750_000  # ~100 MB of record sets before compression


def _peak_rss() -> int:
    """Peak RSS of this process image (VmHWM; ru_maxrss would include the parent's, as
    Linux keeps it across fork and exec)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(path: str, decompressed: int) -> dict[str, float]:
    from kproto import records

    data = bytearray(os.path.getsize(path))
    with open(path, "rb") as f:  # readinto: no transient second copy of the input
        f.readinto(data)
    before = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    cols = records.decode(data)
    peak = _peak_rss()
    return {"input_mb": round(len(data) / 1e6, 1), "records": len(cols),
            "decompressed_mb": round(decompressed / 1e6, 1),
            "extra_peak_mb": round((peak - before) / 1e6, 1),
            "ratio": round((peak - before) / decompressed, 2)}


def main(codecs: list[str]) -> None:
    sys.path.insert(0, os.getcwd())
    from benchmarks.conftest import corpus

    decompressed = len(corpus("none", RECORDS))
    for codec in codecs:
        with tempfile.NamedTemporaryFile() as f:
            f.write(corpus(codec, RECORDS))
            f.flush()
            out = subprocess.run([sys.executable, __file__, "--child", f.name,
                                  str(decompressed)], capture_output=True, text=True,
                                 check=True, env=dict(os.environ, PYTHONPATH=os.getcwd()))
        print(codec, out.stdout.strip())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]))))
    else:
        main(sys.argv[1:] or ["none", "lz4", "zstd"])
