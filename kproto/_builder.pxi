# ---------------------------------------------------------------- record batch builder
#
# The producer's open batch: each record of Producer.send() is encoded into the batch's
# records the moment it is appended (Java's MemoryRecordsBuilder, librdkafka's msgset
# writer), so no Python object is kept per record and sealing a batch is one header, one
# optional compression and one CRC. Twin: kproto/_pure/builder.py (same bytes).


cdef inline Py_ssize_t _bytes_len(object v, const char **p, str what) except -2:
    """-1 for None, else the length of a bytes object (``p`` set to its data)."""
    if v is None:
        return -1
    if not PyBytes_CheckExact(v):
        raise TypeError(f"{what} must be bytes or None, not {type(v).__name__}")
    p[0] = PyBytes_AS_STRING(v)
    return PyBytes_GET_SIZE(v)


@cython.final
cdef class RecordsBuilder:
    """The records of one v2 record batch, encoded as they are appended.

    ``append(key, value, timestamp, headers)`` (bytes or None; headers a sequence of
    ``(str | bytes, bytes | None)``) returns the record's index; ``build(codec, level)``
    the whole batch (no producer id: the sender stamps it); ``slice(lo, hi)`` a builder
    of records ``lo``..``hi`` (a batch the broker found too large is sent in parts);
    ``timestamp(i)``; ``release()`` frees the records, keeping the timestamps.
    """

    cdef GrowBuf buf                 # 61 bytes left for the header, then the records
    cdef GrowBuf stamps              # int64 a record
    cdef readonly Py_ssize_t count
    cdef readonly bint has_headers
    cdef int64_t base_ts, max_ts

    def __dealloc__(self):
        gb_free(&self.buf)
        gb_free(&self.stamps)

    @property
    def nbytes(self):
        """Bytes of the records encoded so far (without the batch header)."""
        return self.buf.len - 61 if self.buf.len else 0

    cpdef Py_ssize_t append(self, object key, object value, int64_t timestamp,
                            object headers=None) except -1:
        cdef const char *kp = NULL
        cdef const char *vp = NULL
        cdef Py_ssize_t klen = _bytes_len(key, &kp, "key")
        cdef Py_ssize_t vlen = _bytes_len(value, &vp, "value")
        cdef Py_ssize_t rest, hcount = 0, i
        cdef char *p
        cdef list pairs = None
        rest = (size_of_zigzag(klen) + (klen if klen > 0 else 0)
                + size_of_zigzag(vlen) + (vlen if vlen > 0 else 0))
        if headers:
            pairs = _header_pairs(headers)
            hcount = len(pairs) // 2
            for i in range(0, 2 * hcount, 2):
                rest += size_of_zigzag(PyBytes_GET_SIZE(pairs[i])) + PyBytes_GET_SIZE(pairs[i])
                if pairs[i + 1] is None:
                    rest += 1
                else:
                    rest += (size_of_zigzag(PyBytes_GET_SIZE(pairs[i + 1]))
                             + PyBytes_GET_SIZE(pairs[i + 1]))
            self.has_headers = True
        rest += size_of_zigzag(hcount)
        p = self._begin(timestamp, rest)
        p = put_zigzag(p, klen)
        if klen > 0:
            memcpy(p, kp, <size_t> klen)
            p += klen
        p = put_zigzag(p, vlen)
        if vlen > 0:
            memcpy(p, vp, <size_t> vlen)
            p += vlen
        p = put_zigzag(p, hcount)
        for i in range(0, 2 * hcount, 2):
            p = _put_bytes(p, pairs[i])
            p = _put_bytes(p, pairs[i + 1])
        return self._end(p, timestamp)

    cdef char *_begin(self, int64_t timestamp, Py_ssize_t rest) except NULL:
        """Room for a record whose key, value and headers take ``rest`` bytes: writes its
        length, attributes, timestamp delta and offset delta; returns where the rest goes
        (``_end`` then closes the record)."""
        cdef Py_ssize_t body
        cdef int64_t delta
        cdef char *p
        if self.count >= 0x7FFFFFFF:
            raise _EncodeError("a record batch holds at most 2**31 - 1 records")
        if self.buf.len == 0:
            gb_reserve(&self.buf, 61 + 64 + rest)
            self.buf.len = 61
            self.base_ts = self.max_ts = timestamp
        delta = timestamp - self.base_ts
        body = 1 + size_of_zigzag(delta) + size_of_zigzag(self.count) + rest
        gb_reserve(&self.buf, size_of_zigzag(body) + body)
        gb_put_i64(&self.stamps, timestamp)
        p = put_zigzag(self.buf.data + self.buf.len, body)
        p[0] = 0
        p = put_zigzag(p + 1, delta)
        return put_zigzag(p, self.count)

    cdef Py_ssize_t _end(self, char *p, int64_t timestamp):
        """Close the record ``_begin`` opened, written up to ``p``; its index."""
        self.buf.len = p - self.buf.data
        if timestamp > self.max_ts:
            self.max_ts = timestamp
        self.count += 1
        return self.count - 1

    def timestamp(self, Py_ssize_t i):
        """The timestamp of record ``i``."""
        if not 0 <= i < self.count:
            raise IndexError(f"record {i} of {self.count}")
        return (<int64_t *> self.stamps.data)[i]

    def build(self, int codec=0, level=None):
        """The record batch v2 of the records (base offset 0, no producer id)."""
        cdef Py_ssize_t n = self.count
        cdef const unsigned char[::1] payload
        if n == 0 or self.buf.data == NULL:
            raise _EncodeError("a record batch needs at least one record")
        if codec:
            records = PyBytes_FromStringAndSize(self.buf.data + 61, self.buf.len - 61)
            payload = _compression.compress(codec, records, level=level)
            batch = PyBytes_FromStringAndSize(NULL, 61 + payload.shape[0])
            if payload.shape[0]:
                memcpy(PyBytes_AS_STRING(batch) + 61, &payload[0], <size_t> payload.shape[0])
        else:
            batch = PyBytes_FromStringAndSize(self.buf.data, self.buf.len)
        _fill_batch_header(batch, n, 0, <int16_t> (codec & 0x07), self.base_ts, self.max_ts,
                           -1, -1, -1, -1)
        return batch

    def slice(self, Py_ssize_t lo, Py_ssize_t hi):
        """A builder of records ``lo``..``hi`` (their offsets and timestamps re-based)."""
        cdef RecordsBuilder out = RecordsBuilder()
        cdef Py_ssize_t i, pos = 61, body = 0, size, got
        cdef uint64_t length
        cdef const unsigned char *p
        cdef int64_t ts
        if not 0 <= lo < hi <= self.count or self.buf.data == NULL:
            raise IndexError(f"records {lo}..{hi} of {self.count} (or released)")
        out.has_headers = self.has_headers
        p = <const unsigned char *> self.buf.data
        for i in range(hi):
            got = _read_zigzag(p, pos, self.buf.len, &body)
            if i < lo:
                pos += got + body
                continue
            # a record: attributes, timestamp delta, offset delta, then the rest as it is
            size = pos + got
            size += 1
            size += _read_zigzag(p, size, self.buf.len, NULL)     # old timestamp delta
            size += _read_zigzag(p, size, self.buf.len, NULL)     # old offset delta
            ts = (<int64_t *> self.stamps.data)[i]
            out._append_raw(ts, p + size, pos + got + body - size)
            pos += got + body
        return out

    cdef int _append_raw(self, int64_t timestamp, const unsigned char *rest,
                         Py_ssize_t n) except -1:
        """A record whose key, value and headers are already encoded (``rest``)."""
        cdef char *p = self._begin(timestamp, n)
        memcpy(p, rest, <size_t> n)
        self._end(p + n, timestamp)
        return 0

    def release(self):
        """Free the records (after the batch is done); the timestamps stay."""
        gb_free(&self.buf)


