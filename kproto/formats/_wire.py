"""Confluent's wire format, column-wise: magic byte 0, a 4-byte big-endian schema
id, then the payload (Protobuf puts its message indexes first).

Framing is read in one pass over the offsets and data buffers of a binary
column (``kproto._avro.frame_ids``, or its NumPy twin): no Python object per
value. Rows that are too short or do not start with the magic byte are reported
with the reason, never decoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .. import _backend

if _backend.IS_PURE:
    from .._pure import wire as _kernels
else:
    try:
        from .. import _avro as _kernels  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - only without a built extension (avro.py warns)
        from .._pure import wire as _kernels

MAGIC = 0
HEADER = 5


def header(schema_id: int) -> bytes:
    """The 5 bytes before every framed payload of ``schema_id``."""
    return bytes([MAGIC]) + int(schema_id).to_bytes(4, "big")


def as_binary(values: Any) -> pa.Array:
    """``values`` as one binary or large_binary array (chunks combined, views and
    strings seen as binary)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if not isinstance(values, pa.Array):
        values = pa.array(values, pa.binary())
    t = values.type
    if pa.types.is_string(t):
        return values.view(pa.binary())
    if pa.types.is_large_string(t):
        return values.view(pa.large_binary())
    if pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        return values.cast(pa.binary())
    if not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        raise TypeError(f"values must be a binary column (binary, large_binary, binary_view), "
                        f"not {t}")
    return values


def buffers(values: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets with n + 1 entries, data bytes, validity) of a binary array, as NumPy
    views where Arrow allows it."""
    n = len(values)
    kind = np.int64 if pa.types.is_large_binary(values.type) else np.int32
    bufs = values.buffers()
    offsets = np.frombuffer(bufs[1], kind)[values.offset:values.offset + n + 1] if n else \
        np.zeros(1, kind)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    valid = values.is_valid().to_numpy(zero_copy_only=False) if values.null_count else \
        np.ones(n, bool)
    return offsets, data, valid


@dataclass
class Framing:
    """The framing of a column: each row's schema id (-1 for nulls and bad rows),
    which rows are null, and the bad rows with their reasons."""

    ids: np.ndarray
    null: np.ndarray
    bad: dict[int, str]


def frame(values: pa.Array) -> Framing:
    """Read every row's header (see the module)."""
    offsets, data, valid = buffers(values)
    ids, status = _kernels.frame_ids(offsets.astype(np.int64, copy=False), data,
                                     valid.view(np.uint8), HEADER, MAGIC)
    bad: dict[int, str] = {}
    for row in np.flatnonzero(status).tolist():
        if status[row] == 1:
            bad[row] = (f"{int(offsets[row + 1] - offsets[row])} bytes, shorter than the "
                        f"{HEADER}-byte header of Confluent's wire format")
        else:
            bad[row] = (f"magic byte {int(data[offsets[row]])}, not {MAGIC}: not in "
                        "Confluent's wire format")
    return Framing(ids, ~valid, bad)


def json_lines(values: pa.Array, rows: np.ndarray, skip: int) -> tuple[pa.Buffer, np.ndarray]:
    """The values of ``rows`` (a bool mask), ``skip`` bytes cut from each, as one
    buffer with a line each (raw line breaks inside a value made spaces), and the
    rows left out because their value is not one JSON object's text
    (``kproto._avro.json_lines``, or its NumPy twin)."""
    offsets, data, _ = buffers(values)
    lines, others = _kernels.json_lines(offsets.astype(np.int64, copy=False), data,
                                        rows.view(np.uint8), skip)
    return (lines if isinstance(lines, pa.Buffer) else pa.py_buffer(lines)), others


def assemble(n: int, pieces: list[tuple[np.ndarray, pa.Array]], type: pa.DataType
             ) -> pa.Array:
    """One array of ``n`` rows from decoded pieces (``rows`` -> their values);
    rows no piece covers are null."""
    if len(pieces) == 1 and len(pieces[0][0]) == n and \
            np.array_equal(pieces[0][0], np.arange(n)):
        return pieces[0][1]
    arrays = [a for _, a in pieces] + [pa.nulls(1, type)]
    placed = np.full(n, sum(len(a) for _, a in pieces), np.int64)   # the null at the end
    at = 0
    for rows, array in pieces:
        placed[rows] = np.arange(at, at + len(array))
        at += len(array)
    whole = pa.concat_arrays(arrays) if len(arrays) > 1 else arrays[0]
    return whole.take(pa.array(placed))


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned LEB128 varint at ``pos``: (value, next position); ValueError when
    truncated or longer than 10 bytes."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def unzigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def write_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def message_indexes(data: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    """Protobuf's message indexes after the header: a zigzag varint count, then that
    many zigzag varint indexes; a count of 0 stands for ``(0,)`` (the first
    message of the file). Returns (indexes, payload start)."""
    count, pos = read_varint(data, pos)
    count = zigzag(count)
    if count == 0:
        return (0,), pos
    if count < 0 or count > 100:
        raise ValueError(f"message index count {count} out of range")
    indexes = []
    for _ in range(count):
        index, pos = read_varint(data, pos)
        index = zigzag(index)
        if index < 0:
            raise ValueError(f"negative message index {index}")
        indexes.append(index)
    return tuple(indexes), pos


def encode_message_indexes(indexes: tuple[int, ...]) -> bytes:
    """The inverse of :func:`message_indexes` (``(0,)`` as the single byte 0)."""
    if tuple(indexes) == (0,):
        return b"\x00"
    return write_varint(unzigzag(len(indexes))) + b"".join(
        write_varint(unzigzag(i)) for i in indexes)
