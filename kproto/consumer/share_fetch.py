"""The share consumer's ShareFetch sessions (KIP-932): one per leader broker.

:class:`ShareSessions` is to :class:`~kproto.consumer.share.ShareConsumer` what
:class:`~kproto.consumer.fetches.Fetches` is to the consumer: a request in
flight per leader, each on a connection of its own, answers queued for the
next poll. As Java's ``ShareSessionHandler`` / ``ShareConsumeRequestManager``:

- a session per broker: the first ShareFetch (epoch 0) names every partition
  wanted from that broker and opens it; each answer moves the epoch up by one;
  later requests name only partitions added and list the ones to drop as
  forgotten; epoch -1 (on close) closes it and releases what it still holds;
- acknowledgements ride on the next ShareFetch to the partition's leader;
  :meth:`ShareSessions.acknowledge` sends them alone (ShareAcknowledge) for
  ``commit_sync``/``commit_async`` and on close; an epoch-0 request carries
  none (the broker refuses them: the records were released with the old
  session), so they fail with the session's error;
- INVALID_SHARE_SESSION_EPOCH / SHARE_SESSION_NOT_FOUND (or a broken
  connection): the session is opened again (epoch 0) by the next request;
- partition errors that mean a stale leader: metadata refresh, the partition
  goes to its new leader's session;
- one request in flight per session (each carries the epoch the answer to
  the one before set).

Each answer's records are decoded by the one decode path
(:func:`~kproto.consumer.fetcher.decode_partition`) and kept only where the
answer's AcquiredRecords name them: a broker sends whole record batches,
and records of them that other members acquired are not this consumer's.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..errors import (
    ErrorCode,
    KafkaConnectionError,
    KprotoError,
    ProtocolError,
    ShareSessionNotFoundError,
    error_for_code,
)
from ..net.blocking import BrokerConnection
from ..net.cluster import Cluster
from ..net.connection import Request, Response
from ..net.driver import Steps, Wait
from ..protocol import ApiKey
from ..structs import TopicPartition, topic_id_of
from .fetcher import decode_partition
from .share_acks import InFlight, encode_batches
from .share_buffer import ShareBuffer, ShareCompletedFetch
from .share_metrics import ShareFetchMetrics

__all__ = ["ShareSessions", "AckResult"]

log = logging.getLogger("kproto.consumer")

_SESSION_LOST = {ErrorCode.INVALID_SHARE_SESSION_EPOCH, ErrorCode.SHARE_SESSION_NOT_FOUND}
FINAL_EPOCH = -1
#: More offsets than this acquired in one answer's partition is a lie, not a fetch (a
#: broker acquires whole batches of at most max_poll_records records and some more)
MAX_ACQUIRED_OFFSETS = 1 << 22


class AckResult(NamedTuple):
    """Acknowledgements the broker answered: the offsets of a partition (int64, as
    sent: a set is made only for a commit callback), and the error that failed them
    (None: done)."""

    tp: TopicPartition
    offsets: np.ndarray
    error: BaseException | None


class _Part(NamedTuple):
    """What :func:`decode_partition` reads of an answer's partition."""

    records: Any
    aborted_transactions: Any = None
    high_watermark: int = -1


@dataclass(eq=False)
class _Session:
    node: int
    epoch: int = 0
    partitions: set[TopicPartition] = field(default_factory=set)   # as the broker has it
    conn: BrokerConnection | None = None
    request: Request | None = None
    sent: float = 0.0
    kind: int = ApiKey.SHARE_FETCH
    acks: dict[TopicPartition, np.ndarray] = field(default_factory=dict)  # in that request
    names: dict[uuid.UUID, str] = field(default_factory=dict)


