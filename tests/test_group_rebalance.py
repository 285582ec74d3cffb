"""Classic-protocol rebalances as Java's consumer runs them, against real brokers.

- ``poll(timeout)`` returns within its timeout while the coordinator holds a
  rebalance: the JoinGroup/SyncGroup exchange goes on across polls (Java's
  ``joinFuture``), and the member joins once the others have rejoined.
- Cooperative rebalancing (KIP-429, ``cooperative-sticky``): a member joining
  costs the others only the partitions it takes; they read the partitions they
  keep during the rebalance, revoke just what they lose and rejoin at once;
  every record is read exactly once.
- Static membership (KIP-345): a member with a ``group_instance_id`` closed
  without LeaveGroup and restarted within the session timeout gets its
  partitions back, and the other members see no rebalance.

On Tansu and noida-db (tests/brokers.py: the mock cannot host kproto's groups).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pytest

from kproto import Consumer, Producer, TopicPartition

from .test_group_semantics import Events, fast
from .test_groups import Member, _wait

pytestmark = [pytest.mark.broker, pytest.mark.brokers(needs=("groups",))]


def _all(topic: str, n: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(n)}


def _poll_until(consumers: list[Consumer], predicate, timeout: float, what: str) -> None:
    """Poll each of ``consumers`` in turn (100 ms each) until ``predicate()``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        for c in consumers:
            c.poll_batch(100)


@contextmanager
def _a_owning_all_then_b(broker, topic: str, settings: dict
                         ) -> Iterator[tuple[Consumer, Consumer]]:
    """Two members of one group on ``topic`` (made here, 4 partitions): A subscribed
    and polled until it owns all of them, then B subscribed (not polled yet); both
    closed at the end."""
    broker.create_topic(topic, 4)
    group = f"g-{topic}"
    a = Consumer(bootstrap_servers=broker.bootstrap, group_id=group, **settings)
    b = Consumer(bootstrap_servers=broker.bootstrap, group_id=group, **settings)
    try:
        a.subscribe([topic])
        _poll_until([a], lambda: a.assignment() == _all(topic, 4), 30, "A owning all")
        b.subscribe([topic])
        yield a, b
    finally:
        b.close()
        a.close()


def test_poll_returns_within_its_timeout_while_the_rebalance_is_held(broker, unique_topic):
    """A owns the topic and is busy (no poll; its heartbeats go on). B joins: the
    coordinator holds B's JoinGroup until A rejoins, yet each of B's
    poll(200 ms) returns within its timeout; once A polls, both are in."""
    settings = {**fast(broker), "max_poll_interval_ms": 60000}
    with _a_owning_all_then_b(broker, unique_topic, settings) as (a, b):
        polls = 0
        while not a._group._needs_join:          # B's JoinGroup started the rebalance
            b.poll_batch(200)                    # (the first also finds the coordinator)
            polls += 1
            assert polls < 100, "A's heartbeat never saw the rebalance"
        took = []
        for _ in range(8):                       # ... which waits for A meanwhile
            start = time.monotonic()
            assert b.poll_batch(200).num_rows == 0
            took.append(time.monotonic() - start)
        assert b.assignment() == set() and b._group.rebalancing
        # each within its timeout (a loaded machine may delay one: the median is
        # strict, the worst bounded; a poll that waited for the join took seconds)
        assert sorted(took)[len(took) // 2] < 0.2 + 0.1, took
        assert max(took) < 0.2 + 1.0, took
        _poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, 60,
                    "a 2/2 split")
        assert a.assignment() | b.assignment() == _all(unique_topic, 4)


