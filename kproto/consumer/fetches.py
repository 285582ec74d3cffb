"""The consumer's Fetches: one long-poll Fetch in flight per leader, each on a
connection of its own, answers decoded into the fetch buffer.

:class:`Fetches` is what :meth:`Consumer.poll <kproto.consumer.Consumer.poll>`
drives: :meth:`Fetches.send` sends a Fetch to every leader with none in flight,
:meth:`Fetches.wait` says what to wait for (a :class:`~kproto.net.driver.Wait`,
given to the consumer's driver), :meth:`Fetches.take` queues the answers of the
connections that became readable. The requests and the outcome of each
partition are :mod:`kproto.consumer.fetcher`'s (shared with the bounded reader);
the records wait in :mod:`kproto.consumer.fetch_buffer` until a poll hands them
out. Answers from a replica the leader prefers (KIP-392) are followed here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import KafkaConnectionError, KprotoError, OffsetOutOfRangeError
from ..net.blocking import BrokerConnection
from ..net.cluster import Cluster
from ..net.connection import Request, Response
from ..net.driver import Wait
from ..protocol import ApiKey
from ..structs import EARLIEST, LATEST, SubscriptionState, TopicPartition
from .fetch_buffer import CompletedFetch, FetchBuffer
from .fetcher import (
    OUT_OF_RANGE,
    RECORDS,
    RETRY,
    FetchRequest,
    answer_partitions,
    decode_partition,
    fetch_request,
    outcome,
    watermark,
)

if TYPE_CHECKING:
    from .fetch_metrics import FetchMetrics

__all__ = ["Fetches"]

log = logging.getLogger("kproto.consumer")


class _Fetch(NamedTuple):
    request: Request
    asked: FetchRequest                     # fetch offsets, topic ids named
    sent: float
    node: int                               # the broker it went to

    @property
    def offsets(self) -> dict[TopicPartition, int]:
        return self.asked.offsets


class Fetches:
    """The Fetches of one consumer (not thread-safe: the consumer's thread only).

    ``reset(partitions, cause)`` moves positions per ``auto_offset_reset`` (or
    raises ``cause``); ``list_offsets`` is the consumer's ListOffsets. Both are
    the consumer's, which owns the positions (``subs``) and the ``buffer``.
    """

    def __init__(self, cluster: Cluster, config: Mapping[str, Any], subs: SubscriptionState,
                 buffer: FetchBuffer,
                 reset: Callable[[list[TopicPartition], BaseException | None], None],
                 list_offsets: Callable[[Mapping[TopicPartition, int]],
                                        dict[TopicPartition, tuple[int, int]]]) -> None:
        self._cluster = cluster
        self.config = config
        self._subs = subs
        self._buffer = buffer
        self._reset = reset
        self._list_offsets = list_offsets
        self._read_committed = config["isolation_level"] == "read_committed"
        #: broker id -> the Fetch in flight to it
        self.in_flight: dict[int, _Fetch] = {}
        #: the consumer's fetch metrics (per answer and partition), or None
        self.metrics: FetchMetrics | None = None
        self._conns: dict[int, BrokerConnection] = {}
        # KIP-392: the replica a leader told us to fetch a partition from, until when
        self._read_replicas: dict[TopicPartition, tuple[int, float]] = {}
        # connect_due(): the leaders fetched from, for (metadata, assignment, paused)
        self._leaders_of: tuple[object, ...] | None = None
        self._leaders: set[int] = set()

    def close(self) -> None:
        """Close the Fetch connections (what was in flight is dropped)."""
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        self.in_flight.clear()

    @property
    def connections(self) -> list[BrokerConnection]:
        """The Fetch connections open now (one per broker fetched from)."""
        return list(self._conns.values())

    def send(self, deadline: float | None = None) -> None:
        """Send a Fetch to every leader that has none in flight (refreshing stale
        metadata first, for at most until ``deadline``)."""
        # Not a partition already in a Fetch (its next offset is not known yet). A
        # partition whose fetched records wait in the buffer is fetched once ahead,
        # from where they end (librdkafka prefetches so too; Java waits until they
        # are handed out): a Fetch of only the partitions that were drained would be
        # held by the broker for fetch_max_wait_ms when they are at the log end, with
        # the others' next records behind it.
        fetching: set[TopicPartition] = set()
        for fetch in self.in_flight.values():
            fetching.update(fetch.offsets)
        buffered = self._buffer.fetch_offsets(self._subs.positions)
        offsets: dict[TopicPartition, int] = {}
        for tp in self._subs.assignment:
            if tp in self._subs.paused or tp in fetching:
                continue
            offset, waiting = buffered.get(tp, (self._subs.positions.get(tp), 0))
            if offset is not None and waiting <= 1:
                offsets[tp] = offset
        fetchable = list(offsets)
        if not fetchable:
            return
        if self._cluster.needs_refresh:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                self._cluster.refresh_metadata(timeout=left)
            except KprotoError as exc:
                log.debug("metadata refresh failed: %s", exc)
        by_node, orphans = self._cluster.leaders(fetchable)
        if orphans:
            self._cluster.mark_stale()
        if self._read_replicas:
            by_node = self._route_to_read_replicas(by_node)
        for node, tps in by_node.items():
            if node in self.in_flight:
                continue
            asked = self._request({TopicPartition(*tp): offsets[TopicPartition(*tp)]
                                   for tp in tps})
            try:
                conn = self._connection(node, deadline)
                req = conn.send(ApiKey.FETCH, asked.fields, raw=True)
            except KprotoError as exc:
                log.debug("fetch to broker %d failed: %s", node, exc)
                self._failed(node, asked.offsets)
                continue
            self.in_flight[node] = _Fetch(req, asked, time.monotonic(), node)

    def connect_due(self) -> bool:
        """Whether :meth:`send` would now make a blocking exchange: a metadata
        refresh, or a connection to open to a leader it fetches from (the poll
        steps offload it then: net/driver.py ``Offload``)."""
        if self._cluster.needs_refresh:
            return True
        subs, meta = self._subs, self._cluster.metadata
        seen = self._leaders_of
        if seen is None or seen[0] is not meta or seen[1] is not subs.assignment \
                or seen[2] != len(subs.paused):
            self._leaders_of = (meta, subs.assignment, len(subs.paused))
            self._leaders = {meta.leader(*tp) for tp in subs.assignment
                             if tp not in subs.paused}
        conns = self._conns
        return any(node >= 0 and (node not in conns or not conns[node].connected)
                   for node in self._leaders)

    def wait(self, deadline: float) -> Wait:
        """What a poll waits for: an answer on a connection with a Fetch in flight,
        until ``deadline`` (with none in flight, a short pause before the next try)."""
        conns = []
        for node in list(self.in_flight):
            try:
                conns.append(self._connection(node, deadline))
            except KprotoError:
                self.in_flight.pop(node, None)
        if not conns:
            return Wait((), min(deadline, time.monotonic() + 0.05))
        return Wait(conns, deadline)

    def take(self, ready: list[BrokerConnection], wait: Wait) -> None:
        """Queue the Fetch answers of the ``ready`` connections (answers already
        there are all taken) in the fetch buffer; give up on Fetches unanswered
        for longer than the request timeout allows."""
        wait_limit = self._cluster.request_timeout + self.config["fetch_max_wait_ms"] / 1000
        node_of = {id(conn): node for node, conn in self._conns.items()}
        for conn in ready:
            node = node_of.get(id(conn), -1)
            fetch = self.in_flight.get(node)
            if fetch is None:
                continue                # not a connection of this wait's Fetches
            try:
                responses = conn.receive(fetch.sent + wait_limit)
            except KprotoError as exc:
                log.debug("fetch from broker %d failed: %s", node, exc)
                self.in_flight.pop(node, None)
                self._failed(node, fetch.offsets)
                continue
            if not responses:
                continue
            del self.in_flight[node]
            done = self._handle(responses[-1], fetch)
            self._buffer.add(done)
            if self.metrics is not None:
                now = time.monotonic()
                self.metrics.fetched(now - fetch.sent, len(responses[-1].body),
                                     sum(len(f) for f in done), now)
        now = time.monotonic()
        waited = {id(conn) for conn in wait.conns}
        for node, fetch in list(self.in_flight.items()):
            if now - fetch.sent > wait_limit:
                timed_out = self._conns.get(node)
                if timed_out is not None and id(timed_out) in waited:
                    timed_out.close()
                del self.in_flight[node]
                self._failed(node, fetch.offsets)

    def _connection(self, node: int, deadline: float | None) -> BrokerConnection:
        """The connection Fetches to ``node`` go on: separate from the cluster's, so
        a long-polling Fetch never delays a metadata, offset or commit request
        (connected by ``deadline``, if given: a poll keeps its timeout)."""
        conn = self._conns.get(node)
        if conn is None or not conn.connected:
            broker = self._cluster.metadata.brokers.get(node)
            if broker is None:
                raise KafkaConnectionError(f"broker {node} is not in the metadata")
            conn = self._conns[node] = self._cluster.new_connection(
                broker.address, timeout=self._cluster.request_timeout
                + self.config["fetch_max_wait_ms"] / 1000, node_id=node)
        with conn.bounded(deadline):
            return conn.connect()

    def _request(self, offsets: dict[TopicPartition, int]) -> FetchRequest:
        """A Fetch of each partition from its offset, with the consumer's settings."""
        c = self.config
        return fetch_request(
            offsets,
            self._cluster.metadata, partition_bytes=c["max_partition_fetch_bytes"],
            max_wait_ms=c["fetch_max_wait_ms"], min_bytes=c["fetch_min_bytes"],
            max_bytes=c["fetch_max_bytes"], read_committed=self._read_committed,
            rack_id=c["client_rack"] or "")

    def _route_to_read_replicas(self, by_leader: dict[int, list[tuple[str, int]]]
                                ) -> dict[int, list[tuple[str, int]]]:
        """Move partitions to the replica their leader prefers (KIP-392) while that
        choice is fresh and the replica is online (Java's ``selectReadReplica``)."""
        now = time.monotonic()
        meta = self._cluster.metadata
        out: dict[int, list[tuple[str, int]]] = {}
        for leader, tps in by_leader.items():
            for tp in tps:
                node = leader
                chosen = self._read_replicas.get(TopicPartition(*tp))
                if chosen is not None:
                    replica, until = chosen
                    info = meta.topics.get(tp[0])
                    part = info.partitions.get(tp[1]) if info is not None else None
                    if now < until and replica in meta.brokers and part is not None \
                            and replica not in part.offline_replicas:
                        node = replica
                    else:
                        del self._read_replicas[TopicPartition(*tp)]
                out.setdefault(node, []).append(tp)
        return out

    def _failed(self, node: int, tps: Iterable[TopicPartition]) -> None:
        """A Fetch to ``node`` was not answered: its partitions go back to their
        leaders (a read replica is not tried again) and metadata is refreshed."""
        for tp in tps:
            self._read_replicas.pop(tp, None)
        self._cluster.mark_stale()

    def _handle(self, resp: Response, fetch: _Fetch) -> list[CompletedFetch]:
        """A Fetch answer as one completed fetch per partition that is still read
        from where it was fetched (others changed position since: the answer is
        stale for them). An error - of the whole answer or of one partition - is
        queued in place of the records, to be raised after those before it."""
        try:
            parts, strays = answer_partitions(resp, fetch.asked)
        except KprotoError as exc:
            return [CompletedFetch(None, -1, error=exc)]
        if strays:
            log.debug("the Fetch answer from broker %d names what its request did not "
                      "(ignored): %s", fetch.node, ", ".join(strays))
            self._cluster.mark_stale()
        out = []
        buffered = self._buffer.fetch_offsets(self._subs.positions)
        for tp, p in parts:
            asked = fetch.offsets[tp]
            position = self._subs.positions.get(tp)
            if buffered.get(tp, (position,))[0] != asked:
                continue                # moved since (seek, reset, unassigned)
            if asked != position and (outcome(tp, p) != RECORDS
                                      or 0 <= p.high_watermark < asked):
                continue                # fetched ahead: handled when it is the position
            try:
                done = self._completed(tp, asked, p, fetch.node)
            except KprotoError as exc:
                done = CompletedFetch(tp, asked, error=exc)
            if done is not None:
                out.append(done)
        return out

    def _completed(self, tp: TopicPartition, asked: int, p: Any, node: int
                   ) -> CompletedFetch | None:
        """One partition of a Fetch answer from broker ``node``, fetched from
        ``asked``: its records, None (nothing to hand out; fetch it again), or an
        exception raised."""
        from_replica = self._read_replicas.get(tp, (-1, 0.0))[0] == node
        if p.error_code and from_replica:
            # (Java: any error from a read replica - out of range included, as the
            # replica may lag - sends the partition back to its leader first)
            del self._read_replicas[tp]
            self._cluster.mark_stale()
            return None
        if p.preferred_read_replica >= 0 and p.preferred_read_replica != node:
            self._read_replicas[tp] = (p.preferred_read_replica, time.monotonic()
                                       + self.config["metadata_max_age_ms"] / 1000)
        what = outcome(tp, p)
        if what == OUT_OF_RANGE or (what == RECORDS and 0 <= p.high_watermark < asked):
            # (Tansu answers a position past the log end with no error; Kafka with
            # OFFSET_OUT_OF_RANGE: both mean the log no longer has that position)
            if self._really_out_of_range(tp, asked):
                self._reset([tp], OffsetOutOfRangeError(
                    "fetch offset out of range", topic=tp.topic, partition=tp.partition,
                    offset=asked))
            return None
        if what == RETRY:
            self._cluster.mark_stale()
            return None
        if p.records is None:
            self._lag_at(tp, asked, p)
            return None
        cols = decode_partition(tp, p, asked, read_committed=self._read_committed,
                                check_crc=self.config["check_crcs"],
                                max_decompressed=self.config["max_decompressed_bytes"])
        if not len(cols) and cols.next_offset <= asked:
            self._lag_at(tp, asked, p)
            return None
        return CompletedFetch(tp, asked, cols, cols.next_offset, nbytes=len(p.records),
                              high_watermark=p.high_watermark,
                              last_stable=p.last_stable_offset,
                              watermark=watermark(p, self._read_committed))

    def _lag_at(self, tp: TopicPartition, asked: int, p: Any) -> None:
        """An answer with nothing to hand out for ``tp``: its lag from the position
        (0 at the log end), as Java records it for an empty completed fetch."""
        if self.metrics is not None and self._subs.positions.get(tp) == asked:
            self.metrics.lag(tp, asked, p.high_watermark, p.last_stable_offset,
                             watermark(p, self._read_committed), time.monotonic())

    def _really_out_of_range(self, tp: TopicPartition, asked: int) -> bool:
        """Whether ``asked`` is outside the log of ``tp``, asked again: a Fetch answer's
        error code and high watermark are not covered by any checksum, and resetting
        the position on a damaged one would deliver records twice (or skip some)."""
        try:
            (start, _), = self._list_offsets({tp: EARLIEST}).values()
            (end, _), = self._list_offsets({tp: LATEST}).values()
        except KprotoError as exc:
            log.debug("cannot confirm that %s offset %d is out of range: %s", tp, asked, exc)
            return False
        return not start <= asked <= end
