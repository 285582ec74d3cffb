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
from kproto.fetched import (
    FetchedPartition as _FetchedPartition, FetchSlice as _FetchSlice,
)

# The Kafka field types on top of the core's Cursor (_codec.pyx), whose cursor_fail raises
# ProtocolError with the offset of the bad field (cursors made with KP_FETCH_ERROR).


# -2 is a valid int32 on the wire: ``except? -2`` checks for an exception before believing it
cdef int64_t fetch_length(Cursor *c, bint compact, bint wide, str what) except? -2:
    """A length or count: compact uvarint N+1, else int16/int32; -1 means null."""
    if compact:
        return cursor_uint(c, what) - 1
    if wide:
        return cursor_i32(c, what)
    return cursor_i16(c, what)


cdef int64_t fetch_tag_count(Cursor *c, str what) except -1:
    """A tag section's count, refused when larger than the bytes left (as the engine does)."""
    cdef const unsigned char *at = c.p
    cdef int64_t n = cursor_uint(c, what)
    if n > c.end - c.p:
        cursor_fail(c, f"tagged field count {n} in {what} exceeds the bytes left", at)
    return n


cdef int fetch_skip_tags(Cursor *c, str what) except -1:
    cdef int64_t n = fetch_tag_count(c, what), i, size, tag, last = -1
    cdef const unsigned char *at
    for i in range(n):
        at = c.p
        tag = cursor_uint(c, what)
        if tag <= last:
            cursor_fail(c, f"tagged field {tag} out of order in {what}", at)
        last = tag
        size = cursor_uint(c, what)
        cursor_take(c, size, what)
    return 0


cdef int64_t fetch_count(Cursor *c, bint compact, str what, bint nullable) except? -2:
    cdef const unsigned char *at = c.p
    cdef int64_t n = fetch_length(c, compact, True, what)
    if n < -1 or (n == -1 and not nullable):
        cursor_fail(c, f"invalid {what} count {n}", at)
    if n > c.end - c.p:
        cursor_fail(c, f"{what} claims {n} elements but only {c.end - c.p} bytes are left", at)
    return n


cdef Cursor fetch_tag(Cursor *c, str what) except *:
    """The payload of one tagged field as a cursor of its own (``c`` moves past it)."""
    cdef Cursor sub = c[0]
    cdef int64_t size = cursor_uint(c, what)
    sub.p = cursor_take(c, size, what)
    sub.end = c.p
    return sub


cdef int fetch_tag_done(Cursor *sub, str what) except -1:
    """A known tagged struct's own tag section, then nothing left in its payload."""
    fetch_skip_tags(sub, f"{what} tags")
    if sub.p != sub.end:
        cursor_fail(sub, f"tagged field {what} has {sub.end - sub.p} unread bytes", sub.p)
    return 0


cdef int fetch_string(Cursor *c, bint nullable, str what) except -1:
    """Check a compact string: its length and its UTF-8 (what the engine decodes)."""
    cdef const unsigned char *at = c.p
    cdef int64_t size = fetch_length(c, True, False, what)
    cdef const unsigned char *start
    if size < 0:
        if size == -1 and nullable:
            return 0
        cursor_fail(c, f"invalid {what} length {size}", at)
    start = cursor_take(c, size, what)
    try:
        (<const char *> start)[:size].decode("utf-8")
    except UnicodeDecodeError:
        cursor_fail(c, f"{what} is not UTF-8", start)
    return 0


cdef int fetch_node_endpoints(Cursor *c) except -1:
    """Check the response's node_endpoints tag (v16+): [node_id, host, port, rack]."""
    cdef int64_t n = fetch_count(c, True, "node_endpoints", False), i
    for i in range(n):
        cursor_take(c, 4, "node_endpoints node_id")
        fetch_string(c, False, "node_endpoints host")
        cursor_take(c, 4, "node_endpoints port")
        fetch_string(c, True, "node_endpoints rack")
        fetch_skip_tags(c, "node_endpoints tags")
    return 0


