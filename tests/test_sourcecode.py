"""Lint and type-check kproto as part of the suite (ruff, mypy on the package)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_ruff() -> None:
    if shutil.which("ruff") is None and run("ruff", "--version").returncode:
        pytest.fail("ruff is a test dependency: pip install -e '.[test]'")
    result = run("ruff", "check", "kproto", "tests", "benchmarks", "tools", "dev.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy() -> None:
    result = run("mypy", "kproto")
    assert result.returncode == 0, result.stdout + result.stderr
