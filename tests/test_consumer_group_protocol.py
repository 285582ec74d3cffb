"""The KIP-848 consumer protocol (``group_protocol="consumer"``) against librdkafka's
mock cluster, alone and with confluent-kafka's KIP-848 consumer in the same group.

Only the mock speaks ConsumerGroupHeartbeat among the test brokers (Tansu and
noida-db do not speak KIP-848), so these tests run on a mock of their own whose
consumer groups heartbeat every 100 ms and expire sessions after 3 s (set
through librdkafka's mock API), which keeps rebalances short. Every wait is a
bounded loop of polls.
"""

from __future__ import annotations

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
        cluster.set_group_consumer_timeouts(SESSION_MS, 100)
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


# ------------------------------------------------------------------ interop


class Tally:
    """Records a member consumed, counted once the member committed past them while
    still owning their partition (what a committed generation consumed)."""

    def __init__(self, committed: list[tuple[int, int]]) -> None:
        self.committed = committed
        self.pending: dict[int, list[int]] = {}

    def got(self, partition: int, offset: int) -> None:
        self.pending.setdefault(partition, []).append(offset)

    def drop(self, partitions: set[int]) -> None:            # revoked or lost
        for p in partitions:
            self.pending.pop(p, None)

    def committed_for(self, partitions: set[int]) -> None:
        for p, offsets in self.pending.items():
            if p in partitions:
                self.committed.extend((p, o) for o in offsets)
        self.pending = {}


class KprotoMember:
    def __init__(self, mock: MockCluster, group: str, topic: str, tally: Tally) -> None:
        self.tally = tally
        self.c = member(mock, group, enable_auto_commit=False)
        outer = self

        class L:
            def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
                outer.tally.drop({tp.partition for tp in tps})

            def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
                pass

            on_partitions_lost = on_partitions_revoked

        self.c.subscribe([topic], listener=L())

    def step(self) -> None:
        for r in self.c.poll(50):
            self.tally.got(r.partition, r.offset)
        owned = {tp.partition for tp in self.c.assignment()}
        try:
            self.c.commit()
        except CommitFailedError:
            return
        self.tally.committed_for(owned)

    def crash(self) -> None:
        """No leave: the heartbeats stop, the connections close, the session expires."""
        group, self.c._group = self.c._group, None
        group._stop_heartbeat()
        group._drop_coordinator()
        self.c.close()


class ConfluentMember:
    def __init__(self, mock: MockCluster, group: str, topic: str, tally: Tally) -> None:
        from confluent_kafka import Consumer as CKConsumer

        self.tally = tally
        self.c = CKConsumer({"bootstrap.servers": mock.bootstrap, "group.id": group,
                             "group.protocol": "consumer", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest"})
        self.c.subscribe([topic], on_revoke=self._gone, on_lost=self._gone)

    def _gone(self, consumer, tps) -> None:
        self.tally.drop({tp.partition for tp in tps})

    def step(self) -> None:
        from confluent_kafka import KafkaException

        for m in self.c.consume(num_messages=500, timeout=0.05):
            if m.error() is None:
                self.tally.got(m.partition(), m.offset())
        owned = {tp.partition for tp in self.c.assignment()}
        try:
            self.c.commit(asynchronous=False)
        except KafkaException:
            return                              # nothing to commit, or refused
        self.tally.committed_for(owned)

    def close(self) -> None:
        self.c.close()


def test_interop_with_confluent_kafka_members_exactly_once_per_committed_generation(
        mock: MockCluster) -> None:
    """kproto and confluent-kafka KIP-848 members share a group on the mock while
    records flow: members join, leave, one crashes (no leave; its session expires)
    and members come back. Every record is consumed and committed exactly once by
    the members that owned its partition."""
    pytest.importorskip("confluent_kafka")
    partitions, per_phase = 6, 120
    topic = topic_with(mock, partitions, 0)
    group = f"g-{uuid.uuid4().hex[:6]}"
    committed: list[tuple[int, int]] = []
    producer = Producer(bootstrap_servers=mock.bootstrap)
    sent = 0

    def produce() -> None:
        nonlocal sent
        for i in range(per_phase):
            producer.send(topic, value=b"%d" % (sent + i), partition=(sent + i) % partitions)
        producer.flush()
        sent += per_phase

    def run(members: list, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for m in members:
                m.step()

    a = KprotoMember(mock, group, topic, Tally(committed))
    b = ConfluentMember(mock, group, topic, Tally(committed))
    live: list = [a, b]
    try:
        produce()
        run(live, 2.0)
        c = KprotoMember(mock, group, topic, Tally(committed))     # a join
        live.append(c)
        produce()
        run(live, 2.0)
        live.remove(b)                                              # a leave
        b.close()
        produce()
        run(live, 1.0)
        live.remove(a)                                              # a crash
        a.crash()
        produce()
        run(live, SESSION_MS / 1000 + 2.0)
        a2 = KprotoMember(mock, group, topic, Tally(committed))    # they come back
        b2 = ConfluentMember(mock, group, topic, Tally(committed))
        live += [a2, b2]
        produce()
        deadline = time.monotonic() + 30
        while len(set(committed)) < sent:
            assert time.monotonic() < deadline, f"{len(set(committed))} of {sent} committed"
            run(live, 0.2)
        counts: dict[tuple[int, int], int] = {}
        for key in committed:
            counts[key] = counts.get(key, 0) + 1
        twice = {k: n for k, n in counts.items() if n > 1}
        assert not twice, f"consumed and committed more than once: {sorted(twice)[:10]}"
        assert len(counts) == sent
        owners = [m for m in live if isinstance(m, KprotoMember) and m.c.assignment()]
        assert owners, "no kproto member owned partitions at the end"
    finally:
        for m in live:
            m.c.close() if isinstance(m, KprotoMember) else m.close()
        producer.close()
