#!/usr/bin/env python3
"""An aarch64 CPython on this x86_64 machine, under qemu-user: ``python3 wheels/qemu.py 3.13``.

What ``tests/test_wheels.py`` and ``wheels/pack.py`` run the aarch64 wheels with.
The interpreter is Debian's arm64 build (bookworm's python3.11, trixie's python3.13,
sid's python3.14 and python3.15): its packages and their dependencies are downloaded
with apt-get into a private apt state (``<cache>/qemu-aarch64/<suite>/``, the cache of
wheels/sid.py, ``~/.cache/kproto-wheels`` by default: the machine's own apt
configuration, its package lists and dpkg database, are not touched; the mirror is the
one the machine's apt sources name) and unpacked with ``dpkg -x`` into a root directory
next to it (~130 MB; sid's holds both of its versions, ~250 MB). Debian packages no
other CPython for arm64: 3.10 and 3.12 have no aarch64 interpreter here (their wheels
are checked for tags and symbols only).

``qemu-aarch64-static -L <root>`` runs it (Debian's ``qemu-user-static``; no
binfmt_misc registration, nothing system-wide). :func:`make_venv` makes a venv whose
``bin/python`` is a shell script running that command, so the venv works as any
other: ``bin/python -m pip install ...`` installs aarch64 wheels from PyPI (pip runs
as an aarch64 program), and subprocesses started with ``sys.executable`` run under
qemu too.

Needs: ``apt-get install qemu-user-static`` (root, once). The command line prints
the interpreter's version and machine, and the root's path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sid  # noqa: E402

CACHE = sid.CACHE / "qemu-aarch64"
#: Debian suite whose arm64 packages carry CPython X.Y
SUITES = {"3.11": "bookworm", "3.13": "trixie", "3.14": "sid", "3.15": "sid"}
QEMU = "qemu-aarch64-static"
PACKAGES = ["python{v}", "python{v}-venv", "libpython{v}-dev", "libstdc++6"]
WRAPPER = """#!/bin/sh
# CPython {version} for aarch64 under qemu-user (wheels/qemu.py)
exec {qemu} -L {root} -0 "$0" {root}/usr/bin/python{version} "$@"
"""


class Unavailable(RuntimeError):
    """No aarch64 CPython of that version can be had here (the reason is the message)."""


def available(version: str) -> bool:
    return version in SUITES


def sysroot(version: str) -> Path:
    """The root directory holding Debian's arm64 CPython ``version`` (made on first use)."""
    if version not in SUITES:
        raise Unavailable(f"Debian has no arm64 CPython {version} (only "
                          f"{', '.join(f'{v} in {s}' for v, s in SUITES.items())})")
    if shutil.which(QEMU) is None:
        raise Unavailable(f"{QEMU} not found: apt-get install qemu-user-static")
    suite = SUITES[version]
    root = CACHE / f"root-{suite}"
    if (root / "usr" / "bin" / f"python{version}").exists():
        return root
    state = CACHE / suite
    versions = [v for v, s in SUITES.items() if s == suite]   # one root per suite: all of them
    print(f"downloading Debian {suite}'s arm64 python{', '.join(versions)} into {state}",
          flush=True)
    sid.apt(state, "arm64", suite, "update")
    sid.apt(state, "arm64", suite, "install", "--download-only",
               *[p.format(v=v) for v in versions for p in PACKAGES])
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for deb in sorted((state / "var/cache/apt/archives").glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(partial)], check=True)
    for top in ("lib", "bin", "sbin"):        # merged-/usr suites ship no /lib link
        if not (partial / top).exists():
            (partial / top).symlink_to(f"usr/{top}")
    partial.rename(root)
    return root


def command(version: str) -> list[str]:
    """argv prefix that runs the aarch64 ``python{version}``."""
    root = sysroot(version)
    return [QEMU, "-L", str(root), str(root / "usr" / "bin" / f"python{version}")]


def make_venv(version: str, dest: Path, with_pip: bool = True) -> Path:
    """A venv of the aarch64 CPython ``version`` at ``dest``; its ``bin/python``."""
    root = sysroot(version)
    # ensurepip runs in a subprocess of the new venv's python: only after the wrapper
    subprocess.run([*command(version), "-m", "venv", "--symlinks", "--without-pip", str(dest)],
                   check=True)
    script = WRAPPER.format(version=version, qemu=shutil.which(QEMU), root=root)
    for name in ("python", "python3", f"python{version}"):
        link = dest / "bin" / name
        link.unlink(missing_ok=True)
        link.write_text(script)
        link.chmod(0o755)
    python = dest / "bin" / "python"
    if with_pip:
        # Debian's ensurepip takes pip's wheel from /usr/share/python-wheels, which qemu -L
        # maps into the root for open() but not for listxattr() (copy2): trixie's fails.
        # pip runs from its own wheel instead.
        wheels = sorted((root / "usr/share/python-wheels").glob("pip-*.whl"))
        cmd = ([str(python), f"{wheels[-1]}/pip", "install", "-q", "--no-index", str(wheels[-1])]
               if wheels else [str(python), "-m", "ensurepip", "--default-pip"])
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return python


def main(argv: list[str]) -> int:
    version = argv[0] if argv else "3.13"
    try:
        cmd = command(version)
    except Unavailable as exc:
        sys.exit(str(exc))
    subprocess.run([*cmd, "-c", "import platform, sys; print(sys.version, platform.machine())"],
                   check=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    print(f"root={sysroot(version)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
