"""The wheel and the packed environment of ``wheels/`` work where no compiler is.

(a) ``wheels/build.py`` builds a manylinux wheel; a fresh venv installs it with
``pip install --only-binary=:all:`` while no compiler can run (``CC=/bin/false``,
a ``PATH`` without gcc), and the installed compiled codec decodes and encodes
record batches.

(b) ``wheels/pack.py`` packs that wheel with its dependencies; ``spark-submit
--master local-cluster[1,2,2048] --archives <env>#env --conf
spark.pyspark.python=./env/bin/python`` runs a job reading a Tansu topic
through ``format("kproto")``, with nothing from this checkout's ``.venv`` on
any Python path: the executor imports kproto from the shipped archive, the
driver from the same archive unpacked in the job's directory (client mode:
Python data sources are planned by ``spark.pyspark.python`` on the driver).

Takes a few minutes (build ~40 s, pack ~40 s, the Spark job ~40 s), so it runs
only with ``KPROTO_TEST_WHEELS=1``.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / "wheels"

pytestmark = pytest.mark.skipif(
    os.environ.get("KPROTO_TEST_WHEELS") != "1",
    reason="builds a wheel, packs an environment and runs spark-submit (minutes): "
           "set KPROTO_TEST_WHEELS=1 to run")

SMOKE = textwrap.dedent("""
    import sys
    import pyarrow as pa
    import kproto, kproto._codec
    from kproto import records

    assert kproto._codec.__file__.endswith(".so"), kproto._codec.__file__
    assert kproto.__file__.startswith(sys.prefix), (kproto.__file__, sys.prefix)
    n = 50_000
    table = pa.table({"key": [b"k%d" % i for i in range(n)],
                      "value": [b"value-%d" % i * 3 for i in range(n)]})
    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        cols = records.decode(records.encode(table, compression=codec),
                              topic="t", partition=0)
        back = cols.to_arrow()
        assert back.num_rows == n, codec
        assert back.column("key").equals(table.column("key").combine_chunks()), codec
        assert back.column("value").equals(table.column("value").combine_chunks()), codec
        assert back.column("offset").to_pylist() == list(range(n)), codec
    print("smoke ok", kproto._codec.__file__)
""")

JOB = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    import kproto, kproto.spark

    bootstrap, topic = sys.argv[1], sys.argv[2]
    spark = SparkSession.builder.appName("kproto-wheels").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kproto.spark.register(spark)
    df = (spark.read.format("kproto").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).load())
    print("COUNT=%d" % df.count())
    print("PARTITIONS=%s" % sorted(tuple(r) for r in df.groupBy("partition").count().collect()))
    where = (spark.sparkContext.parallelize(range(4), 4)
             .map(lambda _: __import__("kproto").__file__).distinct().collect())
    print("EXECUTOR_KPROTO=%s" % ";".join(where))
    print("DRIVER_KPROTO=%s" % kproto.__file__)
    spark.stop()
""")


def _run(cmd: list, timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    started = time.monotonic()
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, **kw)
    took = time.monotonic() - started
    shown = " ".join(str(c) if len(str(c)) < 200 else "<script>" for c in cmd)
    print(f"+ {shown}  ({took:.0f} s, rc={proc.returncode})")
    if proc.returncode != 0:
        pytest.fail(f"{cmd[:3]} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
                    f"{proc.stderr[-8000:]}", pytrace=False)
    return proc


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything pointing at the dev venv."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYSPARK_PYTHON",
                        "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and p != venv_bin)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = _run([sys.executable, WHEELS / "build.py", "--wheel-dir", out], cwd=ROOT)
    (path,) = out.glob("kproto-*.whl")
    assert proc.stdout.strip().splitlines()[-1] == f"wheel={path}"
    return path


