#!/usr/bin/env python3
"""Pack a relocatable Python environment with kproto for Spark: ``python3 wheels/pack.py``.

Steps:

1. a fresh venv in a temporary directory (no pip in it), from the
   interpreter running this script;
2. ``pip install --only-binary=:all:`` of kproto's wheel from ``wheels/dist/``
   (made by ``wheels/build.py``) with its runtime dependencies (NumPy,
   pyarrow, lz4, zstandard, cramjam) and ``pandas>=2,<3`` (Spark's Arrow
   path imports pandas) — wheels only, so nothing is compiled;
3. ``venv-pack`` (PyPI, installed into the build tools venv) writes it to
   ``wheels/dist/kproto-env.tar.gz``;
4. a check: the archive is unpacked to a temporary directory and its
   ``bin/python`` imports ``kproto._codec`` and decodes a record batch.

pyspark is not packed: Spark puts its own ``pyspark.zip`` and py4j on the
workers' ``PYTHONPATH``. Ship it with::

    spark-submit --archives wheels/dist/kproto-env.tar.gz#env \\
                 --conf spark.pyspark.python=./env/bin/python job.py

venv-pack does not copy the interpreter: ``env/bin/python`` is a symlink to
the Python this script ran with (printed at the end); every executor (and
the driver) needs that interpreter at that path.

Options:
    --wheel PATH     the kproto wheel to pack (default: the one in wheels/dist/ for this Python)
    --output PATH    default wheels/dist/kproto-env.tar.gz
    --with SPEC      another requirement to pack (repeatable); ``--no-pandas`` drops pandas
    --no-check       skip the unpack-and-import check
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tarfile
import tempfile
import time
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build import DIST, build_venv, run  # noqa: E402

PACK_TOOLS = ["venv-pack>=0.2"]
CHECK = """
import sys, kproto, kproto._codec, pyarrow, pandas
from kproto import records
t = pyarrow.table({"key": [b"k%d" % i for i in range(1000)], "value": [b"v" * 10] * 1000})
back = records.decode(records.encode(t, compression="lz4")).to_arrow()
assert back.column("key").to_pylist() == t.column("key").to_pylist()
print("packed env ok:", sys.executable, "kproto", kproto.__version__,
      "pyarrow", pyarrow.__version__, "pandas", pandas.__version__)
"""


def find_wheel(version: str) -> Path:
    """The newest kproto wheel in wheels/dist/ this Python can install (cp3X or abi3)."""
    minor = int(version.split(".")[1])

    def fits(wheel: Path) -> bool:
        python, abi = wheel.name.split("-")[2:4]
        if abi == "abi3":
            return python.startswith("cp3") and int(python[3:]) <= minor
        return python == abi == f"cp3{minor}"

    found = [w for w in DIST.glob("kproto-*.whl") if fits(w)]
    if not found:
        sys.exit(f"no kproto wheel for Python {version} in {DIST}: "
                 "run python3 wheels/build.py first")
    return max(found, key=lambda p: p.stat().st_mtime)


def unpack(archive: Path, dest: Path) -> None:
    """Unpack a venv-pack archive (its bin/python is an absolute symlink, so no "data" filter)."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "fully_trusted_filter"):
            tar.extractall(dest, filter="fully_trusted")
        else:
            tar.extractall(dest)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wheel", type=Path)
    ap.add_argument("--output", type=Path, default=DIST / "kproto-env.tar.gz")
    ap.add_argument("--with", dest="extra", action="append", default=[])
    ap.add_argument("--no-pandas", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--python-prefix", help="venv-pack's option: where the interpreter's "
                    "prefix is on the executors (default: where it is here)")
    args = ap.parse_args(argv)

    started = time.monotonic()
    version = "{}.{}".format(*sys.version_info[:2])
    wheel = (args.wheel or find_wheel(version)).resolve()
    tools = build_venv(sys.executable, version, extra=PACK_TOOLS)
    work = Path(tempfile.mkdtemp(prefix="kproto-pack-"))
    try:
        env = work / "env"
        venv.EnvBuilder(with_pip=False, symlinks=True).create(env)
        requirements = [str(wheel)] + ([] if args.no_pandas else ["pandas>=2,<3"]) + args.extra
        run(tools / "bin" / "python", "-m", "pip", "--python", env / "bin" / "python",
            "install", "-q", "--only-binary=:all:", *requirements)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        prefix = ["--python-prefix", args.python_prefix] if args.python_prefix else []
        run(tools / "bin" / "venv-pack", "--prefix", env, "--output", args.output, "--force",
            "--quiet", *prefix)
        interpreter = (env / "bin" / "python").resolve()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not args.no_check:
        with tempfile.TemporaryDirectory(prefix="kproto-env-") as tmp:
            unpack(args.output, Path(tmp))
            run(Path(tmp) / "bin" / "python", "-c", CHECK, cwd=tmp)
    size = args.output.stat().st_size
    print(f"\npacked {wheel.name} + dependencies into {args.output} "
          f"({size / 1e6:.0f} MB) in {time.monotonic() - started:.0f} s")
    print(f"env/bin/python -> {interpreter} (executors and driver need it at that path)")
    print(f"env={args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
