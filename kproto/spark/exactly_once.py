"""The "kproto" sink's exactly-once mode (option ``exactlyOnce=true``).

Each write task writes its Spark partition in a Kafka transaction of its own and
leaves it open (:meth:`kproto.Producer.prepare_transaction`); its commit message
carries the transactional id, producer id and epoch. When Spark commits the job
(a batch write) or the micro-batch (a stream), the driver checks that every
task's transaction is still open, then ends them all with EndTxn
(:func:`kproto.producer.transactions.commit_transaction`, the way Flink's ``KafkaSink``
commits transactions its writers began); when Spark aborts, it aborts them.

Transactional ids are ``<base>-<Spark partition>``: the base is
``<transactionalIdPrefix>-<job>`` for a batch write (a fresh job id per write)
and, for a stream, ``<transactionalIdPrefix>`` (default
``kproto-spark-<query id>``: the id Spark keeps in the checkpoint). Every
attempt of a task uses the same id, so the ``init_transactions`` of a retried
or speculative attempt fences the earlier attempt and aborts what it left open.

Streams: each task also commits, in its transaction, the micro-batch id as the
offset of a consumer group of its own (named as its transactional id;
TxnOffsetCommit with the metadata :data:`MARKER`). A task of a micro-batch
replayed after a driver restart finds its batch there and writes nothing; a
task whose transaction was never committed writes the batch again (the old
transaction was aborted by its ``init_transactions``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage

from ..admin import Admin
from ..errors import (
    ConfigError,
    IllegalStateError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KprotoError,
    ProducerFencedError,
    UnsupportedVersionError,
)
from ..producer.producer import Producer
from ..producer.transactions import PreparedTransaction, abort_transaction, commit_transaction
from ..structs import OffsetAndMetadata
from .options import _bool, _option, settings_for

__all__ = ["ExactlyOnce", "TaskTransaction", "TransactionCommitMessage", "ExactlyOnceCommitError",
           "commit_all", "abort_all", "MARKER", "DEFAULT_TRANSACTION_TIMEOUT_MS"]

log = logging.getLogger("kproto.spark")

#: The sink's transaction timeout unless ``kafka.transaction.timeout.ms`` is given:
#: Kafka brokers' default cap (``transaction.max.timeout.ms``, 15 minutes).
DEFAULT_TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000
#: The metadata of a stream task's batch marker (its offset is the batch id).
MARKER = "kproto.spark batch"
#: Transactions ended at once by the driver (each on connections of its own).
_THREADS = 8
#: How long the driver tries to fence the transactional id of a failed task.
_FENCE_TIMEOUT = 30.0


class ExactlyOnceCommitError(IllegalStateError):
    """The driver could not commit every task's transaction. ``committed``: the
    Spark partitions whose transactions were committed (an empty list: nothing
    of the job is visible to read_committed readers); ``failed``: partition ->
    the error."""

    def __init__(self, message: str, committed: Sequence[int] = (),
                 failed: Mapping[int, BaseException] | None = None) -> None:
        super().__init__(message)
        self._message = message
        self.committed = sorted(committed)
        self.failed = dict(failed or {})

    def __reduce__(self) -> Any:
        return (type(self), (self._message, self.committed, self.failed))


class TaskInfo(NamedTuple):
    """What a write task knows of itself (from Spark's TaskContext)."""

    partition: int
    attempt: int
    #: the micro-batch's id (streams), None for a batch write
    batch_id: int | None
    #: the streaming query's id (kept in the checkpoint across restarts)
    query_id: str | None


def task_info() -> TaskInfo:
    """This task's partition, attempt, micro-batch id and query id."""
    ctx = TaskContext.get()
    if ctx is None:
        raise IllegalStateError("exactly-once writing runs in a Spark task (no TaskContext)")
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return TaskInfo(ctx.partitionId(), ctx.attemptNumber(),
                    None if batch is None else int(batch),
                    ctx.getLocalProperty("sql.streaming.queryId"))


@dataclass(frozen=True)
class ExactlyOnce:
    """The exactly-once part of one write's options (sent to every task)."""

    #: the ``transactionalIdPrefix`` option
    prefix: str | None
    #: a batch write's own id (None for a stream)
    job: str | None

    @classmethod
    def from_options(cls, options: Mapping[str, str], settings: dict[str, Any],
                     streaming: bool) -> ExactlyOnce | None:
        """None unless ``exactlyOnce=true``; checks the producer ``settings`` and
        sets their transaction timeout (:data:`DEFAULT_TRANSACTION_TIMEOUT_MS`
        unless ``kafka.transaction.timeout.ms`` is given)."""
        prefix = _option(options, "transactionalIdPrefix")
        if settings.get("transactional_id") is not None:
            raise ConfigError("option 'kafka.transactional.id' is not supported: the sink names "
                              "its transactions (exactlyOnce=true, transactionalIdPrefix)")
        if not _bool(options, "exactlyOnce", False):
            if prefix is not None:
                raise ConfigError("option 'transactionalIdPrefix' needs exactlyOnce=true")
            return None
        if prefix is not None and not prefix.strip():
            raise ConfigError("option 'transactionalIdPrefix' must not be empty")
        if settings.get("acks") != -1:
            raise ConfigError("exactlyOnce=true needs kafka.acks=all (transactions imply "
                              f"idempotence), not {settings.get('acks')!r}")
        if _option(options, "kafka.transaction.timeout.ms") is None:
            settings["transaction_timeout_ms"] = DEFAULT_TRANSACTION_TIMEOUT_MS
        return cls(prefix, None if streaming else uuid.uuid4().hex[:16])

    def base(self, task: TaskInfo | None = None) -> str:
        """The transactional ids' common part: ``<base>-<partition>`` is a task's
        (a stream's default needs the ``task``, which knows the query id)."""
        if self.job is not None:
            return f"{self.prefix or 'kproto-spark'}-{self.job}"
        if self.prefix:
            return self.prefix
        if task is None or not task.query_id:
            raise IllegalStateError("a streaming write without a query id: set the option "
                                    "transactionalIdPrefix")
        return f"kproto-spark-{task.query_id}"


@dataclass(frozen=True)
class TransactionCommitMessage(WriterCommitMessage):
    """What one exactly-once write task did: ``prepared`` is its open transaction
    (None when it holds nothing); ``skipped``: a replayed micro-batch this task
    had committed already."""

    records: int
    batches: int
    partition: int
    transactional_id: str
    prepared: PreparedTransaction | None
    batch_id: int | None = None
    skipped: bool = False


class TaskTransaction:
    """One write task's transaction (on an executor): :attr:`producer` is
    initialised (earlier attempts fenced) and in a transaction unless
    :attr:`skip` (the task's micro-batch is committed already)."""

    def __init__(self, settings: Mapping[str, Any], eo: ExactlyOnce,
                 task: TaskInfo | None = None) -> None:
        task = task if task is not None else task_info()
        if eo.job is not None and task.batch_id is not None:
            # a batch write inside a stream's foreachBatch: a job of its own, no markers
            task = task._replace(batch_id=None)
        self.task = task
        self.transactional_id = f"{eo.base(self.task)}-{self.task.partition}"
        self.settings = settings
        self.topic: str | None = None       # the first topic written: the marker's
        self.producer = Producer({**settings, "transactional_id": self.transactional_id})
        try:
            self._init()
            self.skip = self.task.batch_id is not None and \
                self.committed_batch() >= self.task.batch_id
            if self.skip:
                log.info("%s: micro-batch %d is committed already, not written again",
                         self.transactional_id, self.task.batch_id)
            else:
                self.producer.begin_transaction()
        except BaseException:
            self.producer.close()
            raise

    def _init(self) -> None:
        try:
            self.producer.init_transactions()
        except IllegalStateError as exc:
            if isinstance(exc.__cause__, InvalidTransactionTimeoutError):
                ms = self.settings.get("transaction_timeout_ms")
                raise ConfigError(
                    f"the broker refuses a transaction timeout of {ms} ms (above its "
                    "transaction.max.timeout.ms): set the option kafka.transaction.timeout.ms "
                    "lower, or raise the broker's cap") from exc
            raise

    def committed_batch(self) -> int:
        """The last micro-batch this task committed (-1: none), from its marker group."""
        with Admin(settings_for(self.settings, "admin")) as admin:
            offsets = admin.list_consumer_group_offsets(self.transactional_id, metadata=True)
        return max((o.offset for o in offsets.values() if o.metadata == MARKER), default=-1)

    def wrote(self, topic: str) -> None:
        """Records of ``topic`` were sent in the transaction."""
        if self.topic is None:
            self.topic = topic

    def skipped(self) -> TransactionCommitMessage:
        self.producer.close()
        return TransactionCommitMessage(0, 0, self.task.partition, self.transactional_id, None,
                                        self.task.batch_id, True)

    def prepare(self, records: int, batches: int) -> TransactionCommitMessage:
        """Flush, add the batch marker (streams) and leave the transaction open."""
        batch_id = self.task.batch_id
        if batch_id is not None and self.topic is not None:
            # any partition that exists will do: the group is this task's alone
            self.producer.send_offsets_to_transaction(
                {(self.topic, 0): OffsetAndMetadata(batch_id, MARKER)}, self.transactional_id)
        prepared = self.producer.prepare_transaction()
        return TransactionCommitMessage(records, batches, self.task.partition,
                                        self.transactional_id, prepared, batch_id)

    def abort(self) -> None:
        """The task failed: abort its transaction now if possible (a later attempt
        or the driver fences it otherwise)."""
        try:
            self.producer.abort_transaction(timeout=10)
        except KprotoError as exc:
            log.info("%s: abort after a failed task: %s", self.transactional_id, exc)


# --------------------------------------------------------------------------- the driver


def _prepared(messages: Sequence[Any]) -> list[tuple[int, PreparedTransaction]]:
    return [(m.partition, m.prepared) for m in messages
            if isinstance(m, TransactionCommitMessage) and m.prepared is not None]


def _each(fn: Any, items: list[Any]) -> list[tuple[Any, BaseException | None]]:
    """``fn(item)`` for every item, up to :data:`_THREADS` at once: (item, error)."""
    def run(item: Any) -> tuple[Any, BaseException | None]:
        try:
            fn(item)
        except Exception as exc:    # noqa: BLE001 - reported per item
            return item, exc
        return item, None

    if not items:
        return []
    with ThreadPoolExecutor(min(_THREADS, len(items)), thread_name_prefix="kproto-eos") as pool:
        return list(pool.map(run, items))


def _not_open(prepared: list[tuple[int, PreparedTransaction]], settings: Mapping[str, Any]
              ) -> dict[int, str] | None:
    """The tasks whose transaction is no longer open as they left it (aborted at
    its timeout, fenced by a later attempt), with what the coordinator says; None
    when the brokers cannot tell (no DescribeTransactions)."""
    found: dict[str, Any] = {}

    def describe(chunk: list[str]) -> None:
        with Admin(settings_for(settings, "admin")) as admin:
            for d in admin.describe_transactions(chunk):
                found[d.transactional_id] = d

    ids = [p.transactional_id for _, p in prepared]
    chunks = [ids[i::_THREADS] for i in range(min(_THREADS, len(ids)))]
    for _, exc in _each(describe, chunks):
        if isinstance(exc, UnsupportedVersionError):
            log.debug("no DescribeTransactions: committing without checking first (%s)", exc)
            return None
        if exc is not None:
            raise exc
    bad = {}
    for part, p in prepared:
        d = found.get(p.transactional_id)
        if d is None:
            bad[part] = "unknown to its coordinator"
        elif not _still_ours(d, p):
            bad[part] = (f"{d.state}, producer id {d.producer_id} epoch {d.producer_epoch} "
                         f"(the task left producer id {p.producer_id} epoch "
                         f"{p.producer_epoch} open)")
    return bad


def _still_ours(d: Any, p: PreparedTransaction) -> bool:
    """Is the coordinator's ``d`` the transaction ``p`` left open, or that transaction
    committed (a commit called again; transaction version 2 bumps the epoch then)?"""
    if d.producer_id != p.producer_id:
        return False
    if d.state == "Ongoing":
        return d.producer_epoch == p.producer_epoch
    return d.state in ("PrepareCommit", "CompleteCommit") and \
        d.producer_epoch in (p.producer_epoch, p.producer_epoch + 1)


def commit_all(messages: Sequence[Any], settings: Mapping[str, Any], what: str) -> None:
    """On the driver: commit every task's transaction (``what`` names the job or
    micro-batch in errors). First every one is checked to be still open: if one
    is not (the broker aborted it at its timeout, a later attempt fenced it),
    all are aborted and :class:`ExactlyOnceCommitError` says nothing was
    committed. Committing a committed transaction again succeeds."""
    prepared = _prepared(messages)
    bad = _not_open(prepared, settings) if prepared else None
    if bad:
        _abort_prepared(prepared, settings)
        raise ExactlyOnceCommitError(
            f"{what}: not committed, every task's transaction was aborted: the transactions of "
            f"Spark partitions {sorted(bad)} are no longer open (" +
            "; ".join(f"{k}: {v}" for k, v in sorted(bad.items())) + "): the broker aborts a "
            "transaction open longer than kafka.transaction.timeout.ms (capped by its "
            "transaction.max.timeout.ms), and a later attempt of a task (speculation) fences "
            "the earlier one", failed={k: IllegalStateError(v) for k, v in bad.items()})
    results = _each(lambda item: commit_transaction(item[1], settings), prepared)
    failed = {item[0]: exc for item, exc in results if exc is not None}
    if failed:
        committed = [item[0] for item, exc in results if exc is None]
        raise ExactlyOnceCommitError(
            f"{what}: the transactions of Spark partitions {sorted(failed)} could not be "
            f"committed ({'; '.join(f'{k}: {v}' for k, v in sorted(failed.items()))}); "
            + (f"those of {sorted(committed)} were: the output holds part of it" if committed
               else "none was committed"), committed, failed)
    log.info("%s: committed %d transactions", what, len(prepared))


def _abort_prepared(prepared: list[tuple[int, PreparedTransaction]],
                    settings: Mapping[str, Any]) -> None:
    for (part, p), exc in _each(lambda item: abort_transaction(item[1], settings), prepared):
        if exc is not None and not isinstance(exc, (ProducerFencedError, InvalidTxnStateError)):
            log.warning("could not abort the transaction %s of Spark partition %d (the broker "
                        "aborts it at its timeout): %s", p.transactional_id, part, exc)


def _fence(transactional_id: str, settings: Mapping[str, Any]) -> None:
    """Abort whatever ``transactional_id`` left open (InitProducerId fences it)."""
    with Producer({**settings, "transactional_id": transactional_id}) as p:
        p.init_transactions(_FENCE_TIMEOUT)


def abort_all(messages: Sequence[Any], settings: Mapping[str, Any], base: str | None) -> None:
    """On the driver, when Spark aborts: abort the transactions tasks prepared, and
    fence the transactional ids of the tasks that failed (their last attempt may
    have left a transaction open). ``base``: the ids' common part if known, else
    taken from a message. Errors are logged: the job's failure is what matters."""
    _abort_prepared(_prepared(messages), settings)
    if base is None:
        base = next((m.transactional_id.rsplit("-", 1)[0] for m in messages
                     if isinstance(m, TransactionCommitMessage)), None)
    if base is None:
        return      # no task finished; their next attempt or the broker's timeout ends them
    failed = [f"{base}-{i}" for i, m in enumerate(messages) if m is None]
    for tid, exc in _each(lambda tid: _fence(tid, settings), failed):
        if exc is not None:
            log.warning("could not fence the transactional id %s of a failed task (the broker "
                        "aborts what it left open at its timeout): %s", tid, exc)