cdef list _header_pairs(object headers):
    """[key bytes, value bytes or None, ...] of a sequence of (key, value) pairs."""
    cdef list out = []
    for pair in headers:
        hk, hv = pair
        if isinstance(hk, str):
            hk = (<str> hk).encode("utf-8")
        elif not PyBytes_CheckExact(hk):
            raise TypeError(f"a header key must be str or bytes, not {type(hk).__name__}")
        if hv is not None and not PyBytes_CheckExact(hv):
            raise TypeError(f"a header value must be bytes or None, not {type(hv).__name__}")
        out.append(hk)
        out.append(hv)
    return out


cdef inline char *_put_bytes(char *p, object v) noexcept:
    cdef Py_ssize_t n
    if v is None:
        return put_zigzag(p, -1)
    n = PyBytes_GET_SIZE(v)
    p = put_zigzag(p, n)
    memcpy(p, PyBytes_AS_STRING(v), <size_t> n)
    return p + n


cdef Py_ssize_t _read_zigzag(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end,
                             Py_ssize_t *value) except -1:
    """Bytes of the zigzag varint at ``pos`` (its value into ``value``): records this
    builder wrote, so always whole; checked all the same."""
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef Py_ssize_t start = pos
    while True:
        if pos >= end or shift > 63:
            raise _EncodeError("a record of the builder is cut short")
        v |= <uint64_t> (p[pos] & 0x7F) << shift
        shift += 7
        pos += 1
        if not p[pos - 1] & 0x80:
            break
    if value != NULL:
        value[0] = <Py_ssize_t> ((v >> 1) ^ -(<int64_t> (v & 1)))
    return pos - start
