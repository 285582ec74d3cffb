# Record sets -> columns: the driver (included by _codec.pyx).
#
# decode_records walks the record sets of a buffer: for each magic 2 batch it checks the
# header and the CRC, decompresses (the only calls made with the GIL, with read_committed's
# bookkeeping), and hands the records to the nogil loop (_record_loop.pxi); magic 0/1 messages
# are decoded here. Columns grow in _growbuf.pxi's buffers.
#
# Record batch layout: see _record_loop.pxi. Message (magic 0/1), PROTOCOL_NOTES §3.2:
#   offset i64 | size i32 | crc u32 (CRC-32 of magic..end) | magic i8 | attrs i8 |
#   [timestamp i64] | key bytes(i32) | value bytes(i32); a compressed message's value is a
#   nested message set.

from libc.string cimport memset
from libc.stdint cimport INT64_MAX, int8_t, int16_t, int32_t, int64_t, uint32_t

import numpy as _np
from kproto.errors import (
    ConfigError as _ConfigError, CorruptRecordError as _CorruptRecordError, CrcError as _CrcError,
    DecompressionLimitError as _DecompressionLimitError,
)
from kproto import compression as _compression
from kproto.columns import HeaderColumn as _HeaderColumn, RecordColumns as _RecordColumns


# ---------------------------------------------------------------- the entry point

