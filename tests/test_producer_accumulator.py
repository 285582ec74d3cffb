"""The producer's record accumulator on its own: no broker, no sender thread.

What the sender relies on (:mod:`kproto.producer.accumulator`'s interface):
one queue per partition in call order, at most one batch per partition out at
a time, linger and batch size, ``buffer_memory`` accounting and back-pressure,
the flush snapshot, splitting a batch the broker found too large, expiry and
abort. Plus the record batch header the sender stamps
(:mod:`kproto.records.batch`). The same behaviour against brokers is in
test_producer_semantics.py.
"""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

import pyarrow as pa
import pytest

from kproto import records
from kproto.config import resolve
from kproto.errors import IllegalStateError, KafkaConnectionError, KafkaTimeoutError
from kproto.producer import BatchFuture, RecordFuture, RecordMetadata
from kproto.producer.accumulator import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD,
    ProducerBatch,
    RecordAccumulator,
    chunks,
    leaves,
    row_sizes,
    wait_done,
)
from kproto.records import batch as layout

PARTITIONS = [0, 1, 2, 3]
LONG = 60_000       # linger_ms that never ends within a test


def _acc(**settings: Any) -> RecordAccumulator:
    # (bootstrap_servers: required by the settings, unused without a sender)
    return RecordAccumulator(resolve("producer", bootstrap_servers="unused:9092", **settings))


def _append(acc: RecordAccumulator, value: bytes, partition: int | None = 0,
            key: bytes | None = None, headers: Any = None, on_done: Any = None,
            topic: str = "t") -> tuple[ProducerBatch, int]:
    size = RECORD_OVERHEAD + len(value) + len(key or b"")
    return acc.append(topic, partition, key, value, 1_700_000_000_000, headers, size,
                      PARTITIONS, on_done)


def _drain(acc: RecordAccumulator, can_send: Any = None) -> list[ProducerBatch]:
    with acc.cond:
        return acc.drain(can_send)


def _values(b: ProducerBatch) -> list[bytes | None]:
    """The values of a send() batch's records, read back from its encoded batch."""
    return [r.value for r in records.decode(b.records.build()).to_pylist()]


def _done(acc: RecordAccumulator, b: ProducerBatch, base_offset: int = 0,
          error: BaseException | None = None) -> None:
    """What the sender does with an answer."""
    assert acc.deallocate(b)
    b.finish(base_offset, -1, error)


def _table_batch(topic: str, partition: int, values: list[bytes]) -> ProducerBatch:
    b = ProducerBatch(topic, partition, time.monotonic())
    b.table = pa.table({"value": values})
    b.payload = records.encode(b.table)
    b.count, b.size = len(values), len(b.payload)
    return b


# --------------------------------------------------------------------------- batching


def test_records_fill_a_batch_up_to_batch_size_then_open_another() -> None:
    size = RECORD_OVERHEAD + 40
    acc = _acc(batch_size=BATCH_OVERHEAD + 2 * size, linger_ms=LONG)
    got = [_append(acc, b"%040d" % i) for i in range(5)]
    assert [index for _, index in got] == [0, 1, 0, 1, 0]
    first, second, third = got[0][0], got[2][0], got[4][0]
    assert got[1][0] is first and got[3][0] is second
    assert first.size == BATCH_OVERHEAD + 2 * size and first.count == 2
    assert _values(first) == [b"%040d" % 0, b"%040d" % 1]
    # the full batches are ready; the open one lingers
    assert _drain(acc) == [first]
    assert acc.incomplete == {first, second, third}


def test_a_batch_lingers_for_linger_ms() -> None:
    acc = _acc(linger_ms=80)
    b, _ = _append(acc, b"x")
    assert _drain(acc) == []
    now = time.monotonic()
    with acc.cond:
        wake = acc.next_ready_time(now)
    assert now < wake <= b.created + 0.08 + 1e-6
    time.sleep(max(0.0, wake - time.monotonic()) + 0.01)
    assert _drain(acc) == [b]


def test_one_batch_per_partition_out_at_a_time_in_queue_order() -> None:
    acc = _acc(batch_size=BATCH_OVERHEAD + RECORD_OVERHEAD + 1, linger_ms=0)
    p0 = [_append(acc, b"%d" % i, partition=0)[0] for i in range(3)]
    p1 = _append(acc, b"a", partition=1)[0]
    assert set(_drain(acc)) == {p0[0], p1}
    assert _drain(acc) == []                       # both partitions have one out
    _done(acc, p0[0])
    assert _drain(acc) == [p0[1]]
    _done(acc, p0[1])
    _done(acc, p1)
    assert _drain(acc) == [p0[2]]


