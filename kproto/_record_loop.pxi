# The record loop: the records of one magic 2 batch -> the decoder's columns, without the GIL
# (included by _codec.pyx; _records.pxi drives it, batch by batch).
#
# Record batch (magic 2), PROTOCOL_NOTES §3.1:
#   baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 (CRC-32C
#   of attributes..end) | attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 |
#   maxTimestamp i64 | producerId i64 | producerEpoch i16 | baseSequence i32 | count i32 |
#   records: [length varint | attrs i8 | tsDelta varlong | offsetDelta varint | keyLen varint |
#             key | valueLen varint | value | headerCount varint | (hkLen, hk, hvLen, hv)*]
#
# One pass, no Python object per record. The loop cannot raise: a malformed record sets an
# error code and position in the Decoder and returns -2; one cold function (decode_error) turns
# them into CorruptRecordError. So it keeps its own inline varint reader instead of the
# raising Cursor of _codec.pyx: one-byte varints (almost all of them) cost no call.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from kproto.errors import CorruptRecordError as _CorruptRecordError

cdef extern from *:
    """
    /* offsets: int64 sums that overflow are corrupt data, never undefined behaviour */
    static inline int kp_add_overflows(int64_t a, int64_t b, int64_t *out) {
        return __builtin_add_overflow(a, b, out); }
    static inline int kp_sub_overflows(int64_t a, int64_t b, int64_t *out) {
        return __builtin_sub_overflow(a, b, out); }
    /* timestamps wrap around, as Java's long arithmetic does */
    static inline int64_t kp_wrapping_add(int64_t a, int64_t b) {
        return (int64_t)((uint64_t)a + (uint64_t)b); }
    """
    bint kp_add_overflows(int64_t a, int64_t b, int64_t *out) nogil
    bint kp_sub_overflows(int64_t a, int64_t b, int64_t *out) nogil
    int64_t kp_wrapping_add(int64_t a, int64_t b) nogil


# ---------------------------------------------------------------- decoder state

cdef enum DecodeErr:
    ERR_NONE = 0
    ERR_VARINT_TRUNCATED
    ERR_VARINT_LONG
    ERR_VARINT_RANGE
    ERR_RECORD_PAST_END
    ERR_FIELD_PAST_RECORD
    ERR_NEGATIVE_LENGTH
    ERR_RECORD_LENGTH_MISMATCH
    ERR_TRAILING_RECORD_BYTES
    ERR_TOO_MANY_ROWS
    ERR_OFFSET_OVERFLOW


cdef struct Decoder:
    GrowBuf offset
    GrowBuf timestamp
    GrowBuf ts_type
    GrowBuf header_offsets   # int32 list offsets (rows + 1)
    BinOut key
    BinOut value
    BinOut hkey
    BinOut hvalue
    int64_t start_offset
    Py_ssize_t decompressed  # bytes decompressed so far: all batches share max_decompressed
    int32_t headers_total
    bint views
    int err
    Py_ssize_t err_pos       # position within the current source buffer
    const char *err_what


# ---------------------------------------------------------------- varints within a record

cdef inline int read_varint(Decoder *d, const unsigned char **pp, const unsigned char *end,
                            int64_t *out, int max_bytes, const unsigned char *base) noexcept nogil:
    """Zigzag varint of at most ``max_bytes`` bytes (5: int32, 10: int64) before ``end``.
    Returns -1 with ``d.err`` set on malformed input (no Python exception)."""
    cdef const unsigned char *p = pp[0]
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef int i = 0
    cdef uint8_t b
    while True:
        if p >= end:
            d.err, d.err_pos, d.err_what = ERR_VARINT_TRUNCATED, pp[0] - base, "varint"
            return -1
        b = p[0]
        p += 1
        result |= (<uint64_t> (b & 0x7F)) << shift
        i += 1
        if not (b & 0x80):
            break
        shift += 7
        if i >= max_bytes:
            d.err, d.err_pos, d.err_what = ERR_VARINT_LONG, pp[0] - base, "varint"
            return -1
    out[0] = <int64_t> ((result >> 1) ^ (-(<int64_t> (result & 1))))
    if max_bytes == 5 and (out[0] < -2147483648 or out[0] > 2147483647):
        d.err, d.err_pos, d.err_what = ERR_VARINT_RANGE, pp[0] - base, "varint"
        return -1
    pp[0] = p
    return 0


cdef inline int read_varint_fast(Decoder *d, const unsigned char **pp,
                                 const unsigned char *end, int64_t *out, int max_bytes,
                                 const unsigned char *base) noexcept nogil:
    """One-byte varints (almost all of them in records) inline; the rest via read_varint."""
    cdef const unsigned char *p = pp[0]
    cdef uint8_t b
    if p < end:
        b = p[0]
        if b < 0x80:
            out[0] = <int64_t> ((b >> 1) ^ (-(b & 1)))
            pp[0] = p + 1
            return 0
    return read_varint(d, pp, end, out, max_bytes, base)


