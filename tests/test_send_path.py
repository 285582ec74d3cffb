"""The producer's per-record path in C (kproto/_accum.pxi: ``Producer.send`` ->
``RecordAccumulator.append`` -> ``RecordFuture``) against its pure twin
(kproto/_pure/accum.py): the same sends give the same batches, byte for byte, under
both backends (each in its own process: the backend is picked at import); the
accumulator's own tests pass on the twin; the constants agree with records/batch.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kproto._pure.accum as pure
from kproto._backend import IS_PURE, backend
from kproto.records import batch as layout

ROOT = Path(__file__).resolve().parent.parent

#: A fixed run of appends (keyed, null keys on the sticky partitioner with a seeded
#: generator, explicit partitions, headers, str values, batches that fill up and move the
#: sticky partition on), then every batch drained and encoded.
SCRIPT = r"""
import hashlib, json, random, sys
from kproto.config import resolve
from kproto.producer.partitioner import StickyPartitioner
from kproto.producer.accumulator import RecordAccumulator
from kproto._backend import IS_PURE
acc = RecordAccumulator(resolve("producer", bootstrap_servers="unused:9092", batch_size=4000,
                                linger_ms=60000, compression_type=sys.argv[1]),
                        StickyPartitioner(random.Random(7)))
r = random.Random(11)
parts = [0, 1, 2, 3, 4]
for i in range(3000):
    key = None if i % 3 == 0 else b"key-%d" % (i % 97)
    value = r.randbytes(r.randrange(0, 300))
    headers = [("h", b"%d" % i), ("\u00fc", None)] if i % 10 == 0 else None
    partition = 2 if i % 17 == 0 else None
    size = 12 + len(value) + len(key or b"") + (20 if headers else 0)
    acc.append("t", partition, key, value, 1_700_000_000_000 + i * 3 - (i % 5), headers,
               size, parts)
with acc.cond:
    acc.flushing += 1
    out = []
    while True:
        got = acc.drain()
        if not got:
            break
        for b in got:
            acc.encode(b)
            out.append([b.partition, b.count, hashlib.sha256(b.payload).hexdigest()])
            acc._muted.discard((b.topic, b.partition))
print(json.dumps({"pure": IS_PURE, "batches": out, "queued": acc.queued_bytes}))
"""


def _run(pure_backend: bool, codec: str) -> dict:
    env = {**os.environ, "KPROTO_PURE": "1" if pure_backend else "0"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, codec], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_constants_agree_with_the_batch_layout() -> None:
    for impl in (pure, backend):
        assert impl.SEND_RECORD_OVERHEAD == layout.RECORD_OVERHEAD
        assert impl.SEND_BATCH_OVERHEAD == layout.HEADER_SIZE


@pytest.mark.skipif(IS_PURE, reason="compares the Cython path with its twin")
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_the_two_send_paths_build_the_same_batches(codec: str) -> None:
    c, p = _run(False, codec), _run(True, codec)
    assert (c["pure"], p["pure"]) == (False, True)
    assert len(c["batches"]) > 20 and {b[0] for b in c["batches"]} == {0, 1, 2, 3, 4}
    assert sum(b[1] for b in c["batches"]) == 3000
    assert c["batches"] == p["batches"] and c["queued"] == p["queued"]


@pytest.mark.skipif(IS_PURE, reason="the suite itself runs on the twin")
def test_the_accumulator_tests_pass_on_the_twin() -> None:
    env = {**os.environ, "KPROTO_PURE": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_producer_accumulator.py", "tests/test_records_builder.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout


def test_a_record_future_holds_its_batch_and_index_only() -> None:
    from kproto.producer import RecordFuture

    f = RecordFuture(None, 3)
    assert (f._batch, f._index) == (None, 3)
    assert not hasattr(f, "__dict__")           # one small object a send()
