"""Avro values -> Arrow: kproto's column decoder vs fastavro's per-record reader.

    python3 dev.py bench benchmarks/bench_avro.py
    .venv/bin/python benchmarks/bench_avro.py --table --benchmark-min-rounds=5

The issue-19 schema: 9 fields (a long, a nested record, an array of strings, a map of
doubles, an enum, a nullable string, a timestamp-millis, a float, a boolean), seeded
values written by fastavro (~57 bytes a datum). "fastavro + pa.array" is what a Python
pipeline does today: ``schemaless_reader`` per value, then ``pa.array`` of the dicts with
the same Arrow type kproto gives. The target (issue 19): kproto >= 20x that, goal 30x.
``KPROTO_BENCH_RECORDS`` sets the count (default 100,000 here).
"""

from __future__ import annotations

import datetime
import io
import json
import os
import random
import sys
from functools import cache
from typing import Any

import pyarrow as pa
import pytest

from kproto.formats import avro

fastavro = pytest.importorskip("fastavro")

RECORDS = min(int(os.environ.get("KPROTO_BENCH_RECORDS", "100000")), 100_000)
SCHEMA = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"},
    {"name": "user", "type": {"type": "record", "name": "User", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "double"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind",
                              "symbols": ["CLICK", "VIEW", "BUY"]}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "score", "type": "float"},
    {"name": "ok", "type": "boolean"},
]}


@cache
def corpus() -> tuple[list[bytes], pa.Array]:
    rng = random.Random(19)
    parsed = fastavro.parse_schema(SCHEMA)
    epoch = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    out = []
    for i in range(RECORDS):
        record = {
            "id": rng.randrange(1 << 40),
            "user": {"name": f"user{rng.randrange(10**6)}", "age": rng.randrange(100)},
            "tags": [f"t{rng.randrange(50)}" for _ in range(rng.randrange(4))],
            "attrs": {f"k{j}": rng.random() for j in range(rng.randrange(3))},
            "kind": rng.choice(["CLICK", "VIEW", "BUY"]),
            "note": None if rng.random() < 0.5 else f"note {i}",
            "ts": epoch + datetime.timedelta(milliseconds=rng.randrange(10**9)),
            "score": rng.random(), "ok": rng.random() < 0.5,
        }
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        out.append(buf.getvalue())
    return out, pa.array(out, pa.binary())


def _info(benchmark: Any) -> None:
    datums, _ = corpus()
    benchmark.group = "avro decode"
    benchmark.extra_info.update(records=RECORDS, bytes=sum(map(len, datums)))


def test_kproto_decode(benchmark: Any) -> None:
    _info(benchmark)
    _, column = corpus()
    schema = avro.parse_schema(SCHEMA)
    array, bad = benchmark(avro.decode, column, schema)
    assert len(array) == RECORDS and len(bad) == 0


def test_fastavro_to_arrow(benchmark: Any) -> None:
    _info(benchmark)
    datums, _ = corpus()
    parsed = fastavro.parse_schema(SCHEMA)
    arrow_type = avro.arrow_type(avro.parse_schema(SCHEMA))
    reader = fastavro.schemaless_reader

    def run() -> pa.Array:
        return pa.array([reader(io.BytesIO(d), parsed) for d in datums], arrow_type)

    assert len(benchmark(run)) == RECORDS


def test_fastavro_records(benchmark: Any) -> None:
    _info(benchmark)
    datums, _ = corpus()
    parsed = fastavro.parse_schema(SCHEMA)
    reader = fastavro.schemaless_reader
    assert len(benchmark(lambda: [reader(io.BytesIO(d), parsed) for d in datums])) == RECORDS


def test_kproto_encode(benchmark: Any) -> None:
    _info(benchmark)
    benchmark.group = "avro encode"
    _, column = corpus()
    schema = avro.parse_schema(SCHEMA)
    array, _ = avro.decode(column, schema)
    assert len(benchmark(avro.encode, array, schema)) == RECORDS


def test_fastavro_encode(benchmark: Any) -> None:
    _info(benchmark)
    benchmark.group = "avro encode"
    datums, _ = corpus()
    parsed = fastavro.parse_schema(SCHEMA)
    records = [fastavro.schemaless_reader(io.BytesIO(d), parsed) for d in datums]

    def run() -> list[bytes]:
        out = []
        for r in records:
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, r)
            out.append(buf.getvalue())
        return out

    assert len(benchmark(run)) == RECORDS


def tables(path: str) -> str:
    """The BENCHMARKS.md table of a saved run: records/s (median) and ratios."""
    with open(path) as f:
        runs = {b["name"]: b for b in json.load(f)["benchmarks"]}
    rate = {name: b["extra_info"]["records"] / b["stats"]["median"] for name, b in runs.items()}
    rows = ["| path | records/s | ratio |", "|---|---|---|"]
    base = rate.get("test_fastavro_to_arrow")
    for name in ("test_kproto_decode", "test_fastavro_to_arrow", "test_fastavro_records"):
        if name in rate:
            ratio = f"{rate[name] / base:.1f}x" if base else "-"
            rows.append(f"| {name[5:]} | {rate[name]:,.0f} | {ratio} |")
    enc = rate.get("test_fastavro_encode")
    for name in ("test_kproto_encode", "test_fastavro_encode"):
        if name in rate:
            ratio = f"{rate[name] / enc:.2f}x" if enc else "-"
            rows.append(f"| {name[5:]} | {rate[name]:,.0f} | {ratio} (of fastavro's encode) |")
    return "\n".join(rows)


if __name__ == "__main__":
    from summarize import table_main  # benchmarks/ is sys.path[0] here

    sys.exit(table_main(__file__, __doc__, tables, sys.argv[1:]))
