# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
#
# kproto._avro: the Avro decoder loop. It runs a program compiled from a (writer, reader)
# schema pair (kproto/formats/_avro_program.py: the tables, op codes and slot kinds) over
# one value per row, with the GIL released, appending straight into growable C buffers
# laid out as Arrow wants them (validity bitmaps, int32 offsets, data). Python then wraps
# those buffers into pyarrow arrays without a copy. No Python object is made per value.
#
# Every length and count is checked against the bytes left in the value before anything
# is read or allocated (a count of items that take no bytes draws on a per-value budget),
# nesting is bounded (MAX_DEPTH), and a value must be consumed exactly. Bad data never
# raises inside the loop: it reports (row, code, a, b, byte offset) like its pure twin,
# kproto/_pure/avro.py, whose run() has the same signature and results.
"""Avro decoder loop (Cython twin of ``kproto._pure.avro``): see ``run``."""

cimport cython
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT64_MIN
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES

import numpy as _np

# ---- must equal kproto/_pure/avro.py's numbers (tests/test_avro_core.py checks OPS etc.)
cdef enum:
    OP_NULL, OP_NULLS_INTO, OP_BOOL, OP_INT, OP_INT_TO_LONG, OP_INT_TO_FLOAT,
    OP_INT_TO_DOUBLE, OP_LONG, OP_LONG_TO_FLOAT, OP_LONG_TO_DOUBLE, OP_FLOAT,
    OP_FLOAT_TO_DOUBLE, OP_DOUBLE, OP_BYTES, OP_STRING, OP_FIXED, OP_DEC_BYTES, OP_DEC_FIXED,
    OP_ENUM, OP_ARRAY, OP_MAP, OP_RECORD, OP_UNION, OP_TAG, OP_DEFAULT, OP_SKIP_VARINT,
    OP_SKIP_BYTES, OP_SKIP_N, OP_SKIP_ARRAY, OP_SKIP_MAP, OP_SKIP_RECORD, OP_SKIP_UNION,
    OP_COUNT

cdef enum:
    K_NULL, K_FIXED, K_BOOL, K_BINARY, K_LIST, K_MAP, K_STRUCT, K_UNION, K_COUNT

cdef enum:
    ERR_NONE, ERR_TRUNCATED, ERR_VARINT, ERR_NEG_LENGTH, ERR_BOOL, ERR_UTF8, ERR_ENUM,
    ERR_BRANCH, ERR_UNREADABLE_BRANCH, ERR_ENUM_SYMBOL, ERR_DECIMAL, ERR_COUNT, ERR_TRAILING,
    ERR_DEPTH, ERR_SHORT, ERR_TOO_BIG, ERR_NOMEM

cdef enum:
    MAX_DEPTH_ = 500
    ZERO_SIZE_ITEMS_ = 1 << 16
    I32_MAX = 0x7FFFFFFF

cdef const unsigned char *NOTHING = <const unsigned char *> b""   # data of empty buffers

#: The numbering this module was built with (compared with the pure twin's by the tests).
OPS = OP_COUNT
KINDS = K_COUNT
ERRORS = ERR_NOMEM - 1
MAX_DEPTH = MAX_DEPTH_
ZERO_SIZE_ITEMS = ZERO_SIZE_ITEMS_


include "_avro_out.pxi"


# ---------------------------------------------------------------- reading

cdef int read_long(State *s, int64_t *out) noexcept nogil:
    cdef uint64_t u = 0, byte
    cdef int shift = 0, i
    if s.p < s.end and s.p[0] < 0x80:      # one byte: most counts, lengths, small ints
        u = s.p[0]
        s.p += 1
        out[0] = <int64_t> ((u >> 1) ^ (0 - (u & 1)))
        return 0
    for i in range(10):
        if s.p >= s.end:
            return fail(s, ERR_TRUNCATED, 1, 0)
        byte = s.p[0]
        s.p += 1
        if i == 9 and byte > 0x01:
            return fail(s, ERR_VARINT, 0, 0)
        u |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    out[0] = <int64_t> ((u >> 1) ^ (0 - (u & 1)))
    return 0


cdef int read_int(State *s, int32_t *out) noexcept nogil:
    cdef uint32_t u = 0, byte
    cdef int shift = 0, i
    for i in range(5):
        if s.p >= s.end:
            return fail(s, ERR_TRUNCATED, 1, 0)
        byte = s.p[0]
        s.p += 1
        if i == 4 and byte > 0x0F:
            return fail(s, ERR_VARINT, 0, 0)
        u |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    out[0] = <int32_t> ((u >> 1) ^ (0 - (u & 1)))
    return 0


