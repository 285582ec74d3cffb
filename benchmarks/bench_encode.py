"""Encoding: kproto from Arrow columns vs aiokafka's batch builder (per record)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kproto import records

from .conftest import RECORDS, corpus

BATCH = 1000


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return records.decode(corpus("none"), topic="t", partition=0).to_arrow()


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_kproto_encode_arrow(benchmark, table: pa.Table, compression: str) -> None:
    benchmark.extra_info["records"] = RECORDS
    cols = table.select(["key", "value", "timestamp", "headers"])

    def encode() -> int:
        return sum(len(records.encode(cols.slice(i, BATCH), compression=compression))
                   for i in range(0, RECORDS, BATCH))

    benchmark(encode)


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_aiokafka_builder(benchmark, table: pa.Table, compression: str) -> None:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    codec = {"none": 0, "lz4": 3}[compression]
    rows = table.select(["key", "value", "timestamp", "headers"]).to_pylist()
    benchmark.extra_info["records"] = RECORDS

    def encode() -> int:
        total = 0
        for i in range(0, RECORDS, BATCH):
            b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0,
                                          producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                          batch_size=1 << 30)
            for j, r in enumerate(rows[i:i + BATCH]):
                b.append(j, timestamp=None, key=r["key"], value=r["value"],
                         headers=[(h["key"], h["value"]) for h in r["headers"]])
            total += len(b.build())
        return total

    benchmark(encode)
