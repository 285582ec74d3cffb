# Columns -> one record batch v2 (included by _codec.pyx): the bulk produce path.
# Layout: see _records.pxi. Records are written straight from Arrow-style buffers (int32/int64
# offsets + data + validity bitmap) without a Python object per record; the GIL is released
# except for the compressor call.

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from kproto.errors import EncodeError as _EncodeError


cdef inline int size_of_uvarint64(uint64_t v) noexcept nogil:
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline int size_of_zigzag(int64_t v) noexcept nogil:
    return size_of_uvarint64(<uint64_t> ((v << 1) ^ (v >> 63)))


cdef inline char *put_zigzag(char *p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t> ((v << 1) ^ (v >> 63))
    while u >= 0x80:
        p[0] = <char> ((u & 0x7F) | 0x80)
        p += 1
        u >>= 7
    p[0] = <char> u
    return p + 1


cdef struct BinIn:
    const char *data
    const int32_t *off32
    const int64_t *off64
    const uint8_t *valid
    Py_ssize_t valid_offset   # bit offset of row 0 in the validity bitmap


cdef inline Py_ssize_t bin_len(BinIn *b, Py_ssize_t i) noexcept nogil:
    """Length of value i, -1 for null."""
    cdef Py_ssize_t bit
    if b.valid != NULL:
        bit = b.valid_offset + i
        if not (b.valid[bit >> 3] >> (bit & 7)) & 1:
            return -1
    if b.off64 != NULL:
        return <Py_ssize_t> (b.off64[i + 1] - b.off64[i])
    return b.off32[i + 1] - b.off32[i]


cdef inline const char *bin_ptr(BinIn *b, Py_ssize_t i) noexcept nogil:
    if b.off64 != NULL:
        return b.data + b.off64[i]
    return b.data + b.off32[i]


cdef int bin_in(BinIn *b, offsets, data, validity, Py_ssize_t valid_offset) except -1:
    """Point ``b`` at NumPy/buffer inputs (offsets int32 or int64, n+1 of them)."""
    cdef const int32_t[::1] o32
    cdef const int64_t[::1] o64
    cdef const unsigned char[::1] d
    cdef const unsigned char[::1] v
    memset(b, 0, sizeof(BinIn))
    if offsets.dtype == _np.int64:
        o64 = offsets
        b.off64 = &o64[0]
    else:
        o32 = offsets
        b.off32 = &o32[0]
    d = data
    b.data = <const char *> (&d[0] if d.shape[0] else NOTHING)
    if validity is not None:
        v = validity
        b.valid = &v[0] if v.shape[0] else NULL
        b.valid_offset = valid_offset
    return 0


def encode_batch_v2(Py_ssize_t n, key, value, timestamps, headers=None, *,
                    int64_t base_offset=0, int codec=0, int64_t producer_id=-1,
                    int producer_epoch=-1, int32_t base_sequence=-1, bint transactional=False,
                    int32_t partition_leader_epoch=-1, bint log_append_time=False,
                    compression_level=None, rows=None):
    """Encode ``n`` records into one record batch v2 (see kproto.records.encode).

    ``key``/``value``: (offsets, data, validity or None, validity bit offset) with
    ``offsets[0]`` the start of row 0; ``timestamps``: int64[n] (ms);
    ``headers``: (list_offsets int32[n+1], key tuple, value tuple) or None.
    ``rows``: None, or int64[n]: record i is row ``rows[i]`` of the columns (then
    they have any number of rows; the records are gathered without a copy of the
    columns first).
    """
    cdef BinIn k, v, hk, hv
    cdef const int64_t[::1] ts = timestamps
    cdef const int32_t[::1] hoff
    cdef const int32_t *hoffp = NULL
    cdef const int64_t[::1] row_index
    cdef const int64_t *rowp = NULL
    cdef Py_ssize_t i, r, h, klen, vlen, hklen, hvlen, body, total = 0, bad = -1
    cdef int64_t limit
    cdef int64_t base_ts = 0, max_ts = 0, delta
    cdef int64_t hcount
    cdef char *p
    cdef char *out
    cdef int16_t attributes
    if n <= 0:
        raise _EncodeError("a record batch needs at least one record")
    if rows is not None:
        row_index = rows
        if row_index.shape[0] != n:
            raise _EncodeError(f"rows has {row_index.shape[0]} values for {n} records")
        rowp = &row_index[0]
        # every row must be one the columns have (the offsets hold rows + 1 values)
        limit = min(ts.shape[0], len(key[0]) - 1, len(value[0]) - 1)
        if headers is not None:
            limit = min(limit, len(headers[0]) - 1)
        with nogil:
            for i in range(n):
                if rowp[i] < 0 or rowp[i] >= limit:
                    bad = i
                    break
        if bad >= 0:
            raise _EncodeError(f"rows[{bad}] = {rowp[bad]} is not a row of the columns "
                               f"({limit} rows)")
    elif n > 0x7FFFFFFF or ts.shape[0] < n:
        raise _EncodeError(f"timestamps has {ts.shape[0]} values for {n} records")
    if n > 0x7FFFFFFF:
        raise _EncodeError(f"{n} records do not fit one record batch")
    bin_in(&k, key[0], key[1], key[2], key[3])
    bin_in(&v, value[0], value[1], value[2], value[3])
    if headers is not None:
        hoff = headers[0]
        hoffp = &hoff[0]
        bin_in(&hk, headers[1][0], headers[1][1], headers[1][2], headers[1][3])
        bin_in(&hv, headers[2][0], headers[2][1], headers[2][2], headers[2][3])
    r = rowp[0] if rowp != NULL else 0
    base_ts = ts[r]
    max_ts = ts[r]
    # pass 1: exact size
    with nogil:
        for i in range(n):
            r = rowp[i] if rowp != NULL else i
            if ts[r] > max_ts:
                max_ts = ts[r]
            klen = bin_len(&k, r)
            vlen = bin_len(&v, r)
            body = (1 + size_of_zigzag(ts[r] - base_ts) + size_of_zigzag(i)
                    + size_of_zigzag(klen) + (klen if klen > 0 else 0)
                    + size_of_zigzag(vlen) + (vlen if vlen > 0 else 0))
            hcount = 0
            if hoffp != NULL:
                hcount = hoffp[r + 1] - hoffp[r]
                for h in range(hoffp[r], hoffp[r + 1]):
                    hklen = bin_len(&hk, h)
                    hvlen = bin_len(&hv, h)
                    if hklen < 0:
                        hklen = 0  # header keys are never null
                    body += (size_of_zigzag(hklen) + hklen + size_of_zigzag(hvlen)
                             + (hvlen if hvlen > 0 else 0))
            body += size_of_zigzag(hcount)
            total += size_of_zigzag(body) + body
    # uncompressed: write the records straight after the header's 61 bytes
    if codec:
        records = PyBytes_FromStringAndSize(NULL, total)
        out = PyBytes_AS_STRING(records)
    else:
        records = PyBytes_FromStringAndSize(NULL, 61 + total)
        out = PyBytes_AS_STRING(records) + 61
    # pass 2: write
    with nogil:
        p = out
        for i in range(n):
            r = rowp[i] if rowp != NULL else i
            klen = bin_len(&k, r)
            vlen = bin_len(&v, r)
            hcount = hoffp[r + 1] - hoffp[r] if hoffp != NULL else 0
            body = (1 + size_of_zigzag(ts[r] - base_ts) + size_of_zigzag(i)
                    + size_of_zigzag(klen) + (klen if klen > 0 else 0)
                    + size_of_zigzag(vlen) + (vlen if vlen > 0 else 0) + size_of_zigzag(hcount))
            if hoffp != NULL:
                for h in range(hoffp[r], hoffp[r + 1]):
                    hklen = bin_len(&hk, h)
                    hvlen = bin_len(&hv, h)
                    if hklen < 0:
                        hklen = 0
                    body += (size_of_zigzag(hklen) + hklen + size_of_zigzag(hvlen)
                             + (hvlen if hvlen > 0 else 0))
            p = put_zigzag(p, body)
            p[0] = 0
            p += 1
            p = put_zigzag(p, ts[r] - base_ts)
            p = put_zigzag(p, i)
            p = put_zigzag(p, klen)
            if klen > 0:
                memcpy(p, bin_ptr(&k, r), <size_t> klen)
                p += klen
            p = put_zigzag(p, vlen)
            if vlen > 0:
                memcpy(p, bin_ptr(&v, r), <size_t> vlen)
                p += vlen
            p = put_zigzag(p, hcount)
            if hoffp != NULL:
                for h in range(hoffp[r], hoffp[r + 1]):
                    hklen = bin_len(&hk, h)
                    if hklen < 0:
                        hklen = 0
                    p = put_zigzag(p, hklen)
                    if hklen > 0:
                        memcpy(p, bin_ptr(&hk, h), <size_t> hklen)
                        p += hklen
                    hvlen = bin_len(&hv, h)
                    p = put_zigzag(p, hvlen)
                    if hvlen > 0:
                        memcpy(p, bin_ptr(&hv, h), <size_t> hvlen)
                        p += hvlen
    cdef const unsigned char[::1] payload
    if codec:
        payload = _compression.compress(codec, records, level=compression_level)
        batch = PyBytes_FromStringAndSize(NULL, 61 + payload.shape[0])
        if payload.shape[0]:
            memcpy(PyBytes_AS_STRING(batch) + 61, &payload[0], <size_t> payload.shape[0])
    else:
        batch = records
    attributes = <int16_t> ((codec & 0x07) | (0x08 if log_append_time else 0)
                            | (0x10 if transactional else 0))
    _fill_batch_header(batch, n, base_offset, attributes, base_ts, max_ts, producer_id,
                       producer_epoch, base_sequence, partition_leader_epoch)
    return batch


cdef int _fill_batch_header(bytes batch, Py_ssize_t n, int64_t base_offset,
                            int16_t attributes, int64_t base_ts, int64_t max_ts,
                            int64_t producer_id, int producer_epoch, int32_t base_sequence,
                            int32_t partition_leader_epoch) except -1:
    """Write the 61-byte header (CRC last) in front of the records already in ``batch``.
    ``batch`` is freshly made and not yet shared, so writing into it is safe."""
    cdef Py_ssize_t size = len(batch)
    cdef unsigned char *o = <unsigned char *> PyBytes_AS_STRING(batch)
    cdef uint32_t crc
    _store_i64(o, base_offset)
    _store_i32(o + 8, <int32_t> (size - 12))
    _store_i32(o + 12, partition_leader_epoch)
    o[16] = 2
    _store_i16(o + 21, attributes)
    _store_i32(o + 23, <int32_t> (n - 1))
    _store_i64(o + 27, base_ts)
    _store_i64(o + 35, max_ts)
    _store_i64(o + 43, producer_id)
    _store_i16(o + 51, <int16_t> producer_epoch)
    _store_i32(o + 53, base_sequence)
    _store_i32(o + 57, <int32_t> n)
    with nogil:
        crc = crc32c_update(0, o + 21, <size_t> (size - 21))
    _store_i32(o + 17, <int32_t> crc)
    return 0


cdef inline void _store_i64(unsigned char *p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t> v
    cdef int i
    for i in range(8):
        p[7 - i] = <unsigned char> (u & 0xFF)
        u >>= 8


cdef inline void _store_i32(unsigned char *p, int32_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t> v
    p[0] = <unsigned char> (u >> 24)
    p[1] = <unsigned char> (u >> 16)
    p[2] = <unsigned char> (u >> 8)
    p[3] = <unsigned char> u


cdef inline void _store_i16(unsigned char *p, int16_t v) noexcept nogil:
    cdef uint16_t u = <uint16_t> v
    p[0] = <unsigned char> (u >> 8)
    p[1] = <unsigned char> u


# -- Java's default partitioner hash (Utils.murmur2), for keyed records

cdef inline int32_t murmur2_c(const unsigned char *data, Py_ssize_t length) noexcept nogil:
    cdef uint32_t m = 0x5bd1e995
    cdef uint32_t h = <uint32_t> 0x9747b28c ^ <uint32_t> length
    cdef uint32_t k
    cdef Py_ssize_t i = 0, rest = length & 3, whole = length - rest
    while i < whole:
        k = (<uint32_t> data[i] | (<uint32_t> data[i + 1] << 8)
             | (<uint32_t> data[i + 2] << 16) | (<uint32_t> data[i + 3] << 24))
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
        i += 4
    if rest == 3:
        h ^= <uint32_t> data[whole + 2] << 16
    if rest >= 2:
        h ^= <uint32_t> data[whole + 1] << 8
    if rest >= 1:
        h ^= <uint32_t> data[whole]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t> h


def murmur2(data):
    """Kafka's murmur2 of ``data`` (bytes-like), as Java's signed int32."""
    cdef const unsigned char[::1] view = _bytes_view(data)
    return murmur2_c(&view[0] if view.shape[0] else <const unsigned char *> NOTHING,
                     view.shape[0])


def murmur2_partitions(Py_ssize_t n, key, int32_t num_partitions):
    """Partition of each of ``n`` keys, as Java's partitioner picks it:
    ``(murmur2(key) & 0x7fffffff) % num_partitions``; -1 for null keys.

    ``key`` is (offsets, data, validity or None, validity bit offset), as for
    :func:`encode_batch_v2`.
    """
    cdef BinIn k
    cdef Py_ssize_t i, klen
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, not {num_partitions}")
    out = _np.empty(n, _np.int32)
    cdef int32_t[::1] o = out
    bin_in(&k, key[0], key[1], key[2], key[3])
    with nogil:
        for i in range(n):
            klen = bin_len(&k, i)
            if klen < 0:
                o[i] = -1
            else:
                o[i] = (murmur2_c(<const unsigned char *> bin_ptr(&k, i), klen)
                        & 0x7FFFFFFF) % num_partitions
    return out
