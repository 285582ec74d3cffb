# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""kproto's Cython core: varints, CRCs, record sets <-> columns, Fetch response slicing.

Every function here has a pure-Python twin of the same name in ``kproto._pure``;
``kproto._impl`` picks one. Fragments, by topic:

    _records.pxi   record sets (magic 0/1/2, any codec) -> RecordColumns
    _encode.pxi    columns -> record batch v2
    _fetch.pxi     Fetch response -> per-partition metadata + record-set views

Varints (PROTOCOL_NOTES §2.3): unsigned varints are protobuf base-128, at most 5 bytes
(uint32); varint/varlong are zigzag-encoded int32/int64 of at most 5/10 bytes. Every read
checks the end of the buffer first, so a truncated varint can never read past it.
"""

cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from cpython.bytes cimport PyBytes_FromStringAndSize

from kproto.errors import DecodeError as _DecodeError, EncodeError as _EncodeError

cdef extern from "_crc.h":
    void kp_crc_init() nogil
    int kp_have_sse42
    uint32_t crc32c_update(uint32_t crc, const unsigned char *p, size_t n) nogil
    uint32_t crc32c_update_sw(uint32_t crc, const unsigned char *p, size_t n) nogil
    uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n) nogil

kp_crc_init()

#: True when CRC-32C runs on the SSE4.2 instruction.
HAVE_SSE42 = bool(kp_have_sse42)

_EMPTY = b""


# ---------------------------------------------------------------- CRCs

ctypedef uint32_t (*crc_fn)(uint32_t, const unsigned char *, size_t) noexcept nogil


cdef uint32_t _crc(crc_fn fn, data, uint32_t crc) except? 0:
    cdef const unsigned char[::1] v = _as_bytes_view(data)
    cdef size_t n = v.shape[0]
    if n:
        with nogil:  # big buffers: let other threads run
            crc = fn(crc, &v[0], n)
    return crc


def crc32c(data, uint32_t crc=0):
    """CRC-32C (Castagnoli) of ``data``, continuing ``crc``."""
    return _crc(crc32c_update, data, crc)


def crc32c_software(data, uint32_t crc=0):
    """CRC-32C with the table method only (to test the SSE4.2 path against)."""
    return _crc(crc32c_update_sw, data, crc)


def crc32(data, uint32_t crc=0):
    """CRC-32 (IEEE, as zlib.crc32) of ``data``, continuing ``crc``."""
    return _crc(crc32_update, data, crc)


# ---------------------------------------------------------------- varints

cdef object _varint_error(str kind, Py_ssize_t pos, int limit, bint truncated):
    if truncated:
        return _DecodeError(f"truncated {kind} at byte {pos}", offset=pos)
    return _DecodeError(f"{kind} at byte {pos} is longer than {limit} bytes", offset=pos)


cdef uint64_t _read_uvarint(const unsigned char[::1] v, Py_ssize_t *pos, int limit,
                            str kind) except? 0xFFFFFFFFFFFFFFFF:
    cdef Py_ssize_t p = pos[0], start = pos[0], end = v.shape[0]
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef uint8_t b
    if p < 0 or p > end:
        raise _DecodeError(f"position {p} is outside the buffer of {end} bytes", offset=p)
    while True:
        if p >= end:
            raise _varint_error(kind, start, limit, True)
        b = v[p]
        p += 1
        if shift == 7 * (limit - 1) and b > (0x0F if limit == 5 else 0x01):
            # the last allowed byte may only carry the top bits of a 32/64-bit value
            raise _DecodeError(f"{kind} at byte {start} does not fit in {32 if limit == 5 else 64}"
                               " bits", offset=start)
        result |= (<uint64_t> (b & 0x7F)) << shift
        if not (b & 0x80):
            pos[0] = p
            return result
        shift += 7
        if shift >= 7 * limit:
            raise _varint_error(kind, start, limit, False)


def decode_uvarint(buf, Py_ssize_t pos=0):
    """An unsigned varint (≤ 5 bytes, uint32) at ``buf[pos]``: (value, new position)."""
    cdef const unsigned char[::1] v = _as_bytes_view(buf)
    cdef uint64_t r = _read_uvarint(v, &pos, 5, "unsigned varint")
    return r, pos


def decode_varint(buf, Py_ssize_t pos=0):
    """A zigzag varint (≤ 5 bytes, int32) at ``buf[pos]``: (value, new position)."""
    cdef const unsigned char[::1] v = _as_bytes_view(buf)
    cdef uint64_t r = _read_uvarint(v, &pos, 5, "varint")
    return <int32_t> ((r >> 1) ^ (-(r & 1))), pos


def decode_varlong(buf, Py_ssize_t pos=0):
    """A zigzag varlong (≤ 10 bytes, int64) at ``buf[pos]``: (value, new position)."""
    cdef const unsigned char[::1] v = _as_bytes_view(buf)
    cdef uint64_t r = _read_uvarint(v, &pos, 10, "varlong")
    return <int64_t> ((r >> 1) ^ (-(r & 1))), pos


cdef bytes _put_uvarint(uint64_t u):
    cdef unsigned char out[10]
    cdef int n = 0
    while u >= 0x80:
        out[n] = <unsigned char> ((u & 0x7F) | 0x80)
        u >>= 7
        n += 1
    out[n] = <unsigned char> u
    return PyBytes_FromStringAndSize(<char *> out, n + 1)


def encode_uvarint(n):
    """Unsigned varint bytes of ``0 <= n < 2**64``."""
    if not 0 <= n < 2**64:
        raise _EncodeError(f"{n} is out of range for an unsigned varint")
    return _put_uvarint(<uint64_t> n)


def encode_varint(n):
    """Zigzag varint bytes of an int32."""
    if not -2**31 <= n < 2**31:
        raise _EncodeError(f"{n} is out of range for a varint (int32)")
    cdef int64_t v = n
    return _put_uvarint(<uint64_t> ((v << 1) ^ (v >> 63)) & 0xFFFFFFFF)


def encode_varlong(n):
    """Zigzag varint bytes of an int64."""
    if not -2**63 <= n < 2**63:
        raise _EncodeError(f"{n} is out of range for a varlong (int64)")
    cdef int64_t v = n
    return _put_uvarint(<uint64_t> ((v << 1) ^ (v >> 63)))


def zigzag_encode(n):
    """int64 -> zigzag uint64."""
    cdef int64_t v = n
    return <uint64_t> ((v << 1) ^ (v >> 63))


def zigzag_decode(n):
    """zigzag uint64 -> int64."""
    cdef uint64_t u = n
    return <int64_t> ((u >> 1) ^ (-(u & 1)))


def size_of_uvarint(n):
    """Bytes in the unsigned varint of ``n``."""
    cdef uint64_t u = n
    cdef int size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


def size_of_varint(n):
    """Bytes in the zigzag varint of an int32 ``n``."""
    return size_of_uvarint(((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def size_of_varlong(n):
    """Bytes in the zigzag varlong of an int64 ``n``."""
    return size_of_uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


include "_records.pxi"
include "_encode.pxi"
include "_fetch.pxi"
