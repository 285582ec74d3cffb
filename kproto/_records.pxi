# Record sets -> columns: the hot loop of kproto (included by _codec.pyx).
#
# Record batch (magic 2), PROTOCOL_NOTES §3.1:
#   baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 (CRC-32C
#   of attributes..end) | attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 |
#   maxTimestamp i64 | producerId i64 | producerEpoch i16 | baseSequence i32 | count i32 |
#   records: [length varint | attrs i8 | tsDelta varlong | offsetDelta varint | keyLen varint |
#             key | valueLen varint | value | headerCount varint | (hkLen, hk, hvLen, hv)*]
# Message (magic 0/1), §3.2:
#   offset i64 | size i32 | crc u32 (CRC-32 of magic..end) | magic i8 | attrs i8 |
#   [timestamp i64] | key bytes(i32) | value bytes(i32); a compressed message's value is a
#   nested message set.
#
# One pass, no Python object per record: every record is appended to growable C buffers
# (realloc grows big blocks in place on Linux, so the peak stays near the final size), which
# become NumPy arrays without a copy at the end. The GIL is released for everything but the
# decompressor calls and read_committed bookkeeping. Errors inside nogil code record a code and
# a position in the decoder state; one cold function turns them into CorruptRecordError.

from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memset
from libc.stdint cimport (
    INT64_MAX, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t,
)
from cpython.buffer cimport PyBUF_WRITABLE, PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES

import numpy as _np
from kproto.errors import (
    ConfigError as _ConfigError, CorruptRecordError as _CorruptRecordError, CrcError as _CrcError,
)
from kproto import compression as _compression
from kproto.columns import (
    BinaryColumn as _BinaryColumn, BinaryViewColumn as _BinaryViewColumn,
    HeaderColumn as _HeaderColumn, RecordColumns as _RecordColumns,
)

cdef extern from *:
    """
    static inline int64_t kp_load_i64(const unsigned char *p) {
        uint64_t v; memcpy(&v, p, 8); return (int64_t)__builtin_bswap64(v); }
    static inline int32_t kp_load_i32(const unsigned char *p) {
        uint32_t v; memcpy(&v, p, 4); return (int32_t)__builtin_bswap32(v); }
    static inline int16_t kp_load_i16(const unsigned char *p) {
        uint16_t v; memcpy(&v, p, 2); return (int16_t)__builtin_bswap16(v); }
    /* offsets: int64 sums that overflow are corrupt data, never undefined behaviour */
    static inline int kp_add_overflows(int64_t a, int64_t b, int64_t *out) {
        return __builtin_add_overflow(a, b, out); }
    static inline int kp_sub_overflows(int64_t a, int64_t b, int64_t *out) {
        return __builtin_sub_overflow(a, b, out); }
    /* timestamps wrap around, as Java's long arithmetic does */
    static inline int64_t kp_wrapping_add(int64_t a, int64_t b) {
        return (int64_t)((uint64_t)a + (uint64_t)b); }
    """
    int64_t kp_load_i64(const unsigned char *p) nogil
    int32_t kp_load_i32(const unsigned char *p) nogil
    int16_t kp_load_i16(const unsigned char *p) nogil
    bint kp_add_overflows(int64_t a, int64_t b, int64_t *out) nogil
    bint kp_sub_overflows(int64_t a, int64_t b, int64_t *out) nogil
    int64_t kp_wrapping_add(int64_t a, int64_t b) nogil



cdef const unsigned char *NOTHING = <const unsigned char *> b""   # the data of empty inputs

# ---------------------------------------------------------------- growable output buffers

cdef struct GrowBuf:
    char *data
    Py_ssize_t len
    Py_ssize_t cap


cdef int gb_reserve(GrowBuf *b, Py_ssize_t extra) except -1 nogil:
    cdef Py_ssize_t need = b.len + extra
    cdef Py_ssize_t cap
    cdef char *p
    if need <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 4096
    while cap < need:
        cap *= 2
    # realloc, not fresh mappings: freed blocks are reused by the next decode without
    # page faults (measured: mmap/mremap-backed buffers decoded 40% slower in a loop)
    p = <char *> realloc(b.data, <size_t> cap)
    if p == NULL:
        with gil:
            raise MemoryError(f"cannot grow a decode buffer to {cap} bytes")
    b.data = p
    b.cap = cap
    return 0


