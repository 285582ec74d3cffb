"""Run kproto's fuzz targets with atheris (libFuzzer), one process per target, in turn.

    python tests/fuzz/run.py --short                      # every target ~4 s (the suite: 3 s)
    python tests/fuzz/run.py --long                       # every target 10 million executions
    python tests/fuzz/run.py records_cython --seconds 600
    python tests/fuzz/run.py --long --build /tmp/kproto-fuzz-cov        # Cython edges too
    python tests/fuzz/run.py --runs 1000000 --build /tmp/kproto-fuzz-asan --asan  # ASan+UBSan
    python tests/fuzz/run.py records_cython -- -only_ascii=1              # more libFuzzer flags
    python tests/fuzz/run.py records_cython --replay WORK/records_cython/crash-*  # reproduce

Targets and the oracle are in tests/fuzz/targets.py, seeds in tests/fuzz/corpus/<decoder>/
(tests/fuzz/seeds.py writes them). ``--build DIR`` imports kproto from a copy built by
tests/fuzz/build.sh: ``cov`` has the Cython code instrumented for libFuzzer (without it
only the Python code guides the fuzzer); ``asan`` adds AddressSanitizer and UBSan, whose
runtime ``--asan`` preloads. Each target's corpus, log and any finding
(crash-*/timeout-*/oom-* inputs) go to WORK/<target>/ (default /tmp/kproto-fuzz-work);
a summary line per target is appended to WORK/results.jsonl and printed as a table.
Exit status 1 if any target had a finding.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzz.targets import INSTRUMENT, TARGETS  # noqa: E402

MAX_LEN = {"records": 8192, "fetch": 4096, "protocol": 2048, "avro": 4096, "formats": 4096}
LONG_RUNS = 10_000_000
SHORT_SECONDS = 4
#: libFuzzer's artifact prefixes, and ours (--keep-going)
FINDING_KINDS = ("crash", "timeout", "oom", "leak", "finding")


# --------------------------------------------------------------------------- the child


def load_libfuzzer() -> bool:
    """Make libFuzzer's coverage hooks global symbols, which an instrumented _codec needs
    to load: already there (preloaded, --asan: asan_with_fuzzer.so; returns True), or
    atheris's own copy loaded RTLD_GLOBAL."""
    import ctypes

    if hasattr(ctypes.CDLL(None), "LLVMFuzzerRunDriver"):
        return True
    flags = sys.getdlopenflags()
    sys.setdlopenflags(os.RTLD_NOW | os.RTLD_GLOBAL)
    import atheris.core_with_libfuzzer  # noqa: F401
    sys.setdlopenflags(flags)
    return False


def child(target: str, build: str | None, libfuzzer_args: list[str],
          keep_going: str | None = None) -> None:
    """Fuzz one target in this process (atheris.Fuzz never returns)."""
    import atheris

    preloaded = load_libfuzzer()
    if build:
        sys.path.insert(0, str(Path(build).resolve()))
    # instrument_imports takes whole packages: exclude every other kproto module
    modules = {".".join(("kproto", *p.relative_to(ROOT / "kproto").with_suffix("").parts))
               .removesuffix(".__init__") for p in (ROOT / "kproto").rglob("*.py")}
    exclude = sorted(modules - set(INSTRUMENT[target]))
    with atheris.instrument_imports(include=["kproto"], exclude=exclude):
        for name in ("kproto._avro", "kproto._codec", "kproto._pure.avro",
                     "kproto._pure.records", "kproto._pure.wire", "kproto.compression",
                     "kproto.formats.avro", "kproto.formats.json", "kproto.formats.protobuf",
                     "kproto.protocol", "kproto.protocol.engine", "kproto.protocol.slicer"):
            importlib.import_module(name)   # (not import statements: their sort order
                                            # depended on what the checkout had built)
    from tests.fuzz import targets

    codec_file = sys.modules["kproto._codec"].__file__
    print(f"kproto-fuzz: {target}: kproto._codec from {codec_file}", flush=True)
    one_input = targets.make(target, keep_going)
    # internal_libfuzzer: the copy loaded above, whose hooks the instrumented _codec uses
    atheris.Setup([sys.argv[0], *libfuzzer_args], one_input, internal_libfuzzer=not preloaded)
    atheris.Fuzz()


# --------------------------------------------------------------------------- the driver


def asan_env(build: str) -> dict[str, str]:
    """Preload the ASan runtime with libFuzzer that build.sh asan made next to the build."""
    runtime = Path(build) / "asan_with_fuzzer.so"
    if not runtime.exists():
        sys.exit(f"{runtime} is missing: build with tests/fuzz/build.sh asan {build}")
    return {
        "LD_PRELOAD": str(runtime),
        "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:handle_segv=1:"
                        "abort_on_error=1:symbolize=1",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
        "PYTHONMALLOC": "malloc",  # every Python allocation through ASan as well
    }


