"""The KIP-848 consumer group member's state machine, without I/O (Java's
``AbstractMembershipManager`` + ``ConsumerMembershipManager`` + the heartbeat's
``HeartbeatState``).

A member of a ``group_protocol="consumer"`` group does not join and sync: it
heartbeats (ConsumerGroupHeartbeat) its subscription and the partitions it owns,
and the coordinator answers with its member epoch and, when it changed, its
whole target assignment by topic id. The member reconciles towards the target
(revoke what it must give up, then take what is new), acknowledges with its
next heartbeat, and the coordinator gives the partitions it freed to others.

:class:`Membership` holds that state and its transitions, exactly those of
Java's ``MemberState`` (:data:`PREVIOUS_STATES`); it sends nothing and calls no
listener. :mod:`kproto.groups.consumer_protocol` drives it: a background thread
builds heartbeats with :meth:`Membership.heartbeat_request` and applies their
answers, the polling thread runs the reconciliation (commit, listener calls,
the new assignment) between :meth:`Membership.start_reconciliation` and
:meth:`Membership.complete_reconciliation`, and releases lost partitions
(:meth:`Membership.take_lost`) when the member was fenced, failed or went stale.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ErrorCode, IllegalStateError, KprotoError, error_for_code
from ..structs import TopicPartition

__all__ = ["MemberState", "PREVIOUS_STATES", "Membership", "LocalAssignment",
           "Reconciliation", "HeartbeatOutcome", "new_member_id"]

log = logging.getLogger("kproto.group")

#: member epochs the member sends: 0 joins, -1 leaves, -2 leaves as a static member
JOIN_EPOCH, LEAVE_EPOCH, LEAVE_STATIC_EPOCH = 0, -1, -2


class MemberState(enum.Enum):
    """Java's ``MemberState``."""

    UNSUBSCRIBED = "UNSUBSCRIBED"        # not in the group, no heartbeats
    JOINING = "JOINING"                  # heartbeats with epoch 0 until it gets one
    RECONCILING = "RECONCILING"          # a target assignment to apply
    ACKNOWLEDGING = "ACKNOWLEDGING"      # applied: the next heartbeat (now) says so
    STABLE = "STABLE"                    # owns its target
    FENCED = "FENCED"                    # expelled: release partitions (lost), rejoin
    PREPARE_LEAVING = "PREPARE_LEAVING"  # closing: revoking before the leave heartbeat
    LEAVING = "LEAVING"                  # the leave heartbeat is due now
    FATAL = "FATAL"                      # an unrecoverable error: no more heartbeats
    STALE = "STALE"                      # left after max_poll_interval_ms; next poll rejoins


S = MemberState

#: Java's valid transitions: a state -> the states it may be entered from.
PREVIOUS_STATES: dict[MemberState, frozenset[MemberState]] = {
    S.STABLE: frozenset({S.JOINING, S.ACKNOWLEDGING, S.RECONCILING}),
    S.RECONCILING: frozenset({S.STABLE, S.JOINING, S.ACKNOWLEDGING, S.RECONCILING}),
    S.ACKNOWLEDGING: frozenset({S.RECONCILING}),
    S.FATAL: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING,
                        S.PREPARE_LEAVING, S.LEAVING, S.UNSUBSCRIBED}),
    S.FENCED: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING,
                         S.PREPARE_LEAVING, S.LEAVING}),
    S.JOINING: frozenset({S.FENCED, S.UNSUBSCRIBED, S.STALE}),
    S.PREPARE_LEAVING: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING,
                                  S.UNSUBSCRIBED}),
    S.LEAVING: frozenset({S.PREPARE_LEAVING}),
    S.UNSUBSCRIBED: frozenset({S.PREPARE_LEAVING, S.LEAVING, S.FENCED}),
    S.STALE: frozenset({S.LEAVING}),
}

_NOT_IN_GROUP = frozenset({S.UNSUBSCRIBED, S.FENCED, S.FATAL, S.STALE})

Assigned = frozenset[tuple[uuid.UUID, int]]


def new_member_id() -> str:
    """A member id as Java 4's consumer makes one (KIP-1082): a random UUID in
    Kafka's text form (URL-safe base64, no padding), never starting with '-'."""
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


