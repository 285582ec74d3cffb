"""kproto's transactional producer (issue 18), on the test brokers, read by kproto and
confluent-kafka.

noida-db implements transactions for real (read_committed hides aborted
records, the last stable offset stops at an open transaction, a second
producer with the same transactional id fences the first). Tansu and
librdkafka's mock cluster accept the same requests but do not honour
read_committed (their readers see aborted records too, confluent-kafka's
included); the mock does not fence either (a second InitProducerId gets a new
producer id). Each test says where it runs; docs/brokers.md has the table.
Injected coordinator errors use the mock's own error injection
(``MockCluster.push_request_errors``). Record values carry a tag (the
transaction), the partition, a sequence number and a CRC (tests/noida_support.py)
and are checked one by one.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from kproto import Admin, Consumer, OffsetAndMetadata, Producer
from kproto.errors import (
    AbortableTransactionError,
    IllegalStateError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortedError,
)
from kproto.producer.transactions import PreparedTransaction, abort_transaction, commit_transaction
from kproto.protocol import ApiKey

from .noida_support import parse, value

pytestmark = pytest.mark.broker

PARTS = 3
E_NOT_COORDINATOR, E_LOADING, E_CONCURRENT = 16, 14, 51
E_INVALID_EPOCH, E_FENCED, E_INVALID_TXN_STATE = 47, 90, 48


def _settings(broker: Any) -> dict[str, Any]:
    # the mock writes its transaction markers with CRC 0 (tests/test_noida_transactions.py)
    return {"bootstrap_servers": broker.bootstrap, "check_crcs": broker.name != "mock"}


def _producer(broker: Any, txn_id: str, **extra: Any) -> Producer:
    return Producer(bootstrap_servers=broker.bootstrap, transactional_id=txn_id, linger_ms=2,
                    request_timeout_ms=10000, **extra)


def _rows(tag: bytes, start: dict[int, int], n: int) -> tuple[pa.Table, dict[int, int]]:
    """``n`` records per partition, as a table with a partition column."""
    parts, values = [], []
    seq = dict(start)
    for _ in range(n):
        for p in range(PARTS):
            parts.append(p)
            values.append(value(p, seq[p], tag))
            seq[p] += 1
    return pa.table({"partition": pa.array(parts, pa.int32()), "value": values}), seq


def _send(p: Producer, topic: str, tag: bytes, seq: dict[int, int], n: int,
          batch: bool) -> dict[int, int]:
    table, after = _rows(tag, seq, n)
    if batch:
        p.send_batch(topic, table)
    else:
        for part, v in zip(table.column("partition").to_pylist(),
                           table.column("value").to_pylist(), strict=True):
            p.send(topic, v, partition=part)
    return after


def _read_kproto(broker: Any, topic: str, isolation: str) -> dict[int, list[tuple[bytes, int]]]:
    with Consumer(**_settings(broker), isolation_level=isolation) as c:
        table = c.read_range(topic, {p: ("earliest", "latest") for p in range(PARTS)})
    out: dict[int, list[tuple[bytes, int]]] = {p: [] for p in range(PARTS)}
    for part, v in zip(table.column("partition").to_pylist(), table.column("value").to_pylist(),
                       strict=True):
        tag, p, s = parse(v)
        assert p == part
        out[p].append((tag, s))
    return out


def _read_confluent(broker: Any, topic: str, isolation: str
                    ) -> dict[int, list[tuple[bytes, int]]]:
    import confluent_kafka

    c = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": f"r-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "isolation.level": isolation,
        "enable.partition.eof": True})
    out: dict[int, list[tuple[bytes, int]]] = {p: [] for p in range(PARTS)}
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                  for p in range(PARTS)])
        at_end: set[int] = set()
        deadline = time.monotonic() + 30
        while len(at_end) < PARTS and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is not None:
                    assert m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, \
                        m.error()
                    at_end.add(m.partition())
                    continue
                tag, p, s = parse(m.value())
                assert p == m.partition()
                out[p].append((tag, s))
        assert len(at_end) == PARTS, "confluent-kafka did not reach the end"
    finally:
        c.close()
    return out


def _end_offsets(broker: Any, topic: str, isolation: str) -> dict[int, int]:
    with Consumer(**_settings(broker), isolation_level=isolation) as c:
        ends = c.end_offsets([(topic, p) for p in range(PARTS)])
    return {tp.partition: o for tp, o in ends.items()}


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_commit_abort_commit_read_committed(broker: Any, unique_topic: str, codec: str) -> None:
    """Three transactions (commit, abort, commit: send(), send_batch() and both) and
    an open fourth, on 3 partitions: read_committed readers (kproto's and
    confluent-kafka's) get exactly the committed records, stopping at the open one
    (the last stable offset); read_uncommitted readers get everything; committing
    the fourth makes it visible."""
    if broker.name != "noida" and codec not in ("none", "zstd"):
        pytest.skip(f"{codec} on {broker.name}: every codec runs on noida-db, which honours "
                    "read_committed; two here")
    topic = broker.create_topic(unique_topic, PARTS)
    seq = dict.fromkeys(range(PARTS), 0)
    p = _producer(broker, f"{topic}-w", compression_type=codec)
    try:
        p.init_transactions()
        script = [(b"c1", 10, (False,), "commit"), (b"ab", 15, (True,), "abort"),
                  (b"c2", 6, (False, True), "commit")]
        for tag, n, kinds, outcome in script:
            p.begin_transaction()
            for batch in kinds:
                seq = _send(p, topic, tag, seq, n, batch)
            if outcome == "commit":
                p.commit_transaction()
            else:
                p.flush()                   # written, then aborted
                p.abort_transaction()
        before_open = _end_offsets(broker, topic, "read_uncommitted")
        p.begin_transaction()
        seq = _send(p, topic, b"op", seq, 4, True)
        p.flush()
        everything = _read_kproto(broker, topic, "read_uncommitted")
        assert {q: [s for _, s in rows] for q, rows in everything.items()} == \
            {q: list(range(seq[q])) for q in range(PARTS)}, "read_uncommitted: every record once"
        # noida-db hides aborted records and stops at the open transaction (the last
        # stable offset); Tansu only stops there; the mock does neither
        hides_aborted, has_lso = broker.name == "noida", broker.name in ("noida", "tansu")
        keep = {b"c1", b"c2"} | (set() if hides_aborted else {b"ab"}) | \
            (set() if has_lso else {b"op"})
        committed = {q: [r for r in rows if r[0] in keep] for q, rows in everything.items()}
        if hides_aborted:
            assert {q: len(r) for q, r in committed.items()} == dict.fromkeys(range(PARTS), 22)
        if has_lso:     # the LSO: the open transaction's first offset
            assert _end_offsets(broker, topic, "read_committed") == before_open
        assert _read_kproto(broker, topic, "read_committed") == committed
        assert _read_confluent(broker, topic, "read_committed") == committed
        assert _read_confluent(broker, topic, "read_uncommitted") == everything
        p.commit_transaction()
        after = _read_kproto(broker, topic, "read_committed")
        keep.add(b"op")
        assert after == {q: [r for r in rows if r[0] in keep] for q, rows in everything.items()}
    finally:
        p.close()


@pytest.mark.brokers("noida", reason="the mock gives a second producer with the same "
                     "transactional id a new producer id (nothing is fenced); Tansu fences, but "
                     "closes the connection on the fenced producer's EndTxn (a commit then times "
                     "out): docs/brokers.md")
def test_a_second_producer_fences_the_first(broker: Any, unique_topic: str) -> None:
    topic = broker.create_topic(unique_topic, PARTS)
    first, second = _producer(broker, topic), _producer(broker, topic)
    try:
        first.init_transactions()
        first.begin_transaction()
        _send(first, topic, b"zz", dict.fromkeys(range(PARTS), 0), 3, False)
        first.flush()
        second.init_transactions()      # fences the first, aborts its open transaction
        with pytest.raises(ProducerFencedError, match="fenced"):
            first.commit_transaction()
        for call in (lambda: first.send(topic, b"x", partition=0), first.begin_transaction,
                     first.abort_transaction, lambda: first.send_batch(topic, {"value": [b"x"]})):
            with pytest.raises(ProducerFencedError):
                call()
        second.begin_transaction()
        _send(second, topic, b"c1", dict.fromkeys(range(PARTS), 3), 2, True)
        second.commit_transaction()
        got = _read_kproto(broker, topic, "read_committed")
        assert {tag for rows in got.values() for tag, _ in rows} == {b"c1"}
    finally:
        first.close()
        second.close()


def test_states_are_checked_before_any_request(broker: Any, unique_topic: str) -> None:
    topic = broker.create_topic(unique_topic, 1)
    with Producer(bootstrap_servers=broker.bootstrap) as plain:
        with pytest.raises(IllegalStateError, match="no transactional_id"):
            plain.init_transactions()
    with _producer(broker, topic) as p:
        with pytest.raises(IllegalStateError, match="init_transactions"):
            p.send(topic, b"x")
        with pytest.raises(IllegalStateError, match="init_transactions"):
            p.begin_transaction()
        p.init_transactions()
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send(topic, b"x")
        with pytest.raises(IllegalStateError, match="no transaction in progress"):
            p.commit_transaction()
        with pytest.raises(IllegalStateError):
            p.init_transactions()
        p.begin_transaction()
        with pytest.raises(IllegalStateError):
            p.begin_transaction()
        # a transaction that holds nothing ends without asking the broker
        p.commit_transaction()
        p.begin_transaction()
        assert p.prepare_transaction() is None
        with pytest.raises(IllegalStateError, match="prepared"):
            p.send(topic, b"x")
        p.abort_transaction()


@pytest.mark.brokers("noida", reason="read_committed and the last stable offset show whether a "
                     "prepared transaction is open, committed or aborted: only noida-db has them")
def test_a_prepared_transaction_is_ended_by_another_client(broker: Any, unique_topic: str
                                                           ) -> None:
    """prepare_transaction() flushes and leaves the transaction open; whoever holds
    the PreparedTransaction commits or aborts it (EndTxn with its producer id and
    epoch), once or twice; after the id is initialised again it is fenced."""
    topic = broker.create_topic(unique_topic, PARTS)
    prepared: dict[bytes, PreparedTransaction] = {}
    for tag, start in ((b"c1", 0), (b"ab", 2), (b"fz", 4)):
        with _producer(broker, f"{topic}-{tag.decode()}") as p:
            p.init_transactions()
            p.begin_transaction()
            _send(p, topic, tag, dict.fromkeys(range(PARTS), start), 2, True)
            prep = p.prepare_transaction()
            assert prep is not None and prep.transactional_id == f"{topic}-{tag.decode()}"
            assert (prep.producer_id, prep.producer_epoch) == (p._txn.producer_id,
                                                               p._txn.epoch)
            prepared[tag] = prep
        # closed: the transaction stays open
    assert _read_kproto(broker, topic, "read_committed") == {q: [] for q in range(PARTS)}
    assert _end_offsets(broker, topic, "read_committed") == dict.fromkeys(range(PARTS), 0)
    commit_transaction(prepared[b"c1"], bootstrap_servers=broker.bootstrap)
    commit_transaction(prepared[b"c1"], bootstrap_servers=broker.bootstrap)   # again: fine
    abort_transaction(prepared[b"ab"], bootstrap_servers=broker.bootstrap)
    abort_transaction(prepared[b"ab"], bootstrap_servers=broker.bootstrap)
    with _producer(broker, f"{topic}-fz") as again:
        again.init_transactions()           # fences (and aborts) the prepared one
    with pytest.raises(ProducerFencedError, match="initialised again"):
        commit_transaction(prepared[b"fz"], bootstrap_servers=broker.bootstrap)
    got = _read_kproto(broker, topic, "read_committed")
    assert got == {q: [(b"c1", 0), (b"c1", 1)] for q in range(PARTS)}
    assert _end_offsets(broker, topic, "read_committed") == \
        _end_offsets(broker, topic, "read_uncommitted")       # nothing open any more


@pytest.mark.brokers("noida", "tansu", reason="the mock's OffsetFetch answer cannot be parsed "
                     "(docs/brokers.md)")
def test_offsets_commit_with_the_transaction_and_keep_their_metadata(broker: Any,
                                                                      unique_topic: str) -> None:
    """send_offsets_to_transaction: the offsets (and their metadata: what a streaming
    sink records its last batch id in) take effect when the transaction commits, not
    when it aborts."""
    topic = broker.create_topic(unique_topic, PARTS)
    group = f"{topic}-g"
    with _producer(broker, topic) as p, Admin(bootstrap_servers=broker.bootstrap) as admin:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"x", partition=0)
        p.send_offsets_to_transaction({(topic, 0): OffsetAndMetadata(5, "batch=1"),
                                       (topic, 1): 7}, group)
        p.commit_transaction()
        got = admin.list_consumer_group_offsets(group, metadata=True)
        if broker.name == "noida":      # no metadata is stored as "", as Kafka does
            assert got == {(topic, 0): OffsetAndMetadata(5, "batch=1"),
                           (topic, 1): OffsetAndMetadata(7, "")}
        else:                           # Tansu keeps no metadata
            assert got == {(topic, 0): OffsetAndMetadata(5, None),
                           (topic, 1): OffsetAndMetadata(7, None)}
        p.begin_transaction()
        p.send_offsets_to_transaction({(topic, 0): OffsetAndMetadata(9, "batch=2")}, group)
        p.abort_transaction()
        assert admin.list_consumer_group_offsets(group) == {(topic, 0): 5, (topic, 1): 7}


# --------------------------------------------------------------------------- injected errors


@pytest.fixture
def mock(mock_cluster: Any) -> Iterator[Any]:
    yield mock_cluster
    for key in (ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN,
                ApiKey.TXN_OFFSET_COMMIT, ApiKey.END_TXN, ApiKey.PRODUCE,
                ApiKey.FIND_COORDINATOR):
        mock_cluster.clear_request_errors(key)


class _Retries(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "failed" in record.getMessage() and "retrying" in record.getMessage():
            self.seen.append(record.getMessage())

    def __enter__(self) -> _Retries:
        log = logging.getLogger("kproto.producer")
        self._level = log.level
        log.addHandler(self)
        log.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        log = logging.getLogger("kproto.producer")
        log.removeHandler(self)
        log.setLevel(self._level)


RETRIABLE = [E_NOT_COORDINATOR, E_LOADING, E_CONCURRENT]


@pytest.mark.parametrize("api_key", [ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN,
                                     ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.TXN_OFFSET_COMMIT,
                                     ApiKey.END_TXN], ids=lambda k: ApiKey(k).name)
def test_retriable_coordinator_errors_are_retried(mock: Any, api_key: int) -> None:
    """NOT_COORDINATOR (the coordinator is looked up again), COORDINATOR_LOAD_IN_PROGRESS
    and CONCURRENT_TRANSACTIONS are retried, as Java's client does: the transaction
    commits, and each error cost one retry."""
    topic = f"inj-{uuid.uuid4().hex[:8]}"
    mock.create_topic(topic, PARTS)
    with Producer(bootstrap_servers=mock.bootstrap, transactional_id=topic, linger_ms=2,
                  retry_backoff_ms=20) as p, _Retries() as retries:
        if api_key != ApiKey.INIT_PRODUCER_ID:
            p.init_transactions()
        mock.push_request_errors(api_key, *RETRIABLE)
        if api_key == ApiKey.INIT_PRODUCER_ID:
            p.init_transactions()
        p.begin_transaction()
        futures = [p.send(topic, value(q, 0, b"c1"), partition=q) for q in range(PARTS)]
        p.send_offsets_to_transaction({(topic, 0): 1}, f"{topic}-g")
        p.commit_transaction()
        assert all(f.result(5).offset >= 0 for f in futures)
    assert len(retries.seen) == len(RETRIABLE), retries.seen


def test_an_epoch_error_from_the_coordinator_is_fatal(mock: Any) -> None:
    """INVALID_PRODUCER_EPOCH from the transaction coordinator means a newer producer
    (or the broker, at the transaction timeout) took the epoch: ProducerFencedError
    now and on every later call (Java's client turns it into ProducerFencedException)."""
    topic = f"inj-{uuid.uuid4().hex[:8]}"
    mock.create_topic(topic, 1)
    with Producer(bootstrap_servers=mock.bootstrap, transactional_id=topic) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"x", partition=0).result(10)
        mock.push_request_errors(ApiKey.END_TXN, E_INVALID_EPOCH)
        with pytest.raises(ProducerFencedError, match="transaction_timeout_ms"):
            p.commit_transaction()
        with pytest.raises(ProducerFencedError):
            p.send(topic, b"y", partition=0)
        with pytest.raises(ProducerFencedError):
            p.abort_transaction()


def test_a_failed_batch_makes_the_transaction_abortable(mock: Any) -> None:
    """A record batch refused with INVALID_PRODUCER_EPOCH (a partition leader's answer
    once the coordinator aborted the transaction at its timeout, KIP-588): commit
    raises AbortableTransactionError; abort_transaction() fails what is unsent,
    bumps the epoch (InitProducerId with the current id and epoch, KIP-360) and the
    next transaction commits from sequence 0."""
    topic = f"inj-{uuid.uuid4().hex[:8]}"
    mock.create_topic(topic, 1)
    with Producer(bootstrap_servers=mock.bootstrap, transactional_id=topic, linger_ms=50) as p:
        p.init_transactions()
        pid, epoch = p._txn.producer_id, p._txn.epoch
        p.begin_transaction()
        p.send(topic, b"ok", partition=0).result(10)
        mock.push_request_errors(ApiKey.PRODUCE, E_INVALID_EPOCH)
        bad = p.send(topic, b"refused", partition=0)
        assert bad.exception(10) is not None
        with pytest.raises(AbortableTransactionError) as info:
            p.commit_transaction()
        assert info.value.error is not None and info.value.error.code == E_INVALID_EPOCH
        with pytest.raises(AbortableTransactionError):
            p.send(topic, b"more", partition=0)
        p.abort_transaction()
        assert (p._txn.producer_id, p._txn.epoch) == (pid, epoch + 1)
        p.begin_transaction()
        meta = p.send(topic, b"after", partition=0).result(10)
        p.commit_transaction()
    with Consumer(bootstrap_servers=mock.bootstrap, check_crcs=False) as c:
        values = c.read_range(topic, {0: (meta.offset, meta.offset + 1)}).column("value")
    assert values.to_pylist() == [b"after"]


def test_records_queued_when_aborting_fail_with_transaction_aborted(mock: Any) -> None:
    topic = f"inj-{uuid.uuid4().hex[:8]}"
    mock.create_topic(topic, 1)
    with Producer(bootstrap_servers=mock.bootstrap, transactional_id=topic,
                  linger_ms=60000) as p:
        p.init_transactions()
        p.begin_transaction()
        queued = [p.send(topic, b"q%d" % i, partition=0) for i in range(5)]
        p.abort_transaction()
        for f in queued:
            assert isinstance(f.exception(5), TransactionAbortedError)
        p.begin_transaction()
        p.send(topic, b"next", partition=0)
        p.commit_transaction()


def test_a_timed_out_call_is_called_again_and_completes(mock: Any) -> None:
    """Every step has a timeout (default max_block_ms): a commit that the coordinator
    keeps answering CONCURRENT_TRANSACTIONS raises KafkaTimeoutError; until it is
    called again nothing else may be (KIP-588), and called again it completes."""
    topic = f"inj-{uuid.uuid4().hex[:8]}"
    mock.create_topic(topic, 1)
    with Producer(bootstrap_servers=mock.bootstrap, transactional_id=topic,
                  retry_backoff_ms=50) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"x", partition=0).result(10)
        mock.push_request_errors(ApiKey.END_TXN, *[E_CONCURRENT] * 20)     # ~1 s of retries
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="call it again"):
            p.commit_transaction(timeout=0.3)
        assert time.monotonic() - start < 1.0
        with pytest.raises(IllegalStateError, match="commit_transaction timed out"):
            p.begin_transaction()
        with pytest.raises(IllegalStateError, match="commit_transaction timed out"):
            p.abort_transaction()
        p.commit_transaction(timeout=10)
        p.begin_transaction()
        p.commit_transaction()