def parse_log(text: str) -> dict[str, object]:
    """Executions and libFuzzer's verdict from a target's log."""
    out: dict[str, object] = {}
    m = re.search(r"stat::number_of_executed_units:\s*(\d+)", text)
    if m:
        out["execs"] = int(m.group(1))
    else:
        runs = re.findall(r"^#(\d+)\s", text, re.M)
        out["execs"] = int(runs[-1]) if runs else 0
    m = re.search(r"stat::peak_rss_mb:\s*(\d+)", text)
    if m:
        out["peak_rss_mb"] = int(m.group(1))
    m = re.search(r"INFO: Loaded (\d+) modules\s+\((\d+) inline 8-bit counters\)", text)
    if m:
        out["modules"], out["counters"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"^#\d+\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)", text, re.M)
    if m:
        out["cov"], out["features"], out["corpus"] = (int(g) for g in m.groups())
    return out


def run_target(target: str, args: argparse.Namespace, extra: list[str]) -> dict[str, object]:
    decoder, _ = TARGETS[target]
    work = Path(args.work) / target
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for old in work.iterdir():     # findings of an earlier run are not this run's
        if old.name.split("-")[0] in FINDING_KINDS:
            old.unlink()
    fuzz_args = [f"-max_len={MAX_LEN[decoder]}", "-timeout=10", "-rss_limit_mb=2048",
                 "-print_final_stats=1", f"-artifact_prefix={work}/"]
    if args.runs is not None:
        fuzz_args.append(f"-runs={args.runs}")
    if args.seconds is not None:
        fuzz_args.append(f"-max_total_time={args.seconds}")
    fuzz_args += extra
    fuzz_args += [str(corpus), str(HERE / "corpus" / decoder)]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", target]
    if args.build:
        cmd += ["--build", args.build]
    if args.keep_going:
        cmd += ["--keep-going", "--work", args.work]
    cmd += ["--", *fuzz_args]
    env = dict(os.environ)
    if args.asan:
        env.update(asan_env(args.build))
    log_path = work / "log.txt"
    started = time.monotonic()
    with open(log_path, "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            cwd=str(ROOT)).returncode
    seconds = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    findings = sorted(str(p) for p in work.iterdir() if p.name.split("-")[0] in FINDING_KINDS)
    result: dict[str, object] = {
        "target": target, "build": args.build or "dev", "asan": args.asan, "rc": rc,
        "seconds": round(seconds, 1), **parse_log(text), "findings": findings,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "log": str(log_path),
    }
    if rc != 0 and not findings:
        result["findings"] = [f"exit status {rc}: see {log_path}"]
    with open(Path(args.work) / "results.jsonl", "a") as f:
        f.write(json.dumps(result) + "\n")
    return result


def replay(names: list[str], files: list[str], build: str | None) -> int:
    """Run saved inputs through one target's oracle, printing what each does."""
    import traceback

    if len(names) != 1 or names[0] not in TARGETS:
        sys.exit(f"--replay needs exactly one target of {list(TARGETS)}")
    if build:
        load_libfuzzer()
        sys.path.insert(0, str(Path(build).resolve()))
    from tests.fuzz import targets

    one_input = targets.make(names[0])
    failed = 0
    for path in files:
        try:
            one_input(Path(path).read_bytes())
            print(f"{path}: ok")
        except Exception:  # noqa: BLE001 - shown, and counted
            failed += 1
            print(f"{path}: FAILS\n{traceback.format_exc()}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("targets", nargs="*", help=f"default: all of {', '.join(TARGETS)}")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--short", action="store_true", help=f"{SHORT_SECONDS} s a target")
    mode.add_argument("--long", action="store_true", help=f"{LONG_RUNS:,} executions a target")
    mode.add_argument("--runs", type=int, help="executions a target")
    mode.add_argument("--seconds", type=int, help="seconds a target")
    p.add_argument("--build", help="import kproto from this copy (tests/fuzz/build.sh)")
    p.add_argument("--asan", action="store_true", help="preload the ASan runtime")
    p.add_argument("--work", default="/tmp/kproto-fuzz-work", help="corpora, logs, findings")
    p.add_argument("--keep-going", action="store_true",
                   help="triage: save failing inputs as WORK/TARGET/finding-* and go on")
    p.add_argument("--replay", nargs="+", metavar="FILE",
                   help="run these inputs through the target's oracle once (no atheris)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.replay:
        return replay(args.targets, args.replay, args.build)
    if args.asan and not args.build:
        p.error("--asan needs --build DIR (made by tests/fuzz/build.sh asan DIR)")
    if args.child:
        child(args.child, args.build, extra,
              str(Path(args.work) / args.child) if args.keep_going else None)
        return 0
    if args.short:
        args.seconds = SHORT_SECONDS
    elif args.long:
        args.runs = LONG_RUNS
    elif args.runs is None and args.seconds is None:
        args.seconds = SHORT_SECONDS
    names = args.targets or list(TARGETS)
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        p.error(f"unknown target(s) {unknown}; known: {list(TARGETS)}")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    results = []
    print(f"{'target':<17} {'executions':>12} {'seconds':>9} {'exec/s':>8}  findings",
          flush=True)
    for name in names:
        r = run_target(name, args, extra)
        results.append(r)
        execs, secs = int(r.get("execs") or 0), float(r["seconds"])  # type: ignore[arg-type]
        found = r["findings"] or "none"
        print(f"{name:<17} {execs:>12,} {secs:>9.1f} {execs / max(secs, 1e-9):>8.0f}  {found}",
              flush=True)
    return 1 if any(r["findings"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