cdef void gb_free(GrowBuf *b) noexcept nogil:
    free(b.data)
    b.data = NULL
    b.len = b.cap = 0


cdef inline int gb_put(GrowBuf *b, const void *src, Py_ssize_t n) except -1 nogil:
    if b.len + n > b.cap:
        gb_reserve(b, n)
    if n:
        memcpy(b.data + b.len, src, <size_t> n)
    b.len += n
    return 0


cdef inline int gb_put_i64(GrowBuf *b, int64_t v) except -1 nogil:
    if b.len + 8 > b.cap:
        gb_reserve(b, 8)
    (<int64_t *> (b.data + b.len))[0] = v
    b.len += 8
    return 0


cdef inline int gb_put_i32(GrowBuf *b, int32_t v) except -1 nogil:
    if b.len + 4 > b.cap:
        gb_reserve(b, 4)
    (<int32_t *> (b.data + b.len))[0] = v
    b.len += 4
    return 0


@cython.final
cdef class _OwnedBuffer:
    """Owns a decode buffer and exports it through the buffer protocol (read-write)."""
    cdef char *data
    cdef Py_ssize_t size
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __dealloc__(self):
        free(self.data)

    def __getbuffer__(self, Py_buffer *view, int flags):
        self.shape[0] = self.size
        self.strides[0] = 1
        view.buf = self.data
        view.obj = self
        view.len = self.size
        view.readonly = 0
        view.itemsize = 1
        view.format = NULL
        if flags & PyBUF_FORMAT:
            view.format = b"B"
        view.ndim = 1
        view.shape = self.shape if flags & PyBUF_ND else NULL
        view.strides = self.strides if flags & PyBUF_STRIDES else NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer *view):
        pass


cdef object gb_to_numpy(GrowBuf *b, object dtype):
    """Hand the block to NumPy (shrunk to its length); the GrowBuf is left empty."""
    cdef _OwnedBuffer owner = _OwnedBuffer.__new__(_OwnedBuffer)
    cdef char *p = b.data
    if b.len == 0:
        gb_free(b)
        p = <char *> malloc(1)
        if p == NULL:
            raise MemoryError()
    elif b.len < b.cap:
        p = <char *> realloc(b.data, <size_t> b.len)
        if p == NULL:
            p = b.data
    owner.data = p
    owner.size = b.len
    b.data = NULL
    b.len = b.cap = 0
    return _np.frombuffer(owner, dtype=dtype)


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


cdef struct BinOut:
    GrowBuf offsets      # end offsets: int32, or int64 once ``wide`` (data past 2 GiB)
    GrowBuf data
    GrowBuf validity     # Arrow bitmap, started at the first null
    GrowBuf views        # binary_view mode: 16 bytes a value
    Py_ssize_t rows
    Py_ssize_t nulls
    bint wide


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


cdef int bin_init(BinOut *o, Py_ssize_t rows, Py_ssize_t data, bint views) except -1:
    """Empty column with room for ``rows`` values and ``data`` bytes (a hint, not a limit)."""
    memset(o, 0, sizeof(BinOut))
    if views:
        gb_reserve(&o.views, 16 * rows)
    else:
        gb_reserve(&o.offsets, 4 * (rows + 1))
        gb_reserve(&o.data, data)
        gb_put_i32(&o.offsets, 0)
    return 0


cdef void bin_free(BinOut *o) noexcept nogil:
    gb_free(&o.offsets)
    gb_free(&o.data)
    gb_free(&o.validity)
    gb_free(&o.views)


cdef int bin_set_validity(BinOut *o, bint valid) except -1 nogil:
    """Slow path: keep the bitmap for row ``o.rows`` (created at the first null, all-valid
    before it)."""
    cdef Py_ssize_t row = o.rows
    cdef Py_ssize_t byte = row >> 3
    if not valid:
        o.nulls += 1
        if o.validity.len == 0:
            gb_reserve(&o.validity, byte + 1)
            memset(o.validity.data, 0xFF, <size_t> (byte + 1))
            o.validity.len = byte + 1
    while o.validity.len <= byte:
        if o.validity.len + 1 > o.validity.cap:
            gb_reserve(&o.validity, 1)
        o.validity.data[o.validity.len] = <char> 0
        o.validity.len += 1
    if valid:
        o.validity.data[byte] = <char> ((<uint8_t> o.validity.data[byte]) | (1 << (row & 7)))
    else:
        o.validity.data[byte] = <char> ((<uint8_t> o.validity.data[byte]) & ~(1 << (row & 7)))
    return 0


