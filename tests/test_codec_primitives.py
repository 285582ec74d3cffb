"""Varints and CRCs: both twins, against Kafka's vectors and independent implementations."""

from __future__ import annotations

import os
import zlib

import crc32c as crc32c_pkg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import util as kafka_util

from kproto import _codec, _pure
from kproto._impl import IS_PURE, codec
from kproto.errors import DecodeError, EncodeError

IMPLS = [pytest.param(_pure, id="pure"), pytest.param(_codec, id="cython")]

# Kafka's ByteUtilsTest vectors (PROTOCOL_NOTES §7) and boundaries.
VARINT = [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"),
          (-65, "8101"), (8191, "fe7f"), (-8192, "ff7f"), (8192, "808001"),
          (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")]
UVARINT = [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (8192, "8040"),
           (16383, "ff7f"), (16384, "808001"), (2**32 - 1, "ffffffff0f")]
VARLONG = [(0, "00"), (-1, "01"), (1, "02"), (2**31, "8080808010"),
           (2**63 - 1, "feffffffffffffffff01"), (-(2**63), "ffffffffffffffffff01")]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("kind", "vectors"), [("varint", VARINT), ("uvarint", UVARINT),
                                                ("varlong", VARLONG)])
def test_vectors(impl, kind, vectors) -> None:
    enc, dec = getattr(impl, f"encode_{kind}"), getattr(impl, f"decode_{kind}")
    size = getattr(impl, f"size_of_{kind}")
    for value, hexed in vectors:
        wire = bytes.fromhex(hexed)
        assert enc(value) == wire
        assert size(value) == len(wire)
        # decode between junk bytes: the position must land right after the varint
        assert dec(b"\xaa\xbb" + wire + b"\xcc", 2) == (value, 2 + len(wire))


@pytest.mark.parametrize("impl", IMPLS)
def test_truncated_and_overlong(impl) -> None:
    for _, hexed in VARINT + UVARINT:
        wire = bytes.fromhex(hexed)
        for n in range(len(wire)):
            with pytest.raises(DecodeError, match="truncated"):
                impl.decode_uvarint(wire[:n])
    with pytest.raises(DecodeError, match="longer than 5|does not fit"):
        impl.decode_uvarint(b"\x80" * 5 + b"\x01")
    with pytest.raises(DecodeError, match="does not fit"):
        impl.decode_uvarint(b"\xff\xff\xff\xff\x1f")
    with pytest.raises(DecodeError, match="longer than 10|does not fit"):
        impl.decode_varlong(b"\x80" * 10 + b"\x01")
    with pytest.raises(DecodeError):
        impl.decode_varint(b"\x00", 5)
    # a slice ends where it ends, even when the parent buffer goes on
    parent = bytearray(b"\x80\x80\x01")
    with pytest.raises(DecodeError, match="truncated"):
        impl.decode_uvarint(memoryview(parent)[:2])
    for bad in (-1, 2**64):
        with pytest.raises(EncodeError):
            impl.encode_uvarint(bad)
    with pytest.raises(EncodeError):
        impl.encode_varint(2**31)


@settings(max_examples=300, deadline=None, database=None)
@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1))
def test_twins_and_kafka_python_agree(v32: int, v64: int) -> None:
    for impl in (_pure, _codec):
        theirs = bytearray()
        kafka_util.encode_varint(v32, theirs.append)
        assert impl.encode_varint(v32) == bytes(theirs)
        assert impl.decode_varint(impl.encode_varint(v32)) == (v32, impl.size_of_varint(v32))
        assert impl.decode_varlong(impl.encode_varlong(v64))[0] == v64
        assert impl.zigzag_decode(impl.zigzag_encode(v64)) == v64
    assert _codec.encode_varlong(v64) == _pure.encode_varlong(v64)


CRC32C_VECTORS = [
    (b"", 0), (b"a", 0xC1D04330), (b"123456789", 0xE3069283),
    (bytes(range(256)) * 4, 0x2CDF6E8F),
]


@pytest.mark.parametrize("impl", IMPLS)
def test_crc32c_vectors(impl) -> None:
    for data, expected in CRC32C_VECTORS:
        assert impl.crc32c(data) == expected == crc32c_pkg.crc32c(data)


def test_crc32c_all_lengths_and_alignments() -> None:
    buf = os.urandom(70_000)
    for start in range(8):
        for n in list(range(0, 300)) + [767, 768, 769, 24575, 24576, 24577, 69_000]:
            piece = memoryview(buf)[start:start + n]
            want = crc32c_pkg.crc32c(bytes(piece))
            assert _codec.crc32c(piece) == want
            assert _codec.crc32c_software(piece) == want


@settings(max_examples=100, deadline=None, database=None)
@given(st.binary(max_size=3000), st.binary(max_size=3000))
def test_crc_continuation_and_twins(a: bytes, b: bytes) -> None:
    assert _codec.crc32c(b, _codec.crc32c(a)) == crc32c_pkg.crc32c(a + b)
    assert _pure.crc32c(a + b) == _codec.crc32c(a + b)
    assert _codec.crc32(b, _codec.crc32(a)) == zlib.crc32(a + b) == _pure.crc32(a + b)


def test_large_buffers() -> None:
    big = os.urandom(4 << 20)
    assert _codec.crc32c(big) == crc32c_pkg.crc32c(big)
    assert _codec.crc32(big) == zlib.crc32(big)


def test_extension_is_used_unless_pure_requested() -> None:
    assert IS_PURE == (os.environ.get("KPROTO_PURE") == "1")
    assert codec is (_pure if IS_PURE else _codec)
