"""CRC-32C: kproto vs the crc32c package (the physical ceiling we compare against)."""

from __future__ import annotations

import os

import pytest

from kproto import _codec

SIZES = {"64KiB": 64 << 10, "1MiB": 1 << 20}


@pytest.fixture(params=list(SIZES), ids=list(SIZES))
def buf(request: pytest.FixtureRequest) -> bytes:
    return os.urandom(SIZES[request.param])


def test_kproto_crc32c(benchmark, buf: bytes) -> None:
    benchmark.extra_info["bytes"] = len(buf)
    benchmark(_codec.crc32c, buf)


def test_crc32c_package(benchmark, buf: bytes) -> None:
    crc32c = pytest.importorskip("crc32c")
    benchmark.extra_info["bytes"] = len(buf)
    benchmark(crc32c.crc32c, buf)


def test_kproto_crc32(benchmark, buf: bytes) -> None:
    benchmark.extra_info["bytes"] = len(buf)
    benchmark(_codec.crc32, buf)


def test_zlib_crc32(benchmark, buf: bytes) -> None:
    import zlib

    benchmark.extra_info["bytes"] = len(buf)
    benchmark(zlib.crc32, buf)
