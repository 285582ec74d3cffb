# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
#
# kproto._codec: varints, CRCs, record sets <-> columns, Fetch response slicing.
#
# Varints (PROTOCOL_NOTES §2.3, Kafka's ByteUtils): base-128, least significant group first;
# the high bit of each byte says "another byte follows".
#
#     300 -> 0b10_0101100 -> AC 02      byte 0: 1_0101100 (low 7 bits, more)
#                                       byte 1: 0_0000010 (next 7 bits, last)
#
#   unsigned varint  uint32, at most 5 bytes; the 5th byte carries bits 28-31 only (<= 0x0F)
#   varint           int32 zigzag-mapped to uint32 ((n << 1) ^ (n >> 31): 0, -1, 1, -2 ->
#                    0, 1, 2, 3, so small negatives stay short), then as above
#   varlong          int64 zigzag-mapped to uint64, at most 10 bytes; the 10th byte <= 0x01
#
# A decoder never trusts a length: every byte read is checked against the end pointer of a
# Cursor, so a truncated varint at the end of a slice can never read the parent's next byte.
# The Cursor is the one bounds-checked reader of the core (the varint primitives here, the
# Fetch slicer); every error it finds goes through one cold function, cursor_fail, which
# raises with ``offset=`` counted from the start of the buffer. Only the nogil record loop
# (_record_loop.pxi) keeps its own inline varint reader: it cannot raise, and it reads the
# one-byte varints that fill records without a call.
# Non-canonical encodings (80 00 for 0) are accepted, as Kafka does.
#
# CRCs are in _crc.h (CRC-32C for record batch v2, CRC-32 for magic 0/1 messages).
"""kproto's Cython core: varints, CRCs, record sets <-> columns, Fetch response slicing.

Every public function here has a pure-Python twin of the same name in ``kproto._pure``;
``kproto._backend`` picks one. Fragments, by topic:

    _growbuf.pxi      growable C output buffers and the binary columns built from them
    _record_loop.pxi  the nogil loop over the records of a magic 2 batch
    _records.pxi      record sets (magic 0/1/2, any codec) -> RecordColumns: the driver,
                      magic 0/1 messages, read_committed bookkeeping
    _encode.pxi       columns -> record batch v2
    _fetch.pxi        Fetch response -> per-partition metadata + record-set views

Buffers: every ``buf``/``data`` argument takes any C-contiguous buffer (bytes, bytearray,
memoryview, NumPy array; other item sizes are read as their bytes).
"""

cimport cython
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from cpython.bytes cimport (
    PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE,
)
from cpython.long cimport PyLong_CheckExact
from cpython.number cimport PyNumber_Index

from kproto.errors import (
    DecodeError as _DecodeError, EncodeError as _EncodeError, ProtocolError as _ProtocolError,
)

cdef extern from "_crc.h":
    void kp_crc_init() nogil
    int kp_have_sse42
    int kp_have_armcrc
    int kp_have_fold
    uint32_t crc32c_update(uint32_t crc, const unsigned char *p, size_t n) nogil
    uint32_t crc32c_update_sw(uint32_t crc, const unsigned char *p, size_t n) nogil
    uint32_t crc32c_update_nofold(uint32_t crc, const unsigned char *p, size_t n) nogil
    uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n) nogil

kp_crc_init()

#: True when CRC-32C runs on the SSE4.2 instruction.
HAVE_SSE42 = bool(kp_have_sse42)
#: True when CRC-32C runs on the ARMv8 CRC32 instructions (aarch64).
HAVE_ARM_CRC32 = bool(kp_have_armcrc)
#: True when long CRC-32C inputs are folded with AVX-512 VPCLMULQDQ (x86).
HAVE_VPCLMULQDQ = bool(kp_have_fold)

cdef enum:
    # Below this, releasing and re-taking the GIL costs more than the CRC (the crc32c
    # package uses the same cut-off).
    KP_NOGIL_MIN = 32 * 1024

cdef const unsigned char *NOTHING = <const unsigned char *> b""   # the data of empty inputs


# ---------------------------------------------------------------- buffers

