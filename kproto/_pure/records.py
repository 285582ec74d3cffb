"""Record sets -> columns, in plain Python: the reference twin of ``kproto._codec``.

Readable and slow. The tests run every case through this and the Cython
decoder and require identical columns; the Cython is the fast twin.

Wire layouts (PROTOCOL_NOTES §3):

Record batch, magic 2::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (=2)
    crc uint32 (CRC-32C of attributes..end) | attributes int16 | lastOffsetDelta int32
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16
    baseSequence int32 | recordsCount int32 | records (compressed as one blob if codec != 0)

    record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
            keyLen varint | key | valueLen varint | value | headerCount varint
            [headerKeyLen varint | headerKey | headerValueLen varint | headerValue]...

Message, magic 0/1::

    offset int64 | messageSize int32 | crc uint32 (CRC-32 of magic..end) | magic int8
    attributes int8 | [timestamp int64, magic 1] | key bytes(int32) | value bytes(int32)

A compressed message's value is a nested message set (relative inner offsets
in magic 1).
"""

from __future__ import annotations

import heapq
import struct
import zlib
from collections.abc import Iterable
from typing import Any, cast

import numpy as np

from .. import compression
from ..columns import BinaryColumn, BinaryViewColumn, HeaderColumn, RecordColumns
from ..errors import ConfigError, CorruptRecordError, CrcError, DecompressionLimitError
from .crc import crc32c

V2_HEADER = struct.Struct(">qiibIhiqqqhii")
V2_OVERHEAD = V2_HEADER.size  # 61
LOG_OVERHEAD = 12  # offset + size
LEGACY_MIN_SIZE = 4 + 1 + 1 + 4 + 4  # crc, magic, attributes, key and value lengths
ATTR_CODEC, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL, ATTR_CONTROL = 0x07, 0x08, 0x10, 0x20
CONTROL_ABORT = 0
DEFAULT_MAX_BATCH_BYTES = 0x7FFFFFFF
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class _Out:
    """Growing per-record lists; turned into columns at the end."""

    def __init__(self, binary_view: bool) -> None:
        self.offset: list[int] = []
        self.timestamp: list[int] = []
        self.timestamp_type: list[int] = []
        self.key: list[Any] = []
        self.value: list[Any] = []
        self.header_counts: list[int] = []
        self.header_keys: list[bytes] = []
        self.header_values: list[bytes | None] = []
        self.binary_view = binary_view
        self.buffers: list[Any] = []
        self.source_view: Any = None  # the input's memoryview: buffer 0 is the input object
        self.decompressed = 0  # bytes decompressed so far: all batches share max_decompressed

    def buffer_index(self, buf: Any) -> int:
        if buf is self.source_view:
            return 0
        for i, b in enumerate(self.buffers):
            if b is buf:
                return i
        self.buffers.append(buf)
        return len(self.buffers) - 1


