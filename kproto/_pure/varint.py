"""Varints (PROTOCOL_NOTES §2.3, Kafka's ByteUtils): the readable twins of ``kproto._codec``.

Base-128, least significant 7 bits first; the high bit of a byte means "another byte
follows". 300 = 0b10_0101100 -> ``AC 02``.

- unsigned varint: uint32, at most 5 bytes (the 5th carries bits 28-31 only, <= 0x0F)
- varint: int32 zigzag-mapped to uint32 (0, -1, 1, -2 -> 0, 1, 2, 3), then as above
- varlong: int64 zigzag-mapped to uint64, at most 10 bytes (the 10th <= 0x01)

Decoding never reads past the end of the buffer it is given (a slice ends where it ends)
and raises :class:`~kproto.errors.DecodeError` with the varint's start as ``offset``.
Encoding out-of-range values raises :class:`~kproto.errors.EncodeError`.
"""

from __future__ import annotations

from operator import index
from typing import TYPE_CHECKING, SupportsIndex

if TYPE_CHECKING:
    from typing_extensions import Buffer

from ..errors import DecodeError, EncodeError

_U64 = 2**64


def _read(buf: Buffer, pos: SupportsIndex, kind: str) -> tuple[int, int]:
    data = memoryview(buf).cast("B")  # TypeError unless C-contiguous, like the extension
    at = index(pos)
    if not 0 <= at <= len(data):
        raise DecodeError(f"position {at} is outside the buffer of {len(data)} bytes")
    max_bytes, last_max, bits = (10, 0x01, 64) if kind == "varlong" else (5, 0x0F, 32)
    start, result = at, 0
    for i in range(max_bytes):
        if at >= len(data):  # never read past the end of this buffer
            raise DecodeError(f"truncated {kind}", offset=start)
        b = data[at]
        at += 1
        result |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            if i == max_bytes - 1 and b > last_max:  # the value would lose its top bits
                raise DecodeError(f"{kind} overflows {bits} bits", offset=start)
            return result, at
    raise DecodeError(f"{kind} is longer than {max_bytes} bytes", offset=start)


def _u64(n: SupportsIndex, what: str) -> int:
    v = index(n)
    if not 0 <= v < _U64:
        raise EncodeError(f"{v} is out of range for {what} (0 <= n < 2**64)")
    return v


def _i32(n: SupportsIndex, what: str) -> int:
    v = index(n)
    if not -(2**31) <= v < 2**31:
        raise EncodeError(f"{v} is out of range for {what} (int32)")
    return v


def _i64(n: SupportsIndex, what: str) -> int:
    v = index(n)
    if not -(2**63) <= v < 2**63:
        raise EncodeError(f"{v} is out of range for {what} (int64)")
    return v


def _uvarint(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _size(u: int) -> int:
    return max(1, (u.bit_length() + 6) // 7)


def zigzag_encode(n: SupportsIndex) -> int:
    """int64 -> zigzag uint64 (0, -1, 1, -2 -> 0, 1, 2, 3)."""
    v = _i64(n, "zigzag_encode")
    return (v << 1) ^ (v >> 63)  # v >> 63 is 0 or -1 (all ones): already in [0, 2**64)


def zigzag_decode(n: SupportsIndex) -> int:
    """zigzag uint64 -> int64 (0, 1, 2, 3 -> 0, -1, 1, -2)."""
    u = index(n)
    if not 0 <= u < _U64:
        raise DecodeError(f"{u} is out of range for zigzag_decode (0 <= n < 2**64)")
    return (u >> 1) ^ -(u & 1)


def decode_uvarint(buf: Buffer, pos: SupportsIndex = 0) -> tuple[int, int]:
    """The unsigned varint (uint32, <= 5 bytes) at ``buf[pos]``: (value, position after it)."""
    return _read(buf, pos, "unsigned varint")


def decode_varint(buf: Buffer, pos: SupportsIndex = 0) -> tuple[int, int]:
    """The zigzag varint (int32, <= 5 bytes) at ``buf[pos]``: (value, position after it)."""
    u, end = _read(buf, pos, "varint")
    return (u >> 1) ^ -(u & 1), end


def decode_varlong(buf: Buffer, pos: SupportsIndex = 0) -> tuple[int, int]:
    """The zigzag varlong (int64, <= 10 bytes) at ``buf[pos]``: (value, position after it)."""
    u, end = _read(buf, pos, "varlong")
    return (u >> 1) ^ -(u & 1), end


def encode_uvarint(n: SupportsIndex) -> bytes:
    """Unsigned varint bytes of ``0 <= n < 2**64`` (Kafka's fields are uint32: 5 bytes max)."""
    return _uvarint(_u64(n, "an unsigned varint"))


def encode_varint(n: SupportsIndex) -> bytes:
    """Zigzag varint bytes of an int32."""
    v = _i32(n, "a varint")
    return _uvarint((v << 1) ^ (v >> 31))


def encode_varlong(n: SupportsIndex) -> bytes:
    """Zigzag varlong bytes of an int64."""
    v = _i64(n, "a varlong")
    return _uvarint((v << 1) ^ (v >> 63))


def size_of_uvarint(n: SupportsIndex) -> int:
    """Length of ``encode_uvarint(n)``."""
    return _size(_u64(n, "an unsigned varint"))


def size_of_varint(n: SupportsIndex) -> int:
    """Length of ``encode_varint(n)``."""
    v = _i32(n, "a varint")
    return _size((v << 1) ^ (v >> 31))


def size_of_varlong(n: SupportsIndex) -> int:
    """Length of ``encode_varlong(n)``."""
    v = _i64(n, "a varlong")
    return _size((v << 1) ^ (v >> 63))
