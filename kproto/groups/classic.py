"""Consumer groups (the classic protocol): coordinator, join/sync, heartbeats, commits.

:class:`GroupCoordinator` is what :meth:`kproto.Consumer.subscribe` uses: it
finds the group's coordinator (FindCoordinator), joins (JoinGroup, answering
MEMBER_ID_REQUIRED with the id the broker gives), and when it is the leader
computes the assignment with the first assignor every member supports
(``range``, ``roundrobin``, ``sticky``: the standard embedded consumer
protocol, so Kafka's tooling shows our assignments), then SyncGroup.
Liveness follows Java's ``AbstractCoordinator``: a background thread
heartbeats every ``heartbeat_interval_ms`` for as long as the member is in the
group, *including* after the coordinator answered REBALANCE_IN_PROGRESS (that
only asks the next poll to rejoin: the heartbeats keep the member in the group
until then, however long the application takes between polls, up to
``max_poll_interval_ms``). The same thread enforces ``max_poll_interval_ms``:
when the application has not polled for that long, it leaves the group
(LeaveGroup) so the others take the partitions over; the next poll rejoins,
and a commit in between raises :class:`CommitFailedError`.

When a rejoin is due, the next poll revokes every partition (the eager
protocol; committing first with auto-commit, calling the listener), rejoins and
assigns. The assignors still learn what this member owned: its last assignment
and generation go into the JoinGroup user data (what Java's ``StickyAssignor``
sends), so ``sticky`` moves as few partitions as it can. ``close()`` commits
and leaves (LeaveGroup) so the others take over at once.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from .. import protocol
from ..errors import (
    CommitFailedError,
    ErrorCode,
    FencedInstanceIdError,
    KprotoError,
    error_for_code,
)
from ..net.cluster import Cluster
from ..protocol import ApiKey
from ..structs import ConsumerGroupMetadata, SubscriptionState, TopicPartition
from .member import _COORDINATOR_GONE, GroupMember, RebalanceListener

__all__ = ["CommitFailedError", "GroupCoordinator", "RebalanceListener"]

log = logging.getLogger("kproto.group")

# error codes the coordinator logic reacts to
COORDINATOR_LOAD_IN_PROGRESS = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
COORDINATOR_NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE
NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
ILLEGAL_GENERATION = ErrorCode.ILLEGAL_GENERATION
UNKNOWN_MEMBER_ID = ErrorCode.UNKNOWN_MEMBER_ID
REBALANCE_IN_PROGRESS = ErrorCode.REBALANCE_IN_PROGRESS
MEMBER_ID_REQUIRED = ErrorCode.MEMBER_ID_REQUIRED
FENCED_INSTANCE_ID = ErrorCode.FENCED_INSTANCE_ID
_OUT_OF_GENERATION = {ILLEGAL_GENERATION: "ILLEGAL_GENERATION",
                      UNKNOWN_MEMBER_ID: "UNKNOWN_MEMBER_ID",
                      FENCED_INSTANCE_ID: "FENCED_INSTANCE_ID"}


class _Rejoin(Exception):
    """The group moved on (new generation, unknown member): join again."""


class GroupCoordinator(GroupMember):
    """Membership of one consumer in ``group_id`` by the classic protocol (Java's
    ``ConsumerCoordinator``); the coordinator link and offsets are
    :class:`~kproto.groups.member.GroupMember`'s."""

    def __init__(self, subscription: SubscriptionState, cluster: Cluster,
                 config: Mapping[str, Any]) -> None:
        from .assignors import get_assignor

        super().__init__(subscription, cluster, config)
        self.assignors = [get_assignor(a) for a in config["partition_assignment_strategy"]]
        self.generation = -1
        self.protocol_name: str | None = None
        self._needs_join = False
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._last_poll = time.monotonic()       # the application's last poll
        self._failure: KprotoError | None = None  # fatal heartbeat error, raised by poll()
        # the last assignment this member received and its generation: what the
        # assignors' user data reports when rejoining (after the eager revocation)
        self._owned: dict[str, list[int]] = {}
        self._owned_generation = -1
        self._metadata_topics: frozenset[str] = frozenset()
        self._assigned_snapshot: dict[str, int] = {}

    # ------------------------------------------------------------------ coordinator link

    def _rebalance_wait(self) -> float:
        """How long a JoinGroup/SyncGroup answer may take: the coordinator holds it
        until the rebalance ends (up to the rebalance timeout)."""
        return max(self.cluster.request_timeout, self.config["max_poll_interval_ms"] / 1000 + 5)

    def _check_rebalance(self, code: int, what: str) -> None:
        """The error of a JoinGroup/SyncGroup answer: a stale member id or generation
        (forgotten) or a rebalance under way joins again (``_Rejoin``); any other
        error is raised."""
        if code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            # as Java: a stale generation keeps the member id (still valid),
            # an unknown member asks for a new one
            self._reset_generation(reset_member_id=code == UNKNOWN_MEMBER_ID)
            raise _Rejoin()
        if code == REBALANCE_IN_PROGRESS:
            raise _Rejoin()
        cls = error_for_code(code)
        if cls is not None:
            raise cls(f"{what} failed", group=self.group_id)

    # ------------------------------------------------------------------ membership

    def subscribe(self, topics: set[str], pattern: re.Pattern[str] | None,
                  listener: RebalanceListener | None) -> None:
        self.topics, self.pattern, self.listener = set(topics), pattern, listener
        self._subscribed = True
        self._needs_join = True
        if pattern is None:
            self.cluster.add_topics(self.topics)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member (generation and member id; -1 and "" when not in the group) for
        a transactional producer's offset commit, which the coordinator refuses once
        the group has moved on (KIP-447)."""
        with self._lock:
            return ConsumerGroupMetadata(self.group_id, self.generation, self.member_id,
                                         self.instance_id)

    def _subscribed_topics(self) -> set[str]:
        if self.pattern is None:
            return set(self.topics)
        meta = self.cluster.refresh_metadata(all_topics=True)
        return {t for t, info in meta.topics.items()
                if self.pattern.fullmatch(t) and not (
                    self.config["exclude_internal_topics"] and info.is_internal)}

    def _reset_generation(self, *, reset_member_id: bool) -> None:
        """Out of the group's generation (Java ``resetStateAndGeneration``): no
        commits until the next poll has rejoined."""
        with self._lock:
            self._joined = False
            self._needs_join = True
            self.generation = -1
            if reset_member_id:
                self.member_id = ""

    def record_poll(self) -> None:
        """The application polled now: restarts the ``max_poll_interval_ms`` clock
        the heartbeat thread watches (Java ``Heartbeat.poll``)."""
        self._last_poll = time.monotonic()

    def poll(self) -> None:
        """Called by every poll of the consumer: counts as the application's poll
        for ``max_poll_interval_ms``, then rejoins when the group asks for it (or
        the subscribed topics' partitions changed, or this member left)."""
        if not self._subscribed:
            return
        self.record_poll()
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
        if self._joined and not self._needs_join and self.cluster.needs_refresh:
            self._check_metadata_change()
        if not self._needs_join and self._joined:
            return
        self._rebalance()

    def _check_metadata_change(self) -> None:
        try:
            topics = self._subscribed_topics()
            meta = self.cluster.refresh_metadata(topics)
        except KprotoError:
            return
        snapshot = {t: len(meta.partitions(t)) for t in topics}
        if snapshot != self._assigned_snapshot:
            log.info("group %s: subscribed partitions changed, rejoining", self.group_id)
            self._needs_join = True

    def _rebalance(self) -> None:
        revoked = self.subscription.assigned()
        if self._joined and revoked:
            self.maybe_auto_commit(force=True)
        if revoked and self.listener is not None:
            # out of the generation already (left after max_poll_interval_ms,
            # expelled): the partitions are lost, not revoked (Java onJoinPrepare)
            lost = getattr(self.listener, "on_partitions_lost", None) \
                if not self._joined else None
            (lost or self.listener.on_partitions_revoked)(revoked)
        self._set_assignment([])
        with self._lock:           # no heartbeat from here until the new generation
            self._joined = False
        while True:
            try:
                assigned = self._join_and_sync()
                break
            except _Rejoin:
                continue
        with self._lock:
            self._joined = True
            self._needs_join = False            # as Java: on SyncGroup success
            self._last_poll = time.monotonic()   # Java resets the poll timer on joining
        self._set_assignment(sorted(assigned))
        self._start_heartbeat()
        if self.listener is not None:
            self.listener.on_partitions_assigned(set(assigned))

    def _set_assignment(self, tps: list[TopicPartition]) -> None:
        self.subscription.assign(tps)
        self.cluster.add_topics({tp.topic for tp in tps})

    def _join_and_sync(self) -> list[TopicPartition]:
        topics = self._subscribed_topics()
        self.cluster.wait_for_topics(topics, self.cluster.request_timeout) if topics else None
        # The eager protocol (the only one kproto's assignors speak) revoked
        # everything before this join, so owned_partitions is empty, as Java sends
        # it; what the member owned reaches the assignor through its user data,
        # built from the last assignment received (Java's StickyAssignor keeps it
        # from onAssignment), with the generation it was received in.
        owned: dict[str, list[int]] = {}
        for tp in self.subscription.assignment:
            owned.setdefault(tp.topic, []).append(tp.partition)
        protocols = []
        for a in self.assignors:
            user_data = a.subscription_user_data(topics, self._owned, self._owned_generation)
            protocols.append({"name": a.name, "metadata": protocol.encode_subscription({
                "topics": sorted(topics), "user_data": user_data,
                "owned_partitions": [{"topic": t, "partitions": sorted(ps)}
                                     for t, ps in sorted(owned.items())],
                "generation_id": self.generation, "rack_id": self.config["client_rack"]})})

        def join() -> dict[str, Any]:
            body = self._request(ApiKey.JOIN_GROUP, {
                "group_id": self.group_id,
                "session_timeout_ms": self.config["session_timeout_ms"],
                "rebalance_timeout_ms": self.config["max_poll_interval_ms"],
                "member_id": self.member_id, "group_instance_id": self.instance_id,
                "protocol_type": "consumer", "protocols": protocols, "reason": None},
                timeout=self._rebalance_wait())
            code = body["error_code"]
            if code == MEMBER_ID_REQUIRED:
                self.member_id = body["member_id"]
                raise _Rejoin()
            self._check_rebalance(code, "JoinGroup")
            return body

        joined = self._retry(join, "JoinGroup")
        self.member_id = joined["member_id"]
        self.generation = joined["generation_id"]
        self.protocol_name = joined["protocol_name"]
        assignments = []
        if joined["leader"] == self.member_id:
            assignments = self._assign(joined)

        def sync() -> dict[str, Any]:
            body = self._request(ApiKey.SYNC_GROUP, {
                "group_id": self.group_id, "generation_id": self.generation,
                "member_id": self.member_id, "group_instance_id": self.instance_id,
                "protocol_type": "consumer", "protocol_name": self.protocol_name,
                "assignments": assignments}, timeout=self._rebalance_wait())
            self._check_rebalance(body["error_code"], "SyncGroup")
            return body

        synced = self._retry(sync, "SyncGroup")
        raw = synced["assignment"]
        decoded = protocol.decode_assignment(raw) if raw else {"assigned_partitions": []}
        mine = [TopicPartition(a["topic"], p) for a in decoded["assigned_partitions"] or []
                for p in a["partitions"] or []]
        self._owned = {}
        for tp in mine:
            self._owned.setdefault(tp.topic, []).append(tp.partition)
        self._owned_generation = self.generation
        meta = self.cluster.metadata
        self._assigned_snapshot = {t: len(meta.partitions(t)) for t in topics}
        log.info("group %s generation %d: member %s got %d partitions", self.group_id,
                 self.generation, self.member_id, len(mine))
        return mine

    def _assign(self, joined: dict[str, Any]) -> list[dict[str, Any]]:
        """As the leader: decode every member's subscription and assign partitions."""
        from .assignors import MemberSubscription

        assignor = next(a for a in self.assignors if a.name == joined["protocol_name"])
        members = []
        all_topics: set[str] = set()
        for m in joined["members"]:
            sub = protocol.decode_subscription(m["metadata"])
            topics = tuple(sub["topics"] or ())
            all_topics |= set(topics)
            owned = {o["topic"]: tuple(o["partitions"] or ())
                     for o in sub.get("owned_partitions") or []}
            members.append(MemberSubscription(
                m["member_id"], topics, sub.get("user_data"), owned,
                sub.get("generation_id", -1), m.get("group_instance_id"), sub.get("rack_id")))
        meta = self.cluster.wait_for_topics(all_topics, self.cluster.request_timeout) \
            if all_topics else self.cluster.metadata
        counts = {t: len(meta.partitions(t)) for t in all_topics if meta.partitions(t)}
        result = assignor.assign(members, counts)
        out = []
        for member_id, by_topic in result.items():
            out.append({"member_id": member_id, "assignment": protocol.encode_assignment({
                "assigned_partitions": [{"topic": t, "partitions": sorted(ps)}
                                        for t, ps in sorted(by_topic.items()) if ps],
                "user_data": assignor.assignment_user_data(member_id)}, version=0)})
        return out

    # ------------------------------------------------------------------ heartbeats

    def _start_heartbeat(self) -> None:
        if self._heartbeat is not None and self._heartbeat.is_alive():
            return
        self._stop.clear()
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                           name=f"kproto-heartbeat-{self.group_id}")
        self._heartbeat.start()

    def _stop_heartbeat(self) -> None:
        self._stop.set()
        t = self._heartbeat
        if t is not None and t is not threading.current_thread():
            t.join(self.cluster.request_timeout)
        self._heartbeat = None

    def _heartbeat_loop(self) -> None:
        """Java's ``HeartbeatThread``: from the first join until ``close()``.

        While the member is in a generation it heartbeats every
        ``heartbeat_interval_ms`` (after a failure, after ``retry_backoff_ms``),
        and leaves the group once the application has not polled for
        ``max_poll_interval_ms``. Between generations (the poll thread is
        rejoining) it only waits. Each step holds the coordinator lock, so an
        answer is applied to the generation it was sent for."""
        interval = self.config["heartbeat_interval_ms"] / 1000
        backoff = self.config["retry_backoff_ms"] / 1000
        max_poll = self.config["max_poll_interval_ms"] / 1000
        next_beat = time.monotonic() + interval
        while True:
            wait = interval
            if self._joined:
                wait = min(next_beat, self._last_poll + max_poll) - time.monotonic()
            if self._stop.wait(max(wait, 0.001)):
                return
            with self._lock:
                now = time.monotonic()
                if not self._joined or self._stop.is_set():
                    continue
                if now - self._last_poll > max_poll:
                    log.warning(
                        "group %s: consumer poll timeout has expired (no poll for %.1f s, "
                        "max_poll_interval_ms=%d): leaving the group; the next poll rejoins. "
                        "Poll more often, raise max_poll_interval_ms or lower max_poll_records",
                        self.group_id, now - self._last_poll, self.config["max_poll_interval_ms"])
                    self._leave_group("consumer poll timeout has expired")
                    continue
                if now < next_beat:
                    continue
                next_beat = now + interval
                if not self._heartbeat_once():
                    next_beat = time.monotonic() + backoff

    def _heartbeat_once(self) -> bool:
        """One Heartbeat (the caller holds the lock); False when it should be
        retried soon (Java's ``HeartbeatResponseHandler``)."""
        try:
            body = self._request(ApiKey.HEARTBEAT, {
                "group_id": self.group_id, "generation_id": self.generation,
                "member_id": self.member_id, "group_instance_id": self.instance_id})
        except KprotoError as exc:
            log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
            return False
        code = body["error_code"]
        if code == ErrorCode.NONE:
            return True
        if code == REBALANCE_IN_PROGRESS:
            # Only a request to rejoin at the next poll. The heartbeats go on
            # meanwhile: they keep this member in the group (the coordinator
            # waits for it up to the rebalance timeout, max_poll_interval_ms).
            if not self._needs_join:
                log.info("group %s: rebalance in progress, rejoining at the next poll",
                         self.group_id)
            self._needs_join = True
            return True
        if code in _OUT_OF_GENERATION:
            log.info("group %s: heartbeat of generation %d member %s failed with %s: "
                     "rejoining at the next poll", self.group_id, self.generation,
                     self.member_id, _OUT_OF_GENERATION[code])
            # as Java: ILLEGAL_GENERATION keeps the member id, which is still valid
            self._reset_generation(reset_member_id=code != ILLEGAL_GENERATION)
            if code == FENCED_INSTANCE_ID:     # fatal: the next poll raises it
                self._failure = FencedInstanceIdError(
                    "another consumer uses this group_instance_id", group=self.group_id)
            return True
        if code not in _COORDINATOR_GONE:
            log.warning("group %s: heartbeat error %s", self.group_id, error_for_code(code))
        return False

    def _leave_group(self, reason: str) -> None:
        """Java's ``maybeLeaveGroup``: a dynamic member of a generation sends
        LeaveGroup (best effort, not retried: the session timeout does the rest);
        either way this member is out of the group until it rejoins."""
        with self._lock:
            if self.instance_id is None and self._joined and self.member_id:
                member = self.member_id
                log.info("group %s: member %s leaving the group: %s", self.group_id,
                         member, reason)
                try:
                    self._request(ApiKey.LEAVE_GROUP, lambda v: {
                        "group_id": self.group_id, **({"members": [{
                            "member_id": member, "group_instance_id": None,
                            "reason": reason}]} if v >= 3 else {"member_id": member})})
                except KprotoError as exc:
                    log.debug("group %s: LeaveGroup failed: %s", self.group_id, exc)
            self._reset_generation(reset_member_id=True)

    # ------------------------------------------------------------------ offsets

    def _commit_identity(self) -> dict[str, Any]:
        if self._subscribed and not self._joined:
            # Java's sendOffsetCommitRequest: no generation, no commit
            raise CommitFailedError(
                f"group {self.group_id}: offset commit cannot be completed since the "
                "consumer is not part of an active group (it left after "
                "max_poll_interval_ms without a poll, or was expelled); its partitions "
                "may be reassigned; the next poll rejoins")
        return {"generation_id_or_member_epoch": self.generation if self._joined else -1,
                "member_id": self.member_id if self._joined else "",
                "group_instance_id": self.instance_id if self._joined else None}

    def _commit_error(self, code: int) -> None:
        if code == REBALANCE_IN_PROGRESS:
            self._needs_join = True
        if code in (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) and self._joined:
            # Java: out of the generation, the commit is lost
            self._reset_generation(reset_member_id=code == UNKNOWN_MEMBER_ID)
            raise CommitFailedError(
                f"group {self.group_id}: offset commit failed with "
                f"{_OUT_OF_GENERATION[ErrorCode(code)]}: this member is no longer in "
                "the group's generation; the next poll rejoins")

    def _leave(self) -> None:
        self._stop_heartbeat()
        self._leave_group("the consumer is being closed")