def _varint(buf: Any, pos: int, end: int, what: str, limit: int = 5) -> tuple[int, int]:
    """A zigzag varint of at most ``limit`` bytes within ``buf[pos:end]``."""
    result = shift = 0
    start = pos
    while True:
        if pos >= end:
            raise CorruptRecordError(f"truncated varint in {what}", offset=start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if pos - start >= limit:
            raise CorruptRecordError(f"varint longer than {limit} bytes in {what}", offset=start)
    value = (result >> 1) ^ -(result & 1)
    if limit == 5 and not -(2**31) <= value < 2**31:
        raise CorruptRecordError(f"varint out of int32 range in {what}", offset=start)
    return value, pos


def _views_fit(size: int) -> None:
    if size > 0x7FFFFFFF:
        raise ConfigError(f"binary_view=True needs buffers under 2 GiB (Arrow views hold int32 "
                          f"offsets), not {size} bytes: decode in parts, or with "
                          "binary_view=False")


def _in_int64(n: int) -> bool:
    return INT64_MIN <= n <= INT64_MAX


def _wrap64(n: int) -> int:
    """Java's long arithmetic: wrap around to int64 (timestamps)."""
    return (n - INT64_MIN) % 2**64 + INT64_MIN


def _take(buf: Any, pos: int, n: int, end: int, what: str) -> int:
    if n < 0 or pos + n > end:
        raise CorruptRecordError(f"{what} of {n} bytes runs past the end of its record",
                                 offset=pos)
    return pos + n


def decode_records(
    buf: Any, *, start_offset: int = 0, check_crc: bool = True,
    aborted_transactions: Iterable[tuple[int, int]] | None = None,
    max_decompressed: int = compression.DEFAULT_MAX_DECOMPRESSED,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, binary_view: bool = False,
    stop_at_limit: bool = False,
) -> RecordColumns:
    """Decode a sequence of record sets (any magic, any codec) into columns.

    See :func:`kproto.records.decode` for the rules.
    """
    data = memoryview(buf).cast("B")
    if binary_view:
        _views_fit(len(data))
    out = _Out(binary_view)
    out.source_view = data
    out.buffers.append(buf)
    aborted = _Aborted(aborted_transactions)
    next_offset = start_offset
    pos, end = 0, len(data)
    while end - pos >= LOG_OVERHEAD:
        base_offset, size = struct.unpack_from(">qi", data, pos)
        if size < LEGACY_MIN_SIZE:
            raise CorruptRecordError(f"record set size {size} is below the minimum", offset=pos)
        if size > max_batch_bytes:
            raise CorruptRecordError(
                f"record set of {size} bytes exceeds the {max_batch_bytes}-byte limit", offset=pos)
        if end - pos - LOG_OVERHEAD < size:
            break  # a truncated trailing batch: normal at the end of a fetch
        magic = data[pos + 16]
        stop = pos + LOG_OVERHEAD + size
        if magic not in (0, 1, 2):
            raise CorruptRecordError(f"unknown magic byte {magic}", offset=pos + 16)
        try:
            if magic == 2:
                last = _batch_v2(data, pos, stop, out, start_offset, check_crc, aborted,
                                 max_decompressed)
            else:
                last = _legacy_message(data, pos, stop, out, start_offset, check_crc,
                                       max_decompressed)
        except DecompressionLimitError:
            # raised before the batch added anything: with stop_at_limit, the batches
            # before it are the answer and the next fetch starts at it - if they reach
            # the start (else the next fetch would ask for this answer again)
            if stop_at_limit and next_offset > start_offset:
                break
            raise
        if last == INT64_MAX:
            raise CorruptRecordError(f"record set ends at offset {last}: no next offset fits "
                                     "in int64", offset=pos)
        next_offset = max(next_offset, last + 1)
        pos = stop
    return _columns(out, next_offset)


class _Aborted:
    """read_committed: which producers' transactions to skip (PROTOCOL_NOTES §3.3)."""

    def __init__(self, txns: Iterable[tuple[int, int]] | None) -> None:
        self.enabled = txns is not None
        self.heap = [(first, pid) for pid, first in (txns or ())]
        heapq.heapify(self.heap)
        self.producers: set[int] = set()

    def skip_batch(self, pid: int, last_offset: int, transactional: bool) -> bool:
        if not self.enabled or pid < 0:
            return False
        while self.heap and self.heap[0][0] <= last_offset:
            self.producers.add(heapq.heappop(self.heap)[1])
        return transactional and pid in self.producers

    def on_abort_marker(self, pid: int) -> None:
        self.producers.discard(pid)


def _batch_v2(data: memoryview, pos: int, stop: int, out: _Out, start_offset: int,
              check_crc: bool, aborted: _Aborted, max_decompressed: int) -> int:
    if stop - pos < V2_OVERHEAD:
        raise CorruptRecordError("record batch shorter than its 61-byte header", offset=pos)
    (base_offset, _, _, _, crc, attributes, last_delta, base_ts, max_ts, pid, _, _,
     count) = V2_HEADER.unpack_from(data, pos)
    if check_crc:
        actual = crc32c(data[pos + 21:stop])
        if actual != crc:
            raise CrcError(f"record batch at offset {base_offset}: CRC-32C mismatch "
                           f"(stored 0x{crc:08x}, computed 0x{actual:08x})",
                           expected=crc, actual=actual, offset=pos)
    codec = attributes & ATTR_CODEC
    ts_type = 1 if attributes & ATTR_TIMESTAMP_TYPE else 0
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}", offset=pos + 57)
    last_offset = base_offset + last_delta
    if not _in_int64(last_offset):
        raise CorruptRecordError(f"record batch at offset {base_offset}: lastOffsetDelta "
                                 f"{last_delta} overflows int64", offset=pos + 23)
    body: Any = data
    rpos, rend = pos + V2_OVERHEAD, stop
    if codec:
        body = memoryview(compression.decompress_buffer(
            codec, data[rpos:stop], magic=2, max_size=max_decompressed - out.decompressed,
            offset=pos, total=max_decompressed))
        rpos, rend = 0, len(body)
        out.decompressed += rend
        if out.binary_view:
            _views_fit(rend)
    if attributes & ATTR_CONTROL:
        if count and aborted.enabled and pid >= 0:
            aborted.skip_batch(pid, last_offset, False)  # consume txns begun up to here
            key, _ = _control_key(body, rpos, rend)
            if key == CONTROL_ABORT:
                aborted.on_abort_marker(pid)
        return last_offset
    if aborted.skip_batch(pid, last_offset, bool(attributes & ATTR_TRANSACTIONAL)):
        return last_offset
    try:
        for _ in range(count):
            rpos = _record_v2(body, rpos, rend, out, base_offset, base_ts, max_ts, ts_type,
                              start_offset)
        if rpos != rend:
            raise CorruptRecordError(f"{rend - rpos} bytes left after the {count} records",
                                     offset=rpos)
    except CorruptRecordError as exc:  # say which batch, and where in it (as the Cython)
        where = "decompressed records" if codec else "record set"
        raise CorruptRecordError(f"batch at offset {base_offset} (byte {pos}): {exc.message} "
                                 f"(byte {exc.offset} of the {where})", offset=pos) from None
    return last_offset


