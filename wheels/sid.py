#!/usr/bin/env python3
"""CPython 3.14 and 3.15 from Debian sid, for wheels: ``python3 wheels/sid.py``.

This machine's Debian (12, glibc 2.36) packages CPython 3.11 only and pyenv has
3.10-3.13. Debian's ``sid`` suite of the same archive has ``python3.14`` and
``python3.15`` (GIL builds, with ``-dev`` headers) for amd64 and arm64; they need
glibc >= 2.38, so they run in a sid root of their own, kept in the cache
directory (:data:`CACHE`: ``$KPROTO_WHEELS_CACHE``, else
``$XDG_CACHE_HOME/kproto-wheels``, else ``~/.cache/kproto-wheels``; never in the
checkout):

- amd64: a chroot made by ``mmdebstrap --mode=root --variant=apt`` (``sid/amd64``,
  ~330 MB): the interpreters, their ``-dev`` and ``-venv`` packages and
  ca-certificates; no compiler. mmdebstrap itself (sid's, ``all``) is downloaded
  with apt-get into a private apt state and unpacked with ``dpkg-deb -x``: the
  machine's apt configuration, lists and dpkg database are not touched. The
  archive is a frozen snapshot, hence ``Acquire::Check-Valid-Until "false"``.
- arm64: wheels/qemu.py's root (Debian's arm64 packages unpacked, run with
  ``qemu-aarch64-static -L``; no binfmt_misc registration), sid's for 3.14/3.15.

Building needs only the headers (:func:`include_dir`: ``/usr/include/python3.X``
of the root, with the ``pyconfig.h`` of that architecture): the wheels are
compiled with this machine's compilers (glibc 2.36), not sid's (glibc 2.43, whose
``strtol``/``sscanf`` bind ``__isoc23_*@GLIBC_2.38`` and lose the manylinux tag).

Running: :func:`python_command` is a script that enters the chroot (a private
mount namespace, ``unshare --mount``, with the host's ``/tmp``, the checkout,
``/proc`` and ``/dev`` bound at their own paths: the mounts vanish with the process)
and runs ``/usr/bin/python3.X`` in the caller's directory. :func:`make_venv` makes a
venv there whose ``bin/python`` does the same, so ``bin/python -m pip ...`` and
``bin/python -m pytest`` work from the host, with host paths, and subprocesses
started with ``sys.executable`` inside run natively. Root is needed (mmdebstrap
``--mode=root``, ``chroot``, ``mount``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = Path(os.environ.get("KPROTO_WHEELS_CACHE") or
             Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kproto-wheels")
#: the CPythons that come from sid
VERSIONS = ("3.14", "3.15")
SUITE = "sid"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
#: what the amd64 chroot holds besides sid's essential packages and apt
INCLUDE = [p.format(v=v) for v in VERSIONS for p in ("python{v}", "python{v}-dev",
                                                     "python{v}-venv")] + ["ca-certificates"]
#: a file only the chroot has: a wrapper that finds it is already inside
MARKER = ".kproto-wheels-chroot"
ENTER = """#!/bin/bash
# Enter the Debian sid chroot {root} (wheels/sid.py) and run "$@" there, in this
# directory. Runs in a private mount namespace (unshare --mount): the host's /tmp and
# the checkout are bound at their own paths, with /proc and /dev; nothing outlives it.
set -e
caller_path=$PATH
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
root={root}
mount --make-rprivate /
for dir in /tmp {checkout}; do
    mkdir -p "$root$dir"
    mount --rbind "$dir" "$root$dir"
done
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
cp /etc/resolv.conf /etc/hosts "$root/etc/" 2>/dev/null || true
unset PIP_FIND_LINKS VIRTUAL_ENV PYTHONHOME
export PATH=$caller_path
exec /usr/sbin/chroot "$root" /bin/bash -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"' \\
    enter "$PWD" "$@"
