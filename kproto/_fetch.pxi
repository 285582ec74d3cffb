# Fetch response slicing (included by _codec.pyx): one walk over the response body, one
# small tuple per partition, and each partition's record set as a zero-copy memoryview.
#
# FetchResponse vN (PROTOCOL_NOTES §3.4; flexible from v12: compact lengths + tagged fields):
#   [v1+] throttle_time_ms i32 | [v7+] error_code i16, session_id i32 |
#   responses[]: [v0-12] topic string | [v13+] topic_id uuid |
#     partitions[]: partition_index i32 | error_code i16 | high_watermark i64 |
#       [v4+] last_stable_offset i64 | [v5+] log_start_offset i64 |
#       [v4+] aborted_transactions[]? (producer_id i64, first_offset i64) |
#       [v11+] preferred_read_replica i32 | records bytes? |
#       [v12+] tags: 0 diverging_epoch, 1 current_leader {leader_id i32, leader_epoch i32},
#              2 snapshot_id
#   [v12+] tags: 0 node_endpoints

import uuid as _uuid
from kproto.errors import ProtocolError as _ProtocolError
from kproto.fetched import (
    FetchedPartition as _FetchedPartition, FetchSlice as _FetchSlice,
)


cdef struct Cur:
    const unsigned char *base
    Py_ssize_t pos
    Py_ssize_t end


cdef int cur_fail(Cur *c, str what, Py_ssize_t at) except -1:
    raise _ProtocolError(f"cannot slice FetchResponse: {what} (at byte {at})")


cdef inline Py_ssize_t cur_take(Cur *c, Py_ssize_t n, str what) except -1:
    cdef Py_ssize_t p = c.pos
    if n < 0 or n > c.end - p:
        cur_fail(c, f"truncated {what}: needed {n} bytes, {c.end - p} left", p)
    c.pos = p + n
    return p


cdef inline int64_t cur_i64(Cur *c, str what) except? -1:
    return kp_load_i64(c.base + cur_take(c, 8, what))


cdef inline int32_t cur_i32(Cur *c, str what) except? -1:
    return kp_load_i32(c.base + cur_take(c, 4, what))


cdef inline int16_t cur_i16(Cur *c, str what) except? -1:
    return kp_load_i16(c.base + cur_take(c, 2, what))


cdef int64_t cur_uvarint(Cur *c, str what) except -1:
    """An unsigned varint (uint32: at most 5 bytes, the 5th <= 0x0F, as Kafka's)."""
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef Py_ssize_t start = c.pos
    cdef uint8_t b
    while True:
        if c.pos >= c.end:
            cur_fail(c, f"truncated varint in {what}", start)
        b = c.base[c.pos]
        c.pos += 1
        result |= (<uint64_t> (b & 0x7F)) << shift
        if not (b & 0x80):
            if shift == 28 and b > 0x0F:
                cur_fail(c, f"unsigned varint overflows 32 bits in {what}", start)
            return <int64_t> result
        shift += 7
        if shift >= 35:
            cur_fail(c, f"varint longer than 5 bytes in {what}", start)


# -2 is a valid int32 on the wire: ``except? -2`` checks for an exception before believing it
cdef int64_t cur_length(Cur *c, bint compact, bint wide, str what) except? -2:
    """A length or count: compact uvarint N+1, else int16/int32; -1 means null."""
    if compact:
        return cur_uvarint(c, what) - 1
    if wide:
        return cur_i32(c, what)
    return cur_i16(c, what)


cdef int cur_skip_tags(Cur *c, str what) except -1:
    cdef int64_t n = cur_uvarint(c, what), i, size, tag, last = -1
    cdef Py_ssize_t at
    for i in range(n):
        at = c.pos
        tag = cur_uvarint(c, what)
        if tag <= last:
            cur_fail(c, f"tagged field {tag} out of order in {what}", at)
        last = tag
        size = cur_uvarint(c, what)
        cur_take(c, size, what)
    return 0


cdef int64_t cur_count(Cur *c, bint compact, str what, bint nullable) except? -2:
    cdef Py_ssize_t at = c.pos
    cdef int64_t n = cur_length(c, compact, True, what)
    if n < -1 or (n == -1 and not nullable):
        cur_fail(c, f"invalid {what} count {n}", at)
    if n > c.end - c.pos:
        cur_fail(c, f"{what} claims {n} elements but only {c.end - c.pos} bytes are left", at)
    return n


cdef Cur cur_tag(Cur *c, str what) except *:
    """The payload of one tagged field as a cursor of its own (``c`` moves past it)."""
    cdef Cur sub = c[0]
    cdef int64_t size = cur_uvarint(c, what)
    sub.pos = cur_take(c, size, what)
    sub.end = c.pos
    return sub


cdef int cur_tag_done(Cur *sub, str what) except -1:
    """A known tagged struct's own tag section, then nothing left in its payload."""
    cur_skip_tags(sub, f"{what} tags")
    if sub.pos != sub.end:
        cur_fail(sub, f"tagged field {what} has {sub.end - sub.pos} unread bytes", sub.pos)
    return 0


cdef int cur_string(Cur *c, const unsigned char[::1] view, bint nullable, str what) except -1:
    """Check a compact string: its length and its UTF-8 (what the engine decodes)."""
    cdef Py_ssize_t at = c.pos
    cdef int64_t size = cur_length(c, True, False, what)
    cdef Py_ssize_t start
    if size < 0:
        if size == -1 and nullable:
            return 0
        cur_fail(c, f"invalid {what} length {size}", at)
    start = cur_take(c, size, what)
    try:
        bytes(view[start:c.pos]).decode("utf-8")
    except UnicodeDecodeError:
        cur_fail(c, f"{what} is not UTF-8", start)
    return 0


