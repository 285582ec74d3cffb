"""The "kproto" source's reading: the driver-side planner shared by the batch
and the streaming reader (topics, offsets, ranges split into tasks), the
streaming reader's offsets and data-loss checks, and what an executor task
runs (:func:`read_partition`: one range, in steps, as Arrow batches)."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ..admin import Admin
from ..consumer.fetcher import list_offsets
from ..consumer.reader import iter_ranges
from ..errors import ConfigError, IllegalStateError, KprotoError, OffsetOutOfRangeError
from ..structs import EARLIEST, LATEST
from .limits import byte_limit, bytes_per_offset
from .options import (
    OffsetSpec,
    _bool,
    _check_names_every_partition,
    _option,
    _positive,
    _tp_name,
    _tp_names,
    client_settings,
    offset_options,
    settings_for,
)
from .typed import arrow_target, decode_batch, read_formats, spark_schema

log = logging.getLogger("kproto.spark")

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
    #: (not in repr(): it holds the credentials the executor connects with)
    settings: tuple[tuple[str, Any], ...] = field(repr=False)
    include_headers: bool
    fail_on_data_loss: bool
    #: typed key/value columns (valueFormat/keyFormat), resolved on the driver
    typed: tuple[Any, ...] = ()


class DataLossError(IllegalStateError):
    """Records a query should have read are gone (Spark's ``KAFKA_DATA_LOSS``):
    raised with ``failOnDataLoss=true``, logged as a warning otherwise."""


# Spark's own words (KafkaSourceProvider, kafka-error-conditions.json)
_DATA_LOSS_FAIL = (
    "Some data may have been lost because they are not available in Kafka any more; either "
    "the data was aged out by Kafka or the topic may have been deleted before all the data in "
    "the topic was processed. If you don't want your streaming query to fail on such cases, "
    "set the source option failOnDataLoss to false.")
_DATA_LOSS_WARN = (
    "Some data may have been lost because they are not available in Kafka any more; either "
    "the data was aged out by Kafka or the topic may have been deleted before all the data in "
    "the topic was processed. If you want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "true".')


class _Planner:
    """What the batch and the streaming reader share: options, topic discovery,
    offset resolution and splitting ranges into tasks (all on the driver)."""

    #: a streaming reader (options checked as for ``readStream``)
    streaming = False

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        self.options = options
        self.schema = schema
        self.settings = client_settings(options)
        self.include_headers = _bool(options, "includeHeaders", False)
        self.fail_on_data_loss = _bool(options, "failOnDataLoss", True)
        # valueFormat/keyFormat: reader schemas fixed now, to the types the query was planned with
        self.typed = read_formats(options, schema)
        self.min_partitions = _positive(options, "minPartitions")
        self.max_records = _positive(options, "maxRecordsPerPartition")
        # checked here, before anything is read: a bad option fails the query at once
        self.starting, self.ending = offset_options(options, self.streaming)
        strategy = (_option(options, "startingOffsetsByTimestampStrategy") or "error")
        self.no_match_strategy = strategy.strip().lower()
        if self.no_match_strategy not in ("error", "latest"):
            raise ConfigError("option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                              f"'latest', not {strategy!r}")

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

    def resolve(self, cluster: Any, tps: list[tuple[str, int]], spec: OffsetSpec,
                starting: bool) -> dict[tuple[str, int], int]:
        """The offsets ``spec`` means for the partitions ``tps`` (ListOffsets for
        earliest, latest and times), as Spark's ``KafkaOffsetReader`` resolves them."""
        if spec.kind in ("offsets", "timestamps"):
            _check_names_every_partition(spec, tps)
        if not tps:
            return {}
        if spec.kind == "offsets":
            symbolic = {tp: spec.table[tp] for tp in tps if spec.table[tp] < 0}
            found = list_offsets(cluster, self.settings, symbolic) if symbolic else {}
            return {tp: found[tp][0] if tp in found else spec.table[tp] for tp in tps}
        if spec.kind in ("earliest", "latest"):
            wanted = dict.fromkeys(tps, EARLIEST if spec.kind == "earliest" else LATEST)
        elif spec.kind == "timestamps":
            wanted = {tp: spec.table[tp] for tp in tps}
        else:
            wanted = dict.fromkeys(tps, spec.ms)
        found = list_offsets(cluster, self.settings, wanted)
        out = {}
        for tp in tps:
            offset, stamp = found[tp]
            # no record at or after that time: Kafka answers offset -1, Tansu offset 0;
            # both answer timestamp -1 (a found record's own time is never -1 here)
            if spec.kind in ("timestamps", "timestamp") and (offset < 0 or stamp < 0):
                if starting and self.no_match_strategy == "error":
                    raise ConfigError(
                        f"No offset matched from request of topic-partition {_tp_name(tp)} and "
                        f"timestamp {wanted[tp]} (option {spec.option!r}; "
                        "startingOffsetsByTimestampStrategy=latest starts at the end instead).")
                offset = list_offsets(cluster, self.settings, {tp: LATEST})[tp][0]
            out[tp] = offset
        return out

    def _split(self, ranges: list[tuple[tuple[str, int], int, int]]) -> list[KafkaRange]:
        """One task per range, more where minPartitions/maxRecordsPerPartition ask."""
        min_parts, max_records = self.min_partitions, self.max_records
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
                           self.fail_on_data_loss, typed=self.typed) for tp, a, b in pieces]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """On an executor: the records of one planned range, as Arrow batches."""
        if not isinstance(partition, KafkaRange):
            return      # pyspark reads InputPartition(None) when partitions() planned none
        yield from read_partition(partition, self.schema)