def _control_key(body: Any, rpos: int, rend: int) -> tuple[int, int]:
    """The control record type (0 abort, 1 commit, ...) of a control batch."""
    length, p = _varint(body, rpos, rend, "control record")
    p += 1  # attributes
    _, p = _varint(body, p, rend, "control record", 10)
    _, p = _varint(body, p, rend, "control record")
    key_len, p = _varint(body, p, rend, "control record")
    if key_len < 4:
        raise CorruptRecordError("control record key shorter than 4 bytes", offset=p)
    _take(body, p, key_len, rend, "control record key")
    return struct.unpack_from(">hh", body, p)[1], p


def _record_v2(body: Any, p: int, rend: int, out: _Out, base_offset: int, base_ts: int,
               max_ts: int, ts_type: int, start_offset: int) -> int:
    start = p
    length, p = _varint(body, p, rend, "record length")
    if length < 0:
        raise CorruptRecordError(f"negative record length {length}", offset=start)
    record_end = _take(body, p, length, rend, "record")
    p = _take(body, p, 1, record_end, "record attributes")
    ts_delta, p = _varint(body, p, record_end, "timestamp delta", 10)
    offset_delta, p = _varint(body, p, record_end, "offset delta")
    key_len, p = _varint(body, p, record_end, "key length")
    key = None
    if key_len >= 0:
        key, p = (body, p, key_len), _take(body, p, key_len, record_end, "key")
    elif key_len != -1:
        raise CorruptRecordError(f"invalid key length {key_len}", offset=p)
    value_len, p = _varint(body, p, record_end, "value length")
    value = None
    if value_len >= 0:
        value, p = (body, p, value_len), _take(body, p, value_len, record_end, "value")
    elif value_len != -1:
        raise CorruptRecordError(f"invalid value length {value_len}", offset=p)
    header_count, p = _varint(body, p, record_end, "header count")
    if header_count < 0:
        raise CorruptRecordError(f"invalid header count {header_count}", offset=p)
    headers = []
    for _ in range(header_count):
        hk_len, p = _varint(body, p, record_end, "header key length")
        if hk_len < 0:
            raise CorruptRecordError(f"invalid header key length {hk_len}", offset=p)
        hk_start, p = p, _take(body, p, hk_len, record_end, "header key")
        hv_len, p = _varint(body, p, record_end, "header value length")
        hv = None
        if hv_len >= 0:
            hv_start, p = p, _take(body, p, hv_len, record_end, "header value")
            hv = bytes(body[hv_start:p])
        elif hv_len != -1:
            raise CorruptRecordError(f"invalid header value length {hv_len}", offset=p)
        headers.append((bytes(body[hk_start:hk_start + hk_len]), hv))
    if p != record_end:
        raise CorruptRecordError(f"record length {length} does not match its contents "
                                 f"({p - start} bytes read)", offset=start)
    offset = base_offset + offset_delta
    if not _in_int64(offset):
        raise CorruptRecordError(f"base offset {base_offset} + offset delta {offset_delta} "
                                 "overflows int64", offset=start)
    if offset >= start_offset:
        _append(out, offset, max_ts if ts_type else _wrap64(base_ts + ts_delta), ts_type, key,
                value, headers)
    return p