class Feeder(threading.Thread):
    """Produces ``per_round`` records to every partition every 20 ms until stopped:
    records keep arriving during the rebalances."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, per_round: int = 20):
        super().__init__(daemon=True)
        self.producer = Producer(bootstrap_servers=bootstrap, linger_ms=5)
        self.topic, self.partitions, self.per_round = topic, partitions, per_round
        self.stop = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            n = 0
            while not self.stop.wait(0.02):
                for part in range(self.partitions):
                    values = [f"{part}-{n + i}".encode() for i in range(self.per_round)]
                    self.producer.send_batch(self.topic, pa.table({"value": values}),
                                             partition=part)
                    self.sent += self.per_round
                n += self.per_round
            self.producer.flush()
        except BaseException as exc:    # surfaced by the test
            self.error = exc
        finally:
            self.producer.close()


class Timed(Member):
    """A Member that notes when it read what: ``(time, partition, offset)``."""

    def run(self):
        try:
            while not self.stop.is_set():
                batch = self.consumer.poll_batch(100)
                now = time.monotonic()
                self.timed += [(now, p, o) for p, o in zip(
                    batch.column("partition").to_pylist(), batch.column("offset").to_pylist(),
                    strict=True)]
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            self.consumer.close()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.timed: list[tuple[float, int, int]] = []

    @property
    def assignment(self) -> set[TopicPartition]:
        """What it reads now (a cooperative listener hears only of what is added)."""
        return self.consumer.assignment()


def join_during_traffic(broker, topic: str, strategy: str) -> dict:
    """Two members read a 6-partition topic fed continuously; a third joins. The
    records the first two read between the third's subscribe and its first
    partitions, and every record read (checked exactly once)."""
    broker.create_topic(topic, 6)
    # (a session long enough for a loaded machine: a member whose JoinGroup is
    # held sends no heartbeats, as Java's)
    settings = {**fast(broker, 10000), "partition_assignment_strategy": [strategy],
                "max_poll_interval_ms": 60000, "auto_commit_interval_ms": 200}
    group = f"g-{topic}"
    feeder = Feeder(broker.bootstrap, topic, 6)
    members = [Timed(broker.bootstrap, group, topic, **settings) for _ in range(2)]
    third = None
    try:
        feeder.start()
        for m in members:
            m.start()
        _wait(lambda: sorted(len(m.assignment) for m in members) == [3, 3], 60, "a 3/3 split")
        _wait(lambda: all(m.timed for m in members), 30, "records flowing")
        before = [m.assignment for m in members]
        joined_at = time.monotonic()
        third = Timed(broker.bootstrap, group, topic, **settings)
        third.start()
        _wait(lambda: third.assignment, 60, "the third member's partitions")
        assigned_at = time.monotonic()
        _wait(lambda: sorted(len(m.assignment) for m in members + [third]) == [2, 2, 2], 60,
              "a 2/2/2 split")
        during = [(p, o) for m in members for t, p, o in m.timed if joined_at <= t <= assigned_at]
        feeder.stop.set()
        feeder.join(30)
        assert feeder.error is None, feeder.error
        everyone = members + [third]
        _wait(lambda: sum(len(m.timed) for m in everyone) >= feeder.sent, 60, "every record")
        time.sleep(0.3)       # (anything read twice would show up by now)
    finally:
        feeder.stop.set()
        for m in members + ([third] if third else []):
            m.stop.set()
        for m in members + ([third] if third else []):
            m.join(30)
    for m in members + [third]:
        assert m.error is None, m.error
    counts = Counter((p, o) for m in members + [third] for _, p, o in m.timed)
    return {"sent": feeder.sent, "read": counts, "during": during, "before": before,
            "after": [m.assignment for m in members], "events": [m.events for m in members],
            "rebalance_s": assigned_at - joined_at}


@pytest.mark.brokers("tansu", "mock", reason="noida-db answers the OffsetCommit of a member of "
                     "the current generation during a rebalance with ILLEGAL_GENERATION (Kafka "
                     "accepts it until the rebalance completes): the members lose their "
                     "partitions, as in an eager rebalance: docs/brokers.md")
def test_cooperative_members_read_the_partitions_they_keep_during_a_join(broker, unique_topic):
    """cooperative-sticky: while the third member joins, the first two read on
    (records of partitions they keep arrive in the rebalance), revoke only the
    partition each gives up (the listener hears of nothing else), and every
    record is read exactly once."""
    run = join_during_traffic(broker, unique_topic, "cooperative-sticky")
    assert len(run["read"]) == run["sent"] and max(run["read"].values()) == 1
    kept = set().union(*(b & a for b, a in zip(run["before"], run["after"], strict=True)))
    assert len(kept) == 4
    assert {p for p, _ in run["during"]} & {tp.partition for tp in kept}, \
        f"nothing read during the {run['rebalance_s']:.2f} s rebalance"
    for events, before, after in zip(run["events"], run["before"], run["after"], strict=True):
        revoked = [tps for kind, tps in events if kind == "revoked"]
        assert revoked == [before - after], events          # only what it gave up
        assert after <= before                               # nothing new: sticky


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(
        broker, unique_topic, strategy):
    """B (group_instance_id "b") is closed - no LeaveGroup, as Java for a static
    member - and restarted within the session timeout: it gets the same
    partitions, and A sees no rebalance (no listener call, same generation)."""
    broker.create_topic(unique_topic, 4)
    settings = {**fast(broker, 10000), "partition_assignment_strategy": [strategy],
                "max_poll_interval_ms": 60000}
    group = f"g-{unique_topic}"
    a_events, b_events = Events(), Events()
    a = Consumer(bootstrap_servers=broker.bootstrap, group_id=group,
                 group_instance_id="a", **settings)
    b = Consumer(bootstrap_servers=broker.bootstrap, group_id=group,
                 group_instance_id="b", **settings)
    b2 = None
    try:
        a.subscribe([unique_topic], listener=a_events)
        b.subscribe([unique_topic], listener=b_events)
        _poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, 60,
                    "a 2/2 split")
        _poll_until([a, b], lambda: not a._group.rebalancing and not b._group.rebalancing, 30,
                    "a stable group")
        generation, a_before, b_before = a._group.generation, a.assignment(), b.assignment()
        a_seen = list(a_events.events)
        b.close()
        b2 = Consumer(bootstrap_servers=broker.bootstrap, group_id=group,
                      group_instance_id="b", **settings)
        b2_events = Events()
        b2.subscribe([unique_topic], listener=b2_events)
        _poll_until([b2], lambda: b2.assignment(), 30, "B's restart to join")
        assert b2.assignment() == b_before
        # A polls on for a few heartbeats: the group does not rebalance
        end = time.monotonic() + 3 * settings["heartbeat_interval_ms"] / 1000 + 1
        while time.monotonic() < end:
            a.poll_batch(100)
            b2.poll_batch(100)
        assert a_events.events == a_seen, a_events.events
        assert a._group.generation == generation and a.assignment() == a_before
        assert b2_events.events == [("assigned", b_before)]
    finally:
        if b2 is not None:
            b2.close()
        a.close()


@pytest.mark.brokers("noida", "mock", reason="Tansu answers the LeaveGroup of a member whose "
                     "JoinGroup it holds with NONE, yet keeps it in that rebalance (the leader "
                     "assigns it partitions): docs/brokers.md")
def test_a_member_closed_while_its_join_is_held_leaves_the_group(broker, unique_topic):
    """B's JoinGroup is in flight (held: A has not rejoined) when B closes: B
    sends LeaveGroup (Java's maybeLeaveGroup: a member id and not UNJOINED), so
    A's rejoin completes at once with all the partitions, without waiting for
    B's session to expire."""
    settings = {**fast(broker, 30000), "max_poll_interval_ms": 60000}
    with _a_owning_all_then_b(broker, unique_topic, settings) as (a, b):
        _poll_until([b], lambda: a._group._needs_join, 20, "B's join to start a rebalance")
        assert b._group.member_id and b._group.rebalancing
        b.close()
        start = time.monotonic()
        _poll_until([a], lambda: not a._group.rebalancing, 25, "A's rejoin")
        assert a.assignment() == _all(unique_topic, 4)
        assert time.monotonic() - start < 10, "A waited for B's session to expire"


COOPERATIVE = {"partition_assignment_strategy": ["cooperative-sticky"]}


def test_a_cooperative_member_revokes_only_the_topics_it_no_longer_subscribes(
        broker, unique_topic):
    """Java's onJoinPrepare for COOPERATIVE: a new subscription revokes the
    partitions of the topics left before rejoining, and keeps the others (no
    listener call for them, their positions kept)."""
    other = f"{unique_topic}-b"
    broker.create_topic(unique_topic, 2)
    broker.create_topic(other, 2)
    events = Events()
    c = Consumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{unique_topic}",
                 **{**fast(broker), **COOPERATIVE, "max_poll_interval_ms": 60000})
    try:
        c.subscribe([unique_topic, other], listener=events)
        both = _all(unique_topic, 2) | _all(other, 2)
        _poll_until([c], lambda: c.assignment() == both, 30, "all four partitions")
        c.subscribe([unique_topic], listener=events)
        _poll_until([c], lambda: len(events.events) == 3 and not c._group.rebalancing, 30,
                    "the rejoin")
        assert events.events == [("assigned", both), ("revoked", _all(other, 2)),
                                  ("assigned", set())]
        assert c.assignment() == _all(unique_topic, 2)
    finally:
        c.close()


