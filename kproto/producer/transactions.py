"""Ending a transaction another process began, and the coordinator links transactions use.

A transactional producer can write a transaction, flush it and stop before the
end (:meth:`kproto.Producer.prepare_transaction`): it hands over a
:class:`PreparedTransaction` - the transactional id, producer id and epoch - and
anyone holding that can commit or abort the transaction later, from any process,
with :func:`commit_transaction` / :func:`abort_transaction` (an EndTxn carrying
those three, the way Flink's ``KafkaSink`` resumes the transactions its writers
began). This is what an exactly-once sink needs whose writers and committer
are different processes (Spark's tasks and driver)::

    # in the writer (a Spark task)
    with Producer(bootstrap_servers=..., transactional_id="job-7-part-3") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send_batch("out", table)
        prepared = p.prepare_transaction()     # flushed; not committed
    # in the committer (the Spark driver), once every writer has prepared
    commit_transaction(prepared, bootstrap_servers=...)

Committing twice is harmless (Kafka answers a repeated commit of the same
producer id and epoch with success). The transaction must end within its
``transaction_timeout_ms``, or the broker aborts it; and a producer that calls
``init_transactions()`` with the same transactional id meanwhile fences it (the
broker aborts it too): both make :func:`commit_transaction` raise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..config import resolve
from ..errors import (
    BrokerError,
    ErrorCode,
    KafkaConnectionError,
    KafkaTimeoutError,
    KprotoError,
    ProducerFencedError,
    error_for_code,
)
from ..net.blocking import BrokerConnection
from ..net.cluster import Cluster, backoff_delays
from ..protocol import ApiKey
from ..protocol.requests import TRANSACTION, find_coordinator_fields

__all__ = ["PreparedTransaction", "commit_transaction", "abort_transaction",
           "CoordinatorLinks", "TRANSACTION_VERSION_2", "end_txn_version"]

log = logging.getLogger("kproto.producer")

#: The first transaction version of KIP-890 part 2 ("transaction.version" feature
#: level): the broker adds partitions when Produce (v12+) names the transaction,
#: and EndTxn (v5+) bumps the epoch of every transaction.
TRANSACTION_VERSION_2 = 2
#: The newest EndTxn / Produce versions of the first transaction protocol: a
#: newer one tells the broker the client speaks transaction version 2.
END_TXN_V1_MAX, PRODUCE_V1_MAX = 4, 11

_RETRY_END = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


class PreparedTransaction(NamedTuple):
    """A transaction written and flushed but not ended: what a committer needs to
    end it (picklable; send it to the process that commits)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def transaction_version(conn: BrokerConnection) -> int:
    """The cluster's finalized ``transaction.version`` as ``conn``'s broker reports
    it (0: the broker has no such feature, i.e. the first protocol)."""
    return int(conn.finalized_features.get("transaction.version", 0))


def end_txn_version(conn: BrokerConnection, tv2: bool) -> int:
    """The EndTxn version to send on ``conn``: v5+ only with transaction version 2."""
    version = conn.versions.get(ApiKey.END_TXN, 0)
    return version if tv2 else min(version, END_TXN_V1_MAX)


