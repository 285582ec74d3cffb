"""Decoding record batches: kproto (into columns) vs aiokafka's Cython reader and
kafka-python (per-record objects), with the ceilings measured in the same run:

* ``ceiling_crc32c``: one CRC-32C pass over every batch (the ``crc32c`` package), what
  checking the batches costs at the least; ``binary_view=True`` copies nothing else;
* ``ceiling_memcpy``: one copy of the bytes into a buffer already mapped (NumPy's
  ``copyto``), what copying the keys and values costs at the least; uncompressed decoding
  into columns needs the CRC pass and the copy;
* ``ceiling_decompress``: ``compression.decompress_buffer`` over every batch's payload, the
  calls into the codec libraries the decoder makes, nothing else (each output dropped
  before the next, as the decoder drops them).

    python3 dev.py bench --benchmark-json=bench.json && python benchmarks/summarize.py bench.json
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from kproto import records
from kproto.records import compression

from .conftest import RECORDS, corpus, whole_batches


def _payloads(data: bytes) -> list[tuple[int, memoryview]]:
    """(codec, compressed records) of every batch: what the decompressor has to chew."""
    out, pos, view = [], 0, memoryview(data)
    while pos < len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0]
        attrs = struct.unpack_from(">h", data, pos + 21)[0]
        out.append((attrs & 7, view[pos + 61:pos + 12 + size]))
        pos += 12 + size
    return out


def _info(benchmark, data: bytes, records_count: int = RECORDS) -> None:
    benchmark.extra_info.update(records=records_count, bytes=len(data))


def test_kproto_columns(benchmark, codec: str) -> None:
    data = corpus(codec)
    _info(benchmark, data)
    cols = benchmark(records.decode, data)
    assert len(cols) == RECORDS


def test_kproto_arrow(benchmark, codec: str) -> None:
    data = corpus(codec)
    _info(benchmark, data)
    batch = benchmark(lambda: records.decode(data, topic="t", partition=0).to_arrow())
    assert batch.num_rows == RECORDS


def test_kproto_binary_view(benchmark, codec: str) -> None:
    data = corpus(codec)
    _info(benchmark, data)
    assert len(benchmark(records.decode, data, binary_view=True)) == RECORDS


@pytest.mark.parametrize("binary_view", [False, True], ids=["columns", "binary_view"])
def test_kproto_one_fetch(benchmark, codec: str, binary_view: bool) -> None:
    """A decode the size of one partition's fetch: what a consumer runs per partition, and
    where a decode's fixed costs (allocations, Python objects) show against the corpus."""
    data = whole_batches(corpus(codec), 1 << 20) or corpus(codec)
    n = len(records.decode(data))
    _info(benchmark, data, n)
    assert len(benchmark(records.decode, data, binary_view=binary_view)) == n


def _read_objects(memory_records: type, data: bytes) -> int:
    """Iterate a peer's per-record objects, touching every field kproto returns."""
    mr, n = memory_records(data), 0
    while (batch := mr.next_batch()) is not None:
        for r in batch:
            _ = (r.offset, r.timestamp, r.key, r.value, r.headers)
            n += 1
    return n


def test_aiokafka_records(benchmark, codec: str) -> None:
    from aiokafka.record.memory_records import MemoryRecords

    data = corpus(codec)
    _info(benchmark, data)
    assert benchmark(_read_objects, MemoryRecords, data) == RECORDS


def test_kafka_python_records(benchmark, codec: str) -> None:
    from kafka.record.memory_records import MemoryRecords

    n_records = min(RECORDS, 20_000)  # it is slow: a slice of the corpus, rates per record
    data = corpus(codec, n_records)
    _info(benchmark, data, n_records)

    assert benchmark.pedantic(_read_objects, (MemoryRecords, data), rounds=3,
                              iterations=1) == n_records


def test_ceiling_decompress(benchmark, codec: str) -> None:
    if codec == "none":
        pytest.skip("nothing to decompress")
    data = corpus(codec)
    _info(benchmark, data)
    payloads = _payloads(data)

    def decompress_each() -> None:     # each output dropped, as the decoder drops it (a list
        for c, p in payloads:          # of them all would fault fresh pages for every batch)
            compression.decompress_buffer(c, p)

    benchmark(decompress_each)


def test_ceiling_memcpy(benchmark) -> None:
    data = corpus("none")
    _info(benchmark, data)
    src = np.frombuffer(data, np.uint8)
    dst = np.empty_like(src)
    benchmark(np.copyto, dst, src)


def test_ceiling_crc32c(benchmark) -> None:
    crc32c = pytest.importorskip("crc32c").crc32c
    data = corpus("none")
    _info(benchmark, data)
    view, spans, pos = memoryview(data), [], 0
    while pos < len(data):                      # what a batch's CRC covers: byte 21 on
        stop = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        spans.append(view[pos + 21:stop])
        pos = stop
    benchmark(lambda: [crc32c(s) for s in spans])