cdef int cur_node_endpoints(Cur *c, const unsigned char[::1] view) except -1:
    """Check the response's node_endpoints tag (v16+): [node_id, host, port, rack]."""
    cdef int64_t n = cur_count(c, True, "node_endpoints", False), i
    for i in range(n):
        cur_take(c, 4, "node_endpoints node_id")
        cur_string(c, view, False, "node_endpoints host")
        cur_take(c, 4, "node_endpoints port")
        cur_string(c, view, True, "node_endpoints rack")
        cur_skip_tags(c, "node_endpoints tags")
    return 0


def slice_fetch(body, int version):
    """Slice a Fetch response body (no header) of ``version`` (see kproto.fetched)."""
    if version < 0 or version > 18:
        raise ValueError(f"Fetch v{version} is not a version kproto knows")
    cdef const unsigned char[::1] view = _as_bytes_view(body)
    cdef Cur c, sub
    cdef bint flex = version >= 12
    cdef int32_t throttle = 0, session_id = 0, partition, preferred
    cdef int16_t error_code = 0, perr
    cdef int64_t topics, parts, i, j, k, n_aborted, size, ntags, tag, last_tag
    cdef int64_t hwm, lso, log_start, pid, first
    cdef Py_ssize_t at, rstart
    c.base = &view[0] if view.shape[0] else NOTHING
    c.pos = 0
    c.end = view.shape[0]
    mv = memoryview(body).cast("B") if not isinstance(body, memoryview) else body.cast("B")
    if version >= 1:
        throttle = cur_i32(&c, "throttle_time_ms")
    if version >= 7:
        error_code = cur_i16(&c, "error_code")
        session_id = cur_i32(&c, "session_id")
    out = []
    topics = cur_count(&c, flex, "responses", False)
    for i in range(topics):
        topic = topic_id = None
        if version >= 13:
            topic_id = _uuid.UUID(bytes=bytes(view[cur_take(&c, 16, "topic_id"):c.pos]))
        else:
            at = c.pos
            size = cur_length(&c, flex, False, "topic")
            if size < 0:
                cur_fail(&c, "null topic name", at)
            rstart = cur_take(&c, size, "topic")
            try:
                topic = bytes(view[rstart:c.pos]).decode("utf-8")
            except UnicodeDecodeError:
                cur_fail(&c, "topic name is not UTF-8", rstart)
        parts = cur_count(&c, flex, "partitions", False)
        for j in range(parts):
            partition = cur_i32(&c, "partition_index")
            perr = cur_i16(&c, "error_code")
            hwm = cur_i64(&c, "high_watermark")
            lso = cur_i64(&c, "last_stable_offset") if version >= 4 else -1
            log_start = cur_i64(&c, "log_start_offset") if version >= 5 else -1
            aborted = None
            if version >= 4:
                n_aborted = cur_count(&c, flex, "aborted_transactions", True)
                if n_aborted >= 0:
                    aborted = []
                    for k in range(n_aborted):
                        pid = cur_i64(&c, "producer_id")
                        first = cur_i64(&c, "first_offset")
                        if flex:
                            cur_skip_tags(&c, "aborted transaction tags")
                        aborted.append((pid, first))
            preferred = cur_i32(&c, "preferred_read_replica") if version >= 11 else -1
            at = c.pos
            size = cur_length(&c, flex, True, "records")
            records = None
            if size >= 0:
                rstart = cur_take(&c, size, "records")
                records = mv[rstart:c.pos]
            elif size != -1:
                cur_fail(&c, f"invalid records length {size}", at)
            leader = None
            if flex:
                ntags = cur_uvarint(&c, "partition tags")
                last_tag = -1
                for k in range(ntags):
                    at = c.pos
                    tag = cur_uvarint(&c, "partition tags")
                    if tag <= last_tag:
                        cur_fail(&c, f"tagged field {tag} out of order", at)
                    last_tag = tag
                    sub = cur_tag(&c, "partition tag")
                    if tag == 1:  # current_leader (KIP-951)
                        leader_id = cur_i32(&sub, "current_leader")
                        leader_epoch = cur_i32(&sub, "current_leader")
                        cur_tag_done(&sub, "current_leader")
                        if leader_id != -1:
                            leader = (leader_id, leader_epoch)
                    elif tag == 0 or tag == 2:  # diverging_epoch, snapshot_id: 12 bytes
                        cur_take(&sub, 12, "diverging_epoch" if tag == 0 else "snapshot_id")
                        cur_tag_done(&sub, "diverging_epoch" if tag == 0 else "snapshot_id")
            out.append(_FetchedPartition(topic, topic_id, partition, perr, hwm, lso, log_start,
                                         aborted, preferred, records, leader))
        if flex:
            cur_skip_tags(&c, "topic tags")
    if flex:
        ntags = cur_uvarint(&c, "response tags")
        last_tag = -1
        for k in range(ntags):
            at = c.pos
            tag = cur_uvarint(&c, "response tags")
            if tag <= last_tag:
                cur_fail(&c, f"tagged field {tag} out of order in response tags", at)
            last_tag = tag
            sub = cur_tag(&c, "response tag")
            if tag == 0 and version >= 16:
                cur_node_endpoints(&sub, view)
                if sub.pos != sub.end:
                    cur_fail(&sub, f"tagged field node_endpoints has {sub.end - sub.pos} "
                             "unread bytes", sub.pos)
    return _FetchSlice(throttle, error_code, session_id, out)