def test_a_reenqueued_batch_goes_first_after_its_backoff() -> None:
    acc = _acc(batch_size=BATCH_OVERHEAD + RECORD_OVERHEAD + 1, linger_ms=0)
    first, _ = _append(acc, b"1")
    second, _ = _append(acc, b"2")
    assert _drain(acc) == [first]
    first.next_try = time.monotonic() + 0.2        # the sender's retry backoff
    acc.reenqueue(first)
    with acc.cond:
        assert not acc.has_sendable()
        assert acc.next_ready_time(time.monotonic()) == pytest.approx(first.next_try)
    assert _drain(acc) == []                       # not the second: order is kept
    first.next_try = 0.0
    with acc.cond:
        assert acc.has_sendable()
    assert _drain(acc) == [first]


def test_can_send_holds_a_partition_back() -> None:
    """The sender's idempotence state decides whether a partition's first batch
    may go (idempotence.can_send); the others go on."""
    acc = _acc(linger_ms=0)
    b0, _ = _append(acc, b"x", partition=0)
    b1, _ = _append(acc, b"y", partition=1)
    assert _drain(acc, lambda b: b.partition != 0) == [b1]
    with acc.cond:
        assert not acc.has_sendable(lambda b: b.partition != 0)
    assert _drain(acc) == [b0]


def test_send_and_send_batch_share_one_queue_per_partition_in_call_order() -> None:
    acc = _acc(linger_ms=LONG)
    collected, _ = _append(acc, b"r0")
    _append(acc, b"r1")
    bulk = _table_batch("t", 0, [b"t0", b"t1"])
    acc.append_batch(bulk)                         # seals what send() collected first
    later, _ = _append(acc, b"r2")
    assert later is not collected
    order = []
    acc.begin_flush()
    for _ in range(3):
        (b,) = _drain(acc)
        order.append(b)
        _done(acc, b)
    acc.end_flush()
    assert order == [collected, bulk, later]
    assert acc.queued_bytes == 0


def test_sticky_partition_moves_on_when_its_batch_is_full() -> None:
    """Null keys stick to one partition until its batch is full (KIP-480); keys
    hash (murmur2) whatever the sticky partition is."""
    size = RECORD_OVERHEAD + 10
    acc = _acc(batch_size=BATCH_OVERHEAD + 2 * size, linger_ms=LONG)
    a, _ = _append(acc, b"0" * 10, partition=None)
    b, _ = _append(acc, b"1" * 10, partition=None)
    c, _ = _append(acc, b"2" * 10, partition=None)
    assert a is b and c is not a and c.partition != a.partition
    keyed = {_append(acc, b"v", partition=None, key=b"user-1")[0].partition
             for _ in range(5)}
    assert len(keyed) == 1


# --------------------------------------------------------------------------- buffer_memory


def test_buffer_memory_accounting_and_back_pressure() -> None:
    size = RECORD_OVERHEAD + 100
    acc = _acc(buffer_memory=5 * size, max_block_ms=300, linger_ms=0,
               batch_size=BATCH_OVERHEAD + size)
    batches = [_append(acc, b"x" * 100, partition=i % 4)[0] for i in range(5)]
    assert acc.queued_bytes == 5 * size == sum(b.charged for b in batches)
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="buffer_memory"):
        _append(acc, b"x" * 100)
    assert 0.25 < time.monotonic() - start < 5
    assert acc.queued_bytes == 5 * size              # the refused record holds nothing

    # a batch done on another thread lets a blocked append through
    out = _drain(acc)
    threading.Timer(0.05, _done, (acc, out[0])).start()
    _append(acc, b"x" * 100)
    assert acc.queued_bytes == 5 * size
    acc.abort_incomplete(KafkaConnectionError("closed"))
    assert acc.queued_bytes == 0 and not acc.incomplete


def test_a_record_larger_than_buffer_memory_goes_when_the_buffer_is_empty() -> None:
    acc = _acc(buffer_memory=100, max_block_ms=100, linger_ms=0)
    b, _ = _append(acc, b"x" * 500)
    assert acc.queued_bytes == b.charged == RECORD_OVERHEAD + 500


