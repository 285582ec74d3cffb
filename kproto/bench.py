"""``kproto bench``: record-batch decoding, kproto against the peers installed here.

Builds a corpus of record batches (16-byte keys, 100-byte text-like values,
500 records per batch, uncompressed and lz4) with kproto's encoder, then times
how fast each reader turns them into records: kproto into Arrow-ready columns
(the Cython codec), aiokafka's and kafka-python's batch readers (touching every
key and value) when they are installed. The full, reproducible benchmarks are
``benchmarks/`` (pytest-benchmark); this is the quick look on your machine.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["run_decode_bench"]


def _corpus(n: int, codec: str) -> list[bytes]:
    from . import records
    from .demo import _table_of

    table = _table_of(n, 100)
    return [records.encode(table.slice(i, 500), compression=codec)
            for i in range(0, n, 500)]


def _time(fn: Callable[[], int], min_seconds: float = 0.5) -> float:
    """Records per second of ``fn`` (which returns how many it read)."""
    fn()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_seconds:
        count += fn()
    return count / (time.perf_counter() - start)


def _readers(batches: list[bytes]) -> dict[str, Callable[[], int]]:
    from . import records

    blob = b"".join(batches)
    out: dict[str, Callable[[], int]] = {"kproto": lambda: len(records.decode(blob))}
    try:
        from aiokafka.record.default_records import DefaultRecordBatch

        def aiokafka() -> int:
            n = 0
            for b in batches:
                for r in DefaultRecordBatch(bytearray(b)):
                    n += (r.key is not None) + (r.value is not None) - 1
            return n

        out["aiokafka"] = aiokafka
    except ImportError:
        pass
    try:
        from kafka.record.memory_records import MemoryRecords

        def kafka_python() -> int:
            n = 0
            records_ = MemoryRecords(blob)
            while records_.has_next():
                batch = records_.next_batch()
                for r in batch:
                    n += (r.key is not None) + (r.value is not None) - 1
            return n

        out["kafka-python"] = kafka_python
    except ImportError:
        pass
    return out


def run_decode_bench(n: int = 200_000, *, json_output: bool = False,
                     progress: bool = False) -> list[dict[str, Any]]:
    """Print (and return) records/s per reader and codec, with ratios to kproto;
    with ``progress``, a tqdm line on stderr: the runs done, the records decoded per
    second by the last one, and the ETA."""
    from tqdm import tqdm

    from .demo import _table

    results = []
    codecs = ("none", "lz4")
    bar = tqdm(total=len(codecs) * len(_readers([])), unit="run", disable=not progress,
               file=sys.stderr, dynamic_ncols=True)
    for codec in codecs:
        batches = _corpus(n, codec)
        rates = {}
        for name, fn in _readers(batches).items():
            bar.set_description(f"{codec} {name}")
            rates[name] = _time(fn)
            bar.set_postfix_str(f"{rates[name]:,.0f} rec/s", refresh=False)
            bar.update()
        for name, rate in rates.items():
            results.append({"codec": codec, "reader": name, "records_per_s": round(rate),
                            "kproto_speedup": round(rates["kproto"] / rate, 2)})
    bar.close()
    if json_output:
        print(json.dumps(results))
    else:
        print(f"decoding {n:,} records of 116 bytes (500 per batch)")
        print(_table([(r["codec"], r["reader"], f"{r['records_per_s']:,}",
                       f"{r['kproto_speedup']:.2f}x") for r in results],
                     ("codec", "reader", "records/s", "kproto is")))
    return results