class CoordinatorLinks:
    """Connections to coordinators, each looked up once (FindCoordinator) and
    kept until :meth:`drop` (an answer or a failure says it moved). Used by one
    thread; every call makes at most one attempt and raises what went wrong."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._links: dict[tuple[int, str], BrokerConnection] = {}

    def get(self, key: str, key_type: int = TRANSACTION) -> BrokerConnection:
        """The connected coordinator of ``key`` (a transactional id, or with
        ``key_type`` GROUP a group id)."""
        conn = self._links.get((key_type, key))
        if conn is not None and conn.connected:
            return conn
        body = self.cluster.request_any(ApiKey.FIND_COORDINATOR,
                                        find_coordinator_fields(key, key_type))
        found = body["coordinators"][0] if body.get("coordinators") else body
        cls = error_for_code(found["error_code"])
        if cls is not None:
            what = "transactional_id" if key_type == TRANSACTION else "group"
            raise cls(found.get("error_message") or "FindCoordinator failed", **{what: key})
        host, port = found["host"], found["port"]
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if conn is not None:
            conn.close()
        conn = self._links[(key_type, key)] = self.cluster.new_connection(address)
        return conn.connect()

    def drop(self, key: str, key_type: int = TRANSACTION) -> None:
        """Forget the coordinator of ``key`` (found again on the next :meth:`get`)."""
        conn = self._links.pop((key_type, key), None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for conn in self._links.values():
            conn.close()
        self._links.clear()

    def abort(self) -> None:
        """From another thread: a call blocked on a coordinator connection fails at once."""
        for conn in list(self._links.values()):
            conn.abort()


def commit_transaction(prepared: PreparedTransaction, config: Mapping[str, Any] | None = None,
                       *, timeout_ms: int | None = None, **settings: Any) -> None:
    """Commit a transaction another producer prepared (see the module docstring).

    ``config``/``settings``: client settings (``bootstrap_servers``, security...).
    Retries while the coordinator moves or loads, until ``timeout_ms`` (default
    ``request_timeout_ms``). Raises :class:`~kproto.errors.ProducerFencedError`
    when the transactional id was initialised again since (the transaction was
    aborted then, unless it had been committed before), and
    :class:`~kproto.errors.InvalidTxnStateError` when the transaction was
    aborted (by its producer, or by the broker after its timeout). Committing a
    committed transaction succeeds."""
    _end(prepared, True, config, timeout_ms, settings)


def abort_transaction(prepared: PreparedTransaction, config: Mapping[str, Any] | None = None,
                      *, timeout_ms: int | None = None, **settings: Any) -> None:
    """Abort a transaction another producer prepared; as :func:`commit_transaction`
    (aborting an aborted transaction succeeds)."""
    _end(prepared, False, config, timeout_ms, settings)


def _end(prepared: PreparedTransaction, commit: bool, config: Mapping[str, Any] | None,
         timeout_ms: int | None, settings: dict[str, Any]) -> None:
    txn_id, pid, epoch = prepared
    cluster = Cluster(resolve("producer", config, **settings))
    links = CoordinatorLinks(cluster)
    deadline = time.monotonic() + (cluster.request_timeout if timeout_ms is None
                                   else timeout_ms / 1000)
    delays = iter(backoff_delays(cluster.retry_backoff_ms, cluster.retry_backoff_max_ms))
    what = "commit" if commit else "abort"
    try:
        while True:
            try:
                conn = links.get(txn_id)
                body = conn.request(ApiKey.END_TXN, {
                    "transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                    "committed": commit},
                    version=end_txn_version(conn, transaction_version(conn)
                                            >= TRANSACTION_VERSION_2))
                code = body["error_code"]
                if code == ErrorCode.NONE:
                    log.debug("%s of transaction %s (producer %d epoch %d) done", what, txn_id,
                              pid, epoch)
                    return
                if code in _FENCED:
                    raise ProducerFencedError(
                        f"cannot {what} transaction {txn_id!r} of producer id {pid} epoch "
                        f"{epoch}: the transactional id was initialised again since",
                        transactional_id=txn_id)
                cls = error_for_code(code)
                assert cls is not None
                if code not in _RETRY_END:
                    raise cls(f"EndTxn ({what}) failed", transactional_id=txn_id,
                              producer_id=pid, producer_epoch=epoch)
                if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                    links.drop(txn_id)
                exc: KprotoError = cls(f"EndTxn ({what})", transactional_id=txn_id)
            except (KafkaConnectionError, KafkaTimeoutError, BrokerError) as err:
                if not err.retriable:
                    raise
                links.drop(txn_id)
                exc = err
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"{what} of transaction {txn_id!r} not done within "
                                        f"the timeout (last error: {exc})") from exc
            time.sleep(min(next(delays), max(0.0, deadline - time.monotonic())))
    finally:
        links.close()
        cluster.close()

