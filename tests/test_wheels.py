"""The wheels and the packed environment of ``wheels/`` work where no compiler is.

(a) ``wheels/build.py --all`` builds the release set: CPython 3.10-3.15, each for
x86_64 and aarch64 (cross-compiled; 3.14 and 3.15 against Debian sid's headers,
wheels/sid.py). Each wheel's tags are checked (cpXY-cpXY, manylinux_2_17 of its
platform, the .so of every extension the source declares, an ELF of that machine
needing no glibc symbol newer than 2.17 and no ``__isoc23_*``). Each wheel is
installed into a fresh venv of its Python with ``pip install --only-binary=:all:``
while no compiler can run (``CC=/bin/false``, a ``PATH`` without gcc), and that venv
runs the codec test files (decode, encode, slicing, compression, primitives:
CODEC_TESTS, copied out of the checkout) and a decode and encode with every codec.
x86_64 wheels run natively (3.14 and 3.15 in the sid chroot, which has no compiler);
aarch64 wheels run under qemu-user on Debian's arm64 CPython (wheels/qemu.py: 3.11,
3.13, 3.14, 3.15; Debian has no aarch64 3.10 or 3.12, so those two are checked for
tags and symbols only, the skip says so), where the CRC-32C must run on the ARMv8
instruction. The cp314 x86_64 wheel also runs the client tests (CLIENT_TESTS, their
Tansu cases) in the chroot against a Tansu broker this process starts on the host.

(b) ``wheels/pack.py`` packs this Python's x86_64 wheel with its dependencies, and
the cp314 one (``--python 3.14``: sid's CPython);
``spark-submit --master local-cluster[1,2,2048] --archives <env>#env --conf
spark.pyspark.python=./env/bin/python`` runs a job reading a Tansu topic
through ``format("kproto")``, with nothing from this checkout's ``.venv`` on
any Python path: the executor imports kproto from the shipped archive, the
driver from the same archive unpacked in the job's directory (client mode:
Python data sources are planned by ``spark.pyspark.python`` on the driver). For 3.14
``spark.pyspark.python`` is a launcher that runs ``./env/bin/python`` in the chroot.

Takes over an hour on 2 busy cores (12 builds ~6-15 min, each x86_64 install + tests
~1-2 min, the cp314 client tests ~2 min, each aarch64 wheel 6-20 min under qemu (cp314
~12 min, cp315 ~20 min here), each Spark job ~1-3 min), so it runs only
with ``KPROTO_TEST_WHEELS=1``. ``KPROTO_TEST_WHEELS_DIR=DIR`` tests the
wheels already in DIR (all 12 expected) instead of building them;
``KPROTO_TEST_WHEELS_REF=REV`` builds commit REV (``build.py --ref``) instead of the
work tree and takes the codec test files from REV too, so wheel and tests match
while others edit the checkout (give it with ``KPROTO_TEST_WHEELS_DIR`` when the
wheels there were built with ``--ref``).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / "wheels"


def _load(name: str) -> ModuleType:
    """wheels/<name>.py as a module (by path: PyPI's ``build`` may be importable too)."""
    spec = importlib.util.spec_from_file_location(f"kproto_wheels_{name}", WHEELS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


wheel_build = _load("build")
qemu = _load("qemu")
sid = _load("sid")

SET = [(v, p) for p in wheel_build.PLATFORMS for v in wheel_build.VERSIONS]
#: the codec test files run against each installed wheel, with the helpers they import
CODEC_TESTS = ["test_records_decode.py", "test_records_encode.py", "test_fetch_slicing.py",
               "test_compression.py", "test_codec_primitives.py"]
CODEC_HELPERS = ["__init__.py", "conftest.py", "hypothesis_setup.py", "record_sets.py",
                 "schema_strategies.py"]
#: dependencies with no wheel for that CPython on PyPI, so they cannot be installed there
#: without a compiler: the test proves the gap is still there, installs the rest and runs the
#: codec tests. None now (checked 2026-11-27): lz4 and zstandard (no cp315 wheels) are
#: kproto dependencies below 3.15 only, and for 3.15 pip takes aiokafka 0.15.0rc1's cp315
#: wheel (no final release has one: pip then accepts a pre-release)
NO_WHEELS: dict[str, tuple[str, ...]] = {}
#: the lz4 and zstd backends kproto must pick in a fresh venv of that CPython (default:
#: python-lz4 and zstandard, which it depends on there)
BACKENDS = {"3.15": "cramjam compression.zstd"}
#: references the codec tests compare with that cannot do everything on that CPython: the
#: cause a failure must show (and nothing else may fail), and what it is. kafka-python's lz4
#: and zstd need python-lz4 and zstandard, which have no cp315 wheels (kproto does not
#: need them there: BACKENDS)
REFERENCE_GAPS = {"3.15": (re.compile(r"UnsupportedCodecError: Libraries for (lz4|zstd) "
                                      r"compression codec not found"),
                           "kafka-python's lz4/zstd codecs (python-lz4, zstandard: "
                           "no cp315 wheels)")}
#: the client tests the cp314 wheel runs against a broker on the host (their Tansu cases:
#: the copied conftest's mock_cluster and noida skip)
#: (not test_producer_semantics.py: it starts Tansus of its own behind fault gates)
CLIENT_TESTS = ["test_client.py", "test_consumer_semantics.py", "test_groups.py",
                "test_group_semantics.py", "test_records_brokers.py"]
CLIENT_HELPERS = ["brokers.py"]
#: appended to the copied conftest.py: its ``tansu`` is the host's broker, not a new one
HOST_TANSU = """

class _HostTansu:
    \"\"\"The Tansu broker tests/test_wheels.py started on the host.\"\"\"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.host, port = bootstrap.rsplit(":", 1)
        self.port = int(port)


@pytest.fixture(scope="session")
def tansu():
    import os

    return _HostTansu(os.environ["KPROTO_WHEELS_TANSU"])


@pytest.fixture(scope="session")
def mock_cluster():
    pytest.skip("the wheel check runs the client against the host's Tansu only")


@pytest.fixture(scope="session")
def noida():
    pytest.skip("the wheel check runs the client against the host's Tansu only")
"""
#: what those files import besides kproto and its dependencies (pyproject's test extra)
TEST_REQUIREMENTS = ["pytest>=8", "hypothesis>=6.100", "crc32c>=2.4", "kafka-python>=3.0.12",
                     "python-snappy>=0.7", "xxhash>=3", "aiokafka>=0.11"]
ELF_MACHINES = {"x86_64": 62, "aarch64": 183}   # e_machine
#: the commit the wheels are built from and tested with (None: the work tree)
REF = os.environ.get("KPROTO_TEST_WHEELS_REF") or None


def _source(path: str) -> bytes:
    """A file of the project, as REF has it (or the work tree's)."""
    if REF is None:
        return (ROOT / path).read_bytes()
    return subprocess.run(["git", "-C", str(ROOT), "show", f"{REF}:{path}"], check=True,
                          capture_output=True).stdout

pytestmark = pytest.mark.skipif(
    os.environ.get("KPROTO_TEST_WHEELS") != "1",
    reason="builds a wheel, packs an environment and runs spark-submit (minutes): "
           "set KPROTO_TEST_WHEELS=1 to run")

SMOKE = textwrap.dedent("""
    import os
    import platform, sys
    import pyarrow as pa
    import kproto, kproto._codec
    from kproto import records

    assert kproto._codec.__file__.endswith(".so"), kproto._codec.__file__
    if platform.machine() == "aarch64":        # the ARMv8 CRC32C instructions, not the tables
        assert kproto._codec.HAVE_ARM_CRC32 is True
    assert kproto.__file__.startswith(sys.prefix), (kproto.__file__, sys.prefix)
    n = 50_000
    table = pa.table({"key": [b"k%d" % i for i in range(n)],
                      "value": [b"value-%d" % i * 3 for i in range(n)]})
    for codec in os.environ.get("SMOKE_CODECS", "none,gzip,snappy,lz4,zstd").split(","):
        codec = None if codec == "none" else codec
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
    print("PYTHON=%d.%d" % sys.version_info[:2])
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


def _packages() -> list[str]:
    """Every package of the source (each kproto/**/__init__.py) as its wheel path."""
    if REF is None:
        names = [str(p.relative_to(ROOT)) for p in (ROOT / "kproto").rglob("__init__.py")]
    else:
        names = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", REF,
                                "kproto/"], check=True, capture_output=True,
                               text=True).stdout.split()
    return sorted(n for n in names if n.endswith("/__init__.py"))


def _extensions() -> list[str]:
    """Every extension module the source declares (one per kproto/*.pyx, as setup.py has)."""
    if REF is None:
        names = [p.name for p in (ROOT / "kproto").glob("*.pyx")]
    else:
        names = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", REF,
                                "kproto/"], check=True, capture_output=True,
                               text=True).stdout.split()
    return sorted(f"kproto.{Path(n).stem}" for n in names if n.endswith(".pyx"))


@pytest.fixture(scope="module")
def wheel_set(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """(version, platform) -> wheel, for the whole release set."""
    given = os.environ.get("KPROTO_TEST_WHEELS_DIR")
    if given:
        out = Path(given).resolve()
    else:
        out = tmp_path_factory.mktemp("dist")
        proc = _run([sys.executable, WHEELS / "build.py", "--all", "--wheel-dir", out,
                     *(["--ref", REF] if REF else [])], cwd=ROOT, timeout=3600)
        listed = [line[len("wheel="):] for line in proc.stdout.splitlines()
                  if line.startswith("wheel=")]
        assert sorted(listed) == sorted(str(p) for p in out.glob("kproto-*.whl"))
    found = {}
    for version, plat in SET:
        tag = "cp" + version.replace(".", "")
        matches = list(out.glob(f"kproto-*-{tag}-{tag}-*_{plat}.whl"))
        assert len(matches) == 1, (version, plat, matches)
        found[(version, plat)] = matches[0]
    return found


def _set_ids(params: tuple[str, str]) -> str:
    return f"cp{params[0].replace('.', '')}-{params[1]}"


@pytest.mark.parametrize("version_platform", SET, ids=_set_ids)
def test_wheel_tags_and_contents(wheel_set, version_platform) -> None:
    version, plat = version_platform
    wheel = wheel_set[version_platform]
    tag = "cp" + version.replace(".", "")
    # auditwheel's oldest policy for glibc 2.17 symbols, under both spellings
    assert re.fullmatch(rf"kproto-[^-]+-{tag}-{tag}-manylinux2014_{plat}"
                        rf"\.manylinux_2_17_{plat}\.whl", wheel.name), wheel.name
    triplet = wheel_build.TRIPLETS[plat]
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        (wheel_meta,) = [n for n in names if n.endswith(".dist-info/WHEEL")]
        tags = re.findall(r"^Tag: (\S+)$", z.read(wheel_meta).decode(), re.M)
        assert sorted(tags) == [f"{tag}-{tag}-manylinux2014_{plat}",
                                f"{tag}-{tag}-manylinux_2_17_{plat}"], tags
        for module in _extensions():
            so = module.replace(".", "/") + f".cpython-{tag[2:]}-{triplet}.so"
            assert so in names, (so, names)
            elf = z.read(so)
            assert elf[:4] == b"\x7fELF" and elf[4] == 2 and elf[5] == 1      # 64-bit LE
            assert int.from_bytes(elf[18:20], "little") == ELF_MACHINES[plat], so
            # symbol versions (in .dynstr): what manylinux_2_17 allows, no C23 scanf/strtol
            glibc = sorted({int(v) for v in re.findall(rb"GLIBC_2\.(\d+)", elf)})
            assert glibc and glibc[-1] <= 17, (so, glibc)
            assert b"__isoc23_" not in elf, so
        missing = [pkg for pkg in _packages() if pkg not in names]
        assert not missing, f"packages left out of the wheel: {missing}"
        assert not [n for n in names if n.endswith(".c")], "generated C shipped"
        assert not [n for n in names if ".libs/" in n], "auditwheel grafted a library"


def _copy_codec_tests(dest: Path, more: list[str] | tuple = ()) -> Path:
    """CODEC_TESTS (and ``more``) with their helpers as a ``tests`` package in ``dest``
    (no kproto there)."""
    pkg = dest / "tests"
    pkg.mkdir(parents=True)
    for name in [*CODEC_HELPERS, *CODEC_TESTS, *more]:
        (pkg / name).write_bytes(_source(f"tests/{name}"))
    (dest / "pytest.ini").write_text(textwrap.dedent("""\
        [pytest]
        addopts = -ra --strict-markers -p no:cacheprovider
        markers =
            broker: needs a real broker
        filterwarnings =
            error
            ignore::DeprecationWarning
            ignore::PendingDeprecationWarning
    """))
    return dest


def _install(py: Path, wheel: Path, version: str, env: dict[str, str], cwd: Path
             ) -> tuple[str, ...]:
    """pip-install ``wheel``, its dependencies and TEST_REQUIREMENTS into ``py``'s venv,
    wheels only; the distributions left out (NO_WHEELS: none have a wheel for ``version``)."""
    pip = [py, "-m", "pip", "install", "-q", "--only-binary=:all:"]
    missing = NO_WHEELS.get(version, ())
    if not missing:
        _run([*pip, wheel, *TEST_REQUIREMENTS], env=env, cwd=cwd, timeout=1800)
        return ()
    # the whole set still cannot be installed without a compiler, for that reason
    whole = subprocess.run([str(c) for c in [*pip, wheel, *TEST_REQUIREMENTS]], env=env,
                           cwd=cwd, capture_output=True, text=True, timeout=1800)
    assert whole.returncode != 0, f"{missing} install on {version} now: update NO_WHEELS"
    names = "|".join(missing)
    assert re.search(rf"requirement ({names})\b", whole.stderr, re.I), whole.stderr[-3000:]
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        requires = re.findall(r"^Requires-Dist: ([^;\n]+)$", z.read(meta).decode(), re.M)

    def kept(req: str) -> bool:
        return re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower() not in missing  # type: ignore

    _run([*pip, "--no-deps", wheel], env=env, cwd=cwd, timeout=1800)
    _run([*pip, *[r.strip() for r in requires if kept(r)], *filter(kept, TEST_REQUIREMENTS)],
         env=env, cwd=cwd, timeout=1800)
    return missing


def _codec_tests_with_gap(py: Path, version: str, env: dict[str, str], where: Path) -> str:
    """Run the codec tests where a reference cannot do everything (REFERENCE_GAPS):
    every failure and error must be caused by that; the summary, with those counted apart."""
    cause, what = REFERENCE_GAPS[version]
    report = where / "junit.xml"
    proc = subprocess.run([str(py), "-m", "pytest", "-q", "tests", f"--junitxml={report}",
                           "--continue-on-collection-errors"],
                          env=env, cwd=where, capture_output=True, text=True, timeout=3600)
    print(f"+ {py} -m pytest -q tests (rc={proc.returncode})")
    import xml.etree.ElementTree as ET

    passed, gap, other = 0, 0, []
    for case in ET.parse(report).iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is None:
            passed += case.find("skipped") is None
        elif cause.search((bad.get("message") or "") + (bad.text or "")):
            gap += 1
        else:
            other.append(f"{case.get('classname')}.{case.get('name')}: {bad.get('message')}")
    assert not other, "\n".join(other[:20])
    assert gap, f"no test needed {what}: REFERENCE_GAPS is out of date?"
    assert passed, proc.stdout[-3000:]
    return f"{passed} passed; {gap} need {what}"


def _no_compiler_env(tmp_path: Path) -> dict[str, str]:
    """_clean_env with a PATH holding no compiler (nothing at all) and CC & co. failing."""
    no_tools = tmp_path / "bin"
    no_tools.mkdir()
    env = _clean_env(PATH=str(no_tools), CC="/bin/false", CXX="/bin/false",
                     LDSHARED="/bin/false")
    assert shutil.which("gcc", path=env["PATH"]) is None
    assert shutil.which("cc", path=env["PATH"]) is None
    return env


@pytest.mark.parametrize("version_platform", SET, ids=_set_ids)
def test_wheel_installs_without_a_compiler_and_passes_the_codec_tests(
        wheel_set, version_platform, tmp_path) -> None:
    version, plat = version_platform
    wheel = wheel_set[version_platform]
    env_dir = tmp_path / "venv"
    if plat == wheel_build.native_platform() and version in sid.VERSIONS:
        py = sid.make_venv(version, env_dir)     # in sid's chroot (no compiler there)
    elif plat == wheel_build.native_platform():
        python = wheel_build.find_python(version)
        if python is None:
            pytest.fail(f"no CPython {version} here to install {wheel.name} into")
        _run([python, "-m", "venv", env_dir])
        py = env_dir / "bin" / "python"
    else:
        if not qemu.available(version):
            pytest.skip(f"no aarch64 CPython {version} to run it here (Debian packages "
                        f"{', '.join(qemu.SUITES)} for arm64): tags and symbols only")
        py = qemu.make_venv(version, env_dir)
    env = _no_compiler_env(tmp_path)
    try:
        missing = _install(py, wheel, version, env, tmp_path)
        arch = _run([py, "-c", "import platform; print(platform.machine())"], env=env)
        assert arch.stdout.strip() == plat
        backends = _run([py, "-I", "-c", "from kproto import compression as c; "
                         "print(c.backend(c.LZ4), c.backend(c.ZSTD))"], env=env, cwd=tmp_path)
        assert backends.stdout.split() == BACKENDS.get(version, "lz4 zstandard").split()
        smoke = _run([py, "-I", "-c", SMOKE], env=env, cwd=tmp_path, timeout=1800)
        assert "smoke ok " + str(env_dir) in smoke.stdout
        where = _copy_codec_tests(tmp_path / "codec")
        if version in REFERENCE_GAPS:
            summary = _codec_tests_with_gap(py, version, env, where)
        else:
            tests = _run([py, "-m", "pytest", "-q", "tests"], env=env, cwd=where, timeout=3600)
            summary = tests.stdout.strip().splitlines()[-1]
        if missing:
            summary += f" (without {', '.join(missing)}: no wheels for this Python)"
        print(f"{wheel.name}: {summary}")
        assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary
        if plat == "aarch64":
            # the hardware CRC path ran (not skipped) and matched the crc32c package
            crc = _run([py, "-m", "pytest", "-q", "-rA", "tests/test_codec_primitives.py",
                        "-k", "crc or arm"], env=env, cwd=where, timeout=1800)
            assert "PASSED tests/test_codec_primitives.py::test_arm_crc32_is_used_when_the_" \
                   "cpu_has_it" in crc.stdout, crc.stdout[-3000:]
    finally:   # ~300 MB (NumPy, pyarrow)
        shutil.rmtree(env_dir, ignore_errors=True)


def _pyspark_wheel(dest: Path) -> Path:
    """A wheel of the pyspark this venv has: pure Python, but an sdist on PyPI, so it is
    built here (no compiler involved) for a venv that installs wheels only."""
    from importlib.metadata import version

    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", dest,
          f"pyspark=={version('pyspark')}"], timeout=1800)
    (wheel,) = dest.glob("pyspark-*.whl")
    return wheel


def test_cp314_wheel_passes_the_client_tests_against_a_broker_on_the_host(
        wheel_set, tansu, tmp_path) -> None:
    """The cp314 x86_64 wheel in sid's chroot, its client reaching Tansu on the host's
    loopback (the chroot shares the host's network); with pyspark (kproto.spark's options
    are among the client settings tested)."""
    wheel = wheel_set[("3.14", "x86_64")]
    env_dir = tmp_path / "venv"
    py = sid.make_venv("3.14", env_dir)
    env = _no_compiler_env(tmp_path)
    env["KPROTO_WHEELS_TANSU"] = tansu.bootstrap
    pyspark = _pyspark_wheel(tmp_path / "pyspark")
    try:
        _install(py, wheel, "3.14", env, tmp_path)
        _run([py, "-m", "pip", "install", "-q", "--only-binary=:all:", pyspark], env=env,
             cwd=tmp_path, timeout=1800)
        where = _copy_codec_tests(tmp_path / "client", CLIENT_TESTS + CLIENT_HELPERS)
        conftest = where / "tests" / "conftest.py"
        conftest.write_text(conftest.read_text() + HOST_TANSU)
        tests = _run([py, "-m", "pytest", "-q",
                      *[f"tests/{t}" for t in CLIENT_TESTS]], env=env, cwd=where, timeout=1800)
        summary = tests.stdout.strip().splitlines()[-1]
        print(f"{wheel.name} against {tansu.bootstrap}: {summary}")
        assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary
        assert "error" not in summary, summary
    finally:
        shutil.rmtree(env_dir, ignore_errors=True)


#: the Spark job's Pythons: this one (its x86_64 wheel) and sid's 3.14 (in its chroot)
SPARK_PYTHONS = ["{}.{}".format(*sys.version_info[:2]), "3.14"]


@pytest.fixture(scope="module", params=SPARK_PYTHONS, ids=lambda v: "cp" + v.replace(".", ""))
def packed(request, wheel_set, tmp_path_factory) -> tuple[str, Path]:
    """(Python version, the packed environment of its x86_64 wheel)."""
    version = request.param
    out = tmp_path_factory.mktemp("packed") / "kproto-env.tar.gz"
    this = version == SPARK_PYTHONS[0]
    proc = _run([sys.executable, WHEELS / "pack.py", "--wheel", wheel_set[(version, "x86_64")],
                 "--output", out, *([] if this else ["--python", version])], cwd=ROOT)
    assert "packed env ok" in proc.stdout
    return version, out


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
    """spark-submit --archives with the packed environment; for sid's 3.14 the Python
    workers (driver and executors) run ./env/bin/python in the chroot (a launcher script
    enters it in the worker's directory: /tmp, where Spark's work directories are, and
    the checkout, where pyspark is, are the same paths there)."""
    import pyarrow as pa

    from kproto import Admin, Producer

    topic, n = unique_topic, 30_000
    with Admin(bootstrap_servers=tansu.bootstrap) as admin:
        admin.create_topics({topic: 3}, exist_ok=True)
    table = pa.table({"key": [b"k%d" % i for i in range(n)],
                      "value": [b"v" * (i % 100) for i in range(n)]})
    with Producer(bootstrap_servers=tansu.bootstrap, compression_type="lz4") as p:
        p.send_batch(topic, table).result(60)

    version, packed = packed
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / "job.py").write_text(JOB)
    python = "./env/bin/python"
    if version in sid.VERSIONS:
        launcher = tmp_path / "python-in-sid"
        launcher.write_text("#!/bin/sh\nexec " + shlex.join(sid.run_command(python))
                            + ' "$@"\n')
        launcher.chmod(0o755)
        python = str(launcher)
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
                     "--conf", f"spark.pyspark.python={python}",
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
        p.startswith(str(work)) and f"/env/lib/python{version}/" in p
        for p in executor_paths), executor_paths
    assert out["DRIVER_KPROTO"].startswith(str(job_dir / "env" / "lib")), out["DRIVER_KPROTO"]
    assert out["PYTHON"] == version, out["PYTHON"]
