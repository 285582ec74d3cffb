# Decoded columns back to one Python object per record (included by _codec.pyx): the
# per-record API (Consumer.poll) after a columnar decode. One tuple-subclass allocation, two
# bytes objects and the headers list a record; no Python-level call per record. The pure twin
# is kproto._pure.rows.record_rows.

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_New, PyList_Append
from cpython.ref cimport PyTypeObject, Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8


cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject *type, Py_ssize_t nitems)
    void PyObject_GC_UnTrack(object op)


cdef struct BinCol:
    const char *data
    const char *offsets
    const uint8_t *validity
    bint wide                   # int64 offsets (large binary)


cdef int bin_col(BinCol *c, object col, list keep) except -1:
    """Point ``c`` at a BinaryColumn's buffers (``keep`` holds the memoryviews)."""
    cdef const uint8_t[::1] data = col.data
    cdef const uint8_t[::1] offsets = col.offsets.view(_np.uint8)
    cdef const uint8_t[::1] validity
    keep.append(data)
    keep.append(offsets)
    c.data = <const char *> &data[0] if data.shape[0] else NULL
    c.offsets = <const char *> &offsets[0]
    c.wide = col.offsets.dtype.itemsize == 8
    c.validity = NULL
    if col.validity is not None and col.null_count:
        validity = col.validity
        keep.append(validity)
        c.validity = &validity[0]
    return 0


cdef inline object bin_get(const BinCol *c, Py_ssize_t i):
    cdef int64_t lo, hi
    if c.validity != NULL and not (c.validity[i >> 3] >> (i & 7)) & 1:
        return None
    if c.wide:
        lo = (<const int64_t *> c.offsets)[i]
        hi = (<const int64_t *> c.offsets)[i + 1]
    else:
        lo = (<const int32_t *> c.offsets)[i]
        hi = (<const int32_t *> c.offsets)[i + 1]
    return PyBytes_FromStringAndSize(c.data + lo, hi - lo)


cdef object header_list(const int32_t *hoff, const BinCol *hk, const BinCol *hv, Py_ssize_t i):
    # Untracked by the cyclic GC, as the Record holding it: a poll's records and their
    # header lists are young objects that stay alive across the collections their own
    # allocations trigger, so tracked they were promoted to the oldest generation and
    # set off a full collection every ~15,000 records (12 ms each here: 0.25 us a
    # record, a quarter of poll()'s CPU). Only str/bytes/None go in; a cycle made later
    # through a record's headers (appending the record to them) is never collected,
    # as with the Record itself.
    cdef list out = PyList_New(0)
    cdef Py_ssize_t j
    cdef int64_t lo, hi
    cdef object name, pair
    for j in range(hoff[i], hoff[i + 1]):
        if hk.validity != NULL and not (hk.validity[j >> 3] >> (j & 7)) & 1:
            name = ""
        else:
            if hk.wide:
                lo = (<const int64_t *> hk.offsets)[j]
                hi = (<const int64_t *> hk.offsets)[j + 1]
            else:
                lo = (<const int32_t *> hk.offsets)[j]
                hi = (<const int32_t *> hk.offsets)[j + 1]
            name = PyUnicode_DecodeUTF8(hk.data + lo, hi - lo, "replace")
        pair = (name, bin_get(hv, j))
        PyObject_GC_UnTrack(pair)
        PyList_Append(out, pair)
    PyObject_GC_UnTrack(out)
    return out


cdef inline void tuple_put(object t, Py_ssize_t i, object value):
    Py_INCREF(value)                # PyTuple_SET_ITEM steals a reference
    PyTuple_SET_ITEM(t, i, value)


def record_rows(cols, Py_ssize_t lo, Py_ssize_t hi, type record_type, list out):
    """Append rows ``lo:hi`` of one partition's ``RecordColumns`` (binary, not view,
    key/value columns) to ``out`` as ``record_type`` instances: the 8-field tuple
    subclass ``Record(topic, partition, offset, timestamp, timestamp_type, key, value,
    headers)``."""
    cdef const int64_t[::1] offset = cols.offset
    cdef const int64_t[::1] stamp = cols.timestamp
    cdef const int32_t[::1] stype = cols.timestamp_type
    cdef const int32_t[::1] hoff = cols.headers.offsets
    cdef list keep = []
    cdef BinCol key, value, hkey, hvalue
    cdef Py_ssize_t i
    cdef object rec
    cdef object topic = cols.topic, partition = cols.partition
    cdef PyTypeObject *typ = <PyTypeObject *> record_type
    if not (0 <= lo <= hi <= offset.shape[0]):
        raise IndexError(f"rows {lo}:{hi} of {offset.shape[0]}")
    if record_type.__base__ is not tuple or len(record_type._fields) != 8:
        raise TypeError(f"{record_type!r} is not an 8-field tuple subclass")
    bin_col(&key, cols.key, keep)
    bin_col(&value, cols.value, keep)
    bin_col(&hkey, cols.headers.keys, keep)
    bin_col(&hvalue, cols.headers.values, keep)
    for i in range(lo, hi):
        rec = PyType_GenericAlloc(typ, 8)      # what tuple.__new__ does for a subclass
        tuple_put(rec, 0, topic)
        tuple_put(rec, 1, partition)
        tuple_put(rec, 2, offset[i])
        tuple_put(rec, 3, stamp[i])
        tuple_put(rec, 4, stype[i])
        tuple_put(rec, 5, bin_get(&key, i))
        tuple_put(rec, 6, bin_get(&value, i))
        tuple_put(rec, 7, header_list(&hoff[0], &hkey, &hvalue, i))
        PyObject_GC_UnTrack(rec)
        PyList_Append(out, rec)
    return out
