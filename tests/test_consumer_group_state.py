"""The KIP-848 member state machine (kproto.groups.consumer_state) against Java's.

A model-based Hypothesis test drives :class:`Membership` with generated event
sequences - heartbeats sent and answered (assignments, errors, epochs), answers
lost, polls that reconcile (possibly interrupted by a fencing, a new target or a
leave), commits, poll-timer expiry, close - and checks every transition against
the reference: Java's ``MemberState`` valid-previous-states, ported here on their
own (not imported from kproto), and the invariants of the protocol:

- the member never owns a partition it was not assigned since it joined;
- within a reconciliation, revoked partitions are released before new ones are
  taken, and the two never overlap;
- the member epoch only moves forward, except when fencing resets it to 0 or a
  leave sets -1/-2;
- after a reconciliation, the next heartbeat goes out at once and acknowledges
  exactly what the member owns; a joining heartbeat carries every field.

Plus the edge cases of Java's ConsumerMembershipManagerTest one by one.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kproto.errors import ErrorCode, UnsupportedAssignorError
from kproto.groups.consumer_state import HeartbeatOutcome, Membership, MemberState
from kproto.structs import TopicPartition

M = MemberState

# Java's MemberState.java, static block (the reference model; written out here)
JAVA_PREVIOUS = {
    "STABLE": {"JOINING", "ACKNOWLEDGING", "RECONCILING"},
    "RECONCILING": {"STABLE", "JOINING", "ACKNOWLEDGING", "RECONCILING"},
    "ACKNOWLEDGING": {"RECONCILING"},
    "FATAL": {"JOINING", "STABLE", "RECONCILING", "ACKNOWLEDGING", "PREPARE_LEAVING",
              "LEAVING", "UNSUBSCRIBED"},
    "FENCED": {"JOINING", "STABLE", "RECONCILING", "ACKNOWLEDGING", "PREPARE_LEAVING",
               "LEAVING"},
    "JOINING": {"FENCED", "UNSUBSCRIBED", "STALE"},
    "PREPARE_LEAVING": {"JOINING", "STABLE", "RECONCILING", "ACKNOWLEDGING", "UNSUBSCRIBED"},
    "LEAVING": {"PREPARE_LEAVING"},
    "UNSUBSCRIBED": {"PREPARE_LEAVING", "LEAVING", "FENCED"},
    "STALE": {"LEAVING"},
}

TOPICS = {uuid.UUID(int=i + 1): f"t{i}" for i in range(3)}
PARTITIONS = [(tid, p) for tid in TOPICS for p in range(3)]


def names_of(pairs) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(TOPICS[t], p) for t, p in pairs)


def answer(pairs) -> dict:
    by: dict = {}
    for t, p in pairs:
        by.setdefault(t, []).append(p)
    return {"topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in by.items()]}


class MemberMachine(RuleBasedStateMachine):
    """Events on one member; the broker is the test (its epochs only grow)."""

    def __init__(self) -> None:
        super().__init__()
        self.transitions: list[tuple[str, str]] = []
        self.m = Membership("g", "member-1", rebalance_timeout_ms=1000,
                            on_transition=self._transitioned)
        self.broker_epoch = 0
        self.assigned_since_join: set[tuple[uuid.UUID, int]] = set()
        self.known_ids = set(TOPICS)            # what metadata names
        self.plan = None                        # a reconciliation stopped half-way
        self.last_epoch = 0
        self.ack_due = False
        self.join_heartbeats = 0
        self.in_flight = False                  # a heartbeat sent, not answered yet

    def _transitioned(self, old: MemberState, new: MemberState) -> None:
        self.transitions.append((old.name, new.name))
        if new is M.JOINING:
            assert self.m.owned == frozenset()      # released before rejoining
            self.join_heartbeats = 0
            self.assigned_since_join = set()

    # -- the application

    @rule(regex=st.booleans())
    def subscribe_and_poll(self, regex: bool) -> None:
        self.m.subscribe([] if regex else ["t0", "t1"], "t.*" if regex else None)
        self.poll()

    @rule()
    def poll(self) -> None:
        self._release_lost()
        self.m.maybe_rejoin_stale_member()
        self.m.on_consumer_poll()
        if self.plan is None:
            self._reconcile(stop_after=None)

    @rule(stop=st.sampled_from(["commit", "revoked", "assigned"]))
    def poll_interrupted(self, stop: str) -> None:
        """A reconciliation that stops after the commit or the revocation (the
        heartbeat thread gets a word in before it goes on)."""
        self._release_lost()
        self.m.on_consumer_poll()
        if self.plan is None:
            self._reconcile(stop_after=stop)

    @rule()
    def resume_reconciliation(self) -> None:
        if self.plan is not None:
            plan, self.plan = self.plan, None
            self._finish(plan)

    @rule(ids=st.sets(st.sampled_from(sorted(TOPICS))))
    def metadata_knows(self, ids) -> None:
        self.known_ids = set(ids)

    @rule()
    def metadata_knows_all(self) -> None:
        self.known_ids = set(TOPICS)

    @rule(rarely=st.integers(0, 5))
    def close(self, rarely: int) -> None:
        if rarely:
            return
        if self.plan is not None:        # the driver's finally: the reconciliation ends
            self.m.reconciliation_done()
            self.plan = None
        revoking = self.m.leave_group()
        if revoking is not None:
            self.m.clear_assignment_and_leave()
            fields = self.m.heartbeat_request()
            assert fields["member_epoch"] == -1
            assert self.m.state is M.UNSUBSCRIBED

    @rule(rarely=st.integers(0, 5))
    def poll_timer_expires(self, rarely: int) -> None:
        if rarely or self.m.should_skip_heartbeat() or self.m.is_leaving():
            return
        self.m.transition_to_sending_leave_group(True)
        fields = self.m.heartbeat_request()        # its answer is ignored
        self.in_flight = False
        assert fields["member_epoch"] == -1
        assert self.m.state is M.STALE

    # -- the heartbeat thread and the broker

    @rule()
    @precondition(lambda self: not self.in_flight)
    def heartbeat(self) -> None:
        if self.m.should_skip_heartbeat():
            return
        self.in_flight = True
        state = self.m.state
        fields = self.m.heartbeat_request()
        if state is M.JOINING:          # 0 until an answer gave an epoch (Java's too)
            assert fields["member_epoch"] == (0 if self.join_heartbeats == 0 else self.m.epoch)
            self.join_heartbeats += 1
            assert fields["topic_partitions"] == []
            assert fields["rebalance_timeout_ms"] == 1000
            assert "subscribed_topic_names" in fields and "subscribed_topic_regex" in fields
        if self.ack_due and state is M.ACKNOWLEDGING:
            owned = {(t["topic_id"], p) for t in fields["topic_partitions"]
                     for p in t["partitions"]}
            assert names_of(owned) == self.m.owned
            self.ack_due = False

    @rule(pairs=st.one_of(st.none(), st.frozensets(st.sampled_from(PARTITIONS))),
          bump=st.booleans())
    @precondition(lambda self: self.in_flight)
    def answer_ok(self, pairs, bump: bool) -> None:
        self.in_flight = False
        if self.m.should_skip_heartbeat() or self.m.state is M.LEAVING:
            return
        if bump or self.broker_epoch == 0:
            self.broker_epoch += 1
        if pairs is not None and self.m.state in (M.JOINING, M.STABLE, M.RECONCILING,
                                                  M.ACKNOWLEDGING):
            self.assigned_since_join |= set(pairs)
        self.m.on_heartbeat_success(self.broker_epoch,
                                    None if pairs is None else answer(pairs))

    @rule(pairs=st.one_of(st.none(), st.frozensets(st.sampled_from(PARTITIONS))),
          bump=st.booleans())
    @precondition(lambda self: not self.in_flight)
    def round_trip(self, pairs, bump: bool) -> None:
        """The common case: a heartbeat and its answer."""
        self.heartbeat()
        if self.in_flight:
            self.answer_ok(pairs, bump)

    @rule(pairs=st.frozensets(st.sampled_from(PARTITIONS)))
    @precondition(lambda self: not self.in_flight)
    def round_trip_with_assignment(self, pairs) -> None:
        self.round_trip(pairs, True)

    @rule(code=st.sampled_from([ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID,
                                ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                ErrorCode.COORDINATOR_NOT_AVAILABLE]))
    @precondition(lambda self: self.in_flight)
    def answer_error(self, code) -> None:
        self.in_flight = False
        if self.m.should_skip_heartbeat():
            return
        outcome = self.m.on_heartbeat_error(code, None)
        if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            assert outcome is HeartbeatOutcome.FENCED
            assert self.m.epoch in (0, -1, -2)

    @rule(rarely=st.integers(0, 5))
    @precondition(lambda self: self.in_flight and self.m.state is not M.FATAL)
    def answer_fatal(self, rarely: int) -> None:
        if rarely:
            return
        self.in_flight = False
        if self.m.should_skip_heartbeat():
            return
        assert self.m.on_heartbeat_error(ErrorCode.UNSUPPORTED_ASSIGNOR, "no such assignor") \
            is HeartbeatOutcome.FATAL
        assert isinstance(self.m.failure, UnsupportedAssignorError)

    @rule()
    @precondition(lambda self: self.in_flight)
    def answer_lost(self) -> None:
        self.in_flight = False
        self.m.reset_sent_fields()

    # -- the driver's reconciliation (what ConsumerMembership does on the poll thread)

    def _release_lost(self) -> None:
        owned = self.m.owned
        lost = self.m.take_lost()
        if lost is not None:
            assert lost == owned                # everything owned is reported lost
            self.m.lost_released()
            assert self.m.owned == frozenset()

    def _reconcile(self, stop_after: str | None) -> None:
        names = {t: n for t, n in TOPICS.items() if t in self.known_ids}
        before = self.m.current
        plan = self.m.start_reconciliation(names)
        if plan is None or plan.ack_only:
            if plan is not None and self.m.current != before:
                self.ack_due = True             # (the same partial ack again: Java's neither)
            return
        assert not (plan.revoked & plan.added)              # revoke and assign apart
        assert plan.revoked <= self.m.owned
        self.stage = "commit"
        if stop_after == "commit":
            self.plan = plan
            return
        self._finish(plan, after_commit=True, stop_after=stop_after)

    def _finish(self, plan, *, after_commit: bool = False, stop_after: str | None = None) -> None:
        if getattr(self, "stage", None) == "commit":
            if self.m.should_abort():
                return
            # revocation: the listener sees the partitions still owned
            assert plan.revoked <= self.m.owned
            self.stage = "revoked"
            if stop_after == "revoked":
                self.plan = plan
                return
        if getattr(self, "stage", None) == "revoked":
            if self.m.should_abort():
                return
            self.m.assign(plan)
            assert self.m.owned == plan.assigned
            self.stage = "assigned"
            if stop_after == "assigned":
                self.plan = plan
                return
        if self.m.complete_reconciliation(plan):
            assert self.m.state is M.ACKNOWLEDGING
            assert self.m.should_heartbeat_now()
            self.ack_due = True
        self.stage = None

    # -- invariants

    @invariant()
    def transitions_are_javas(self) -> None:
        for old, new in self.transitions:
            assert old == new or old in JAVA_PREVIOUS[new], (old, new)
        self.transitions.clear()

    @invariant()
    def owns_only_what_was_assigned(self) -> None:
        assert self.m.owned <= names_of(self.assigned_since_join)

    @invariant()
    def epoch_moves_forward(self) -> None:
        e = self.m.epoch
        assert e >= self.last_epoch or e in (0, -1, -2), (self.last_epoch, e)
        self.last_epoch = e if e > 0 else 0

    @invariant()
    def stable_owns_its_target(self) -> None:
        if self.m.state is M.STABLE and not self.m.reconciling:
            assert self.m.current == self.m.target

    @invariant()
    def quiet_poll_changes_nothing(self) -> None:
        """When poll_is_quiet() lets ConsumerMembership.poll skip its duties, doing
        them all (on a copy) changes nothing and asks for no heartbeat."""
        if self.m.reconciling or not self.m.poll_is_quiet():
            return
        c = copy.deepcopy(self.m, {id(self.m.on_transition): None})
        c.on_consumer_poll()
        assert c.take_lost() is None
        c.maybe_rejoin_stale_member()
        assert c.failure is None
        assert c.state is not M.RECONCILING
        assert not c.should_heartbeat_now()
        fields = [f.name for f in dataclasses.fields(Membership) if f.name != "on_transition"]
        assert {f: getattr(c, f) for f in fields if f != "_sent"} == \
            {f: getattr(self.m, f) for f in fields if f != "_sent"}
        assert vars(c._sent) == vars(self.m._sent)


TestMemberMachine = MemberMachine.TestCase
TestMemberMachine.settings = settings(max_examples=400, stateful_step_count=50, deadline=None,
                                      derandomize=True,
                                      suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------ Java's test cases


def joined(epoch: int = 1, pairs=()) -> Membership:
    m = Membership("g", "m1", rebalance_timeout_ms=1000)
    m.subscribe(["t0"], None)
    m.on_consumer_poll()
    m.heartbeat_request()
    m.on_heartbeat_success(epoch, answer(pairs))
    return m


def reconcile(m: Membership, names=None):
    plan = m.start_reconciliation(TOPICS if names is None else names)
    if plan is None or plan.ack_only:
        return plan
    assert not m.should_abort()
    m.assign(plan)
    m.complete_reconciliation(plan)
    return plan


def test_fenced_mid_reconciliation_aborts_and_reports_lost() -> None:
    """ConsumerMembershipManagerTest: a member fenced while its reconciliation runs
    (commit in flight) does not apply it; its partitions are lost; it rejoins."""
    tid = next(iter(TOPICS))
    m = joined(1, [(tid, 0)])
    reconcile(m)
    m.heartbeat_request()
    m.on_heartbeat_success(2, answer([(tid, 0), (tid, 1)]))
    plan = m.start_reconciliation(TOPICS)
    assert plan.added == {TopicPartition("t0", 1)}
    m.on_heartbeat_error(ErrorCode.FENCED_MEMBER_EPOCH, None)
    assert m.state is M.FENCED and m.epoch == 0
    assert m.should_abort()                              # not applied
    assert m.take_lost() == {TopicPartition("t0", 0)}
    m.lost_released()
    assert m.state is M.JOINING and m.owned == frozenset()
    fields = m.heartbeat_request()
    assert fields["member_epoch"] == 0 and fields["topic_partitions"] == []


def test_unknown_topic_ids_wait_for_metadata() -> None:
    """A target naming a topic id metadata does not know: the known part is
    reconciled and acknowledged, the rest when metadata has it."""
    a, b = sorted(TOPICS)[:2]
    m = joined(1, [(a, 0), (b, 0)])
    plan = reconcile(m, {a: "t0"})
    assert plan.unresolved == {b} and plan.assigned == {TopicPartition("t0", 0)}
    fields = m.heartbeat_request()
    assert fields["topic_partitions"] == [{"topic_id": a, "partitions": [0]}]
    assert m.state is M.RECONCILING                     # the rest still to do
    plan = reconcile(m, {a: "t0", b: "t1"})
    assert plan.added == {TopicPartition("t1", 0)}
    assert m.state is M.ACKNOWLEDGING


def test_unresolved_only_is_acknowledged_without_a_rebalance() -> None:
    a, b = sorted(TOPICS)[:2]
    m = joined(1, [(a, 0)])
    reconcile(m)
    m.heartbeat_request()
    m.on_heartbeat_success(2, answer([(a, 0), (b, 0)]))
    plan = m.start_reconciliation({a: "t0"})
    assert plan.ack_only and m.state is M.ACKNOWLEDGING
    assert m.heartbeat_request()["topic_partitions"] == [{"topic_id": a, "partitions": [0]}]


def test_assignment_arriving_during_a_reconciliation_is_reconciled_next() -> None:
    tid = next(iter(TOPICS))
    m = joined(1, [(tid, 0)])
    plan = m.start_reconciliation(TOPICS)
    m.on_heartbeat_success(2, answer([(tid, 1)]))        # while the commit runs
    assert m.start_reconciliation(TOPICS) is None        # one at a time
    m.assign(plan)
    assert m.complete_reconciliation(plan)
    m.heartbeat_request()                                # acks {0}, then reconciles again
    assert m.state is M.RECONCILING
    plan = reconcile(m)
    assert plan.revoked == {TopicPartition("t0", 0)} and plan.added == {TopicPartition("t0", 1)}


def test_leave_during_reconciliation() -> None:
    tid = next(iter(TOPICS))
    m = joined(1, [(tid, 0)])
    m.start_reconciliation(TOPICS)
    assert m.leave_group() == frozenset()
    assert m.should_abort()
    m.clear_assignment_and_leave()
    assert m.heartbeat_request()["member_epoch"] == -1
    assert m.state is M.UNSUBSCRIBED


def test_static_member_leaves_with_epoch_minus_two() -> None:
    m = Membership("g", "m1", instance_id="i1")
    m.subscribe(["t0"], None)
    m.on_consumer_poll()
    fields = m.heartbeat_request()
    assert fields["instance_id"] == "i1"
    m.on_heartbeat_success(3, None)
    m.leave_group()
    m.clear_assignment_and_leave()
    assert m.heartbeat_request()["member_epoch"] == -2


def test_lost_answer_resends_every_field() -> None:
    tid = next(iter(TOPICS))
    m = joined(1, [(tid, 0)])
    reconcile(m)
    ack = m.heartbeat_request()
    assert "topic_partitions" in ack
    partial = m.heartbeat_request()
    assert set(partial) == {"group_id", "member_id", "member_epoch", "instance_id"}
    m.reset_sent_fields()                                # the answer never came
    full = m.heartbeat_request()
    assert {"rebalance_timeout_ms", "subscribed_topic_names", "subscribed_topic_regex",
            "topic_partitions"} <= set(full)


def test_regex_subscription_goes_to_the_broker_as_written() -> None:
    m = Membership("g", "m1")
    m.subscribe([], r"orders\..*")
    m.on_consumer_poll()
    fields = m.heartbeat_request()
    assert fields["subscribed_topic_regex"] == r"orders\..*"
    assert fields["subscribed_topic_names"] == []


def test_poll_timer_expiry_goes_stale_then_rejoins_after_releasing() -> None:
    tid = next(iter(TOPICS))
    m = joined(1, [(tid, 0)])
    reconcile(m)
    m.transition_to_sending_leave_group(True)
    assert m.heartbeat_request()["member_epoch"] == -1
    assert m.state is M.STALE and m.should_skip_heartbeat()
    m.maybe_rejoin_stale_member()                       # lost not released yet: waits
    assert m.state is M.STALE
    assert m.take_lost() == {TopicPartition("t0", 0)}
    m.lost_released()
    m.maybe_rejoin_stale_member()
    assert m.state is M.JOINING and m.epoch == 0


# ------------------------------------------------------------------ settings


def test_consumer_protocol_refuses_the_classic_settings_set_explicitly() -> None:
    """Java's ConsumerConfig: partition.assignment.strategy, session.timeout.ms and
    heartbeat.interval.ms are refused with group.protocol=consumer (when set, and
    with a group id); group.remote.assignor with classic."""
    import pytest

    from kproto.config import resolve
    from kproto.errors import ConfigError

    base = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
    for key in ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"):
        value = "range" if "strategy" in key else "10000"
        with pytest.raises(ConfigError, match=key.replace(".", "_")):
            resolve("consumer", {**base, "group.protocol": "consumer", key: value})
        resolve("consumer", {**base, key: value})                   # classic takes it
    with pytest.raises(ConfigError, match="group_remote_assignor"):
        resolve("consumer", {**base, "group.remote.assignor": "uniform"})
    settings = resolve("consumer", {**base, "group.protocol": "consumer",
                                    "group.remote.assignor": "uniform"})
    assert settings["session_timeout_ms"] == 45000        # defaults are not "set"
    again = resolve("consumer", settings)                  # resolved settings, again
    assert again.explicit == settings.explicit
    resolve("consumer", {"bootstrap.servers": "127.0.0.1:1", "group.protocol": "consumer",
                         "session.timeout.ms": 1000})       # no group: nothing to refuse


def test_poll_is_quiet_only_when_a_poll_has_nothing_to_do() -> None:
    """ConsumerMembership.poll skips its duties when poll_is_quiet(): true only in
    STABLE with no new subscription, lost partitions or failure waiting."""
    tid = next(iter(TOPICS))
    m = joined(1, [(tid, 0)])
    assert m.state is M.RECONCILING and not m.poll_is_quiet()
    reconcile(m)
    assert m.state is M.ACKNOWLEDGING and not m.poll_is_quiet()
    m.heartbeat_request()
    assert m.state is M.STABLE and m.poll_is_quiet()
    m.subscribe(["t0", "t1"], None)                      # the next poll takes it in
    assert not m.poll_is_quiet()
    m.on_consumer_poll()
    assert m.poll_is_quiet()
    m.on_heartbeat_error(ErrorCode.FENCED_MEMBER_EPOCH, None)
    assert not m.poll_is_quiet()                         # lost partitions to report
    m.take_lost()
    m.lost_released()
    assert m.state is M.JOINING and not m.poll_is_quiet()
    m.heartbeat_request()
    m.on_heartbeat_success(2, answer([]))
    reconcile(m)
    m.heartbeat_request()
    assert m.state is M.STABLE and m.poll_is_quiet()
    m.on_heartbeat_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    assert m.failure is not None and not m.poll_is_quiet()
