"""The Java references of the differential tests (tests/java/*.java), compiled per session."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

JAVA_SOURCES = Path(__file__).parent / "java"


def compiled(tmp_path_factory: pytest.TempPathFactory, source: str, needed_for: str) -> Path:
    """The class directory of ``tests/java/<source>``, compiled now; skips the test
    (saying what cannot run: ``needed_for``) where the JDK is not installed."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip(f"javac/java not installed: {needed_for} cannot run")
    out = tmp_path_factory.mktemp(Path(source).stem.lower())
    subprocess.run(["javac", "-d", str(out), str(JAVA_SOURCES / source)], check=True,
                   timeout=300)
    return out