def _append(out: _Out, offset: int, ts: int, ts_type: int, key: Any, value: Any,
            headers: list[tuple[bytes, bytes | None]]) -> None:
    out.offset.append(offset)
    out.timestamp.append(ts)
    out.timestamp_type.append(ts_type)
    out.key.append(key)
    out.value.append(value)
    out.header_counts.append(len(headers))
    for hk, hv in headers:
        out.header_keys.append(hk)
        out.header_values.append(hv)


def _legacy_message(data: Any, pos: int, stop: int, out: _Out, start_offset: int,
                    check_crc: bool, max_decompressed: int, wrapper: tuple[int, int] | None = None
                    ) -> int:
    """One magic 0/1 message at ``data[pos:stop]``; returns the last offset it covers."""
    offset, size, crc, magic, attributes = struct.unpack_from(">qiIbb", data, pos)
    if check_crc:
        actual = zlib.crc32(data[pos + 16:stop])
        if actual != crc:
            raise CrcError(f"message at offset {offset}: CRC-32 mismatch (stored 0x{crc:08x}, "
                           f"computed 0x{actual:08x})", expected=crc, actual=actual, offset=pos)
    p = pos + 18
    timestamp, ts_type = -1, -1
    if magic == 1:
        if stop - p < 8 + 8:
            raise CorruptRecordError("magic 1 message too short", offset=pos)
        timestamp = struct.unpack_from(">q", data, p)[0]
        ts_type = 1 if attributes & ATTR_TIMESTAMP_TYPE else 0
        p += 8
    key, p = _legacy_bytes(data, p, stop, "key")
    value, p = _legacy_bytes(data, p, stop, "value")
    if p != stop:
        raise CorruptRecordError(f"message size {size} does not match its contents", offset=pos)
    codec = attributes & ATTR_CODEC
    if codec == 0:
        if wrapper is not None:  # inner message of a compressed wrapper
            return offset
        if offset >= start_offset:
            _append(out, offset, timestamp, ts_type, key, value, [])
        return offset
    if wrapper is not None:
        raise CorruptRecordError("compressed message nested in a compressed message", offset=pos)
    if value is None:
        raise CorruptRecordError("compressed message without a value", offset=pos)
    inner = memoryview(compression.decompress_buffer(
        codec, _slice(value), magic=magic, max_size=max_decompressed - out.decompressed,
        offset=pos, total=max_decompressed))
    out.decompressed += len(inner)
    if out.binary_view:
        _views_fit(len(inner))
    return _legacy_inner(inner, offset, magic, timestamp, ts_type, out, start_offset, check_crc)


