"""PySpark Python Data Source "kproto": read Kafka into Spark as Arrow batches.

>>> import kproto.spark                                            # doctest: +SKIP
>>> kproto.spark.register(spark)                                   # doctest: +SKIP
>>> df = (spark.read.format("kproto")                              # doctest: +SKIP
...       .option("kafka.bootstrap.servers", "broker:9092")
...       .option("subscribe", "events")
...       .option("startingOffsets", "earliest")
...       .load())

The options and the schema are those of Spark's own Kafka source, so moving a
job is a one-word change (``format("kafka")`` -> ``format("kproto")``). The
driver plans offset ranges (Metadata + ListOffsets, big partitions split by
``minPartitions`` / ``maxRecordsPerPartition``); each executor task reads its
range with :func:`kproto.reader.iter_ranges` (in steps of bounded size) and
yields ``pyarrow.RecordBatch``es decoded by the Cython codec — never rows.

Supported options (Spark's names):

- ``kafka.bootstrap.servers`` (required); any other ``kafka.``-prefixed option
  is a kproto client setting under its Kafka name (``kafka.security.protocol``,
  ``kafka.sasl.mechanism``, ``kafka.max.partition.fetch.bytes``,
  ``kafka.isolation.level``...).
- one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a
  regular expression), ``assign`` (JSON ``{"topic": [0, 1]}``);
- ``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or JSON
  ``{"topic": {"0": 23, "1": -2}}`` (-2 earliest, -1 latest);
- ``startingTimestamp`` / ``endingTimestamp`` (ms, every partition),
  ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` (JSON of ms);
- ``minPartitions``, ``maxRecordsPerPartition``: split ranges into more tasks;
- ``includeHeaders`` (default false), ``failOnDataLoss`` (default true).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .config import resolve
from .errors import ConfigError, OffsetOutOfRangeError
from .reader import EARLIEST, LATEST, iter_ranges, list_offsets

try:
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        DataSourceStreamArrowWriter,
        DataSourceStreamReader,
        InputPartition,
        WriterCommitMessage,
    )
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - kproto works without pyspark; this module needs it
    raise ImportError("kproto.spark needs pyspark (pip install 'kproto[spark]')") from None

__all__ = ["KprotoDataSource", "register", "KafkaRange", "SCHEMA_DDL"]

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, "
              "timestamp timestamp, timestampType int")
HEADERS_DDL = ", headers array<struct<key: string, value: binary>>"

_CONSUMER_KEYS = {"group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
                  "value.deserializer", "interceptor.classes"}


def register(spark: Any) -> None:
    """Register the "kproto" format with a SparkSession."""
    spark.dataSource.register(KprotoDataSource)


#: Arrow bytes a task reads per step (it holds about two steps: one read ahead).
STEP_BYTES = 64 << 20


@dataclass(frozen=True)
class KafkaRange(InputPartition):
    """One task's work: ``start <= offset < end`` of one partition, and the client
    settings to read it with (everything ``read()`` needs: it runs elsewhere)."""

    topic: str
    partition: int
    start: int
    end: int
    settings: tuple[tuple[str, Any], ...]
    include_headers: bool
    fail_on_data_loss: bool


def client_settings(options: Mapping[str, str], client: str = "consumer") -> dict[str, Any]:
    """kproto ``client`` settings from the ``kafka.``-prefixed options (Kafka names);
    settings Spark's source refuses (group.id...) are refused here too."""
    raw: dict[str, Any] = {}
    for key, value in options.items():
        low = key.lower()
        if not low.startswith("kafka."):
            continue
        name = key[len("kafka."):]
        if name.lower() in _CONSUMER_KEYS:
            raise ConfigError(f"option {key!r} is not supported: the source manages offsets "
                              "itself and returns bytes")
        raw[name] = value
    if not any(k.lower() == "bootstrap.servers" for k in raw):
        raise ConfigError("option 'kafka.bootstrap.servers' is required")
    raw.setdefault("client.id", "kproto-spark")
    if client == "consumer":
        raw.setdefault("enable.auto.commit", "false")
    return resolve(client, raw)


