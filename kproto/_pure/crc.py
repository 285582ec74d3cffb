"""CRC-32C and CRC-32, bit by bit from their polynomials (reflected): the readable twins."""

from __future__ import annotations

from typing import Any


def _table(poly: int) -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _table(0x82F63B78)  # Castagnoli, reflected
_CRC32 = _table(0xEDB88320)   # IEEE 802.3 (zlib), reflected


def _crc(table: list[int], data: Any, crc: int) -> int:
    crc ^= 0xFFFFFFFF
    for b in memoryview(data).cast("B"):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c(data: Any, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, continuing ``crc``."""
    return _crc(_CRC32C, data, crc)


crc32c_software = crc32c


def crc32(data: Any, crc: int = 0) -> int:
    """CRC-32 (IEEE, as zlib.crc32) of ``data``, continuing ``crc``."""
    return _crc(_CRC32, data, crc)
