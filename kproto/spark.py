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
range with :func:`kproto.reader.read_ranges_result` and yields
``pyarrow.RecordBatch``es decoded by the Cython codec — never rows.

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
from .reader import EARLIEST, LATEST, list_offsets, read_ranges_result

try:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
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


def client_settings(options: Mapping[str, str]) -> dict[str, Any]:
    """kproto consumer settings from the ``kafka.``-prefixed options (Kafka names);
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
    raw.setdefault("enable.auto.commit", "false")
    return resolve("consumer", raw)


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


class KprotoBatchReader(DataSourceReader):
    """Plans offset ranges on the driver; reads one range per task on the executors."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        self.options = options
        self.schema = schema
        self.settings = client_settings(options)
        self.include_headers = _bool(options, "includeHeaders", False)
        self.fail_on_data_loss = _bool(options, "failOnDataLoss", True)

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

    # -- executors

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaRange)
        yield from read_partition(partition, self.schema)


def read_partition(part: KafkaRange, schema: Any = None) -> Iterator[Any]:
    """Read one planned range and yield Arrow batches in Spark's exact layout."""
    from .net.cluster import Cluster

    settings = dict(part.settings)
    target = spark_arrow_schema(part.include_headers)
    cluster = Cluster(settings)
    try:
        result = read_ranges_result(
            cluster, settings, {(part.topic, part.partition): (part.start, part.end)},
            on_gap="fail" if part.fail_on_data_loss else "skip",
            headers=part.include_headers)
    finally:
        cluster.close()
    short = result.short.get((part.topic, part.partition))
    if short is not None and part.fail_on_data_loss:
        raise OffsetOutOfRangeError(
            f"the log ends at {short[0]}, before the planned end {short[1]} (records were "
            "deleted after planning?); set failOnDataLoss=false to read what is there",
            topic=part.topic, partition=part.partition)
    for batch in result.batches:
        yield batch.cast(target)


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
