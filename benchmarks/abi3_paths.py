"""Normal (cp3XY) vs Limited API (abi3) build of the same commit, in one run: the bulk
paths (records.decode, records.encode, Consumer.poll_batch) and the per-record paths
(Producer.send and Consumer.poll per record, and the per-call helpers) — the numbers
behind wheels/README.md's abi3 decision.

    .venv/bin/python benchmarks/abi3_paths.py [ROUNDS] [--ref REV]

Both trees are ``git archive REV`` (default HEAD) built in place with this
interpreter (``KPROTO_LIMITED_API=1`` for the second). One Tansu broker (this
checkout's kproto fills it) serves both. Each round runs each tree in its own
process, alternating which goes first; a process keeps each case's best repeat;
the table has the median of the rounds' bests and the range of the per-round
abi3/normal ratios (round r's abi3 process against round r's normal one). Times are
CPU time of the measuring process (CLOCK), not wall time.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
N_BULK = 1_000_000        # records per bulk decode/encode
N_POLL = 500_000          # records poll_batch reads
N_SEND = 50_000           # records sent one at a time
N_POLL_ONE = 100_000      # records read one at a time
#: CPU time of the measuring process (all its threads): on 2 cores shared with other
#: jobs, wall time mostly measures who else ran; the broker's work is not counted either
CLOCK = time.process_time


def build_tree(dest: Path, ref: str, limited: bool) -> Path:
    sys.path.insert(0, str(ROOT / "wheels"))
    from build import copy_sources

    copy_sources(dest, ref)
    env = dict(os.environ, KPROTO_LIMITED_API="1" if limited else "0")
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=dest,
                   env=env, check=True, stdout=subprocess.DEVNULL)
    built = sorted(p.name for p in (dest / "kproto").glob("_codec*.so"))
    assert len(built) == 1 and (".abi3." in built[0]) is limited, built
    return dest


def make_data(out: Path) -> None:
    """The inputs, with this checkout's kproto and its benchmark corpus."""
    sys.path.insert(0, str(ROOT))
    import pyarrow as pa

    from benchmarks.conftest import corpus
    from kproto import records

    table = pa.table({"key": pa.array([b"k%015d" % i for i in range(N_BULK)], pa.binary()),
                      "value": pa.array([b"v" * 100] * N_BULK, pa.binary())})
    with pa.ipc.new_file(str(out / "table.arrow"), table.schema) as w:
        w.write_table(table)
    (out / "one.bin").write_bytes(records.encode(table))
    (out / "many.bin").write_bytes(corpus("none", N_BULK))
    (out / "many_lz4.bin").write_bytes(corpus("lz4", N_BULK))
    (out / "ten.bin").write_bytes(records.encode(table.slice(0, 10)))
    from benchmarks.refactor.core_paths import make as fetch_answers

    fetch_answers(out)      # fetch_v16.bin: a Fetch v16 answer of 2,000 partitions


def fill(bootstrap: str) -> None:
    import pyarrow as pa

    from kproto import Admin, Producer

    table = pa.table({"key": pa.array([b"k%015d" % i for i in range(N_POLL)], pa.binary()),
                      "value": pa.array([b"x" * 100] * N_POLL, pa.binary())})
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics({"bulk": 4})
    with Producer(bootstrap_servers=bootstrap) as producer:
        producer.send_batch("bulk", table).result(300)