# --------------------------------------------------------------------------- flush


def test_flush_sends_at_once_and_waits_only_for_what_was_there() -> None:
    acc = _acc(linger_ms=LONG)
    before, _ = _append(acc, b"before", partition=0)
    assert _drain(acc) == []
    snapshot = acc.begin_flush()
    assert snapshot == [before]
    after, _ = _append(acc, b"after", partition=1)   # another thread sends meanwhile
    assert _drain(acc) == [before, after]            # flushing: linger is over for all
    acc.end_flush()
    assert not wait_done(snapshot, time.monotonic() + 0.05)
    _done(acc, before)
    assert wait_done(snapshot, time.monotonic() + 0.05)
    assert not after.done

    later, _ = _append(acc, b"later", partition=2)
    assert _drain(acc) == []                         # flush over: linger again


def test_close_refuses_appends_and_sends_the_rest_at_once() -> None:
    acc = _acc(linger_ms=LONG)
    b, _ = _append(acc, b"x")
    acc.begin_close()
    with pytest.raises(IllegalStateError):
        _append(acc, b"y")
    with pytest.raises(IllegalStateError):
        acc.append_batch(_table_batch("t", 0, [b"z"]))
    assert _drain(acc) == [b]


def test_a_dead_sender_fails_later_appends_with_its_error() -> None:
    acc = _acc()
    acc.fatal = KafkaConnectionError("producer sender thread died: boom")
    with pytest.raises(KafkaConnectionError, match="boom"):
        _append(acc, b"x")


# --------------------------------------------------------------------------- outcomes


def test_split_requeues_halves_first_and_futures_follow_them() -> None:
    acc = _acc(linger_ms=0)
    called: list[int] = []
    got = [_append(acc, b"%d" % i, on_done=lambda b, i: called.append(i))
           for i in range(5)]
    big = got[0][0]
    futures = [RecordFuture(b, i) for b, i in got]
    seen: list[RecordFuture] = []
    futures[4].add_done_callback(seen.append)
    charged = big.charged
    assert _drain(acc) == [big]
    follower, _ = _append(acc, b"next")

    parts = acc.split(big)
    assert [p.count for p in parts] == [2, 3]
    assert [_values(p) for p in parts] == [[b"0", b"1"], [b"2", b"3", b"4"]]
    assert big.split_into == parts and big.event.is_set() and not big.done
    assert acc.queued_bytes == charged + follower.charged
    assert sum(p.charged for p in parts) == charged
    assert big not in acc.incomplete and set(parts) <= acc.incomplete
    assert all(p.created == big.created for p in parts)   # same delivery deadline
    assert big.payload is None
    with pytest.raises(IndexError):                 # its records went to the parts
        big.records.slice(0, 1)
    assert leaves([big]) == parts

    assert _drain(acc) == [parts[0]]                # the halves first, in order
    _done(acc, parts[0], base_offset=10)
    assert futures[1].done() and not futures[4].done()
    assert _drain(acc) == [parts[1]]
    _done(acc, parts[1], base_offset=20)
    assert [f.result(0).offset for f in futures[:2]] == [10, 11]
    assert [f.result(0) for f in futures][2:] == [
        RecordMetadata("t", 0, 20 + i, 1_700_000_000_000) for i in range(3)]
    assert seen == [futures[4]]
    # each record's callback ran once, with its index in the part that carried it
    assert sorted(called) == [0, 0, 1, 1, 2]
    assert _drain(acc) == [follower]
    assert acc.split(parts[0]) == []                # a done batch is not split


def test_split_of_a_send_batch_batch_slices_its_table() -> None:
    acc = _acc()
    bulk = _table_batch("t", 0, [b"a", b"b", b"c"])
    acc.append_batch(bulk)
    future = BatchFuture([bulk])
    assert _drain(acc) == [bulk]
    small, large = acc.split(bulk)
    assert small.table.column("value").to_pylist() == [b"a"]
    assert large.table.column("value").to_pylist() == [b"b", b"c"]
    assert small.payload is None and large.payload is None
    for part, base in ((small, 0), (large, 1)):
        assert _drain(acc) == [part]
        acc.encode(part)
        assert records.decode(part.payload).to_arrow().column("value").to_pylist() == \
            part.table.column("value").to_pylist()
        _done(acc, part, base_offset=base)
    assert [(m.base_offset, m.record_count) for m in future.result(0)] == [(0, 1), (1, 2)]