def test_init_transactions_times_out_when_no_coordinator_answers(mock: Any) -> None:
    topic = f"inj-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=mock.bootstrap, transactional_id=topic,
                  retry_backoff_ms=50, max_block_ms=400) as p:
        # (the mock answers FindCoordinator errors with a null host, which its
        # schema does not allow: InitProducerId is where it keeps refusing)
        mock.push_request_errors(ApiKey.INIT_PRODUCER_ID, *[E_LOADING] * 40)
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="init_transactions"):
            p.init_transactions()
        assert time.monotonic() - start < 1.5
        mock.clear_request_errors(ApiKey.INIT_PRODUCER_ID)
        p.init_transactions(timeout=10)     # the same call, waited for again
        assert p._txn.producer_id >= 0


# --------------------------------------------------------------------------- no broker


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_a_stamped_transactional_batch_reads_as_one_in_kafka_python(codec: str) -> None:
    """The transactional bit and producer fields stamp_batch writes, read by an
    independent parser (kafka-python's DefaultRecordBatch), CRC checked; stamping
    again without it clears the bit."""
    from kafka.record.default_records import DefaultRecordBatch

    from kproto import records
    from kproto.records.batch import stamp_batch

    payload = records.encode(value=[b"a", b"bb", None], compression=codec)
    for transactional in (True, False):
        stamped = stamp_batch(stamp_batch(payload, 7, 3, 41, transactional=True), 7, 3, 41,
                              transactional=transactional)
        batch = DefaultRecordBatch(bytes(stamped))
        assert batch.validate_crc()
        assert (batch.is_transactional, batch.is_control_batch) == (transactional, False)
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 41)
        assert [r.value for r in batch] == [b"a", b"bb", None]


