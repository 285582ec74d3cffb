"""What every group protocol's member shares: the coordinator link and committed offsets.

A consumer in a group talks to the group's coordinator for two things: membership
(which partitions it reads — the protocol's own business) and offsets (commit and
fetch — the same OffsetCommit/OffsetFetch whatever the protocol, with the member's
generation or epoch attached). :class:`GroupMember` holds the shared part, as Java's
``AbstractCoordinator`` link and ``CommitRequestManager`` do: the coordinator
connection (found with FindCoordinator, forgotten on NOT_COORDINATOR or a broken
connection), retries within the request timeout, commits, fetches of committed
offsets and auto-commit. A protocol subclasses it and says who it is in a commit
(:meth:`GroupMember._commit_identity`) and what a membership error in a commit
answer means (:meth:`GroupMember._commit_error`).

:func:`kproto.groups.new_member` makes the member ``group_protocol`` names.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from ..errors import (
    ErrorCode,
    KafkaConnectionError,
    KafkaTimeoutError,
    KprotoError,
    error_for_code,
)
from ..net.blocking import BrokerConnection, Fields
from ..net.cluster import Cluster
from ..protocol import ApiKey
from ..protocol.requests import offset_fetch_fields
from ..structs import ConsumerGroupMetadata, SubscriptionState, TopicPartition
from .coordinator_metrics import CoordinatorMetrics

__all__ = ["GroupMember", "RebalanceListener"]

log = logging.getLogger("kproto.group")

_COORDINATOR_GONE = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}


class RebalanceListener(Protocol):
    """Called around rebalances (Java's ``ConsumerRebalanceListener``), on the
    thread that polls.

    ``on_partitions_revoked`` runs before partitions are taken away (commit what
    you processed there); ``on_partitions_assigned`` after new ones arrive. An
    optional ``on_partitions_lost(partitions)`` is called instead of *revoked*
    when the member was already out of the group (the partitions may be someone
    else's by now: do not commit them)."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None: ...


class GroupMember:
    """One consumer's side of ``group_id``: the coordinator link, commits and
    fetches of committed offsets, auto-commit. Subclasses add the membership."""

    def __init__(self, subscription: SubscriptionState, cluster: Cluster,
                 config: Mapping[str, Any]) -> None:
        #: the consumer's partitions and positions: assigned here, committed from here
        self.subscription = subscription
        self.cluster = cluster
        self.config = config
        self.group_id: str = config["group_id"]
        self.instance_id: str | None = config["group_instance_id"]
        self.member_id = ""
        self.topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.listener: RebalanceListener | None = None
        self._conn: BrokerConnection | None = None
        self._lock = threading.RLock()           # the coordinator connection
        self._joined = False                     # in the group: commits carry our identity
        self._subscribed = False
        self._last_commit = time.monotonic()
        #: rebalance and commit metrics (coordinator_metrics.py), with the client's registry
        self.metrics = CoordinatorMetrics(cluster.metrics, subscription) \
            if cluster.metrics is not None else None

    # ------------------------------------------------------------------ membership (subclasses)

    def subscribe(self, topics: set[str], pattern: str | None,
                  listener: RebalanceListener | None) -> None:
        """Join the group for ``topics`` (or topics matching ``pattern``, a regular
        expression as the application wrote it: each protocol reads it its way)."""
        raise NotImplementedError

    @property
    def subscribed(self) -> bool:
        """True between subscribe() and close() (group membership, not just commits)."""
        return self._subscribed

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member, for a transactional producer's offset commit (KIP-447)."""
        raise NotImplementedError

    def poll(self) -> None:
        """The membership's duties, waiting for what they wait for (a rebalance)."""

    def poll_within(self, deadline: float | None,
                    ready: Sequence[BrokerConnection] = ()) -> None:
        """Called by every poll of the consumer: the membership's duties, without
        waiting for an answer (``deadline``: when the consumer's poll ends). A
        member that waits for answers lists their connections in
        :meth:`waiting_on`; the consumer's driver waits on them beside its Fetches
        and passes those with answers as ``ready`` to the next call. The default
        is :meth:`poll` (for duties that never wait long)."""
        self.poll()

    def waiting_on(self) -> list[BrokerConnection]:
        """The connections with an answer this member waits for (none by default)."""
        return []

    @property
    def rebalancing(self) -> bool:
        """A rebalance this member runs from the polling thread is due or under way
        (the classic protocol's join; never for protocols whose broker assigns)."""
        return False

    def record_poll(self) -> None:
        """The application polled now (``max_poll_interval_ms``)."""

    def blocking_due(self) -> bool:
        """Whether :meth:`poll_within` or :meth:`maybe_auto_commit` would now make a
        blocking exchange: an auto-commit due, or a rebalance to start with nothing
        in flight yet (its commit, the listener's revocation, the JoinGroup's
        connection). The consumer's poll steps offload its duties then
        (:class:`~kproto.net.driver.Offload`: an asyncio driver runs them off its
        loop); an answer to take is offloaded by the steps themselves."""
        if self.config["enable_auto_commit"] and self._joined and time.monotonic() \
                - self._last_commit >= self.config["auto_commit_interval_ms"] / 1000:
            return True
        if not self._subscribed:
            return False
        if self._joined and self.cluster.needs_refresh:
            return True                 # the subscribed topics' metadata checked
        return self.rebalancing and not self.waiting_on()

    def _leave(self) -> None:
        """Stop heartbeats and leave the group (best effort)."""

    def _commit_identity(self) -> dict[str, Any]:
        """The OffsetCommit fields that say who commits (generation or epoch, member
        id, instance id), or CommitFailedError when this member may not commit now."""
        return {"generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None}

    def _commit_error(self, code: int) -> None:
        """React to a membership error in an OffsetCommit answer (raise to fail the
        commit); other errors are raised by the caller."""

    # ------------------------------------------------------------------ coordinator link

    def _coordinator(self) -> BrokerConnection:
        with self._lock:
            if self._conn is not None and self._conn.connected:
                return self._conn
            self._conn = None
            address = self.cluster.find_coordinator(self.group_id)
            conn = self.cluster.new_connection(address)
            conn.connect()
            self._conn = conn
            return conn

    def _request(self, api_key: int, fields: Fields, *, timeout: float | None = None
                 ) -> dict[str, Any]:
        """A request to the coordinator, answered within ``timeout`` (default the
        request timeout); a connection error or a NOT_COORDINATOR answer forgets
        the coordinator (found again next time)."""
        with self._lock:
            conn = self._coordinator()
            saved = conn.timeout
            if timeout is not None:
                conn.timeout = timeout
            try:
                body = conn.request(api_key, fields)
            except (KafkaConnectionError, KafkaTimeoutError):
                self._drop_coordinator()
                raise
            finally:
                conn.timeout = saved
            if body.get("error_code") in _COORDINATOR_GONE:
                self._drop_coordinator()
            return body

    def _drop_coordinator(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._conn = None

    def _retry(self, fn: Any, what: str) -> Any:
        """Run ``fn`` until it stops raising retriable errors (coordinator moves,
        loading) or the request timeout passes."""
        return self.cluster.call(fn, what, timeout=max(self.cluster.request_timeout,
                                                       self.config["session_timeout_ms"] / 1000))

    # ------------------------------------------------------------------ offsets

    def commit(self, offsets: Mapping[TopicPartition, int], *, retry: bool = True) -> None:
        """OffsetCommit ``offsets`` (the next offset to read, per Kafka's convention),
        retrying retriable errors until the request timeout (one attempt if not
        ``retry``: auto-commit tries again at its next interval instead)."""
        if not offsets:
            return
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, off in offsets.items():
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": off,
                "committed_leader_epoch": -1, "commit_timestamp": -1,
                "committed_metadata": ""})

        def attempt() -> None:
            with self._lock:          # the generation the answer is checked against
                body = self._request(ApiKey.OFFSET_COMMIT, {
                    "group_id": self.group_id, **self._commit_identity(),
                    "retention_time_ms": -1,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
                for t in body["topics"]:
                    for p in t["partitions"]:
                        code = p["error_code"]
                        self._commit_error(code)
                        if code in _COORDINATOR_GONE:
                            self._drop_coordinator()
                        cls = error_for_code(code)
                        if cls is not None:
                            raise cls("OffsetCommit failed", group=self.group_id,
                                      topic=t["name"], partition=p["partition_index"])

        started = time.monotonic()
        self._retry(attempt, "OffsetCommit") if retry else attempt()
        self._last_commit = time.monotonic()
        if self.metrics is not None:
            self.metrics.commit_done(started)

    def fetch_committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """OffsetFetch: the committed offset of each partition (None when none)."""
        wanted = list(tps)
        topics: dict[str, list[int]] = {}
        for tp in wanted:
            topics.setdefault(tp.topic, []).append(tp.partition)

        def attempt() -> dict[TopicPartition, int | None]:
            body = self._request(ApiKey.OFFSET_FETCH, offset_fetch_fields(self.group_id, [
                {"name": t, "partition_indexes": ps} for t, ps in topics.items()]))
            if "groups" in body and body["groups"]:
                group = body["groups"][0]
                code, answer = group["error_code"], group["topics"]
            else:
                code, answer = body.get("error_code", 0), body["topics"]
            if code in _COORDINATOR_GONE:
                self._drop_coordinator()
            cls = error_for_code(code)
            if cls is not None:
                raise cls("OffsetFetch failed", group=self.group_id)
            out: dict[TopicPartition, int | None] = {tp: None for tp in wanted}
            for t in answer:
                for p in t["partitions"]:
                    cls = error_for_code(p["error_code"])
                    if cls is not None:
                        raise cls("OffsetFetch failed", group=self.group_id, topic=t["name"],
                                  partition=p["partition_index"])
                    off = p["committed_offset"]
                    out[TopicPartition(t["name"], p["partition_index"])] = \
                        off if off >= 0 else None
            return out

        result: dict[TopicPartition, int | None] = self._retry(attempt, "OffsetFetch")
        return result

    def maybe_auto_commit(self, *, force: bool = False) -> None:
        """With ``enable_auto_commit``: commit the positions every
        ``auto_commit_interval_ms`` (and before a rebalance or close).

        The consumer calls this at the start of each poll, so a commit covers the
        records earlier polls returned, never those this poll is about to return
        (at-least-once, as Java's consumer). A failed commit is logged, not
        raised, and tried again after an interval: it must not cost the poll its
        records (Java commits asynchronously and logs the failure).
        """
        if not self.config["enable_auto_commit"] or not self._joined:
            return
        if not force and time.monotonic() - self._last_commit < \
                self.config["auto_commit_interval_ms"] / 1000:
            return
        positions = self.subscription.committable()
        try:
            self.commit(positions, retry=force)
        except KprotoError as exc:
            self._last_commit = time.monotonic()
            log.warning("group %s: auto-commit failed (tried again in %d ms): %s",
                        self.group_id, self.config["auto_commit_interval_ms"], exc)

    # ------------------------------------------------------------------ leaving

    def close(self) -> None:
        """Commit (with auto-commit), stop heartbeats and leave the group. A commit
        that fails here is logged, not raised (as Java's consumer does): closing
        must not fail because the coordinator is gone."""
        try:
            if self._joined:
                self.maybe_auto_commit(force=True)
        except KprotoError as exc:
            log.warning("group %s: commit on close failed: %s", self.group_id, exc)
        finally:
            self._leave()
            self._joined = False
            self._subscribed = False
            self._drop_coordinator()

