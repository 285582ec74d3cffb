"""A transactional producer's coordinator requests: what each one carries and how
each answer moves the transaction's state (the request handlers of Java's
``TransactionManager``). :class:`TxnRequests` is the base of
:class:`kproto.producer.transaction_manager.TransactionManager`, which holds the state and runs
the requests; the classification of errors is in that module's docstring.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from typing import Any

from ..errors import (
    ClusterAuthorizationFailedError,
    CommitFailedError,
    ErrorCode,
    InvalidProducerIdMappingError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    UnsupportedVersionError,
    error_for_code,
)
from ..net.blocking import BrokerConnection
from ..protocol import ApiKey
from ..protocol.requests import GROUP, TRANSACTION
from ..structs import TopicPartition
from .idempotence import IdempotenceState
from .transactions import (
    TRANSACTION_VERSION_2,
    CoordinatorLinks,
    end_txn_version,
    transaction_version,
)

__all__ = ["TxnRequests", "TxnResult", "State"]

log = logging.getLogger("kproto.producer")

E = ErrorCode
_MOVED = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE})
_FENCED = frozenset({E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH})
#: fatal wherever they come from (Java's maybeTransitionToErrorState)
_FATAL_TYPES = (ProducerFencedError, TransactionalIdAuthorizationFailedError,
                ClusterAuthorizationFailedError, UnsupportedVersionError,
                InvalidProducerIdMappingError)
#: Java's backoff for AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS while the
#: previous transaction completes (the first partitions of a transaction)
_FIRST_ADD_BACKOFF = 0.02


class State(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in a transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "in an abortable error"
    FATAL_ERROR = "in a fatal error"


S = State
# kind -> (priority, coordinator type)
_KINDS = {"init": (1, TRANSACTION), "add_partitions": (2, TRANSACTION),
          "add_offsets": (2, TRANSACTION), "offset_commit": (2, GROUP),
          "end_txn": (3, TRANSACTION), "bump": (4, TRANSACTION)}


class TxnResult:
    """The outcome of a transactional call, which the sender thread carries out."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.error: BaseException | None = None
        self._event = threading.Event()

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def finish(self, error: BaseException | None = None) -> None:
        if not self._event.is_set():
            self.error = error
            self._event.set()

    def wait(self, timeout: float) -> None:
        if not self._event.wait(timeout):
            raise KafkaTimeoutError(f"{self.what} did not complete within {timeout:g} s "
                                    f"(call it again to go on waiting)")
        if self.error is not None:
            raise self.error


class _Request:
    __slots__ = ("kind", "result", "next_try", "data", "order", "attempts")

    def __init__(self, kind: str, result: TxnResult, data: Any, order: int) -> None:
        self.kind, self.result, self.data, self.order = kind, result, data, order
        self.next_try = 0.0
        self.attempts = 0

    @property
    def key(self) -> tuple[int, int]:
        return _KINDS[self.kind][0], self.order