@dataclass(frozen=True)
class LocalAssignment:
    """An assignment by topic id with Java's local epoch: bumped whenever the
    target changes, so an equal set of partitions received again after a change is
    still a new assignment to acknowledge."""

    local_epoch: int
    partitions: Assigned = frozenset()

    @property
    def is_none(self) -> bool:
        return self.local_epoch < 0

    def update_with(self, partitions: Assigned) -> LocalAssignment | None:
        """The next target, or None when ``partitions`` are this one's."""
        if partitions == self.partitions:
            return None
        return LocalAssignment(self.local_epoch + 1, partitions)


NONE = LocalAssignment(-1)


@dataclass
class Reconciliation:
    """What the polling thread applies, in order: commit (auto-commit), revoke
    ``revoked`` (listener), assign ``assigned`` (listener told ``added``)."""

    resolved: LocalAssignment
    assigned: frozenset[TopicPartition]
    added: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    #: topic ids of the target whose names metadata does not have yet
    unresolved: frozenset[uuid.UUID] = frozenset()
    #: only an acknowledgement (the resolvable part is what the member owns)
    ack_only: bool = False


class HeartbeatOutcome(enum.Enum):
    """What the heartbeat thread does after an answer."""

    OK = "ok"                    # next heartbeat at the interval
    RETRY_NOW = "retry_now"      # coordinator moved: find it, heartbeat again
    BACKOFF = "backoff"          # retry after the backoff
    FENCED = "fenced"            # the polling thread releases, then rejoins
    FATAL = "fatal"              # no more heartbeats; the next poll raises


@dataclass
class _SentFields:
    """Java's ``SentFields``: what the last heartbeat carried (None: send it)."""

    rebalance_timeout_ms: int = -1
    subscription: tuple[tuple[str, ...], str] | None = None
    server_assignor: str | None = None
    local: LocalAssignment | None = None

    def reset(self) -> None:
        self.rebalance_timeout_ms = -1
        self.subscription = self.server_assignor = self.local = None


_FATAL_CODES = {ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.INVALID_REQUEST,
                ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.UNSUPPORTED_ASSIGNOR,
                ErrorCode.INVALID_REGULAR_EXPRESSION, ErrorCode.UNSUPPORTED_VERSION,
                ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.FENCED_INSTANCE_ID}


