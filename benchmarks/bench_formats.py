"""Typed values (issue 19): JSON and Protobuf decode, and Avro through the Confluent framing.

    python3 dev.py bench benchmarks/bench_formats.py
    .venv/bin/python benchmarks/bench_formats.py --table --benchmark-min-rounds=5

JSON: ``kproto.formats.decode`` of a binary column of JSON objects (Confluent-framed,
and plain) against ``pyarrow.json.read_json`` of the same objects already joined as one
newline-delimited buffer, both with the same explicit schema: the target (issue 19) is
kproto >= 0.8x the reader it drives. Protobuf: ``formats.decode`` (the runtime's parse
per record, then the fields into Arrow) against the runtime's parse alone
(``FromString`` per record), the floor of any per-record path. Avro framed:
``formats.decode`` with a registry (framing read with NumPy, one schema id) against
``formats.avro.decode`` of the bare datums: the cost of the framing.
``KPROTO_BENCH_RECORDS`` sets the count (default 100,000).
"""

from __future__ import annotations

import json
import os
import random
import sys
from functools import cache
from typing import Any

import pyarrow as pa
import pyarrow.json as pajson
import pytest

from kproto import formats
from kproto.formats import _wire, avro
from kproto.schema_registry import SchemaRegistryClient

RECORDS = min(int(os.environ.get("KPROTO_BENCH_RECORDS", "100000")), 100_000)
JSON_TYPE = pa.struct([
    ("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()),
    ("tags", pa.list_(pa.string())), ("active", pa.bool_()),
    ("address", pa.struct([("city", pa.string()), ("zip", pa.int64())])),
    ("note", pa.string())])


@cache
def json_corpus() -> tuple[pa.Array, pa.Array, bytes]:
    rng = random.Random(19)
    docs = []
    for i in range(RECORDS):
        docs.append(json.dumps({
            "id": rng.randrange(1 << 40), "name": f"user{rng.randrange(10**6)}",
            "score": rng.random(), "tags": [f"t{rng.randrange(50)}" for _ in range(i % 4)],
            "active": rng.random() < 0.5,
            "address": {"city": rng.choice(["Zürich", "東京", "Lyon"]), "zip": i % 10000},
            "note": None if i % 2 else f"note {i}"}, ensure_ascii=False).encode())
    plain = pa.array(docs, pa.binary())
    framed = pa.array([_wire.header(1) + d for d in docs], pa.binary())
    return plain, framed, b"\n".join(docs) + b"\n"


def _json_info(benchmark: Any) -> None:
    _, _, joined = json_corpus()
    benchmark.group = "json decode"
    benchmark.extra_info.update(records=RECORDS, bytes=len(joined))


def test_pyarrow_read_json_one_buffer(benchmark: Any) -> None:
    _json_info(benchmark)
    _, _, joined = json_corpus()
    options = pajson.ParseOptions(explicit_schema=pa.schema(list(JSON_TYPE)))

    def run() -> pa.Table:
        return pajson.read_json(pa.BufferReader(joined), parse_options=options)

    assert benchmark(run).num_rows == RECORDS


def test_kproto_json_framed(benchmark: Any) -> None:
    _json_info(benchmark)
    _, framed, _ = json_corpus()
    client = SchemaRegistryClient("http://127.0.0.1:9")      # never asked: the cache answers
    client._by_id.put((1, None), _registered(json.dumps(_json_schema()), "JSON"))
    out = benchmark(formats.decode, framed, "json", registry=client, schema=_json_schema())
    assert len(out) == RECORDS and out.type == JSON_TYPE


def test_kproto_json_plain(benchmark: Any) -> None:
    _json_info(benchmark)
    plain, _, _ = json_corpus()
    out = benchmark(formats.decode, plain, "json", schema=pa.schema(list(JSON_TYPE)))
    assert len(out) == RECORDS


def test_json_interleaved(benchmark: Any) -> None:
    """read_json, framed and plain decode run alternately, the best of each kept: on a
    shared machine the ratio of bests holds where medians of separate tests drift."""
    import time

    _json_info(benchmark)
    benchmark.group = "json interleaved"
    plain, framed, joined = json_corpus()
    options = pajson.ParseOptions(explicit_schema=pa.schema(list(JSON_TYPE)))
    client = SchemaRegistryClient("http://127.0.0.1:9")      # never asked: the cache answers
    client._by_id.put((1, None), _registered(json.dumps(_json_schema()), "JSON"))
    schema = _json_schema()
    runs = {
        "read_json": lambda: pajson.read_json(pa.BufferReader(joined), parse_options=options),
        "framed": lambda: formats.decode(framed, "json", registry=client, schema=schema),
        "plain": lambda: formats.decode(plain, "json", schema=pa.schema(list(JSON_TYPE)))}
    best = dict.fromkeys(runs, float("inf"))

    def one_round() -> None:
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)

    benchmark.pedantic(one_round, rounds=15, iterations=1)
    benchmark.extra_info.update({f"best_{k}": v for k, v in best.items()})


