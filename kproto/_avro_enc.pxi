# The Avro encoder loop (included by _avro.pyx): the decoder's mirror. A program compiled
# by kproto/formats/_avro_encode.py walks each row through its steps, reading Arrow sources
# (validity, offsets, values, each indexed from 0 for its array) and appending the row's
# datum to one growable buffer, GIL released. Twin: run_encode in kproto/_pure/avro.py,
# whose numbers these are (tests/test_avro_core.py checks them).

cdef enum:
    E_NULL, E_BOOL, E_INT, E_LONG, E_FLOAT, E_DOUBLE, E_BYTES, E_FIXED, E_DEC_BYTES,
    E_DEC_FIXED, E_ENUM, E_ARRAY, E_MAP, E_RECORD, E_DEFAULT, E_NULLABLE, E_BRANCH, E_UNION,
    E_COUNT

cdef enum:
    EERR_NONE, EERR_NULL, EERR_INT, EERR_BRANCH, EERR_DECIMAL, EERR_TOO_BIG, EERR_VALUE,
    EERR_NOMEM

cdef enum:
    REFUSED = 2                   # a validity byte: a value that cannot be written exactly

ENCODE_OPS = E_COUNT
ENCODE_ERRORS = EERR_NOMEM - 1
ENCODE_REFUSED = REFUSED


cdef struct Src:
    const uint8_t *valid          # NULL: every value is valid
    const int64_t *offsets
    const unsigned char *data
    int64_t width


cdef struct Enc:
    const int64_t *nodes          # 6 int64 a step
    const int64_t *table
    Src *srcs
    const unsigned char *defaults
    GrowBuf out
    int err
    int64_t err_node
    int64_t err_value


cdef inline int efail(Enc *e, int code, int64_t node, int64_t value) noexcept nogil:
    e.err = code
    e.err_node = node
    e.err_value = value
    return -1