@dataclass
class Membership:
    """One member's state (see the module docstring). Not thread-safe: the
    caller holds one lock around every call."""

    group_id: str
    member_id: str
    instance_id: str | None = None
    rebalance_timeout_ms: int = 300000
    server_assignor: str | None = None
    #: called with (old, new) on every transition (tests, logs)
    on_transition: Callable[[MemberState, MemberState], None] | None = None

    state: MemberState = MemberState.UNSUBSCRIBED
    epoch: int = JOIN_EPOCH
    current: LocalAssignment = NONE
    target: LocalAssignment = NONE
    #: the partitions the consumer reads (the subscription's assignment)
    owned: frozenset[TopicPartition] = frozenset()
    topics: tuple[str, ...] = ()
    regex: str | None = None
    #: the error that made the member FATAL (the next poll raises it)
    failure: KprotoError | None = None
    reconciling: bool = False
    _rejoined_while_reconciling: bool = False
    _poll_timer_expired: bool = False
    _subscription_updated: bool = False
    _join_sent: bool = False
    #: partitions to report lost (FENCED, STALE, FATAL), None when none pending
    _lost: frozenset[TopicPartition] | None = None
    _names: dict[uuid.UUID, str] = field(default_factory=dict)
    _sent: _SentFields = field(default_factory=_SentFields)

    # ------------------------------------------------------------------ transitions

    def transition(self, to: MemberState) -> None:
        """Java's ``transitionTo``: only the transitions of :data:`PREVIOUS_STATES`."""
        if to is not self.state and self.state not in PREVIOUS_STATES[to]:
            raise IllegalStateError(f"group {self.group_id}: invalid member state transition "
                                    f"from {self.state.name} to {to.name}")
        old, self.state = self.state, to
        if old is not to:
            log.info("group %s: member %s epoch %d: %s -> %s", self.group_id, self.member_id,
                     self.epoch, old.name, to.name)
        if self.on_transition is not None:
            self.on_transition(old, to)

    @property
    def in_group(self) -> bool:
        """Has an epoch the coordinator knows (commits carry it)."""
        return self.state not in _NOT_IN_GROUP and self.epoch > 0

    def leave_epoch(self) -> int:
        return LEAVE_STATIC_EPOCH if self.instance_id is not None else LEAVE_EPOCH

    def subscribe(self, topics: Iterable[str], regex: str | None) -> None:
        """A new subscription: joins at the next poll (or goes out with the next
        heartbeat when already in the group)."""
        self.topics = tuple(sorted(set(topics)))
        self.regex = regex
        self._subscription_updated = True

    def on_consumer_poll(self) -> None:
        """Java's ``onConsumerPoll``: rebalances start only inside a poll."""
        updated, self._subscription_updated = self._subscription_updated, False
        if updated and self.state is S.UNSUBSCRIBED:
            self.transition_to_joining()

    def transition_to_joining(self) -> None:
        if self.state is S.FATAL:
            log.warning("group %s: member in FATAL state does not rejoin", self.group_id)
            return
        if self.reconciling:
            self._rejoined_while_reconciling = True
        self.epoch = JOIN_EPOCH
        self.transition(S.JOINING)
        self._join_sent = False
        self.target = NONE
        self._names.clear()

    def transition_to_fenced(self) -> None:
        """UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: give the partitions up as lost
        (the polling thread reports them), then rejoin with epoch 0."""
        if self.state is S.PREPARE_LEAVING:
            self.transition_to_sending_leave_group(False)
            self.transition(S.UNSUBSCRIBED)
            return
        if self.state is S.LEAVING:
            self.transition(S.UNSUBSCRIBED)
            return
        if self.state in _NOT_IN_GROUP:
            return                          # already out (a late answer)
        self.transition(S.FENCED)
        self.epoch = JOIN_EPOCH
        self._lost = self.owned

    def transition_to_fatal(self, error: KprotoError) -> None:
        previous = self.state
        if previous in (S.FENCED, S.STALE, S.FATAL):
            return                          # out of the group already (a late answer)
        self.transition(S.FATAL)
        self.failure = error
        if previous not in (S.UNSUBSCRIBED, S.LEAVING, S.PREPARE_LEAVING):
            self._lost = self.owned

    def transition_to_sending_leave_group(self, due_to_expired_poll_timer: bool) -> None:
        """The leave heartbeat is due now (epoch -1, or -2 for a static member)."""
        if self.state in (S.FATAL, S.UNSUBSCRIBED):
            return
        if due_to_expired_poll_timer:
            self._poll_timer_expired = True
            self.transition(S.PREPARE_LEAVING)
        self.epoch = self.leave_epoch()
        self.current = NONE
        self.transition(S.LEAVING)

    def leave_group(self) -> frozenset[TopicPartition] | None:
        """Close or unsubscribe (Java's ``leaveGroup``): PREPARE_LEAVING; returns the
        partitions to revoke before the leave heartbeat (then call
        :meth:`clear_assignment_and_leave`), or None when there is no group to
        leave."""
        if self.state in _NOT_IN_GROUP:
            if self.state is S.FENCED:
                self.clear_assignment()
                self.transition(S.UNSUBSCRIBED)
            self.topics, self.regex = (), None
            return None
        if self.state in (S.PREPARE_LEAVING, S.LEAVING):
            return None
        self.transition(S.PREPARE_LEAVING)
        return self.owned

    def clear_assignment_and_leave(self) -> None:
        self.topics, self.regex = (), None
        self.clear_assignment()
        self.transition_to_sending_leave_group(False)

    def clear_assignment(self) -> None:
        self.owned = frozenset()
        self.current = NONE
        self.target = NONE
        self._names.clear()

    def take_lost(self) -> frozenset[TopicPartition] | None:
        """Partitions to report lost (listener ``on_partitions_lost``), once; then
        call :meth:`lost_released`."""
        lost, self._lost = self._lost, None
        return lost

    def lost_released(self) -> None:
        """The lost partitions were reported: forget them; a fenced member rejoins."""
        self.clear_assignment()
        if self.state is S.FENCED:
            self.transition_to_joining()

    def poll_is_quiet(self) -> bool:
        """True when a poll has nothing to do for the membership: STABLE (lost
        partitions, a failure and an expired poll timer wait only in FENCED, FATAL
        and STALE; a new target makes it RECONCILING) with no new subscription. The
        consumer's poll then skips :meth:`on_consumer_poll`, :meth:`take_lost`,
        :meth:`maybe_rejoin_stale_member` and the reconciliation, which would leave
        the state as it is (the common case: every poll between rebalances)."""
        return self.state is S.STABLE and not self._subscription_updated

    def maybe_rejoin_stale_member(self) -> None:
        """The application polled again after max_poll_interval_ms (its lost
        partitions released first, see :meth:`take_lost`)."""
        self._poll_timer_expired = False
        if self.state is S.STALE and self._lost is None:
            self.transition_to_joining()

    # ------------------------------------------------------------------ heartbeats

    def should_skip_heartbeat(self) -> bool:
        return self.state in _NOT_IN_GROUP

    def should_heartbeat_now(self) -> bool:
        """ACKNOWLEDGING and LEAVING do not wait for the interval; JOINING neither,
        for its first heartbeat."""
        return self.state in (S.ACKNOWLEDGING, S.LEAVING) or \
            (self.state is S.JOINING and not self._join_sent)

    def is_leaving(self) -> bool:
        return self.state in (S.PREPARE_LEAVING, S.LEAVING)

    def heartbeat_request(self) -> dict[str, Any]:
        """The next ConsumerGroupHeartbeat's fields: all of them when joining (or
        after an error or a lost answer), otherwise only what changed since the
        last one (Java's ``HeartbeatState``); then the state moves on as sending
        it does (ACKNOWLEDGING -> STABLE/RECONCILING, LEAVING -> UNSUBSCRIBED/STALE)."""
        full = self.state is S.JOINING
        sent = self._sent
        fields: dict[str, Any] = {"group_id": self.group_id, "member_id": self.member_id,
                                  "member_epoch": self.epoch, "instance_id": self.instance_id}
        if full or sent.rebalance_timeout_ms != self.rebalance_timeout_ms:
            fields["rebalance_timeout_ms"] = sent.rebalance_timeout_ms = \
                self.rebalance_timeout_ms
        # names and regex go together ("" for no regex, [] with a regex), as
        # librdkafka sends them: Kafka takes either, the mock cluster insists
        subscription = (self.topics, self.regex or "")
        if self.state is not S.LEAVING and (full or subscription != sent.subscription):
            fields["subscribed_topic_names"] = [] if self.regex else list(self.topics)
            fields["subscribed_topic_regex"] = self.regex or ""
            sent.subscription = subscription
        if self.server_assignor is not None and (full or
                                                 self.server_assignor != sent.server_assignor):
            fields["server_assignor"] = sent.server_assignor = self.server_assignor
        if full or self.current != sent.local:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for tid, p in self.current.partitions:
                by_topic.setdefault(tid, []).append(p)
            fields["topic_partitions"] = [{"topic_id": t, "partitions": sorted(ps)}
                                          for t, ps in sorted(by_topic.items())]
            sent.local = self.current
        self._on_heartbeat_request_generated()
        return fields

    def _on_heartbeat_request_generated(self) -> None:
        if self.state is S.JOINING:
            self._join_sent = True
        elif self.state is S.ACKNOWLEDGING:
            self.transition(S.STABLE if self.current == self.target else S.RECONCILING)
        elif self.state is S.LEAVING:
            if self._poll_timer_expired:
                self.transition(S.STALE)
                self._lost = self.owned
            else:
                self.transition(S.UNSUBSCRIBED)

    def reset_sent_fields(self) -> None:
        """The next heartbeat carries every field (after an error or a lost answer:
        the coordinator may not have what the last one said)."""
        self._sent.reset()

    def on_heartbeat_success(self, member_epoch: int,
                             assignment: Mapping[str, Any] | None) -> None:
        """A heartbeat answered without error: the epoch, and the target when the
        answer carries one."""
        if self.state is S.LEAVING or self.state in _NOT_IN_GROUP:
            return                  # left (or leaving): the answer is no longer ours
        self.epoch = member_epoch
        if assignment is None:
            return
        if self.state not in PREVIOUS_STATES[S.RECONCILING]:
            return                  # Java's canHandleNewAssignment (PREPARE_LEAVING)
        target: set[tuple[uuid.UUID, int]] = set()
        for t in assignment.get("topic_partitions") or ():
            target.update((t["topic_id"], p) for p in t["partitions"] or ())
        self._process_assignment(frozenset(target))

    def _process_assignment(self, partitions: Assigned) -> None:
        new = self.target.update_with(partitions)
        if new is not None:
            self.target = new
        if self.target != self.current:
            self.transition(S.RECONCILING)
        elif self.state in (S.RECONCILING, S.JOINING):
            self.transition(S.STABLE)

    def on_heartbeat_error(self, code: int, message: str | None) -> HeartbeatOutcome:
        """A heartbeat answered with an error (Java's ``onErrorResponse``)."""
        self.reset_sent_fields()
        if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            return HeartbeatOutcome.RETRY_NOW
        if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return HeartbeatOutcome.BACKOFF
        if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            log.info("group %s: member %s epoch %d fenced (%s): rejoining", self.group_id,
                     self.member_id, self.epoch, ErrorCode(code).name)
            self.transition_to_fenced()
            return HeartbeatOutcome.FENCED
        cls = error_for_code(code)
        what = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        if code == ErrorCode.UNSUPPORTED_VERSION:
            detail = "the broker does not speak the consumer group protocol (KIP-848)"
        elif code == ErrorCode.INVALID_REGULAR_EXPRESSION:
            detail = f"invalid RE2J subscription pattern {self.regex!r}"
        else:
            detail = what
        text = f"ConsumerGroupHeartbeat failed: {detail}" + (f": {message}" if message else "")
        log.error("group %s: %s", self.group_id, text)
        self.transition_to_fatal(cls(text, group=self.group_id) if cls is not None
                                 else KprotoError(text))
        return HeartbeatOutcome.FATAL

    # ------------------------------------------------------------------ reconciliation

    def start_reconciliation(self, topic_names: Mapping[uuid.UUID, str]
                             ) -> Reconciliation | None:
        """Java's ``maybeReconcile``: what to apply to reach the target, for the part
        of it whose topic ids ``topic_names`` (metadata) resolves; None when there is
        nothing to do or a reconciliation is under way."""
        if self.state is not S.RECONCILING or self.target == self.current or \
                self.reconciling:
            return None
        resolved: set[tuple[uuid.UUID, int]] = set()
        tps: set[TopicPartition] = set()
        unresolved: set[uuid.UUID] = set()
        for tid, p in self.target.partitions:
            name = topic_names.get(tid) or self._names.get(tid)
            if name is None:
                unresolved.add(tid)
                continue
            self._names[tid] = name
            resolved.add((tid, p))
            tps.add(TopicPartition(name, p))
        assignment = LocalAssignment(self.target.local_epoch, frozenset(resolved))
        if not self.current.is_none and assignment.partitions == self.current.partitions:
            self.current = assignment         # ack what is resolvable, wait for the rest
            self.transition(S.ACKNOWLEDGING)
            return Reconciliation(assignment, self.owned, frozenset(), frozenset(),
                                  frozenset(unresolved), ack_only=True)
        self.reconciling = True
        self._rejoined_while_reconciling = False
        assigned = frozenset(tps)
        return Reconciliation(assignment, assigned, assigned - self.owned,
                              self.owned - assigned, frozenset(unresolved))

    def should_abort(self) -> bool:
        """Java's ``maybeAbortReconciliation``: the reconciliation under way no
        longer applies (fenced, failed, leaving or rejoined meanwhile)."""
        if self.state is not S.RECONCILING or self._rejoined_while_reconciling:
            self.reconciliation_done()
            return True
        return False

    def assign(self, plan: Reconciliation) -> None:
        """The revocation is done: the member owns ``plan.assigned`` from now on."""
        self.owned = plan.assigned
        kept = {tp.topic for tp in plan.assigned}
        self._names = {t: n for t, n in self._names.items() if n in kept}

    def complete_reconciliation(self, plan: Reconciliation) -> bool:
        """Applied: acknowledge with the next heartbeat (True), unless it no
        longer applies."""
        if not self.reconciling or self.should_abort():
            return False
        self.current = plan.resolved
        self.transition(S.ACKNOWLEDGING)
        self.reconciliation_done()
        return True

    def reconciliation_done(self) -> None:
        """Ended, applied or not (a listener that raised leaves the member
        RECONCILING: the next poll tries again)."""
        self.reconciling = False
        self._rejoined_while_reconciling = False