# The bytes of any C-contiguous buffer, as one-byte items (the only buffer helper of the core).
# TypeError for anything else, as memoryview() gives (a typed memoryview would take None).
cdef const unsigned char[::1] _bytes_view(obj) except *:
    if obj is None:
        raise TypeError("a bytes-like object is required, not 'NoneType'")
    try:
        return obj                   # 1-D unsigned bytes: bytes, bytearray, uint8 arrays
    except (ValueError, BufferError):   # another item format or ndim, or not contiguous
        return memoryview(obj).cast("B")


# Big-endian loads at any alignment (memcpy compiles to one load, bswap to one instruction).
cdef extern from *:
    """
    static inline int64_t kp_load_i64(const unsigned char *p) {
        uint64_t v; memcpy(&v, p, 8); return (int64_t)__builtin_bswap64(v); }
    static inline int32_t kp_load_i32(const unsigned char *p) {
        uint32_t v; memcpy(&v, p, 4); return (int32_t)__builtin_bswap32(v); }
    static inline int16_t kp_load_i16(const unsigned char *p) {
        uint16_t v; memcpy(&v, p, 2); return (int16_t)__builtin_bswap16(v); }
    """
    int64_t kp_load_i64(const unsigned char *p) nogil
    int32_t kp_load_i32(const unsigned char *p) nogil
    int16_t kp_load_i16(const unsigned char *p) nogil


# Integers the way operator.index takes them: Cython's own conversion would truncate floats.
cdef inline object _int(object n):
    return n if PyLong_CheckExact(n) else PyNumber_Index(n)


# ---------------------------------------------------------------- CRCs

ctypedef uint32_t (*crc_fn)(uint32_t, const unsigned char *, size_t) noexcept nogil


