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
# them into CorruptRecordError. So it keeps its own varint readers instead of the raising
# Cursor of _codec.pyx. Each record is read first by a fast path that takes the common shapes
# (varints of 1 or 2 bytes, a one-byte header count, non-null header values) with only the
# checks its length leaves to do; anything else, every error included, goes to
# record_checked, which checks every byte. Both append the same columns (issue 17).

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
    /* n bytes from src (src_end: where the readable bytes end) to dst, which has room for
       16 more bytes than it needs: short values move as one 16-byte copy, without a call */
    static inline __attribute__((always_inline)) void kp_copy(
            char *dst, const unsigned char *src, int64_t n, const unsigned char *src_end) {
        if (n <= 16 && src_end - src >= 16) memcpy(dst, src, 16);
        else memcpy(dst, src, (size_t)n); }
    """
    bint kp_add_overflows(int64_t a, int64_t b, int64_t *out) nogil
    bint kp_sub_overflows(int64_t a, int64_t b, int64_t *out) nogil
    int64_t kp_wrapping_add(int64_t a, int64_t b) nogil
    void kp_copy(char *dst, const unsigned char *src, int64_t n,
                 const unsigned char *src_end) nogil


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
    # the next batch's bytes, fetched into cache while this batch is parsed (its CRC pass,
    # or its decompression, then reads them from cache instead of memory)
    const unsigned char *prefetch
    const unsigned char *prefetch_end
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


cdef int reserve_batch(Decoder *d, Py_ssize_t rows, Py_ssize_t nbytes) except -1 nogil:
    """Room for ``rows`` records whose keys and values total at most ``nbytes``, and the
    key and value bitmaps (if any) marked valid ahead for them."""
    gb_reserve(&d.offset, 8 * rows)
    gb_reserve(&d.timestamp, 8 * rows)
    gb_reserve(&d.ts_type, 4 * rows)
    gb_reserve(&d.header_offsets, 4 * rows)
    if d.views:
        gb_reserve(&d.key.views, 16 * rows)
        gb_reserve(&d.value.views, 16 * rows)
    else:                       # (16 more bytes: kp_copy's slack)
        gb_reserve(&d.key.offsets, 8 * rows)
        gb_reserve(&d.key.data, nbytes + 16)
        gb_reserve(&d.value.offsets, 8 * rows)
        gb_reserve(&d.value.data, nbytes + 16)
    bin_cover(&d.key, d.key.rows + rows)
    bin_cover(&d.value, d.value.rows + rows)
    return 0


cdef int reserve_headers(Decoder *d, Py_ssize_t nbytes) except -1 nogil:
    """Room for the headers of a batch of ``nbytes`` (a header takes at least 2 bytes, and
    its key and value fit in the batch). Returns 1, or 0 when the header columns take the
    checked appends (data near 2 GiB)."""
    cdef Py_ssize_t count = nbytes // 2 + 1
    if (d.hkey.wide or d.hvalue.wide or d.hkey.data.len + nbytes > 0x7FFFFFFF
            or d.hvalue.data.len + nbytes > 0x7FFFFFFF):
        return 0
    gb_reserve(&d.hkey.offsets, 4 * count)
    gb_reserve(&d.hkey.data, nbytes + 16)
    gb_reserve(&d.hvalue.offsets, 4 * count)
    gb_reserve(&d.hvalue.data, nbytes + 16)
    bin_cover(&d.hvalue, d.hvalue.rows + count)
    return 1


cdef enum PutMode:
    PUT_VIEW = 0        # binary_view: 16 bytes a value, room reserved
    PUT_COPY = 1        # copy into room reserved, int32 offsets
    PUT_CHECKED = 2     # bin_append: checks room, widens offsets past 2 GiB


cdef inline int put_value(BinOut *o, int mode, const unsigned char *p, int64_t n,
                          int32_t buf_index, Py_ssize_t buf_pos,
                          Py_ssize_t cover) except -1 nogil:
    """A key or value (``n < 0``: null); ``cover``: the rows reserved, for a first null."""
    if mode == PUT_CHECKED:
        return bin_append(o, p, n, False, 0, 0)
    if n < 0:
        if o.validity.len == 0:
            bin_start_validity(o, cover)
        bin_clear_valid(o)
    if mode == PUT_VIEW:
        view_put(o, p, n, buf_index, buf_pos)
    else:
        copy_put(o, p, n if n > 0 else 0)
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


# ---------------------------------------------------------------- one record, checked

cdef struct Fields:             # what a record holds besides its headers
    int64_t ts_delta
    int64_t offset_delta
    const unsigned char *key
    int64_t key_len
    const unsigned char *value
    int64_t value_len
    int64_t header_count


cdef int record_checked(Decoder *d, const unsigned char **pp, const unsigned char *end,
                        const unsigned char *base, Fields *f, int64_t base_offset,
                        int64_t *offset) except -1 nogil:
    """The record at ``pp[0]``, every byte checked, its headers appended if it is kept:
    the path of anything the fast path does not take, and of every error (-2, ``d.err``)."""
    cdef const unsigned char *p = pp[0]
    cdef const unsigned char *rec_start = p
    cdef const unsigned char *rec_end
    cdef const unsigned char *hk
    cdef const unsigned char *hv
    cdef int64_t length, hk_len, hv_len
    cdef int32_t h
    cdef bint keep
    if read_varint(d, &p, end, &length, 5, base) < 0:
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
    if read_varint(d, &p, rec_end, &f.ts_delta, 10, base) < 0:
        return -2
    if read_varint(d, &p, rec_end, &f.offset_delta, 5, base) < 0:
        return -2
    if read_varint(d, &p, rec_end, &f.key_len, 5, base) < 0:
        return -2
    f.key = p
    if f.key_len >= 0:
        if take(d, &p, rec_end, f.key_len, "key", base) < 0:
            return -2
    elif f.key_len != -1:
        d.err, d.err_pos, d.err_what = ERR_NEGATIVE_LENGTH, p - base, "key"
        return -2
    if read_varint(d, &p, rec_end, &f.value_len, 5, base) < 0:
        return -2
    f.value = p
    if f.value_len >= 0:
        if take(d, &p, rec_end, f.value_len, "value", base) < 0:
            return -2
    elif f.value_len != -1:
        d.err, d.err_pos, d.err_what = ERR_NEGATIVE_LENGTH, p - base, "value"
        return -2
    if read_varint(d, &p, rec_end, &f.header_count, 5, base) < 0:
        return -2
    if f.header_count < 0 or f.header_count > rec_end - p:
        d.err, d.err_pos, d.err_what = ERR_NEGATIVE_LENGTH, p - base, "header count"
        return -2
    if kp_add_overflows(base_offset, f.offset_delta, offset):
        d.err, d.err_pos, d.err_what = ERR_OFFSET_OVERFLOW, rec_start - base, "record"
        return -2
    keep = offset[0] >= d.start_offset
    for h in range(<int32_t> f.header_count):
        if read_varint(d, &p, rec_end, &hk_len, 5, base) < 0:
            return -2
        hk = p
        if take(d, &p, rec_end, hk_len, "header key", base) < 0:
            return -2
        if read_varint(d, &p, rec_end, &hv_len, 5, base) < 0:
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
    pp[0] = p
    return 0


# ---------------------------------------------------------------- magic 2 records

cdef extern from *:
    """
    /* The fast path's varint: 1 or 2 bytes, zigzagged, at q with 2 bytes readable. Returns
       the position after it, or NULL for anything longer (the checked path takes those). */
    static inline __attribute__((always_inline)) const unsigned char *kp_varint12(
            const unsigned char *q, int64_t *out) {
        uint32_t u = q[0];
        if (u >= 0x80) {
            if (q[1] >= 0x80) return NULL;
            u = (u & 0x7F) | ((uint32_t)q[1] << 7);
            q++;
        }
        *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
        return q + 1;
    }
    """
    const unsigned char *kp_varint12(const unsigned char *q, int64_t *out) nogil

cdef extern from *:
    """
    /* Three cache lines from *pf on (up to end) asked for ahead of use; one call a record,
       so the lines arrive at about the rate the records are read. */
    static inline __attribute__((always_inline)) void kp_prefetch_step(
            const unsigned char **pf, const unsigned char *end) {
        const unsigned char *p = *pf;
        if (p < end) {
            __builtin_prefetch(p, 0, 3);
            __builtin_prefetch(p + 64, 0, 3);
            __builtin_prefetch(p + 128, 0, 3);
            *pf = p + 192;
        }
    }
    """
    void kp_prefetch_step(const unsigned char **pf, const unsigned char *end) nogil


cdef int decode_v2_records(Decoder *d, const unsigned char *base, Py_ssize_t start,
                           Py_ssize_t stop, int64_t base_offset, int64_t base_ts,
                           int64_t max_ts, int32_t ts_type, int32_t count,
                           int32_t buf_index) except -1 nogil:
    """Append the ``count`` records in ``base[start:stop]``; they must fill it exactly.
    Returns -2 with ``d.err`` set on malformed input; -1 means a Python exception.

    Each record goes through the fast path, which reads its fields with as few checks as
    its length allows and takes up to 2-byte varints and headers with non-null values; it
    gives up on anything else (undoing the headers it appended), and the record is read
    again by record_checked, which reports errors. Both leave the same columns."""
    cdef const unsigned char *p = base + start
    cdef const unsigned char *end = base + stop
    cdef const unsigned char *q
    cdef const unsigned char *rec_start
    cdef const unsigned char *rec_end
    cdef const unsigned char *hk
    cdef const unsigned char *hv
    cdef Fields f
    cdef int64_t length, hk_len, hv_len, offset
    cdef int32_t i, h
    cdef bint keep, fast
    cdef int hmode = -1         # header appends: unknown until the batch's first header
    # header columns, while hmode is 1: data lengths, end offsets from index j (the headers
    # this batch's fast path appended); hk_at, hv_at: the current record's, until it is kept
    cdef Py_ssize_t hk_len_at = 0, hv_len_at = 0, hk_at = 0, hv_at = 0, j = 0
    cdef int32_t *hk_offsets = NULL
    cdef int32_t *hv_offsets = NULL
    cdef Py_ssize_t hcover = 0  # header rows reserved (for a first null value)
    # A record takes at least 7 bytes, so this batch adds at most that many rows, and its
    # keys and values fit in its own length: reserve once, append unchecked below.
    cdef Py_ssize_t nbytes = stop - start
    cdef Py_ssize_t rows = nbytes // 7
    if count < rows:
        rows = count
    # (room for one row at least: every buffer then has memory, so the pointers below never
    # add to NULL, which is undefined even for 0; UBSan, in the fuzzer, found it)
    if reserve_batch(d, rows if rows > 0 else 1, nbytes) < 0:
        return -1
    cdef Py_ssize_t cover = d.key.rows + rows
    cdef int kmode = PUT_VIEW if d.views else (
        PUT_COPY if not d.key.wide and d.key.data.len + nbytes <= 0x7FFFFFFF else PUT_CHECKED)
    cdef int vmode = PUT_VIEW if d.views else (
        PUT_COPY if not d.value.wide and d.value.data.len + nbytes <= 0x7FFFFFFF
        else PUT_CHECKED)
    # Row n of the batch goes to index n of every per-row buffer (reserved above), through
    # local pointers: stores through them never make the compiler reload the Decoder (char
    # stores alias everything), and one counter moves them all. Written back at the end, and
    # around an append that takes a checked function (put_value).
    cdef Py_ssize_t n = 0
    cdef Py_ssize_t n_limit = rows                    # never reached: rows are reserved ...
    if d.offset.len // 8 + rows > 0x7FFFFFFF:        # ... unless the column would overflow
        n_limit = 0x7FFFFFFF - d.offset.len // 8
    cdef int64_t *c_offset = <int64_t *> (d.offset.data + d.offset.len)
    cdef int64_t *c_timestamp = <int64_t *> (d.timestamp.data + d.timestamp.len)
    cdef int32_t *c_ts_type = <int32_t *> (d.ts_type.data + d.ts_type.len)
    cdef int32_t *c_header_offsets = <int32_t *> (d.header_offsets.data + d.header_offsets.len)
    cdef int32_t headers_total = d.headers_total
    cdef Py_ssize_t key_rows = d.key.rows
    cdef char *k_data = d.key.data.data               # copy mode: data, its length, offsets
    cdef char *v_data = d.value.data.data
    cdef Py_ssize_t k_len = d.key.data.len
    cdef Py_ssize_t v_len = d.value.data.len
    cdef int32_t *k_offsets = NULL
    cdef int32_t *v_offsets = NULL
    cdef uint64_t *k_views = NULL                     # views mode: two words a row
    cdef uint64_t *v_views = NULL
    cdef uint8_t *k_bits = <uint8_t *> d.key.validity.data if d.key.validity.len else NULL
    cdef uint8_t *v_bits = (<uint8_t *> d.value.validity.data if d.value.validity.len
                            else NULL)             # NULL: no null yet
    if d.views:
        k_views = <uint64_t *> (d.key.views.data + d.key.views.len)
        v_views = <uint64_t *> (d.value.views.data + d.value.views.len)
    elif kmode == PUT_COPY and vmode == PUT_COPY:
        k_offsets = <int32_t *> (d.key.offsets.data + d.key.offsets.len)
        v_offsets = <int32_t *> (d.value.offsets.data + d.value.offsets.len)
    else:                       # past 2 GiB: every key and value through bin_append
        kmode = vmode = PUT_CHECKED
    cdef const unsigned char *pf = d.prefetch
    cdef const unsigned char *pf_end = d.prefetch_end
    for i in range(count):
        kp_prefetch_step(&pf, pf_end)
        # ---- the fast path: one pass of a loop, left by break when it gives up
        rec_start = p
        fast = False
        while True:
            if end - p < 2:
                break
            q = kp_varint12(p, &length)
            # a body of 8 bytes or more holds the 7 bytes of attributes and the first three
            # varints (2 bytes each at most here): read them without checks
            if q == NULL or length < 8 or length > end - q:
                break
            rec_end = q + length
            q = kp_varint12(q + 1, &f.ts_delta)             # (q[0]: the attributes)
            if q == NULL:
                break
            q = kp_varint12(q, &f.offset_delta)
            if q == NULL:
                break
            q = kp_varint12(q, &f.key_len)
            if q == NULL:
                break
            f.key = q
            if f.key_len >= 0:
                if f.key_len > rec_end - q:
                    break
                q += f.key_len
            elif f.key_len != -1:
                break
            if rec_end - q < 2:                          # the value length and the count
                break
            q = kp_varint12(q, &f.value_len)
            if q == NULL:
                break
            f.value = q
            if f.value_len >= 0:
                if f.value_len >= rec_end - q:           # (the header count follows)
                    break
                q += f.value_len
            elif f.value_len != -1 or q >= rec_end:
                break
            f.header_count = (q[0] >> 1) ^ -(q[0] & 1)   # one byte: up to 63 headers
            if q[0] >= 0x80 or f.header_count < 0:
                break
            q += 1
            if kp_add_overflows(base_offset, f.offset_delta, &offset):
                break
            keep = offset >= d.start_offset
            if f.header_count:
                if keep:
                    if hmode < 0:
                        hmode = reserve_headers(d, nbytes)
                        hcover = d.hvalue.rows + nbytes // 2 + 1
                        if hmode:
                            hk_len_at, hv_len_at, j = d.hkey.data.len, d.hvalue.data.len, 0
                            hk_offsets = <int32_t *> (d.hkey.offsets.data + d.hkey.offsets.len)
                            hv_offsets = <int32_t *> (d.hvalue.offsets.data
                                                      + d.hvalue.offsets.len)
                    if not hmode:
                        break
                    hk_at, hv_at = hk_len_at, hv_len_at     # kept only if the record is
                for h in range(<int32_t> f.header_count):
                    if rec_end - q < 2:
                        break
                    q = kp_varint12(q, &hk_len)
                    if q == NULL or hk_len < 0 or hk_len >= rec_end - q:
                        break
                    hk = q
                    q += hk_len                             # (at least a byte is left)
                    if rec_end - q >= 2:
                        q = kp_varint12(q, &hv_len)
                    elif q[0] < 0x80:
                        hv_len = (q[0] >> 1) ^ -(q[0] & 1)
                        q += 1
                    else:
                        break
                    if q == NULL or hv_len < 0 or hv_len > rec_end - q:
                        break
                    hv = q
                    q += hv_len
                    if keep:
                        kp_copy(d.hkey.data.data + hk_at, hk, hk_len, end)
                        hk_at += hk_len
                        hk_offsets[j + h] = <int32_t> hk_at
                        kp_copy(d.hvalue.data.data + hv_at, hv, hv_len, end)
                        hv_at += hv_len
                        hv_offsets[j + h] = <int32_t> hv_at
                else:
                    fast = q == rec_end
                    if fast and keep:
                        hk_len_at, hv_len_at = hk_at, hv_at
                        j += f.header_count
                break
            fast = q == rec_end
            break
        if fast:
            p = rec_end
        else:
            # (the fast path's headers were never counted: nothing to undo)
            if hmode > 0:
                headers_sync(d, hk_len_at, hv_len_at, j)
            if record_checked(d, &p, end, base, &f, base_offset, &offset) != 0:
                return -2 if d.err else -1
            keep = offset >= d.start_offset
            if hmode > 0:       # its header values may have started a bitmap: cover the batch
                bin_cover(&d.hvalue, hcover)
                hk_len_at, hv_len_at, j = d.hkey.data.len, d.hvalue.data.len, 0
                hk_offsets = <int32_t *> (d.hkey.offsets.data + d.hkey.offsets.len)
                hv_offsets = <int32_t *> (d.hvalue.offsets.data + d.hvalue.offsets.len)
        if not keep:
            continue
        if n == n_limit:
            d.err, d.err_pos, d.err_what = ERR_TOO_MANY_ROWS, rec_start - base, "record"
            return -2
        c_offset[n] = offset
        c_timestamp[n] = max_ts if ts_type == 1 else kp_wrapping_add(base_ts, f.ts_delta)
        c_ts_type[n] = ts_type
        headers_total += <int32_t> f.header_count
        c_header_offsets[n] = headers_total
        # keys and values: every case but a first null (and past 2 GiB) inline
        if kmode == PUT_COPY:
            if f.key_len >= 0:
                kp_copy(k_data + k_len, f.key, f.key_len, end)
                k_len += f.key_len
            elif k_bits != NULL:
                kp_clear_bit(k_bits, key_rows + n)
                d.key.nulls += 1
            else:
                k_bits = first_null(&d.key, key_rows + n, cover)
            k_offsets[n] = <int32_t> k_len
        elif kmode == PUT_VIEW:
            if f.key_len < 0:
                if k_bits == NULL:
                    k_bits = first_null(&d.key, key_rows + n, cover)
                else:
                    kp_clear_bit(k_bits, key_rows + n)
                    d.key.nulls += 1
            kp_view(k_views + 2 * n, f.key, f.key_len, buf_index, f.key - base, end)
        else:
            d.key.rows = key_rows + n
            put_value(&d.key, kmode, f.key, f.key_len, buf_index, f.key - base, cover)
        if vmode == PUT_COPY:
            if f.value_len >= 0:
                kp_copy(v_data + v_len, f.value, f.value_len, end)
                v_len += f.value_len
            elif v_bits != NULL:
                kp_clear_bit(v_bits, key_rows + n)
                d.value.nulls += 1
            else:
                v_bits = first_null(&d.value, key_rows + n, cover)
            v_offsets[n] = <int32_t> v_len
        elif vmode == PUT_VIEW:
            if f.value_len < 0:
                if v_bits == NULL:
                    v_bits = first_null(&d.value, key_rows + n, cover)
                else:
                    kp_clear_bit(v_bits, key_rows + n)
                    d.value.nulls += 1
            kp_view(v_views + 2 * n, f.value, f.value_len, buf_index, f.value - base, end)
        else:
            d.value.rows = key_rows + n
            put_value(&d.value, vmode, f.value, f.value_len, buf_index, f.value - base, cover)
        n += 1
    if p != end:
        d.err, d.err_pos, d.err_what = ERR_TRAILING_RECORD_BYTES, p - base, "batch"
        return -2
    d.offset.len += n * 8
    d.timestamp.len += n * 8
    d.ts_type.len += n * 4
    d.header_offsets.len += n * 4
    d.headers_total = headers_total
    if hmode > 0:
        headers_sync(d, hk_len_at, hv_len_at, j)
    if kmode != PUT_CHECKED:
        col_sync(&d.key, k_len, n, key_rows + n)
        col_sync(&d.value, v_len, n, key_rows + n)
    return 0


cdef extern from *:
    """
    static inline void kp_clear_bit(uint8_t *bits, Py_ssize_t row) {
        bits[row >> 3] &= (uint8_t)~(1u << (row & 7)); }
    /* The 16-byte Arrow view of a value of n bytes at p (n < 0: a null, all zero): up to 12
       bytes inline, else length, 4-byte prefix, buffer index and offset, as native int32s.
       src_end: where the readable bytes end (a short value is read as 16 bytes if it can). */
    static inline __attribute__((always_inline)) void kp_view(
            uint64_t *v, const unsigned char *p, int64_t n, int32_t buf_index, Py_ssize_t pos,
            const unsigned char *src_end) {
        unsigned char *b = (unsigned char *)v;
        int32_t len = (int32_t)n, at = (int32_t)pos;
        if (n > 12) {
            memcpy(b, &len, 4);
            memcpy(b + 4, p, 4);
            memcpy(b + 8, &buf_index, 4);
            memcpy(b + 12, &at, 4);
            return;
        }
        if (n <= 0) {
            memset(b, 0, 16);
            return;
        }
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (src_end - p >= 16) {            /* two loads, masked to the n bytes */
            uint64_t lo, hi;
            memcpy(&lo, p, 8);
            memcpy(&hi, p + 8, 8);
            hi = (lo >> 32) | (hi << 32);   /* value bytes 4..11 */
            lo = (lo & 0xFFFFFFFFu) << 32;  /* value bytes 0..3, after the length */
            if (n < 4) lo &= (((uint64_t)1 << (8 * n)) - 1) << 32;
            hi = n <= 4 ? 0 : n < 12 ? hi & (((uint64_t)1 << (8 * (n - 4))) - 1) : hi;
            v[0] = lo | (uint32_t)len;
            v[1] = hi;
            return;
        }
    #endif
        memset(b, 0, 16);
        memcpy(b, &len, 4);
        memcpy(b + 4, p, (size_t)n);
    }
    """
    void kp_clear_bit(uint8_t *bits, Py_ssize_t row) nogil
    void kp_view(uint64_t *v, const unsigned char *p, int64_t n, int32_t buf_index,
                 Py_ssize_t pos, const unsigned char *src_end) nogil


cdef uint8_t *first_null(BinOut *o, Py_ssize_t row, Py_ssize_t cover) except? NULL nogil:
    """The column's first null, at ``row``: a bitmap, rows up to ``cover`` valid ahead."""
    o.rows = row
    bin_start_validity(o, cover)
    bin_clear_valid(o)
    return <uint8_t *> o.validity.data


cdef inline void headers_sync(Decoder *d, Py_ssize_t hk_len, Py_ssize_t hv_len,
                              Py_ssize_t j) noexcept nogil:
    """Write the header columns' local cursors back: ``j`` headers appended to each."""
    d.hkey.data.len, d.hvalue.data.len = hk_len, hv_len
    d.hkey.offsets.len += 4 * j
    d.hvalue.offsets.len += 4 * j
    d.hkey.rows += j
    d.hvalue.rows += j


cdef inline void col_sync(BinOut *o, Py_ssize_t data_len, Py_ssize_t n,
                          Py_ssize_t rows) noexcept nogil:
    """Write a column's local cursors back: ``n`` rows appended, ``data_len`` bytes of data
    (only the buffers of its mode are touched)."""
    if o.views.data != NULL:
        o.views.len += 16 * n
    if o.offsets.data != NULL:
        o.offsets.len += 4 * n
        o.data.len = data_len
    o.rows = rows


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

