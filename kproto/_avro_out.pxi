# The Avro decoder's output side (included by _avro.pyx): growable C buffers handed to
# NumPy without a copy, the per-slot Out (validity bitmap started at the first null, data,
# int32 offsets), the loop's State, and the appends that never raise (we hold no GIL:
# errors and ERR_NOMEM go into the State).

# ---------------------------------------------------------------- growable buffers
# The minimum of _growbuf.pxi's growable buffers, copied rather than included: that file
# belongs to _codec's record decoder (and its block pool) and changes with it.

cdef struct GrowBuf:
    char *data
    Py_ssize_t len
    Py_ssize_t cap


cdef void gb_free(GrowBuf *b) noexcept nogil:
    free(b.data)
    b.data = NULL
    b.len = b.cap = 0


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

cdef struct Out:
    GrowBuf valid       # validity bitmap, started at the first null
    GrowBuf data
    GrowBuf offs        # int32 offsets (binary, list, map, union)
    int64_t length
    int64_t nulls
    int64_t kind
    int64_t width
    int64_t first       # children: table[first:first + count]
    int64_t count


cdef struct State:
    const int64_t *nodes
    const int64_t *table
    Out *outs
    const unsigned char *p
    const unsigned char *end
    const unsigned char *defaults
    int64_t budget
    int err
    int64_t err_a
    int64_t err_b


# ---------------------------------------------------------------- errors and buffers

cdef int fail(State *s, int code, int64_t a, int64_t b) noexcept nogil:
    s.err = code
    s.err_a = a
    s.err_b = b
    return -1


cdef int grow(State *s, GrowBuf *b, Py_ssize_t extra) noexcept nogil:
    """Room for ``extra`` more bytes; ERR_NOMEM (not an exception: we hold no GIL)."""
    cdef Py_ssize_t need = b.len + extra
    cdef Py_ssize_t cap = b.cap * 2 if b.cap else 256
    cdef char *p
    while cap < need:
        cap *= 2
    p = <char *> realloc(b.data, <size_t> cap)
    if p == NULL:
        return fail(s, ERR_NOMEM, cap, 0)
    b.data = p
    b.cap = cap
    return 0


cdef inline int put(State *s, GrowBuf *b, const void *src, Py_ssize_t n) noexcept nogil:
    if b.len + n > b.cap and grow(s, b, n) < 0:
        return -1
    if n:
        memcpy(b.data + b.len, src, <size_t> n)
    b.len += n
    return 0


cdef inline int put_i32(State *s, GrowBuf *b, int64_t v) noexcept nogil:
    if v > I32_MAX:
        return fail(s, ERR_TOO_BIG, v, 0)
    if b.len + 4 > b.cap and grow(s, b, 4) < 0:
        return -1
    (<int32_t *> (b.data + b.len))[0] = <int32_t> v
    b.len += 4
    return 0


cdef int set_bit(State *s, Out *o, bint valid) noexcept nogil:
    """Keep the bitmap for row ``o.length`` (created at the first null, all-valid before)."""
    cdef int64_t row = o.length
    cdef Py_ssize_t byte = <Py_ssize_t> (row >> 3)
    if not valid:
        o.nulls += 1
        if o.valid.len == 0:
            if grow(s, &o.valid, byte + 1) < 0:
                return -1
            memset(o.valid.data, 0xFF, <size_t> (byte + 1))
            o.valid.len = byte + 1
    while o.valid.len <= byte:
        if o.valid.len + 1 > o.valid.cap and grow(s, &o.valid, 1) < 0:
            return -1
        o.valid.data[o.valid.len] = 0
        o.valid.len += 1
    if valid:
        o.valid.data[byte] = <char> ((<uint8_t> o.valid.data[byte]) | (1 << (row & 7)))
    else:
        o.valid.data[byte] = <char> ((<uint8_t> o.valid.data[byte]) & ~(1 << (row & 7)))
    return 0


cdef inline int mark(State *s, Out *o) noexcept nogil:
    """One more valid value in ``o``."""
    if o.valid.len and set_bit(s, o, True) < 0:
        return -1
    o.length += 1
    return 0


cdef int append_null(State *s, int64_t slot) noexcept nogil:
    cdef Out *o = &s.outs[slot]
    cdef int64_t i, child
    cdef int8_t tag = 0
    cdef char zeros[32]
    if o.kind == K_NULL:
        o.length += 1
        return 0
    if o.kind == K_UNION:
        child = s.table[o.first]
        if put(s, &o.data, &tag, 1) < 0 or put_i32(s, &o.offs, s.outs[child].length) < 0:
            return -1
        if append_null(s, child) < 0:
            return -1
        o.length += 1
        return 0
    if o.kind == K_FIXED or o.kind == K_BOOL:
        if o.data.len + o.width > o.data.cap and grow(s, &o.data, o.width) < 0:
            return -1
        memset(o.data.data + o.data.len, 0, <size_t> o.width)
        o.data.len += o.width
    elif o.kind == K_BINARY:
        if put_i32(s, &o.offs, o.data.len) < 0:
            return -1
    elif o.kind == K_LIST or o.kind == K_MAP:
        if put_i32(s, &o.offs, s.outs[s.table[o.first]].length) < 0:
            return -1
    else:
        for i in range(o.count):
            if append_null(s, s.table[o.first + i]) < 0:
                return -1
    if set_bit(s, o, False) < 0:
        return -1
    o.length += 1
    return 0