def test_expired_takes_out_batches_queued_too_long() -> None:
    acc = _acc()
    old = _table_batch("t", 0, [b"old"])
    old.created -= 10
    acc.append_batch(old)
    acc.append_batch(_table_batch("t", 0, [b"new"]))
    young = _table_batch("t", 1, [b"young"])
    acc.append_batch(young)
    assert acc.expired(5.0) == [old]
    assert old in acc.incomplete                    # the sender fails it: _done below
    _done(acc, old, -1, KafkaTimeoutError("not sent within delivery_timeout_ms"))
    assert {b.partition for b in _drain(acc)} == {0, 1}


def test_a_batch_completes_once_and_abort_fails_the_rest() -> None:
    acc = _acc(linger_ms=LONG)
    sent, _ = _append(acc, b"sent", partition=0)
    queued, _ = _append(acc, b"queued", partition=1)
    acc.begin_flush()
    assert _drain(acc) == [sent, queued]
    acc.end_flush()
    lingering, _ = _append(acc, b"lingering", partition=2)
    _done(acc, sent, base_offset=5)
    assert not acc.deallocate(sent)                 # done already: nothing given back twice
    error = KafkaConnectionError("the producer was closed")
    acc.abort_incomplete(error)
    assert queued.error is error and lingering.error is error and sent.error is None
    assert RecordFuture(lingering, 0).exception(0) is error
    assert acc.queued_bytes == 0 and not acc.incomplete
    assert _drain(acc) == []


def test_add_callback_on_a_done_batch_says_so() -> None:
    acc = _acc()
    b, i = _append(acc, b"x")
    ran: list[int] = []
    assert b.add_callback(i, lambda _b, i: ran.append(i))
    _done(acc, b)
    assert ran == [0]
    assert not b.add_callback(i, lambda _b, i: ran.append(i)) and ran == [0]


def test_on_delivery_gets_each_records_metadata_or_the_error(caplog: Any) -> None:
    acc = _acc(linger_ms=LONG)
    seen: list[Any] = []

    def boom(err: Any, meta: Any) -> None:
        raise RuntimeError("user code")

    def record(i: int) -> Any:
        return lambda err, meta: seen.append((i, err, meta))

    fns = [record(0), boom, record(2)]
    for i, fn in enumerate(fns):
        b, index = acc.append("t", 1, None, b"v%d" % i, 1_700_000_000_000 + i, None,
                              RECORD_OVERHEAD + 2, PARTITIONS, None, fn)
        assert index == i
    acc.begin_flush()
    assert _drain(acc) == [b]
    with caplog.at_level("ERROR", logger="kproto.producer"):
        _done(acc, b, base_offset=40)
    assert seen == [(0, None, RecordMetadata("t", 1, 40, 1_700_000_000_000)),
                    (2, None, RecordMetadata("t", 1, 42, 1_700_000_000_002))]
    assert type(seen[0][2]) is RecordMetadata
    assert "delivery callback raised" in caplog.text     # logged; the others still ran

    seen.clear()
    b2, _ = acc.append("t", 1, None, b"w", 5, None, RECORD_OVERHEAD + 1, PARTITIONS, None,
                       record(0))
    assert b2 is not b and _drain(acc) == [b2]
    error = KafkaConnectionError("gone")
    assert acc.deallocate(b2)
    b2.finish(-1, -1, error)
    assert seen == [(0, error, None)]

    seen.clear()                                    # a LogAppendTime topic: the broker's time
    b3, _ = acc.append("t", 1, None, b"z", 5, None, RECORD_OVERHEAD + 1, PARTITIONS, None,
                       record(0))
    assert _drain(acc) == [b3] and acc.deallocate(b3)
    b3.finish(7, 1_800_000_000_000, None)
    assert seen == [(0, None, RecordMetadata("t", 1, 7, 1_800_000_000_000))]