class ShareSessions:
    """The share sessions of one consumer (its thread only; see the module docstring).

    ``member_id`` gives the member id the group membership chose.
    """

    def __init__(self, cluster: Cluster, config: Mapping[str, Any], buffer: ShareBuffer,
                 member_id: Callable[[], str]) -> None:
        self._cluster = cluster
        self.config = config
        self._buffer = buffer
        self._member_id = member_id
        self.group_id: str = config["group_id"]
        self._sessions: dict[int, _Session] = {}
        #: acknowledgements taken, waiting for a request to their leader
        self._pending: dict[TopicPartition, list[tuple[np.ndarray, np.ndarray]]] = {}
        #: answered acknowledgements, for the commit callback and commit_sync
        self.results: list[AckResult] = []
        self.lock_timeout_ms = -1          # the last AcquisitionLockTimeoutMs answered
        #: what this consumer acquired and has not acknowledged (sent) yet, per partition
        self.inflight: dict[TopicPartition, list[InFlight]] = {}
        #: the share fetch metrics (per answer and request), or None
        self.metrics: ShareFetchMetrics | None = None

    # ------------------------------------------------------------------ acknowledgements

    def add_acks(self, tp: TopicPartition, offsets: np.ndarray, types: np.ndarray) -> None:
        """Queue acknowledgements of ``tp`` for the next request to its leader."""
        if len(offsets):
            self._pending.setdefault(tp, []).append((offsets, types))

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def renew_supported(self) -> bool:
        """Whether the brokers' ShareFetch/ShareAcknowledge take RENEW (v2+)."""
        for s in self._sessions.values():
            if s.conn is not None and s.conn.connected:
                return min(s.conn.versions.get(ApiKey.SHARE_FETCH, 0),
                           s.conn.versions.get(ApiKey.SHARE_ACKNOWLEDGE, 0)) >= 2
        return False

    def _take_acks(self, tps: set[TopicPartition] | None
                   ) -> dict[TopicPartition, tuple[np.ndarray, np.ndarray]]:
        """The pending acknowledgements of ``tps`` (all when None), one sorted array
        pair per partition (a later acknowledgement of an offset wins)."""
        out = {}
        for tp in [t for t in self._pending if tps is None or t in tps]:
            parts = self._pending.pop(tp)
            offsets = np.concatenate([o for o, _ in parts])
            types = np.concatenate([t for _, t in parts])
            # stable sort, keep the last of each offset
            order = np.argsort(offsets, kind="stable")
            offsets, types = offsets[order], types[order]
            last = np.ones(len(offsets), bool)
            last[:-1] = offsets[1:] != offsets[:-1]
            out[tp] = (offsets[last], types[last])
        return out

    # ------------------------------------------------------------------ sending

    def send(self, assigned: set[TopicPartition], buffered: set[TopicPartition],
             deadline: float | None = None) -> None:
        """A ShareFetch to every leader of ``assigned`` partitions with no request in
        flight, unless all its partitions have records ``buffered`` (not handed out
        yet), carrying the acknowledgements for it; acknowledgements for a broker
        not fetched from go alone (ShareAcknowledge)."""
        if self._cluster.needs_refresh and (assigned or self._pending):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                self._cluster.refresh_metadata(timeout=left)
            except KprotoError as exc:
                log.debug("metadata refresh failed: %s", exc)
        by_node, orphans = self._cluster.leaders(sorted(assigned))
        if orphans:
            self._cluster.mark_stale()
        ack_nodes, _ = self._cluster.leaders(sorted(self._pending))
        for node in sorted(set(by_node) | set(ack_nodes) | set(self._sessions)):
            session = self._session(node)
            if session.request is not None:
                continue
            tps = {TopicPartition(*tp) for tp in by_node.get(node, ())}
            if tps and not tps <= buffered:
                self._send_fetch(session, tps, deadline)
            elif session.epoch > 0:
                self._send_acks(session, session.epoch, deadline)

    def _send_fetch(self, session: _Session, tps: set[TopicPartition],
                    deadline: float | None) -> None:
        c = self.config
        acks = {} if session.epoch == 0 else self._take_acks(
            tps | {tp for tp in self._pending if tp in session.partitions})
        if session.epoch == 0:
            self._fail_acks_of(session, ShareSessionNotFoundError(
                "the share session was closed; the broker released the records",
                node=session.node, group=self.group_id))
            session.partitions = set()
            named = set(tps)
            forgotten: set[TopicPartition] = set()
        else:
            named = (tps - session.partitions) | set(acks)
            forgotten = session.partitions - tps - set(acks)
        meta = self._cluster.metadata
        fields = {
            "group_id": self.group_id, "member_id": self._member_id(),
            "share_session_epoch": session.epoch, "max_wait_ms": c["fetch_max_wait_ms"],
            "min_bytes": c["fetch_min_bytes"], "max_bytes": c["fetch_max_bytes"],
            "max_records": c["max_poll_records"], "batch_size": c["max_poll_records"],
            "topics": _topics(meta, named, acks, with_acks=True),
            "forgotten_topics_data": _topics(meta, forgotten, {}, with_acks=False)}
        self._issue(session, ApiKey.SHARE_FETCH, fields, acks, named, deadline)
        session.partitions = (session.partitions | tps) - forgotten

    def _send_acks(self, session: _Session, epoch: int, deadline: float | None) -> None:
        acks = self._take_acks({tp for tp in self._pending
                                if self._cluster.metadata.leader(*tp) == session.node})
        if not acks and epoch != FINAL_EPOCH:
            return
        fields = {"group_id": self.group_id, "member_id": self._member_id(),
                  "share_session_epoch": epoch,     # (v2: tells the broker renews are in)
                  "is_renew_ack": any(bool((t == 4).any()) for _, t in acks.values()),
                  "topics": _topics(self._cluster.metadata, set(acks), acks, with_acks=True)}
        self._issue(session, ApiKey.SHARE_ACKNOWLEDGE, fields, acks, set(), deadline)

    def _issue(self, session: _Session, api: int, fields: dict[str, Any],
               acks: dict[TopicPartition, tuple[np.ndarray, np.ndarray]],
               named: set[TopicPartition], deadline: float | None) -> None:
        session.names = {topic_id_of(self._cluster.metadata, tp.topic): tp.topic
                         for tp in session.partitions | set(acks) | named}
        session.acks = {tp: o for tp, (o, t) in acks.items()}
        try:
            conn = self._connection(session, deadline)
            session.request = conn.send(api, fields)
        except KprotoError as exc:
            log.debug("share request to broker %d failed: %s", session.node, exc)
            self._lost(session, exc)
            return
        session.kind = api
        session.sent = time.monotonic()
        if self.metrics is not None and acks:
            self.metrics.acknowledgements_sent(sum(len(o) for o, _ in acks.values()))

    # ------------------------------------------------------------------ waiting

    def wait(self, deadline: float) -> Wait:
        """What a poll waits for: an answer from any session with a request in flight."""
        conns = [s.conn for s in self._sessions.values()
                 if s.request is not None and s.conn is not None and s.conn.connected]
        if not conns:
            return Wait((), min(deadline, time.monotonic() + 0.05))
        return Wait(conns, deadline)

    @property
    def in_flight(self) -> bool:
        return any(s.request is not None for s in self._sessions.values())

    def take(self, ready: list[BrokerConnection]) -> None:
        """Handle the answers of the ``ready`` connections; give up on requests
        unanswered for longer than the request timeout allows."""
        limit = self._cluster.request_timeout + self.config["fetch_max_wait_ms"] / 1000
        ready_ids = {id(c) for c in ready}
        now = time.monotonic()
        for session in list(self._sessions.values()):
            if session.request is None or session.conn is None:
                continue
            if id(session.conn) in ready_ids:
                try:
                    responses = session.conn.receive(session.sent + limit)
                except KprotoError as exc:
                    self._lost(session, exc)
                    continue
                mine = [r for r in responses if r.request is session.request]
                if mine:
                    self._answered(session, mine[-1])
            elif now - session.sent > limit:
                session.conn.close()
                self._lost(session, KafkaConnectionError(
                    f"broker {session.node} did not answer a share request within "
                    f"{limit:.1f} s"))

    def _answered(self, session: _Session, resp: Response) -> None:
        kind, acks = session.kind, session.acks
        session.request, session.acks = None, {}
        if resp.error is not None:
            self._lost(session, resp.error, acks)
            return
        body = resp.body
        code = body["error_code"]
        if code:
            cls = error_for_code(code)
            assert cls is not None
            exc = cls(body.get("error_message") or "share request failed",
                      node=session.node, group=self.group_id)
            if code in _SESSION_LOST or cls.retriable or cls.invalid_metadata:
                log.info("share session on broker %d: %s; opening it again", session.node, exc)
                self._cluster.mark_stale()
                self._reset(session)
                self._report(acks, exc)
                return
            self._report(acks, exc)
            self._buffer.add([ShareCompletedFetch(None, error=exc)])
            return
        if session.epoch == FINAL_EPOCH:
            session.epoch = 0
        else:
            session.epoch += 1
        if kind == ApiKey.SHARE_FETCH:
            self.lock_timeout_ms = body.get("acquisition_lock_timeout_ms", -1)
        answered: set[TopicPartition] = set()
        done = []
        for t in body.get("responses") or []:
            topic = session.names.get(t["topic_id"])
            for p in t["partitions"]:
                if topic is None:
                    self._cluster.mark_stale()
                    continue
                tp = TopicPartition(topic, p["partition_index"])
                answered.add(tp)
                ack_code = p.get("acknowledge_error_code", 0) if kind == ApiKey.SHARE_FETCH \
                    else p.get("error_code", 0)
                if tp in acks:
                    self._report({tp: acks[tp]}, _error(ack_code, tp, "acknowledgement failed"))
                if kind != ApiKey.SHARE_FETCH:
                    if ack_code and _stale_leader(ack_code):
                        self._cluster.mark_stale()
                    continue
                completed = self._partition(session, tp, p)
                if completed is not None:
                    done.append(completed)
        missing = {tp: o for tp, o in acks.items() if tp not in answered}
        if missing:
            self._report(missing, KafkaConnectionError(
                f"broker {session.node} did not answer these acknowledgements"))
        self._buffer.add(done)
        if self.metrics is not None and kind == ApiKey.SHARE_FETCH:
            now = time.monotonic()
            self.metrics.fetched(now - session.sent, body.get("throttle_time_ms", 0),
                                 sum(len(p.get("records") or b"")
                                     for t in body.get("responses") or [] for p in t["partitions"]),
                                 sum(len(f) for f in done), now)

    def _partition(self, session: _Session, tp: TopicPartition, p: dict[str, Any]
                   ) -> ShareCompletedFetch | None:
        code = p.get("error_code", 0)
        if code:
            if _stale_leader(code):
                self._cluster.mark_stale()
                session.partitions.discard(tp)      # forgotten here; fetched from the new one
                return None
            return ShareCompletedFetch(tp, error=_error(code, tp, "ShareFetch failed"))
        ranges = p.get("acquired_records") or []
        if not ranges:
            return None
        lie = _check_acquired(ranges)
        if lie:                 # nothing acknowledged: the lock (or the session's close) ends
            return ShareCompletedFetch(tp, error=ProtocolError(
                f"ShareFetch answer for {tp.topic}[{tp.partition}] from broker "
                f"{session.node}: {lie}"))
        first = min(r["first_offset"] for r in ranges)
        try:
            cols = decode_partition(tp, _Part(p.get("records")), first, read_committed=False,
                                    check_crc=self.config["check_crcs"],
                                    max_decompressed=self.config["max_decompressed_bytes"])
        except KprotoError as exc:
            # nothing of it is handed out: released, so the broker delivers it again
            inflight, _ = InFlight.acquired(ranges, np.zeros(0, np.int64), first)
            self.add_acks(tp, *inflight.take())
            return ShareCompletedFetch(tp, error=exc)
        decoded_until = cols.next_offset if p.get("records") is not None else first
        held = [f.offsets[~f.sent] for f in self.inflight.get(tp, ())]
        inflight, mine = InFlight.acquired(ranges, cols.offset, decoded_until,
                                           np.concatenate(held) if held else None)
        if len(inflight):
            self.inflight.setdefault(tp, []).append(inflight)
        return ShareCompletedFetch(tp, cols, np.flatnonzero(mine), inflight)

    # ------------------------------------------------------------------ failures

    def _lost(self, session: _Session, exc: BaseException,
              acks: dict[TopicPartition, np.ndarray] | None = None) -> None:
        """The request's connection broke: the broker closed the session with it."""
        if acks is None:
            acks, session.acks = session.acks, {}
        session.request = None
        self._cluster.mark_stale()
        self._reset(session)
        self._report(acks, exc)

    def _reset(self, session: _Session) -> None:
        session.epoch = 0
        session.partitions = set()

    def _fail_acks_of(self, session: _Session, exc: BaseException) -> None:
        """Acknowledgements for a broker whose session is gone cannot be sent."""
        gone = {tp for tp in self._pending
                if self._cluster.metadata.leader(*tp) == session.node}
        if gone:
            self._report({tp: o for tp, (o, _) in self._take_acks(gone).items()}, exc)

    def _report(self, acks: Mapping[TopicPartition, np.ndarray],
                error: BaseException | None) -> None:
        for tp, offsets in acks.items():
            self.results.append(AckResult(tp, offsets, error))
        if error is not None and self.metrics is not None:
            self.metrics.acknowledgements_failed(sum(len(o) for o in acks.values()))

    # ------------------------------------------------------------------ connections

    def _session(self, node: int) -> _Session:
        s = self._sessions.get(node)
        if s is None:
            s = self._sessions[node] = _Session(node)
        return s

    def _connection(self, session: _Session, deadline: float | None) -> BrokerConnection:
        """The session's connection, connected (by ``deadline``, if given)."""
        conn = session.conn
        if conn is None or not conn.connected:
            if conn is not None:
                self._reset(session)              # a new connection: a new session
            broker = self._cluster.metadata.brokers.get(session.node)
            if broker is None:
                raise KafkaConnectionError(f"broker {session.node} is not in the metadata")
            conn = session.conn = self._cluster.new_connection(
                broker.address, timeout=self._cluster.request_timeout
                + self.config["fetch_max_wait_ms"] / 1000, node_id=session.node)
        with conn.bounded(deadline):
            return conn.connect()

    # ------------------------------------------------------------------ commit and close

    def acknowledge(self, deadline: float, *, final: bool = False) -> Steps[None]:
        """Steps: the pending acknowledgements sent alone (ShareAcknowledge) and
        answered, waiting for requests in flight first; with ``final``, every
        session closed (epoch -1). Returns when all are answered or at ``deadline``."""
        while time.monotonic() < deadline:
            for session in self._sessions.values():
                if session.request is not None:
                    continue
                has_acks = any(self._cluster.metadata.leader(*tp) == session.node
                               for tp in self._pending)
                if final and session.epoch > 0:
                    self._send_acks(session, FINAL_EPOCH, deadline)
                    if session.request is not None:
                        session.epoch = FINAL_EPOCH
                elif has_acks and session.epoch > 0:
                    self._send_acks(session, session.epoch, deadline)
                elif has_acks:
                    self._fail_acks_of(session, ShareSessionNotFoundError(
                        "no share session with this broker; the broker released the records",
                        node=session.node, group=self.group_id))
            orphans = [tp for tp in self._pending
                       if self._cluster.metadata.leader(*tp) not in self._sessions]
            if orphans:
                self._report({tp: o for tp, (o, _) in self._take_acks(set(orphans)).items()},
                             ShareSessionNotFoundError("no share session with the leader",
                                                       group=self.group_id))
            if not self.in_flight and not self._pending:
                return
            self.take((yield self.wait(deadline)))
        # out of time: what is still unanswered failed
        for session in self._sessions.values():
            if session.request is not None and session.conn is not None:
                session.conn.close()
                self._lost(session, KafkaConnectionError(
                    f"broker {session.node} did not answer before the timeout"))
        if self._pending:
            self._report({tp: o for tp, (o, _) in self._take_acks(None).items()},
                         KafkaConnectionError("acknowledgements not sent before the timeout"))

    def close(self) -> None:
        for s in self._sessions.values():
            if s.conn is not None:
                s.conn.close()
        self._sessions.clear()


