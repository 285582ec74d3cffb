# ---------------------------------------------------------------- framing and JSON lines
#
# Two passes over a binary column for kproto/formats (_wire.py and json.py); twins of
# kproto/_pure/wire.py, tested against them. The offsets are Arrow's (as int64), checked
# against the data before anything is read.

cdef int _check_offsets(const int64_t[::1] offsets, Py_ssize_t size) except -1:
    cdef Py_ssize_t i, n = offsets.shape[0] - 1
    if n < 0:
        raise ValueError("offsets must hold n + 1 entries")
    for i in range(n):
        if offsets[i] < 0 or offsets[i] > offsets[i + 1] or offsets[i + 1] > size:
            raise ValueError(f"offsets[{i}:{i + 2}] = {offsets[i]}, {offsets[i + 1]} "
                             f"are not within the {size} data bytes")
    return 0


def frame_ids(const int64_t[::1] offsets not None, const uint8_t[::1] data not None,
              const uint8_t[::1] valid not None, int header, int magic):
    """Read Confluent's header of each valid row: ``(ids, status)``, ids int64 (-1 where
    not read), status uint8: 0 read (or null), 1 shorter than ``header`` bytes, 2 a first
    byte other than ``magic``."""
    cdef Py_ssize_t i, n = offsets.shape[0] - 1
    _check_offsets(offsets, data.shape[0])
    if valid.shape[0] != n:
        raise ValueError("valid must hold one entry a row")
    if header < 5:
        raise ValueError(f"header must be at least 5 bytes (magic byte and id), not {header}")
    ids_array = _np.full(n, -1, _np.int64)
    status_array = _np.zeros(n, _np.uint8)
    cdef int64_t[::1] ids = ids_array
    cdef uint8_t[::1] status = status_array
    cdef int64_t s
    cdef const uint8_t *p
    with nogil:
        for i in range(n):
            if not valid[i]:
                continue
            s = offsets[i]
            if offsets[i + 1] - s < header:
                status[i] = 1
                continue
            p = &data[s]
            if p[0] != magic:
                status[i] = 2
                continue
            ids[i] = (<int64_t> p[1] << 24) | (<int64_t> p[2] << 16) | (<int64_t> p[3] << 8) \
                | <int64_t> p[4]
    return ids_array, status_array


cdef inline bint _space(uint8_t c) nogil:
    return c == 32 or (9 <= c <= 13)           # what bytes.strip() strips


def json_lines(const int64_t[::1] offsets not None, const uint8_t[::1] data not None,
               const uint8_t[::1] rows not None, Py_ssize_t skip):
    """The values of the rows where ``rows`` is set, ``skip`` bytes cut from each, as one
    buffer of lines: ``(lines, others)``. ``lines`` (a pyarrow Buffer) holds each value that is one
    JSON object's text (``{`` first and ``}`` last, whitespace aside) then ``\n``, its
    raw line breaks (``\n``, ``\r``: only whitespace between JSON tokens) turned into
    spaces; ``others`` (int64) the rows left out because their value is not."""
    cdef Py_ssize_t i, n = offsets.shape[0] - 1, total = 0, n_others = 0
    cdef int64_t s, e, j
    cdef const uint8_t *src = &data[0] if data.shape[0] else NOTHING
    _check_offsets(offsets, data.shape[0])
    if rows.shape[0] != n or skip < 0:
        raise ValueError("rows must hold one entry a row, skip must be >= 0")
    keep_array = _np.zeros(n, _np.uint8)
    cdef uint8_t[::1] keep = keep_array
    with nogil:
        for i in range(n):
            if not rows[i]:
                continue
            s = offsets[i] + skip
            e = offsets[i + 1]
            if s < e and src[s] == 123 and src[e - 1] == 125:     # '{' ... '}'
                keep[i] = 1
                total += e - s + 1
                continue
            while s < e and _space(src[s]):
                s += 1
            while e > s and _space(src[e - 1]):
                e -= 1
            if s < e and src[s] == 123 and src[e - 1] == 125:
                keep[i] = 1
                total += offsets[i + 1] - offsets[i] - skip + 1
            else:
                n_others += 1
    # from Arrow's memory pool, which keeps freed blocks: a steady decoder writes warm
    # pages instead of faulting in fresh ones every call (the reader copies what it keeps)
    import pyarrow
    out_array = pyarrow.allocate_buffer(total)
    others_array = _np.empty(n_others, _np.int64)
    cdef int64_t[::1] others = others_array
    cdef uint8_t[::1] out_view = memoryview(out_array).cast("B") if total else None
    cdef uint8_t *out = &out_view[0] if total else NULL
    cdef uint8_t c
    n_others = 0
    with nogil:
        for i in range(n):
            if not rows[i]:
                continue
            if not keep[i]:
                others[n_others] = i
                n_others += 1
                continue
            s = offsets[i] + skip
            e = offsets[i + 1]
            for j in range(s, e):           # vectorised by the compiler (a select a byte)
                c = src[j]
                out[j - s] = 32 if (c == 10) | (c == 13) else c
            out += e - s
            out[0] = 10
            out += 1
    return out_array, others_array