"""
#: bin/python of a venv in the chroot: the real interpreter inside, the chroot from outside
VENV_PYTHON = """#!/bin/bash
# CPython {version} (amd64) of the Debian sid chroot {root} (wheels/sid.py)
if [ -e /{marker} ]; then exec -a "$0" /usr/bin/python{version} "$@"; fi
exec /usr/bin/unshare --mount /bin/bash {root}/.kproto-enter "$0" "$@"
"""


class Unavailable(RuntimeError):
    """The sid chroot cannot be had here (the reason is the message)."""


def mirror() -> str:
    """The Debian mirror this machine's apt sources name."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    for line in sources.read_text().splitlines() if sources.exists() else []:
        if line.startswith("URIs:"):
            return line.split()[1]
    legacy = Path("/etc/apt/sources.list")
    for line in legacy.read_text().splitlines() if legacy.exists() else []:
        parts = line.split()
        if parts[:1] == ["deb"]:
            return next(p for p in parts[1:] if not p.startswith("["))
    raise Unavailable("no Debian mirror in /etc/apt/sources.list(.d)")


def apt(state: Path, arch: str, suite: str, *args: str, cwd: Path | None = None) -> None:
    """apt-get on a private state in ``state`` (its own sources, lists, status, cache)."""
    if not (state / "status").exists():
        for sub in ("etc/apt/sources.list.d", "etc/apt/preferences.d",
                    "var/lib/apt/lists/partial", "var/cache/apt/archives/partial"):
            (state / sub).mkdir(parents=True, exist_ok=True)
        (state / "etc/apt/sources.list").write_text(
            f"deb [arch={arch} signed-by={KEYRING}] {mirror()} {suite} main\n")
        (state / "status").touch()
    opts = [f"-o{k}={v}" for k, v in {
        "Dir": state, "Dir::State::status": state / "status",
        "APT::Architecture": arch, "APT::Architectures::": arch,
        "Dir::Etc::trusted": "/etc/apt/trusted.gpg",
        "Dir::Etc::trustedparts": "/etc/apt/trusted.gpg.d",
        "Acquire::Check-Valid-Until": "false",      # the mirror is a frozen snapshot
        "APT::Install-Recommends": "false", "Debug::NoLocking": "1"}.items()]
    subprocess.run(["apt-get", "-q", "-y", *opts, *args], check=True, cwd=cwd,
                   stdout=subprocess.DEVNULL)


def mmdebstrap() -> list[str]:
    """argv prefix of sid's mmdebstrap, downloaded and unpacked into the cache once."""
    tools = CACHE / "tools"
    script = tools / "root" / "usr" / "bin" / "mmdebstrap"
    if not script.exists():
        state = tools / "apt"
        print(f"downloading sid's mmdebstrap into {tools}", flush=True)
        apt(state, "amd64", SUITE, "update")
        archives = state / "var/cache/apt/archives"
        apt(state, "amd64", SUITE, "download", "mmdebstrap", cwd=archives)
        (deb,) = archives.glob("mmdebstrap_*.deb")
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tools / "root")], check=True)
    return ["perl", str(script)]


