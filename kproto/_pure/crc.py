"""CRC-32C and CRC-32, one table lookup per byte: the readable twins of ``kproto._codec``.

CRC-32C (Castagnoli) protects record batches (magic 2); CRC-32 (IEEE 802.3, as zlib)
protects legacy messages (magic 0/1). Both are reflected CRCs with the register inverted
before and after, so ``crc(b, crc(a)) == crc(a + b)``. Like zlib.crc32 and the crc32c
package, the starting ``crc`` is taken modulo 2**32.
"""

from __future__ import annotations

from operator import index
from typing import TYPE_CHECKING, SupportsIndex

if TYPE_CHECKING:
    from typing_extensions import Buffer


def _table(poly: int) -> list[int]:
    # table[b]: the register after shifting byte b through it, 8 times one bit
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _table(0x82F63B78)  # Castagnoli, reflected
_CRC32 = _table(0xEDB88320)  # IEEE 802.3 (zlib), reflected


def _crc(table: list[int], data: Buffer, crc: SupportsIndex) -> int:
    c = (index(crc) & 0xFFFFFFFF) ^ 0xFFFFFFFF
    for b in memoryview(data).cast("B"):  # TypeError unless C-contiguous, like the extension
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def crc32c(data: Buffer, crc: SupportsIndex = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, continuing ``crc``.

    ``crc32c(b, crc32c(a)) == crc32c(a + b)``, as with the crc32c package.
    """
    return _crc(_CRC32C, data, crc)


def crc32c_software(data: Buffer, crc: SupportsIndex = 0) -> int:
    """Same as :func:`crc32c` (the extension's table path has this name)."""
    return _crc(_CRC32C, data, crc)


def crc32(data: Buffer, crc: SupportsIndex = 0) -> int:
    """CRC-32 (IEEE, same as zlib.crc32) of ``data``, continuing ``crc``."""
    return _crc(_CRC32, data, crc)