@pytest.mark.brokers("tansu", "mock", reason="noida-db never answers the rejoin of the group's "
                     "only member (same member id, generation unchanged): docs/brokers.md")
def test_a_cooperative_member_out_of_its_generation_loses_everything(broker, unique_topic):
    """UNKNOWN_MEMBER_ID from a heartbeat puts a cooperative member out of the
    group: its next poll reports every partition lost (not revoked: they may be
    someone else's), then rejoins as a new member with nothing owned."""
    broker.create_topic(unique_topic, 2)
    events = Events()
    with broker.proxied() as proxied:
        c = Consumer(bootstrap_servers=proxied.bootstrap, group_id=f"g-{unique_topic}",
                     enable_auto_commit=False,
                     **{**fast(broker), **COOPERATIVE, "max_poll_interval_ms": 60000})
        try:
            c.subscribe([unique_topic], listener=events)
            _poll_until([c], lambda: c.assignment() == _all(unique_topic, 2), 30,
                        "the assignment")
            member = c._group.member_id

            def unknown_member(key, version, body):
                if key == 12:                       # Heartbeat
                    body["error_code"] = 25          # UNKNOWN_MEMBER_ID
                    proxied.proxy.answer_hook = None
                    return body
                return None

            proxied.proxy.answer_hook = unknown_member
            _wait(lambda: not c._group._joined, 10, "the heartbeat to drop the membership")
            _poll_until([c], lambda: len(events.events) == 3, 30, "the rejoin")
            assert events.events == [("assigned", _all(unique_topic, 2)),
                                     ("lost", _all(unique_topic, 2)),
                                     ("assigned", _all(unique_topic, 2))]
            assert c._group.member_id not in ("", member)
        finally:
            c.close()


