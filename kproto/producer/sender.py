"""The producer's sender thread: it owns the broker connections.

Each turn it drains the accumulator (:mod:`kproto.producer.accumulator`: the
first ready batch of every partition without one in flight), encodes and stamps
each batch, sends one Produce request per leader carrying every ready
partition (at most ``max_in_flight_requests_per_connection`` in flight per
broker), reads the answers, and retries retriable errors after a backoff and a
metadata refresh until ``delivery_timeout_ms`` (a retried batch goes first in
its partition's queue, so retries never reorder records). A batch the broker
refuses as too large (MESSAGE_TOO_LARGE) is split in halves and re-sent. With
idempotence it gets a producer id (InitProducerId) and stamps sequence numbers
(see :mod:`kproto.producer.idempotence`, whose state belongs to this thread).

It also refreshes metadata for the topics the producer's callers wait for, and
forgets topics idle for ``metadata_max_idle_ms``. Java's ``Sender``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..errors import (
    BrokerError,
    ErrorCode,
    KafkaConnectionError,
    KafkaTimeoutError,
    KprotoError,
    error_for_code,
)
from ..net.blocking import BrokerConnection
from ..net.cluster import Cluster
from ..net.driver import Driver, SelectorDriver
from ..protocol import ApiKey
from ..records.batch import stamp_batch
from ..structs import topic_id_of
from .accumulator import ProducerBatch, RecordAccumulator
from .idempotence import IdempotenceState
from .sender_metrics import SenderMetrics
from .transaction_manager import TransactionManager

__all__ = ["Sender"]

log = logging.getLogger("kproto.producer")

_MESSAGE_TOO_LARGE = ErrorCode.MESSAGE_TOO_LARGE
_DUPLICATE_SEQUENCE = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class Sender:
    """The sender thread of a producer: ``start()``, ``is_alive()``, ``join()``
    like a :class:`threading.Thread`; ``force_close()`` and ``detach()`` for
    close(); ``want_metadata()``/``metadata_error()`` for callers waiting on a
    topic's metadata."""

    def __init__(self, config: Mapping[str, Any], cluster: Cluster,
                 accumulator: RecordAccumulator,
                 idempotence: IdempotenceState | None = None,
                 transactions: TransactionManager | None = None) -> None:
        self.config = config
        self._cluster = cluster
        self._acc = accumulator
        self._cond = accumulator.cond
        self._idem = idempotence
        self._can_send: Callable[[Any], bool] | None = \
            idempotence.can_send if idempotence is not None else None
        #: a transactional producer's: its requests run on this thread, and a batch
        #: goes only to a partition in the transaction
        self._txn = transactions
        if transactions is not None and idempotence is not None:
            allows, can_send = transactions.allows, idempotence.can_send
            self._can_send = lambda b: allows(b) and can_send(b)
        #: connections with Produce requests in flight (each request's context is a
        #: _Sent); the connection's own in-flight queue is the one record of them
        self._conns: set[BrokerConnection] = set()
        # under the lock: topics callers wait for, and why the last refresh failed
        self._wanted_topics: set[str] = set()
        self._topic_errors: dict[str, BaseException] = {}
        self._max_idle = config["metadata_max_idle_ms"] / 1000
        self._force_close = False
        self._done = False
        self._pid_retry_at = 0.0
        self._had_producer_id = False
        self._driver: Driver = SelectorDriver()     # where the thread waits for answers
        #: the producer's metrics (sender_metrics.py), recorded per batch and request
        self.metrics: SenderMetrics | None = None
        self._thread = threading.Thread(target=self._run, name="kproto-producer", daemon=True)

    # ------------------------------------------------------------------ the producer's side

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def want_metadata(self, topic: str) -> None:
        """*locked*: refresh ``topic``'s metadata until it has partitions (or a
        non-retriable error)."""
        self._topic_errors.pop(topic, None)
        self._wanted_topics.add(topic)
        self._acc.topic_used[topic] = time.monotonic()
        self._cond.notify_all()

    def metadata_error(self, topic: str) -> BaseException | None:
        """*locked*: why the last metadata refresh for ``topic`` failed, if it did."""
        return self._topic_errors.get(topic)

    def force_close(self) -> None:
        """Stop at once: the thread fails what is unsent (Java's forceClose); a
        blocked socket call fails at once."""
        with self._cond:
            self._force_close = True
            self._cond.notify_all()
        self._cluster.abort()
        if self._txn is not None:
            self._txn.abort_links()

    def detach(self) -> None:
        """close() is done with the sender: whoever is last closes the connections
        (never under a running sender thread)."""
        with self._cond:
            self._acc.closed = True
            done = self._done
        if done:
            self._cluster.close()

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        try:
            self._loop()
            if self._force_close:
                self._acc.abort_incomplete(KafkaConnectionError("the producer was closed"))
        except BaseException as exc:  # noqa: BLE001 - reported to every waiting caller
            log.exception("producer sender thread died")
            fatal = exc if isinstance(exc, KprotoError) else KafkaConnectionError(
                f"producer sender thread died: {exc!r}")
            if fatal is not exc:
                fatal.__cause__ = exc
            with self._cond:
                self._acc.fatal = fatal
                self._cond.notify_all()
            self._acc.abort_incomplete(fatal)
            if self._txn is not None:
                self._txn.fail_pending(fatal)
        finally:
            self._driver.close()
            if self._txn is not None:
                self._txn.close_links()
            with self._cond:
                self._done = True
                closed = self._acc.closed
            if closed:          # close() gave up waiting for this thread: clean up here
                self._cluster.close()

    def _loop(self) -> None:
        acc = self._acc
        while True:
            if self._txn is not None:
                assert self._idem is not None
                self._txn.run(self._idem)
            elif self._idem is not None and self._idem.needs_producer_id \
                    and time.monotonic() >= self._pid_retry_at:
                self._init_producer_id()
            with self._cond:
                if self._force_close:
                    return
                if self._idem is not None:
                    self._idem.resolve()
                due = acc.drain(self._can_send)
                if self._cluster.needs_refresh:
                    self._forget_idle_topics()
                if acc.closing and not acc.incomplete and not self._has_in_flight():
                    return
                idle = not due and not self._has_in_flight() and not self._wanted_topics \
                    and (self._txn is None or not self._txn.busy())
                if idle:
                    self._cond.wait(self._idle_wait())
                wanted = set(self._wanted_topics)
            if not idle:
                if wanted or self._cluster.needs_refresh:
                    self._refresh(wanted)
                if due:
                    self._dispatch(due)
                self._poll_responses()
            self._expire()

    def _forget_idle_topics(self) -> None:
        """Under the lock: stop refreshing metadata of topics with no batch opened for
        ``metadata_max_idle_ms`` and none waiting or in flight (Java's producer does
        the same)."""
        now = time.monotonic()
        used = self._acc.topic_used
        idle = {t for t, last in used.items() if now - last > self._max_idle}
        if not idle:
            return
        idle -= self._acc.topics_in_use() | self._wanted_topics
        if idle:
            log.debug("forgetting idle topics %s", sorted(idle))
            self._cluster.forget_topics(idle)
            for t in idle:
                del used[t]

    def _has_in_flight(self) -> bool:
        return any(c.in_flight for c in self._conns)

    def _idle_wait(self) -> float:
        """Under the lock: how long nothing is due (lingering batches, backoffs,
        the next InitProducerId attempt); at most 1 s (expiry runs meanwhile)."""
        now = time.monotonic()
        wake = self._acc.next_ready_time(now)
        if self._txn is not None:
            wake = min(wake, self._txn.next_wake(now))
        elif self._idem is not None and self._idem.needs_producer_id:
            wake = min(wake, self._pid_retry_at)
        return max(0.0, wake - now)

    def _refresh(self, wanted: set[str]) -> None:
        try:
            self._cluster.refresh_metadata(wanted)
        except KprotoError as exc:
            log.debug("metadata refresh failed: %s", exc)
            with self._cond:
                for t in wanted:
                    self._topic_errors[t] = exc
                self._cond.notify_all()
            time.sleep(self.config["retry_backoff_ms"] / 1000)
            return
        meta = self._cluster.metadata
        with self._cond:
            for t in wanted:
                info = meta.topics.get(t)
                if info is not None and info.partitions:
                    self._wanted_topics.discard(t)
                elif info is not None and info.error_code:
                    cls = error_for_code(info.error_code)
                    assert cls is not None
                    self._topic_errors[t] = cls(topic=t)
                    if not cls.retriable:
                        self._wanted_topics.discard(t)
            self._cond.notify_all()

    # ------------------------------------------------------------------ requests

    def _dispatch(self, due: list[ProducerBatch]) -> None:
        by_node: dict[int, list[ProducerBatch]] = {}
        meta = self._cluster.metadata
        for b in due:
            node = meta.leader(b.topic, b.partition)
            if node < 0:
                self._cluster.mark_stale()
                self._retry(b, None)
                continue
            by_node.setdefault(node, []).append(b)
        limit = self.config["max_request_size"]
        for node, batches in by_node.items():
            conn = self._cluster._connections.get(node)
            in_flight = conn.in_flight if conn is not None else 0
            request: list[ProducerBatch] = []
            size = 0
            for b in batches:
                self._prepare(b)
                assert b.payload is not None
                if request and (size + len(b.payload) > limit or in_flight >=
                                self.config["max_in_flight_requests_per_connection"]):
                    self._send_request(node, request)
                    in_flight += 1
                    request, size = [], 0
                request.append(b)
                size += len(b.payload)
            if request:
                self._send_request(node, request)

    def _prepare(self, b: ProducerBatch) -> None:
        """Encode a batch once, and stamp its producer id, epoch and sequence (given
        on its first try, changed only by idempotence.py when it resets them)."""
        self._acc.encode(b)
        if self._idem is not None:
            if b.sequence < 0:
                self._idem.assign(b)
            stamp = (b.producer_id, b.producer_epoch, b.sequence)
            if b.stamped != stamp:
                assert b.payload is not None
                b.payload = stamp_batch(b.payload, *stamp, transactional=self._txn is not None)
                b.stamped = stamp

    def _send_request(self, node: int, batches: list[ProducerBatch]) -> None:
        acks = self.config["acks"]
        topics: dict[str, list[dict[str, Any]]] = {}
        for b in batches:
            topics.setdefault(b.topic, []).append({"index": b.partition, "records": b.payload})
            b.attempts += 1
        meta = self._cluster.metadata
        fields = {
            "transactional_id": self._txn.transactional_id if self._txn else None, "acks": acks,
            "timeout_ms": self.config["request_timeout_ms"],
            "topic_data": [{"name": t, "topic_id": topic_id_of(meta, t), "partition_data": parts}
                           for t, parts in topics.items()],
        }
        conn = None
        try:
            conn = self._cluster.connection(node)
            conn.send(ApiKey.PRODUCE, fields, expect_response=acks != 0,
                      context=_Sent(batches, time.monotonic()),
                      version=self._txn.produce_version(conn) if self._txn else None)
        except KprotoError as exc:
            self._cluster.mark_stale()
            for b in batches:
                self._retry(b, exc)
            if conn is not None:     # the write failed: its other requests are lost too
                self._retry_lost(conn, exc)
            return
        if self.metrics is not None:
            self.metrics.request_sent(batches, time.monotonic())
        if acks == 0:
            for b in batches:
                self._complete(b, -1, -1, None)
            return
        self._conns.add(conn)

    def _poll_responses(self) -> None:
        """Wait (briefly) for answers on every connection with requests in flight."""
        self._retry_lost_everywhere()
        conns = [c for c in self._conns if c.in_flight]
        if not conns:
            return
        with self._cond:
            timeout = min(0.05, self._idle_wait())
            if self._acc.has_sendable(self._can_send):
                timeout = 0.0
        for conn in self._driver.wait(conns, time.monotonic() + timeout):
            try:
                responses = conn.receive(time.monotonic() + self._cluster.request_timeout)
            except KprotoError as exc:      # the connection closed itself
                self._cluster.mark_stale()
                self._retry_lost(conn, exc)
                continue
            for resp in responses:
                batches = resp.request.context.batches
                if self.metrics is not None:
                    now = time.monotonic()
                    self.metrics.answered(now - resp.request.context.sent, now)
                if resp.error is not None:
                    for b in batches:
                        self._retry(b, resp.error)
                else:
                    self._handle_response(resp.body, batches)
        # requests unanswered for too long: give up on the connection (Java does too)
        now = time.monotonic()
        for conn in conns:
            sent = conn.requests_in_flight()
            if sent and now - sent[0].context.sent > self._cluster.request_timeout:
                conn.close()
                self._cluster.mark_stale()
                self._retry_lost(conn, KafkaTimeoutError(
                    f"{conn.address} did not answer a Produce request within "
                    "request_timeout_ms"))
        self._retry_lost_everywhere()

    def _retry_lost(self, conn: BrokerConnection, exc: BaseException) -> None:
        """Retry the batches of the requests ``conn`` lost when it closed."""
        for req in conn.take_lost():
            for b in req.context.batches:
                self._retry(b, exc)
        if not conn.in_flight:
            self._conns.discard(conn)

    def _retry_lost_everywhere(self) -> None:
        """Connections may close anywhere (a metadata refresh that fails closes them
        all): retry what they had in flight."""
        for conn in list(self._conns):
            self._retry_lost(conn, KafkaConnectionError(
                f"the connection to {conn.address} closed with a Produce request in flight"))

    # ------------------------------------------------------------------ outcomes

    def _handle_response(self, body: dict[str, Any], batches: list[ProducerBatch]) -> None:
        names = self._cluster.metadata.topic_names()
        results: dict[tuple[str, int], dict[str, Any]] = {}
        for t in body["responses"]:
            name = t.get("name") or names.get(t.get("topic_id"), "")
            for p in t["partition_responses"]:
                results[(name, p["index"])] = p
        for b in batches:
            p = results.get((b.topic, b.partition))
            if p is None:
                self._retry(b, KafkaConnectionError(
                    f"Produce response has no answer for {b.topic}[{b.partition}]"))
                continue
            code = p["error_code"]
            if code == ErrorCode.NONE:
                self._complete(b, p["base_offset"], p.get("log_append_time_ms", -1), None)
            elif code == _DUPLICATE_SEQUENCE:
                self._complete(b, -1, -1, None)
            elif code == _MESSAGE_TOO_LARGE and b.count > 1:
                self._split(b)
            else:
                cls = error_for_code(code)
                assert cls is not None
                err = cls(p.get("error_message"), topic=b.topic, partition=b.partition)
                if cls.invalid_metadata:
                    self._cluster.mark_stale()
                self._retry(b, err, code)

    def _split(self, b: ProducerBatch) -> None:
        """The broker refused ``b`` as too large: the accumulator queues it again in
        halves; they take its sequence range (idempotence)."""
        parts = self._acc.split(b)
        if parts and self._idem is not None and b.sequence >= 0:
            self._idem.split(b, parts)

    def _retry(self, b: ProducerBatch, exc: BaseException | None, code: int = 0) -> None:
        """Send ``b`` again after a backoff if ``exc`` (the error of broker answer
        ``code``, 0 for others) allows it, else fail it."""
        if b.done:
            return
        retriable = None
        if self._idem is not None and code:
            retriable = self._idem.can_retry(b, code)
        if retriable is None:
            retriable = exc is None or isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)) \
                or (isinstance(exc, BrokerError) and exc.retriable)
        too_old = time.monotonic() - b.created > self.config["delivery_timeout_ms"] / 1000
        if not retriable or b.attempts > self.config["retries"] or too_old or self._acc.closed:
            if exc is None or too_old:
                exc = KafkaTimeoutError(f"{b.topic}[{b.partition}]: not delivered within "
                                        f"delivery_timeout_ms (last error: {exc})")
            # refused: the broker answered that it did not write it (Java's
            # adjustSequenceNumbers); otherwise it may have been written
            self._fail(b, exc, refused=bool(code) and not retriable
                       and b.attempts <= self.config["retries"])
            return
        log.debug("retrying %s[%d] after %s", b.topic, b.partition, exc)
        delay = min(self.config["retry_backoff_ms"] * 2 ** max(0, b.attempts - 1),
                    self.config["retry_backoff_max_ms"])
        b.next_try = time.monotonic() + delay / 1000
        if self.metrics is not None:
            self.metrics.retried(b, time.monotonic())
        self._acc.reenqueue(b)

    def _fail(self, b: ProducerBatch, exc: BaseException, *, refused: bool) -> None:
        if self.metrics is not None and not b.done:
            self.metrics.failed(b, time.monotonic())
        if self._idem is not None and b.sequence >= 0:
            self._idem.failed(b, refused=refused)
        if self._txn is not None and not b.done:
            self._txn.batch_failed(exc)
        self._complete(b, -1, -1, exc)

    def _complete(self, b: ProducerBatch, base_offset: int, log_append_time: int,
                  error: BaseException | None) -> None:
        """Finish ``b`` (once: later calls do nothing) and give back what it held."""
        if not self._acc.deallocate(b):
            return
        if error is None and self._idem is not None and b.sequence >= 0:
            self._idem.completed(b)
        b.finish(base_offset, log_append_time, error)

    def _expire(self) -> None:
        """Fail queued batches older than delivery_timeout_ms."""
        for b in self._acc.expired(self.config["delivery_timeout_ms"] / 1000):
            self._fail(b, KafkaTimeoutError(
                f"{b.topic}[{b.partition}]: not sent within delivery_timeout_ms"),
                refused=False)

    def _init_producer_id(self) -> None:
        """Get a producer id (InitProducerId): the first, or a new one after a
        sequence gap (see idempotence.py). The first must come within
        max_block_ms, else the producer fails; later ones are tried again after
        a backoff while the broker is unreachable (records expire meanwhile)."""
        def attempt() -> dict[str, Any]:
            body = self._cluster.request_any(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": None, "transaction_timeout_ms": 60000})
            cls = error_for_code(body["error_code"])
            if cls is not None:
                raise cls("InitProducerId failed")
            return body

        assert self._idem is not None
        first = not self._had_producer_id
        try:
            body = self._cluster.call(attempt, "InitProducerId", timeout=(
                self.config["max_block_ms"] / 1000 if first else self._cluster.request_timeout))
        except KprotoError as exc:
            if self._force_close:
                return              # close() gave up: the loop ends at its next turn
            if first or not exc.retriable:
                raise
            log.debug("InitProducerId failed (%s); trying again", exc)
            self._pid_retry_at = time.monotonic() + self.config["retry_backoff_max_ms"] / 1000
            return
        self._had_producer_id = True
        self._idem.set_producer_id(body["producer_id"], body["producer_epoch"])


class _Sent(NamedTuple):
    """A Produce request's context on its connection: its batches, when it was sent."""

    batches: list[ProducerBatch]
    sent: float
