# Growable C output buffers and the binary columns built from them (included by _codec.pyx;
# the record decoder's output side).
#
# Every decoded value is appended to a GrowBuf (realloc grows big blocks in place on Linux, so
# the peak stays near the final size); at the end each block becomes a NumPy array without a
# copy (_OwnedBuffer). A BinOut is one Arrow binary column: int32 end offsets (int64 once the
# data passes 2 GiB) + data + a validity bitmap made at the first null, or, in binary_view
# mode, 16-byte views into the source buffers.
#
# Blocks of POOL_MIN bytes or more are recycled: when NumPy lets go of one, it goes to a small
# pool, and the next decode's buffers are taken from there. A steady consumer decodes fetch
# after fetch of about the same size, and malloc serves blocks of tens of MB from fresh
# mappings (unmapped again on free): every decode page-faulted all of its output, about half
# of its time (perf, issue 17). From the pool it writes into pages that are already mapped.

from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memset
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES

import numpy as _np
from kproto.columns import (
    BinaryColumn as _BinaryColumn, BinaryViewColumn as _BinaryViewColumn,
)

# ---------------------------------------------------------------- recycled blocks

cdef extern from *:
    """
    /* The pool's lock is only ever tried, never waited for: a thread that finds it taken
       uses malloc and free instead, so the pool can neither block a decoder nor deadlock
       (a fork while another thread holds it only leaves the child without a pool). */
    static char kp_pool_busy = 0;
    static inline int kp_pool_trylock(void) {
        return !__atomic_test_and_set(&kp_pool_busy, __ATOMIC_ACQUIRE); }
    static inline void kp_pool_unlock(void) { __atomic_clear(&kp_pool_busy, __ATOMIC_RELEASE); }
    """
    bint kp_pool_trylock() nogil
    void kp_pool_unlock() nogil

cdef enum:
    POOL_SLOTS = 32
    POOL_MIN = 256 * 1024       # smaller blocks come from malloc's free lists, already warm

cdef char *pool_block[POOL_SLOTS]
cdef Py_ssize_t pool_size[POOL_SLOTS]
cdef Py_ssize_t pool_count = 0
cdef Py_ssize_t pool_bytes = 0
cdef Py_ssize_t pool_limit = 128 * 1024 * 1024


cdef char *pool_take(Py_ssize_t want, Py_ssize_t least, Py_ssize_t *size) noexcept nogil:
    """The smallest pooled block of at least ``want`` bytes, else the largest of at least
    ``least``; NULL if none (or the pool is busy). Its size goes to ``size``."""
    global pool_count, pool_bytes
    cdef Py_ssize_t i, best = -1
    cdef char *p
    if want < POOL_MIN or not kp_pool_trylock():
        return NULL
    for i in range(pool_count):
        if pool_size[i] >= want and (best < 0 or pool_size[i] < pool_size[best]):
            best = i
    if best < 0:
        for i in range(pool_count):
            if pool_size[i] >= least and (best < 0 or pool_size[i] > pool_size[best]):
                best = i
    p = NULL
    if best >= 0:
        p = pool_block[best]
        size[0] = pool_size[best]
        pool_bytes -= pool_size[best]
        pool_count -= 1
        pool_block[best] = pool_block[pool_count]
        pool_size[best] = pool_size[pool_count]
    kp_pool_unlock()
    return p


# glibc learns that a program uses big blocks from their frees: freeing a mapped block raises
# the size below which it allocates from its heap to that block's, and how much freed heap it
# keeps to twice that (up to 32 and 64 MiB). Before the pool, a decode's frees did that, and
# the decompressors' per-batch buffers came from the heap, warm; with every big block kept,
# binary_view's decompressed batches (kept with the columns, freed together) were trimmed
# from the heap and faulted in again at every decode (6,200 faults a decode, 40% slower).
# So a block of 2 to 32 MiB at least twice the size of any freed before is freed, not kept:
# a few times in a process, as the first decodes' frees did before the pool.
cdef Py_ssize_t pool_primed = 1024 * 1024


cdef void pool_give(char *p, Py_ssize_t size) noexcept nogil:
    """Keep a block of ``size`` bytes (from malloc) for the next decode, or free it."""
    global pool_count, pool_bytes, pool_primed
    cdef bint kept = False
    if p == NULL:
        return
    if 2 * pool_primed <= size <= 32 * 1024 * 1024:
        pool_primed = size
        free(p)
        return
    if size >= POOL_MIN and kp_pool_trylock():
        if pool_count < POOL_SLOTS and pool_bytes + size <= pool_limit:
            pool_block[pool_count] = p
            pool_size[pool_count] = size
            pool_count += 1
            pool_bytes += size
            kept = True
        kp_pool_unlock()
    if not kept:
        free(p)


