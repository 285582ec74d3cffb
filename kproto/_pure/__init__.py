"""Pure-Python reference twins of every function in ``kproto._codec``.

Readable and slow: the oracle the Cython is tested against. Same names, same
results, same exceptions.
"""

from __future__ import annotations

from .accum import (
    SEND_BATCH_OVERHEAD,
    SEND_RECORD_OVERHEAD,
    AccumulatorCore,
    BatchCore,
    FutureCore,
    ProducerCore,
    deliver,
)
from .builder import RecordsBuilder
from .crc import crc32, crc32c, crc32c_software
from .encode import encode_batch_v2, murmur2, murmur2_partitions
from .records import decode_records
from .rows import record_rows
from .varint import (
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    encode_varlong,
    size_of_uvarint,
    size_of_varint,
    size_of_varlong,
    zigzag_decode,
    zigzag_encode,
)

#: The extension's flags; the pure twin never uses a CRC instruction.
HAVE_SSE42 = False
HAVE_ARM_CRC32 = False
HAVE_VPCLMULQDQ = False


__all__ = [
    "crc32", "crc32c", "crc32c_software", "decode_uvarint", "decode_varint", "decode_varlong",
    "encode_uvarint", "encode_varint", "encode_varlong", "size_of_uvarint", "size_of_varint",
    "size_of_varlong", "zigzag_decode", "zigzag_encode", "decode_records", "encode_batch_v2",
    "murmur2", "murmur2_partitions", "record_rows", "RecordsBuilder",
    "AccumulatorCore", "BatchCore", "FutureCore", "ProducerCore", "deliver",
    "SEND_BATCH_OVERHEAD", "SEND_RECORD_OVERHEAD",
    "HAVE_SSE42", "HAVE_ARM_CRC32", "HAVE_VPCLMULQDQ",
]
