#!/usr/bin/env python3
"""Pack a relocatable Python environment with kproto for Spark: ``python3 wheels/pack.py``.

Steps:

1. a fresh venv in a temporary directory (no pip in it), from the
   interpreter running this script (``--python X.Y``: from CPython X.Y, found
   as build.py finds it);
2. ``pip install --only-binary=:all:`` of kproto's wheel from ``wheels/dist/``
   (made by ``wheels/build.py``) with its runtime dependencies (NumPy,
   pyarrow, lz4, zstandard, cramjam, urllib3) and ``pandas>=2,<3`` (Spark's Arrow
   path imports pandas) — wheels only, so nothing is compiled;
3. ``venv-pack`` (PyPI, installed into the build tools venv) writes it to
   ``wheels/dist/kproto-env.tar.gz``;
4. a check: the archive is unpacked to a temporary directory and its
   ``bin/python`` imports ``kproto._codec`` and decodes a record batch.

``--platform aarch64`` packs for aarch64 executors (Graviton & co.) on this
x86_64 machine: the venv is made by this machine's CPython X.Y, the packages
(kproto's aarch64 wheel, NumPy's, pyarrow's, ...) go into its site-packages with
``pip install --target --platform manylinux_2_17_aarch64 --python-version X.Y``,
and ``--python-prefix`` (default ``/usr``: ``env/bin/python`` ->
``/usr/bin/pythonX.Y``, as Debian, Ubuntu and Amazon Linux put it) says where the
executors' CPython X.Y is. The check runs the unpacked archive under qemu-user with
Debian's arm64 CPython standing at that prefix (wheels/qemu.py; 3.11, 3.13, 3.14 and
3.15; for 3.10 and 3.12 the check is skipped and says so). Console scripts (the
``kproto`` command) are left out of an aarch64 pack: ``python -m kproto.cli``.

``--python 3.14`` and ``--python 3.15`` (either platform) take the interpreter from
Debian sid (wheels/sid.py's chroot): the venv is made by sid's CPython in the
chroot and filled as for aarch64 (``pip install --target --platform ...
--python-version X.Y``, by this machine's own tools), ``--python-prefix`` defaults
to ``/usr``, and the x86_64 check runs the unpacked archive in the chroot, where
``/usr/bin/pythonX.Y`` is sid's. pandas 2 has no cp315 wheels: 3.15 packs pandas 3.

pyspark is not packed: Spark puts its own ``pyspark.zip`` and py4j on the
workers' ``PYTHONPATH``. Ship it with::

    spark-submit --archives wheels/dist/kproto-env.tar.gz#env \\
                 --conf spark.pyspark.python=./env/bin/python job.py

venv-pack does not copy the interpreter: ``env/bin/python`` is a symlink to
the Python this script ran with (printed at the end); every executor (and
the driver) needs that interpreter at that path.

Options:
    --python X.Y     the CPython to pack for (default: the one running this script)
    --platform P     x86_64 or aarch64 (default: this machine's)
    --wheel PATH     the kproto wheel to pack (default: the one in wheels/dist/ for them)
    --output PATH    default wheels/dist/kproto-env.tar.gz, or kproto-env-X.Y-P.tar.gz
                     when --python or --platform is given
    --with SPEC      another requirement to pack (repeatable); ``--no-pandas`` drops pandas
    --no-check       skip the unpack-and-import check
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import qemu  # noqa: E402
import sid  # noqa: E402

from build import DIST, PLATFORMS, build_venv, find_python, native_platform, run  # noqa: E402

PACK_TOOLS = ["venv-pack>=0.2"]
CHECK = """
import sys, platform, kproto, kproto._codec, pyarrow, pandas
from kproto import records
t = pyarrow.table({"key": [b"k%d" % i for i in range(1000)], "value": [b"v" * 10] * 1000})
back = records.decode(records.encode(t, compression="lz4")).to_arrow()
assert back.column("key").to_pylist() == t.column("key").to_pylist()
print("packed env ok:", sys.executable, platform.machine(), "kproto", kproto.__version__,
      "pyarrow", pyarrow.__version__, "pandas", pandas.__version__)