def test_wheel_is_manylinux_and_installs_without_a_compiler(wheel, tmp_path):
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert re.fullmatch(rf"kproto-[^-]+-{tag}-{tag}-(manylinux[^-]*_x86_64|manylinux\w+)"
                        r"(\.manylinux\w+)*\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        (wheel_meta,) = [n for n in names if n.endswith(".dist-info/WHEEL")]
        tags = re.findall(r"^Tag: (\S+)$", z.read(wheel_meta).decode(), re.M)
    assert tags and all(re.fullmatch(rf"{tag}-{tag}-manylinux\w+", t) for t in tags), tags
    assert any(re.fullmatch(r"kproto/_codec\.cpython-.*\.so", n) for n in names)

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    no_tools = tmp_path / "bin"          # a PATH with no compiler (and nothing else)
    no_tools.mkdir()
    env = _clean_env(PATH=str(no_tools), CC="/bin/false", CXX="/bin/false",
                     LDSHARED="/bin/false")
    assert shutil.which("gcc", path=env["PATH"]) is None
    assert shutil.which("cc", path=env["PATH"]) is None
    try:
        _run([py, "-m", "pip", "install", "-q", "--only-binary=:all:", wheel], env=env,
             cwd=tmp_path)
        smoke = _run([py, "-I", "-c", SMOKE], env=env, cwd=tmp_path)
        assert "smoke ok " + str(env_dir) in smoke.stdout
    finally:   # ~300 MB (NumPy, pyarrow)
        shutil.rmtree(env_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def packed(wheel, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("packed") / "kproto-env.tar.gz"
    proc = _run([sys.executable, WHEELS / "pack.py", "--wheel", wheel, "--output", out],
                cwd=ROOT)
    assert "packed env ok" in proc.stdout
    return out


def _spark_home(tmp: Path) -> Path:
    """A SPARK_HOME of symlinks to the pyspark package: local-cluster workers write their
    work directories (each with the unpacked archive, ~370 MB) under $SPARK_HOME/work."""
    import pyspark

    real = Path(pyspark.__file__).parent
    home = tmp / "spark-home"
    home.mkdir()
    for entry in real.iterdir():
        if entry.name != "work":
            (home / entry.name).symlink_to(entry)
    return home


def test_packed_env_runs_a_spark_job_on_executors(packed, tansu, unique_topic, tmp_path):
    import pyarrow as pa

    from kproto import Admin, Producer

    topic, n = unique_topic, 30_000
    with Admin(bootstrap_servers=tansu.bootstrap) as admin:
        admin.create_topics({topic: 3}, exist_ok=True)
    table = pa.table({"key": [b"k%d" % i for i in range(n)],
                      "value": [b"v" * (i % 100) for i in range(n)]})
    with Producer(bootstrap_servers=tansu.bootstrap, compression_type="lz4") as p:
        p.send_batch(topic, table).result(60)

    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / "job.py").write_text(JOB)
    # Client mode: the driver's Python (and the data-source planner it starts) runs
    # spark.pyspark.python, ./env/bin/python relative to this directory.
    with tarfile.open(packed) as tar:
        kw = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
        tar.extractall(job_dir / "env", **kw)
    home = _spark_home(tmp_path)
    env = _clean_env(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1")
    try:
        proc = _run([home / "bin" / "spark-submit", "--master", "local-cluster[1,2,2048]",
                     "--archives", f"{packed}#env",
                     "--conf", "spark.pyspark.python=./env/bin/python",
                     "--conf", "spark.ui.enabled=false",
                     "job.py", tansu.bootstrap, topic], env=env, cwd=job_dir, timeout=600)
    finally:   # ~370 MB each: the driver's copy and the executor's
        shutil.rmtree(job_dir / "env", ignore_errors=True)
        for app in (home / "work").glob("app-*/*/env"):
            shutil.rmtree(app.resolve(), ignore_errors=True)
    out = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    assert int(out["COUNT"]) == n
    per_partition = ast.literal_eval(out["PARTITIONS"])
    assert [p for p, _ in per_partition] == [0, 1, 2]
    assert sum(c for _, c in per_partition) == n
    executor_paths = out["EXECUTOR_KPROTO"].split(";")
    work = home / "work"
    assert executor_paths and all(
        p.startswith(str(work)) and "/env/lib/" in p for p in executor_paths), executor_paths
    assert out["DRIVER_KPROTO"].startswith(str(job_dir / "env" / "lib")), out["DRIVER_KPROTO"]