cdef int bin_widen(BinOut *o) except -1 nogil:
    """Switch the offsets to int64 (the data passed 2 GiB): rewrite them back to front."""
    cdef Py_ssize_t n = o.offsets.len // 4, i
    gb_reserve(&o.offsets, n * 4)
    cdef int32_t *narrow = <int32_t *> o.offsets.data
    cdef int64_t *wide = <int64_t *> o.offsets.data
    for i in range(n - 1, -1, -1):
        wide[i] = <int64_t> narrow[i]
    o.offsets.len = n * 8
    o.wide = True
    return 0


cdef inline int bin_append(BinOut *o, const unsigned char *p, Py_ssize_t n, bint views,
                           int32_t buf_index, Py_ssize_t buf_pos) except -1 nogil:
    """Append a value (n == -1: null). In views mode, reference it in buffer ``buf_index``
    at ``buf_pos`` instead of copying (values of up to 12 bytes are inlined)."""
    cdef char *v
    if n < 0 or o.validity.len:
        bin_set_validity(o, n >= 0)
    if views:
        if o.views.len + 16 > o.views.cap:
            gb_reserve(&o.views, 16)
        v = o.views.data + o.views.len
        memset(v, 0, 16)
        if n > 0:
            (<int32_t *> v)[0] = <int32_t> n
            if n <= 12:
                memcpy(v + 4, p, <size_t> n)
            else:
                memcpy(v + 4, p, 4)
                (<int32_t *> v)[2] = buf_index
                (<int32_t *> v)[3] = <int32_t> buf_pos
        o.views.len += 16
    else:
        if n > 0:
            if o.data.len + n > o.data.cap:
                gb_reserve(&o.data, n)
            memcpy(o.data.data + o.data.len, p, <size_t> n)
            o.data.len += n
        if o.wide:
            gb_put_i64(&o.offsets, o.data.len)
        elif o.data.len > 0x7FFFFFFF:
            bin_widen(o)
            gb_put_i64(&o.offsets, o.data.len)
        else:
            gb_put_i32(&o.offsets, <int32_t> o.data.len)
    o.rows += 1
    return 0


cdef object bin_to_column(BinOut *o, bint views, list buffers):
    validity = None
    if o.nulls:
        validity = gb_to_numpy(&o.validity, _np.uint8)
    if views:
        return _BinaryViewColumn(gb_to_numpy(&o.views, _np.uint8), buffers, validity, o.nulls)
    offsets = gb_to_numpy(&o.offsets, _np.int64 if o.wide else _np.int32)
    return _BinaryColumn(offsets, gb_to_numpy(&o.data, _np.uint8), validity, o.nulls)


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


# ---------------------------------------------------------------- the entry point

def decode_records(buf, *, int64_t start_offset=0, bint check_crc=True,
                   aborted_transactions=None, Py_ssize_t max_decompressed=-1,
                   bint binary_view=False, Py_ssize_t max_batch_bytes=0x7FFFFFFF):
    """Decode a sequence of record sets into a RecordColumns (see kproto.records.decode)."""
    cdef const unsigned char[::1] view = _as_bytes_view(buf)
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
        # Reserve room from the batch headers (virtual memory is cheap; regrowing is not).
        rows_hint = _rows_hint(base, end)
        gb_reserve(&d.offset, 8 * rows_hint)
        gb_reserve(&d.timestamp, 8 * rows_hint)
        gb_reserve(&d.ts_type, 4 * rows_hint)
        gb_reserve(&d.header_offsets, 4 * (rows_hint + 1))
        bin_init(&d.key, rows_hint, end // 4, binary_view)
        bin_init(&d.value, rows_hint, end, binary_view)
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
                    inner = _compression.decompress_buffer(
                        codec, view[pos + 61:stop], magic=2,
                        max_size=max_decompressed - d.decompressed, offset=pos,
                        total=max_decompressed)
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
                last_offset = _legacy_message(&d, view, base, pos, stop, check_crc,
                                              max_decompressed, buffers)
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


cdef const unsigned char[::1] _as_bytes_view(obj) except *:
    mv = memoryview(obj)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    return mv


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
