"""read_committed against real transactions (issue 15, item 5).

noida-db implements transactions for real (aborted records stay in the log,
read_committed Fetch answers list the aborted transactions and the last stable
offset stops at an open transaction). confluent-kafka's transactional producer
(librdkafka) writes, per compression codec, on a 3-partition topic, with two
transactional producers interleaved so aborted and committed batches alternate
in the log:

    A: begin, 20 records per partition (flushed)       -> aborted later
    B: begin, 15 per partition, commit                  -> committed
    A: 10 more per partition, abort                     -> aborted (30 per partition)
    B: begin, 25 per partition, commit                  -> committed
    A: begin, 10 per partition, commit                  -> committed
    B: begin, 12 per partition (flushed), left open     -> not stable yet

kproto's ``read_committed`` — ``end_offsets``, ``read_range``, ``iter_range``,
``poll_batch``, ``poll`` and the Spark source with
``kafka.isolation.level=read_committed`` — must return exactly the 50
committed records per partition, in order, and stop at the last stable offset
(the open transaction's first offset); ``read_uncommitted`` returns all 92 per
partition, aborted and open ones included, up to the high watermark. Then the
open transaction is committed and read_committed reaches the high watermark.

Record values carry a tag (the transaction), the partition, a per-partition
sequence number in write order and a CRC, and are checked one by one. The same
proofs run on librdkafka's mock cluster, which stores transactions (markers
included) but does not implement read_committed: no last stable offset, no
aborted-transaction list, so librdkafka's own read_committed consumer returns
aborted and open records there too, and kproto must do the same (that, and
reading past its markers, is what is checked there). It also writes its
markers with CRC 0, which librdkafka's consumer refuses with check.crcs=true
as well, so CRCs are not checked on the mock.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from kproto import Admin, Consumer

from .noida_support import Ledger, parse, value

try:        # the Spark session fixture of tests/test_spark.py (one per module)
    from .test_spark import spark  # noqa: F401
except ImportError:     # moved to conftest.py
    pass

pytestmark = pytest.mark.broker

LEDGER = Ledger("noida read_committed proofs")
PARTS = 3
# (producer, tag, records per partition, outcome), in write order
SCRIPT = [("A", b"ab", 20, "flush"), ("B", b"c1", 15, "commit"), ("A", b"ab", 10, "abort"),
          ("B", b"c2", 25, "commit"), ("A", b"c3", 10, "commit"), ("B", b"op", 12, "open")]
COMMITTED_TAGS = {b"c1", b"c2", b"c3"}
ALL = {p: ("earliest", "latest") for p in range(PARTS)}     # (the mock's topic has 4)


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    LEDGER.report()


class Written:
    """What the script wrote to one topic: per partition, [(offset, tag, seq)] as
    read_uncommitted reads it, the high watermark and the last stable offset."""

    def __init__(self, bootstrap: str, topic: str, compression: str, where: str,
                 producers: dict[str, Any]) -> None:
        self.bootstrap, self.topic, self.compression, self.where = \
            bootstrap, topic, compression, where
        self.producers = producers
        self.log: dict[int, list[tuple[int, bytes, int]]] = {}
        self.hw: dict[int, int] = {}
        self.lso: dict[int, int] = {}

    @property
    def honours_transactions(self) -> bool:
        """librdkafka's mock cluster stores transactions but answers read_committed
        as read_uncommitted (no last stable offset, no aborted transactions: its
        own consumer then returns aborted and open records too)."""
        return self.where != "mock"

    def committed(self, p: int, *, open_committed: bool = False) -> list[tuple[int, bytes, int]]:
        if not self.honours_transactions:
            return self.log[p]
        tags = COMMITTED_TAGS | ({b"op"} if open_committed else set())
        return [r for r in self.log[p] if r[1] in tags]


def _kproto_settings(written: Written) -> dict[str, Any]:
    return _settings(written.bootstrap, written.where)


def _settings(bootstrap: str, where: str) -> dict[str, Any]:
    # librdkafka's mock cluster writes its transaction markers (control batches)
    # with CRC 0: librdkafka's own consumer refuses them with check.crcs=true too
    return {"bootstrap_servers": bootstrap, "request_timeout_ms": 5000,
            "check_crcs": where != "mock"}


def _write(bootstrap: str, topic: str, compression: str, where: str,
           extra: dict[str, Any]) -> Written:
    import confluent_kafka

    producers = {}
    for name in "AB":
        producers[name] = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{name}",
            "compression.type": compression, "linger.ms": 2, "batch.num.messages": 7,
            "transaction.timeout.ms": 60000, **extra})
        producers[name].init_transactions(20)
    seq = dict.fromkeys(range(PARTS), 0)
    began: set[str] = set()
    for name, tag, n, outcome in SCRIPT:
        p = producers[name]
        if name not in began:
            p.begin_transaction()
            began.add(name)
        for _ in range(n):
            for part in range(PARTS):
                p.produce(topic, value(part, seq[part], tag), partition=part)
                seq[part] += 1
        assert p.flush(20) == 0         # written before the transaction ends (not purged)
        if outcome == "commit":
            p.commit_transaction(20)
            began.discard(name)
        elif outcome == "abort":
            p.abort_transaction(20)
            began.discard(name)
    written = Written(bootstrap, topic, compression, where, producers)
    with Consumer(**_settings(bootstrap, where)) as c:
        hw = c.end_offsets([(topic, p) for p in range(PARTS)])
        table = c.read_range(topic, {tp.partition: (0, e) for tp, e in hw.items()})
    for p in range(PARTS):
        written.hw[p] = hw[(topic, p)]
        written.log[p] = []
    for part, off, v in zip(table.column("partition").to_pylist(),
                            table.column("offset").to_pylist(),
                            table.column("value").to_pylist(), strict=True):
        tag, p, s = parse(v)
        assert p == part
        written.log[p].append((off, tag, s))
    for p in range(PARTS):
        # read_uncommitted sees every record written, in write order, once
        assert [s for _, _, s in written.log[p]] == list(range(seq[p])), p
        written.lso[p] = min(off for off, tag, _ in written.log[p] if tag == b"op") \
            if written.honours_transactions else written.hw[p]
    return written


@pytest.fixture(scope="module", params=[
    ("noida", "none"), ("noida", "lz4"), ("noida", "zstd"), ("mock", "none"), ("mock", "zstd")],
    ids=lambda p: f"{p[0]}-{p[1]}")
def written(request: pytest.FixtureRequest) -> Iterator[Written]:
    where, compression = request.param
    topic = f"txn-{compression}-{uuid.uuid4().hex[:8]}"
    if where == "noida":
        broker = request.getfixturevalue("noida")
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics({topic: PARTS})
        written = _write(broker.bootstrap, topic, compression, where, {})
    else:
        cluster = request.getfixturevalue("mock_cluster")
        # the mock cluster cannot create topics: auto-created with 4 partitions
        import confluent_kafka

        p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap})
        p.produce(topic, b"", partition=3)      # partition 3 is not read
        assert p.flush(20) == 0
        written = _write(cluster.bootstrap, topic, compression, where, {})
    try:
        yield written
    finally:
        for producer in written.producers.values():
            try:
                producer.abort_transaction(5)
            except Exception:  # noqa: BLE001 - nothing open
                pass
            close = getattr(producer, "close", None)
            if close is not None:
                close()
        written.producers.clear()


def _rows(table: pa.Table | pa.RecordBatch) -> dict[int, list[tuple[int, bytes, int]]]:
    out: dict[int, list[tuple[int, bytes, int]]] = {p: [] for p in range(PARTS)}
    for part, off, v in zip(table.column("partition").to_pylist(),
                            table.column("offset").to_pylist(),
                            table.column("value").to_pylist(), strict=True):
        tag, p, s = parse(v)
        assert p == part, f"record {v!r} in partition {part}"
        out[part].append((off, tag, s))
    return out


def _merge(into: dict[int, list[Any]], more: dict[int, list[Any]]) -> None:
    for p, rows in more.items():
        into.setdefault(p, []).extend(rows)


def _poll_all(c: Consumer, written: Written, want: dict[int, int], per_record: bool
              ) -> dict[int, list[tuple[int, bytes, int]]]:
    """Poll until ``want`` records per partition came, and then 1 s more (nothing
    else may come)."""
    got: dict[int, list[tuple[int, bytes, int]]] = {p: [] for p in range(PARTS)}
    deadline, quiet_until = time.monotonic() + 30, None
    while True:
        if per_record:
            rows: dict[int, list[Any]] = {p: [] for p in range(PARTS)}
            for r in c.poll(200, max_records=37):
                tag, p, s = parse(r.value)
                assert p == r.partition
                rows[p].append((r.offset, tag, s))
        else:
            rows = _rows(c.poll_batch(200))
        _merge(got, rows)
        done = all(len(got[p]) >= want[p] for p in range(PARTS))
        if done and quiet_until is None:
            quiet_until = time.monotonic() + 1.0
        if quiet_until is not None and time.monotonic() > quiet_until:
            return got
        assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}


def _check(name: str, written: Written, got: dict[int, list[Any]], committed: bool,
           counts: dict[str, Any]) -> None:
    for p in range(PARTS):
        want = written.committed(p) if committed else written.log[p]
        assert got[p] == want, (f"{name}: partition {p}: {len(got[p])} records, expected "
                                f"{len(want)}")
    counts[name] = sum(len(v) for v in got.values())


def test_read_committed_returns_exactly_the_committed_records(written: Written) -> None:
    topic, tps = written.topic, [(written.topic, p) for p in range(PARTS)]
    counts: dict[str, Any] = {}
    committed = {p: len(written.committed(p)) for p in range(PARTS)}
    assert committed == dict.fromkeys(range(PARTS), 50 if written.honours_transactions else 92)
    assert {p: len(v) for p, v in written.log.items()} == dict.fromkeys(range(PARTS), 92)
    with Consumer(**_kproto_settings(written), isolation_level="read_committed") as c:
        ends = {tp.partition: o for tp, o in c.end_offsets(tps).items()}
        assert ends == written.lso, (ends, written.lso, written.hw)        # the LSO
        _check("read_range", written, _rows(c.read_range(topic, ALL)), True, counts)
        _check("read_range_explicit", written, _rows(c.read_range(
            topic, {p: ("earliest", None) for p in range(PARTS)})), True, counts)
        it: dict[int, list[Any]] = {}
        for batch in c.iter_range(topic, ALL, step_bytes=2048):
            _merge(it, _rows(batch))
        _check("iter_range", written, it, True, counts)
        # a range ending at the high watermark, past the LSO: what is stable, at once
        start = time.monotonic()
        _check("read_range_to_hw", written, _rows(c.read_range(
            topic, {p: (0, written.hw[p]) for p in range(PARTS)}, timeout_ms=5000)), True, counts)
        assert time.monotonic() - start < 3
        c.assign(tps)
        c.seek_to_beginning()
        _check("poll_batch", written, _poll_all(c, written, committed, False), True, counts)
        # the position stops at the last stable offset (past the last commit marker)
        assert {p: c.position((topic, p)) for p in range(PARTS)} == written.lso
        c.seek_to_beginning()
        _check("poll", written, _poll_all(c, written, committed, True), True, counts)
    with Consumer(**_kproto_settings(written), isolation_level="read_uncommitted") as c:
        ends = {tp.partition: o for tp, o in c.end_offsets(tps).items()}
        assert ends == written.hw
        _check("uncommitted_read_range", written, _rows(c.read_range(topic, ALL)), False, counts)
        it = {}
        for batch in c.iter_range(topic, ALL, step_bytes=2048):
            _merge(it, _rows(batch))
        _check("uncommitted_iter_range", written, it, False, counts)
        c.assign(tps)
        c.seek_to_beginning()
        everything = {p: len(v) for p, v in written.log.items()}
        _check("uncommitted_poll_batch", written,
               _poll_all(c, written, everything, False), False, counts)
    LEDGER.add(f"{written.where}/{written.compression}: kproto paths",
               broker_honours_read_committed=written.honours_transactions,
               written_per_partition=92, committed_per_partition=50,
               aborted_per_partition=30, open_per_partition=12, lso=written.lso,
               high_watermark=written.hw, records_returned=counts)


def test_spark_source_read_committed(written: Written, spark: Any) -> None:
    def read(isolation: str) -> dict[int, list[Any]]:
        df = (spark.read.format("kproto")
              .option("kafka.bootstrap.servers", written.bootstrap)
              .option("kafka.isolation.level", isolation)
              .option("kafka.check.crcs", str(written.where != "mock").lower())
              .option("assign", json.dumps({written.topic: [0, 1, 2]})).load())
        rows = sorted(df.select("partition", "offset", "value").collect(),
                      key=lambda r: (r["partition"], r["offset"]))
        return _rows(pa.table({"partition": [r["partition"] for r in rows],
                               "offset": [r["offset"] for r in rows],
                               "value": [bytes(r["value"]) for r in rows]}))

    counts: dict[str, Any] = {}
    _check("spark_read_committed", written, read("read_committed"), True, counts)
    _check("spark_read_uncommitted", written, read("read_uncommitted"), False, counts)
    LEDGER.add(f"{written.where}/{written.compression}: Spark source", records_returned=counts)


def test_committing_the_open_transaction_moves_the_lso(written: Written) -> None:
    """Last in the module for each topic: the open transaction is committed, and
    read_committed then reads up to the high watermark (its marker included)."""
    written.producers["B"].commit_transaction(20)
    tps = [(written.topic, p) for p in range(PARTS)]
    with Consumer(**_kproto_settings(written), isolation_level="read_committed") as c:
        ends = {tp.partition: o for tp, o in c.end_offsets(tps).items()}
        assert ends == {p: hw + 1 for p, hw in written.hw.items()}   # + the commit marker
        got = _rows(c.read_range(written.topic, ALL))
    for p in range(PARTS):
        assert got[p] == written.committed(p, open_committed=True)
    LEDGER.add(f"{written.where}/{written.compression}: after committing the open one",
               records_returned=sum(len(v) for v in got.values()), lso=ends)
