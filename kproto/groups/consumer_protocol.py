"""Consumer groups by the KIP-848 consumer protocol (``group_protocol="consumer"``).

:class:`ConsumerMembership` is the member :meth:`kproto.Consumer.subscribe` uses
with ``group_protocol="consumer"`` (Java's ``AsyncKafkaConsumer`` membership):
no JoinGroup/SyncGroup and no client-side assignor. The coordinator assigns
(``group_remote_assignor``: ``uniform`` or ``range``, the broker's default when
unset); the member only heartbeats (ConsumerGroupHeartbeat) on a background
thread, at the interval the coordinator gives in each answer, saying what it
subscribes to (topic names, or a broker-side RE2J regular expression passed
through as written) and which partitions it owns; the answers carry its member
epoch and, when it changed, its target assignment by topic id.

The state machine is :class:`~kproto.groups.consumer_state.Membership` (Java's
``MemberState`` transitions). What involves the application happens on the
thread that polls, inside ``poll()``, as Java does it: reconciling a new target
(topic ids resolved through metadata - ids not known yet wait for it; with
auto-commit, the positions committed first; the listener's
``on_partitions_revoked`` for what goes, then the new assignment and
``on_partitions_assigned`` with what came; the next heartbeat acknowledges),
and ``on_partitions_lost`` when the member was fenced (then it rejoins with
epoch 0). Offsets are committed with the member epoch; a commit the
coordinator refuses as STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID or
FENCED_MEMBER_EPOCH raises :class:`~kproto.errors.CommitFailedError` (the
auto-commit before a revocation retries a stale epoch with the latest one, as
Java's ``CommitRequestManager``). When the application has not polled for
``max_poll_interval_ms`` the heartbeat thread leaves the group (its partitions
go to the others) and the next poll reports them lost and rejoins. ``close()``
revokes (listener), then leaves with epoch -1 (a static member,
``group_instance_id``, with -2: the coordinator keeps its assignment for its
return within the session timeout).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import (
    CommitFailedError,
    ErrorCode,
    KprotoError,
    StaleMemberEpochError,
)
from ..net.cluster import Cluster
from ..protocol import ApiKey
from ..structs import ConsumerGroupMetadata, SubscriptionState, TopicPartition
from .consumer_state import HeartbeatOutcome, Membership, MemberState, new_member_id
from .member import GroupMember, RebalanceListener

__all__ = ["ConsumerMembership"]

log = logging.getLogger("kproto.group")

_REFUSED = {ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID,
            ErrorCode.FENCED_MEMBER_EPOCH}


class ConsumerMembership(GroupMember):
    """Membership of one consumer in ``group_id`` by the KIP-848 protocol (see the
    module docstring); the coordinator link and offsets are
    :class:`~kproto.groups.member.GroupMember`'s."""

    def __init__(self, subscription: SubscriptionState, cluster: Cluster,
                 config: Mapping[str, Any]) -> None:
        super().__init__(subscription, cluster, config)
        self.member_id = new_member_id()
        self.state = Membership(self.group_id, self.member_id, self.instance_id,
                                config["max_poll_interval_ms"], config["group_remote_assignor"],
                                on_transition=self._transitioned)
        self._state_lock = threading.RLock()  # the state machine (never held for I/O)
        self._wake = threading.Event()        # a heartbeat is due now
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_poll = time.monotonic()
        #: the interval the coordinator asks for (until its first answer: the config's)
        self.heartbeat_interval = config["heartbeat_interval_ms"] / 1000
        self._metadata_asked = 0.0
        self._retry_stale = False             # the commit before a revocation

    # ------------------------------------------------------------------ membership

    def subscribe(self, topics: set[str], pattern: str | None,
                  listener: RebalanceListener | None) -> None:
        """``pattern``: an RE2J expression, sent as written (``subscribed_topic_regex``):
        the broker validates and resolves it (one it refuses fails the next poll)."""
        if isinstance(pattern, re.Pattern):
            pattern = pattern.pattern
        self.topics, self.listener = set(topics), listener
        with self._state_lock:
            self.state.subscribe(() if pattern is not None else topics, pattern)
        self._subscribed = True
        if pattern is None:
            self.cluster.add_topics(self.topics)
        self._start_heartbeat()
        self._wake.set()

    def _transitioned(self, old: MemberState, new: MemberState) -> None:
        """Java's rebalance metrics (``AbstractMembershipManager.transitionTo``): a
        rebalance starts when the member becomes RECONCILING and ends when it
        leaves RECONCILING for ACKNOWLEDGING or STABLE (its target applied); left
        for another state (fenced, leaving...) it did not complete."""
        m = self.metrics
        if m is None or old is new:
            return
        if new is MemberState.RECONCILING:
            m.rebalance_started()
        elif old is MemberState.RECONCILING:
            if new in (MemberState.ACKNOWLEDGING, MemberState.STABLE):
                m.rebalance_done()
            else:
                m.rebalance_failed()

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member (its member epoch as the generation; -1 and "" when not in the
        group) for a transactional producer's offset commit (KIP-447)."""
        with self._state_lock:
            if self.state.in_group:
                return ConsumerGroupMetadata(self.group_id, self.state.epoch, self.member_id,
                                             self.instance_id)
        return ConsumerGroupMetadata(self.group_id, -1, "", self.instance_id)

    @property
    def member_state(self) -> MemberState:
        return self.state.state

    def record_poll(self) -> None:
        """The application polled: the poll timer starts again; a member that left
        after ``max_poll_interval_ms`` rejoins (Java's ``resetPollTimer``)."""
        now = time.monotonic()
        if now - self._last_poll > self.config["max_poll_interval_ms"] / 1000:
            log.warning("group %s: %.1f s between polls (max_poll_interval_ms=%d): member "
                        "%s rejoins now", self.group_id, now - self._last_poll,
                        self.config["max_poll_interval_ms"], self.member_id)
        self._last_poll = now

    def poll(self) -> None:
        """Called by every poll of the consumer: joins, reports lost partitions,
        reconciles the target assignment, raises a fatal heartbeat error."""
        if not self._subscribed:
            return
        self.record_poll()
        with self._state_lock:
            if self.state.poll_is_quiet():
                self._sync()
                return
            self.state.on_consumer_poll()
        self._release_lost()
        with self._state_lock:
            self.state.maybe_rejoin_stale_member()
            failure, self.state.failure = self.state.failure, None
            self._sync()
        if failure is not None:
            raise failure
        self._reconcile()
        with self._state_lock:
            if self.state.should_heartbeat_now():
                self._wake.set()

    def _sync(self) -> None:
        """The commit identity follows the state (the caller holds the state lock)."""
        self._joined = self.state.in_group

    def _release_lost(self) -> None:
        with self._state_lock:
            lost = self.state.take_lost()
        if lost is None:
            return
        try:
            if lost and self.listener is not None:
                callback = getattr(self.listener, "on_partitions_lost", None) or \
                    self.listener.on_partitions_revoked
                callback(set(lost))
        finally:
            with self._state_lock:
                self.state.lost_released()
                self._sync()
            self._set_assignment(frozenset())

    def _set_assignment(self, tps: frozenset[TopicPartition]) -> None:
        self.subscription.assign(sorted(tps))
        self.cluster.add_topics({tp.topic for tp in tps})

    def _reconcile(self) -> None:
        if self.state.state is not MemberState.RECONCILING:
            return                      # (read without the lock: the next poll sees a change)
        with self._state_lock:
            plan = self.state.start_reconciliation(self.cluster.metadata.topic_names())
        if plan is None:
            return
        if plan.unresolved:
            self._ask_metadata(plan.unresolved)
        if plan.ack_only:
            self._wake.set()
            return
        try:
            if self.config["enable_auto_commit"] and self._joined:
                self._commit_before_revocation()
            with self._state_lock:
                if self.state.should_abort():
                    return
            if plan.revoked:
                log.info("group %s: revoking %s", self.group_id, sorted(plan.revoked))
                if self.listener is not None:
                    self.listener.on_partitions_revoked(set(plan.revoked))
            with self._state_lock:
                if self.state.should_abort():
                    return
                self.state.assign(plan)
            self._set_assignment(plan.assigned)
            if self.listener is not None:
                self.listener.on_partitions_assigned(set(plan.added))
            with self._state_lock:
                if self.state.complete_reconciliation(plan):
                    self._wake.set()
                self._sync()
        finally:
            with self._state_lock:
                if self.state.reconciling:          # a listener raised
                    self.state.reconciliation_done()

    def _ask_metadata(self, ids: frozenset[uuid.UUID]) -> None:
        """Topic ids of the target that metadata does not name yet: refresh (every
        topic with a regex subscription), at most once per retry backoff."""
        now = time.monotonic()
        if now - self._metadata_asked < self.config["retry_backoff_ms"] / 1000:
            return
        self._metadata_asked = now
        log.debug("group %s: topic ids %s not in metadata yet", self.group_id,
                  sorted(map(str, ids)))
        try:
            self.cluster.refresh_metadata(all_topics=self.state.regex is not None)
        except KprotoError as exc:
            log.debug("group %s: metadata refresh failed: %s", self.group_id, exc)

    def _commit_before_revocation(self) -> None:
        """Auto-commit before a reconciliation (Java's
        ``maybeAutoCommitSyncBeforeRebalance``): retried on a stale epoch with the
        latest one until the request timeout; a failure is logged and the
        reconciliation goes on."""
        deadline = time.monotonic() + self.cluster.request_timeout
        backoff = self.config["retry_backoff_ms"] / 1000
        self._retry_stale = True
        try:
            while True:
                try:
                    self.commit(self.subscription.committable())
                    return
                except StaleMemberEpochError as exc:
                    if time.monotonic() + backoff >= deadline:
                        log.warning("group %s: commit before revocation failed: %s",
                                    self.group_id, exc)
                        return
                    time.sleep(backoff)
                except KprotoError as exc:
                    log.warning("group %s: commit before revocation failed: %s",
                                self.group_id, exc)
                    return
        finally:
            self._retry_stale = False

    # ------------------------------------------------------------------ offsets

    def _commit_identity(self) -> dict[str, Any]:
        with self._state_lock:
            if self.state.in_group:
                return {"generation_id_or_member_epoch": self.state.epoch,
                        "member_id": self.member_id, "group_instance_id": self.instance_id}
            if self._subscribed:
                raise CommitFailedError(
                    f"group {self.group_id}: offset commit cannot be completed since the "
                    f"consumer is not part of an active group (member state "
                    f"{self.state.state.name}: it left after max_poll_interval_ms without "
                    "a poll, was fenced, or has not joined yet); the next poll rejoins")
        return super()._commit_identity()

    def _commit_error(self, code: int) -> None:
        if code not in _REFUSED:
            return
        name = ErrorCode(code).name
        if code == ErrorCode.STALE_MEMBER_EPOCH and self._retry_stale:
            raise StaleMemberEpochError("OffsetCommit with a stale member epoch",
                                        group=self.group_id)
        raise CommitFailedError(
            f"group {self.group_id}: offset commit failed with {name}: this member's epoch "
            "is no longer the group's (its partitions may have moved); the next poll "
            "reconciles or rejoins")

    # ------------------------------------------------------------------ heartbeats

    def _start_heartbeat(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                        name=f"kproto-heartbeat-{self.group_id}")
        self._thread.start()

    def _stop_heartbeat(self) -> None:
        self._stop.set()
        self._wake.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(self.cluster.request_timeout + 1)
        self._thread = None

    def _heartbeat_loop(self) -> None:
        """Java's heartbeat request manager: a heartbeat at the coordinator's
        interval, at once when the state asks for it (joining, acknowledging,
        leaving), after ``retry_backoff_ms`` (doubling) following a failure; a
        leave once the application has not polled for ``max_poll_interval_ms``."""
        max_poll = self.config["max_poll_interval_ms"] / 1000
        next_beat = 0.0
        failures = 0
        while not self._stop.is_set():
            self._wake.clear()
            ignore_answer = False
            with self._state_lock:
                now = time.monotonic()
                if self.state.should_skip_heartbeat():
                    fields = None
                    wait = 1.0
                elif now - self._last_poll > max_poll and not self.state.is_leaving():
                    log.warning(
                        "group %s: consumer poll timeout has expired (no poll for %.1f s, "
                        "max_poll_interval_ms=%d): leaving the group; the next poll rejoins. "
                        "Poll more often, raise max_poll_interval_ms or lower max_poll_records",
                        self.group_id, now - self._last_poll, self.config["max_poll_interval_ms"])
                    self.state.transition_to_sending_leave_group(True)
                    fields = self.state.heartbeat_request()
                    self.state.reset_sent_fields()
                    ignore_answer = True
                elif self.state.should_heartbeat_now() or now >= next_beat:
                    fields = self.state.heartbeat_request()
                else:
                    fields = None
                    wait = min(next_beat, self._last_poll + max_poll) - now
                self._sync()
            if fields is None:
                self._wake.wait(max(wait, 0.001))
                continue
            sent = time.monotonic()
            outcome = self._heartbeat_once(fields, ignore_answer)
            if outcome is HeartbeatOutcome.OK:
                failures = 0
                next_beat = sent + self.heartbeat_interval
            elif outcome in (HeartbeatOutcome.RETRY_NOW, HeartbeatOutcome.FENCED):
                next_beat = 0.0
            elif outcome is HeartbeatOutcome.BACKOFF:
                failures += 1
                next_beat = time.monotonic() + min(
                    self.config["retry_backoff_ms"] * 2 ** (failures - 1),
                    self.config["retry_backoff_max_ms"]) / 1000

    def _heartbeat_once(self, fields: dict[str, Any], ignore_answer: bool) -> HeartbeatOutcome:
        """Send one heartbeat and apply its answer to the state."""
        try:
            body = self._request(ApiKey.CONSUMER_GROUP_HEARTBEAT, fields)
        except KprotoError as exc:
            # a lost answer: the coordinator may or may not have the fields
            log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
            with self._state_lock:
                self.state.reset_sent_fields()
            return HeartbeatOutcome.BACKOFF
        if ignore_answer:
            return HeartbeatOutcome.OK
        code = body["error_code"]
        with self._state_lock:
            if code == ErrorCode.NONE:
                interval = body["heartbeat_interval_ms"]
                if interval > 0:
                    self.heartbeat_interval = interval / 1000
                self.state.on_heartbeat_success(body["member_epoch"], body["assignment"])
                outcome = HeartbeatOutcome.OK
            else:
                # (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE: _request dropped the
                # connection already; never take its lock under the state lock - a
                # commit holds it and then takes the state lock for its epoch)
                outcome = self.state.on_heartbeat_error(code, body.get("error_message"))
            self._sync()
        return outcome

    # ------------------------------------------------------------------ leaving

    def _leave(self) -> None:
        """Close/unsubscribe (Java's ``leaveGroupOnClose``): revoke (listener), stop
        the heartbeats, send the leave heartbeat once (best effort, not retried)."""
        with self._state_lock:
            revoking = self.state.leave_group()
        try:
            if revoking and self.listener is not None:
                self.listener.on_partitions_revoked(set(revoking))
        finally:
            self._stop_heartbeat()
            with self._state_lock:
                fields = None
                if self.state.state is MemberState.PREPARE_LEAVING:
                    self.state.clear_assignment_and_leave()
                    fields = self.state.heartbeat_request()
                self._sync()
            self._set_assignment(frozenset())
            if fields is not None:
                log.info("group %s: member %s leaving with epoch %d", self.group_id,
                         self.member_id, fields["member_epoch"])
                try:
                    self._request(ApiKey.CONSUMER_GROUP_HEARTBEAT, fields)
                except KprotoError as exc:
                    log.debug("group %s: leave heartbeat failed: %s", self.group_id, exc)
