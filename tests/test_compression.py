"""Compression codecs against kafka-python's codec module (an independent implementation)
and public vectors; bombs and garbage give kproto errors, never anything else."""

from __future__ import annotations

import gzip
import os
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kc

from kproto.errors import ConfigError, CorruptRecordError, DecompressionLimitError
from kproto.records import compression as c

try:
    import zstandard
except ImportError:  # no wheel for this Python (3.15): the standard library's zstd
    zstandard = None


def fallbacks() -> dict[int, str]:
    """The lz4 and zstd backends used when python-lz4 and zstandard are missing."""
    import importlib.util

    zstd = [b for b in c.BACKENDS[c.ZSTD][1:] if importlib.util.find_spec(b.split(".")[0])
            and (b != "compression.zstd" or importlib.util.find_spec(b))]
    return {c.LZ4: "cramjam", c.ZSTD: zstd[0]} if zstd else {}


@pytest.fixture(autouse=True, params=["default", "fallback"])
def backends(request, monkeypatch) -> dict[int, str]:
    """Every test runs with the backends chosen here and with the fallbacks forced
    (cramjam's LZ4, the standard library's zstd), unless they are the same."""
    monkeypatch.setattr(c, "_backend", {})
    if request.param == "fallback":
        forced = fallbacks()
        if not forced:
            pytest.skip("no compression.zstd here (Python < 3.14 without backports.zstd)")
        if forced == {k: c.backend(k) for k in forced}:
            pytest.skip("the default backends are the fallbacks here")
        monkeypatch.setattr(c, "_backend", dict(forced))
    return {k: c.backend(k) for k in (c.LZ4, c.ZSTD)}


def zstd_frames(*parts: bytes) -> bytes:
    """Concatenated zstd frames that declare no content size."""
    if zstandard is not None:
        cctx = zstandard.ZstdCompressor(write_content_size=False)
        return b"".join(cctx.compress(p) for p in parts)
    from compression import zstd

    out = []
    for p in parts:  # streaming: the size is not known when the header is written
        z = zstd.ZstdCompressor()
        out.append(z.compress(p) + z.flush())
    return b"".join(out)


PAYLOADS = [b"", b"x", os.urandom(100), b"abc" * 11_000, os.urandom(32 * 1024 + 1),
            (b"kafka record " * 90_000)[: 1 << 20]]


