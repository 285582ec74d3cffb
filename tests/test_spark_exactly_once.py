"""The "kproto" Spark sink's exactly-once mode (issue 18, part 4), on noida-db.

noida-db is the test broker with real transactions (read_committed hides
aborted records, the last stable offset stops at open transactions,
InitProducerId fences); on Tansu and the mock read_committed readers see
aborted records too, so nothing here could be shown there (docs/brokers.md).

The Spark tests run their own session, ``local[2,4]`` (a task may fail three
times and is retried), with Arrow batches of 100 rows, and write through
"kproto_dying": the kproto sink, except that partition 1's first attempt (of a
batch job, or of a stream's first micro-batch) hands two batches to the
producer, gives it a second to send them, and ends its Python worker with
``os._exit`` — no abort, no close. (A ``mapInArrow`` step that raises before the
writer cannot do it: Spark hands the writer nothing before the step above it
has finished.) Without
exactlyOnce the same job leaves duplicates (the documented at-least-once);
with it a read_committed read — kproto's and confluent-kafka's — finds every
row exactly once. The driver-side paths Spark cannot be made to take on cue (a
driver that dies between two task commits, a transaction fenced before the
commit, a job abort with a failed task) run the writer's methods directly,
each task's TaskContext faked.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from kproto import Admin, Consumer, Producer
from kproto.errors import ConfigError

pytest.importorskip("pyspark")

from pyspark.sql.types import BinaryType, StructField, StructType  # noqa: E402

import kproto.spark.exactly_once as eo  # noqa: E402
from kproto.spark import KprotoStreamWriter, KprotoWriter  # noqa: E402

pytestmark = pytest.mark.broker

SCHEMA = StructType([StructField("value", BinaryType())])


@pytest.fixture(scope="module")
def spark_retry() -> Iterator[Any]:
    """A session whose tasks are retried: local[2,4]; 100-row Arrow batches."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kproto.spark

    session = (SparkSession.builder.master("local[2,4]").appName("kproto-exactly-once")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100").getOrCreate())
    session.sparkContext.setLogLevel("OFF")
    kproto.spark.register(session)
    session.dataSource.register(_dying_source())
    yield session
    session.stop()


def _value(i: int) -> bytes:
    return b"%08d" % i + b"." * 92


#: the values _value() makes, in Spark SQL
VALUE_SQL = "cast(concat(lpad(cast(id as string), 8, '0'), repeat('.', 92)) as binary) as value"


def _dying_source() -> type:
    """The "kproto_dying" data source (see the module docstring); its classes are
    made here so that Spark pickles them by value into its Python workers."""
    from kproto.spark import KprotoDataSource

    def dying(write: Any, writer: Any, iterator: Iterator[Any]) -> Any:
        import os
        import time

        from pyspark import TaskContext

        ctx = TaskContext.get()
        micro_batch = ctx.getLocalProperty("streaming.sql.batchId")
        if ctx.partitionId() != 1 or ctx.attemptNumber() != 0 or micro_batch not in (None, "0"):
            return write(writer, iterator)

        def handed() -> Iterator[Any]:
            for i, batch in enumerate(iterator):
                if i == 2:              # two batches are with the producer
                    time.sleep(1)       # and sent
                    os._exit(1)
                yield batch

        return write(writer, handed())

    class DyingWriter(KprotoWriter):
        def write(self, iterator: Iterator[Any]) -> Any:
            return dying(KprotoWriter.write, self, iterator)

    class DyingStreamWriter(KprotoStreamWriter):
        def write(self, iterator: Iterator[Any]) -> Any:
            return dying(KprotoStreamWriter.write, self, iterator)

    class Dying(KprotoDataSource):
        @classmethod
        def name(cls) -> str:
            return "kproto_dying"

        def writer(self, schema: Any, overwrite: bool) -> Any:
            return DyingWriter(self.options, schema)

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:
            return DyingStreamWriter(self.options, schema)

    return Dying


def _topics(noida: Any, *names: str, partitions: int = 3) -> None:
    with Admin(bootstrap_servers=noida.bootstrap) as admin:
        admin.create_topics(dict.fromkeys(names, partitions), configs={"retention.ms": "-1"})


def _read(noida: Any, topic: str, isolation: str) -> list[bytes]:
    with Consumer(bootstrap_servers=noida.bootstrap, isolation_level=isolation) as c:
        return c.read_range(topic).column("value").to_pylist()


def _partitions(noida: Any, topic: str) -> list[int]:
    with Admin(bootstrap_servers=noida.bootstrap) as admin:
        return sorted(admin.list_topics()[topic].partitions)


def _read_confluent(noida: Any, topic: str) -> list[bytes]:
    """Every record confluent-kafka's read_committed consumer reads, to the end."""
    import confluent_kafka

    c = confluent_kafka.Consumer({
        "bootstrap.servers": noida.bootstrap, "group.id": f"r-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "enable.partition.eof": True})
    out: list[bytes] = []
    try:
        parts = _partitions(noida, topic)
        c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                  for p in parts])
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while len(at_end) < len(parts) and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is not None:
                    assert m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, \
                        m.error()
                    at_end.add(m.partition())
                else:
                    out.append(m.value())
        assert len(at_end) == len(parts), "confluent-kafka did not reach the end"
    finally:
        c.close()
    return out


def _nothing_left_open(noida: Any, topic: str) -> None:
    """The last stable offsets are the high watermarks: no transaction is open."""
    tps = [(topic, p) for p in _partitions(noida, topic)]
    with Consumer(bootstrap_servers=noida.bootstrap) as c:
        high = c.end_offsets(tps)
    with Consumer(bootstrap_servers=noida.bootstrap, isolation_level="read_committed") as c:
        assert c.end_offsets(tps) == high


def _save(df: Any, noida: Any, topic: str, **options: str) -> None:
    w = (df.write.format("kproto_dying").mode("append")
         .option("kafka.bootstrap.servers", noida.bootstrap).option("topic", topic))
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


# --------------------------------------------------------------------------- Spark


def test_batch_write_with_a_failed_task_is_exactly_once(spark_retry: Any, noida: Any,
                                                        unique_topic: str) -> None:
    """4,000 rows in 4 tasks; partition 1's first attempt dies after handing 200
    rows to the producer. At-least-once: they are written twice. exactlyOnce: the
    retried attempt's init_transactions aborts the first attempt's transaction,
    the driver commits the four prepared ones: every row once, for kproto's and
    confluent-kafka's read_committed readers; the aborted rows are in the log
    (read_uncommitted) and no transaction is left open."""
    n = 4000
    plain, exact = f"{unique_topic}-plain", f"{unique_topic}-exact"
    _topics(noida, plain, exact)
    df = spark_retry.range(0, n, 1, 4).selectExpr(VALUE_SQL)
    want = sorted(_value(i) for i in range(n))

    _save(df, noida, plain)
    again = _read(noida, plain, "read_committed")
    assert sorted(set(again)) == want
    assert len(again) > n, "the injected failure did not write twice (at-least-once)"

    prefix = f"{unique_topic}-t"
    _save(df, noida, exact, exactlyOnce="true", transactionalIdPrefix=prefix)
    assert sorted(_read(noida, exact, "read_committed")) == want
    assert sorted(_read_confluent(noida, exact)) == want
    assert len(_read(noida, exact, "read_uncommitted")) > n     # the aborted attempt
    _nothing_left_open(noida, exact)
    with Admin(bootstrap_servers=noida.bootstrap) as admin:
        ours = [t for t in admin.list_transactions() if t.transactional_id.startswith(prefix)]
    assert sorted(t.transactional_id.rsplit("-", 1)[1] for t in ours) == ["0", "1", "2", "3"]
    assert {t.state for t in ours} == {"CompleteCommit"}


def test_stream_exactly_once_replay_and_operator_options(spark_retry: Any, noida: Any,
                                                         unique_topic: str, tmp_path: Any
                                                         ) -> None:
    """A stream from a kproto source through a kproto exactlyOnce sink, with
    maxBytesPerTrigger (100-byte values, 60,000 bytes a micro-batch) and
    commitOffsetsToGroup. Micro-batch 0 has a task that dies once. Then the
    driver "dies" after the sink committed the last micro-batch but before Spark
    recorded it (its commit log entry is deleted): the restarted query replays
    that batch and its tasks, finding their batch committed in Kafka, write
    nothing. Then new records are read, once."""
    src, out, group = f"{unique_topic}-in", f"{unique_topic}-out", f"{unique_topic}-g"
    _topics(noida, src, partitions=2)
    _topics(noida, out)
    checkpoint = tmp_path / "cp"

    def produce(first: int, n: int) -> None:
        half = n // 2
        with Producer(bootstrap_servers=noida.bootstrap) as p:
            for part, lo in ((0, first), (1, first + half)):
                p.send_batch(src, pa.table({"value": [_value(i) for i in range(lo, lo + half)]}),
                             partition=part).result(30)

    def run() -> list[tuple[int, int]]:
        stream = (spark_retry.readStream.format("kproto")
                  .option("kafka.bootstrap.servers", noida.bootstrap).option("subscribe", src)
                  .option("startingOffsets", "earliest").option("maxBytesPerTrigger", "60000")
                  .option("commitOffsetsToGroup", group).load())
        query = (stream.select("value").writeStream.format("kproto_dying")
                 .option("kafka.bootstrap.servers", noida.bootstrap)
                 .option("topic", out).option("exactlyOnce", "true")
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination(600)
        assert query.exception() is None, query.exception()
        return [(p["batchId"], p["numInputRows"]) for p in query.recentProgress
                if p["numInputRows"]]

    def exactly(n: int) -> None:
        want = sorted(_value(i) for i in range(n))
        assert sorted(_read(noida, out, "read_committed")) == want
        assert sorted(_read_confluent(noida, out)) == want
        _nothing_left_open(noida, out)

    produce(0, 3000)
    first = run()
    assert sum(rows for _, rows in first) == 3000
    assert len(first) >= 5 and all(rows * 100 <= 60000 for _, rows in first), first
    exactly(3000)
    assert len(_read(noida, out, "read_uncommitted")) > 3000    # the task that died wrote
    with Admin(bootstrap_servers=noida.bootstrap) as admin:
        assert admin.list_consumer_group_offsets(group) == {(src, 0): 1500, (src, 1): 1500}

    last, rows = first[-1]
    for name in (str(last), f".{last}.crc"):           # the driver died before recording it
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    assert run() == [(last, rows)]                     # replayed...
    exactly(3000)                                      # ...and not written again

    produce(3000, 500)
    assert sum(rows for _, rows in run()) == 500
    exactly(3500)
    with Admin(bootstrap_servers=noida.bootstrap) as admin:
        assert admin.list_consumer_group_offsets(group) == {(src, 0): 1750, (src, 1): 1750}


# --------------------------------------------------------------------------- the driver's paths


def _as_task(monkeypatch: Any, partition: int, batch_id: int | None = None,
             attempt: int = 0) -> None:
    """What TaskContext would tell the writer in Spark partition ``partition``."""
    monkeypatch.setattr(eo, "task_info", lambda: eo.TaskInfo(partition, attempt, batch_id,
                                                             None))


def _rows(tag: bytes, n: int = 5) -> Iterator[pa.RecordBatch]:
    return iter([pa.record_batch([pa.array([tag + b"-%d" % i for i in range(n)],
                                           pa.binary())], names=["value"])])


def _write(writer: Any, monkeypatch: Any, partition: int, tag: bytes,
           batch_id: int | None = None) -> Any:
    _as_task(monkeypatch, partition, batch_id)
    return writer.write(_rows(tag))


def _tags(noida: Any, topic: str) -> list[bytes]:
    return sorted(v.split(b"-")[0] for v in _read(noida, topic, "read_committed"))


def test_driver_death_between_two_task_commits(noida: Any, unique_topic: str,
                                               monkeypatch: Any) -> None:
    """Micro-batch 0: the driver commits task 0's transaction and dies. The replay:
    task 0 finds batch 0 committed in its marker group and writes nothing; task
    1's init_transactions aborts its old transaction and it writes again. Every
    record once; a marker per task (offset = batch id)."""
    _topics(noida, unique_topic)
    opts = {"kafka.bootstrap.servers": noida.bootstrap, "topic": unique_topic,
            "exactlyOnce": "true", "transactionalIdPrefix": unique_topic}
    first = [_write(KprotoStreamWriter(opts, SCHEMA), monkeypatch, p, b"a%d" % p, 0)
             for p in (0, 1)]
    KprotoStreamWriter(opts, SCHEMA).commit(first[:1], 0)       # then the driver dies
    assert _tags(noida, unique_topic) == [b"a0"] * 5
    replay = [_write(KprotoStreamWriter(opts, SCHEMA), monkeypatch, p, b"b%d" % p, 0)
              for p in (0, 1)]
    assert [m.skipped for m in replay] == [True, False] and replay[0].prepared is None
    KprotoStreamWriter(opts, SCHEMA).commit(replay, 0)
    assert _tags(noida, unique_topic) == [b"a0"] * 5 + [b"b1"] * 5
    _nothing_left_open(noida, unique_topic)
    with Admin(bootstrap_servers=noida.bootstrap) as admin:
        marks = admin.list_consumer_group_offsets(f"{unique_topic}-1", metadata=True)
    assert [(m.offset, m.metadata) for m in marks.values()] == [(0, eo.MARKER)]


def test_a_fenced_transaction_means_nothing_is_committed(noida: Any, unique_topic: str,
                                                         monkeypatch: Any) -> None:
    """Between a task's prepare and the driver's commit, something ended one
    task's transaction (here a later attempt's init_transactions: speculation; the
    broker's timeout looks the same). The driver finds it before committing
    anything, aborts the others and says so: the output holds nothing of the job."""
    _topics(noida, unique_topic)
    writer = KprotoWriter({"kafka.bootstrap.servers": noida.bootstrap, "topic": unique_topic,
                           "exactlyOnce": "true"}, SCHEMA)
    msgs = [_write(writer, monkeypatch, p, b"a%d" % p) for p in (0, 1, 2)]
    with Producer(bootstrap_servers=noida.bootstrap,
                  transactional_id=msgs[1].transactional_id) as late:
        late.init_transactions()
    with pytest.raises(eo.ExactlyOnceCommitError, match=r"not committed.*partitions \[1\]") \
            as info:
        writer.commit(msgs)
    assert info.value.committed == [] and list(info.value.failed) == [1]
    assert _tags(noida, unique_topic) == []
    _nothing_left_open(noida, unique_topic)


def test_job_abort_aborts_and_fences_and_commit_is_idempotent(noida: Any, unique_topic: str,
                                                              monkeypatch: Any) -> None:
    """A job whose task 1 failed (its attempt left a transaction open): abort()
    aborts task 0's prepared transaction and fences task 1's id, so no
    transaction is left open. A committed job committed again is fine."""
    _topics(noida, unique_topic)
    opts = {"kafka.bootstrap.servers": noida.bootstrap, "topic": unique_topic,
            "exactlyOnce": "true"}
    writer = KprotoWriter(opts, SCHEMA)
    done = _write(writer, monkeypatch, 0, b"a")
    _as_task(monkeypatch, 1)
    dying = eo.TaskTransaction(writer.settings, writer.exactly_once)
    dying.producer.send_batch(unique_topic, pa.table({"value": [b"x-1", b"x-2"]}))
    dying.producer.flush()
    dying.producer.close()          # the task's process died with its transaction open
    with Consumer(bootstrap_servers=noida.bootstrap, isolation_level="read_committed") as c:
        assert c.end_offsets([(unique_topic, p) for p in range(3)]) == \
            dict.fromkeys([(unique_topic, p) for p in range(3)], 0)
    writer.abort([done, None])
    _nothing_left_open(noida, unique_topic)
    assert _tags(noida, unique_topic) == []
    writer = KprotoWriter(opts, SCHEMA)
    msgs = [_write(writer, monkeypatch, p, b"c%d" % p) for p in (0, 1)]
    writer.commit(msgs)
    writer.commit(msgs)
    assert _tags(noida, unique_topic) == [b"c0"] * 5 + [b"c1"] * 5


def test_options_and_the_brokers_timeout_cap(noida: Any, unique_topic: str,
                                             monkeypatch: Any) -> None:
    """Options are checked on the driver; the transaction timeout defaults to 15
    minutes (Kafka's cap); a timeout above the broker's cap is a ConfigError
    naming both settings."""
    base = {"kafka.bootstrap.servers": noida.bootstrap, "topic": unique_topic}
    for extra, message in [({"exactlyOnce": "true", "kafka.acks": "1"}, "kafka.acks=all"),
                           ({"kafka.transactional.id": "x"}, "transactionalIdPrefix"),
                           ({"transactionalIdPrefix": "x"}, "needs exactlyOnce=true"),
                           ({"exactlyOnce": "yes"}, "true or false")]:
        with pytest.raises(ConfigError, match=message):
            KprotoWriter({**base, **extra}, SCHEMA)
    assert KprotoWriter(base, SCHEMA).exactly_once is None
    eos = KprotoWriter({**base, "exactlyOnce": "true"}, SCHEMA)
    assert eos.settings["transaction_timeout_ms"] == 900000
    long = KprotoWriter({**base, "exactlyOnce": "true",
                         "kafka.transaction.timeout.ms": "3600000"}, SCHEMA)
    _topics(noida, unique_topic)
    with pytest.raises(ConfigError, match="transaction.max.timeout.ms.*kafka.transaction"):
        _write(long, monkeypatch, 0, b"a")
