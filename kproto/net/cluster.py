"""The cluster as a client sees it: bootstrap, metadata cache, connections, routing.

:class:`Cluster` bootstraps from a list of servers (trying each until one
answers), keeps a metadata snapshot (brokers, topics, partitions, leaders,
leader epochs, topic ids) for the topics it is asked to maintain, opens one
connection per broker on demand, and routes requests to partition leaders.

One thread drives a ``Cluster``'s I/O (the producer's sender thread, the
consumer's caller); :attr:`Cluster.metadata` is an immutable snapshot that any
thread may read. Requests to several brokers go out together and their answers
are collected with one selector (:meth:`Cluster.send_many`).
"""

from __future__ import annotations

import logging
import random
import ssl
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..config import SASL_CREDENTIALS, Settings
from ..errors import (
    BrokerError,
    ErrorCode,
    KafkaConnectionError,
    KafkaTimeoutError,
    KprotoError,
    LeaderNotAvailableError,
    ProtocolError,
    SaslAuthenticationFailedError,
    TlsCertificateError,
    UnknownTopicOrPartitionError,
    UnsupportedSaslMechanismError,
    error_for_code,
)
from ..metrics import Metrics
from ..protocol import ApiKey
from ..protocol.requests import find_coordinator_fields
from .blocking import BrokerConnection, Fields, SaslMechanism
from .connection import Response
from .driver import SelectorDriver
from .node_metrics import node_sensors

log = logging.getLogger("kproto.cluster")

__all__ = ["Cluster", "ClusterMetadata", "BrokerInfo", "PartitionInfo", "TopicInfo"]

T = TypeVar("T")


@dataclass(frozen=True)
class BrokerInfo:
    """A broker as Metadata describes it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionInfo:
    """One partition: its leader (-1 when there is none), epoch and replicas."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True)
class TopicInfo:
    """One topic: its id (Metadata v10+) and partitions by index."""

    name: str
    partitions: Mapping[int, PartitionInfo]
    topic_id: uuid.UUID | None = None
    is_internal: bool = False
    error_code: int = 0


@dataclass(frozen=True)
class ClusterMetadata:
    """An immutable snapshot of the cluster (replaced whole on every refresh)."""

    brokers: Mapping[int, BrokerInfo] = field(default_factory=dict)
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1
    #: ``time.monotonic()`` of the refresh that made it (0: never refreshed).
    updated_at: float = 0.0

    def partitions(self, topic: str) -> list[int]:
        """The partition indexes of ``topic`` (empty if unknown)."""
        info = self.topics.get(topic)
        return sorted(info.partitions) if info else []

    def leader(self, topic: str, partition: int) -> int:
        """The node id leading ``topic``/``partition``, or -1."""
        info = self.topics.get(topic)
        p = info.partitions.get(partition) if info else None
        return p.leader if p is not None and p.leader in self.brokers else -1

    def topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name, for Fetch/Produce versions that name topics by id."""
        return {t.topic_id: t.name for t in self.topics.values() if t.topic_id is not None}

    @classmethod
    def from_response(cls, body: dict[str, Any], previous: ClusterMetadata | None = None,
                      *, merge: bool = False) -> ClusterMetadata:
        """Build a snapshot from a Metadata response body; with ``merge``, topics
        absent from the answer are kept from ``previous``."""
        brokers = {b["node_id"]: BrokerInfo(b["node_id"], b["host"], b["port"], b.get("rack"))
                   for b in body["brokers"]}
        topics: dict[str, TopicInfo] = dict(previous.topics) if (merge and previous) else {}
        for t in body["topics"]:
            name = t["name"]
            if name is None:
                continue
            parts = {p["partition_index"]: PartitionInfo(
                name, p["partition_index"], p["leader_id"], p.get("leader_epoch", -1),
                tuple(p["replica_nodes"] or ()), tuple(p["isr_nodes"] or ()),
                tuple(p.get("offline_replicas") or ()), p["error_code"])
                for p in t["partitions"] or ()}
            tid = t.get("topic_id")
            if tid is not None and tid.int == 0:
                tid = None
            topics[name] = TopicInfo(name, parts, tid, bool(t.get("is_internal")),
                                     t["error_code"])
        return cls(brokers, topics, body.get("cluster_id"), body.get("controller_id", -1),
                   time.monotonic())


def backoff_delays(first_ms: int, max_ms: int) -> Iterable[float]:
    """Exponential backoff with ±20 % jitter (seconds), as Kafka's clients do it."""
    delay = first_ms / 1000
    while True:
        yield delay * random.uniform(0.8, 1.2)
        delay = min(delay * 2, max_ms / 1000)


