"""Hostile use of the ShareConsumer (KIP-932) on librdkafka's mock cluster: odd but
valid input, misuse from other threads, and a lying broker (answers rewritten by a
FaultProxy). Each test here failed before its fix."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest

from kproto import AcknowledgeType, Producer, ShareConsumer
from kproto.errors import ConfigError, IllegalStateError, ProtocolError
from kproto.protocol import ApiKey

from .share_support import SHARE_BROKERS, WAIT_S, poll_until, share_topic

pytestmark = SHARE_BROKERS

ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


@pytest.fixture
def producer(broker) -> Iterator[Producer]:
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        yield p


def consumer(bootstrap: str, group: str, **settings) -> ShareConsumer:
    return ShareConsumer(bootstrap_servers=bootstrap, group_id=group, fetch_max_wait_ms=100,
                         **settings)


def batches_of(c: ShareConsumer, n: int) -> list[pa.RecordBatch]:
    return poll_until(lambda: [b] if (b := c.poll_batch(500)).num_rows else [],
                      lambda g: sum(b.num_rows for b in g) >= n, f"{n} records")


def test_a_batch_naming_a_record_twice_is_refused_whole(broker, producer) -> None:
    """A batch concatenated with itself names every record twice: with a mask that
    accepts one copy and rejects the other, which one wins was silent (the last);
    it is IllegalStateError (a record is acknowledged once), and nothing is taken."""
    topic, group = share_topic(broker, producer, 10)
    with consumer(broker.bootstrap, group, share_acknowledgement_mode="explicit") as c:
        c.subscribe([topic])
        [batch] = batches_of(c, 10)
        twice = pa.concat_batches([batch, batch])
        mask = np.r_[np.ones(10, bool), np.zeros(10, bool)]
        with pytest.raises(IllegalStateError, match=r"offset 0 .*twice"):
            c.acknowledge_batch(twice, accept=mask, otherwise=REJECT)
        with pytest.raises(IllegalStateError, match="must be acknowledged"):
            c.poll(0)                                   # all or nothing: none taken
        c.acknowledge_batch(batch, ACCEPT)
        assert c.commit_sync() == {(topic, 0): None}


def test_close_from_another_thread_during_a_poll_is_refused(broker, producer) -> None:
    """The consumer is not thread-safe (as Java's, which throws
    ConcurrentModificationException): close() from another thread while a poll
    runs was an AssertionError out of the poll (its membership gone under it) and
    the two threads on one selector; now the other thread's call is an
    IllegalStateError and the poll goes on."""
    topic, group = share_topic(broker, producer, 0)
    c = consumer(broker.bootstrap, group)
    c.subscribe([topic])
    polling, outcome = threading.Event(), {}

    def poll() -> None:
        polling.set()
        try:
            outcome["poll"] = c.poll(5000)
        except BaseException as exc:           # noqa: BLE001 - what the poll raised
            outcome["poll"] = exc

    t = threading.Thread(target=poll)
    t.start()
    assert polling.wait(WAIT_S)
    try:
        # a ShareFetch in flight: the poll is under way (it waits for 5 s at most)
        deadline = time.monotonic() + WAIT_S
        while not c._sessions.in_flight:
            assert time.monotonic() < deadline, "the poll sent no ShareFetch"
            time.sleep(0.001)
        with pytest.raises(IllegalStateError, match="another thread"):
            c.close()
    finally:
        t.join(WAIT_S)
    assert not t.is_alive()
    assert outcome["poll"] == []
    c.close()
    with pytest.raises(IllegalStateError, match="closed"):
        c.poll(0)


def _lie(ranges):
    """An answer hook giving every partition of a ShareFetch answer that acquired
    records ``ranges`` instead."""
    def hook(key, version, body):
        if key != ApiKey.SHARE_FETCH:
            return None
        for t in body.get("responses") or []:
            for p in t["partitions"]:
                if p.get("acquired_records"):
                    p["acquired_records"] = ranges
        return body
    return hook


@pytest.mark.parametrize("ranges, what", [
    ([{"first_offset": 0, "last_offset": 10**15, "delivery_count": 1}], "offsets"),
    ([{"first_offset": 9, "last_offset": 0, "delivery_count": 1}], "9-0"),
    ([{"first_offset": 0, "last_offset": 9, "delivery_count": -3}], "delivery count -3"),
    ([{"first_offset": -5, "last_offset": 9, "delivery_count": 1}], "-5-9"),
], ids=["huge", "inverted", "negative-count", "negative-offset"])
def test_a_lying_share_fetch_answer_is_a_protocol_error(broker, producer, ranges,
                                                        what) -> None:
    """AcquiredRecords no broker sends: a range of 10^15 offsets was a NumPy
    MemoryError out of poll(); an inverted range was silently nothing (the records
    locked until the timeout); a negative delivery count was handed to the
    application. Each is a ProtocolError naming the partition and the range."""
    topic, group = share_topic(broker, producer, 10)
    with broker.proxied() as proxied:
        for p in proxied.proxies:
            p.answer_hook = _lie(ranges)
        with consumer(proxied.bootstrap, group) as c:
            c.subscribe([topic])
            with pytest.raises(ProtocolError, match=rf"{topic}\[0\].*{what}"):
                poll_until(lambda: c.poll(500), bool, "the lie")
            for p in proxied.proxies:
                p.answer_hook = None
            c.close(timeout_ms=5000)
    # the broker released them with the session: an honest answer hands them out
    with consumer(broker.bootstrap, group) as honest:
        honest.subscribe([topic])
        got = poll_until(lambda: honest.poll(500), lambda g: len(g) >= 10, "10 records")
        assert sorted(r.offset for r in got) == list(range(10))
        assert all(r.delivery_count >= 1 for r in got)


class _HeldHeartbeats:
    """An answer hook that holds every ShareGroupHeartbeat answer (a coordinator that
    takes its time) until released, or WAIT_S at most; ``held`` is set on the first."""

    def __init__(self) -> None:
        self.held, self.release = threading.Event(), threading.Event()

    def __call__(self, key, version, body):
        if key == ApiKey.SHARE_GROUP_HEARTBEAT and not self.release.is_set():
            self.held.set()
            self.release.wait(WAIT_S)
        return None


def test_a_slow_heartbeat_answer_does_not_hold_up_poll_or_close(broker, producer) -> None:
    """The heartbeat thread held the membership's lock while it waited for the
    coordinator's answer: a poll(200) waited for it (up to the request timeout) and
    close(timeout_ms=1000) joined the thread for the request timeout + 1 s, then
    sent the leave with the whole request timeout again. Both keep their timeouts."""
    topic, group = share_topic(broker, producer, 20)
    hook = _HeldHeartbeats()
    with broker.proxied() as proxied:
        c = consumer(proxied.bootstrap, group, request_timeout_ms=15000)
        try:
            c.subscribe([topic])
            poll_until(lambda: c.poll(500), lambda g: len(g) >= 20, "20 records")
            for p in proxied.proxies:
                p.answer_hook = hook
            assert hook.held.wait(WAIT_S), "no heartbeat was sent"
            start = time.monotonic()
            assert c.poll(200) == []
            assert time.monotonic() - start < 3.0
            start = time.monotonic()
            c.close(timeout_ms=1000)
            assert time.monotonic() - start < 3.0
        finally:
            hook.release.set()
            c.close()


@pytest.mark.parametrize("setting", [{"max_poll_records": 0}, {"max_poll_records": -1},
                                     {"max_poll_interval_ms": 0}, {"fetch_max_wait_ms": -1}])
def test_settings_below_javas_bounds_are_refused(setting) -> None:
    """max_poll_records=0 made poll() spin forever whatever its timeout (records
    buffered, none to hand out); -1 handed out every record at once and asked the
    broker for -1. Java's bounds (at least 1; fetch_max_wait_ms at least 0)."""
    [(key, value)] = setting.items()
    with pytest.raises(ConfigError, match=rf"{key} must be at least \d+, not {value}"):
        ShareConsumer(bootstrap_servers="127.0.0.1:1", group_id="g", **setting)