cdef inline void bin_append_reserved(BinOut *o, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """Copy-mode append of a non-null value into room reserved for the batch (no checks)."""
    if n > 0:
        memcpy(o.data.data + o.data.len, p, <size_t> n)
        o.data.len += n
    (<int32_t *> (o.offsets.data + o.offsets.len))[0] = <int32_t> o.data.len
    o.offsets.len += 4
    o.rows += 1


cdef int reserve_batch(Decoder *d, Py_ssize_t rows, Py_ssize_t nbytes) except -1 nogil:
    """Room for ``rows`` records whose keys and values total at most ``nbytes``."""
    gb_reserve(&d.offset, 8 * rows)
    gb_reserve(&d.timestamp, 8 * rows)
    gb_reserve(&d.ts_type, 4 * rows)
    gb_reserve(&d.header_offsets, 4 * rows)
    if d.views:
        gb_reserve(&d.key.views, 16 * rows)
        gb_reserve(&d.value.views, 16 * rows)
    else:
        gb_reserve(&d.key.offsets, 8 * rows)
        gb_reserve(&d.key.data, nbytes)
        gb_reserve(&d.value.offsets, 8 * rows)
        gb_reserve(&d.value.data, nbytes)
    return 0


cdef inline int take(Decoder *d, const unsigned char **pp, const unsigned char *end, int64_t n,
                     const char *what, const unsigned char *base) noexcept nogil:
    if n < 0:
        d.err, d.err_pos, d.err_what = ERR_NEGATIVE_LENGTH, pp[0] - base, what
        return -1
    if n > end - pp[0]:
        d.err, d.err_pos, d.err_what = ERR_FIELD_PAST_RECORD, pp[0] - base, what
        return -1
    pp[0] += n
    return 0


# ---------------------------------------------------------------- magic 2 records

cdef int decode_v2_records(Decoder *d, const unsigned char *base, Py_ssize_t start,
                           Py_ssize_t stop, int64_t base_offset, int64_t base_ts,
                           int64_t max_ts, int32_t ts_type, int32_t count,
                           int32_t buf_index) except -1 nogil:
    """Append the ``count`` records in ``base[start:stop]``; they must fill it exactly.
    Returns -2 with ``d.err`` set on malformed input; -1 means a Python exception."""
    cdef const unsigned char *p = base + start
    cdef const unsigned char *end = base + stop
    cdef const unsigned char *rec_end
    cdef const unsigned char *rec_start
    cdef const unsigned char *key
    cdef const unsigned char *value
    cdef const unsigned char *hk
    cdef const unsigned char *hv
    cdef int64_t length, ts_delta, offset_delta, key_len, value_len, header_count
    cdef int64_t hk_len, hv_len, offset
    cdef int32_t i, h
    cdef bint keep
    # A record takes at least 7 bytes, so this batch adds at most that many rows, and its
    # keys and values fit in its own length: reserve once, append unchecked below.
    cdef Py_ssize_t rows = (stop - start) // 7
    if count < rows:
        rows = count
    if reserve_batch(d, rows, stop - start) < 0:
        return -1
    for i in range(count):
        rec_start = p
        if read_varint_fast(d, &p, end, &length, 5, base) < 0:
            return -2
        if length < 0:
            d.err, d.err_pos, d.err_what = ERR_NEGATIVE_LENGTH, rec_start - base, "record"
            return -2
        if length > end - p:
            d.err, d.err_pos, d.err_what = ERR_RECORD_PAST_END, rec_start - base, "record"
            return -2
        rec_end = p + length
        if take(d, &p, rec_end, 1, "record attributes", base) < 0:
            return -2
        if read_varint_fast(d, &p, rec_end, &ts_delta, 10, base) < 0:
            return -2
        if read_varint_fast(d, &p, rec_end, &offset_delta, 5, base) < 0:
            return -2
        if read_varint_fast(d, &p, rec_end, &key_len, 5, base) < 0:
            return -2
        key = p
        if key_len >= 0:
            if take(d, &p, rec_end, key_len, "key", base) < 0:
                return -2
        elif key_len != -1:
            d.err, d.err_pos, d.err_what = ERR_NEGATIVE_LENGTH, p - base, "key"
            return -2
        if read_varint_fast(d, &p, rec_end, &value_len, 5, base) < 0:
            return -2
        value = p
        if value_len >= 0:
            if take(d, &p, rec_end, value_len, "value", base) < 0:
                return -2
        elif value_len != -1:
            d.err, d.err_pos, d.err_what = ERR_NEGATIVE_LENGTH, p - base, "value"
            return -2
        if read_varint_fast(d, &p, rec_end, &header_count, 5, base) < 0:
            return -2
        if header_count < 0 or header_count > rec_end - p:
            d.err, d.err_pos, d.err_what = ERR_NEGATIVE_LENGTH, p - base, "header count"
            return -2
        if kp_add_overflows(base_offset, offset_delta, &offset):
            d.err, d.err_pos, d.err_what = ERR_OFFSET_OVERFLOW, rec_start - base, "record"
            return -2
        keep = offset >= d.start_offset
        for h in range(<int32_t> header_count):
            if read_varint_fast(d, &p, rec_end, &hk_len, 5, base) < 0:
                return -2
            hk = p
            if take(d, &p, rec_end, hk_len, "header key", base) < 0:
                return -2
            if read_varint_fast(d, &p, rec_end, &hv_len, 5, base) < 0:
                return -2
            hv = p
            if hv_len >= 0:
                if take(d, &p, rec_end, hv_len, "header value", base) < 0:
                    return -2
            elif hv_len != -1:
                d.err, d.err_pos, d.err_what = ERR_NEGATIVE_LENGTH, p - base, "header value"
                return -2
            if keep:
                bin_append(&d.hkey, hk, hk_len, False, 0, 0)
                bin_append(&d.hvalue, hv, hv_len, False, 0, 0)
        if p != rec_end:
            d.err, d.err_pos, d.err_what = ERR_RECORD_LENGTH_MISMATCH, rec_start - base, "record"
            return -2
        if keep:
            if d.offset.len // 8 >= 0x7FFFFFFF:
                d.err, d.err_pos, d.err_what = ERR_TOO_MANY_ROWS, rec_start - base, "record"
                return -2
            (<int64_t *> (d.offset.data + d.offset.len))[0] = offset
            d.offset.len += 8
            (<int64_t *> (d.timestamp.data + d.timestamp.len))[0] = (
                max_ts if ts_type == 1 else kp_wrapping_add(base_ts, ts_delta))
            d.timestamp.len += 8
            (<int32_t *> (d.ts_type.data + d.ts_type.len))[0] = ts_type
            d.ts_type.len += 4
            d.headers_total += <int32_t> header_count
            (<int32_t *> (d.header_offsets.data + d.header_offsets.len))[0] = d.headers_total
            d.header_offsets.len += 4
            # common case: copy mode, no nulls so far, offsets staying 32-bit
            if (key_len >= 0 and not d.views and not d.key.validity.len
                    and d.key.data.len + (stop - start) <= 0x7FFFFFFF):
                bin_append_reserved(&d.key, key, key_len)
            else:
                bin_append(&d.key, key, key_len, d.views, buf_index, key - base)
            if (value_len >= 0 and not d.views and not d.value.validity.len
                    and d.value.data.len + (stop - start) <= 0x7FFFFFFF):
                bin_append_reserved(&d.value, value, value_len)
            else:
                bin_append(&d.value, value, value_len, d.views, buf_index, value - base)
    if p != end:
        d.err, d.err_pos, d.err_what = ERR_TRAILING_RECORD_BYTES, p - base, "batch"
        return -2
    return 0


# ---------------------------------------------------------------- errors (cold)

_ERR_TEXT = {
    ERR_VARINT_TRUNCATED: "truncated varint in {what}",
    ERR_VARINT_LONG: "over-long varint in {what}",
    ERR_VARINT_RANGE: "varint out of the int32 range in {what}",
    ERR_RECORD_PAST_END: "record runs past the end of its batch",
    ERR_FIELD_PAST_RECORD: "{what} runs past the end of its record",
    ERR_NEGATIVE_LENGTH: "invalid length for {what}",
    ERR_RECORD_LENGTH_MISMATCH: "record length does not match its contents",
    ERR_TRAILING_RECORD_BYTES: "bytes left over after the records of the batch",
    ERR_TOO_MANY_ROWS: "more than 2**31-1 records in one decode",
    ERR_OFFSET_OVERFLOW: "base offset + offset delta overflows int64",
}


cdef object decode_error(Decoder *d, Py_ssize_t batch_pos, int64_t base_offset, bint nested):
    what = (<bytes> d.err_what).decode() if d.err_what != NULL else "record"
    text = _ERR_TEXT.get(d.err, "malformed record").format(what=what)
    where = "decompressed records" if nested else "record set"
    return _CorruptRecordError(
        f"batch at offset {base_offset} (byte {batch_pos}): {text} "
        f"(byte {d.err_pos} of the {where})", offset=batch_pos)

