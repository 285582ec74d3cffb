"""Group membership as Java's consumer defines it, against a real broker (Tansu).

- A member that is slow between polls stays in the group through a rebalance:
  REBALANCE_IN_PROGRESS from a heartbeat only asks the next poll to rejoin, and
  the heartbeats go on meanwhile (Java's HeartbeatThread), so the coordinator
  does not expel it after ``session_timeout_ms``.
- A member that does not poll for ``max_poll_interval_ms`` leaves the group
  (its heartbeat thread sends LeaveGroup), the others take its partitions, a
  commit in between raises CommitFailedError, and the next poll rejoins.
- The sticky assignor learns what every kproto member owned (its last
  assignment, kept across the eager revocation), so a member joining and then
  leaving moves as few partitions as possible.

On the broker matrix (tests/brokers.py) where groups work: Tansu and noida-db
(librdkafka's mock advertises JoinGroup v6 but reads v5). Session timeouts are
3 s, raised to the broker's minimum (noida-db: 6 s, as Kafka). Tansu keeps a
member whose heartbeats go on during a rebalance (each one refreshes its
session, as Kafka does) and expels one silent for longer than the session
timeout. It holds a follower's rejoin ~3 s, hence the timeouts.
"""

from __future__ import annotations

import time

import pytest

from kproto import Consumer, TopicPartition
from kproto.errors import CommitFailedError, FencedInstanceIdError
from tests.aio_support import driver_fixture

from .test_groups import Member, _wait

pytestmark = [pytest.mark.broker, pytest.mark.brokers(needs=("groups",))]
consumer_driver = driver_fixture(globals())   # each test over each I/O driver

# short enough to keep the tests quick, long enough for a loaded 2-core machine
SESSION_MS = 3000
FAST = {"session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": 300,
        "auto_offset_reset": "earliest", "fetch_max_wait_ms": 100}


OFFSET_COMMIT, HEARTBEAT = 8, 12
REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION = 27, 25, 22


def fast(broker, session_ms: int = SESSION_MS) -> dict:
    """FAST, with the session timeout raised to the broker's minimum."""
    return {**FAST, "session_timeout_ms": broker.session_timeout_ms(session_ms)}


@pytest.fixture
def proxied(broker):
    """The broker reached only through a framed fault proxy, whose ``answer_hook``
    injects errors into the broker's real answers."""
    with broker.proxied() as proxied:
        yield proxied


@pytest.fixture
def proxy(proxied):
    return proxied.proxy


