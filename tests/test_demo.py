"""The README's main job, small: it must verify every record and leave no broker behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.broker


def _processes(name: str) -> set[int]:
    """PIDs of running processes whose command line mentions ``name`` and this
    environment's prefix (the demo's Tansu and Spark run from it; other jobs on a
    shared machine, from other environments, are not the demo's)."""
    out = set()
    prefix = sys.prefix.encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
                if name.encode() in cmdline and prefix in cmdline:
                    out.add(int(entry))
            except OSError:
                continue
    return out


def test_demo_round_trip_and_cleanup() -> None:
    before = _processes("java") | _processes("tansu")
    out = subprocess.run([sys.executable, "-m", "kproto.demo", "-n", "30000", "--partitions", "2"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "read back 30,000 (every key and value matches)" in out.stdout
    assert "fetch + decode into Arrow" in out.stdout and "read_range" in out.stdout
    assert re.search(r"Spark SQL aggregation over format\('kproto'\) +[\d,]+ rec/s", out.stdout)
    assert re.search(r"confluent-kafka consume\(\) \(tuned\), messages +[\d,]+ rec/s", out.stdout)
    pid = int(re.search(r"started Tansu \(pid (\d+)\)", out.stdout).group(1))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    # no Spark JVM and no broker left over (processes that were running before may stay)
    assert (_processes("java") | _processes("tansu")) <= before


def test_demo_bad_bootstrap_is_one_clear_line() -> None:
    out = subprocess.run([sys.executable, "-m", "kproto.demo", "-b", "127.0.0.1:1", "-n", "10"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.startswith("kproto demo: error: ") and "127.0.0.1:1" in out.stderr
    assert "Traceback" not in out.stderr