def decode_records(buf, *, int64_t start_offset=0, bint check_crc=True,
                   aborted_transactions=None, Py_ssize_t max_decompressed=-1,
                   bint binary_view=False, Py_ssize_t max_batch_bytes=0x7FFFFFFF,
                   bint stop_at_limit=False):
    """Decode a sequence of record sets into a RecordColumns (see kproto.records.decode)."""
    cdef const unsigned char[::1] view = _bytes_view(buf)
    cdef const unsigned char *base = &view[0] if view.shape[0] else NOTHING
    cdef Py_ssize_t end = view.shape[0]
    cdef Py_ssize_t pos = 0, stop, rpos, rstop
    cdef int64_t base_offset, last_offset, next_offset = start_offset
    cdef int64_t base_ts, max_ts, pid
    cdef int32_t size, count, ts_type, last_delta
    cdef int16_t attributes
    cdef int8_t magic
    cdef uint32_t stored, actual
    cdef int codec, rc
    cdef int32_t buf_index = 0
    cdef const unsigned char[::1] inner_view
    cdef const unsigned char *body
    cdef Decoder d
    if binary_view and end > 0x7FFFFFFF:
        _views_too_big(end)
    memset(&d, 0, sizeof(Decoder))
    d.start_offset = start_offset
    d.views = binary_view
    buffers = [buf] if binary_view else None
    if max_decompressed < 0:
        max_decompressed = _compression.DEFAULT_MAX_DECOMPRESSED
    cdef _Aborted aborted = None
    if aborted_transactions is not None:
        aborted = _Aborted(aborted_transactions)
    try:
        # Reserve room from the batch headers (virtual memory is cheap; regrowing is not),
        # the largest first: each takes the best of the recycled blocks left.
        rows_hint = _rows_hint(base, end)
        bin_init(&d.value, rows_hint, end, binary_view)
        bin_init(&d.key, rows_hint, end // 4, binary_view)
        gb_hint(&d.offset, 8 * rows_hint)
        gb_hint(&d.timestamp, 8 * rows_hint)
        gb_hint(&d.ts_type, 4 * rows_hint)
        gb_hint(&d.header_offsets, 4 * (rows_hint + 1))
        bin_init(&d.hkey, 0, 0, False)
        bin_init(&d.hvalue, 0, 0, False)
        gb_put_i32(&d.header_offsets, 0)
        while end - pos >= 12:
            base_offset = kp_load_i64(base + pos)
            size = kp_load_i32(base + pos + 8)
            if size < 14:
                raise _CorruptRecordError(f"record set size {size} is below the minimum",
                                          offset=pos)
            if size > max_batch_bytes:
                raise _CorruptRecordError(
                    f"record set of {size} bytes exceeds the {max_batch_bytes}-byte limit",
                    offset=pos)
            if end - pos - 12 < size:
                break  # truncated trailing batch: normal at the end of a fetch
            stop = pos + 12 + size
            magic = <int8_t> base[pos + 16]
            if magic == 2:
                if size < 49:
                    raise _CorruptRecordError("record batch shorter than its 61-byte header",
                                              offset=pos)
                stored = <uint32_t> kp_load_i32(base + pos + 17)
                attributes = kp_load_i16(base + pos + 21)
                last_delta = kp_load_i32(base + pos + 23)
                base_ts = kp_load_i64(base + pos + 27)
                max_ts = kp_load_i64(base + pos + 35)
                pid = kp_load_i64(base + pos + 43)
                count = kp_load_i32(base + pos + 57)
                if check_crc:
                    with nogil:
                        actual = crc32c_update(0, base + pos + 21, <size_t> (stop - pos - 21))
                    if actual != stored:
                        raise _CrcError(
                            f"record batch at offset {base_offset}: CRC-32C mismatch "
                            f"(stored 0x{stored:08x}, computed 0x{actual:08x})",
                            expected=stored, actual=actual, offset=pos)
                if count < 0:
                    raise _CorruptRecordError(f"negative record count {count}", offset=pos + 57)
                if kp_add_overflows(base_offset, last_delta, &last_offset):
                    raise _CorruptRecordError(
                        f"record batch at offset {base_offset}: lastOffsetDelta {last_delta} "
                        "overflows int64", offset=pos + 23)
                codec = attributes & 0x07
                ts_type = 1 if attributes & 0x08 else 0
                if codec:
                    try:
                        inner = _compression.decompress_buffer(
                            codec, view[pos + 61:stop], magic=2,
                            max_size=max_decompressed - d.decompressed, offset=pos,
                            total=max_decompressed)
                    except _DecompressionLimitError:
                        # the batches before it are the answer and the next fetch starts
                        # at it - if they reach the start (else it would ask for it again)
                        if stop_at_limit and next_offset > start_offset:
                            break
                        raise
                    inner_view = inner
                    d.decompressed += inner_view.shape[0]
                    body = &inner_view[0] if inner_view.shape[0] else NOTHING
                    rpos, rstop = 0, inner_view.shape[0]
                    if binary_view:
                        if inner_view.shape[0] > 0x7FFFFFFF:
                            _views_too_big(inner_view.shape[0])
                        buffers.append(inner)
                        buf_index = len(buffers) - 1
                else:
                    inner = None
                    body = base
                    rpos, rstop = pos + 61, stop
                    buf_index = 0
                d.prefetch, d.prefetch_end = base + stop, base + stop
                if end - stop >= 12:
                    d.prefetch_end = base + min(end, stop + 12 + max(0, kp_load_i32(base + stop + 8)))
                if attributes & 0x20:  # control batch: never returned
                    if aborted is not None and count and pid >= 0:
                        aborted.on_control(pid, last_offset, body, rpos, rstop)
                elif aborted is None or not aborted.skip(pid, last_offset, attributes & 0x10):
                    with nogil:
                        rc = decode_v2_records(&d, body, rpos, rstop, base_offset, base_ts,
                                               max_ts, ts_type, count, buf_index)
                    if rc == -2:
                        raise decode_error(&d, pos, base_offset, codec != 0)
                inner = None
            elif magic == 0 or magic == 1:
                try:
                    last_offset = _legacy_message(&d, view, base, pos, stop, check_crc,
                                                  max_decompressed, buffers)
                except _DecompressionLimitError:
                    if stop_at_limit and next_offset > start_offset:
                        break       # (raised before any of its messages was added)
                    raise
            else:
                raise _CorruptRecordError(f"unknown magic byte {magic}", offset=pos + 16)
            if last_offset == INT64_MAX:
                raise _CorruptRecordError(f"record set ends at offset {last_offset}: no next "
                                          "offset fits in int64", offset=pos)
            if last_offset >= next_offset:
                next_offset = last_offset + 1
            pos = stop
        return _RecordColumns(
            gb_to_numpy(&d.offset, _np.int64), gb_to_numpy(&d.timestamp, _np.int64),
            gb_to_numpy(&d.ts_type, _np.int32),
            bin_to_column(&d.key, binary_view, buffers),
            bin_to_column(&d.value, binary_view, buffers),
            _HeaderColumn(gb_to_numpy(&d.header_offsets, _np.int32),
                          bin_to_column(&d.hkey, False, None),
                          bin_to_column(&d.hvalue, False, None)),
            next_offset)
    finally:
        gb_free(&d.offset); gb_free(&d.timestamp); gb_free(&d.ts_type)
        gb_free(&d.header_offsets)
        bin_free(&d.key); bin_free(&d.value); bin_free(&d.hkey); bin_free(&d.hvalue)


cdef int _views_too_big(Py_ssize_t size) except -1:
    raise _ConfigError(f"binary_view=True needs buffers under 2 GiB (Arrow views hold int32 "
                       f"offsets), not {size} bytes: decode in parts, or with binary_view=False")


cdef Py_ssize_t _rows_hint(const unsigned char *base, Py_ssize_t end) noexcept nogil:
    """Records claimed by the (magic 2) batch headers, capped by what the bytes can hold."""
    cdef Py_ssize_t pos = 0, rows = 0
    cdef int32_t size, count
    while end - pos >= 61:
        size = kp_load_i32(base + pos + 8)
        if size < 14 or end - pos - 12 < size:
            break
        if base[pos + 16] == 2 and size >= 49:
            count = kp_load_i32(base + pos + 57)
            if count > 0:
                rows += count if count < size else size
        pos += 12 + size
    return rows if rows < (1 << 26) else (1 << 26)


# ---------------------------------------------------------------- magic 0/1 messages

cdef int64_t _legacy_message(Decoder *d, object src, const unsigned char *base,
                             Py_ssize_t pos, Py_ssize_t stop, bint check_crc,
                             Py_ssize_t max_decompressed, list buffers) except? -2:
    """One magic 0/1 message; returns the last offset it covers."""
    cdef int64_t offset = kp_load_i64(base + pos)
    cdef uint32_t stored = <uint32_t> kp_load_i32(base + pos + 12)
    cdef int8_t magic = <int8_t> base[pos + 16]
    cdef int8_t attributes = <int8_t> base[pos + 17]
    cdef Py_ssize_t p = pos + 18, key_pos, value_pos
    cdef int64_t ts = -1
    cdef int32_t ts_type = -1, key_len, value_len
    cdef uint32_t actual
    if check_crc:
        actual = crc32_update(0, base + pos + 16, <size_t> (stop - pos - 16))
        if actual != stored:
            raise _CrcError(f"message at offset {offset}: CRC-32 mismatch (stored "
                            f"0x{stored:08x}, computed 0x{actual:08x})",
                            expected=stored, actual=actual, offset=pos)
    if magic == 1:
        if stop - p < 16:
            raise _CorruptRecordError("magic 1 message too short", offset=pos)
        ts = kp_load_i64(base + p)
        ts_type = 1 if attributes & 0x08 else 0
        p += 8
    key_pos, key_len, p = _legacy_bytes(base, p, stop, "key")
    value_pos, value_len, p = _legacy_bytes(base, p, stop, "value")
    if p != stop:
        raise _CorruptRecordError("message size does not match its contents", offset=pos)
    codec = attributes & 0x07
    if codec == 0:
        if offset >= d.start_offset:
            append_legacy(d, base, offset, ts, ts_type, key_pos, key_len, value_pos, value_len,
                          0)
        return offset
    if value_len < 0:
        raise _CorruptRecordError("compressed message without a value", offset=pos)
    inner = _compression.decompress_buffer(codec, src[value_pos:value_pos + value_len],
                                           magic=magic, max_size=max_decompressed - d.decompressed,
                                           offset=pos, total=max_decompressed)
    return _legacy_inner(d, inner, offset, magic, ts, ts_type, check_crc, buffers)


cdef int append_legacy(Decoder *d, const unsigned char *base, int64_t offset, int64_t ts,
                       int32_t ts_type, Py_ssize_t key_pos, int32_t key_len,
                       Py_ssize_t value_pos, int32_t value_len, int32_t buf_index) except -1:
    gb_put_i64(&d.offset, offset)
    gb_put_i64(&d.timestamp, ts)
    gb_put_i32(&d.ts_type, ts_type)
    bin_append(&d.key, base + key_pos, key_len, d.views, buf_index, key_pos)
    bin_append(&d.value, base + value_pos, value_len, d.views, buf_index, value_pos)
    gb_put_i32(&d.header_offsets, d.headers_total)
    return 0


cdef tuple _legacy_bytes(const unsigned char *base, Py_ssize_t p, Py_ssize_t stop, str what):
    cdef int32_t n
    if stop - p < 4:
        raise _CorruptRecordError(f"message {what} length runs past the message", offset=p)
    n = kp_load_i32(base + p)
    p += 4
    if n == -1:
        return p, -1, p
    if n < 0 or n > stop - p:
        raise _CorruptRecordError(f"message {what} of {n} bytes runs past the message",
                                  offset=p)
    return p, n, p + n


cdef int64_t _legacy_inner(Decoder *d, object inner, int64_t wrapper_offset, int8_t magic,
                           int64_t wrapper_ts, int32_t wrapper_ts_type, bint check_crc,
                           list buffers) except? -2:
    cdef const unsigned char[::1] view = inner
    cdef const unsigned char *base = &view[0] if view.shape[0] else NOTHING
    cdef Py_ssize_t pos = 0, end = view.shape[0], stop, p, key_pos, value_pos
    cdef int32_t size, key_len, value_len, ts_type
    cdef int64_t rel, last_rel = 0, ts, base_offset, offset
    cdef uint32_t stored
    cdef int32_t buf_index = 0
    d.decompressed += end
    if d.views and end > 0x7FFFFFFF:
        _views_too_big(end)
    messages = []
    while end - pos >= 12:
        size = kp_load_i32(base + pos + 8)
        if size < 14 or end - pos - 12 < size:
            raise _CorruptRecordError("truncated message inside a compressed wrapper",
                                      offset=pos)
        stop = pos + 12 + size
        if <int8_t> base[pos + 16] != magic:
            raise _CorruptRecordError(f"inner message magic {base[pos + 16]} differs from the "
                                      f"wrapper's {magic}", offset=pos + 16)
        if base[pos + 17] & 0x07:
            raise _CorruptRecordError("compressed message nested in a compressed message",
                                      offset=pos)
        if check_crc:
            stored = <uint32_t> kp_load_i32(base + pos + 12)
            if crc32_update(0, base + pos + 16, <size_t> (stop - pos - 16)) != stored:
                raise _CrcError(f"message inside the wrapper at offset {wrapper_offset}: "
                                "CRC-32 mismatch", offset=pos)
        messages.append((pos, stop))
        last_rel = kp_load_i64(base + pos)
        pos = stop
    if pos != end:
        raise _CorruptRecordError("trailing bytes inside a compressed wrapper", offset=pos)
    if not messages:
        return wrapper_offset
    # magic 1: inner offsets are relative; the wrapper holds the last one's absolute offset
    # (a wrapper offset of 0, as some librdkafka versions wrote, means base 0).
    if magic == 0 or wrapper_offset == 0:
        base_offset = 0
    elif kp_sub_overflows(wrapper_offset, last_rel, &base_offset):
        raise _CorruptRecordError(f"wrapper offset {wrapper_offset} - inner offset {last_rel} "
                                  "overflows int64", offset=messages[len(messages) - 1][0])
    if d.views:
        buffers.append(inner)
        buf_index = len(buffers) - 1
    for pos, stop in messages:
        rel = kp_load_i64(base + pos)
        p = pos + 18
        ts, ts_type = -1, -1
        if magic == 1:
            if stop - p < 16:
                raise _CorruptRecordError("magic 1 message too short", offset=pos)
            ts = wrapper_ts if wrapper_ts_type == 1 else kp_load_i64(base + p)
            ts_type = wrapper_ts_type
            p += 8
        key_pos, key_len, p = _legacy_bytes(base, p, stop, "key")
        value_pos, value_len, p = _legacy_bytes(base, p, stop, "value")
        if p != stop:
            raise _CorruptRecordError("message size does not match its contents", offset=pos)
        if kp_add_overflows(base_offset, rel, &offset):
            raise _CorruptRecordError(f"base offset {base_offset} + inner offset {rel} "
                                      "overflows int64", offset=pos)
        if offset >= d.start_offset:
            append_legacy(d, base, offset, ts, ts_type, key_pos, key_len, value_pos,
                          value_len, buf_index)
    return max(wrapper_offset, base_offset + last_rel)


# ---------------------------------------------------------------- read_committed

cdef class _Aborted:
    """read_committed bookkeeping (PROTOCOL_NOTES §3.3); touched only for transactional data."""
    cdef list pending    # (first_offset, producer_id), sorted descending: pop() takes the least
    cdef set producers

    def __init__(self, txns):
        self.pending = sorted(((int(first), int(pid)) for pid, first in txns), reverse=True)
        self.producers = set()

    cdef bint skip(self, int64_t pid, int64_t last_offset, bint transactional):
        if pid < 0:
            return False
        while self.pending and self.pending[len(self.pending) - 1][0] <= last_offset:
            self.producers.add(self.pending.pop()[1])
        return transactional and pid in self.producers

    cdef void on_control(self, int64_t pid, int64_t last_offset, const unsigned char *body,
                         Py_ssize_t p, Py_ssize_t stop) except *:
        cdef Decoder scratch
        cdef int64_t length, skip, key_len
        cdef const unsigned char *q = body + p
        cdef const unsigned char *end = body + stop
        memset(&scratch, 0, sizeof(Decoder))
        if (read_varint(&scratch, &q, end, &length, 5, body) < 0 or
                take(&scratch, &q, end, 1, "control record", body) < 0 or
                read_varint(&scratch, &q, end, &skip, 10, body) < 0 or
                read_varint(&scratch, &q, end, &skip, 5, body) < 0 or
                read_varint(&scratch, &q, end, &key_len, 5, body) < 0):
            raise _CorruptRecordError("malformed control record", offset=p)
        if key_len < 4 or key_len > end - q:
            raise _CorruptRecordError("control record key shorter than 4 bytes", offset=p)
        self.skip(pid, last_offset, False)  # consume transactions begun up to this batch
        if kp_load_i16(q + 2) == 0:  # ABORT marker: this producer's transaction is over
            self.producers.discard(pid)
