"""Columns -> record batch v2, in plain Python: the reference twin of
``kproto._codec.encode_batch_v2`` (same arguments, same bytes)."""

from __future__ import annotations

import struct
from typing import Any, cast

import numpy as np

from .. import compression
from ..errors import EncodeError
from .crc import crc32c
from .varint import encode_uvarint, zigzag_encode

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _zigzag(v: int) -> bytes:
    return encode_uvarint(zigzag_encode(v))


def _values(col: tuple[Any, Any, Any, int], n: int) -> list[bytes | None]:
    offsets, data, validity, bit0 = col
    offsets = np.asarray(offsets)
    raw = memoryview(cast(Any, np.asarray(data, np.uint8))).cast("B")
    out: list[bytes | None] = []
    for i in range(n):
        if validity is not None:
            bit = bit0 + i
            if not (int(np.asarray(validity)[bit >> 3]) >> (bit & 7)) & 1:
                out.append(None)
                continue
        out.append(bytes(raw[int(offsets[i]):int(offsets[i + 1])]))
    return out


def encode_batch_v2(n: int, key: Any, value: Any, timestamps: Any, headers: Any = None, *,
                    base_offset: int = 0, codec: int = 0, producer_id: int = -1,
                    producer_epoch: int = -1, base_sequence: int = -1,
                    transactional: bool = False, partition_leader_epoch: int = -1,
                    log_append_time: bool = False, compression_level: int | None = None,
                    rows: Any = None) -> bytes:
    """Encode ``n`` records into one record batch v2 (see kproto.records.encode).
    ``rows``: record i is row ``rows[i]`` of the columns (None: row i)."""
    if n <= 0:
        raise EncodeError("a record batch needs at least one record")
    if rows is not None:
        index = [int(r) for r in np.asarray(rows, np.int64)]
        if len(index) != n:
            raise EncodeError(f"rows has {len(index)} values for {n} records")
        limit = min(len(timestamps), len(key[0]) - 1, len(value[0]) - 1,
                    *(() if headers is None else (len(headers[0]) - 1,)))
        for i, r in enumerate(index):
            if not 0 <= r < limit:
                raise EncodeError(f"rows[{i}] = {r} is not a row of the columns "
                                  f"({limit} rows)")
        # the rows gathered, then encoded as columns of n rows
        return encode_batch_v2(n, *_gather(index, key, value, timestamps, headers),
                               base_offset=base_offset, codec=codec, producer_id=producer_id,
                               producer_epoch=producer_epoch, base_sequence=base_sequence,
                               transactional=transactional,
                               partition_leader_epoch=partition_leader_epoch,
                               log_append_time=log_append_time,
                               compression_level=compression_level)
    ts = [int(t) for t in np.asarray(timestamps, np.int64)[:n]]
    if len(ts) < n:
        raise EncodeError(f"timestamps has {len(ts)} values for {n} records")
    keys, values = _values(key, n), _values(value, n)
    header_rows: list[list[tuple[bytes, bytes | None]]] = [[] for _ in range(n)]
    if headers is not None:
        list_offsets = np.asarray(headers[0])
        total = int(list_offsets[n])
        hkeys, hvalues = _values(headers[1], total), _values(headers[2], total)
        for i in range(n):
            for h in range(int(list_offsets[i]), int(list_offsets[i + 1])):
                header_rows[i].append((hkeys[h] or b"", hvalues[h]))
    base_ts = ts[0]
    records = bytearray()
    for i in range(n):
        body = bytearray(b"\x00")  # attributes
        body += _zigzag(ts[i] - base_ts) + _zigzag(i)
        for v in (keys[i], values[i]):
            body += _zigzag(-1) if v is None else _zigzag(len(v)) + v
        body += _zigzag(len(header_rows[i]))
        for hk, hv in header_rows[i]:
            body += _zigzag(len(hk)) + hk
            body += _zigzag(-1) if hv is None else _zigzag(len(hv)) + hv
        records += _zigzag(len(body)) + body
    payload = compression.compress(codec, bytes(records),
                                   level=compression_level) if codec else bytes(records)
    attributes = (codec & 0x07) | (0x08 if log_append_time else 0) | (0x10 if transactional else 0)
    header = bytearray(_HEADER.pack(base_offset, 49 + len(payload), partition_leader_epoch, 2, 0,
                                    attributes, n - 1, base_ts, max(ts), producer_id,
                                    producer_epoch, base_sequence, n))
    crc = crc32c(bytes(header[21:]) + payload)
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + payload


def _column(values: list[bytes | None]) -> tuple[Any, Any, Any, int]:
    """(offsets, data, validity, 0) of ``values``, as the encoder takes a column."""
    offsets = np.zeros(len(values) + 1, np.int64)
    offsets[1:] = np.cumsum([0 if v is None else len(v) for v in values])
    validity = np.packbits(np.array([v is not None for v in values], bool), bitorder="little")
    data = np.frombuffer(b"".join(v for v in values if v is not None), np.uint8)
    return offsets, data, validity, 0


def _gather(index: list[int], key: Any, value: Any, timestamps: Any, headers: Any
            ) -> tuple[Any, Any, Any, Any]:
    """key, value, timestamps and headers of the rows ``index``, in that order."""
    rows = max(index) + 1
    keys, values = _values(key, rows), _values(value, rows)
    ts = np.asarray(timestamps, np.int64)
    if headers is None:
        gathered = None
    else:
        list_offsets = np.asarray(headers[0])
        total = int(list_offsets[rows])
        hkeys, hvalues = _values(headers[1], total), _values(headers[2], total)
        spans = [range(int(list_offsets[r]), int(list_offsets[r + 1])) for r in index]
        counts = np.zeros(len(index) + 1, np.int32)
        counts[1:] = np.cumsum([len(s) for s in spans])
        gathered = (counts, _column([hkeys[h] for s in spans for h in s]),
                    _column([hvalues[h] for s in spans for h in s]))
    return (_column([keys[r] for r in index]), _column([values[r] for r in index]),
            np.array([ts[r] for r in index], np.int64), gathered)


def murmur2(data: Any) -> int:
    """Kafka's murmur2 (Java ``Utils.murmur2``) of ``data``, as a signed int32."""
    data = bytes(data)
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    whole = length - (length & 3)
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partitions(n: int, key: tuple[Any, Any, Any, int], num_partitions: int
                       ) -> np.ndarray:
    """Java's partition of each of ``n`` keys (-1 for null keys)."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, not {num_partitions}")
    return np.array([-1 if k is None else (murmur2(k) & 0x7FFFFFFF) % num_partitions
                     for k in _values(key, n)], np.int32)
