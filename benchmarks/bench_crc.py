"""CRC-32C and CRC-32 throughput: kproto vs the crc32c package / zlib vs the pure twin.

    pytest benchmarks/bench_crc.py --benchmark-group-by=group

On 64 KiB and 1 MiB of seeded random bytes. The test names and the ``64KiB``/``1MiB``
ids are what ``benchmarks/summarize.py`` reads; ``extra_info["bytes"]`` turns times
into GB/s.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from kproto import _codec, _pure

SIZES = {"64KiB": 64 << 10, "1MiB": 1 << 20}


@pytest.fixture(scope="module", params=list(SIZES), ids=list(SIZES))
def buf(request: pytest.FixtureRequest) -> bytes:
    return random.Random(request.param).randbytes(SIZES[request.param])


def _run(benchmark: Any, group: str, fn: Callable[[bytes], int], data: bytes) -> None:
    benchmark.group = f"{group} {len(data) >> 10} KiB"
    benchmark.extra_info["bytes"] = len(data)
    benchmark(fn, data)


def test_kproto_crc32c(benchmark: Any, buf: bytes) -> None:
    _run(benchmark, "crc32c", _codec.crc32c, buf)


def test_crc32c_package(benchmark: Any, buf: bytes) -> None:
    crc32c = pytest.importorskip("crc32c")
    _run(benchmark, "crc32c", crc32c.crc32c, buf)


def test_pure_crc32c(benchmark: Any, buf: bytes) -> None:
    benchmark.group = f"crc32c {len(buf) >> 10} KiB"
    benchmark.extra_info["bytes"] = len(buf)
    benchmark.pedantic(_pure.crc32c, (buf,), rounds=3, iterations=1)  # ~0.1 s per MiB


def test_kproto_crc32(benchmark: Any, buf: bytes) -> None:
    _run(benchmark, "crc32", _codec.crc32, buf)


def test_zlib_crc32(benchmark: Any, buf: bytes) -> None:
    _run(benchmark, "crc32", zlib.crc32, buf)


def test_pure_crc32(benchmark: Any, buf: bytes) -> None:
    benchmark.group = f"crc32 {len(buf) >> 10} KiB"
    benchmark.extra_info["bytes"] = len(buf)
    benchmark.pedantic(_pure.crc32, (buf,), rounds=3, iterations=1)