#: Seconds an unknown topic is asked about again before a reader that does not
#: create topics calls it missing (a new topic reaches every broker's metadata
#: cache within moments).
UNKNOWN_TOPIC_GRACE = 1.0


class Cluster:
    """Metadata, connections and routing for one client.

    ``settings`` are resolved client settings (see :func:`kproto.config.resolve`);
    only the connection and metadata ones are used here.
    """

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = Settings(settings)         # its repr hides secrets
        self.bootstrap_servers: list[str] = list(settings["bootstrap_servers"])
        self.client_id: str = settings.get("client_id") or "kproto"
        self.request_timeout = settings.get("request_timeout_ms", 30000) / 1000
        self.connect_timeout = settings.get("socket_connection_setup_timeout_ms", 10000) / 1000
        self.metadata_max_age = settings.get("metadata_max_age_ms", 300000) / 1000
        self.max_response_bytes: int = settings.get("receive_message_max_bytes", 100 << 20)
        self.retry_backoff_ms: int = settings.get("retry_backoff_ms", 100)
        self.retry_backoff_max_ms: int = settings.get("retry_backoff_max_ms", 1000)
        #: Metadata requests let the broker create unknown topics (Java's consumer:
        #: ``allow.auto.create.topics``; producers always do).
        self.auto_create_topics: bool = settings.get("allow_auto_create_topics", True)
        self.ssl_context: ssl.SSLContext | None = None
        self.sasl: SaslMechanism | None = None
        if settings.get("security_protocol", "PLAINTEXT") != "PLAINTEXT" or any(
                settings.get(k) for k in ("ssl_context", "ssl_cafile", "ssl_certfile",
                                          "ssl_keyfile", "sasl_mechanism",
                                          "sasl_jaas_config", "ssl_cadata", "ssl_certdata",
                                          "ssl_keydata", "ssl_truststore_location",
                                          "ssl_keystore_location", *SASL_CREDENTIALS)):
            from ..config import expand_secrets
            from .security import sasl_from_config, ssl_context_from_config

            secured = expand_secrets(self.settings)     # ${env:...}: read here, kept nowhere
            self.ssl_context = ssl_context_from_config(secured)
            self.sasl = sasl_from_config(secured)
        self.metadata = ClusterMetadata()
        #: Topics whose metadata is maintained (None: every topic).
        self.topics: set[str] = set()
        self._connections: dict[int, BrokerConnection] = {}
        #: each address's last handshake duration, shared by this client's connections
        self._handshakes: dict[str, float] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._stale = True
        self._closed = False
        #: the client's metrics registry: its connections record per-broker request
        #: metrics there (kproto.net.node_metrics); None: not recorded
        self.metrics: Metrics | None = None

    # -- connections

    def new_connection(self, address: str, timeout: float | None = None, *,
                       node_id: int = -1) -> BrokerConnection:
        """A fresh (unconnected) connection with this client's settings (to broker
        ``node_id``, -1 for a bootstrap address: the tag of its request metrics)."""
        conn = BrokerConnection(
            address, client_id=self.client_id,
            timeout=self.request_timeout if timeout is None else timeout,
            connect_timeout=self.connect_timeout, max_response_bytes=self.max_response_bytes,
            ssl_context=self.ssl_context, sasl=self.sasl)
        conn.handshakes = self._handshakes      # (what bounded() may cut: by address)
        if self.metrics is not None:
            conn.metrics = node_sensors(self.metrics, node_id)
        return conn

    def connection(self, node_id: int, deadline: float | None = None) -> BrokerConnection:
        """The (connected) connection to broker ``node_id`` (connected by ``deadline``,
        a ``time.monotonic()`` value, if given)."""
        self._check_open()
        conn = self._connections.get(node_id)
        if conn is None:
            broker = self.metadata.brokers.get(node_id)
            if broker is None:
                self.refresh_metadata()
                broker = self.metadata.brokers.get(node_id)
                if broker is None:
                    known = sorted(self.metadata.brokers)
                    raise KafkaConnectionError(f"broker {node_id} is not in the cluster "
                                               f"metadata (brokers: {known})")
            conn = self._connections[node_id] = self.new_connection(broker.address,
                                                                    node_id=node_id)
        try:
            with conn.bounded(deadline):
                return conn.connect()
        except KprotoError:
            self._stale = True
            raise

    def any_connection(self, deadline: float | None = None) -> BrokerConnection:
        """A connection to some live broker with no request in flight (a blocking
        request on a connection the producer has Produce requests in flight on
        would be handed their answers): a known one, else a bootstrap server; each
        connection attempt ends by ``deadline`` if given."""
        self._check_open()
        for conn in self._connections.values():
            if conn.connected and not conn.in_flight:
                return conn
        for node_id in random.sample(list(self.metadata.brokers), len(self.metadata.brokers)):
            if deadline is not None and time.monotonic() >= deadline:
                break
            try:
                conn = self.connection(node_id, deadline)
            except KprotoError:
                continue
            if not conn.in_flight:
                return conn
        return self._bootstrap(deadline)

    def _bootstrap(self, deadline: float | None = None) -> BrokerConnection:
        if self._bootstrap_conn is not None and self._bootstrap_conn.connected:
            return self._bootstrap_conn
        errors: list[str] = []
        for address in random.sample(self.bootstrap_servers, len(self.bootstrap_servers)):
            if deadline is not None and time.monotonic() >= deadline and errors:
                break
            conn = self.new_connection(address)
            try:
                with conn.bounded(deadline):
                    conn.connect()
            except (SaslAuthenticationFailedError, UnsupportedSaslMechanismError,
                    TlsCertificateError):
                raise       # wrong credentials, mechanism or certificate: final
            except KprotoError as exc:
                errors.append(f"{address}: {exc}")
                continue
            self._bootstrap_conn = conn
            return conn
        raise KafkaConnectionError("no bootstrap server answered (" + "; ".join(errors) + ")")

    def close(self) -> None:
        """Close every connection."""
        self._closed = True
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
        if self._bootstrap_conn is not None:
            self._bootstrap_conn.close()
            self._bootstrap_conn = None

    def abort(self) -> None:
        """Stop this cluster's user from another thread: no new connections, and a call
        blocked on one fails at once (see BrokerConnection.abort); the thread that uses
        the cluster still closes it."""
        self._closed = True
        for conn in [*self._connections.values(), self._bootstrap_conn]:
            if conn is not None:
                conn.abort()

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaConnectionError("the client is closed")

    # -- metadata

    def add_topics(self, topics: Iterable[str]) -> None:
        """Maintain metadata for these topics too (fetched with the next refresh)."""
        new = set(topics) - self.topics
        if new:
            self.topics |= new
            self._stale = True

    def forget_topics(self, topics: Iterable[str]) -> None:
        """Stop maintaining metadata for these topics (from the next refresh on)."""
        self.topics -= set(topics)

    def mark_stale(self) -> None:
        """Refresh metadata before it is next needed (a leader moved, a broker died)."""
        self._stale = True

    @property
    def needs_refresh(self) -> bool:
        return self._stale or time.monotonic() - self.metadata.updated_at > self.metadata_max_age

    def refresh_metadata(self, topics: Iterable[str] | None = None, *,
                         all_topics: bool = False, timeout: float | None = None,
                         auto_create: bool | None = None) -> ClusterMetadata:
        """Ask a broker for metadata of the maintained topics (or every topic) and
        replace the snapshot; returns it. Connection failures move on to the next
        broker, then to the bootstrap servers, until ``timeout`` (default the
        request timeout). ``auto_create`` (default: :attr:`auto_create_topics`)
        lets the broker create unknown topics (Metadata v4+; older versions
        always do)."""
        if topics is not None:
            self.add_topics(topics)
        request: dict[str, Any] = {"topics": None if all_topics else
                                   [{"name": t} for t in sorted(self.topics)],
                                   "allow_auto_topic_creation": self.auto_create_topics
                                   if auto_create is None else auto_create}
        # cycle through the known brokers and the bootstrap servers until one answers
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        delays = iter(backoff_delays(self.retry_backoff_ms, self.retry_backoff_max_ms))
        while True:
            try:
                conn = self.any_connection(deadline)
                with conn.bounded(deadline):
                    body = conn.request(ApiKey.METADATA, request)
            except TlsCertificateError:
                self._close_all()
                raise                       # final: another broker's answer will not differ
            except (KafkaConnectionError, KafkaTimeoutError, ProtocolError) as exc:
                self._close_all()
                if self._closed or time.monotonic() + 0.01 >= deadline:
                    raise
                log.debug("metadata request failed (%s); retrying", exc)
                time.sleep(min(next(delays), max(0.0, deadline - time.monotonic())))
                continue
            self.metadata = ClusterMetadata.from_response(body)
            self._forget_departed_brokers()
            self._stale = False
            return self.metadata

    def _close_all(self) -> None:
        """Close every connection (they reopen on demand), e.g. after a broker vanished."""
        for conn in self._connections.values():
            conn.close()
        if self._bootstrap_conn is not None:
            self._bootstrap_conn.close()

    def maybe_refresh(self) -> ClusterMetadata:
        """Refresh if stale or older than ``metadata_max_age_ms``."""
        return self.refresh_metadata() if self.needs_refresh else self.metadata

    def _forget_departed_brokers(self) -> None:
        for node_id in list(self._connections):
            if node_id not in self.metadata.brokers:
                self._connections.pop(node_id).close()

    def wait_for_topics(self, topics: Iterable[str], timeout: float, *,
                        auto_create: bool | None = None) -> ClusterMetadata:
        """Refresh until every partition of ``topics`` has a leader (auto-creating
        topics where the broker does that and ``auto_create``, default
        :attr:`auto_create_topics`, allows). Raises the topic's error (e.g.
        :class:`~kproto.errors.UnknownTopicOrPartitionError`) or a
        :class:`~kproto.errors.KafkaTimeoutError` at ``timeout``.

        Without auto-creation, a topic the brokers still do not know after
        :data:`UNKNOWN_TOPIC_GRACE` seconds (news of a new topic travels between
        brokers) raises UnknownTopicOrPartitionError at once, and is no longer
        maintained (so no later refresh creates it)."""
        wanted = set(topics)
        new = wanted - self.topics
        self.add_topics(wanted)
        creating = self.auto_create_topics if auto_create is None else auto_create
        start = time.monotonic()
        deadline = start + timeout
        delays = iter(backoff_delays(self.retry_backoff_ms, self.retry_backoff_max_ms))
        meta = self.metadata
        while True:
            if self.needs_refresh or not self._ready(meta, wanted):
                meta = self.refresh_metadata(auto_create=creating)
            problem = self._problem(meta, wanted)
            if problem is None:
                return meta
            unknown = not creating and problem.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and \
                time.monotonic() - start >= min(UNKNOWN_TOPIC_GRACE, timeout)
            if unknown:
                self.forget_topics(new)
                raise UnknownTopicOrPartitionError(
                    "the topic does not exist (and reading does not create it)",
                    topic=problem.context.get("topic"))
            if not problem.retriable or time.monotonic() + 0.01 > deadline:
                if problem.retriable:
                    raise KafkaTimeoutError(f"metadata not ready within {timeout:g} s: "
                                            f"{problem}") from problem
                raise problem
            time.sleep(min(next(delays), max(0.0, deadline - time.monotonic())))
            self._stale = True

    @staticmethod
    def _ready(meta: ClusterMetadata, topics: set[str]) -> bool:
        return Cluster._problem(meta, topics) is None

    @staticmethod
    def _problem(meta: ClusterMetadata, topics: set[str]) -> BrokerError | None:
        for name in sorted(topics):
            info = meta.topics.get(name)
            if info is None:
                return UnknownTopicOrPartitionError("topic not in the metadata answer",
                                                    topic=name)
            if info.error_code:
                cls = error_for_code(info.error_code)
                assert cls is not None
                return cls(topic=name)
            if not info.partitions:
                return LeaderNotAvailableError("topic has no partitions yet", topic=name)
            for p in info.partitions.values():
                if p.leader < 0 or p.leader not in meta.brokers:
                    cls = error_for_code(p.error_code or ErrorCode.LEADER_NOT_AVAILABLE)
                    assert cls is not None
                    return cls(topic=name, partition=p.partition)
        return None

    def find_coordinator(self, key: str, key_type: int = 0) -> str:
        """The address ("host:port") of the coordinator of ``key``: a group id
        (``key_type`` 0) or a transactional id (1). FindCoordinator, retried while
        the coordinator is loading or not available."""
        what = "transactional_id" if key_type == 1 else "group"

        def attempt() -> str:
            body = self.request_any(ApiKey.FIND_COORDINATOR,
                                    find_coordinator_fields(key, key_type))
            found = body["coordinators"][0] if body.get("coordinators") else body
            cls = error_for_code(found["error_code"])
            if cls is not None:
                raise cls("FindCoordinator failed", **{what: key})
            host = found["host"]
            return f"[{host}]:{found['port']}" if ":" in host else f"{host}:{found['port']}"

        address: str = self.call(attempt, "FindCoordinator")
        return address

    def leaders(self, partitions: Iterable[tuple[str, int]]
                ) -> tuple[dict[int, list[tuple[str, int]]], list[tuple[str, int]]]:
        """Group ``(topic, partition)`` pairs by leader: ({node: [tp...]}, [no leader])."""
        meta = self.metadata
        by_leader: dict[int, list[tuple[str, int]]] = {}
        orphans = []
        for tp in partitions:
            node = meta.leader(*tp)
            if node < 0:
                orphans.append(tp)
            else:
                by_leader.setdefault(node, []).append(tp)
        return by_leader, orphans

    # -- requests

    def request(self, node_id: int, api_key: int, fields: Fields) -> dict[str, Any]:
        """One request to broker ``node_id`` (a broken connection marks metadata stale)."""
        conn = self.connection(node_id)
        try:
            return conn.request(api_key, fields)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._stale = True
            raise

    def request_any(self, api_key: int, fields: Fields) -> dict[str, Any]:
        """One request to any live broker."""
        conn = self.any_connection()
        try:
            return conn.request(api_key, fields)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._stale = True
            raise

    def send_many(self, requests: Mapping[int, list[tuple[int, Fields]]], *,
                  raw: bool = False, timeout: float | None = None
                  ) -> dict[int, list[Response] | Exception]:
        """Send requests to several brokers at once and collect every answer.

        ``requests`` maps node id -> [(api_key, fields)]; all are written before
        any answer is read. Returns node id -> its responses in order, or the
        exception that broke that broker's connection (the others still answer).
        """
        pending: dict[int, tuple[BrokerConnection, int]] = {}
        results: dict[int, list[Response] | Exception] = {}
        for node, reqs in requests.items():
            try:
                conn = self.connection(node)
                for api_key, fields in reqs:
                    conn.send(api_key, fields, raw=raw)
            except KprotoError as exc:
                self._stale = True
                results[node] = exc
                continue
            pending[node] = (conn, len(reqs))
            results[node] = []
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        self.collect(pending, results, deadline)
        return results

    def collect(self, pending: dict[int, tuple[BrokerConnection, int]],
                results: dict[int, list[Response] | Exception], deadline: float) -> None:
        """Read answers on several connections until each has ``count`` of them
        (``pending``: node -> (connection, count)); fills ``results`` in place."""
        waiting = {node: conn for node, (conn, count) in pending.items() if count}
        node_of = {id(conn): node for node, conn in waiting.items()}
        with SelectorDriver() as driver:
            while waiting:
                if deadline <= time.monotonic():
                    for node in waiting:
                        pending[node][0].close()
                        results[node] = KafkaTimeoutError(
                            f"broker {node} did not answer within the request timeout")
                    self._stale = True
                    return
                for conn in driver.wait(list(waiting.values()), deadline):
                    node = node_of[id(conn)]
                    count = pending[node][1]
                    got = results[node]
                    assert isinstance(got, list)
                    try:
                        got += conn.receive(deadline)
                    except KprotoError as exc:
                        results[node] = exc
                        self._stale = True
                        got = []
                        count = 0
                    if len(got) >= count:
                        del waiting[node]

    def call(self, fn: Callable[[], T], what: str, *, timeout: float | None = None) -> T:
        """Run ``fn`` again (after a metadata refresh where the error says so) while
        it raises retriable errors, with backoff, until ``timeout`` (default the
        request timeout) or the cluster is closed; then re-raise the last error."""
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        delays = iter(backoff_delays(self.retry_backoff_ms, self.retry_backoff_max_ms))
        while True:
            try:
                return fn()
            except (BrokerError, KafkaConnectionError, KafkaTimeoutError) as exc:
                if not exc.retriable or self._closed or time.monotonic() >= deadline:
                    raise
                if exc.invalid_metadata or isinstance(exc, KafkaConnectionError):
                    self._stale = True
                time.sleep(min(next(delays), max(0.0, deadline - time.monotonic())))
                if self._stale:
                    try:
                        self.refresh_metadata()
                    except (KafkaConnectionError, KafkaTimeoutError):
                        pass
