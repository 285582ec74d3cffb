"""The transactional producer's transaction manager: Java's ``TransactionManager``,
its transactional half (the idempotence half is :mod:`kproto.producer.idempotence`).

States, as Java's::

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING / ABORTING -> READY
    IN_TRANSACTION, COMMITTING -> ABORTABLE_ERROR -> ABORTING (abort_transaction() only)
    any -> FATAL_ERROR (fenced, not authorised...: only close() is left)

Threads: the caller's methods (``init``, ``begin``, ``send_offsets``, ``commit``,
``abort``, ``prepare``, ``check_send``) check and change the state and queue
requests, under the accumulator's lock; the sender thread runs the queued
requests (:meth:`TransactionManager.run`), one per turn of its loop, each a
blocking round trip to the coordinator on a connection of its own, in Java's
priority order (InitProducerId, then AddPartitionsToTxn / AddOffsetsToTxn /
TxnOffsetCommit, then EndTxn once no record of the transaction is unsent, then
an epoch bump). The caller waits for the outcome (:class:`TxnResult`) at most
``max_block_ms`` or its own timeout; a call that timed out may be made again
and waits for the same outcome (KIP-588).

Partitions join the transaction as the sender meets them: a batch for a
partition not yet in it waits (:meth:`TransactionManager.allows` says no)
until AddPartitionsToTxn has added it. With transaction version 2 (KIP-890,
where the cluster finalizes ``transaction.version`` >= 2) the Produce request
(v12+) adds it and EndTxn (v5+) bumps the epoch every time.

Errors are classified as Java's client classifies them: coordinator moves
and loads, CONCURRENT_TRANSACTIONS and other retriable errors are retried
after ``retry_backoff_ms``; PRODUCER_FENCED and INVALID_PRODUCER_EPOCH from
the coordinator (another producer took the transactional id, or the broker
aborted the transaction at its timeout and bumped the epoch), authorisation
and INVALID_TXN_STATE errors are fatal; a failed record batch, a refused
offset commit, UNKNOWN_PRODUCER_ID and TRANSACTION_ABORTABLE are abortable.
After an abortable error the abort is followed by InitProducerId with the
current producer id and epoch (KIP-360), which bumps the epoch, and every
partition's sequences start again at 0 (kproto does this after every error,
as it does not rewrite the sequences of a failed transaction's batches).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Mapping
from typing import Any

from ..errors import (
    AbortableTransactionError,
    BrokerError,
    IllegalStateError,
    KafkaTimeoutError,
    KprotoError,
    ProducerFencedError,
    TransactionAbortedError,
)
from ..net.blocking import BrokerConnection
from ..net.cluster import Cluster
from ..protocol import ApiKey
from ..structs import ConsumerGroupMetadata, OffsetAndMetadata, as_tp
from .accumulator import RecordAccumulator
from .idempotence import IdempotenceState
from .transaction_requests import (
    _FATAL_TYPES,
    _FENCED,
    TxnRequests,
    TxnResult,
    _Request,
)
from .transaction_requests import E as E
from .transaction_requests import State as S
from .transaction_requests import State as State
from .transactions import PRODUCE_V1_MAX, CoordinatorLinks, PreparedTransaction

__all__ = ["TransactionManager", "TxnResult", "State"]

log = logging.getLogger("kproto.producer")

class TransactionManager(TxnRequests):
    """A transactional producer's state and coordinator requests (see the module
    docstring). ``config``: the producer's settings."""

    def __init__(self, config: Mapping[str, Any], cluster: Cluster,
                 accumulator: RecordAccumulator) -> None:
        self.transactional_id: str = config["transactional_id"]
        self.timeout_ms: int = config["transaction_timeout_ms"]
        self._max_block = config["max_block_ms"] / 1000
        self._backoff = config["retry_backoff_ms"] / 1000
        self._acc = accumulator
        self._cond = accumulator.cond
        self._links = CoordinatorLinks(cluster)
        self.state = S.UNINITIALIZED
        self.last_error: BaseException | None = None
        self.producer_id, self.epoch = -1, -1
        #: transaction version 2 (KIP-890): Produce adds partitions, EndTxn bumps
        self.tv2 = False
        self._can_bump = False          # InitProducerId v3+ (KIP-360)
        self._bump_required = False
        self._started = False           # something was added to the transaction
        self._prepared = False
        self._flushing = False
        self._new: set[tuple[str, int]] = set()         # to add
        self._pending: set[tuple[str, int]] = set()     # being added
        self._added: set[tuple[str, int]] = set()
        self._queue: list[_Request] = []
        self._call: tuple[str, TxnResult] | None = None  # Java's pendingTransition
        self._order = itertools.count()

    # ------------------------------------------------------------------ the caller's side

    def init(self, timeout: float | None) -> None:
        with self._cond:
            res = self._cached("init_transactions")
            if res is None:
                self._raise_if_error()
                if self.state is not S.UNINITIALIZED:
                    raise IllegalStateError(f"init_transactions: the producer is {self.state.value}"
                                            " (it is called once, first)")
                self.state = S.INITIALIZING
                res = self._enqueue("init", "init_transactions")
                self._call = ("init_transactions", res)
        self._wait(res, timeout)

    def begin(self) -> None:
        with self._cond:
            self._no_call_pending("begin_transaction")
            self._raise_if_error()
            if self.state is not S.READY:
                raise IllegalStateError(f"begin_transaction: the producer is {self.state.value}"
                                        + (" (call init_transactions() first)"
                                           if self.state is S.UNINITIALIZED else ""))
            self.state, self._prepared = S.IN_TRANSACTION, False

    def check_send(self) -> None:
        """Raise unless records may be sent now (read without the lock: the state
        only changes under it, and a send racing a commit is the caller's bug)."""
        state = self.state
        if state is S.IN_TRANSACTION and not self._prepared:
            return
        if state is S.FATAL_ERROR or state is S.ABORTABLE_ERROR:
            with self._cond:
                self._raise_if_error()
        why = ("call init_transactions() first" if state is S.UNINITIALIZED
               else "the transaction is prepared" if self._prepared
               else "call begin_transaction() first")
        raise IllegalStateError(f"cannot send: the producer is {state.value} ({why})")

    def send_offsets(self, offsets: Mapping[Any, Any], group: ConsumerGroupMetadata | str,
                     timeout: float | None) -> None:
        gm = group if isinstance(group, ConsumerGroupMetadata) else ConsumerGroupMetadata(
            str(group))
        todo = {as_tp(tp): v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
                for tp, v in offsets.items()}
        with self._cond:
            self._no_call_pending("send_offsets_to_transaction")
            self._raise_if_error()
            if self.state is not S.IN_TRANSACTION or self._prepared:
                raise IllegalStateError("send_offsets_to_transaction: no transaction in progress"
                                        f" (the producer is {self.state.value})")
            if not todo:
                return
            if self.tv2:        # KIP-890: no AddOffsetsToTxn
                self._started = True
                res = self._enqueue("offset_commit", "send_offsets_to_transaction", (todo, gm))
            else:
                res = self._enqueue("add_offsets", "send_offsets_to_transaction", (todo, gm))
        self._wait(res, timeout)

    def commit(self, timeout: float | None) -> None:
        self._complete(True, timeout)

    def abort(self, timeout: float | None) -> None:
        self._complete(False, timeout)

    def _complete(self, commit: bool, timeout: float | None) -> None:
        what = "commit_transaction" if commit else "abort_transaction"
        with self._cond:
            res = self._cached(what)
            if res is None:
                if commit or self.state is S.FATAL_ERROR:
                    self._raise_if_error()
                allowed = (S.IN_TRANSACTION,) if commit else (S.IN_TRANSACTION, S.ABORTABLE_ERROR)
                if self.state not in allowed:
                    raise IllegalStateError(f"{what}: no transaction in progress (the producer "
                                            f"is {self.state.value})")
                self.state = S.COMMITTING if commit else S.ABORTING
                if not commit:
                    self._new.clear()
                res = self._enqueue("end_txn", what, commit)
                if not self._flushing:
                    self._acc.flushing += 1
                    self._flushing = True
                self._call = (what, res)
                self._cond.notify_all()
        self._wait(res, timeout)

    def prepare(self) -> PreparedTransaction | None:
        """After a flush: the transaction, left open for another process to end
        (None when it holds nothing: there is nothing to end)."""
        with self._cond:
            self._no_call_pending("prepare_transaction")
            self._raise_if_error()
            if self.state is not S.IN_TRANSACTION:
                raise IllegalStateError(f"prepare_transaction: no transaction in progress (the "
                                        f"producer is {self.state.value})")
            if self._acc.incomplete or self._new or self._pending:
                raise IllegalStateError("prepare_transaction: records are still unsent")
            self._prepared = True
            if not self._started:
                return None
            return PreparedTransaction(self.transactional_id, self.producer_id, self.epoch)

    def fail_pending(self, error: BaseException) -> None:
        """The producer closes: every call waiting for the sender fails."""
        with self._cond:
            for req in self._queue:
                req.result.finish(error)
            self._queue.clear()
            self._stop_flushing()

    # -- caller helpers (locked)

    def _cached(self, what: str) -> TxnResult | None:
        if self._call is None:
            return None
        op, res = self._call
        if op != what:
            raise IllegalStateError(f"cannot {what}: the previous {op} timed out and must be "
                                    "called again first")
        return res

    def _no_call_pending(self, what: str) -> None:
        if self._call is not None:
            raise IllegalStateError(f"cannot {what}: the previous {self._call[0]} timed out and "
                                    "must be called again first")

    def _wait(self, res: TxnResult, timeout: float | None) -> None:
        try:
            res.wait(self._max_block if timeout is None else timeout)
        except KafkaTimeoutError:
            if not res.done:
                raise           # the call stays pending: calling again waits on
            self._ack(res)
            raise
        except BaseException:
            self._ack(res)
            raise
        self._ack(res)

    def _ack(self, res: TxnResult) -> None:
        with self._cond:
            if self._call is not None and self._call[1] is res:
                self._call = None

    def _raise_if_error(self) -> None:
        if self.state is S.FATAL_ERROR:
            err = self.last_error
            if isinstance(err, ProducerFencedError):
                raise ProducerFencedError(err.message, **err.context)
            raise IllegalStateError(f"the transactional producer {self.transactional_id!r} "
                                    f"failed for good (close it): {err}") from err
        if self.state is S.ABORTABLE_ERROR:
            raise AbortableTransactionError(
                "the transaction cannot go on: call abort_transaction()", self.last_error)

    def _enqueue(self, kind: str, what: str, data: Any = None, *,
                 result: TxnResult | None = None) -> TxnResult:
        res = result if result is not None else TxnResult(what)
        self._queue.append(_Request(kind, res, data, next(self._order)))
        self._cond.notify_all()
        return res

    # ------------------------------------------------------------------ the sender's side

    def allows(self, batch: Any) -> bool:
        """*locked*: may ``batch`` be sent? Its partition must be in the transaction;
        one that is not yet is queued for AddPartitionsToTxn (Java's maybeAddPartition)."""
        tp = (batch.topic, batch.partition)
        if tp in self._added:
            return self.state is not S.FATAL_ERROR
        if self.state is S.IN_TRANSACTION or self.state is S.COMMITTING:
            if self.tv2:
                self._added.add(tp)
                self._started = True
                return True
            if tp not in self._pending:
                self._new.add(tp)
        return False

    def produce_version(self, conn: BrokerConnection) -> int | None:
        """The Produce version for a transactional request on ``conn``: the first
        protocol's newest (v11) unless transaction version 2 is on."""
        return None if self.tv2 else min(conn.versions.get(ApiKey.PRODUCE, 0), PRODUCE_V1_MAX)

    def batch_failed(self, exc: BaseException) -> None:
        """A batch of the transaction failed for good (Java's handleFailedBatch)."""
        if isinstance(exc, TransactionAbortedError):
            return
        with self._cond:
            if isinstance(exc, _FATAL_TYPES):
                self._fatal(exc)
            else:
                self._abortable(exc)

    def busy(self) -> bool:
        """*locked*: is there a request to send at once?"""
        return self._adding() or self._ready_request(time.monotonic(), peek=True) is not None

    def next_wake(self, now: float) -> float:
        """*locked*: when the next queued request is due (an EndTxn waiting for the
        transaction's batches is not: their answers wake the sender)."""
        if self._adding():
            return now
        waiting = bool(self._acc.incomplete)
        return min((r.next_try for r in self._queue if not (waiting and r.kind == "end_txn")),
                   default=now + 1.0)

    def _adding(self) -> bool:
        return bool(self._new) and (self.state is S.IN_TRANSACTION or self.state is S.COMMITTING)

    def run(self, idem: IdempotenceState) -> None:
        """The sender thread's step: fail batches an abort or a fatal error leaves
        unsent, then run the next due request (a blocking round trip)."""
        with self._cond:
            if idem.needs_producer_id and self.producer_id >= 0 and not self._bump_required \
                    and self.state in (S.IN_TRANSACTION, S.COMMITTING):
                self._abortable(KprotoError("a sequence gap: the transaction's batches cannot "
                                            "be written in order"))
            undrained = self._undrained_error()
            req = self._ready_request(time.monotonic())
            build = self._build(req) if req is not None else None
        if undrained is not None:
            error, everything = undrained
            if everything:
                self._acc.abort_incomplete(error)
            else:
                self._acc.abort_undrained(error, sequenced=self._bump_required)
        if req is None or build is None:
            return
        key, key_type, api_key, fields = build
        try:
            conn = self._links.get(key, key_type)
            version = self._version(api_key, conn)
            body = conn.request(api_key, fields, version=version)
        except KprotoError as exc:      # no answer, or one that cannot be read
            with self._cond:
                self._links.drop(key, key_type)
                if getattr(exc, "retriable", False):
                    self._retry(req, exc)
                elif isinstance(exc, BrokerError) and exc.code == E.GROUP_AUTHORIZATION_FAILED:
                    self._abortable(exc, req)
                else:
                    self._fatal(exc, req)
            return
        with self._cond:
            getattr(self, "_on_" + req.kind)(req, body, conn, version, idem)

    def close_links(self) -> None:
        """The sender thread stops: close the coordinator connections."""
        self._links.close()

    def abort_links(self) -> None:
        """close() gave up on the sender thread: its coordinator calls fail at once."""
        self._links.abort()

    # -- sender helpers (locked)

    def _undrained_error(self) -> tuple[BaseException, bool] | None:
        if not self._acc.incomplete:
            return None
        if self.state is S.FATAL_ERROR:
            assert self.last_error is not None
            return self.last_error, True
        if self.state is S.ABORTABLE_ERROR or self.state is S.ABORTING:
            cause = self.last_error
            err = TransactionAbortedError(f"transaction {self.transactional_id!r} aborted"
                                          + (f" after: {cause}" if cause else ""))
            err.__cause__ = cause
            return err, False
        return None

    def _ready_request(self, now: float, *, peek: bool = False) -> _Request | None:
        """The request to send now, by priority (Java's nextRequest); with ``peek``
        nothing changes."""
        if not peek and self._adding() and not any(
                r.kind == "add_partitions" and r.data is None for r in self._queue):
            self._enqueue("add_partitions", "add partitions", None)
        while self._queue:
            req = min(self._queue, key=lambda r: r.key)
            if peek:
                ok = req.next_try <= now and not (req.kind == "end_txn" and self._acc.incomplete)
                return req if ok else None
            if req.next_try > now or (req.kind == "end_txn" and self._acc.incomplete):
                return None
            if self.state is S.FATAL_ERROR or (self.state is S.ABORTABLE_ERROR) or (
                    self.state is S.ABORTING and req.kind in ("add_partitions", "add_offsets",
                                                             "offset_commit")):
                self._queue.remove(req)
                self._fail_request(req)
                continue
            if req.kind == "end_txn" and not self._started:
                self._queue.remove(req)      # nothing reached the coordinator: end it here
                log.debug("%s: ending a transaction that holds nothing, locally",
                          self.transactional_id)
                self._end_locally(req)
                continue
            if req.kind == "add_partitions" and req.data is None:
                req.data = set(self._new)
                self._pending |= self._new
                self._new.clear()
                if not req.data:
                    self._queue.remove(req)
                    continue
            return req
        return None

    def _fail_request(self, req: _Request) -> None:
        err: BaseException
        if self.state is S.FATAL_ERROR or self.state is S.ABORTABLE_ERROR:
            try:
                self._raise_if_error()
            except KprotoError as exc:
                err = exc
        else:
            err = TransactionAbortedError(f"{req.result.what}: the transaction is being aborted")
        self._drop(req, err)

    def _drop(self, req: _Request, err: BaseException) -> None:
        """Fail ``req``'s call (and every request sharing its result)."""
        for other in [r for r in self._queue if r.result is req.result]:
            self._queue.remove(other)
        if req.kind in ("end_txn", "bump"):
            self._stop_flushing()
        req.result.finish(err)

    def _stop_flushing(self) -> None:
        if self._flushing:
            self._acc.flushing -= 1
            self._flushing = False

    def _fatal(self, exc: BaseException, req: _Request | None = None) -> None:
        if isinstance(exc, BrokerError) and exc.code in _FENCED:
            exc = self._fenced()
        log.warning("%s: fatal error: %s", self.transactional_id, exc)
        self.state, self.last_error = S.FATAL_ERROR, exc
        self._stop_flushing()
        for r in [req, *self._queue] if req is not None else list(self._queue):
            if r is not None:
                r.result.finish(self._error_for_caller())
        self._queue.clear()
        self._cond.notify_all()

    def _error_for_caller(self) -> KprotoError:
        try:
            self._raise_if_error()
        except KprotoError as exc:
            return exc
        raise AssertionError("no error")

    def _fenced(self) -> ProducerFencedError:
        return ProducerFencedError(
            f"producer id {self.producer_id} epoch {self.epoch} of transactional id "
            f"{self.transactional_id!r} is fenced: another producer initialised the id, or "
            f"the broker aborted the transaction after transaction_timeout_ms "
            f"({self.timeout_ms})", transactional_id=self.transactional_id)

    def _abortable(self, exc: BaseException, req: _Request | None = None) -> None:
        """The transaction must be aborted (Java's abortableErrorIfPossible: fatal when
        the epoch cannot be bumped afterwards, where a bump is needed)."""
        if not (self._can_bump or self.tv2):
            self._fatal(exc, req)
            return
        if not self.tv2:
            self._bump_required = True
        if self.state is not S.ABORTING:
            log.info("%s: abortable error: %s", self.transactional_id, exc)
            self.state, self.last_error = S.ABORTABLE_ERROR, exc
        if req is not None:
            self._drop(req, AbortableTransactionError(
                f"{req.result.what} failed; call abort_transaction()", exc))
        self._cond.notify_all()

    def _end_locally(self, req: _Request) -> None:
        """The transaction is over; after an error, bump the epoch before the call
        returns (KIP-360: the bump answers it)."""
        bump = self._bump_required and not self.tv2
        self._transaction_done(bump_next=bump)
        if bump:
            self._enqueue("bump", req.result.what, result=req.result)
        else:
            req.result.finish()

    def _transaction_done(self, *, bump_next: bool) -> None:
        """Java's completeTransaction."""
        self._new.clear()
        self._pending.clear()
        self._added.clear()
        self._started = self._prepared = False
        self._stop_flushing()
        self.state = S.INITIALIZING if bump_next else S.READY
        self._cond.notify_all()