@pytest.mark.parametrize("codec", [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
@pytest.mark.parametrize("i", range(len(PAYLOADS)))
def test_round_trip(codec: int, i: int) -> None:
    data = PAYLOADS[i]
    assert c.decompress(codec, c.compress(codec, data)) == data
    if codec != c.ZSTD:
        assert c.decompress(codec, c.compress(codec, data, magic=0), magic=0) == data


@pytest.mark.parametrize("codec", [c.LZ4, c.ZSTD, c.SNAPPY])
@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20])
def test_outputs_of_one_step_and_of_many(codec: int, size: int) -> None:
    """A stream that fits one 1 MiB step comes back as the codec's own buffer (issue 17: no
    second buffer and copy); longer ones are joined; both equal the input, under the cap."""
    data = bytes(range(251)) * (size // 251) + b"x" * (size % 251)
    packed = c.compress(codec, data)
    out = c.decompress_buffer(codec, packed)
    assert bytes(out) == data
    if size:
        with pytest.raises(DecompressionLimitError):
            c.decompress_buffer(codec, packed, max_size=size - 1)


@pytest.mark.parametrize("i", range(len(PAYLOADS)))
def test_interop_with_kafka_python(i: int) -> None:
    data = PAYLOADS[i]
    assert c.decompress(c.GZIP, kc.gzip_encode(data)) == data
    assert kc.gzip_decode(c.compress(c.GZIP, data)) == data
    assert c.decompress(c.SNAPPY, kc.snappy_encode(data, xerial_compatible=True)) == data
    assert c.decompress(c.SNAPPY, kc.snappy_encode(data, xerial_compatible=False)) == data
    if data:  # kafka-python cannot read a header-only xerial stream (what Java writes for b"")
        assert kc.snappy_decode(c.compress(c.SNAPPY, data)) == data
    if not kc.has_lz4():  # kafka-python's lz4 and zstd need python-lz4 and zstandard
        return
    assert c.decompress(c.LZ4, kc.lz4_encode(data)) == data
    assert kc.lz4_decode(c.compress(c.LZ4, data)) == data
    assert c.decompress(c.LZ4, kc.lz4_encode_old_kafka(data), magic=0) == data
    assert kc.lz4_decode_old_kafka(c.compress(c.LZ4, data, magic=0)) == data
    if not kc.has_zstd():
        return
    assert c.decompress(c.ZSTD, kc.zstd_encode(data)) == data
    assert kc.zstd_decode(c.compress(c.ZSTD, data)) == data


def test_xerial_vectors() -> None:
    # franz-go Test_xerialDecode: "Hello, World!"
    hello = bytes.fromhex("82534e41505059000000000100000001" "0000000f"
                          "0d3048656c6c6f2c20576f726c6421")
    assert c.decompress(c.SNAPPY, hello) == b"Hello, World!"
    # a Redpanda-style header with little-endian version ints is still xerial
    redpanda = hello[:8] + b"\x01\x00\x00\x00\x01\x00\x00\x00" + hello[16:]
    assert c.decompress(c.SNAPPY, redpanda) == b"Hello, World!"
    # kafka-python test_snappy_encode_xerial: 300-byte blocks
    data = b"a" * 500 + b"b" * 500
    assert c.decompress(c.SNAPPY, kc.snappy_encode(data, xerial_compatible=True,
                                                   xerial_blocksize=300)) == data
    for bad in (hello[:16] + b"\x00\x00\x01\x00" + hello[20:],  # chunk past the end
                hello[:12], hello[:18]):
        with pytest.raises(CorruptRecordError, match="snappy"):
            c.decompress(c.SNAPPY, bad)


def test_lz4_broken_header_checksum_only_for_magic_0() -> None:
    # kafka-python's lz4_encode_old_kafka(b"kafka golden record " * 8)
    old = bytes.fromhex("04224d1860401a1f000000ff056b61666b6120676f6c64656e207265636f7264"
                        "2014007450636f72642000000000")
    assert c.decompress(c.LZ4, old, magic=0) == b"kafka golden record " * 8
    assert c.compress(c.LZ4, b"kafka golden record " * 8, magic=0) == old
    with pytest.raises(CorruptRecordError, match="lz4"):
        c.decompress(c.LZ4, old, magic=2)


def test_concatenated_gzip_members_and_zstd_frames() -> None:
    assert c.decompress(c.GZIP, gzip.compress(b"one") + gzip.compress(b"two")) == b"onetwo"
    frames = zstd_frames(b"first ", b"second")
    assert c.decompress(c.ZSTD, frames) == b"first second"
    with pytest.raises(CorruptRecordError, match="zstd"):
        c.decompress(c.ZSTD, b"x", magic=1)


@pytest.mark.parametrize("codec", [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
def test_truncated_streams_are_corrupt_not_short(codec: int) -> None:
    """A stream cut anywhere is an error, never the part before the cut (zstandard's
    stream reader returned b"" or a prefix for a cut zstd frame)."""
    data = b"hello world " * 1000
    for frame in (c.compress(codec, data), zstd_frames(data, data) if codec == c.ZSTD else b""):
        for cut in range(1, len(frame)):
            try:
                got = c.decompress(codec, frame[:cut])
            except CorruptRecordError:
                continue
            # what a cut may be: a xerial header without chunks (b""), the first of two
            # whole zstd frames
            if codec == c.SNAPPY and cut <= 16:
                assert got == b"", cut
            else:
                assert frame[:cut] == zstd_frames(data) and got == data, (codec, cut)


@pytest.mark.parametrize("codec", [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
def test_bombs_are_refused_without_allocating(codec: int) -> None:
    bomb = c.compress(codec, bytes(8 << 20))
    assert len(bomb) < 1 << 20
    tracemalloc.start()
    with pytest.raises(DecompressionLimitError, match="more than"):
        c.decompress(codec, bomb, max_size=1 << 20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 << 20


def test_codec_names() -> None:
    names = (None, "none", "GZIP", "snappy", 3, "zstd")
    assert [c.codec_id(x) for x in names] == [0, 0, 1, 2, 3, 4]
    with pytest.raises(ConfigError):
        c.codec_id("brotli")
    with pytest.raises(CorruptRecordError, match="unknown compression codec 5"):
        c.decompress(5, b"")


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]), st.binary(max_size=300),
       st.data())
def test_garbage_and_mutations_raise_only_corrupt_record_errors(codec, junk, data) -> None:
    valid = bytearray(c.compress(codec, b"hello world " * 40))
    if valid:
        for _ in range(data.draw(st.integers(1, 3))):
            valid[data.draw(st.integers(0, len(valid) - 1))] ^= data.draw(st.integers(1, 255))
    for candidate in (junk, bytes(valid), bytes(valid[: len(valid) // 2])):
        try:
            c.decompress(codec, candidate, max_size=1 << 20)
        except CorruptRecordError:
            pass