def slice_fetch(body, int version):
    """Slice a Fetch response body (no header) of ``version`` (see kproto.fetched)."""
    if version < 0 or version > 18:
        raise ValueError(f"Fetch v{version} is not a version kproto knows")
    cdef const unsigned char[::1] view = _bytes_view(body)
    cdef Cursor c, sub
    cdef bint flex = version >= 12
    cdef int32_t throttle = 0, session_id = 0, partition, preferred
    cdef int16_t error_code = 0, perr
    cdef int64_t topics, parts, i, j, k, n_aborted, size, ntags, tag, last_tag
    cdef int64_t hwm, lso, log_start, pid, first
    cdef const unsigned char *at
    cdef const unsigned char *start
    c = cursor_over(&view[0] if view.shape[0] else NOTHING, view.shape[0], KP_FETCH_ERROR)
    mv = memoryview(body).cast("B") if not isinstance(body, memoryview) else body.cast("B")
    if version >= 1:
        throttle = cursor_i32(&c, "throttle_time_ms")
    if version >= 7:
        error_code = cursor_i16(&c, "error_code")
        session_id = cursor_i32(&c, "session_id")
    out = []
    topics = fetch_count(&c, flex, "responses", False)
    for i in range(topics):
        topic = topic_id = None
        if version >= 13:
            topic_id = _uuid.UUID(bytes=(<const char *> cursor_take(&c, 16, "topic_id"))[:16])
        else:
            at = c.p
            size = fetch_length(&c, flex, False, "topic")
            if size < 0:
                cursor_fail(&c, "null topic name", at)
            start = cursor_take(&c, size, "topic")
            try:
                topic = (<const char *> start)[:size].decode("utf-8")
            except UnicodeDecodeError:
                cursor_fail(&c, "topic name is not UTF-8", start)
        parts = fetch_count(&c, flex, "partitions", False)
        for j in range(parts):
            partition = cursor_i32(&c, "partition_index")
            perr = cursor_i16(&c, "error_code")
            hwm = cursor_i64(&c, "high_watermark")
            lso = cursor_i64(&c, "last_stable_offset") if version >= 4 else -1
            log_start = cursor_i64(&c, "log_start_offset") if version >= 5 else -1
            aborted = None
            if version >= 4:
                n_aborted = fetch_count(&c, flex, "aborted_transactions", True)
                if n_aborted >= 0:
                    aborted = []
                    for k in range(n_aborted):
                        pid = cursor_i64(&c, "producer_id")
                        first = cursor_i64(&c, "first_offset")
                        if flex:
                            fetch_skip_tags(&c, "aborted transaction tags")
                        aborted.append((pid, first))
            preferred = cursor_i32(&c, "preferred_read_replica") if version >= 11 else -1
            at = c.p
            size = fetch_length(&c, flex, True, "records")
            records = None
            if size >= 0:
                start = cursor_take(&c, size, "records")
                records = mv[start - c.base:c.p - c.base]
            elif size != -1:
                cursor_fail(&c, f"invalid records length {size}", at)
            leader = None
            if flex:
                ntags = fetch_tag_count(&c, "partition tags")
                last_tag = -1
                for k in range(ntags):
                    at = c.p
                    tag = cursor_uint(&c, "partition tags")
                    if tag <= last_tag:
                        cursor_fail(&c, f"tagged field {tag} out of order", at)
                    last_tag = tag
                    sub = fetch_tag(&c, "partition tag")
                    if tag == 1:  # current_leader (KIP-951)
                        leader_id = cursor_i32(&sub, "current_leader")
                        leader_epoch = cursor_i32(&sub, "current_leader")
                        fetch_tag_done(&sub, "current_leader")
                        if leader_id != -1:
                            leader = (leader_id, leader_epoch)
                    elif tag == 0 or tag == 2:  # diverging_epoch, snapshot_id: 12 bytes
                        cursor_take(&sub, 12, "diverging_epoch" if tag == 0 else "snapshot_id")
                        fetch_tag_done(&sub, "diverging_epoch" if tag == 0 else "snapshot_id")
            out.append(_FetchedPartition(topic, topic_id, partition, perr, hwm, lso, log_start,
                                         aborted, preferred, records, leader))
        if flex:
            fetch_skip_tags(&c, "topic tags")
    if flex:
        ntags = fetch_tag_count(&c, "response tags")
        last_tag = -1
        for k in range(ntags):
            at = c.p
            tag = cursor_uint(&c, "response tags")
            if tag <= last_tag:
                cursor_fail(&c, f"tagged field {tag} out of order in response tags", at)
            last_tag = tag
            sub = fetch_tag(&c, "response tag")
            if tag == 0 and version >= 16:
                fetch_node_endpoints(&sub)
                if sub.p != sub.end:
                    cursor_fail(&sub, f"tagged field node_endpoints has {sub.end - sub.p} "
                                "unread bytes", sub.p)
    return _FetchSlice(throttle, error_code, session_id, out)
