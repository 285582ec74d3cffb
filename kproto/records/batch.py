"""The record batch header (magic 2): where its fields sit, and stamping a batch
that :func:`kproto.records.encode` made with an idempotent producer's ids.

======  ====  =========================================================
offset  size  field
======  ====  =========================================================
     0     8  base_offset
     8     4  batch_length (bytes after this field)
    12     4  partition_leader_epoch
    16     1  magic (2)
    17     4  crc: CRC-32C of every byte from ``attributes`` to the end
    21     2  attributes (codec, timestamp type, transactional, control)
    23     4  last_offset_delta
    27     8  base_timestamp
    35     8  max_timestamp
    43     8  producer_id
    51     2  producer_epoch
    53     4  base_sequence
    57     4  record_count
    61        the records
======  ====  =========================================================

The encoder (``_codec.encode_records`` and its pure twin) writes the whole
header; a producer stamps ``producer_id``, ``producer_epoch`` and
``base_sequence`` afterwards, when the batch gets its sequence (it may get new
ones on a retry), a transactional producer the transactional bit of
``attributes`` too, and the CRC again.
"""

from __future__ import annotations

import struct

__all__ = ["HEADER_SIZE", "RECORD_OVERHEAD", "TRANSACTIONAL_BIT", "CONTROL_BIT", "stamp_batch"]

BASE_OFFSET = 0
BATCH_LENGTH = 8
PARTITION_LEADER_EPOCH = 12
MAGIC = 16
CRC = 17
ATTRIBUTES = 21
LAST_OFFSET_DELTA = 23
BASE_TIMESTAMP = 27
MAX_TIMESTAMP = 35
PRODUCER_ID = 43
PRODUCER_EPOCH = 51
BASE_SEQUENCE = 53
RECORD_COUNT = 57
#: the header's size: a batch of no records (the producer's per-batch overhead)
HEADER_SIZE = 61

#: About what framing adds to a record's key, value and headers (attributes,
#: timestamp and offset deltas, lengths: a few varints); the producer's estimate.
RECORD_OVERHEAD = 12

#: attributes bits: 0-2 codec, 3 timestamp type, 4 transactional, 5 control
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

_PRODUCER_FIELDS = struct.Struct(">qhi")     # producer_id, producer_epoch, base_sequence
_CRC_FIELD = struct.Struct(">I")
_ATTRIBUTES_FIELD = struct.Struct(">h")


def stamp_batch(payload: bytes | bytearray, producer_id: int, producer_epoch: int,
                base_sequence: int, transactional: bool = False) -> bytearray:
    """A copy of record batch ``payload`` with its producer id, epoch and base
    sequence set, the transactional bit of its attributes set as
    ``transactional`` says, and its CRC computed again.

    >>> from kproto import records
    >>> stamped = stamp_batch(records.encode(value=[b"v"]), 7, 0, 42)
    >>> int.from_bytes(stamped[BASE_SEQUENCE:BASE_SEQUENCE + 4], "big")
    42
    """
    from .._backend import backend  # on first use: the backend imports this package

    buf = bytearray(payload)
    _PRODUCER_FIELDS.pack_into(buf, PRODUCER_ID, producer_id, producer_epoch, base_sequence)
    (attributes,) = _ATTRIBUTES_FIELD.unpack_from(buf, ATTRIBUTES)
    attributes = attributes | TRANSACTIONAL_BIT if transactional \
        else attributes & ~TRANSACTIONAL_BIT
    _ATTRIBUTES_FIELD.pack_into(buf, ATTRIBUTES, attributes)
    _CRC_FIELD.pack_into(buf, CRC, backend.crc32c(memoryview(buf)[ATTRIBUTES:]))
    return buf