class Events:
    """A rebalance listener that records what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", set(revoked)))

    def on_partitions_lost(self, lost):
        self.events.append(("lost", set(lost)))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", set(assigned)))


def _poll_until(consumer: Consumer, predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        consumer.poll_batch(100)


def _all(topic: str, n: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(n)}


def _assignments(member: Member) -> list[set[TopicPartition]]:
    return [tps for kind, tps in list(member.events) if kind == "assigned"]


@pytest.mark.brokers("tansu", "mock", reason="noida-db expels a member that heartbeats but "
                     "has not rejoined within the session timeout (Kafka: rebalance_timeout_ms, "
                     "sent as max_poll_interval_ms): docs/brokers.md")
def test_slow_member_keeps_heartbeating_until_it_rejoins(broker, unique_topic):
    """A gets REBALANCE_IN_PROGRESS (B joins) and then does not poll for 2.5
    session timeouts: it must not be expelled (B never gets A's partitions),
    and its next poll rejoins with the same member id."""
    group = f"g-{unique_topic}"
    broker.create_topic(unique_topic, 4)
    settings = fast(broker)
    listener = Events()
    a = Consumer(bootstrap_servers=broker.bootstrap, group_id=group,
                 max_poll_interval_ms=60000, **settings)
    b = None
    try:
        a.subscribe([unique_topic], listener=listener)
        _poll_until(a, lambda: a.assignment() == _all(unique_topic, 4), 30, "A owning all")
        member_a = a._group.member_id
        b = Member(broker.bootstrap, group, unique_topic, max_poll_interval_ms=60000, **settings)
        b.start()
        # A's heartbeat sees the rebalance B's join started ...
        _wait(lambda: a._group._needs_join, 20, "A's heartbeat to see the rebalance")
        # ... and A is busy for 2.5 session timeouts, polling nothing
        time.sleep(2.5 * settings["session_timeout_ms"] / 1000)
        assert _all(unique_topic, 4) not in _assignments(b), \
            "A was expelled: B got all its partitions while A was busy"
        # the next poll rejoins: the partitions are split, A still the same member
        _poll_until(a, lambda: len(a.assignment()) == 2 and len(b.assignment) == 2, 60,
                    "a 2/2 split")
        assert a._group.member_id == member_a
        assert a.assignment() | b.assignment == _all(unique_topic, 4)
        assert all(len(tps) < 4 for tps in _assignments(b))
        # A revoked its partitions (it was still in the group), it did not lose them
        assert [kind for kind, _ in listener.events] == ["assigned", "revoked", "assigned"]
    finally:
        if b is not None:
            b.stop.set()
            b.join(30)
        a.close()
    assert b.error is None, b.error


def test_member_not_polling_for_max_poll_interval_leaves_the_group(broker, unique_topic):
    """A stops polling for longer than max_poll_interval_ms (but less than the
    session timeout): its heartbeat thread leaves the group, B takes all the
    partitions, A's commit fails, and A's next poll rejoins."""
    group = f"g-{unique_topic}"
    broker.create_topic(unique_topic, 4)
    settings = fast(broker, 4000)
    listener = Events()
    a = Consumer(bootstrap_servers=broker.bootstrap, group_id=group,
                 max_poll_interval_ms=1500, enable_auto_commit=False, **settings)
    b = Member(broker.bootstrap, group, unique_topic, max_poll_interval_ms=60000, **settings)
    try:
        a.subscribe([unique_topic], listener=listener)
        _poll_until(a, lambda: a.assignment() == _all(unique_topic, 4), 30, "A owning all")
        b.start()
        _poll_until(a, lambda: len(a.assignment()) == 2 and len(b.assignment) == 2, 60,
                    "a 2/2 split")
        mine = a.assignment()
        # A is busy, its heartbeats go on, yet after max_poll_interval_ms it leaves
        # the group and B owns everything
        _wait(lambda: b.assignment == _all(unique_topic, 4), 20, "B to take all partitions")
        assert not a._group._joined
        with pytest.raises(CommitFailedError):
            a.commit({tp: 0 for tp in mine})
        # the next poll rejoins: A reports its partitions lost, then gets some back
        _poll_until(a, lambda: len(a.assignment()) == 2 and len(b.assignment) == 2, 60,
                    "a new 2/2 split")
        kinds = [kind for kind, _ in listener.events]
        assert kinds[:4] == ["assigned", "revoked", "assigned", "lost"], kinds
        assert listener.events[3][1] == mine
        a.commit({tp: 0 for tp in a.assignment()})       # a member again: commits work
    finally:
        b.stop.set()
        b.join(30)
        a.close()
    assert b.error is None, b.error


def test_sticky_assignor_keeps_partitions_with_their_owners(broker, unique_topic):
    """Two kproto members with ``sticky`` own 3+3 partitions; a third joins
    (each keeps 2 of its 3) and leaves (each keeps those 2 and gets one back)."""
    group = f"g-{unique_topic}"
    broker.create_topic(unique_topic, 6)
    settings = {**fast(broker), "partition_assignment_strategy": ["sticky"],
                "max_poll_interval_ms": 60000}
    members = [Member(broker.bootstrap, group, unique_topic, **settings) for _ in range(2)]
    third = None
    try:
        for m in members:
            m.start()
        _wait(lambda: [len(m.assignment) for m in members] == [3, 3], 60, "a 3/3 split")
        before = [m.assignment for m in members]
        third = Member(broker.bootstrap, group, unique_topic, **settings)
        third.start()
        _wait(lambda: [len(m.assignment) for m in members + [third]] == [2, 2, 2], 60,
              "a 2/2/2 split")
        during = [m.assignment for m in members]
        for old, new in zip(before, during, strict=True):
            assert new <= old, (before, during)     # each kept 2 of its 3
        third.stop.set()
        third.join(30)
        _wait(lambda: [len(m.assignment) for m in members] == [3, 3], 60, "a 3/3 split again")
        after = [m.assignment for m in members]
        for old, new in zip(during, after, strict=True):
            assert old <= new, (during, after)      # and got one of the third's
        assert after[0] | after[1] == _all(unique_topic, 6)
    finally:
        for m in members + ([third] if third else []):
            m.stop.set()
        for m in members + ([third] if third else []):
            m.join(30)
    assert all(m.error is None for m in members + [third])


def _joined_alone(proxied, topic: str, listener: Events, **settings) -> Consumer:
    """A consumer (through ``proxied``'s proxy) that owns ``topic``'s 2 partitions alone."""
    proxied.broker.create_topic(topic, 2)
    c = Consumer(bootstrap_servers=proxied.bootstrap, group_id=f"g-{topic}",
                 enable_auto_commit=False, **{**fast(proxied.broker), **settings})
    c.subscribe([topic], listener=listener)
    _poll_until(c, lambda: c.assignment() == _all(topic, 2), 30, "the assignment")
    return c


def test_heartbeats_go_on_after_rebalance_in_progress(proxied, proxy, unique_topic):
    """Every heartbeat answer says REBALANCE_IN_PROGRESS while the application
    does not poll: the heartbeats go on (Java only requests a rejoin), the member
    may still commit (it is still in its generation), and its next poll rejoins
    with the same member id."""
    listener = Events()
    c = _joined_alone(proxied, unique_topic, listener, max_poll_interval_ms=60000)
    try:
        member = c._group.member_id
        seen: list[float] = []

        def rebalancing(key, version, body):
            if key == HEARTBEAT:
                seen.append(time.monotonic())
                body["error_code"] = REBALANCE_IN_PROGRESS
                return body
            return None

        proxy.answer_hook = rebalancing
        _wait(lambda: seen, 10, "a heartbeat")
        time.sleep(1.5)                     # the application is busy: no poll
        assert len(seen) >= 4, seen        # heartbeats every 300 ms, not just the one
        assert c._group._needs_join and c._group._joined
        c.commit({TopicPartition(unique_topic, 0): 0})    # still a member: allowed
        proxy.answer_hook = None
        _poll_until(c, lambda: listener.events[-1][0] == "assigned" and len(listener.events) == 3,
                    30, "the rejoin")
        assert [kind for kind, _ in listener.events] == ["assigned", "revoked", "assigned"]
        assert c._group.member_id == member
    finally:
        c.close()


@pytest.mark.brokers("tansu", "mock", reason="noida-db never answers the rejoin of the group's "
                     "only member (same member id, generation unchanged): docs/brokers.md")
def test_out_of_generation_commits_fail_and_partitions_are_lost(proxied, proxy, unique_topic):
    """UNKNOWN_MEMBER_ID from a heartbeat puts the member out of the group: a
    commit raises CommitFailedError (not sent with a stale generation), and the
    next poll reports the partitions lost and rejoins with a new member id.
    ILLEGAL_GENERATION from an OffsetCommit also raises CommitFailedError and
    forces a rejoin, keeping the member id."""
    listener = Events()
    c = _joined_alone(proxied, unique_topic, listener, max_poll_interval_ms=60000)
    tp0 = TopicPartition(unique_topic, 0)
    try:
        member = c._group.member_id

        def unknown_member(key, version, body):
            if key == HEARTBEAT:
                body["error_code"] = UNKNOWN_MEMBER_ID
                proxy.answer_hook = None           # once
                return body
            return None

        proxy.answer_hook = unknown_member
        _wait(lambda: not c._group._joined, 10, "the heartbeat to drop the membership")
        with pytest.raises(CommitFailedError):
            c.commit({tp0: 1})
        _poll_until(c, lambda: len(listener.events) == 3, 30, "the rejoin")
        assert [kind for kind, _ in listener.events] == ["assigned", "lost", "assigned"]
        assert c._group.member_id not in ("", member)
        assert c.committed([tp0])[tp0] is None          # the failed commit wrote nothing

        member = c._group.member_id

        def illegal_generation(key, version, body):
            if key == OFFSET_COMMIT:
                for t in body["topics"]:
                    for p in t["partitions"]:
                        p["error_code"] = ILLEGAL_GENERATION
                return body
            return None

        proxy.answer_hook = illegal_generation
        with pytest.raises(CommitFailedError):
            c.commit({tp0: 2})
        proxy.answer_hook = None
        assert not c._group._joined
        _poll_until(c, lambda: len(listener.events) == 5, 30, "the second rejoin")
        assert [kind for kind, _ in listener.events][3:] == ["lost", "assigned"]
        assert c._group.member_id == member
        c.commit({tp0: 3})
        assert c.committed([tp0])[tp0] == 3
    finally:
        c.close()


def test_fenced_instance_id_from_a_heartbeat_is_raised_by_the_next_poll(proxied, proxy,
                                                                         unique_topic):
    """FENCED_INSTANCE_ID (another process uses this group_instance_id) is fatal
    in Java: the heartbeat thread records it and the next poll raises it."""
    listener = Events()
    c = _joined_alone(proxied, unique_topic, listener, max_poll_interval_ms=60000,
                      group_instance_id=f"static-{unique_topic}")
    try:
        def fenced(key, version, body):
            if key == HEARTBEAT:
                body["error_code"] = 82                  # FENCED_INSTANCE_ID
                proxy.answer_hook = None
                return body
            return None

        proxy.answer_hook = fenced
        _wait(lambda: not c._group._joined, 10, "the fenced heartbeat")
        with pytest.raises(FencedInstanceIdError):
            c.poll_batch(100)
    finally:
        c.close()