"""


def find_wheel(version: str, plat: str) -> Path:
    """The newest kproto wheel in wheels/dist/ CPython ``version`` on ``plat`` can install."""
    minor = int(version.split(".")[1])

    def fits(wheel: Path) -> bool:
        python, abi = wheel.name.split("-")[2:4]
        if not wheel.name.endswith(f"_{plat}.whl"):
            return False
        if abi == "abi3":
            return python.startswith("cp3") and int(python[3:]) <= minor
        return python == abi == f"cp3{minor}"

    found = [w for w in DIST.glob("kproto-*.whl") if fits(w)]
    if not found:
        sys.exit(f"no kproto wheel for Python {version} on {plat} in {DIST}: run "
                 f"python3 wheels/build.py --python <python{version}> --platform {plat} first")
    return max(found, key=lambda p: p.stat().st_mtime)


def unpack(archive: Path, dest: Path) -> None:
    """Unpack a venv-pack archive (its bin/python is an absolute symlink, so no "data" filter)."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "fully_trusted_filter"):
            tar.extractall(dest, filter="fully_trusted")
        else:
            tar.extractall(dest)


def pandas_requirement(version: str) -> str:
    """The pandas Spark's Arrow path imports: 2.x, or 3.x where pandas 2 has no wheels (3.15+)."""
    return "pandas>=2,<3" if int(version.split(".")[1]) < 15 else "pandas>=3,<4"


def install(tools: Path, env: Path, version: str, plat: str, requirements: list[str],
            foreign: bool) -> None:
    """Wheels only into the venv ``env``; for another platform or a Python this
    machine cannot run (``foreign``), wheels for it (pip --target)."""
    pip = [tools / "bin" / "python", "-m", "pip"]
    if not foreign:
        run(*pip, "--python", env / "bin" / "python", "install", "-q", "--only-binary=:all:",
            *requirements)
        return
    site = env / "lib" / f"python{version}" / "site-packages"
    tags = [f"manylinux_2_{g}_{plat}" for g in (17, 28)] + [f"manylinux2014_{plat}"]
    # pip --python-version picks wheels for that Python but evaluates the environment
    # markers of a wheel's Requires-Dist with this machine's Python (lz4; python_version
    # < '3.15' would be asked for on 3.15): the wheels' own dependencies are evaluated
    # here for the target and installed beside them, the wheels with --no-deps
    wheels = [r for r in requirements if r.endswith(".whl")]
    others = [r for r in requirements if not r.endswith(".whl")]
    deps = [d for w in wheels for d in wheel_dependencies(Path(w), version, plat)]
    target = ["install", "-q", "--only-binary=:all:", "--target", site, "--python-version",
              version, "--implementation", "cp", *[a for t in tags for a in ("--platform", t)]]
    if wheels:
        run(*pip, *target, "--no-deps", *wheels)
    run(*pip, *target, "--upgrade", *deps, *others)
    shutil.rmtree(site / "bin", ignore_errors=True)   # console scripts of this machine's Python


