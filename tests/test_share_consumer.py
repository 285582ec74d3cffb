"""kproto's ShareConsumer (KIP-932) against librdkafka's mock cluster: delivery
counts, disjoint delivery among members, release / reject / lock timeouts,
explicit-mode misuse, close mid-batch, poll_batch with mask acknowledgements,
session and heartbeat errors (the edge cases of Java's
ShareConsumeRequestManagerTest and ShareMembershipManagerTest that the mock can
produce). tests/share_support.py says what the mock does."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kproto import AcknowledgeType, Producer, ShareConsumer
from kproto.errors import (
    ConfigError,
    ErrorCode,
    IllegalStateError,
    InvalidRecordStateError,
)
from kproto.protocol import ApiKey

from .aio_support import driver_fixture
from .share_support import SHARE_BROKERS, WAIT_S, poll_until, produce, share_topic

pytestmark = SHARE_BROKERS
consumer_driver = driver_fixture(globals(), "ShareConsumer")   # over each I/O driver

ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


@pytest.fixture
def producer(broker) -> Iterator[Producer]:
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        yield p


def consumer(broker, group: str, **settings) -> ShareConsumer:
    return ShareConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                         fetch_max_wait_ms=100, **settings)


def wait_until(condition, what: str) -> None:
    """Until ``condition()`` holds (checked every 20 ms; fails after WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def share_one_partition(broker, group: str, members: list[ShareConsumer], topic: str) -> None:
    """Every member assigned partition 0 of ``topic`` (the mock's assignor gives a
    partition to one member only), once each has joined; returns when each knows."""
    wait_until(lambda: all(m._member.epoch > 0 for m in members), "every member to join")
    broker.process.set_share_assignment(group, {m._member.member_id: [(topic, 0)]
                                                for m in members})
    wait_until(lambda: all(len(m._member.assignment()[1]) == 1 for m in members),
               "the assignment")


def offsets(records) -> list[int]:
    return [r.offset for r in records]


def test_records_carry_delivery_count_and_implicit_mode_accepts(broker, producer) -> None:
    topic, group = share_topic(broker, producer, 50)
    with consumer(broker, group) as c:
        c.subscribe([topic])
        got = poll_until(lambda: c.poll(500), lambda g: len(g) >= 50, "50 records")
        assert sorted(offsets(got)) == list(range(50))
        assert {r.delivery_count for r in got} == {1}
        assert [r.value for r in sorted(got, key=lambda r: r.offset)] == \
            [str(i).encode() for i in range(50)]
        assert c.commit_sync() == {(topic, 0): None}     # the last poll's, accepted
        assert c.acquisition_lock_timeout_ms() == 30000
        # nothing accepted comes again: the next record is the one written next
        produce(producer, topic, [b"marker"])
        after = poll_until(lambda: c.poll(500), lambda g: len(g) >= 1, "the marker")
        assert [(r.offset, r.value, r.delivery_count) for r in after] == [(50, b"marker", 1)]


def test_members_of_one_partition_get_disjoint_records(broker, producer) -> None:
    topic, group = share_topic(broker, producer, 300)
    members = [consumer(broker, group, max_poll_records=25) for _ in range(3)]
    try:
        for m in members:
            m.subscribe([topic])
        share_one_partition(broker, group, members, topic)
        seen: list[list[int]] = [[] for _ in members]

        def poll_all() -> list[int]:
            out = []
            for m, mine in zip(members, seen, strict=True):
                got = m.poll(200)
                assert {r.delivery_count for r in got} <= {1}
                mine.extend(offsets(got))
                out.extend(offsets(got))
            return out

        everything = poll_until(poll_all, lambda g: len(g) >= 300, "300 records")
        assert sorted(everything) == list(range(300))       # each once: disjoint
        assert sum(1 for mine in seen if mine) >= 2         # shared, not one member's
        for m in members:
            assert m.commit_sync() in ({}, {(topic, 0): None})
    finally:
        for m in members:
            m.close()


def test_released_come_again_counted_rejected_and_accepted_do_not(broker, producer) -> None:
    topic, group = share_topic(broker, producer, 30)
    with consumer(broker, group, share_acknowledgement_mode="explicit") as c:
        c.subscribe([topic])
        first = poll_until(lambda: c.poll(500), lambda g: len(g) >= 30, "30 records")
        kinds = {}
        for r in first:
            kinds[r.offset] = (ACCEPT, RELEASE, REJECT)[r.offset % 3]
            c.acknowledge(r, kinds[r.offset])
        assert c.commit_sync() == {(topic, 0): None}
        produce(producer, topic, [b"marker"])
        again = poll_until(lambda: c.poll(500), lambda g: any(r.value == b"marker" for r in g),
                           "the marker")
        for r in again:
            c.acknowledge(r)
        released = sorted(o for o, k in kinds.items() if k == RELEASE)
        assert sorted(offsets(again)) == released + [30]
        assert {r.offset: r.delivery_count for r in again} == {**{o: 2 for o in released},
                                                                30: 1}
        c.commit_sync()


def test_lock_timeout_redelivers_and_the_late_acknowledgement_fails(broker, producer) -> None:
    topic, group = share_topic(broker, producer, 10, lock_ms=1000)
    holder = consumer(broker, group, share_acknowledgement_mode="explicit")
    taker = consumer(broker, group)
    try:
        holder.subscribe([topic])
        held = poll_until(lambda: holder.poll(500), lambda g: len(g) >= 10, "10 records")
        assert holder.acquisition_lock_timeout_ms() == 1000
        taker.subscribe([topic])        # the locks time out while holder does nothing
        share_one_partition(broker, group, [holder, taker], topic)
        again = poll_until(lambda: taker.poll(500), lambda g: len(g) >= 10, "redelivery")
        assert sorted(offsets(again)) == sorted(offsets(held)) == list(range(10))
        assert {r.delivery_count for r in again} == {2}
        for r in held:                  # too late: they are taker's now
            holder.acknowledge(r)
        late = holder.commit_sync()
        assert isinstance(late[(topic, 0)], InvalidRecordStateError)
        assert taker.commit_sync() == {(topic, 0): None}
    finally:
        taker.close()
        holder.close()


def test_delivery_limit_archives_a_record_released_too_often(broker, producer) -> None:
    topic, group = share_topic(broker, producer, 1, max_deliveries=2)
    with consumer(broker, group, share_acknowledgement_mode="explicit") as c:
        c.subscribe([topic])
        for count in (1, 2):
            [r] = poll_until(lambda: c.poll(500), lambda g: len(g) >= 1, "the record")
            assert (r.offset, r.delivery_count) == (0, count)
            c.acknowledge(r, RELEASE)
            c.commit_sync()
        produce(producer, topic, [b"marker"])
        [r] = poll_until(lambda: c.poll(500), lambda g: len(g) >= 1, "the marker")
        assert (r.offset, r.value) == (1, b"marker")        # offset 0: archived
        c.acknowledge(r)


def test_explicit_mode_misuse_is_an_error(broker, producer) -> None:
    topic, group = share_topic(broker, producer, 5)
    with consumer(broker, group, share_acknowledgement_mode="explicit") as c:
        c.subscribe([topic])
        got = poll_until(lambda: c.poll(500), lambda g: len(g) >= 5, "5 records")
        with pytest.raises(IllegalStateError, match="must be acknowledged"):
            c.poll(0)
        c.acknowledge(got[0])
        with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
            c.acknowledge(got[0])                           # twice
        with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
            c.acknowledge_offset(topic, 0, 99)              # never returned
        with pytest.raises(IllegalStateError, match="v2"):
            c.acknowledge(got[1], AcknowledgeType.RENEW)    # the mock has v1 only
        with pytest.raises(ValueError, match="not an acknowledge type"):
            c.acknowledge(got[1], 7)
        with pytest.raises(IllegalStateError, match="must be acknowledged"):
            c.poll(0)                                       # still 4 to go
        for r in got[1:]:
            c.acknowledge(r)
        assert c.poll(0) == []
    with consumer(broker, group) as implicit:
        implicit.subscribe([topic])
        with pytest.raises(IllegalStateError, match="explicit"):
            implicit.acknowledge(got[0])


def test_settings_and_states_refused() -> None:
    with pytest.raises(ConfigError, match="auto_offset_reset.*not the share_consumer"):
        ShareConsumer(bootstrap_servers="127.0.0.1:1", group_id="g", auto_offset_reset="earliest")
    with pytest.raises(ConfigError, match="share_acknowledgement_mode"):
        ShareConsumer(bootstrap_servers="127.0.0.1:1", share_acknowledgement_mode="sometimes")
    c = ShareConsumer({"bootstrap.servers": "127.0.0.1:1", "share.acknowledgement.mode":
                       "explicit"})
    with pytest.raises(ConfigError, match="group_id"):
        c.subscribe(["t"])
    with pytest.raises(IllegalStateError, match="not subscribed"):
        c.poll(0)
    c.close()
    with pytest.raises(IllegalStateError, match="closed"):
        c.poll(0)


def test_close_mid_batch_sends_what_was_acknowledged_and_releases_the_rest(
        broker, producer) -> None:
    topic, group = share_topic(broker, producer, 10)
    first = consumer(broker, group, share_acknowledgement_mode="explicit")
    first.subscribe([topic])
    got = poll_until(lambda: first.poll(500), lambda g: len(g) >= 10, "10 records")
    for r in got[:4]:
        first.acknowledge(r)
    first.acknowledge(got[4], REJECT)
    answered = []
    first.set_acknowledgement_commit_callback(lambda offs, exc: answered.append((offs, exc)))
    first.close()
    assert answered == [({(topic, 0): {0, 1, 2, 3, 4}}, None)]
    with consumer(broker, group) as second:
        second.subscribe([topic])
        rest = poll_until(lambda: second.poll(500), lambda g: len(g) >= 5, "the rest")
        assert sorted(offsets(rest)) == [5, 6, 7, 8, 9]
        assert {r.delivery_count for r in rest} == {2}


def test_poll_batch_and_acknowledgement_by_mask(broker, producer) -> None:
    """poll_batch's columns (with delivery_count) and acknowledgement by a mask. In
    explicit mode each batch is acknowledged before the next poll: the two
    partitions' records may come in one poll or in several (two leaders answer
    when they answer)."""
    topic, group = share_topic(broker, producer, 40, partitions=2)
    with consumer(broker, group, share_acknowledgement_mode="explicit") as c:
        c.subscribe([topic])
        batches: list[pa.RecordBatch] = []

        def take_and_ack(**how: Any) -> list[pa.RecordBatch]:
            b = c.poll_batch(500)
            if not b.num_rows:
                return []
            if not batches:
                with pytest.raises(ValueError, match="values for"):
                    c.acknowledge_batch(b, accept=np.ones(1, bool))
                with pytest.raises(ValueError, match="nulls"):
                    c.acknowledge_batch(b, accept=pa.array([None] * b.num_rows, pa.bool_()))
            if how:
                c.acknowledge_batch(b, **how)
            else:                      # even values accepted, odd ones released
                values = np.array([int(v) for v in b["value"].to_pylist()])
                c.acknowledge_batch(b, accept=pa.array(values % 2 == 0), otherwise=RELEASE)
            with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
                c.acknowledge_batch(b, ACCEPT)          # all or nothing: acked already
            batches.append(b)
            return [b]

        first = poll_until(take_and_ack, lambda g: sum(b.num_rows for b in g) >= 40,
                           "40 records")
        table = pa.Table.from_batches(first)
        assert table.column_names == ["key", "value", "topic", "partition", "offset",
                                      "timestamp", "timestampType", "headers",
                                      "delivery_count"]
        assert table["delivery_count"].type == pa.int16()
        assert set(table["delivery_count"].to_pylist()) == {1}
        assert sorted(int(v) for v in table["value"].to_pylist()) == list(range(40))
        assert set(c.commit_sync().values()) == {None}
        again = poll_until(lambda: take_and_ack(type=REJECT),
                           lambda g: sum(b.num_rows for b in g) >= 20, "20 released")
        redone = pa.Table.from_batches(again)
        assert sorted(int(v) for v in redone["value"].to_pylist()) == list(range(1, 40, 2))
        assert set(redone["delivery_count"].to_pylist()) == {2}
        assert set(c.commit_sync().values()) == {None}


def test_a_lost_share_session_is_opened_again(broker, producer) -> None:
    """INVALID_SHARE_SESSION_EPOCH / SHARE_SESSION_NOT_FOUND: the next ShareFetch opens
    a new session (epoch 0) and the consumer gets every record."""
    topic, group = share_topic(broker, producer, 20)
    mock = broker.process
    with consumer(broker, group, max_poll_records=5) as c:
        c.subscribe([topic])
        got = poll_until(lambda: c.poll(500), lambda g: len(g) >= 5, "5 records")
        mock.push_request_errors(ApiKey.SHARE_FETCH, ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                 ErrorCode.SHARE_SESSION_NOT_FOUND)
        got += poll_until(lambda: c.poll(500), lambda g: {r.offset for r in got + g}
                          >= set(range(20)), "the other records")
        assert {r.offset for r in got} == set(range(20))


def test_a_fenced_member_joins_again(broker, producer) -> None:
    topic, group = share_topic(broker, producer, 10)
    mock = broker.process
    mock.push_request_errors(ApiKey.SHARE_GROUP_HEARTBEAT, ErrorCode.FENCED_MEMBER_EPOCH)
    with consumer(broker, group) as c:
        c.subscribe([topic])
        got = poll_until(lambda: c.poll(500), lambda g: len(g) >= 10, "10 records")
        assert sorted(offsets(got)) == list(range(10))
        assert c.assignment() == {(topic, 0)}