def test_a_split_moves_each_on_delivery_to_the_part_of_its_record() -> None:
    acc = _acc(linger_ms=LONG)
    seen: dict[int, Any] = {}
    for i in range(5):
        b, _ = acc.append("t", 0, None, b"%d" % i, 1_000 + i, None, RECORD_OVERHEAD + 1,
                          PARTITIONS, None, lambda err, meta, i=i: seen.__setitem__(i, meta))
    acc.begin_flush()
    (b,) = _drain(acc)
    parts = acc.split(b)
    _done(acc, parts[0], base_offset=100)
    _done(acc, parts[1], base_offset=200)
    assert {i: (m.offset, m.timestamp) for i, m in seen.items()} == {
        0: (100, 1_000), 1: (101, 1_001), 2: (200, 1_002), 3: (201, 1_003), 4: (202, 1_004)}


# --------------------------------------------------------------------------- encoding


def test_encode_then_stamp_gives_a_valid_batch_with_the_producer_fields() -> None:
    acc = _acc(compression_type="lz4", linger_ms=0)
    _append(acc, b"v0", key=b"k0", headers=[("h", b"1")])
    _append(acc, b"v1")
    _append(acc, b"v2", key=b"k2")
    (out,) = _drain(acc)
    acc.encode(out)
    assert out.stamped is None
    assert [out.timestamp(i) for i in range(3)] == [1_700_000_000_000] * 3
    payload = out.payload
    acc.encode(out)
    assert out.payload is payload                   # encoded once
    stamped = layout.stamp_batch(payload, 7, 1, 100)
    assert struct.unpack_from(">qhi", stamped, layout.PRODUCER_ID) == (7, 1, 100)
    assert struct.unpack_from(">i", stamped, layout.RECORD_COUNT)[0] == 3
    assert struct.unpack_from(">b", stamped, layout.MAGIC)[0] == 2
    assert struct.unpack_from(">i", stamped, layout.BATCH_LENGTH)[0] == \
        len(stamped) - layout.PARTITION_LEADER_EPOCH
    cols = records.decode(stamped, check_crc=True).to_arrow()
    assert cols.column("value").to_pylist() == [b"v0", b"v1", b"v2"]
    assert cols.column("key").to_pylist() == [b"k0", None, b"k2"]
    assert cols.column("headers").to_pylist()[0] == [{"key": "h", "value": b"1"}]
    assert bytes(stamped[:layout.CRC]) == bytes(payload[:layout.CRC])
    assert bytes(stamped[layout.RECORD_COUNT:]) == bytes(payload[layout.RECORD_COUNT:])


def test_the_header_layout_matches_the_decoders() -> None:
    from kproto._pure import records as pure

    assert layout.HEADER_SIZE == pure.V2_OVERHEAD == BATCH_OVERHEAD
    batch = records.encode(value=[b"a"], producer_id=3, producer_epoch=4, base_sequence=5)
    assert struct.unpack_from(">qhi", batch, layout.PRODUCER_ID) == (3, 4, 5)
    assert bytes(layout.stamp_batch(batch, 3, 4, 5)) == batch


def test_row_sizes_and_chunks() -> None:
    table = pa.table({"key": [b"k", None], "value": [b"12345", b""]})
    assert row_sizes(table).tolist() == [RECORD_OVERHEAD + 6, RECORD_OVERHEAD]
    assert list(chunks(row_sizes(pa.table({"value": [b"x" * 8] * 5})), 45)) == [
        (0, 2), (2, 4), (4, 5)]
    assert list(chunks(pa.array([10, 10, 10, 50, 5]).to_numpy(), 20)) == [
        (0, 2), (2, 3), (3, 4), (4, 5)]


def test_row_sizes_from_offsets_for_every_binary_layout() -> None:
    """row_sizes: each row's key + value bytes + RECORD_OVERHEAD (offsets read
    directly for binary/string, sliced, chunked and large; views via the kernel)."""
    keys = pa.chunked_array([pa.array([b"ab", None, b""]), pa.array([b"xyz"] * 2).slice(1)])
    for values in (pa.array(["1", "22", None, "4444"]), pa.array([b"1", b"22", None, b"4444"]),
                   pa.array(["x", "1", "22", None, "4444"], pa.large_string()).slice(1),
                   pa.array([b"1", b"22", None, b"4444"], pa.binary_view())):
        got = row_sizes(pa.table({"key": keys, "value": values}))
        assert got.tolist() == [RECORD_OVERHEAD + n for n in (3, 2, 0, 7)]
    assert row_sizes(pa.table({"value": pa.array([b"v"] * 2)})).tolist() == \
        [RECORD_OVERHEAD + 1] * 2
