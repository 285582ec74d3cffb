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
from .options import _option, client_settings


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
    ``kafka.enable.idempotence``...)."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        self.settings = client_settings(options, "producer")
        self.topic = _option(options, "topic")
        names = [f.name for f in schema.fields] if hasattr(schema, "fields") else []
        if "value" not in names:
            raise ConfigError("writing to Kafka needs a 'value' column")
        if self.topic is None and "topic" not in names:
            raise ConfigError("writing to Kafka needs a 'topic' option or column")
        unknown = set(names) - {"key", "value", "topic", "partition", "headers",
                                "timestamp"}
        if unknown:
            raise ConfigError(f"columns {sorted(unknown)} cannot be written to Kafka "
                              "(key, value, topic, partition, headers, timestamp)")

    def write(self, iterator: Iterator[Any]) -> KprotoCommitMessage:
        from ..producer import Producer

        records = batches = 0
        futures = []
        with Producer(self.settings) as producer:
            for batch in iterator:
                if not batch.num_rows:
                    continue
                for topic, part in _by_topic(batch, self.topic):
                    futures.append(producer.send_batch(topic, part))
                    records += part.num_rows
                batches += 1
            producer.flush()
            for f in futures:
                f.result()          # the first failure fails the task
        return KprotoCommitMessage(records, batches)

    def commit(self, messages: list[Any]) -> None:
        """Every task's records are acknowledged by then: nothing left to do."""

    def abort(self, messages: list[Any]) -> None:
        """Records written by tasks that succeeded stay written (Kafka has no
        rollback outside transactions), as with Spark's own Kafka sink."""


class KprotoStreamWriter(KprotoWriter, DataSourceStreamArrowWriter):
    """``writeStream.format("kproto")``: the same per-task writing, per micro-batch."""

    def commit(self, messages: list[Any], batchId: int) -> None:  # type: ignore[override]  # noqa: N803
        """Every task's records are acknowledged by then."""

    def abort(self, messages: list[Any], batchId: int) -> None:  # type: ignore[override]  # noqa: N803
        """Records of tasks that succeeded stay written (at-least-once)."""


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