@pytest.mark.brokers("tansu", "mock", reason="noida-db leaves this group's rebalance unfinished "
                     "in 4 of 8 runs (every member's JoinGroup unanswered for 20 s+, after a "
                     "generation formed without one of them): docs/brokers.md")
def test_the_upgrade_path_mixes_eager_and_cooperative_members(broker, unique_topic):
    """Java's upgrade path: B lists ["cooperative-sticky", "range"] (eager), A
    only "cooperative-sticky" (cooperative); the group uses cooperative-sticky.
    When C (like B) joins, B revokes everything before rejoining, A only what it
    gives up; every partition ends with one owner. (No auto-commit: noida-db
    refuses commits during a rebalance, and a refused commit loses the
    partitions: docs/brokers.md.)"""
    broker.create_topic(unique_topic, 6)
    settings = {**fast(broker), "max_poll_interval_ms": 60000, "enable_auto_commit": False}
    group = f"g-{unique_topic}"
    upgrading = {"partition_assignment_strategy": ["cooperative-sticky", "range"]}
    a_events, b_events = Events(), Events()
    a = Consumer(bootstrap_servers=broker.bootstrap, group_id=group, **settings, **COOPERATIVE)
    b = Consumer(bootstrap_servers=broker.bootstrap, group_id=group, **settings, **upgrading)
    c = Consumer(bootstrap_servers=broker.bootstrap, group_id=group, **settings, **upgrading)
    try:
        a.subscribe([unique_topic], listener=a_events)
        b.subscribe([unique_topic], listener=b_events)
        assert (a._group.protocol, b._group.protocol) == ("cooperative", "eager")
        _poll_until([a, b], lambda: len(a.assignment()) == 3 and len(b.assignment()) == 3
                    and not a._group.rebalancing and not b._group.rebalancing, 60, "a 3/3 split")
        assert a._group.protocol_name == b._group.protocol_name == "cooperative-sticky"
        a_before, b_before = a.assignment(), b.assignment()
        a_seen, b_seen = len(a_events.events), len(b_events.events)
        c.subscribe([unique_topic])
        members = [a, b, c]
        _poll_until(members, lambda: sorted(len(m.assignment()) for m in members) == [2, 2, 2]
                    and not any(m._group.rebalancing for m in members), 60, "a 2/2/2 split")
        assert a.assignment() | b.assignment() | c.assignment() == _all(unique_topic, 6)
        a_revoked = [tps for kind, tps in a_events.events[a_seen:] if kind == "revoked"]
        b_revoked = [tps for kind, tps in b_events.events[b_seen:] if kind == "revoked"]
        assert a_revoked == [a_before - a.assignment()]
        assert b_revoked[0] == b_before                 # eager: everything, first
    finally:
        for m in (c, b, a):
            m.close()