def _json_schema() -> dict[str, Any]:
    from kproto.formats import json as json_format

    return json_format.json_schema(JSON_TYPE)


def _registered(text: str, kind: str) -> Any:
    from kproto.schema_registry import RegisteredSchema

    return RegisteredSchema(text, kind, 1)


# --------------------------------------------------------------------------- protobuf


@cache
def proto_corpus() -> tuple[Any, pa.Array, list[bytes]]:
    pytest.importorskip("google.protobuf")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="bench.proto", package="bench",
                                               syntax="proto3")
    event = proto.message_type.add(name="Event")
    for name, number, kind, extra in [
            ("id", 1, field.TYPE_INT64, {}), ("name", 2, field.TYPE_STRING, {}),
            ("score", 3, field.TYPE_DOUBLE, {}),
            ("tags", 4, field.TYPE_STRING, {"label": field.LABEL_REPEATED}),
            ("user", 5, field.TYPE_MESSAGE, {"type_name": ".bench.User"}),
            ("ok", 6, field.TYPE_BOOL, {})]:
        event.field.add(name=name, number=number, type=kind, **extra)
    user = proto.message_type.add(name="User")
    user.field.add(name="name", number=1, type=field.TYPE_STRING)
    user.field.add(name="age", number=2, type=field.TYPE_INT32)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Event"))
    rng = random.Random(19)
    payloads = []
    for i in range(RECORDS):
        m = cls(id=rng.randrange(1 << 40), name=f"user{i}", score=rng.random(),
                tags=[f"t{j}" for j in range(i % 4)], ok=i % 2 == 0)
        m.user.name, m.user.age = f"u{i}", i % 100
        payloads.append(m.SerializeToString())
    return cls, pa.array(payloads, pa.binary()), payloads


def test_kproto_protobuf(benchmark: Any) -> None:
    cls, column, payloads = proto_corpus()
    benchmark.group = "protobuf decode"
    benchmark.extra_info.update(records=RECORDS, bytes=sum(map(len, payloads)))
    assert len(benchmark(formats.decode, column, "protobuf", schema=cls)) == RECORDS


def test_protobuf_parse_only(benchmark: Any) -> None:
    cls, _, payloads = proto_corpus()
    benchmark.group = "protobuf decode"
    benchmark.extra_info.update(records=RECORDS, bytes=sum(map(len, payloads)))
    parse = cls.FromString
    assert len(benchmark(lambda: [parse(p) for p in payloads])) == RECORDS


# --------------------------------------------------------------------------- avro framed


def test_kproto_avro_framed(benchmark: Any) -> None:
    from .bench_avro import SCHEMA, corpus

    datums, _ = corpus()
    framed = pa.array([_wire.header(1) + d for d in datums], pa.binary())
    client = SchemaRegistryClient("http://127.0.0.1:9")      # never asked: the cache answers
    client._by_id.put((1, None), _registered(json.dumps(SCHEMA), "AVRO"))
    benchmark.group = "avro framing"
    benchmark.extra_info.update(records=len(datums), bytes=framed.nbytes)
    assert len(benchmark(formats.decode, framed, "avro", registry=client)) == len(datums)


def test_kproto_avro_bare(benchmark: Any) -> None:
    from .bench_avro import SCHEMA, corpus

    _, column = corpus()
    benchmark.group = "avro framing"
    benchmark.extra_info.update(records=len(column), bytes=column.nbytes)
    schema = avro.parse_schema(SCHEMA)
    assert len(benchmark(avro.decode, column, schema)[0]) == len(column)


def tables(path: str) -> str:
    """The BENCHMARKS.md table of a saved run: records/s (median) and ratios."""
    with open(path) as f:
        runs = {b["name"]: b for b in json.load(f)["benchmarks"]}
    rate = {name: b["extra_info"]["records"] / b["stats"]["median"] for name, b in runs.items()}
    rows = ["| path | records/s | ratio |", "|---|---|---|"]
    for base, names in (("test_pyarrow_read_json_one_buffer",
                         ("test_kproto_json_framed", "test_kproto_json_plain",
                          "test_pyarrow_read_json_one_buffer")),
                        ("test_protobuf_parse_only",
                         ("test_kproto_protobuf", "test_protobuf_parse_only")),
                        ("test_kproto_avro_bare", ("test_kproto_avro_framed",
                                                   "test_kproto_avro_bare"))):
        for name in names:
            if name in rate and base in rate:
                rows.append(f"| {name[5:]} | {rate[name]:,.0f} | "
                            f"{rate[name] / rate[base]:.2f}x |")
    pair = runs.get("test_json_interleaved", {}).get("extra_info", {})
    if "best_read_json" in pair:
        for name in ("framed", "plain"):
            rows.append(f"| json {name}, interleaved best | "
                        f"{RECORDS / pair['best_' + name]:,.0f} | "
                        f"{pair['best_read_json'] / pair['best_' + name]:.2f}x of read_json "
                        f"({RECORDS / pair['best_read_json']:,.0f}) |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from summarize import table_main

    sys.exit(table_main(__file__, __doc__, tables, sys.argv[1:]))
