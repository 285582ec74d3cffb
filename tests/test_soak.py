"""The soak, short: tools/soak.py for 20 s (the full run is 10 minutes; see
docs/reliability.md for its command and measured result).

A producer (idempotent; per-record ``send`` and Arrow ``send_batch`` in turn)
and a consumer run at the same time against a Tansu broker of the soak's own,
moving to a new topic every 7 s (the old one read to its end and deleted).
Every record is checked (CRC, partition, sequence == offset == the next one
expected), and the soak process's RSS after its warm-up must stay within the
bound. It runs in a child process so that its RSS is its own, not pytest's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.broker

SOAK = Path(__file__).resolve().parent.parent / "tools" / "soak.py"


def test_short_soak_exactly_once_with_steady_memory(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    proc = subprocess.run(
        [sys.executable, str(SOAK), "--seconds", "20", "--warmup", "6", "--rotate", "7",
         "--rate", "3000", "--max-growth-mb", "40", "--json", str(out)],
        capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["failure"] is None and result["status"] == "ok"
    assert result["records_checked"] == result["records_sent"] >= 40000
    assert result["topics"] >= 2
    assert result["rss_growth_after_warmup_mib"] <= 40
    print({k: v for k, v in result.items() if k != "rss_samples"})