def _legacy_inner(inner: memoryview, wrapper_offset: int, magic: int, wrapper_ts: int,
                  wrapper_ts_type: int, out: _Out, start_offset: int, check_crc: bool) -> int:
    messages = []
    pos, end = 0, len(inner)
    while end - pos >= LOG_OVERHEAD:
        _, size = struct.unpack_from(">qi", inner, pos)
        if size < LEGACY_MIN_SIZE or end - pos - LOG_OVERHEAD < size:
            raise CorruptRecordError("truncated message inside a compressed wrapper",
                                     offset=pos)
        stop = pos + LOG_OVERHEAD + size
        if inner[pos + 16] != magic:
            raise CorruptRecordError(f"inner message magic {inner[pos + 16]} differs from the "
                                     f"wrapper's {magic}", offset=pos + 16)
        _legacy_message(inner, pos, stop, out, 0, check_crc, 0, wrapper=(0, 0))
        messages.append((pos, stop))
        pos = stop
    if pos != end:
        raise CorruptRecordError("trailing bytes inside a compressed wrapper", offset=pos)
    if not messages:
        return wrapper_offset
    last_relative = struct.unpack_from(">q", inner, messages[-1][0])[0]
    # magic 1: inner offsets are relative, the wrapper carries the last one's absolute
    # offset (a wrapper offset of 0, as some librdkafka versions wrote, means base 0).
    base = 0 if magic == 0 or wrapper_offset == 0 else wrapper_offset - last_relative
    if not _in_int64(base):
        raise CorruptRecordError(f"wrapper offset {wrapper_offset} - inner offset "
                                 f"{last_relative} overflows int64", offset=messages[-1][0])
    for mpos, stop in messages:
        rel, _, _, _, attributes = struct.unpack_from(">qiIbb", inner, mpos)
        p = mpos + 18
        ts, ts_type = -1, -1
        if magic == 1:
            ts = struct.unpack_from(">q", inner, p)[0]
            ts_type = wrapper_ts_type
            if wrapper_ts_type == 1:
                ts = wrapper_ts  # LogAppendTime: the wrapper's time for every message
            p += 8
        key, p = _legacy_bytes(inner, p, stop, "key")
        value, p = _legacy_bytes(inner, p, stop, "value")
        offset = base + rel
        if not _in_int64(offset):
            raise CorruptRecordError(f"base offset {base} + inner offset {rel} overflows int64",
                                     offset=mpos)
        if offset >= start_offset:
            _append(out, offset, ts, ts_type, key, value, [])
    return max(wrapper_offset, base + last_relative)


def _legacy_bytes(data: Any, p: int, stop: int, what: str) -> tuple[Any, int]:
    if stop - p < 4:
        raise CorruptRecordError(f"message {what} length runs past the message", offset=p)
    n = struct.unpack_from(">i", data, p)[0]
    p += 4
    if n == -1:
        return None, p
    return (data, p, n), _take(data, p, n, stop, f"message {what}")


def _slice(ref: tuple[Any, int, int]) -> memoryview:
    buf, start, n = ref
    return memoryview(buf)[start:start + n]


def _columns(out: _Out, next_offset: int) -> RecordColumns:
    n = len(out.offset)
    return RecordColumns(
        np.array(out.offset, np.int64).reshape(n),
        np.array(out.timestamp, np.int64).reshape(n),
        np.array(out.timestamp_type, np.int32).reshape(n),
        _binary(out, out.key), _binary(out, out.value),
        HeaderColumn(np.concatenate([[0], np.cumsum(out.header_counts, dtype=np.int64)])
                     .astype(np.int32),
                     _plain([(k, 0, len(k)) for k in out.header_keys]),
                     _plain([None if v is None else (v, 0, len(v)) for v in out.header_values])),
        next_offset,
    )


def _binary(out: _Out, refs: list[Any]) -> BinaryColumn | BinaryViewColumn:
    return _views(out, refs) if out.binary_view else _plain(refs)


def _validity(refs: list[Any]) -> tuple[np.ndarray | None, int]:
    nulls = sum(r is None for r in refs)
    if not nulls:
        return None, 0
    return np.packbits(np.array([r is not None for r in refs], bool), bitorder="little"), nulls


def _plain(refs: list[Any]) -> BinaryColumn:
    lengths = np.array([0 if r is None else r[2] for r in refs], np.int64)
    total = int(lengths.sum())
    offsets = np.zeros(len(refs) + 1, np.int64 if total > 0x7FFFFFFF else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = np.frombuffer(b"".join(bytes(_slice(r)) for r in refs if r is not None),
                         np.uint8).copy()
    validity, nulls = _validity(refs)
    return BinaryColumn(offsets, data, validity, nulls)


def _views(out: _Out, refs: list[Any]) -> BinaryViewColumn:
    views = np.zeros(16 * len(refs), np.uint8)
    for i, r in enumerate(refs):
        if r is None:
            continue
        buf, start, n = r
        raw = bytes(memoryview(buf)[start:start + n])
        if n <= 12:
            struct.pack_into("<i12s", cast(Any, views), 16 * i, n, raw)
        else:
            struct.pack_into("<i4sii", cast(Any, views), 16 * i, n, raw[:4],
                             out.buffer_index(buf), start)
    validity, nulls = _validity(refs)
    return BinaryViewColumn(views, out.buffers, validity, nulls)