def _option(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    # Spark passes a case-insensitive mapping; plain dicts (tests) are matched by hand
    try:
        value = options.get(name)
    except Exception:  # noqa: BLE001 - any mapping
        value = None
    if value is None:
        lowered = {k.lower(): v for k, v in options.items()}
        value = lowered.get(name.lower())
    return default if value is None else str(value)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _option(options, name)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"option {name!r} must be true or false, not {value!r}")
    return value.strip().lower() == "true"


class KprotoDataSource(DataSource):
    """``spark.read.format("kproto")``: Kafka topics as a DataFrame (see the module)."""

    @classmethod
    def name(cls) -> str:
        return "kproto"

    def schema(self) -> str:
        return SCHEMA_DDL + (HEADERS_DDL if _bool(self.options, "includeHeaders", False)
                             else "")

    def reader(self, schema: Any) -> KprotoBatchReader:
        return KprotoBatchReader(self.options, schema)

    def streamReader(self, schema: Any) -> KprotoStreamReader:
        return KprotoStreamReader(self.options, schema)

    def writer(self, schema: Any, overwrite: bool) -> KprotoWriter:
        return KprotoWriter(self.options, schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> KprotoStreamWriter:
        return KprotoStreamWriter(self.options, schema)


class _Planner:
    """What the batch and the streaming reader share: options, topic discovery,
    offset resolution and splitting ranges into tasks (all on the driver)."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        self.options = options
        self.schema = schema
        self.settings = client_settings(options)
        self.include_headers = _bool(options, "includeHeaders", False)
        self.fail_on_data_loss = _bool(options, "failOnDataLoss", True)

    def _topic_partitions(self, cluster: Any) -> list[tuple[str, int]]:
        opts = self.options
        given = [n for n in ("subscribe", "subscribePattern", "assign") if _option(opts, n)]
        if len(given) != 1:
            raise ConfigError("give exactly one of the options subscribe, subscribePattern "
                              f"and assign (got {given or 'none'})")
        how = given[0]
        value = _option(opts, how) or ""
        if how == "assign":
            try:
                assigned = json.loads(value)
                tps = [(str(t), int(p)) for t, ps in assigned.items() for p in ps]
            except (ValueError, AttributeError, TypeError) as exc:
                raise ConfigError(f"option 'assign' must be JSON like "
                                  f'{{"topic": [0, 1]}}, not {value!r}') from exc
            cluster.wait_for_topics({t for t, _ in tps}, cluster.request_timeout)
            return tps
        if how == "subscribe":
            topics = sorted({t.strip() for t in value.split(",") if t.strip()})
            meta = cluster.wait_for_topics(topics, cluster.request_timeout)
        else:
            regex = re.compile(value)
            meta = cluster.refresh_metadata(all_topics=True)
            topics = sorted(t for t, info in meta.topics.items()
                            if regex.fullmatch(t) and not info.is_internal)
            if topics:
                meta = cluster.wait_for_topics(topics, cluster.request_timeout)
        return [(t, p) for t in topics for p in meta.partitions(t)]

    def _offsets(self, cluster: Any, tps: list[tuple[str, int]], which: str,
                 default: int) -> dict[tuple[str, int], int]:
        """Resolve starting/ending offsets: by timestamp, JSON, earliest/latest."""
        opts = self.options
        wanted: dict[tuple[str, int], int] = {}
        by_time = _option(opts, f"{which}OffsetsByTimestamp")
        one_time = _option(opts, f"{which}Timestamp")
        spec = _option(opts, f"{which}Offsets")
        if by_time is not None:
            table = _json_offsets(by_time, f"{which}OffsetsByTimestamp")
            for tp in tps:
                if tp not in table:
                    raise ConfigError(f"{which}OffsetsByTimestamp has no entry for "
                                      f"{tp[0]}[{tp[1]}]")
                wanted[tp] = table[tp]
        elif one_time is not None:
            wanted = dict.fromkeys(tps, int(one_time))
        elif spec is None or spec.strip().lower() in ("earliest", "latest"):
            word = (spec or ("earliest" if default == EARLIEST else "latest")).strip().lower()
            if which == "ending" and word == "earliest":
                raise ConfigError("endingOffsets cannot be 'earliest'")
            wanted = dict.fromkeys(tps, EARLIEST if word == "earliest" else LATEST)
        else:
            table = _json_offsets(spec, f"{which}Offsets")
            wanted = {tp: table.get(tp, default) for tp in tps}
            explicit = {tp: o for tp, o in wanted.items() if o >= 0}
            if explicit:
                symbolic = {tp: o for tp, o in wanted.items() if o < 0}
                found = list_offsets(cluster, self.settings, symbolic) if symbolic else {}
                return {tp: explicit.get(tp, found.get(tp, (0, 0))[0]) for tp in tps}
        found = list_offsets(cluster, self.settings, wanted)
        out = {}
        for tp in tps:
            offset = found[tp][0]
            if offset < 0:      # no record at or after that time: the end of the log
                offset = list_offsets(cluster, self.settings, {tp: LATEST})[tp][0]
            out[tp] = offset
        return out

    def _split(self, ranges: list[tuple[tuple[str, int], int, int]]) -> list[KafkaRange]:
        """One task per range, more where minPartitions/maxRecordsPerPartition ask."""
        min_parts = int(_option(self.options, "minPartitions", "0") or 0)
        max_records = int(_option(self.options, "maxRecordsPerPartition", "0") or 0)
        total = sum(end - start for _, start, end in ranges)
        pieces: list[tuple[tuple[str, int], int, int]] = []
        for tp, start, end in ranges:
            size = end - start
            n = 1
            if min_parts > len(ranges) and total:
                n = max(n, round(min_parts * size / total))
            if max_records > 0:
                n = max(n, -(-size // max_records))
            n = max(1, min(n, size))
            step = size / n
            bounds = [start + round(i * step) for i in range(n)] + [end]
            pieces += [(tp, a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
        settings = tuple(sorted(self.settings.items()))
        return [KafkaRange(tp[0], tp[1], a, b, settings, self.include_headers,
                           self.fail_on_data_loss) for tp, a, b in pieces]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """On an executor: the records of one planned range, as Arrow batches."""
        assert isinstance(partition, KafkaRange)
        yield from read_partition(partition, self.schema)


class KprotoBatchReader(_Planner, DataSourceReader):
    """Plans offset ranges on the driver; reads one range per task on the executors."""

    # -- driver

    def partitions(self) -> list[KafkaRange]:
        from .net.cluster import Cluster

        cluster = Cluster(self.settings)
        try:
            tps = self._topic_partitions(cluster)
            starts = self._offsets(cluster, tps, "starting", EARLIEST)
            ends = self._offsets(cluster, tps, "ending", LATEST)
        finally:
            cluster.close()
        ranges = []
        for tp in sorted(tps):
            start, end = starts[tp], ends[tp]
            if end < start:
                if self.fail_on_data_loss:
                    raise OffsetOutOfRangeError(
                        f"ending offset {end} is before starting offset {start}",
                        topic=tp[0], partition=tp[1])
                continue
            if end > start:
                ranges.append((tp, start, end))
        return self._split(ranges)



def _to_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def _from_json(offsets: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, parts in offsets.items() for p, o in parts.items()}


class KprotoStreamReader(_Planner, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch streaming: offsets are JSON ``{"topic": {"partition": offset}}``.

    ``startingOffsets`` (default ``latest``, as in Spark) applies to the first
    batch of a query without a checkpoint; partitions that appear later start
    from their earliest offset. ``maxOffsetsPerTrigger`` caps the records per
    micro-batch (split over partitions in proportion to their backlog); with
    ``Trigger.availableNow`` the query stops at the offsets of its start.
    """

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        super().__init__(options, schema)
        limit = _option(options, "maxOffsetsPerTrigger")
        self.max_per_trigger = int(limit) if limit else 0
        if _option(options, "endingOffsets") is not None:
            raise ConfigError("endingOffsets is for batch queries; a stream has no end")
        self._cluster: Any = None
        self._target: dict[tuple[str, int], int] | None = None

    def _driver_cluster(self) -> Any:
        from .net.cluster import Cluster

        if self._cluster is None:
            self._cluster = Cluster(self.settings)
        return self._cluster

    def _latest(self) -> dict[tuple[str, int], int]:
        cluster = self._driver_cluster()
        cluster.mark_stale()            # new partitions and topics show up
        tps = self._topic_partitions(cluster)
        found = list_offsets(cluster, self.settings, dict.fromkeys(tps, LATEST))
        return {tp: found[tp][0] for tp in tps}

    def initialOffset(self) -> dict[str, dict[str, int]]:
        cluster = self._driver_cluster()
        tps = self._topic_partitions(cluster)
        return _to_json(self._offsets(cluster, tps, "starting", LATEST))

    def getDefaultReadLimit(self) -> Any:
        if self.max_per_trigger > 0:
            return ReadMaxRows(self.max_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: dict[str, Any], limit: Any = None) -> dict[str, dict[str, int]]:
        begin = _from_json(start)
        latest = self._target if self._target is not None else self._latest()
        new = [tp for tp in latest if tp not in begin]
        if new:     # partitions added since: from their start
            found = list_offsets(self._driver_cluster(), self.settings,
                                 dict.fromkeys(new, EARLIEST))
            begin.update({tp: found[tp][0] for tp in new})
        end = {tp: max(latest[tp], begin[tp]) for tp in latest}
        max_rows = getattr(limit, "max_rows", None)
        if max_rows is not None and limit is not None and not isinstance(limit,
                                                                        ReadAllAvailable):
            end = _rate_limit(begin, end, int(max_rows))
        return _to_json(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]
                   ) -> list[KafkaRange]:
        begin, stop = _from_json(start), _from_json(end)
        ranges = []
        for tp, e in sorted(stop.items()):
            b = begin.get(tp, 0)
            if e > b:
                ranges.append((tp, b, e))
        return self._split(ranges)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the checkpoint holds the offsets (no group commits)."""

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def _rate_limit(begin: Mapping[tuple[str, int], int], end: dict[tuple[str, int], int],
                max_rows: int) -> dict[tuple[str, int], int]:
    """Cap the total ``end - begin`` at ``max_rows``, each partition getting a share
    in proportion to its backlog (every partition with a backlog moves)."""
    lag = {tp: end[tp] - begin[tp] for tp in end if end[tp] > begin[tp]}
    total = sum(lag.values())
    if total <= max_rows:
        return end
    out = dict(end)
    given = 0
    for tp, n in sorted(lag.items()):
        share = max(1, n * max_rows // total)
        share = min(share, n, max(0, max_rows - given)) if given < max_rows else 0
        out[tp] = begin[tp] + share
        given += share
    return out


# --------------------------------------------------------------------------- writing


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
        from .producer import Producer

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


def read_partition(part: KafkaRange, schema: Any = None) -> Iterator[Any]:
    """Read one planned range and yield Arrow batches in Spark's exact layout."""
    target = spark_arrow_schema(part.include_headers)
    # in steps of bounded size: a task's memory does not grow with its range
    steps = iter_ranges(dict(part.settings), {(part.topic, part.partition): (part.start, part.end)},
                        step_bytes=STEP_BYTES, headers=part.include_headers,
                        on_gap="fail" if part.fail_on_data_loss else "skip")
    try:
        for step in steps:
            for batch in step.batches:
                yield batch.cast(target)
            short = step.short.get((part.topic, part.partition))
            if short is not None and part.fail_on_data_loss:
                raise OffsetOutOfRangeError(
                    f"the log ends at {short[0]}, before the planned end {short[1]} (records "
                    "were deleted after planning?); set failOnDataLoss=false to read what is "
                    "there", topic=part.topic, partition=part.partition)
    finally:
        steps.close()            # stops the read-ahead thread now, not at collection


def spark_arrow_schema(include_headers: bool) -> Any:
    """The Arrow schema Spark expects from read() for the declared schema."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()), pa.field("value", pa.binary()),
        pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()), pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(pa.field("element", header))))
    return pa.schema(fields)


def _json_offsets(text: str, what: str) -> dict[tuple[str, int], int]:
    try:
        table = json.loads(text)
        return {(str(t), int(p)): int(o) for t, parts in table.items()
                for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise ConfigError(f"option {what!r} must be 'earliest', 'latest' or JSON like "
                          f'{{"topic": {{"0": 23}}}}, not {text!r}') from exc