cdef inline int read_length(State *s, int64_t *n) noexcept nogil:
    if read_long(s, n) < 0:
        return -1
    if n[0] < 0:
        return fail(s, ERR_NEG_LENGTH, n[0], 0)
    if n[0] > s.end - s.p:
        return fail(s, ERR_TRUNCATED, n[0], s.end - s.p)
    return 0


cdef inline int take(State *s, int64_t n) noexcept nogil:
    if n > s.end - s.p:
        return fail(s, ERR_TRUNCATED, n, s.end - s.p)
    return 0


cdef bint utf8_valid(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), as
    Python's decoder; ASCII eight bytes at a time."""
    cdef Py_ssize_t i = 0
    cdef uint64_t word
    cdef unsigned char c, c1
    cdef int more
    while i < n:
        if i + 8 <= n:
            memcpy(&word, p + i, 8)
            if (word & 0x8080808080808080ULL) == 0:
                i += 8
                continue
        c = p[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2 or c > 0xF4:
            return False
        more = 1 if c < 0xE0 else (2 if c < 0xF0 else 3)
        if i + more >= n:
            return False
        c1 = p[i + 1]
        if (c1 & 0xC0) != 0x80:
            return False
        if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 > 0x9F) or \
                (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 > 0x8F):
            return False
        if more >= 2 and (p[i + 2] & 0xC0) != 0x80:
            return False
        if more == 3 and (p[i + 3] & 0xC0) != 0x80:
            return False
        i += more + 1
    return True


cdef int read_binary(State *s, Out *o, bint text) noexcept nogil:
    cdef int64_t n
    if read_length(s, &n) < 0:
        return -1
    if text and not utf8_valid(s.p, <Py_ssize_t> n):
        return fail(s, ERR_UTF8, 0, 0)
    if put(s, &o.data, s.p, <Py_ssize_t> n) < 0 or put_i32(s, &o.offs, o.data.len) < 0:
        return -1
    s.p += n
    return mark(s, o)


cdef int read_decimal(State *s, Out *o, int64_t n, const int64_t *row) noexcept nogil:
    """``n`` big-endian two's complement bytes -> a little-endian decimal of ``row[0]``
    bytes, whose magnitude must stay under 10**precision (its limbs: row[2:])."""
    cdef int64_t width = row[0], i, k
    cdef int64_t limbs = width // 8
    cdef uint64_t v[4]
    cdef uint64_t mag[4]
    cdef uint64_t carry, x, lim
    cdef unsigned char fill
    cdef const unsigned char *p = s.p
    if take(s, n) < 0:
        return -1
    fill = 0xFF if n and (p[0] & 0x80) else 0x00
    for i in range(n - width):                 # bytes past the width: sign fill only
        if p[i] != fill:
            return fail(s, ERR_DECIMAL, row[1], 0)
    memset(v, fill, sizeof(v))
    for i in range(n if n < width else width):     # byte k from the right end
        k = i
        (<unsigned char *> v)[k] = p[n - 1 - i]
    if n > width and ((<unsigned char *> v)[width - 1] & 0x80) != (fill & 0x80):
        return fail(s, ERR_DECIMAL, row[1], 0)
    # magnitude (two's complement negation when negative), compared with 10**precision
    carry = 1
    for i in range(limbs):
        if fill:
            x = ~v[i] + carry
            carry = 1 if (carry and x == 0) else 0
            mag[i] = x
        else:
            mag[i] = v[i]
    for i in range(limbs - 1, -1, -1):
        lim = <uint64_t> row[2 + i]
        if mag[i] != lim:
            if mag[i] > lim:
                return fail(s, ERR_DECIMAL, row[1], 0)
            break
        if i == 0:
            return fail(s, ERR_DECIMAL, row[1], 0)   # equal to 10**precision
    s.p += n
    if put(s, &o.data, v, <Py_ssize_t> width) < 0:
        return -1
    return mark(s, o)


cdef int block_count(State *s, int64_t min_size, int64_t *count) noexcept nogil:
    """The next block's item count (0 ends the list), checked against the bytes left."""
    cdef int64_t size, left
    if read_long(s, count) < 0:
        return -1
    if count[0] < 0:
        if count[0] == INT64_MIN:
            return fail(s, ERR_COUNT, count[0], s.end - s.p)
        count[0] = -count[0]
        if read_length(s, &size) < 0:
            return -1
    left = s.end - s.p
    if min_size > 0:
        if count[0] > left // min_size:
            return fail(s, ERR_COUNT, count[0], left)
    else:
        if count[0] > s.budget:
            return fail(s, ERR_COUNT, count[0], left)
        s.budget -= count[0]
    return 0


