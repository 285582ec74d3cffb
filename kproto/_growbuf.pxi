# Growable C output buffers and the binary columns built from them (included by _codec.pyx;
# the record decoder's output side).
#
# Every decoded value is appended to a GrowBuf (realloc grows big blocks in place on Linux, so
# the peak stays near the final size); at the end each block becomes a NumPy array without a
# copy (_OwnedBuffer). A BinOut is one Arrow binary column: int32 end offsets (int64 once the
# data passes 2 GiB) + data + a validity bitmap made at the first null, or, in binary_view
# mode, 16-byte views into the source buffers.

from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memset
from libc.stdint cimport int32_t, int64_t, uint8_t
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES

import numpy as _np
from kproto.columns import (
    BinaryColumn as _BinaryColumn, BinaryViewColumn as _BinaryViewColumn,
)

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


# ---------------------------------------------------------------- binary columns

cdef struct BinOut:
    GrowBuf offsets      # end offsets: int32, or int64 once ``wide`` (data past 2 GiB)
    GrowBuf data
    GrowBuf validity     # Arrow bitmap, started at the first null
    GrowBuf views        # binary_view mode: 16 bytes a value
    Py_ssize_t rows
    Py_ssize_t nulls
    bint wide


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