def wheel_dependencies(wheel: Path, version: str, plat: str) -> list[str]:
    """The Requires-Dist of ``wheel`` that apply to CPython ``version`` on Linux
    ``plat`` (no extras), markers evaluated for that Python, not this one."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = z.read(name).decode()
    environment = {**default_environment(), "python_version": version,
                   "python_full_version": f"{version}.0", "platform_machine": plat,
                   "implementation_name": "cpython", "platform_python_implementation": "CPython",
                   "sys_platform": "linux", "extra": ""}
    out = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is None or req.marker.evaluate(environment):
            req.marker = None
            out.append(str(req))
    return out


def point_at_base_python(env: Path) -> None:
    """Link the venv's interpreter to ``<home>/python``, the one path venv-pack's
    ``--python-prefix`` rewrites whole. (It rewrites ``<home>/python`` as a string
    prefix to ``<prefix>/bin/pythonX.Y``, so a link to ``<home>/python3.11``, as
    ``venv`` makes from pyenv's or Debian's Python, came out as
    ``<prefix>/bin/python3.113.11``.)"""
    cfg = dict(line.split(" = ", 1) for line in (env / "pyvenv.cfg").read_text().splitlines()
               if " = " in line)
    base = Path(cfg["home"]) / "python"
    for link in (env / "bin").iterdir():
        if link.is_symlink() and os.path.isabs(os.readlink(link)):
            link.unlink()
            link.symlink_to(base)


def resolve_in(root: Path, path: Path) -> Path:
    """Follow ``path``'s symlinks as qemu-user -L ``root`` does: absolute targets inside
    ``root`` first. The real file, or a clear exit if the chain ends nowhere."""
    for _ in range(40):
        if not path.is_symlink():
            return path
        target = os.readlink(path)
        if os.path.isabs(target):
            inside = root / target.lstrip("/")
            path = inside if (inside.exists() or inside.is_symlink()) else Path(target)
        else:
            path = path.parent / target
    sys.exit(f"{path}: too many symlinks")


def check(archive: Path, version: str, plat: str, prefix: str | None) -> None:
    """Unpack ``archive`` and decode and encode with its Python (qemu-user for aarch64)."""
    with tempfile.TemporaryDirectory(prefix="kproto-env-") as tmp:
        unpack(archive, Path(tmp))
        python = Path(tmp) / "bin" / "python"
        if plat == native_platform() and version in sid.VERSIONS:
            # the archive's bin/python -> <prefix>/bin/pythonX.Y: sid's, in the chroot
            run(*sid.run_command(python, "-c", CHECK), cwd=tmp)
            return
        if plat == native_platform():
            run(python, "-c", CHECK, cwd=tmp)
            return
        try:
            root = qemu.sysroot(version)
        except qemu.Unavailable as exc:
            print(f"not checked: {exc}")
            return
        # qemu -L looks absolute paths up in the root first: env/bin/python's link chain
        # ends at <prefix>/bin/pythonX.Y, Debian's arm64 CPython standing where the
        # executors' is. The archive's links are followed as they are, not assumed.
        real = resolve_in(root, python)
        if not (real.is_file() and str(real).startswith(str(root))):
            sys.exit(f"{archive}: bin/python leads to {real}, no aarch64 CPython {version} "
                     f"(python-prefix {prefix})")
        run(qemu.QEMU, "-L", root, "-0", python, real, "-c", CHECK, cwd=tmp)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", help="X.Y")
    ap.add_argument("--platform", choices=PLATFORMS)
    ap.add_argument("--wheel", type=Path)
    ap.add_argument("--output", type=Path)
    ap.add_argument("--with", dest="extra", action="append", default=[])
    ap.add_argument("--no-pandas", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--python-prefix", help="venv-pack's option: where the interpreter's "
                    "prefix is on the executors (default: where it is here; /usr for aarch64)")
    args = ap.parse_args(argv)

    started = time.monotonic()
    version = args.python or "{}.{}".format(*sys.version_info[:2])
    plat = args.platform or native_platform()
    python = Path(sys.executable) if args.python is None else find_python(version)
    if python is None:
        sys.exit(f"no CPython {version} found (pythonX.Y on PATH or ~/.pyenv/versions)")
    # sid's CPython runs in its chroot only: packed as for another machine
    foreign = plat != native_platform() or version in sid.VERSIONS
    prefix = args.python_prefix or ("/usr" if foreign else None)
    output = args.output or DIST / ("kproto-env.tar.gz" if (args.python, args.platform) ==
                                    (None, None) else f"kproto-env-{version}-{plat}.tar.gz")
    wheel = (args.wheel or find_wheel(version, plat)).resolve()
    tools = (build_venv(sys.executable, "{}.{}".format(*sys.version_info[:2]), extra=PACK_TOOLS)
             if version in sid.VERSIONS else build_venv(python, version, extra=PACK_TOOLS))
    work = Path(tempfile.mkdtemp(prefix="kproto-pack-"))
    try:
        env = work / "env"
        run(python, "-m", "venv", "--without-pip", "--symlinks", env)
        requirements = ([str(wheel)] + ([] if args.no_pandas else [pandas_requirement(version)])
                        + args.extra)
        install(tools, env, version, plat, requirements, foreign)
        if prefix:
            point_at_base_python(env)
        output.parent.mkdir(parents=True, exist_ok=True)
        run(tools / "bin" / "venv-pack", "--prefix", env, "--output", output, "--force",
            "--quiet", *(["--python-prefix", prefix] if prefix else []))
        interpreter = (Path(prefix) / "bin" / f"python{version}" if prefix
                       else (env / "bin" / "python").resolve())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not args.no_check:
        check(output, version, plat, prefix)
    size = output.stat().st_size
    print(f"\npacked {wheel.name} + dependencies into {output} "
          f"({size / 1e6:.0f} MB) in {time.monotonic() - started:.0f} s")
    print(f"env/bin/python -> {interpreter} (executors and driver need CPython {version} "
          f"for {plat} at that path)")
    print(f"env={output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
