"""A short coverage-guided fuzzing run of every target in tests/fuzz/ (a few seconds each).

Each target runs in its own process (libFuzzer exits when done) against the dev build,
from the seed corpus; any finding fails the test with the fuzzer's log. Long runs, the
instrumented and ASan builds: docs/fuzzing.md.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .fuzz.targets import TARGETS

ROOT = Path(__file__).resolve().parent.parent
SECONDS = 3

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("atheris") is None,
    reason="atheris is not installed (pip install atheris; Linux wheels only)")


@pytest.mark.parametrize("target", list(TARGETS))
def test_short_fuzz_run(target: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "fuzz" / "run.py"), target,
         "--seconds", str(SECONDS), "--work", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    results = tmp_path / "results.jsonl"
    assert results.exists(), proc.stdout + proc.stderr
    result = json.loads(results.read_text().splitlines()[-1])
    log = Path(result["log"]).read_text(errors="replace")
    assert not result["findings"], f"{result['findings']}\n{log[-6000:]}"
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert result["execs"] >= 100, log[-3000:]  # it really fuzzed