def _buffer_pool(max_bytes=None):
    """The recycling pool of decode output blocks: ``(limit, bytes held, blocks held)``
    (``kproto.records.buffer_pool`` is the public face).

    ``max_bytes`` sets the limit (0 turns the pool off and frees what it holds).
    """
    global pool_limit
    cdef char *p
    cdef Py_ssize_t size
    if max_bytes is not None:
        pool_limit = max(0, max_bytes)
        while pool_bytes > pool_limit:
            size = 0
            p = pool_take(POOL_MIN, POOL_MIN, &size)   # the smallest first
            if p == NULL:
                break
            free(p)
    return pool_limit, pool_bytes, pool_count


# ---------------------------------------------------------------- growable output buffers

cdef struct GrowBuf:
    char *data
    Py_ssize_t len
    Py_ssize_t cap


cdef int gb_reserve(GrowBuf *b, Py_ssize_t extra) except -1 nogil:
    cdef Py_ssize_t need = b.len + extra
    cdef Py_ssize_t cap, size = 0
    cdef char *p
    if need <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 4096
    while cap < need:
        cap *= 2
    p = pool_take(cap, need, &size)
    if p != NULL:                # a warm block: copy what is used, recycle the old one
        if b.len:
            memcpy(p, b.data, <size_t> b.len)
        pool_give(b.data, b.cap)
        b.data = p
        b.cap = size
        return 0
    # realloc: glibc moves big blocks with mremap, without copying or touching them
    p = <char *> realloc(b.data, <size_t> cap)
    if p == NULL:
        with gil:
            raise MemoryError(f"cannot grow a decode buffer to {cap} bytes")
    b.data = p
    b.cap = cap
    return 0