# ---------------------------------------------------------------- the loop

cdef int dec(State *s, int64_t index, int depth) noexcept nogil:
    cdef const int64_t *node = s.nodes + 8 * index
    cdef int64_t op = node[0], a = node[2], b = node[3], c = node[4], d = node[5]
    cdef Out *o = &s.outs[node[1]] if node[1] >= 0 else NULL
    cdef int32_t i32
    cdef int64_t i64, k, count, target
    cdef float f32
    cdef double f64
    cdef int8_t tag
    cdef const unsigned char *saved_p
    cdef const unsigned char *saved_end
    if depth > MAX_DEPTH_:
        return fail(s, ERR_DEPTH, MAX_DEPTH_, 0)
    if op == OP_INT:
        if read_int(s, &i32) < 0 or put(s, &o.data, &i32, 4) < 0:
            return -1
        return mark(s, o)
    if op == OP_LONG:
        if read_long(s, &i64) < 0 or put(s, &o.data, &i64, 8) < 0:
            return -1
        return mark(s, o)
    if op == OP_STRING or op == OP_BYTES:
        return read_binary(s, o, op == OP_STRING)
    if op == OP_DOUBLE or op == OP_FLOAT:
        k = 8 if op == OP_DOUBLE else 4
        if take(s, k) < 0 or put(s, &o.data, s.p, <Py_ssize_t> k) < 0:
            return -1
        s.p += k
        return mark(s, o)
    if op == OP_RECORD or op == OP_SKIP_RECORD:
        for k in range(b):
            if dec(s, s.table[a + k], depth + 1) < 0:
                return -1
        return mark(s, o) if o != NULL else 0
    if op == OP_UNION or op == OP_SKIP_UNION:
        if read_long(s, &i64) < 0:
            return -1
        if i64 < 0 or i64 >= b:
            return fail(s, ERR_BRANCH, i64, b)
        target = s.table[a + i64]
        if target < 0:
            return fail(s, ERR_UNREADABLE_BRANCH, i64, target)
        return dec(s, target, depth + 1)
    if op == OP_NULLS_INTO:
        return append_null(s, node[1])
    if op == OP_NULL:
        o.length += 1
        return 0
    if op == OP_BOOL:
        if take(s, 1) < 0:
            return -1
        if s.p[0] > 1:
            s.p += 1
            return fail(s, ERR_BOOL, (s.p - 1)[0], 0)
        if put(s, &o.data, s.p, 1) < 0:
            return -1
        s.p += 1
        return mark(s, o)
    if op == OP_INT_TO_LONG or op == OP_INT_TO_FLOAT or op == OP_INT_TO_DOUBLE:
        if read_int(s, &i32) < 0:
            return -1
        if op == OP_INT_TO_LONG:
            i64 = i32
            k = put(s, &o.data, &i64, 8)
        elif op == OP_INT_TO_FLOAT:
            f32 = <float> i32
            k = put(s, &o.data, &f32, 4)
        else:
            f64 = <double> i32
            k = put(s, &o.data, &f64, 8)
        return -1 if k < 0 else mark(s, o)
    if op == OP_LONG_TO_FLOAT or op == OP_LONG_TO_DOUBLE:
        if read_long(s, &i64) < 0:
            return -1
        if op == OP_LONG_TO_FLOAT:
            f32 = <float> i64
            k = put(s, &o.data, &f32, 4)
        else:
            f64 = <double> i64
            k = put(s, &o.data, &f64, 8)
        return -1 if k < 0 else mark(s, o)
    if op == OP_FLOAT_TO_DOUBLE:
        if take(s, 4) < 0:
            return -1
        memcpy(&f32, s.p, 4)
        s.p += 4
        f64 = f32
        return -1 if put(s, &o.data, &f64, 8) < 0 else mark(s, o)
    if op == OP_FIXED:
        if take(s, c) < 0 or put(s, &o.data, s.p, <Py_ssize_t> c) < 0:
            return -1
        s.p += c
        return mark(s, o)
    if op == OP_DEC_BYTES:
        if read_length(s, &i64) < 0:
            return -1
        return read_decimal(s, o, i64, s.table + d)
    if op == OP_DEC_FIXED:
        return read_decimal(s, o, c, s.table + d)
    if op == OP_ENUM:
        if read_int(s, &i32) < 0:
            return -1
        if i32 < 0 or i32 >= b:
            return fail(s, ERR_ENUM, i32, b)
        i64 = s.table[a + i32]
        if i64 < 0:
            return fail(s, ERR_ENUM_SYMBOL, i32, 0)
        i32 = <int32_t> i64
        return -1 if put(s, &o.data, &i32, 4) < 0 else mark(s, o)
    if op == OP_ARRAY or op == OP_SKIP_ARRAY or op == OP_MAP or op == OP_SKIP_MAP:
        while True:
            if block_count(s, d if (op == OP_MAP or op == OP_SKIP_MAP) else c, &count) < 0:
                return -1
            if count == 0:
                break
            for k in range(count):
                if op == OP_MAP:
                    if read_binary(s, &s.outs[c], True) < 0:
                        return -1
                elif op == OP_SKIP_MAP:
                    if read_length(s, &i64) < 0:
                        return -1
                    s.p += i64
                if dec(s, a, depth + 1) < 0:
                    return -1
        if op == OP_ARRAY:
            k = s.outs[s.table[o.first]].length
        elif op == OP_MAP:
            k = s.outs[c].length
        else:
            return 0
        return -1 if put_i32(s, &o.offs, k) < 0 else mark(s, o)
    if op == OP_TAG:
        tag = <int8_t> c
        if put(s, &o.data, &tag, 1) < 0 or put_i32(s, &o.offs, s.outs[d].length) < 0:
            return -1
        o.length += 1
        return dec(s, a, depth + 1)
    if op == OP_DEFAULT:
        saved_p, saved_end = s.p, s.end
        s.p = s.defaults + c
        s.end = s.p + d
        k = dec(s, a, depth + 1)
        s.p, s.end = saved_p, saved_end
        return <int> k
    if op == OP_SKIP_VARINT:
        return read_long(s, &i64)
    if op == OP_SKIP_BYTES:
        if read_length(s, &i64) < 0:
            return -1
        s.p += i64
        return 0
    if op == OP_SKIP_N:
        if take(s, c) < 0:
            return -1
        s.p += c
        return 0
    return fail(s, ERR_VARINT, op, -1)   # unknown op: a broken program, never data