class TxnRequests:
    """Builds the coordinator requests and handles their answers (*locked*: called
    under the accumulator's lock). The state and the transitions are
    :class:`kproto.producer.transaction_manager.TransactionManager`'s."""

    transactional_id: str
    timeout_ms: int
    state: State
    last_error: BaseException | None
    producer_id: int
    epoch: int
    tv2: bool
    _backoff: float
    _can_bump: bool
    _started: bool
    _added: set[tuple[str, int]]
    _pending: set[tuple[str, int]]
    _queue: list[_Request]
    _links: CoordinatorLinks
    _cond: threading.Condition

    # the transitions (TransactionManager's)
    def _fatal(self, exc: BaseException, req: _Request | None = None) -> None:
        raise NotImplementedError

    def _abortable(self, exc: BaseException, req: _Request | None = None) -> None:
        raise NotImplementedError

    def _fenced(self) -> ProducerFencedError:
        raise NotImplementedError

    def _end_locally(self, req: _Request) -> None:
        raise NotImplementedError

    def _enqueue(self, kind: str, what: str, data: Any = None, *,
                 result: TxnResult | None = None) -> TxnResult:
        raise NotImplementedError

    def _stop_flushing(self) -> None:
        raise NotImplementedError

    # -- requests

    def _build(self, req: _Request) -> tuple[str, int, int, dict[str, Any]]:
        """(coordinator key, its type, api key, fields) of ``req``."""
        tid, pid, epoch = self.transactional_id, self.producer_id, self.epoch
        if req.kind in ("init", "bump"):
            bump = req.kind == "bump"
            return tid, TRANSACTION, ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": tid, "transaction_timeout_ms": self.timeout_ms,
                "producer_id": pid if bump else -1, "producer_epoch": epoch if bump else -1}
        if req.kind == "add_partitions":
            topics: dict[str, list[int]] = {}
            for t, p in sorted(req.data):
                topics.setdefault(t, []).append(p)
            return tid, TRANSACTION, ApiKey.ADD_PARTITIONS_TO_TXN, {
                "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [
                    {"name": t, "partitions": ps} for t, ps in topics.items()]}
        if req.kind == "end_txn":
            return tid, TRANSACTION, ApiKey.END_TXN, {
                "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                "committed": bool(req.data)}
        todo, gm = req.data
        if req.kind == "add_offsets":
            return tid, TRANSACTION, ApiKey.ADD_OFFSETS_TO_TXN, {
                "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                "group_id": gm.group_id}
        by_topic: dict[str, list[dict[str, Any]]] = {}      # offset_commit
        for tp, om in sorted(todo.items()):
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata})
        return gm.group_id, GROUP, ApiKey.TXN_OFFSET_COMMIT, {
            "transactional_id": tid, "group_id": gm.group_id, "producer_id": pid,
            "producer_epoch": epoch, "generation_id": gm.generation_id,
            "member_id": gm.member_id, "group_instance_id": gm.group_instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

    def _version(self, api_key: int, conn: BrokerConnection) -> int | None:
        if api_key == ApiKey.END_TXN:
            return end_txn_version(conn, self.tv2)
        if api_key == ApiKey.ADD_PARTITIONS_TO_TXN:     # v4+: brokers' batches (KIP-890)
            return min(conn.versions.get(api_key, 0), 3)
        return None

    def _retry(self, req: _Request, exc: BaseException, backoff: float | None = None) -> None:
        log.debug("%s: %s failed (%s); retrying", self.transactional_id, req.kind, exc)
        req.attempts += 1
        req.next_try = time.monotonic() + (self._backoff if backoff is None else backoff)

    def _set_producer_id(self, pid: int, epoch: int, idem: IdempotenceState) -> None:
        log.info("%s: producer id %d epoch %d", self.transactional_id, pid, epoch)
        self.producer_id, self.epoch = pid, epoch
        idem.reset_sequences()
        idem.set_producer_id(pid, epoch)

    # -- answers (locked)

    def _common(self, req: _Request, code: int, key: str = "", key_type: int = TRANSACTION
                ) -> bool:
        """Handle what every coordinator request answers alike; True if done with it."""
        cls = error_for_code(code)
        assert cls is not None
        if code in _MOVED:
            self._links.drop(key or self.transactional_id, key_type)
            self._retry(req, cls())
        elif cls.retriable:
            self._retry(req, cls(), _FIRST_ADD_BACKOFF if code == E.CONCURRENT_TRANSACTIONS and
                        req.kind == "add_partitions" and not self._added else None)
        elif code in _FENCED:
            self._fatal(self._fenced(), req)
        elif code == E.TRANSACTION_ABORTABLE:
            self._abortable(cls(), req)
        else:
            return False
        return True

    def _on_init(self, req: _Request, body: dict[str, Any], conn: BrokerConnection,
                 version: int | None, idem: IdempotenceState) -> None:
        code = body["error_code"]
        if code == E.NONE:
            self._can_bump = conn.versions.get(ApiKey.INIT_PRODUCER_ID, 0) >= 3
            if req.kind == "init":
                self.tv2 = transaction_version(conn) >= TRANSACTION_VERSION_2 and \
                    conn.versions.get(ApiKey.END_TXN, 0) >= 5
            self._set_producer_id(body["producer_id"], body["producer_epoch"], idem)
            self._queue.remove(req)
            self.state, self.last_error, self._bump_required = S.READY, None, False
            self._stop_flushing()
            req.result.finish()
        elif not self._common(req, code):
            cls = error_for_code(code)
            assert cls is not None
            self._fatal(cls("InitProducerId failed", transactional_id=self.transactional_id),
                        req)

    _on_bump = _on_init

    def _on_add_partitions(self, req: _Request, body: dict[str, Any], conn: BrokerConnection,
                           version: int | None, idem: IdempotenceState) -> None:
        errors = {(t["name"], p["partition_index"]): p["partition_error_code"]
                  for t in body["results_by_topic_v3_and_below"]
                  for p in t["results_by_partition"]}
        bad = {tp: c for tp, c in errors.items() if c not in (E.NONE, E.OPERATION_NOT_ATTEMPTED)}
        for code in sorted(set(bad.values()), key=lambda c: c not in _MOVED):
            if self._common(req, code):
                return      # retried (the same partitions), fenced or abortable
        self._queue.remove(req)
        self._pending -= req.data
        if bad or len(errors) < len(req.data):
            tp, code = next(iter(bad.items())) if bad else (None, E.UNKNOWN_SERVER_ERROR)
            cls = error_for_code(code)
            assert cls is not None
            err = cls("AddPartitionsToTxn failed", transactional_id=self.transactional_id,
                      topic=tp[0] if tp else None, partition=tp[1] if tp else None)
            if code in (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.INVALID_TXN_STATE,
                        E.INVALID_PRODUCER_ID_MAPPING):
                self._fatal(err, req)
            else:
                self._abortable(err, req)
            return
        log.debug("%s: added %s to the transaction", self.transactional_id, sorted(req.data))
        self._added |= req.data
        self._started = True
        req.result.finish()
        self._cond.notify_all()

    def _on_add_offsets(self, req: _Request, body: dict[str, Any], conn: BrokerConnection,
                        version: int | None, idem: IdempotenceState) -> None:
        code = body["error_code"]
        if code == E.NONE:
            self._queue.remove(req)
            self._started = True
            self._enqueue("offset_commit", req.result.what, req.data, result=req.result)
        elif not self._common(req, code):
            self._on_error(req, code, "AddOffsetsToTxn", group=req.data[1].group_id)

    def _on_offset_commit(self, req: _Request, body: dict[str, Any], conn: BrokerConnection,
                          version: int | None, idem: IdempotenceState) -> None:
        todo, gm = req.data
        retry: BaseException | None = None
        for t in body["topics"]:
            for p in t["partitions"]:
                tp, code = TopicPartition(t["name"], p["partition_index"]), p["error_code"]
                cls = error_for_code(code)
                if cls is None:
                    todo.pop(tp, None)
                elif code in _MOVED or code == E.REQUEST_TIMED_OUT:
                    self._links.drop(gm.group_id, GROUP)
                    retry = cls()
                elif cls.retriable:
                    retry = cls()
                elif code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
                    self._abortable(CommitFailedError(
                        f"TxnOffsetCommit: group {gm.group_id!r} has no member {gm.member_id!r} "
                        f"of generation {gm.generation_id} ({cls.name})"), req)
                    return
                else:
                    self._on_error(req, code, "TxnOffsetCommit", group=gm.group_id, topic=tp[0],
                                   partition=tp[1])
                    return
        if todo:
            self._retry(req, retry or KafkaConnectionError("TxnOffsetCommit: partitions "
                                                           "missing from the answer"))
            return
        self._queue.remove(req)
        req.result.finish()

    def _on_end_txn(self, req: _Request, body: dict[str, Any], conn: BrokerConnection,
                    version: int | None, idem: IdempotenceState) -> None:
        code = body["error_code"]
        if code == E.NONE:
            self._queue.remove(req)
            if body.get("producer_id", -1) >= 0:        # v5: the next epoch (KIP-890)
                self._set_producer_id(body["producer_id"], body["producer_epoch"], idem)
            log.debug("%s: transaction %s", self.transactional_id,
                      "committed" if req.data else "aborted")
            self._end_locally(req)
        elif not self._common(req, code):
            if code == E.UNKNOWN_PRODUCER_ID:
                cls = error_for_code(code)
                assert cls is not None
                self._abortable(cls(transactional_id=self.transactional_id), req)
            else:
                self._on_error(req, code, "EndTxn")

    def _on_error(self, req: _Request, code: int, what: str, **context: Any) -> None:
        cls = error_for_code(code)
        assert cls is not None
        err = cls(f"{what} failed", transactional_id=self.transactional_id, **context)
        if code in (E.GROUP_AUTHORIZATION_FAILED, E.FENCED_INSTANCE_ID, E.UNKNOWN_PRODUCER_ID,
                    E.TOPIC_AUTHORIZATION_FAILED):
            self._abortable(err, req)
        else:
            self._fatal(err, req)
