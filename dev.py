#!/usr/bin/env python3
"""One entry point for a fresh checkout: sets up ``.venv``, builds kproto, runs things.

    python3 dev.py demo [args...]    # the main job: embedded broker, kproto end to end
    python3 dev.py test [pytest args...]
    python3 dev.py bench [pytest args...]
    python3 dev.py shell             # a shell with the venv active

Needs only Python 3.10+ and a C compiler: everything else (Cython, NumPy, the
test brokers and peers) comes from PyPI into ``.venv``. Reinstalls only when
the build inputs change.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
BUILD_INPUTS = ["pyproject.toml", "setup.py", "kproto/*.pyx", "kproto/*.pxd", "kproto/*.pxi",
                "kproto/*.h"]
BUILD_FLAGS = ["KPROTO_DEBUG", "KPROTO_SANITIZE"]    # setup.py's build switches
#: Extras installed with "test" when they build on this machine; their tests skip without
#: them, so a failure is a note, never a failed venv. extra -> the program its build needs.
OPTIONAL_EXTRAS = {"kerberos": "krb5-config"}   # python-gssapi: MIT's libkrb5-dev


def run(*cmd: str | Path, **kw: object) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, cwd=ROOT, **kw)  # type: ignore[arg-type]


def digest(patterns: list[str]) -> str:
    h = hashlib.sha256()
    for pattern in patterns:
        for path in sorted(ROOT.glob(pattern)):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def stamped(name: str, key: str) -> bool:
    stamp = VENV / f".kproto-{name}"
    return stamp.exists() and stamp.read_text() == key


def stamp(name: str, key: str) -> None:
    (VENV / f".kproto-{name}").write_text(key)


def extra_requirements(extra: str) -> list[str]:
    """The requirements of ``extra`` in pyproject.toml (read without tomllib, for 3.10)."""
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(rf"^{re.escape(extra)} = \[(.*?)^\]", text, re.M | re.S)
    return re.findall(r'^\s*"([^"]+)"', found.group(1), re.M) if found else []


def ensure_optional() -> None:
    """Install OPTIONAL_EXTRAS where they build; say why not where they do not."""
    for extra, needs in OPTIONAL_EXTRAS.items():
        tool = shutil.which(needs)
        key = digest(["pyproject.toml"]) + f";{tool}"     # tried again once the tool appears
        if stamped(f"optional-{extra}", key):
            continue
        if tool is None:
            print(f"note: not installing the '{extra}' extra: {needs} is missing (Debian: "
                  f"apt-get install libkrb5-dev); its tests will skip", flush=True)
        else:
            cmd = [str(PY), "-m", "pip", "install", "-q", *extra_requirements(extra)]
            print("+", " ".join(cmd), flush=True)
            if subprocess.run(cmd, cwd=ROOT).returncode:
                print(f"note: the '{extra}' extra did not install; its tests will skip",
                      flush=True)
        stamp(f"optional-{extra}", key)


def ensure(extras: str) -> None:
    """Create the venv, install build + ``extras`` dependencies, build kproto in place."""
    if not PY.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
        run(PY, "-m", "pip", "install", "-q", "--upgrade", "pip")
    deps_key = digest(["pyproject.toml"]) + extras
    if not stamped(f"deps-{extras}", deps_key):
        run(PY, "-m", "pip", "install", "-q", "setuptools>=68", "wheel", "Cython>=3.0,<4",
            "numpy>=2.0")
        run(PY, "-m", "pip", "install", "-q", "--no-build-isolation", "-e", f".[{extras}]")
        stamp(f"deps-{extras}", deps_key)
    if "test" in extras.split(","):
        ensure_optional()
    build_key = digest(BUILD_INPUTS) + "".join(f";{k}={os.environ.get(k) == '1'}"
                                               for k in BUILD_FLAGS)
    if not stamped("build", build_key):
        # --force: a changed switch (BUILD_FLAGS) leaves every file as it was
        run(PY, "setup.py", "-q", "build_ext", "--inplace", "--force")
        stamp("build", build_key)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test", "bench", "shell"):
        print(__doc__)
        return 2
    cmd, args = argv[0], argv[1:]
    env = dict(os.environ, SPARK_LOCAL_IP=os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
    if cmd == "demo":
        ensure("demo")
        return subprocess.call([str(PY), "-m", "kproto.demo", *args], cwd=ROOT, env=env)
    if cmd == "test":
        ensure("test")
        return subprocess.call([str(PY), "-m", "pytest", *args], cwd=ROOT, env=env)
    if cmd == "bench":
        ensure("test,bench")
        return subprocess.call([str(PY), "-m", "pytest", "benchmarks",
                                "-o", "python_files=bench_*.py", *args], cwd=ROOT, env=env)
    shell = os.environ.get("SHELL", "/bin/sh")
    env["VIRTUAL_ENV"] = str(VENV)
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.call([shell], cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
