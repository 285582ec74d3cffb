"""Share groups (KIP-932): a member's side of ShareGroupHeartbeat.

:class:`ShareMembership` is what :class:`kproto.ShareConsumer` runs once it
subscribes. As Java's ``ShareMembershipManager`` and
``ShareHeartbeatRequestManager``:

- the member id is the client's own (a random UUID, kept for the consumer's
  life), joining with member epoch 0 and the subscribed topic names;
- a background thread heartbeats every ``heartbeat_interval_ms`` the
  coordinator asks for (the subscription is sent again only when it changed);
  each answer carries the member epoch and, when it changed, the assignment:
  partitions by topic id, which the consumer resolves to names through
  Metadata;
- FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: the member lost its partitions and
  joins again with epoch 0 (same member id); NOT_COORDINATOR /
  COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS: the coordinator is
  looked up again; any other error stops the heartbeats and is raised by the
  consumer's next poll;
- a member that has not polled for ``max_poll_interval_ms`` leaves (its
  records' locks are released by the broker) and joins again at its next poll;
- leaving (close, unsubscribe) is a heartbeat with epoch -1.

Share groups have no assignors, no generations, no offset commits and no
rebalance callbacks: every member of a partition reads it, the broker hands
each record to one of them.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import ErrorCode, KafkaTimeoutError, KprotoError, error_for_code
from ..net.blocking import BrokerConnection
from ..net.cluster import Cluster
from ..protocol import ApiKey

__all__ = ["ShareMembership", "LEAVE_EPOCH", "JOIN_EPOCH"]

log = logging.getLogger("kproto.group")

#: The member epoch of a join and of a leave (Java's ShareGroupHeartbeatRequest).
JOIN_EPOCH, LEAVE_EPOCH = 0, -1

_COORDINATOR_GONE = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
_FENCED = {ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID}


class ShareMembership:
    """One member of share group ``group_id`` (see the module docstring).

    The heartbeat thread talks only to the coordinator, on a :class:`Cluster`
    of its own (the consumer's is not thread-safe). The consumer reads
    :meth:`assignment` (topic ids -> partitions, with a version that changes
    with every new assignment) and calls :meth:`poll` on every poll.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.group_id: str = config["group_id"]
        self.member_id = str(uuid.uuid4())
        self.epoch = JOIN_EPOCH
        self._cluster = Cluster(config)           # the heartbeat thread's own
        self._conn: BrokerConnection | None = None
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._topics: frozenset[str] = frozenset()
        self._sent_topics: frozenset[str] | None = None    # None: send them next time
        self._interval = 5.0             # until the coordinator says (its first answer)
        self._assignment: dict[uuid.UUID, list[int]] = {}
        self._version = 0
        self._failure: KprotoError | None = None
        self._last_poll = time.monotonic()
        self._left = False                          # after max_poll_interval_ms
        self._in_group = False
        self._closed = False
        self._thread_done = True                    # no heartbeat thread running

    # ------------------------------------------------------------------ consumer side

    def subscribe(self, topics: frozenset[str]) -> None:
        """Send this subscription (joining if not in the group yet); the thread
        starts on the first call."""
        with self._lock:
            self._topics = frozenset(topics)
            self._sent_topics = None
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread_done = False
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"kproto-share-heartbeat-{self.group_id}")
            self._thread.start()
        self._wake.set()

    @property
    def topics(self) -> frozenset[str]:
        return self._topics

    def assignment(self) -> tuple[int, dict[uuid.UUID, list[int]]]:
        """(version, {topic id: partitions}) of the last assignment received."""
        with self._lock:
            return self._version, {t: list(ps) for t, ps in self._assignment.items()}

    def poll(self) -> None:
        """The application polled: restarts the ``max_poll_interval_ms`` clock,
        rejoins after a leave for not polling, raises a fatal heartbeat error."""
        with self._lock:
            self._last_poll = time.monotonic()
            if self._failure is not None:
                failure, self._failure = self._failure, None
                raise failure
            if self._left:
                log.info("share group %s: member %s joining again", self.group_id,
                         self.member_id)
                self._left = False
                self._rejoin()
                self._wake.set()

    def close(self, timeout: float | None = None) -> None:
        """Leave the group (epoch -1, best effort) and stop the heartbeats, within
        ``timeout`` seconds (default: the request timeout, for each step)."""
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        self._stop.set()
        self._wake.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(self._cluster.request_timeout + 1 if deadline is None
                   else max(0.0, deadline - time.monotonic()))
        self._thread = None
        with self._lock:
            self._closed = True
            if not self._thread_done:
                # a heartbeat still waits for its answer (its own timeout ends it): no
                # leave (the coordinator times the member out); the thread closes its
                # connection when it ends
                log.info("share group %s: member %s closed without leaving: a heartbeat "
                         "is still unanswered", self.group_id, self.member_id)
            else:
                if self._in_group:
                    self._leave("the consumer is being closed", deadline)
                self._drop_coordinator()
        self._cluster.close()

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        try:
            self._beat()
        finally:
            with self._lock:
                self._thread_done = True
                if self._closed:                # close() gave up waiting for this thread
                    self._drop_coordinator()

    def _beat(self) -> None:
        backoff = self.config["retry_backoff_ms"] / 1000
        max_poll = self.config["max_poll_interval_ms"] / 1000
        next_beat = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            wait = next_beat - now
            if self._in_group:
                wait = min(wait, self._last_poll + max_poll - now)
            if wait > 0 and self._wake.wait(wait):
                self._wake.clear()
                if self._stop.is_set():
                    return
                next_beat = time.monotonic()       # a new subscription: now
            # the state under the lock, the requests without it: a poll never waits
            # for a heartbeat's answer
            with self._lock:
                if self._stop.is_set():
                    return
                now = time.monotonic()
                if self._left:
                    next_beat = now + self._interval      # until the next poll
                    continue
                overdue = self._in_group and now - self._last_poll > max_poll
                if not overdue and now < next_beat:
                    continue
                fields = self._heartbeat_fields()
            if overdue:
                log.warning(
                    "share group %s: no poll for %.1f s (max_poll_interval_ms=%d): "
                    "leaving the group; the next poll joins again", self.group_id,
                    now - self._last_poll, self.config["max_poll_interval_ms"])
                self._leave("consumer poll timeout has expired")
                with self._lock:
                    self._left = True
                continue
            ok = self._heartbeat(fields)
            next_beat = time.monotonic() + (self._interval if ok else backoff)
            if self._failure is not None:
                return

    def _heartbeat_fields(self) -> dict[str, Any]:
        """The next ShareGroupHeartbeat (the caller holds the lock): the subscription
        only when joining or when it changed."""
        topics = self._topics
        send_topics = self.epoch == JOIN_EPOCH or self._sent_topics != topics
        return {"group_id": self.group_id, "member_id": self.member_id,
                "member_epoch": self.epoch,
                "rack_id": self.config["client_rack"] if self.epoch == JOIN_EPOCH else None,
                "subscribed_topic_names": sorted(topics) if send_topics else None}

    def _heartbeat(self, fields: dict[str, Any]) -> bool:
        """Send one ShareGroupHeartbeat (without the lock) and apply its answer (with
        it); False: retry soon."""
        try:
            body = self._request(fields)
        except KprotoError as exc:
            log.debug("share group %s: heartbeat failed: %s", self.group_id, exc)
            return False
        with self._lock:
            return self._answered(fields, body)

    def _answered(self, fields: dict[str, Any], body: dict[str, Any]) -> bool:
        code = body["error_code"]
        if code == ErrorCode.NONE:
            sent = fields["subscribed_topic_names"]
            if sent is not None and frozenset(sent) == self._topics:
                self._sent_topics = self._topics     # (a subscribe since: sent next time)
            self.epoch = body["member_epoch"]
            self._in_group = True
            if body.get("heartbeat_interval_ms", 0) > 0:
                self._interval = body["heartbeat_interval_ms"] / 1000
            given = body.get("assignment")
            if given is not None:
                self._set_assignment({t["topic_id"]: sorted(t["partitions"] or [])
                                      for t in given["topic_partitions"] or []})
            return True
        if code in _COORDINATOR_GONE:
            self._drop_coordinator()
            return False
        if code in _FENCED:
            log.info("share group %s: member %s epoch %d fenced (%s): joining again",
                     self.group_id, self.member_id, self.epoch, error_for_code(code))
            self._rejoin()
            return False
        cls = error_for_code(code)
        assert cls is not None
        self._failure = cls(body.get("error_message") or "ShareGroupHeartbeat failed",
                            group=self.group_id)
        log.error("share group %s: heartbeat failed: %s", self.group_id, self._failure)
        return False

    def _rejoin(self) -> None:
        """Out of the group: no partitions; the next heartbeat joins (epoch 0)."""
        self.epoch = JOIN_EPOCH
        self._in_group = False
        self._sent_topics = None
        self._set_assignment({})

    def _leave(self, reason: str, deadline: float | None = None) -> None:
        """Epoch -1: the coordinator takes this member's partitions away at once
        (the answer waited for until ``deadline``, default the request timeout)."""
        log.info("share group %s: member %s leaving: %s", self.group_id, self.member_id,
                 reason)
        try:
            self._request({"group_id": self.group_id, "member_id": self.member_id,
                           "member_epoch": LEAVE_EPOCH, "rack_id": None,
                           "subscribed_topic_names": None}, deadline)
        except KprotoError as exc:
            log.debug("share group %s: leave failed: %s", self.group_id, exc)
        with self._lock:
            self._rejoin()

    def _set_assignment(self, assignment: dict[uuid.UUID, list[int]]) -> None:
        if assignment != self._assignment:
            self._assignment = assignment
            self._version += 1

    # ------------------------------------------------------------------ coordinator

    def _request(self, fields: dict[str, Any], deadline: float | None = None
                 ) -> dict[str, Any]:
        """One heartbeat to the coordinator (the heartbeat thread's, or close's once
        it stopped), answered before ``deadline`` (default the request timeout)."""
        if deadline is not None and deadline <= time.monotonic():
            raise KafkaTimeoutError("no time left to send the heartbeat")
        conn = self._coordinator()
        saved = conn.timeout
        if deadline is not None:
            conn.timeout = max(0.001, min(saved, deadline - time.monotonic()))
        try:
            body: dict[str, Any] = conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, fields)
        except KprotoError:
            self._drop_coordinator()
            raise
        finally:
            conn.timeout = saved
        return body

    def _coordinator(self) -> BrokerConnection:
        if self._conn is not None and self._conn.connected:
            return self._conn
        address = self._cluster.find_coordinator(self.group_id)
        self._conn = self._cluster.new_connection(address).connect()
        return self._conn

    def _drop_coordinator(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