def _check_acquired(ranges: list[dict[str, Any]]) -> str | None:
    """What is wrong with an answer's AcquiredRecords (None: nothing): ranges no
    broker sends, which would otherwise become a NumPy MemoryError or records
    handed out with a delivery count below 1."""
    total = 0
    for r in ranges:
        first, last, count = r["first_offset"], r["last_offset"], r["delivery_count"]
        if first < 0 or last < first:
            return f"acquired records range {first}-{last} is not a range of offsets"
        if count < 1:
            return f"acquired records {first}-{last} have delivery count {count}"
        total += last - first + 1
    if total > MAX_ACQUIRED_OFFSETS:
        return f"{total} offsets acquired at once (more than {MAX_ACQUIRED_OFFSETS})"
    return None


def _stale_leader(code: int) -> bool:
    cls = error_for_code(code)
    return cls is not None and (cls.invalid_metadata or code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID))


def _error(code: int, tp: TopicPartition, what: str) -> BaseException | None:
    cls = error_for_code(code)
    return None if cls is None else cls(what, topic=tp.topic, partition=tp.partition)


def _topics(meta: Any, tps: set[TopicPartition],
            acks: Mapping[TopicPartition, tuple[np.ndarray, np.ndarray]], *,
            with_acks: bool) -> list[dict[str, Any]]:
    """``tps`` grouped by topic id, with their acknowledgement batches."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = []
    for topic, parts in by_topic.items():
        entries: list[Any] = parts
        if with_acks:
            entries = [{"partition_index": p, "acknowledgement_batches": encode_batches(
                *acks[TopicPartition(topic, p)]) if TopicPartition(topic, p) in acks else []}
                for p in parts]
        out.append({"topic_id": topic_id_of(meta, topic), "partitions": entries})
    return out
