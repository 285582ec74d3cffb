"""lz4 and zstd backends against each other (kproto/compression.py: python-lz4 and
zstandard where installed, cramjam's LZ4 and the standard library's zstd where not): each
reads what the other writes, on Hypothesis payloads, both stop at the same cap, and both
read the frames Kafka clients write (kafka-python's and aiokafka's golden bytes)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto.errors import CorruptRecordError, DecompressionLimitError
from kproto.records import compression as c

from .test_compression import fallbacks

lz4_frame = pytest.importorskip("lz4.frame", reason="python-lz4: no wheel for this Python")
zstandard = pytest.importorskip("zstandard", reason="zstandard: no wheel for this Python")
FALLBACK = fallbacks()
if not FALLBACK:
    pytest.skip("no compression.zstd here (Python < 3.14 without backports.zstd)",
                allow_module_level=True)
PRIMARY = {c.LZ4: "lz4", c.ZSTD: "zstandard"}
TEXT = b"kafka golden record " * 8

#: frames from other clients' codecs (of TEXT, unless a payload is given)
GOLDEN = [
    # kafka-python codec.lz4_encode: content size, independent blocks
    (c.LZ4, 2, "04224d186840a000000000000000861f000000ff056b61666b6120676f6c64656e207265636f"
               "72642014007450636f72642000000000"),
    # kafka-python codec.lz4_encode_old_kafka: the header checksum Kafka < 0.10 wrote
    (c.LZ4, 0, "04224d1860401a1f000000ff056b61666b6120676f6c64656e207265636f72642014007450"
               "636f72642000000000"),
    # python-lz4 with block and content checksums and content size (librdkafka's flags)
    (c.LZ4, 2, "04224d187c40a000000000000000511f000000ff056b61666b6120676f6c64656e207265636f"
               "72642014007450636f7264206d87728b00000000b4cd3794"),
    # kafka-python codec.zstd_encode
    (c.ZSTD, 2, "28b52ffd20a0dd0000a06b61666b6120676f6c64656e207265636f726420010012474d26"),
    # two frames: no content size and a checksum, then one with a size
    (c.ZSTD, 2, "28b52ffd0400d50000a06b61666b6120676f6c64656e207265636f72642001008e9e4cb374"
                "86fe28b52ffd2078dd0000a06b61666b6120676f6c64656e207265636f7264200100c2a59309"),
]

payloads = st.one_of(st.binary(max_size=3000),
                     st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=40),
                               st.integers(1, 6000)))
SETTINGS = settings(max_examples=80, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


def with_backends(monkeypatch: pytest.MonkeyPatch, chosen: dict[int, str]) -> None:
    monkeypatch.setattr(c, "_backend", dict(chosen))


def outcome(codec: int, data: bytes, magic: int, max_size: int) -> bytes | type:
    try:
        return c.decompress(codec, data, magic=magic, max_size=max_size)
    except CorruptRecordError as exc:
        return type(exc)


@pytest.mark.parametrize("codec,magic,frame", GOLDEN)
@pytest.mark.parametrize("chosen", [PRIMARY, FALLBACK], ids=["primary", "fallback"])
def test_golden_frames_of_other_clients(monkeypatch, chosen, codec, magic, frame) -> None:
    with_backends(monkeypatch, chosen)
    assert c.decompress(codec, bytes.fromhex(frame), magic=magic) == TEXT
    with pytest.raises(DecompressionLimitError):
        c.decompress(codec, bytes.fromhex(frame), magic=magic, max_size=len(TEXT) - 1)


@pytest.mark.parametrize("chosen", [PRIMARY, FALLBACK], ids=["primary", "fallback"])
def test_frames_other_clients_write_now(monkeypatch, chosen) -> None:
    """kafka-python's and aiokafka's encoders, and python-lz4's linked blocks (its
    default) over several 64 KiB blocks."""
    from aiokafka import codec as ac
    from kafka import codec as kc

    with_backends(monkeypatch, chosen)
    data = bytes(range(256)) * 1000 + TEXT * 3000
    for codec, frame in [(c.LZ4, kc.lz4_encode(data)), (c.LZ4, ac.lz4_encode(data)),
                         (c.LZ4, lz4_frame.compress(data, block_linked=True,
                                                    block_size=lz4_frame.BLOCKSIZE_MAX64KB)),
                         (c.ZSTD, kc.zstd_encode(data)), (c.ZSTD, ac.zstd_encode(data))]:
        assert c.decompress(codec, frame) == data
    assert c.decompress(c.LZ4, kc.lz4_encode_old_kafka(data), magic=0) == data
    assert kc.lz4_decode_old_kafka(c.compress(c.LZ4, data, magic=0)) == data


@SETTINGS
@given(payloads, st.sampled_from([None, -3, 0, 1, 3, 9]))
def test_each_backend_reads_the_others_frames(data, level) -> None:
    with pytest.MonkeyPatch.context() as mp:
        with_backends(mp, FALLBACK)
        lz4_fb = c.compress(c.LZ4, data, level=level)
        lz4_fb0 = c.compress(c.LZ4, data, level=level, magic=0)
        zstd_fb = c.compress(c.ZSTD, data, level=level)
        with_backends(mp, PRIMARY)
        lz4_pr = c.compress(c.LZ4, data, level=level)
        lz4_pr0 = c.compress(c.LZ4, data, level=level, magic=0)
        zstd_pr = c.compress(c.ZSTD, data, level=level)
        # the libraries themselves read the fallback's frames
        assert lz4_frame.decompress(lz4_fb) == data
        assert zstandard.ZstdDecompressor().decompressobj().decompress(zstd_fb) == data
        for frame, magic in [(lz4_fb, 2), (lz4_fb0, 0)]:
            assert c.decompress(c.LZ4, frame, magic=magic) == data
        assert c.decompress(c.ZSTD, zstd_fb) == data
        with_backends(mp, FALLBACK)
        for frame, magic in [(lz4_pr, 2), (lz4_pr0, 0)]:
            assert c.decompress(c.LZ4, frame, magic=magic) == data
        assert c.decompress(c.ZSTD, zstd_pr) == data
        assert c.decompress(c.ZSTD, zstandard.ZstdCompressor(
            write_content_size=False).compress(data)) == data


@SETTINGS
@given(st.sampled_from([c.LZ4, c.ZSTD]), payloads, st.integers(0, 4000), st.data())
def test_both_backends_agree_on_caps_and_corruption(codec, data, max_size, draw) -> None:
    """The same cap decision (DecompressionLimitError) and the same answer for a frame
    with a byte flipped: the data, or an error (the class may differ: a flipped size
    field is a bomb to one check and a corrupt block to another)."""
    with pytest.MonkeyPatch.context() as mp:
        with_backends(mp, PRIMARY)
        frame = bytearray(c.compress(codec, data))
        results = []
        for chosen in (PRIMARY, FALLBACK):
            with_backends(mp, chosen)
            results.append(outcome(codec, bytes(frame), 2, max_size))
        expected = data if len(data) <= max_size else DecompressionLimitError
        assert results == [expected, expected]
        frame[draw.draw(st.integers(0, len(frame) - 1))] ^= draw.draw(st.integers(1, 255))
        results = []
        for chosen in (PRIMARY, FALLBACK):
            with_backends(mp, chosen)
            results.append(outcome(codec, bytes(frame), 2, 1 << 20))
        assert (results[0] == data) == (results[1] == data), results