cdef int gb_hint(GrowBuf *b, Py_ssize_t want) except -1 nogil:
    """Start an empty buffer with room for about ``want`` bytes: a pooled block of at least
    a quarter of that if there is one (it grows later if the data needs it), else a fresh
    one (virtual memory is cheap; regrowing is not)."""
    cdef Py_ssize_t size = 0
    cdef char *p = pool_take(want, want // 4, &size)
    if p == NULL:
        return gb_reserve(b, want)
    b.data = p
    b.cap = size
    return 0


cdef void gb_free(GrowBuf *b) noexcept nogil:
    pool_give(b.data, b.cap)
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
        pool_give(self.data, self.size)

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
    elif b.len < POOL_MIN <= b.cap:
        # a little data in a block the pool keeps (header columns reserve for the most
        # headers a batch could hold): copy it out and recycle the block. Shrinking it in
        # place would give its pages back and free the rest as a block too small to keep,
        # so every decode would map and fault its reservations afresh (4 maps, unmaps and
        # remaps a decode of 1 MB; a third of its time)
        p = <char *> malloc(<size_t> b.len)
        if p == NULL:
            p = b.data
        else:
            memcpy(p, b.data, <size_t> b.len)
            pool_give(b.data, b.cap)
    elif b.len < b.cap:
        p = <char *> realloc(b.data, <size_t> b.len)
        if p == NULL:
            p = b.data
    owner.data = p
    owner.size = b.len
    b.data = NULL
    b.len = b.cap = 0
    # ndarray(buffer=owner) has the owner as its base, where frombuffer wraps it in a
    # memoryview and a managed buffer: two objects the cyclic GC tracks per column, ~290
    # of them alive (and so promoted) at every collection of a consumer's poll loop with
    # small Fetch answers, enough to set off a full collection every ~12 of them. The
    # owner has no Python fields: untracked.
    size = _ITEMSIZE.get(dtype)
    if size is None:
        size = _ITEMSIZE[dtype] = _np.dtype(dtype).itemsize
    return _np.ndarray(owner.size // size, dtype, owner)


cdef dict _ITEMSIZE = {}


# ---------------------------------------------------------------- binary columns

cdef struct BinOut:
    GrowBuf offsets      # end offsets: int32, or int64 once ``wide`` (data past 2 GiB)
    GrowBuf data
    GrowBuf validity     # Arrow bitmap, started at the first null (see bin_cover)
    GrowBuf views        # binary_view mode: 16 bytes a value
    Py_ssize_t rows
    Py_ssize_t nulls
    bint wide


cdef int bin_init(BinOut *o, Py_ssize_t rows, Py_ssize_t data, bint views) except -1:
    """Empty column with room for ``rows`` values and ``data`` bytes (a hint, not a limit)."""
    memset(o, 0, sizeof(BinOut))
    if views:
        gb_hint(&o.views, 16 * rows)
    else:
        gb_hint(&o.data, data)
        gb_hint(&o.offsets, 4 * (rows + 1))
        gb_put_i32(&o.offsets, 0)
    return 0


cdef void bin_free(BinOut *o) noexcept nogil:
    gb_free(&o.offsets)
    gb_free(&o.validity)
    gb_free(&o.data)
    gb_free(&o.views)


# The bitmap, once a null has started it, is kept a step ahead of the rows: every row up to
# the ones reserved (bin_cover) is already marked valid, so appending a non-null value never
# touches it and a null only clears its bit. bin_to_column trims it to the rows.

cdef int bin_cover(BinOut *o, Py_ssize_t rows) except -1 nogil:
    """If the column has a bitmap, mark rows up to ``rows`` valid ahead of time."""
    cdef Py_ssize_t need = (rows + 7) >> 3
    if o.validity.len == 0 or need <= o.validity.len:
        return 0
    gb_reserve(&o.validity, need - o.validity.len)
    memset(o.validity.data + o.validity.len, 0xFF, <size_t> (need - o.validity.len))
    o.validity.len = need
    return 0


cdef int bin_start_validity(BinOut *o, Py_ssize_t rows) except -1 nogil:
    """The first null: a bitmap with rows up to ``rows`` (at least the current one) valid."""
    cdef Py_ssize_t need = ((rows if rows > o.rows else o.rows + 1) + 7) >> 3
    gb_reserve(&o.validity, need)
    memset(o.validity.data, 0xFF, <size_t> need)
    o.validity.len = need
    return 0


cdef inline void bin_clear_valid(BinOut *o) noexcept nogil:
    """Row ``o.rows`` is null (the bitmap covers it)."""
    o.validity.data[o.rows >> 3] = <char> ((<uint8_t> o.validity.data[o.rows >> 3])
                                           & ~(1 << (o.rows & 7)))
    o.nulls += 1


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


cdef int bin_append(BinOut *o, const unsigned char *p, Py_ssize_t n, bint views,
                    int32_t buf_index, Py_ssize_t buf_pos) except -1 nogil:
    """Append a value (n == -1: null), any case, checking room. In views mode, reference it
    in buffer ``buf_index`` at ``buf_pos`` instead of copying (up to 12 bytes inlined)."""
    if n < 0 and o.validity.len == 0:
        bin_start_validity(o, o.rows + 1)
    elif o.validity.len:
        bin_cover(o, o.rows + 1)
    if n < 0:
        bin_clear_valid(o)
    if views:
        if o.views.len + 16 > o.views.cap:
            gb_reserve(&o.views, 16)
        view_put(o, p, n, buf_index, buf_pos)
        return 0
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


# Appends into room already reserved (no checks): the record loop's.

cdef inline void copy_put(BinOut *o, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """Copy mode, int32 offsets: a value of ``n >= 0`` bytes."""
    if n > 0:
        memcpy(o.data.data + o.data.len, p, <size_t> n)
        o.data.len += n
    (<int32_t *> (o.offsets.data + o.offsets.len))[0] = <int32_t> o.data.len
    o.offsets.len += 4
    o.rows += 1


cdef inline void view_put(BinOut *o, const unsigned char *p, Py_ssize_t n, int32_t buf_index,
                          Py_ssize_t buf_pos) noexcept nogil:
    """Views mode: the 16-byte view of a value of ``n`` bytes (a null: ``n < 0``, all zero)."""
    cdef uint64_t *v = <uint64_t *> (o.views.data + o.views.len)
    cdef uint32_t prefix = 0
    if n > 12:
        memcpy(&prefix, p, 4)
        v[0] = (<uint64_t> <uint32_t> n) | ((<uint64_t> prefix) << 32)
        v[1] = (<uint64_t> <uint32_t> buf_index) | ((<uint64_t> <uint32_t> buf_pos) << 32)
    else:
        v[0] = 0
        v[1] = 0
        if n > 0:
            (<int32_t *> v)[0] = <int32_t> n
            memcpy((<char *> v) + 4, p, <size_t> n)
    o.views.len += 16
    o.rows += 1


cdef object bin_to_column(BinOut *o, bint views, list buffers):
    validity = None
    if o.nulls:     # trim the bitmap kept ahead of the rows; padding bits 0, as Arrow writes
        o.validity.len = (o.rows + 7) >> 3
        if o.rows & 7:
            o.validity.data[o.validity.len - 1] = <char> (
                (<uint8_t> o.validity.data[o.validity.len - 1]) & ((1 << (o.rows & 7)) - 1))
        validity = gb_to_numpy(&o.validity, _np.uint8)
    if views:
        return _BinaryViewColumn(gb_to_numpy(&o.views, _np.uint8), buffers, validity, o.nulls)
    offsets = gb_to_numpy(&o.offsets, _np.int64 if o.wide else _np.int32)
    return _BinaryColumn(offsets, gb_to_numpy(&o.data, _np.uint8), validity, o.nulls)

