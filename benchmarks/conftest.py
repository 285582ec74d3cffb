"""Shared benchmark corpus: realistic record batches written by an independent builder.

~150-byte records (16-byte keys, 100-byte values, one header), 1000 records a
batch, built with aiokafka's batch builder and seeded, so every run and every
peer decodes the same bytes. ``KPROTO_BENCH_RECORDS`` sets the corpus size
(default 200,000; CI uses a small one just to prove the benchmarks run).
"""

from __future__ import annotations

import os
import random
import struct
from functools import cache

import pytest

RECORDS = int(os.environ.get("KPROTO_BENCH_RECORDS", "200000"))
PER_BATCH = 1000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _value(rng: random.Random) -> bytes:
    # text-like JSON so compression ratios are realistic (~2-4x)
    words = ["alpha", "beta", "gamma", "delta", "user", "event", "click", "view", "id", "ts"]
    letters = "".join(rng.choice("abcdefghij") for _ in range(30))
    text = (f'{{"{rng.choice(words)}":{rng.randrange(10**6)},"{rng.choice(words)}":'
            f'"{letters}","{rng.choice(words)}":{rng.randrange(10**9)}}}')
    return text.encode().ljust(100, b" ")[:100]


@cache
def corpus(codec: str, records: int = RECORDS) -> bytes:
    """The record sets of ``records`` records compressed with ``codec``."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    rng = random.Random(42)
    out = []
    for base in range(0, records, PER_BATCH):
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=CODECS[codec], is_transactional=0, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for i in range(min(PER_BATCH, records - base)):
            key = b"%016x" % rng.getrandbits(64)
            builder.append(i, timestamp=1_700_000_000_000 + base + i, key=key,
                           value=_value(rng), headers=[("trace", b"%08d" % (base + i))])
        batch = bytearray(builder.build())
        struct.pack_into(">q", batch, 0, base)
        out.append(bytes(batch))
    return b"".join(out)


def whole_batches(data: bytes, limit: int) -> bytes:
    """The whole batches in the first ``limit`` bytes of ``data`` (1 MiB: what one
    partition's fetch returns at the consumer's default max_partition_fetch_bytes)."""
    pos = 0
    while pos + 12 <= len(data):
        stop = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        if stop > limit:
            break
        pos = stop
    return data[:pos]


@pytest.fixture(params=list(CODECS), ids=list(CODECS))
def codec(request: pytest.FixtureRequest) -> str:
    return request.param
