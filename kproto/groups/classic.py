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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import protocol
from ..errors import (
    CommitFailedError,
    ConfigError,
    ErrorCode,
    FencedInstanceIdError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    KprotoError,
    error_for_code,
)
from ..net.blocking import BrokerConnection
from ..net.cluster import Cluster
from ..net.connection import Request
from ..net.driver import SelectorDriver
from ..protocol import ApiKey
from ..structs import ConsumerGroupMetadata, SubscriptionState, TopicPartition
from .cooperative import (
    COOPERATIVE,
    CooperativeStickyAssignor,
    owned_by_topic,
    rebalance_protocol,
    withheld,
)
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


@dataclass(frozen=True)
class _Exchange:
    """The JoinGroup (``kind`` "join") or SyncGroup ("sync") in flight on ``conn``."""

    kind: str
    conn: BrokerConnection
    request: Request
    sent: float


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
        #: this member's rebalance protocol: cooperative when all its assignors
        #: support it (KIP-429), else eager
        self.protocol = rebalance_protocol(self.assignors)
        self._needs_join = False
        self._exchange: _Exchange | None = None  # the JoinGroup/SyncGroup in flight
        self._join_conn: BrokerConnection | None = None
        self._prepared = False                   # onJoinPrepare done for this rebalance
        self._retry_at = 0.0                     # no JoinGroup before (backoff)
        self._joining_topics: set[str] = set()
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

    # ------------------------------------------------------------------ membership

    def subscribe(self, topics: set[str], pattern: str | None,
                  listener: RebalanceListener | None) -> None:
        """``pattern``: Python's ``re``, matched here against the cluster's topics (a
        pattern it cannot compile is a :class:`~kproto.errors.ConfigError`)."""
        regex = None
        if pattern is not None:
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"subscribe(pattern={pattern!r}): not a Python regular "
                                  f"expression (group_protocol='classic'): {exc}") from None
        self.topics, self.pattern, self.listener = set(topics), regex, listener
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
        """Every duty of :meth:`poll_within`, waiting until this member is in the
        group (a rebalance done)."""
        with SelectorDriver() as driver:
            self.poll_within(None)
            while self._subscribed and self.rebalancing:
                ex = self._exchange
                limit = self._retry_at if ex is None else ex.sent + self._rebalance_wait()
                self.poll_within(None, driver.wait(self.waiting_on(), limit))

    def poll_within(self, deadline: float | None,
                    ready: Sequence[BrokerConnection] = ()) -> None:
        """Called by every poll of the consumer: counts as the application's poll
        for ``max_poll_interval_ms``, then rejoins when the group asks for it (or
        the subscribed topics' partitions changed, or this member left).

        A rebalance is an exchange (JoinGroup, then SyncGroup) that the
        coordinator may hold for as long as the other members take to rejoin.
        This moves it on without waiting for an answer, taking those of the
        ``ready`` connections (of :meth:`waiting_on`, found readable by the
        consumer's driver before ``deadline``); the exchange goes on at the next
        call, as Java's ``joinFuture`` does across polls."""
        if not self._subscribed:
            return
        self.record_poll()
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
        if self._exchange is None and self._joined and not self._needs_join \
                and self.cluster.needs_refresh:
            self._check_metadata_change()
        self._advance(ready)

    @property
    def rebalancing(self) -> bool:
        """A rebalance is due or under way (this member is not in a stable generation)."""
        return self._exchange is not None or self._needs_join or not self._joined

    def waiting_on(self) -> list[BrokerConnection]:
        """The connection whose JoinGroup/SyncGroup answer this member waits for
        (none between rebalances): the consumer's poll waits on it beside its
        Fetches."""
        ex = self._exchange
        return [ex.conn] if ex is not None and ex.conn.connected else []

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

    # ------------------------------------------------------------------ the rebalance

    def _advance(self, ready: Sequence[BrokerConnection]) -> None:
        """Move the rebalance on as far as the answers at hand allow: send what is
        due, take the answer of the exchange in flight if ``ready`` has it."""
        while True:
            ex = self._exchange
            if ex is None:
                if not self.rebalancing or time.monotonic() < self._retry_at:
                    return
                if not self._prepared:
                    self._prepare()
                self._send_join()
                return
            body = self._answer(ex, ready)
            if body is None:
                return
            ready = ()
            self._exchange = None
            try:
                if ex.kind == "join":
                    self._joined_answer(body)
                else:
                    self._synced_answer(body)
            except _Rejoin:
                continue

    def _prepare(self) -> None:
        """Before joining (Java's ``onJoinPrepare``): commit with auto-commit; the
        eager protocol revokes every partition, the cooperative one only those of
        topics no longer subscribed (it keeps the rest through the rebalance and
        reads them meanwhile). A member already out of its generation has lost
        its partitions instead, whatever the protocol."""
        owned = self.subscription.assigned()
        if self._joined and owned:
            self.maybe_auto_commit(force=True)
        keep: set[TopicPartition] = set()
        if self._joined and self.protocol == COOPERATIVE:
            topics = self._subscribed_topics()
            keep = {tp for tp in owned if tp.topic in topics}
        gone = owned - keep
        if gone and self.listener is not None:
            # out of the generation already (left after max_poll_interval_ms,
            # expelled): the partitions are lost, not revoked (Java onJoinPrepare)
            lost = getattr(self.listener, "on_partitions_lost", None) \
                if not self._joined else None
            (lost or self.listener.on_partitions_revoked)(gone)
        if gone:
            self._set_assignment(sorted(keep))
        if self.protocol != COOPERATIVE:
            with self._lock:        # no heartbeat from here until the new generation
                self._joined = False
        self._prepared = True

    def _set_assignment(self, tps: list[TopicPartition]) -> None:
        self.subscription.assign(tps)
        self.cluster.add_topics({tp.topic for tp in tps})

    def _join_connection(self) -> BrokerConnection:
        """The connection JoinGroup and SyncGroup go on: the coordinator's, but not
        the one heartbeats and commits use (the coordinator may hold a JoinGroup
        answer for as long as the rebalance takes)."""
        conn = self._join_conn
        if conn is None or not conn.connected:
            with self._lock:
                address = self._coordinator().address
            conn = self._join_conn = self.cluster.new_connection(address)
            conn.connect()
        return conn

    def _send(self, kind: str, api_key: int, fields: dict[str, Any]) -> None:
        """Send a JoinGroup or SyncGroup; a coordinator out of reach is tried again
        after ``retry_backoff_ms`` (by a later poll)."""
        try:
            conn = self._join_connection()
            request = conn.send(api_key, fields)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("group %s: %s not sent: %s", self.group_id, kind, exc)
            self._lost_coordinator()
            return
        self._exchange = _Exchange(kind, conn, request, time.monotonic())

    def _answer(self, ex: _Exchange, ready: Sequence[BrokerConnection]
                ) -> dict[str, Any] | None:
        """The body of the answer to ``ex`` if it is here; None (the exchange stays
        in flight, or was dropped to be sent again) otherwise."""
        limit = ex.sent + self._rebalance_wait()
        if ex.conn.buffered or any(c is ex.conn for c in ready):
            try:
                for resp in ex.conn.receive(limit):
                    if resp.request is ex.request:
                        if resp.error is not None:
                            self._exchange = None
                            raise resp.error
                        body: dict[str, Any] = resp.body
                        return body
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.debug("group %s: no %s answer: %s", self.group_id, ex.kind, exc)
                self._lost_coordinator()
            return None
        if time.monotonic() > limit:
            log.debug("group %s: no %s answer in %.0f s", self.group_id, ex.kind,
                      self._rebalance_wait())
            self._lost_coordinator()
        return None

    def _lost_coordinator(self) -> None:
        """The exchange's connection failed or the coordinator moved: find it again
        and send the JoinGroup again after ``retry_backoff_ms``."""
        self._exchange = None
        if self._join_conn is not None:
            self._join_conn.close()
            self._join_conn = None
        self._drop_coordinator()
        self._retry_at = time.monotonic() + self.config["retry_backoff_ms"] / 1000

    def _send_join(self) -> None:
        if self.metrics is not None:
            self.metrics.rebalance_started()
        topics = self._subscribed_topics()
        self.cluster.wait_for_topics(topics, self.cluster.request_timeout) if topics else None
        self._joining_topics = topics
        # The eager protocol revoked everything before this join, so owned_partitions
        # is empty, as Java sends it; what the member owned reaches the eager
        # sticky assignor through its user data, built from the last assignment
        # received (Java's StickyAssignor keeps it from onAssignment), with the
        # generation it was received in. A cooperative member still owns its
        # partitions: they are its owned_partitions.
        owned = owned_by_topic(self.subscription.assignment)
        protocols = []
        for a in self.assignors:
            user_data = a.subscription_user_data(topics, self._owned, self._owned_generation)
            protocols.append({"name": a.name, "metadata": protocol.encode_subscription({
                "topics": sorted(topics), "user_data": user_data,
                "owned_partitions": [{"topic": t, "partitions": ps}
                                     for t, ps in sorted(owned.items())],
                "generation_id": self.generation, "rack_id": self.config["client_rack"]})})
        self._send("join", ApiKey.JOIN_GROUP, {
            "group_id": self.group_id,
            "session_timeout_ms": self.config["session_timeout_ms"],
            "rebalance_timeout_ms": self.config["max_poll_interval_ms"],
            "member_id": self.member_id, "group_instance_id": self.instance_id,
            "protocol_type": "consumer", "protocols": protocols, "reason": None})

    def _rebalance_error(self, code: int, what: str) -> None:
        """The error of a JoinGroup/SyncGroup answer: the coordinator moved (found
        again), a stale member id or generation (forgotten) or a rebalance under
        way joins again (``_Rejoin``); any other error is raised."""
        if code in _COORDINATOR_GONE or code == COORDINATOR_LOAD_IN_PROGRESS:
            self._lost_coordinator()
            raise _Rejoin()
        if code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            # as Java: a stale generation keeps the member id (still valid),
            # an unknown member asks for a new one; what it owned is lost
            self._reset_generation(reset_member_id=code == UNKNOWN_MEMBER_ID)
            self._prepared = False
            raise _Rejoin()
        if code == REBALANCE_IN_PROGRESS:
            raise _Rejoin()
        cls = error_for_code(code)
        if cls is not None:
            raise cls(f"{what} failed", group=self.group_id)

    def _joined_answer(self, joined: dict[str, Any]) -> None:
        """The JoinGroup answer: a member id to join with, or this generation's
        members (to the leader, who assigns); then the SyncGroup."""
        code = joined["error_code"]
        if code == MEMBER_ID_REQUIRED:
            self.member_id = joined["member_id"]
            raise _Rejoin()
        self._rebalance_error(code, "JoinGroup")
        with self._lock:
            self.member_id = joined["member_id"]
            self.generation = joined["generation_id"]
        self.protocol_name = joined["protocol_name"]
        assignments = []
        if joined["leader"] == self.member_id:
            assignments = self._assign(joined)
        self._send("sync", ApiKey.SYNC_GROUP, {
            "group_id": self.group_id, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": self.instance_id,
            "protocol_type": "consumer", "protocol_name": self.protocol_name,
            "assignments": assignments})

    def _synced_answer(self, synced: dict[str, Any]) -> None:
        """The SyncGroup answer: this member's partitions in the new generation
        (Java's ``onJoinComplete``). Eager: all of them are new. Cooperative: the
        ones it kept are read on, those taken away are revoked (listener first)
        and the member rejoins at once, so that the follow-up rebalance can give
        them to their new owners; the listener is told only what was added."""
        self._rebalance_error(synced["error_code"], "SyncGroup")
        if self.metrics is not None:
            self.metrics.rebalance_done()
        raw = synced["assignment"]
        decoded = protocol.decode_assignment(raw) if raw else {"assigned_partitions": []}
        mine = {TopicPartition(a["topic"], p) for a in decoded["assigned_partitions"] or []
                for p in a["partitions"] or []}
        self._owned = owned_by_topic(mine)
        self._owned_generation = self.generation
        meta = self.cluster.metadata
        self._assigned_snapshot = {t: len(meta.partitions(t)) for t in self._joining_topics}
        log.info("group %s generation %d: member %s got %d partitions", self.group_id,
                 self.generation, self.member_id, len(mine))
        owned = self.subscription.assigned()
        revoked = owned - mine
        with self._lock:
            self._joined = True
            self._needs_join = bool(revoked)     # as Java: cleared on SyncGroup success
            self._last_poll = time.monotonic()   # Java resets the poll timer on joining
        self._prepared = False
        if revoked:
            # (cooperative only: an eager member owns nothing by now)
            self.maybe_auto_commit(force=True)
            if self.listener is not None:
                self.listener.on_partitions_revoked(revoked)
            log.info("group %s: %d partitions revoked, rejoining", self.group_id,
                     len(revoked))
        self._set_assignment(sorted(mine))
        self._start_heartbeat()
        if self.listener is not None:
            self.listener.on_partitions_assigned(mine - owned)

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
        if self.protocol == COOPERATIVE and not isinstance(assignor, CooperativeStickyAssignor):
            # Java's validateCooperativeAssignment (of assignors other than its own)
            held = withheld(members, result)
            if held:
                raise IllegalStateError(
                    f"group {self.group_id}: assignor {assignor.name!r} supports the "
                    "cooperative protocol but gives partitions that other members still "
                    "own to new owners in the same rebalance: "
                    + ", ".join(f"{t}[{p}]" for t, p in sorted(held)))
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
                ex = self._exchange
                if not self._joined or self._stop.is_set() or (ex is not None
                                                               and ex.kind == "join"):
                    continue     # (as Java: none while a JoinGroup is in flight)
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
        """Java's ``maybeLeaveGroup``: a dynamic member with a member id, in a
        generation or joining one, sends LeaveGroup (best effort, not retried:
        the session timeout does the rest); either way this member is out of the
        group until it rejoins."""
        with self._lock:
            if self.instance_id is None and self.member_id and (
                    self._joined or self._exchange is not None):
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
        self._exchange = None
        if self._join_conn is not None:
            self._join_conn.close()
            self._join_conn = None