class KprotoBatchReader(_Planner, DataSourceReader):
    """Plans offset ranges on the driver; reads one range per task on the executors."""

    # -- driver

    def partitions(self) -> list[KafkaRange]:
        from ..net.cluster import Cluster

        cluster = Cluster(self.settings)
        try:
            tps = self._topic_partitions(cluster)
            assert self.ending is not None
            starts = self.resolve(cluster, tps, self.starting, True)
            ends = self.resolve(cluster, tps, self.ending, False)
        finally:
            cluster.close()
        ranges = []
        for tp in sorted(tps):
            start, end = starts[tp], ends[tp]
            if end < start:
                if self.fail_on_data_loss:
                    raise OffsetOutOfRangeError(
                        f"The resolved start offset {start} is greater than the resolved end "
                        f"offset {end} for topic {tp[0]} partition {tp[1]}; set "
                        "failOnDataLoss=false to skip such partitions",
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

    Each batch ends at the log ends as they are, never raised to its start:
    planning a batch then finds what Spark's ``KafkaMicroBatchStream`` reports
    as data loss (a log end below the checkpointed offset, partitions gone, a
    new partition not starting at 0), which fails the query with
    ``failOnDataLoss=true`` and is logged otherwise, the query going on from
    the offsets as they are now.
    """

    streaming = True

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        super().__init__(options, schema)
        limit = _option(options, "maxOffsetsPerTrigger")
        self.max_per_trigger = int(limit) if limit else 0
        # Spark's fetchOffset.* options: how often a log end below the known
        # offset is asked again (a stale leader can answer so for a moment)
        self.fetch_attempts = max(1, int(_option(options, "fetchOffset.numRetries", "3") or 3))
        self.fetch_interval = int(_option(options, "fetchOffset.retryIntervalMs", "1000")
                                  or 1000) / 1000
        # operators' options: bytes per micro-batch (admission control), and a
        # group that each committed micro-batch's end offsets go to (lag in tooling)
        self.max_bytes = _positive(options, "maxBytesPerTrigger")
        group = _option(options, "commitOffsetsToGroup")
        if group is not None and not group.strip():
            raise ConfigError("option 'commitOffsetsToGroup' must name a group")
        self.commit_group = group
        self._group_offsets: dict[tuple[str, int], int] | None = None    # committed last
        self._cluster: Any = None
        self._available_now = False
        self._target: dict[tuple[str, int], int] | None = None
        self._log_ends: dict[tuple[str, int], int] | None = None     # reportLatestOffset

    def _driver_cluster(self) -> Any:
        from ..net.cluster import Cluster

        if self._cluster is None:
            self._cluster = Cluster(self.settings)
        return self._cluster

    def _current_partitions(self) -> list[tuple[str, int]]:
        cluster = self._driver_cluster()
        cluster.mark_stale()            # new partitions and topics show up
        return self._topic_partitions(cluster)

    def _latest(self, known: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The log end of every partition read now. As Spark's ``fetchLatestOffsets``,
        ends below the ``known`` offsets are asked again a few times before
        :meth:`partitions` takes them for data loss."""
        for attempt in range(1, self.fetch_attempts + 1):
            tps = self._current_partitions()
            found = list_offsets(self._driver_cluster(), self.settings,
                                 dict.fromkeys(tps, LATEST)) if tps else {}
            latest = {tp: found[tp][0] for tp in tps}
            behind = {tp: (known[tp], end) for tp, end in latest.items()
                      if tp in known and end < known[tp]}
            if not behind or attempt == self.fetch_attempts:
                return latest
            log.warning("log ends below the offsets already reached (partition: (reached, "
                        "end)) %s; asking again", behind)
            time.sleep(self.fetch_interval)
        raise AssertionError("unreachable")

    def _earliest_of(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Earliest offsets of those of ``tps`` that exist now (Spark's
        ``fetchEarliestOffsets(newPartitions)``: deleted ones are left out)."""
        there = set(self._current_partitions())
        alive = [tp for tp in tps if tp in there]
        if not alive:
            return {}
        found = list_offsets(self._driver_cluster(), self.settings,
                             dict.fromkeys(alive, EARLIEST))
        return {tp: found[tp][0] for tp in alive}

    def _report_data_loss(self, reason: str) -> None:
        """Spark's ``reportDataLoss``: fail with failOnDataLoss=true, else warn."""
        if self.fail_on_data_loss:
            raise DataLossError(f"{reason} {_DATA_LOSS_FAIL}")
        log.warning("%s %s", reason, _DATA_LOSS_WARN)

    def initialOffset(self) -> dict[str, dict[str, int]]:
        cluster = self._driver_cluster()
        tps = self._topic_partitions(cluster)
        return _to_json(self.resolve(cluster, tps, self.starting, True))

    def getDefaultReadLimit(self) -> Any:
        if self.max_per_trigger > 0:
            return ReadMaxRows(self.max_per_trigger)      # (and maxBytesPerTrigger, if set)
        if self.max_bytes > 0:
            return ReadMaxBytes(self.max_bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True      # the target is fetched with the first start

    def latestOffset(self, start: dict[str, Any], limit: Any = None) -> dict[str, dict[str, int]]:
        begin = _from_json(start)
        # Spark plans the next micro-batch once the last one is done, and tells
        # commit() only then: ``start`` is what the query has read (see commit)
        self._commit_group(begin)
        if self._available_now:
            if self._target is None:
                self._target = self._latest(begin)
            latest = self._target
        else:
            latest = self._latest(begin)
        self._log_ends = dict(latest)
        end = dict(latest)      # not raised to ``begin``: partitions() must see a lower end
        if limit is None or isinstance(limit, ReadAllAvailable):
            return _to_json(end)
        max_rows = getattr(limit, "max_rows", None)
        max_bytes = getattr(limit, "max_bytes", None) or self.max_bytes
        if max_rows is not None or max_bytes:
            # partitions added since start from their earliest offset
            start_of = {**self._earliest_of([tp for tp in latest if tp not in begin]),
                        **begin}
            known = {tp: e for tp, e in end.items() if tp in start_of}
            if max_rows is not None:
                known = _rate_limit(start_of, known, int(max_rows))
            if max_bytes:
                per_offset = bytes_per_offset(self.settings, start_of, known)
                known = byte_limit(start_of, known, per_offset, int(max_bytes))
            end.update(known)
        return _to_json(end)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        """The log ends found by the last ``latestOffset`` (PySpark 4.2+ shows them
        as the progress's ``latestOffset``): each partition's lag is its
        ``latestOffset`` minus the ``endOffset`` a micro-batch read to. PySpark's
        Python data sources cannot report custom source metrics (Spark's Kafka
        source's ``avgOffsetsBehindLatest``): this is the lag a progress shows."""
        return None if self._log_ends is None else _to_json(self._log_ends)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]
                   ) -> list[KafkaRange]:
        """Ranges from ``start`` to ``end``, checked as Spark's
        ``getOffsetRangesFromResolvedOffsets`` checks them (same reasons, same order)."""
        begin, stop = _from_json(start), _from_json(end)
        new = [tp for tp in sorted(stop) if tp not in begin]
        first = self._earliest_of(new) if new else {}
        if set(first) != set(new):
            self._report_data_loss(f"Cannot find initial offsets for partitions "
                                   f"{_tp_names(set(new) - set(first))}. They may have been "
                                   "deleted.")
        for tp, offset in sorted(first.items()):
            if offset != 0:
                self._report_data_loss(f"Added partition {_tp_name(tp)} starts from {offset} "
                                       "instead of 0.")
        gone = set(begin) - set(stop)
        if gone:
            self._report_data_loss(f"Partitions {_tp_names(gone)} have been deleted.")
        begin.update(first)
        ranges = []
        for tp, e in sorted(stop.items()):
            if tp not in begin:         # a new partition that is gone again
                continue
            b = begin[tp]
            if e < b:
                self._report_data_loss(
                    f"Partition {_tp_name(tp)} offset was changed from {b} to {e}. This could "
                    "either be a user error that the start offset is set too high and this is "
                    "the first batch, or the kafka topic-partition is broken, and some data may "
                    "have been missed.")
            elif e > b:
                ranges.append((tp, b, e))
        return self._split(ranges)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark finished the micro-batch ending at ``end``. The checkpoint holds the
        offsets; with ``commitOffsetsToGroup`` they are also committed to that
        group, for Kafka's tooling (lag)."""
        self._commit_group(_from_json(end))

    def _commit_group(self, offsets: dict[tuple[str, int], int]) -> None:
        """``commitOffsetsToGroup``: commit the offsets a query has read up to, when
        they moved. Spark calls commit() for a micro-batch only when it plans the
        next one (an idle query would never show its last batch), but it asks
        latestOffset() from the end of the last finished batch on every trigger:
        both commit. A failed commit is logged, not raised: the group's offsets
        are for looking at, the query never reads them."""
        if self.commit_group is None or not offsets or offsets == self._group_offsets:
            return
        try:
            with Admin(settings_for(self.settings, "admin")) as admin:
                admin.alter_consumer_group_offsets(self.commit_group, offsets)
            self._group_offsets = dict(offsets)
        except KprotoError as exc:
            log.warning("could not commit the offsets read to group %r: %s", self.commit_group,
                        exc)

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


def read_partition(part: KafkaRange, schema: Any = None) -> Iterator[Any]:
    """Read one planned range and yield Arrow batches in Spark's exact layout."""
    target = spark_arrow_schema(part.include_headers)
    typed = arrow_target(spark_schema(target, part.typed)) if part.typed else None
    # in steps of bounded size: a task's memory does not grow with its range
    steps = iter_ranges(dict(part.settings), {(part.topic, part.partition): (part.start, part.end)},
                        step_bytes=STEP_BYTES, headers=part.include_headers,
                        on_gap="fail" if part.fail_on_data_loss else "skip")
    try:
        for step in steps:
            for batch in step.batches:
                if typed is None:
                    yield batch.cast(target)
                else:               # decoded in the same batches, on this executor
                    yield decode_batch(batch.cast(target), part.typed, typed)
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