def chroot(arch: str = "amd64") -> Path:
    """The sid chroot (made on first use, ~1 min); its root directory."""
    if arch != "amd64":
        raise Unavailable(f"the sid chroot is amd64 only; {arch} runs under qemu "
                          "(wheels/qemu.py)")
    root = CACHE / SUITE / arch
    if (root / MARKER).exists():
        return root
    if os.geteuid() != 0:
        raise Unavailable("the sid chroot needs root (mmdebstrap --mode=root, chroot, mount)")
    for tool in ("apt-get", "dpkg-deb", "perl", "unshare", "chroot"):
        if shutil.which(tool) is None:
            raise Unavailable(f"{tool} not found: the sid chroot needs it")
    started = time.monotonic()
    partial = root.with_name(arch + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    print(f"making the Debian sid chroot {root} (mmdebstrap)", flush=True)
    subprocess.run([*mmdebstrap(), "--mode=root", "--variant=apt", f"--architectures={arch}",
                    "--aptopt=Acquire::Check-Valid-Until \"false\"",
                    f"--include={','.join(INCLUDE)}", SUITE, str(partial),
                    f"deb [signed-by={KEYRING}] {mirror()} {SUITE} main"], check=True)
    # pip inside trusts what the host trusts (its proxies, its CAs)
    shutil.copy("/etc/ssl/certs/ca-certificates.crt", partial / "etc/ssl/certs/")
    enter = partial / ".kproto-enter"
    enter.write_text(ENTER.format(root=root, checkout=ROOT))
    enter.chmod(0o755)
    for version in VERSIONS:
        (partial / f".kproto-python{version}").write_text(
            f"#!/bin/sh\nexec /usr/bin/unshare --mount /bin/bash {root}/.kproto-enter "
            f"/usr/bin/python{version} \"$@\"\n")
        (partial / f".kproto-python{version}").chmod(0o755)
    (partial / MARKER).write_text("made by kproto's wheels/sid.py\n")
    partial.rename(root)
    print(f"sid chroot ready in {time.monotonic() - started:.0f} s", flush=True)
    return root


def python_command(version: str) -> Path:
    """A host script running the chroot's ``/usr/bin/python{version}`` in the chroot."""
    if version not in VERSIONS:
        raise Unavailable(f"sid's chroot has CPython {', '.join(VERSIONS)}, not {version}")
    return chroot() / f".kproto-python{version}"


def run_command(*argv: str | Path) -> list[str]:
    """argv that runs ``argv`` (paths inside the chroot; host /tmp and checkout paths
    are the same there) in the chroot, in the current directory."""
    return ["/usr/bin/unshare", "--mount", "/bin/bash", str(chroot() / ".kproto-enter"),
            *map(str, argv)]


def make_venv(version: str, dest: Path, with_pip: bool = True) -> Path:
    """A venv of sid's CPython ``version`` at ``dest`` (under /tmp or the checkout);
    its ``bin/python``, a script that runs it in the chroot."""
    dest = Path(dest).resolve()
    if not (str(dest).startswith("/tmp/") or str(dest).startswith(f"{ROOT}/")):
        raise Unavailable(f"{dest}: a chroot venv must be under /tmp or {ROOT} (bound inside)")
    root = chroot()
    subprocess.run([str(python_command(version)), "-m", "venv", "--symlinks",
                    *([] if with_pip else ["--without-pip"]), str(dest)], check=True,
                   stdout=subprocess.DEVNULL)
    script = VENV_PYTHON.format(version=version, root=root, marker=MARKER)
    for name in ("python", "python3", f"python{version}"):
        link = dest / "bin" / name
        link.unlink(missing_ok=True)
        link.write_text(script)
        link.chmod(0o755)
    return dest / "bin" / "python"


def include_dir(version: str, root: Path, triplet: str, work: Path) -> Path:
    """``python{version}``'s headers in ``root`` (a Debian root of ``triplet``), copied to
    ``work`` with the architecture's own pyconfig.h in place of Debian's multiarch switch.
    Only these: ``-I`` of the root's /usr/include would bring sid's glibc headers."""
    src = root / "usr" / "include" / f"python{version}"
    arch_config = root / "usr" / "include" / triplet / f"python{version}" / "pyconfig.h"
    if not (src / "Python.h").exists() or not arch_config.exists():
        raise Unavailable(f"no python{version}-dev headers for {triplet} in {root}")
    dest = work / "target-include" / f"python{version}"
    shutil.copytree(src, dest, symlinks=False)
    (dest / "pyconfig.h").unlink()
    shutil.copy(arch_config, dest / "pyconfig.h")
    return dest


def main(argv: list[str]) -> int:
    try:
        for version in argv or VERSIONS:
            subprocess.run([str(python_command(version)), "-c", "import platform, sys; "
                            "print(sys.version.split()[0], platform.machine(), sys.prefix)"],
                           check=True)
    except Unavailable as exc:
        sys.exit(str(exc))
    print(f"root={chroot()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