# ---------------------------------------------------------------- entry point

cdef const unsigned char[::1] _u8(obj) except *:
    return memoryview(obj).cast("B")


def run(const int64_t[:, ::1] nodes not None, const int64_t[::1] table not None,
        const int64_t[:, ::1] slots not None, int64_t root, int64_t root_slot,
        bytes defaults not None, list buffers not None, const int32_t[::1] buf_index not None,
        const int64_t[::1] starts not None, const int64_t[::1] lengths not None,
        int64_t skip, bint errors_null):
    """Decode value ``i`` (bytes ``starts[i]:starts[i] + lengths[i]`` of
    ``buffers[buf_index[i]]``; length -1: null) for every i, after ``skip`` header bytes.

    Returns (per slot: length, nulls, validity bitmap or None, data, offsets as NumPy
    arrays; int64 indexes of the bad values; the first error as (i, code, a, b, byte
    offset) or None). A bad value stops the loop unless ``errors_null``: then it is null.
    """
    cdef Py_ssize_t n = starts.shape[0], nslots = slots.shape[0], nbuf = len(buffers)
    cdef Py_ssize_t i, j
    cdef State s
    cdef Out *o
    cdef int64_t L, start, err_i = -1, err_code = 0, err_a = 0, err_b = 0, err_off = 0
    cdef const unsigned char *base
    cdef list views = [_u8(b) for b in buffers]
    cdef const unsigned char **ptrs
    cdef Py_ssize_t *sizes
    cdef const unsigned char[::1] mv
    cdef int64_t *snap = NULL
    cdef GrowBuf bad
    if lengths.shape[0] != n or buf_index.shape[0] != n or nodes.shape[1] != 8 \
            or slots.shape[1] != 4:
        raise ValueError("run: inconsistent table or column shapes")
    memset(&s, 0, sizeof(State))
    memset(&bad, 0, sizeof(GrowBuf))
    ptrs = <const unsigned char **> calloc(nbuf + 1, sizeof(void *))
    sizes = <Py_ssize_t *> calloc(nbuf + 1, sizeof(Py_ssize_t))
    s.outs = <Out *> calloc(nslots + 1, sizeof(Out))
    if errors_null:
        snap = <int64_t *> calloc(5 * nslots + 1, sizeof(int64_t))
    try:
        if ptrs == NULL or sizes == NULL or s.outs == NULL or (errors_null and snap == NULL):
            raise MemoryError()
        for j in range(nbuf):
            mv = views[j]
            sizes[j] = mv.shape[0]
            ptrs[j] = &mv[0] if mv.shape[0] else NOTHING
        for i in range(n):      # the column's own offsets, checked once
            if lengths[i] != -1 and (buf_index[i] < 0 or buf_index[i] >= nbuf or starts[i] < 0
                                     or lengths[i] < 0
                                     or lengths[i] > sizes[buf_index[i]] - starts[i]):
                raise ValueError(f"value {i} lies outside its buffer")
        for j in range(nslots):
            o = &s.outs[j]
            o.kind, o.width, o.first, o.count = slots[j, 0], slots[j, 1], slots[j, 2], slots[j, 3]
            if o.kind == K_BINARY or o.kind == K_LIST or o.kind == K_MAP:
                if put_i32(&s, &o.offs, 0) < 0:
                    raise MemoryError()
        s.nodes = &nodes[0, 0]
        s.table = &table[0]
        s.defaults = <const unsigned char *> defaults if len(defaults) else NOTHING
        with nogil:
            for i in range(n):
                L = lengths[i]
                if L == -1:
                    if append_null(&s, root_slot) < 0:
                        break
                    continue
                if errors_null:
                    _snapshot(&s, snap, nslots)
                start = starts[i]
                base = ptrs[buf_index[i]] + start
                s.p = base + (skip if skip <= L else L)
                s.end = base + L
                s.budget = ZERO_SIZE_ITEMS_ + 64 * L
                if L < skip:
                    fail(&s, ERR_SHORT, L, skip)
                elif dec(&s, root, 0) == 0 and s.p != s.end:
                    fail(&s, ERR_TRAILING, s.end - s.p, 0)
                if s.err == ERR_NONE:
                    continue
                if s.err == ERR_NOMEM:
                    break
                if err_i < 0:
                    err_i, err_code, err_a, err_b = i, s.err, s.err_a, s.err_b
                    err_off = (s.p - base) if (s.p >= base and s.p <= s.end) else 0
                if put(&s, &bad, &i, sizeof(int64_t)) < 0:
                    break
                if not errors_null:
                    break
                s.err = ERR_NONE
                _restore(&s, snap, nslots)
                if append_null(&s, root_slot) < 0:
                    break
        if s.err == ERR_NOMEM:
            raise MemoryError(f"cannot grow an Avro decode buffer to {s.err_a} bytes")
        outs = []
        for j in range(nslots):
            o = &s.outs[j]
            valid = gb_to_numpy(&o.valid, _np.uint8) if o.nulls else None
            outs.append((o.length, o.nulls, valid, gb_to_numpy(&o.data, _np.uint8),
                         gb_to_numpy(&o.offs, _np.uint8)))
        error = None if err_i < 0 else (err_i, err_code, err_a, err_b, err_off)
        return outs, gb_to_numpy(&bad, _np.int64), error
    finally:
        if s.outs != NULL:
            for j in range(nslots):
                gb_free(&s.outs[j].valid)
                gb_free(&s.outs[j].data)
                gb_free(&s.outs[j].offs)
        free(s.outs)
        free(ptrs)
        free(sizes)
        free(snap)
        gb_free(&bad)


cdef void _snapshot(State *s, int64_t *snap, Py_ssize_t nslots) noexcept nogil:
    cdef Py_ssize_t j
    cdef Out *o
    for j in range(nslots):
        o = &s.outs[j]
        snap[5 * j] = o.valid.len
        snap[5 * j + 1] = o.data.len
        snap[5 * j + 2] = o.offs.len
        snap[5 * j + 3] = o.length
        snap[5 * j + 4] = o.nulls


cdef void _restore(State *s, int64_t *snap, Py_ssize_t nslots) noexcept nogil:
    cdef Py_ssize_t j
    cdef Out *o
    for j in range(nslots):
        o = &s.outs[j]
        o.valid.len = snap[5 * j]
        o.data.len = snap[5 * j + 1]
        o.offs.len = snap[5 * j + 2]
        o.length = snap[5 * j + 3]
        o.nulls = snap[5 * j + 4]


include "_avro_enc.pxi"


include "_wire.pxi"