def test_a_batch_with_null_or_missing_coordinates_is_refused(broker, producer) -> None:
    """A null topic in a batch to acknowledge became topic index 0 (NaN cast to int64,
    shifted out): the row silently acknowledged a record of the batch's first topic.
    A null or negative partition, a missing column, or something not a batch was an
    IndexError, KeyError or AttributeError, or an error naming partition 4294967295."""
    topic, group = share_topic(broker, producer, 10)
    with consumer(broker.bootstrap, group, share_acknowledgement_mode="explicit") as c:
        c.subscribe([topic])
        [batch] = batches_of(c, 10)

        def table(topics, partitions, offsets=(0, 1)):
            return pa.table({"topic": pa.array(topics, pa.string()),
                             "partition": pa.array(partitions, pa.int32()),
                             "offset": pa.array(list(offsets), pa.int64())})

        for bad, message in [
                (table([topic, None], [0, 0]), "'topic' column has nulls"),
                (table([topic, topic], [0, None]), "'partition' column has nulls"),
                (table([topic, topic], [0, -1]), "'partition' column has partition -1"),
                (table([topic, topic], [0, 0], [0, None]), "'offset' column has nulls"),
                (batch.drop_columns(["offset"]), "no 'offset' column"),
                ([("t", 0, 1)], "not list")]:
            with pytest.raises(ValueError, match=message):
                c.acknowledge_batch(bad)
        with pytest.raises(IllegalStateError, match="10 returned by the last poll are not"):
            c.poll(0)                                   # none of them acknowledged
        c.acknowledge_batch(batch)
        assert c.commit_sync() == {(topic, 0): None}


def test_poll_keeps_its_timeout_when_the_brokers_hang(broker, producer) -> None:
    topic, group = share_topic(broker, producer, 20)
    with broker.proxied() as proxied:
        c = consumer(proxied.bootstrap, group, request_timeout_ms=4000)
        try:
            c.subscribe([topic])
            poll_until(lambda: c.poll(500), lambda g: len(g) >= 20, "20 records")
            for p in proxied.proxies:
                p.stall = True
            c.commit_sync(timeout_ms=500)       # the sessions' requests time out
            start = time.monotonic()
            c.poll(500)
            assert time.monotonic() - start < 3.0
        finally:
            for p in proxied.proxies:
                p.heal()
            c.close(timeout_ms=2000)