cdef object _crc(crc_fn fn, object data, object crc):
    cdef uint32_t c
    cdef const unsigned char[::1] v
    cdef const unsigned char *p = NOTHING
    cdef Py_ssize_t n
    crc = _int(crc)
    try:
        c = crc
    except OverflowError:            # zlib.crc32 and crc32c take any int, modulo 2**32
        c = crc & 0xFFFFFFFF
    if PyBytes_CheckExact(data):     # the common case, without acquiring a buffer
        n = PyBytes_GET_SIZE(data)
        p = <const unsigned char *> PyBytes_AS_STRING(data)
    else:
        v = _bytes_view(data)
        n = v.shape[0]
        if n:
            p = &v[0]
    if n >= KP_NOGIL_MIN:
        with nogil:
            c = fn(c, p, <size_t> n)
    else:
        c = fn(c, p, <size_t> n)
    return c


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli) of ``data``, continuing ``crc``.

    ``crc32c(b, crc32c(a)) == crc32c(a + b)``, as with the crc32c package.
    """
    return _crc(crc32c_update, data, crc)


def crc32c_software(data, crc=0):
    """CRC-32C by the table method only (what CPUs without SSE4.2 run), for tests."""
    return _crc(crc32c_update_sw, data, crc)


def _crc32c_nofold(data, crc=0):
    """CRC-32C without the VPCLMULQDQ folding (the crc32 instruction), for tests."""
    return _crc(crc32c_update_nofold, data, crc)


def crc32(data, crc=0):
    """CRC-32 (IEEE, same as zlib.crc32) of ``data``, continuing ``crc``."""
    return _crc(crc32_update, data, crc)


# ---------------------------------------------------------------- cursor and varints

cdef enum CursorErrors:          # what a cursor raises
    KP_DECODE_ERROR = 0         # DecodeError, the message as it is (the varint primitives)
    KP_FETCH_ERROR = 1          # ProtocolError, "cannot slice FetchResponse: ..."

cdef struct Cursor:
    const unsigned char *base   # start of the buffer: error offsets count from here
    const unsigned char *p      # next byte to read
    const unsigned char *end    # one past the last byte: never read at or beyond it
    int errors                  # CursorErrors

cdef enum:                      # varint kinds
    KP_UVARINT = 0
    KP_VARINT = 1
    KP_VARLONG = 2


cdef inline Cursor cursor_over(const unsigned char *base, Py_ssize_t size,
                               int errors) noexcept nogil:
    cdef Cursor c
    c.base = c.p = base
    c.end = base + size
    c.errors = errors
    return c


cdef int cursor_fail(const Cursor *c, str what, const unsigned char *at) except -1:
    """Every error a cursor finds: ``at`` is where the bad field starts."""
    if c.errors == KP_FETCH_ERROR:
        raise _ProtocolError(f"cannot slice FetchResponse: {what}", offset=at - c.base)
    raise _DecodeError(what, offset=at - c.base)


cdef inline const unsigned char *cursor_take(Cursor *c, Py_ssize_t n, str what) except NULL:
    """Step over ``n`` bytes; returns where they start."""
    cdef const unsigned char *p = c.p
    if n < 0 or n > c.end - p:
        cursor_fail(c, f"truncated {what}: needed {n} bytes, {c.end - p} left", p)
    c.p = p + n
    return p


cdef inline int64_t cursor_i64(Cursor *c, str what) except? -1:
    return kp_load_i64(cursor_take(c, 8, what))


cdef inline int32_t cursor_i32(Cursor *c, str what) except? -1:
    return kp_load_i32(cursor_take(c, 4, what))


cdef inline int16_t cursor_i16(Cursor *c, str what) except? -1:
    return kp_load_i16(cursor_take(c, 2, what))


# Read the base-128 number at c.p into out and advance past it; kind sets the limits. ``what``
# (or None) names the field in the error.
cdef int cursor_uvarint(Cursor *c, int kind, uint64_t *out, str what) except -1:
    cdef const unsigned char *p = c.p
    cdef int max_bytes = 10 if kind == KP_VARLONG else 5
    cdef unsigned char last_max = 0x01 if kind == KP_VARLONG else 0x0F
    cdef uint64_t result = 0
    cdef int i
    cdef unsigned char b
    for i in range(max_bytes):
        if p >= c.end:
            return _varint_fail(c, kind, "truncated {name}", what)
        b = p[0]
        p += 1
        result |= (<uint64_t> (b & 0x7F)) << (7 * i)
        if b < 0x80:
            if i == max_bytes - 1 and b > last_max:   # bits beyond 32 (64) would be lost
                return _varint_fail(c, kind, "{name} overflows {bits} bits", what)
            c.p = p
            out[0] = result
            return 0
    return _varint_fail(c, kind, "{name} is longer than {size} bytes", what)


cdef int _varint_fail(const Cursor *c, int kind, str text, str what) except -1:
    text = text.format(name=("unsigned varint", "varint", "varlong")[kind],
                       bits=64 if kind == KP_VARLONG else 32,
                       size=10 if kind == KP_VARLONG else 5)
    return cursor_fail(c, text if what is None else f"{text} in {what}", c.p)


cdef inline int64_t cursor_uint(Cursor *c, str what) except -1:
    """An unsigned varint (uint32) as a length, count or tag; one byte inline."""
    cdef uint64_t u
    if c.p < c.end and c.p[0] < 0x80:
        u = c.p[0]
        c.p += 1
        return <int64_t> u
    cursor_uvarint(c, KP_UVARINT, &u, what)
    return <int64_t> u


cdef inline uint32_t zigzag_encode32(int32_t n) noexcept nogil:
    return (<uint32_t> n << 1) ^ <uint32_t> (n >> 31)   # shift unsigned: no signed overflow


cdef inline uint64_t zigzag_encode64(int64_t n) noexcept nogil:
    return (<uint64_t> n << 1) ^ <uint64_t> (n >> 63)


cdef inline int32_t zigzag_decode32(uint32_t u) noexcept nogil:
    return <int32_t> ((u >> 1) ^ (~(u & 1) + 1))        # ~x + 1: 0 or all ones


cdef inline int64_t zigzag_decode64(uint64_t u) noexcept nogil:
    return <int64_t> ((u >> 1) ^ (~(u & 1) + 1))


cdef inline int cursor_varint(Cursor *c, int32_t *out) except -1:
    cdef uint64_t u = 0
    cursor_uvarint(c, KP_VARINT, &u, None)
    out[0] = zigzag_decode32(<uint32_t> u)
    return 0


cdef inline int cursor_varlong(Cursor *c, int64_t *out) except -1:
    cdef uint64_t u = 0
    cursor_uvarint(c, KP_VARLONG, &u, None)
    out[0] = zigzag_decode64(u)
    return 0


cdef tuple _decode(int kind, object buf, object pos):
    cdef const unsigned char[::1] v
    cdef const unsigned char *base = NOTHING
    cdef Cursor c
    cdef Py_ssize_t size, start
    cdef uint64_t u = 0
    if PyBytes_CheckExact(buf):
        size = PyBytes_GET_SIZE(buf)
        base = <const unsigned char *> PyBytes_AS_STRING(buf)
    else:
        v = _bytes_view(buf)
        size = v.shape[0]
        if size:
            base = &v[0]
    pos = _int(pos)
    try:
        start = pos
    except OverflowError:
        start = -1
    if start < 0 or start > size:
        raise _DecodeError(f"position {pos} is outside the buffer of {size} bytes")
    c = cursor_over(base, size, KP_DECODE_ERROR)
    c.p = base + start
    cursor_uvarint(&c, kind, &u, None)
    start = c.p - c.base
    if kind == KP_VARINT:
        return zigzag_decode32(<uint32_t> u), start
    if kind == KP_VARLONG:
        return zigzag_decode64(u), start
    return u, start


def decode_uvarint(buf, pos=0):
    """The unsigned varint (uint32, <= 5 bytes) at ``buf[pos]``: (value, position after it)."""
    return _decode(KP_UVARINT, buf, pos)


def decode_varint(buf, pos=0):
    """The zigzag varint (int32, <= 5 bytes) at ``buf[pos]``: (value, position after it)."""
    return _decode(KP_VARINT, buf, pos)


def decode_varlong(buf, pos=0):
    """The zigzag varlong (int64, <= 10 bytes) at ``buf[pos]``: (value, position after it)."""
    return _decode(KP_VARLONG, buf, pos)


cdef inline int uvarint_size(uint64_t u) noexcept nogil:
    cdef int size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


cdef bytes _uvarint_bytes(uint64_t u):
    cdef unsigned char out[10]
    cdef int n = 0
    while u >= 0x80:
        out[n] = <unsigned char> (u | 0x80)
        u >>= 7
        n += 1
    out[n] = <unsigned char> u
    return PyBytes_FromStringAndSize(<char *> out, n + 1)


cdef uint64_t _as_u64(object n, str what) except? 0:
    n = _int(n)
    try:
        return n
    except OverflowError:
        raise _EncodeError(f"{n} is out of range for {what} (0 <= n < 2**64)") from None


cdef int32_t _as_i32(object n, str what) except? -1:
    n = _int(n)
    try:
        return n
    except OverflowError:
        raise _EncodeError(f"{n} is out of range for {what} (int32)") from None


cdef int64_t _as_i64(object n, str what) except? -1:
    n = _int(n)
    try:
        return n
    except OverflowError:
        raise _EncodeError(f"{n} is out of range for {what} (int64)") from None


def encode_uvarint(n):
    """Unsigned varint bytes of ``0 <= n < 2**64`` (Kafka's fields are uint32: 5 bytes max)."""
    return _uvarint_bytes(_as_u64(n, "an unsigned varint"))


def encode_varint(n):
    """Zigzag varint bytes of an int32."""
    return _uvarint_bytes(zigzag_encode32(_as_i32(n, "a varint")))


def encode_varlong(n):
    """Zigzag varlong bytes of an int64."""
    return _uvarint_bytes(zigzag_encode64(_as_i64(n, "a varlong")))


def size_of_uvarint(n):
    """Length of ``encode_uvarint(n)``."""
    return uvarint_size(_as_u64(n, "an unsigned varint"))


def size_of_varint(n):
    """Length of ``encode_varint(n)``."""
    return uvarint_size(zigzag_encode32(_as_i32(n, "a varint")))


def size_of_varlong(n):
    """Length of ``encode_varlong(n)``."""
    return uvarint_size(zigzag_encode64(_as_i64(n, "a varlong")))


def zigzag_encode(n):
    """int64 -> zigzag uint64 (0, -1, 1, -2 -> 0, 1, 2, 3)."""
    return zigzag_encode64(_as_i64(n, "zigzag_encode"))


def zigzag_decode(n):
    """zigzag uint64 -> int64 (0, 1, 2, 3 -> 0, -1, 1, -2)."""
    cdef uint64_t u
    n = _int(n)
    try:
        u = n
    except OverflowError:
        raise _DecodeError(f"{n} is out of range for zigzag_decode (0 <= n < 2**64)") from None
    return zigzag_decode64(u)


include "_growbuf.pxi"
include "_record_loop.pxi"
include "_records.pxi"
include "_encode.pxi"
include "_fetch.pxi"
include "_rows.pxi"
include "_builder.pxi"
include "_accum.pxi"
