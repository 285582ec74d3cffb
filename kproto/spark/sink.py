"""The "kproto" sink: batch and streaming Arrow writers (each task encodes whole
Arrow batches with ``Producer.send_batch`` and waits for every acknowledgement)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from ..errors import ConfigError
from ..producer.columns import check_names
from .exactly_once import ExactlyOnce, TaskTransaction, abort_all, commit_all
from .options import _option, client_settings
from .typed import SinkFormats


@dataclass(frozen=True)
class KprotoCommitMessage(WriterCommitMessage):
    """What one write task wrote: records and record batches."""

    records: int
    batches: int


class KprotoWriter(DataSourceArrowWriter):
    """``df.write.format("kproto")``: columns ``value`` (binary or string), and
    optionally ``key``, ``topic`` (else the ``topic`` option), ``partition``,
    ``headers`` (``array<struct<key string, value binary>>``). Each task encodes
    whole Arrow batches with the Cython codec (``Producer.send_batch``) and
    waits until every record is acknowledged, so a failure fails the task with
    the broker's error; nothing is dropped silently. Producer settings come from
    ``kafka.``-prefixed options (``kafka.acks``, ``kafka.compression.type``,
    ``kafka.enable.idempotence``...).

    With ``exactlyOnce=true`` each task writes in a Kafka transaction that the
    driver commits when Spark commits the job (:mod:`kproto.spark.exactly_once`);
    otherwise delivery is at-least-once (a retried task writes again)."""

    #: a stream's writer (exactly-once: transactional ids and batch markers per query)
    streaming = False

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        self.settings = client_settings(options, "producer")
        self.exactly_once = ExactlyOnce.from_options(options, self.settings, self.streaming)
        self.topic = _option(options, "topic")
        self.formats = SinkFormats.from_options(options)    # valueFormat/keyFormat
        names = [f.name for f in schema.fields] if hasattr(schema, "fields") else []
        check_names(names, also=("topic",))         # send_batch's columns, and topic
        if self.topic is None and "topic" not in names:
            raise ConfigError("writing to Kafka needs a 'topic' option or column")

    def write(self, iterator: Iterator[Any]) -> Any:
        from ..producer.producer import Producer

        records = batches = 0
        futures = []
        txn = None if self.exactly_once is None else TaskTransaction(self.settings,
                                                                     self.exactly_once)
        if txn is not None and txn.skip:
            return txn.skipped()         # a replayed micro-batch this task committed
        producer = Producer(self.settings) if txn is None else txn.producer
        try:
            for batch in iterator:
                if not batch.num_rows:
                    continue
                for topic, part in _by_topic(batch, self.topic):
                    if self.formats is not None:
                        part = self.formats.encode(topic, part)
                    futures.append(producer.send_batch(topic, part))
                    records += part.num_rows
                    if txn is not None:
                        txn.wrote(topic)
                batches += 1
            producer.flush()
            for f in futures:
                f.result()          # the first failure fails the task
            if txn is not None:
                return txn.prepare(records, batches)     # left open: the driver commits
        except BaseException:
            if txn is not None:
                txn.abort()
            raise
        finally:
            producer.close()
        return KprotoCommitMessage(records, batches)

    def commit(self, messages: list[Any]) -> None:
        """Exactly-once: commit every task's transaction. Otherwise every task's
        records are acknowledged by then: nothing left to do."""
        if self.exactly_once is not None:
            commit_all(messages, self.settings, f"write job {self.exactly_once.job}")

    def abort(self, messages: list[Any]) -> None:
        """Exactly-once: abort every task's transaction. Otherwise records written
        by tasks that succeeded stay written (Kafka has no rollback outside
        transactions), as with Spark's own Kafka sink."""
        if self.exactly_once is not None:
            abort_all(messages, self.settings, self.exactly_once.base())


class KprotoStreamWriter(KprotoWriter, DataSourceStreamArrowWriter):
    """``writeStream.format("kproto")``: the same per-task writing, per micro-batch."""

    streaming = True

    def commit(self, messages: list[Any], batchId: int) -> None:  # type: ignore[override]  # noqa: N803
        """Exactly-once: commit every task's transaction of the micro-batch.
        Otherwise every task's records are acknowledged by then."""
        if self.exactly_once is not None:
            commit_all(messages, self.settings, f"micro-batch {batchId}")

    def abort(self, messages: list[Any], batchId: int) -> None:  # type: ignore[override]  # noqa: N803
        """Exactly-once: abort the micro-batch's transactions. Otherwise records of
        tasks that succeeded stay written (at-least-once)."""
        if self.exactly_once is not None:
            abort_all(messages, self.settings, self.exactly_once.prefix)


def _by_topic(batch: Any, topic: str | None) -> Iterator[tuple[str, Any]]:
    """Split a batch by its ``topic`` column (the ``topic`` option wins, as in Spark)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names
    keep = [c for c in ("key", "value", "partition", "headers", "timestamp") if c in names]
    table = pa.Table.from_batches([batch]).select(keep)
    if topic is not None or "topic" not in names:
        assert topic is not None
        yield topic, table
        return
    topics = batch.column("topic")
    if topics.null_count:
        raise ConfigError("a row has a null topic (and no 'topic' option is set)")
    for name in pc.unique(topics).to_pylist():
        yield name, table.filter(pc.equal(topics, name))