def measure(tree: str, data: Path, bootstrap: str, tag: str) -> dict[str, float]:
    """Each case's best time (seconds; per call for the per-call cases) with ``tree``."""
    sys.path.insert(0, tree)
    import pyarrow as pa

    from kproto import Admin, Consumer, Producer, _codec, protocol, records

    assert _codec.__file__.startswith(tree), _codec.__file__
    table = pa.ipc.open_file(str(data / "table.arrow")).read_all()
    raw = {n: (data / f"{n}.bin").read_bytes()
           for n in ("one", "many", "many_lz4", "ten", "fetch_v16")}
    metadata = {"throttle_time_ms": 0, "cluster_id": "c", "controller_id": 1,
                "brokers": [{"node_id": i, "host": f"broker{i}", "port": 9092, "rack": None}
                            for i in range(3)],
                "topics": [{"error_code": 0, "name": f"topic-{t}", "topic_id": uuid.UUID(int=t + 1),
                            "is_internal": False, "topic_authorized_operations": -1,
                            "partitions": [{"error_code": 0, "partition_index": p,
                                            "leader_id": p % 3, "leader_epoch": 0,
                                            "replica_nodes": [0, 1, 2], "isr_nodes": [0, 1, 2],
                                            "offline_replicas": []} for p in range(4)]}
                           for t in range(500)]}
    metadata_bytes = protocol.encode(3, 12, "response", metadata)

    def best(fn, reps: int, per: int = 1) -> float:
        fn()
        out = float("inf")
        for _ in range(reps):
            gc.collect()
            start = CLOCK()
            fn()
            out = min(out, CLOCK() - start)
        return out / per

    def poll_batch() -> None:
        with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                      fetch_max_wait_ms=50) as c:
            c.assign([("bulk", p) for p in range(4)])
            got = 0
            while got < N_POLL:
                got += c.poll_batch(1000).num_rows

    def poll_one() -> None:
        with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                      fetch_max_wait_ms=50) as c:
            c.assign([("bulk", p) for p in range(4)])
            got = 0
            while got < N_POLL_ONE:
                got += sum(1 for record in c.poll(1000) if record.value is not None)

    topic = f"send-{tag}"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics({topic: 4}, exist_ok=True)

    def send_one() -> None:
        with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
            for i in range(N_SEND):
                p.send(topic, value=b"x" * 100, key=b"k%015d" % i)
            p.flush()

    varint = _codec.encode_varint(300)
    key16, small = b"k" * 16, b"x" * 100
    loop = range(200_000)
    return {
        "decode one 1M-record batch -> columns": best(lambda: records.decode(raw["one"]), 7),
        "decode one 1M-record batch -> Arrow":
            best(lambda: records.decode(raw["one"]).to_arrow(), 7),
        "decode 1000 batches x 1000 -> columns": best(lambda: records.decode(raw["many"]), 7),
        "decode 1000 batches x 1000, lz4": best(lambda: records.decode(raw["many_lz4"]), 5),
        "encode 1M records from Arrow": best(lambda: records.encode(table), 5),
        "encode 1M records from Arrow, lz4":
            best(lambda: records.encode(table, compression="lz4"), 5),
        "slice a Fetch v16 answer of 2,000 partitions": best(
            lambda: _codec.slice_fetch(raw["fetch_v16"], 16), 20),
        f"poll_batch, {N_POLL // 1000}k records (Tansu)": best(poll_batch, 3),
        f"poll() per record, {N_POLL_ONE // 1000}k records (Tansu)": best(poll_one, 3),
        f"send() per record, {N_SEND // 1000}k records + flush (Tansu)": best(send_one, 2),
        "Metadata v12 answer, 500 topics x 4 partitions: decode":
            best(lambda: protocol.decode(3, 12, "response", metadata_bytes), 7),
        "the same answer: encode": best(lambda: protocol.encode(3, 12, "response", metadata), 7),
        "records.decode of a 10-record batch (per call)":
            best(lambda: [records.decode(raw["ten"]) for _ in range(20_000)], 5, 20_000),
        "encode_varint(300) (per call)":
            best(lambda: [_codec.encode_varint(300) for _ in loop], 5, len(loop)),
        "decode_varint(buf, 0) (per call)":
            best(lambda: [_codec.decode_varint(varint, 0) for _ in loop], 5, len(loop)),
        "murmur2 of a 16-byte key (per call)":
            best(lambda: [_codec.murmur2(key16) for _ in loop], 5, len(loop)),
        "crc32c of 100 bytes (per call)":
            best(lambda: [_codec.crc32c(small) for _ in loop], 5, len(loop)),
    }


def show(seconds: float, per_call: bool) -> str:
    return f"{seconds * 1e6:.2f} µs" if per_call else f"{seconds * 1e3:.1f} ms"


def main(rounds: int, ref: str) -> None:
    sys.path.insert(0, str(ROOT))
    from kproto.testing import TansuBroker

    with tempfile.TemporaryDirectory(prefix="kproto-abi3-") as tmp:
        tmp_path = Path(tmp)
        trees = {"normal": build_tree(tmp_path / "normal", ref, False),
                 "abi3": build_tree(tmp_path / "abi3", ref, True)}
        data = tmp_path / "data"
        data.mkdir()
        make_data(data)
        results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        with TansuBroker() as broker:
            fill(broker.bootstrap)
            for r in range(rounds):
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                for name in order:
                    out = subprocess.run(
                        [sys.executable, __file__, "--measure", str(trees[name]), str(data),
                         broker.bootstrap, f"{name}{r}"],
                        check=True, capture_output=True, text=True, cwd=tmp).stdout
                    results[name].append(json.loads(out.strip().splitlines()[-1]))
                    print(f"round {r + 1}/{rounds}: {name} done", file=sys.stderr, flush=True)
    print(f"\nnormal vs abi3 build of {ref}, Python {sys.version.split()[0]}, median of "
          f"{rounds} rounds (each a process's best repeat; CPU time):\n")
    print("| workload | normal | abi3 | abi3 / normal (range over rounds) |")
    print("|---|---|---|---|")
    for case in results["normal"][0]:
        a = [r[case] for r in results["normal"]]
        b = [r[case] for r in results["abi3"]]
        per_call = "per call" in case
        ratios = sorted(y / x for x, y in zip(a, b, strict=True))
        print(f"| {case} | {show(statistics.median(a), per_call)} | "
              f"{show(statistics.median(b), per_call)} | "
              f"{statistics.median(b) / statistics.median(a):.2f} "
              f"({ratios[0]:.2f}-{ratios[-1]:.2f}) |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        tree, data, bootstrap, tag = sys.argv[2:6]
        print(json.dumps(measure(tree, Path(data), bootstrap, tag)))
    else:
        args = sys.argv[1:]
        ref = "HEAD"
        if "--ref" in args:
            i = args.index("--ref")
            ref = args[i + 1]
            del args[i:i + 2]
        main(int(args[0]) if args else 5, ref)
