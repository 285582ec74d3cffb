"""The KIP-848 consumer protocol (``group_protocol="consumer"``) against librdkafka's
mock cluster, alone and with confluent-kafka's KIP-848 consumer in the same group.

Only the mock speaks ConsumerGroupHeartbeat among the test brokers (Tansu and
noida-db do not speak KIP-848), so these tests run on a mock of their own whose
consumer groups heartbeat every 100 ms and expire sessions after 3 s (set
through librdkafka's mock API), which keeps rebalances short. Every wait is a
bounded loop of polls.
"""

from __future__ import annotations

import ctypes
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from kproto import Consumer, Producer
from kproto.errors import CommitFailedError, ErrorCode
from kproto.groups.consumer_state import MemberState
from kproto.structs import TopicPartition
from kproto.testing import MockCluster

SESSION_MS = 3000


@pytest.fixture(scope="module")
def mock() -> Iterator[MockCluster]:
    with MockCluster(3) as cluster:
        lib, handle = cluster._mock_api()
        for name, value in (("session_timeout_ms", SESSION_MS),
                            ("heartbeat_interval_ms", 100)):
            fn = getattr(lib, f"rd_kafka_mock_set_group_consumer_{name}")
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int]
            fn.restype = None
            fn(handle, value)
        yield cluster


def topic_with(mock: MockCluster, partitions: int, records: int) -> str:
    topic = f"kip848-{uuid.uuid4().hex[:8]}"
    mock.create_topic(topic, partitions)
    with Producer(bootstrap_servers=mock.bootstrap) as p:
        for i in range(records):
            p.send(topic, value=b"%d" % i, partition=i % partitions)
        p.flush()
    return topic


def member(mock: MockCluster, group: str, **settings) -> Consumer:
    return Consumer(bootstrap_servers=mock.bootstrap, group_id=group, group_protocol="consumer",
                    auto_offset_reset="earliest", **settings)


def poll_until(consumers: list[Consumer], done: Callable[[], bool], timeout: float = 20.0,
               sink: list | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        for c in consumers:
            got = c.poll(50)
            if sink is not None:
                sink.extend(got)


class Listener:
    def __init__(self) -> None:
        self.calls: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
        self.calls.append(("revoked", set(tps)))

    def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
        self.calls.append(("assigned", set(tps)))

    def on_partitions_lost(self, tps: set[TopicPartition]) -> None:
        self.calls.append(("lost", set(tps)))


def test_members_split_and_take_over_with_revoke_before_assign(mock: MockCluster) -> None:
    topic = topic_with(mock, 4, 40)
    group = f"g-{uuid.uuid4().hex[:6]}"
    la, lb = Listener(), Listener()
    a, b = member(mock, group), member(mock, group)
    try:
        a.subscribe([topic], listener=la)
        got: list = []
        poll_until([a], lambda: len(got) >= 40, sink=got)
        assert len(a.assignment()) == 4
        b.subscribe([topic], listener=lb)
        poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
        assert not a.assignment() & b.assignment()
        revoked = [tps for kind, tps in la.calls if kind == "revoked"]
        assert revoked and revoked[0] == b.assignment()       # a gave up b's, first
        assert a._group.group_metadata().generation_id > 0     # the member epoch
        b.close()                                              # leaves: a takes all again
        poll_until([a], lambda: len(a.assignment()) == 4)
    finally:
        a.close()


def test_fenced_member_reports_lost_and_rejoins(mock: MockCluster) -> None:
    topic = topic_with(mock, 2, 0)
    listener = Listener()
    c = member(mock, f"g-{uuid.uuid4().hex[:6]}")
    try:
        c.subscribe([topic], listener=listener)
        poll_until([c], lambda: len(c.assignment()) == 2)
        mock.push_request_errors(68, ErrorCode.FENCED_MEMBER_EPOCH)
        poll_until([c], lambda: any(k == "lost" for k, _ in listener.calls))
        assert ("lost", {TopicPartition(topic, 0), TopicPartition(topic, 1)}) in listener.calls
        poll_until([c], lambda: len(c.assignment()) == 2 and
                   c._group.member_state is MemberState.STABLE)
    finally:
        c.close()


def test_commits_carry_the_member_epoch_and_stale_ones_fail(mock: MockCluster) -> None:
    topic = topic_with(mock, 1, 5)
    c = member(mock, f"g-{uuid.uuid4().hex[:6]}", enable_auto_commit=False)
    try:
        c.subscribe([topic])
        got: list = []
        poll_until([c], lambda: len(got) >= 5, sink=got)
        c.commit()                                 # the mock checks the epoch: accepted
        assert c.committed([(topic, 0)]) == {TopicPartition(topic, 0): 5}
        mock.push_request_errors(8, ErrorCode.STALE_MEMBER_EPOCH)
        with pytest.raises(CommitFailedError, match="STALE_MEMBER_EPOCH"):
            c.commit({(topic, 0): 3})
        assert c.committed([(topic, 0)]) == {TopicPartition(topic, 0): 5}
    finally:
        c.close()


def test_max_poll_interval_leaves_then_the_next_poll_rejoins(mock: MockCluster) -> None:
    topic = topic_with(mock, 2, 0)
    group = f"g-{uuid.uuid4().hex[:6]}"
    listener = Listener()
    slow = member(mock, group, max_poll_interval_ms=1000)
    other = member(mock, group)
    try:
        slow.subscribe([topic], listener=listener)
        other.subscribe([topic])
        poll_until([slow, other], lambda: len(slow.assignment()) == 1 and
                   len(other.assignment()) == 1)
        # slow stops polling: its heartbeat thread leaves; other gets everything
        poll_until([other], lambda: len(other.assignment()) == 2)
        assert slow._group.member_state is MemberState.STALE
        with pytest.raises(CommitFailedError, match="not part of an active group"):
            slow.commit({(topic, 0): 0})
        held = slow.assignment()                     # until the next poll reports it lost
        assert len(held) == 1
        poll_until([slow, other], lambda: len(slow.assignment()) == 1 and
                   slow._group.member_state is MemberState.STABLE)
        assert ("lost", held) in listener.calls
    finally:
        slow.close()
        other.close()


def test_static_member_leaves_with_epoch_minus_two_and_gets_its_partitions_back(
        mock: MockCluster) -> None:
    topic = topic_with(mock, 2, 0)
    group = f"g-{uuid.uuid4().hex[:6]}"
    first = member(mock, group, group_instance_id="static-1")
    other = member(mock, group)
    first.subscribe([topic])
    other.subscribe([topic])
    poll_until([first, other], lambda: len(first.assignment()) == 1 and
               len(other.assignment()) == 1)
    mine = first.assignment()
    first.close()                                    # -2: the coordinator keeps its place
    again = member(mock, group, group_instance_id="static-1")
    try:
        again.subscribe([topic])
        poll_until([again, other], lambda: again.assignment() == mine)
        assert other.assignment() == {TopicPartition(topic, p) for p in (0, 1)} - mine
    finally:
        again.close()
        other.close()


def test_regex_subscription_is_resolved_by_the_broker(mock: MockCluster) -> None:
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    mock.create_topic(f"{prefix}-a", 1)
    c = member(mock, f"g-{uuid.uuid4().hex[:6]}")
    try:
        c.subscribe(pattern=f"{prefix}-.*")
        poll_until([c], lambda: c.assignment() == {TopicPartition(f"{prefix}-a", 0)})
        mock.create_topic(f"{prefix}-b", 1)          # a topic id metadata does not know yet
        poll_until([c], lambda: len(c.assignment()) == 2)
    finally:
        c.close()