def test_transaction_version_2_only_where_the_cluster_finalizes_it() -> None:
    """KIP-890: EndTxn v5 and Produce v12+ tell the broker the client speaks
    transaction version 2; without the finalized feature kproto caps them at the
    first protocol's newest versions (v4, v11), as Java does."""
    from types import SimpleNamespace

    from kproto.producer.transaction_manager import TransactionManager
    from kproto.producer.transactions import end_txn_version, transaction_version

    new = SimpleNamespace(versions={ApiKey.END_TXN: 5, ApiKey.PRODUCE: 13},
                          finalized_features={"transaction.version": 2})
    old = SimpleNamespace(versions={ApiKey.END_TXN: 5, ApiKey.PRODUCE: 13},
                          finalized_features={})
    assert (transaction_version(new), transaction_version(old)) == (2, 0)
    assert (end_txn_version(new, True), end_txn_version(old, False)) == (5, 4)
    txn = TransactionManager.__new__(TransactionManager)
    txn.tv2 = False
    assert txn.produce_version(old) == 11    # type: ignore[arg-type]
    txn.tv2 = True
    assert txn.produce_version(new) is None  # type: ignore[arg-type]  # the negotiated one


def test_a_refused_group_generation_makes_the_transaction_abortable(mock: Any) -> None:
    """TxnOffsetCommit answered ILLEGAL_GENERATION (the group moved on from the member
    whose group_metadata() the offsets carry, KIP-447; injected: noida-db does not
    check it): AbortableTransactionError with a CommitFailedError, and the producer
    goes on after the abort."""
    from kproto.errors import CommitFailedError

    topic = f"inj-{uuid.uuid4().hex[:8]}"
    mock.create_topic(topic, 1)
    with Producer(bootstrap_servers=mock.bootstrap, transactional_id=topic) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"x", partition=0)
        mock.push_request_errors(ApiKey.TXN_OFFSET_COMMIT, 22)     # ILLEGAL_GENERATION
        with pytest.raises(AbortableTransactionError) as info:
            p.send_offsets_to_transaction({(topic, 0): 1}, "g")
        assert isinstance(info.value.error, CommitFailedError)
        with pytest.raises(AbortableTransactionError):
            p.commit_transaction()
        p.abort_transaction()
        p.begin_transaction()
        p.send_offsets_to_transaction({(topic, 0): 1}, "g")
        p.commit_transaction()