cdef inline int eput(Enc *e, const void *src, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t need = e.out.len + n
    cdef Py_ssize_t cap
    cdef char *p
    if need > e.out.cap:
        cap = e.out.cap * 2 if e.out.cap else 4096
        while cap < need:
            cap *= 2
        p = <char *> realloc(e.out.data, <size_t> cap)
        if p == NULL:
            return efail(e, EERR_NOMEM, 0, cap)
        e.out.data = p
        e.out.cap = cap
    if n:
        memcpy(e.out.data + e.out.len, src, <size_t> n)
    e.out.len = need
    return 0


cdef inline int eput_long(Enc *e, int64_t v) noexcept nogil:
    cdef unsigned char buf[10]
    cdef uint64_t u = (<uint64_t> v << 1) ^ <uint64_t> (v >> 63)
    cdef int n = 0
    while u > 0x7F:
        buf[n] = <unsigned char> ((u & 0x7F) | 0x80)
        u >>= 7
        n += 1
    buf[n] = <unsigned char> u
    return eput(e, buf, n + 1)


cdef inline bint is_valid(const Src *s, int64_t i) noexcept nogil:
    return s.valid == NULL or s.valid[i] != 0


cdef int eput_decimal(Enc *e, const Src *s, int64_t i, int64_t node, int64_t fixed
                      ) noexcept nogil:
    """The little-endian two's complement value (16 or 32 bytes) as big-endian bytes: the
    fewest that hold it (Java's BigInteger.toByteArray), or ``fixed`` bytes."""
    cdef const unsigned char *v = s.data + s.width * i
    cdef unsigned char fill = 0xFF if v[s.width - 1] & 0x80 else 0x00
    cdef int64_t keep = s.width, k
    cdef unsigned char buf[32]
    while keep > 1 and v[keep - 1] == fill and (v[keep - 2] & 0x80) == (fill & 0x80):
        keep -= 1                   # drop sign-extension bytes that the next byte repeats
    if fixed >= 0:
        if keep > fixed:
            return efail(e, EERR_DECIMAL, node, fixed)
        for k in range(fixed - keep):
            if eput(e, &fill, 1) < 0:
                return -1
    elif eput_long(e, keep) < 0:
        return -1
    for k in range(keep):
        buf[k] = v[keep - 1 - k]
    return eput(e, buf, keep)


cdef int enc(Enc *e, int64_t index, int64_t i) noexcept nogil:
    cdef const int64_t *node = e.nodes + 6 * index
    cdef int64_t op = node[0], a = node[2], b = node[3], c = node[4], d = node[5]
    cdef const Src *s = &e.srcs[node[1]] if node[1] >= 0 else NULL
    cdef int64_t v, start, end, j, k
    cdef int32_t v32
    cdef unsigned char zero = 0
    cdef double f64
    cdef float f32
    if op == E_DEFAULT:
        return eput(e, e.defaults + c, d)
    if op == E_NULLABLE or op == E_BRANCH:
        if is_valid(s, i):
            if eput_long(e, d if op == E_NULLABLE else c) < 0:
                return -1
            return enc(e, a, i)
        k = c if op == E_NULLABLE else d
        if k < 0:
            return efail(e, EERR_NULL, index, 0)
        return eput_long(e, k)
    if op == E_NULL:
        return 0
    if op != E_UNION and not is_valid(s, i):
        return efail(e, EERR_NULL, index, 0)
    if s != NULL and s.valid != NULL and s.valid[i] == REFUSED:
        return efail(e, EERR_VALUE, index, i)
    if op == E_LONG or op == E_INT:
        memcpy(&v, s.data + 8 * i, 8)
        if op == E_INT and (v < -2147483648 or v > 2147483647):
            return efail(e, EERR_INT, index, v)
        return eput_long(e, v)
    if op == E_BYTES:
        start = s.offsets[i]
        end = s.offsets[i + 1]
        if eput_long(e, end - start) < 0:
            return -1
        return eput(e, s.data + start, end - start)
    if op == E_DOUBLE:
        return eput(e, s.data + 8 * i, 8)
    if op == E_FLOAT:
        memcpy(&f64, s.data + 8 * i, 8)
        f32 = <float> f64
        return eput(e, &f32, 4)
    if op == E_BOOL:
        return eput(e, s.data + i, 1)
    if op == E_ENUM:
        memcpy(&v32, s.data + 4 * i, 4)
        return eput_long(e, v32)
    if op == E_FIXED:
        return eput(e, s.data + c * i, c)
    if op == E_DEC_BYTES:
        return eput_decimal(e, s, i, index, -1)
    if op == E_DEC_FIXED:
        return eput_decimal(e, s, i, index, c)
    if op == E_RECORD:
        for k in range(b):
            if enc(e, e.table[a + k], i) < 0:
                return -1
        return 0
    if op == E_ARRAY or op == E_MAP:
        start = s.offsets[i]
        end = s.offsets[i + 1]
        if end > start:
            if eput_long(e, end - start) < 0:
                return -1
            for j in range(start, end):
                if op == E_MAP:
                    k = e.srcs[c].offsets[j + 1] - e.srcs[c].offsets[j]
                    if eput_long(e, k) < 0 or \
                            eput(e, e.srcs[c].data + e.srcs[c].offsets[j], k) < 0:
                        return -1
                if enc(e, a, j) < 0:
                    return -1
        return eput(e, &zero, 1)
    # E_UNION: the value's branch pair (schema branch, step) and its index in the child
    memcpy(&k, s.data + 8 * i, 8)
    if k < 0 or k >= 2 * b:
        return efail(e, EERR_BRANCH, index, k)
    if eput_long(e, e.table[a + k]) < 0:
        return -1
    return enc(e, e.table[a + k + 1], s.offsets[i])


def run_encode(const int64_t[:, ::1] nodes not None, const int64_t[::1] table not None,
               int64_t root, bytes defaults not None, list valid not None,
               list offsets not None, list data not None, list widths not None,
               Py_ssize_t n, bytes prefix not None, bint holds_null):
    """Encode rows ``0..n-1`` of the root source: (data, int32 offsets, validity bitmap or
    None, null count, the error as (row, code, node, value) or None). A row that is null
    where the schema holds no null is a null value, not a datum."""
    cdef Py_ssize_t nsrc = len(widths), j, i
    cdef Enc e
    cdef list keep = []
    cdef const unsigned char[::1] mv
    cdef const uint8_t[::1] vv
    cdef const int64_t[::1] ov
    cdef GrowBuf ends, bits
    cdef int32_t end32
    cdef int64_t root_src = nodes[root, 1], nulls = 0
    cdef const unsigned char *pre = <const unsigned char *> prefix
    cdef Py_ssize_t npre = len(prefix)
    cdef int64_t err_row = -1
    if nodes.shape[1] != 6 or len(valid) != nsrc or len(offsets) != nsrc or len(data) != nsrc:
        raise ValueError("run_encode: inconsistent tables")
    memset(&e, 0, sizeof(Enc))
    memset(&ends, 0, sizeof(GrowBuf))
    memset(&bits, 0, sizeof(GrowBuf))
    e.srcs = <Src *> calloc(nsrc + 1, sizeof(Src))
    try:
        if e.srcs == NULL:
            raise MemoryError()
        for j in range(nsrc):
            e.srcs[j].width = widths[j]
            if valid[j] is not None:
                vv = valid[j]
                keep.append(vv)
                e.srcs[j].valid = &vv[0] if vv.shape[0] else NULL
            if offsets[j] is not None:
                ov = offsets[j]
                keep.append(ov)
                e.srcs[j].offsets = &ov[0] if ov.shape[0] else NULL
            mv = _u8(data[j])
            keep.append(mv)
            e.srcs[j].data = &mv[0] if mv.shape[0] else NOTHING
        e.nodes = &nodes[0, 0]
        e.table = &table[0]
        e.defaults = <const unsigned char *> defaults if len(defaults) else NOTHING
        ends.data = <char *> malloc(4 * (n + 1))
        bits.data = <char *> calloc((n + 7) // 8 + 1, 1)
        if ends.data == NULL or bits.data == NULL:
            raise MemoryError()
        (<int32_t *> ends.data)[0] = 0
        with nogil:
            for i in range(n):
                if not holds_null and root_src >= 0 and not is_valid(&e.srcs[root_src], i):
                    nulls += 1
                else:
                    bits.data[i >> 3] = <char> (<uint8_t> bits.data[i >> 3] | (1 << (i & 7)))
                    if eput(&e, pre, npre) < 0 or enc(&e, root, i) < 0:
                        err_row = i
                        break
                    if e.out.len > I32_MAX:
                        efail(&e, EERR_TOO_BIG, root, 0)
                        err_row = i
                        break
                end32 = <int32_t> e.out.len
                (<int32_t *> ends.data)[i + 1] = end32
        if e.err == EERR_NOMEM:
            raise MemoryError(f"cannot grow the Avro encode buffer to {e.err_value} bytes")
        if err_row >= 0:
            return None, None, None, 0, (err_row, e.err, e.err_node, e.err_value)
        ends.len = 4 * (n + 1)
        bits.len = (n + 7) // 8
        validity = gb_to_numpy(&bits, _np.uint8) if nulls else None
        return (gb_to_numpy(&e.out, _np.uint8), gb_to_numpy(&ends, _np.int32), validity,
                nulls, None)
    finally:
        free(e.srcs)
        gb_free(&e.out)
        gb_free(&ends)
        gb_free(&bits)
