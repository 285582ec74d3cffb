"""Varints (PROTOCOL_NOTES §2.3), the readable twins.

Unsigned varint: protobuf base-128, least significant group first, at most 5
bytes (uint32). Varint / varlong: zigzag (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...)
then unsigned, at most 5 / 10 bytes.
"""

from __future__ import annotations

from typing import Any

from ..errors import DecodeError, EncodeError


def _read(buf: Any, pos: int, limit: int, kind: str) -> tuple[int, int]:
    data = memoryview(buf).cast("B")
    if not 0 <= pos <= len(data):
        raise DecodeError(f"position {pos} is outside the buffer of {len(data)} bytes",
                          offset=pos)
    start, result, shift = pos, 0, 0
    while True:
        if pos >= len(data):
            raise DecodeError(f"truncated {kind} at byte {start}", offset=start)
        b = data[pos]
        pos += 1
        if shift == 7 * (limit - 1) and b > (0x0F if limit == 5 else 0x01):
            raise DecodeError(f"{kind} at byte {start} does not fit in "
                              f"{32 if limit == 5 else 64} bits", offset=start)
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 7 * limit:
            raise DecodeError(f"{kind} at byte {start} is longer than {limit} bytes",
                              offset=start)


def zigzag_encode(n: int) -> int:
    """int64 -> zigzag uint64."""
    return ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF


def zigzag_decode(n: int) -> int:
    """zigzag uint64 -> int64."""
    return (n >> 1) ^ -(n & 1)


def decode_uvarint(buf: Any, pos: int = 0) -> tuple[int, int]:
    """An unsigned varint (≤ 5 bytes) at ``buf[pos]``: (value, new position)."""
    return _read(buf, pos, 5, "unsigned varint")


def decode_varint(buf: Any, pos: int = 0) -> tuple[int, int]:
    """A zigzag varint (≤ 5 bytes, int32): (value, new position)."""
    u, pos = _read(buf, pos, 5, "varint")
    v = zigzag_decode(u)
    return (v + 2**31) % 2**32 - 2**31, pos


def decode_varlong(buf: Any, pos: int = 0) -> tuple[int, int]:
    """A zigzag varlong (≤ 10 bytes, int64): (value, new position)."""
    u, pos = _read(buf, pos, 10, "varlong")
    return zigzag_decode(u), pos


def encode_uvarint(n: int) -> bytes:
    """Unsigned varint bytes of ``0 <= n < 2**64``."""
    if not 0 <= n < 2**64:
        raise EncodeError(f"{n} is out of range for an unsigned varint")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varint(n: int) -> bytes:
    """Zigzag varint bytes of an int32."""
    if not -(2**31) <= n < 2**31:
        raise EncodeError(f"{n} is out of range for a varint (int32)")
    return encode_uvarint(zigzag_encode(n) & 0xFFFFFFFF)


def encode_varlong(n: int) -> bytes:
    """Zigzag varint bytes of an int64."""
    if not -(2**63) <= n < 2**63:
        raise EncodeError(f"{n} is out of range for a varlong (int64)")
    return encode_uvarint(zigzag_encode(n))


def size_of_uvarint(n: int) -> int:
    """Bytes in the unsigned varint of ``n``."""
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def size_of_varint(n: int) -> int:
    """Bytes in the zigzag varint of an int32."""
    return size_of_uvarint(zigzag_encode(n) & 0xFFFFFFFF)


def size_of_varlong(n: int) -> int:
    """Bytes in the zigzag varlong of an int64."""
    return size_of_uvarint(zigzag_encode(n))
