"""The consumer's fetch metrics (Java's ``FetchMetricsManager`` / ``FetchMetricsRegistry``).

Group ``consumer-fetch-manager-metrics``, recorded per Fetch answer (by
:class:`~kproto.consumer.fetches.Fetches`) and per poll (by
:class:`~kproto.consumer.fetch_buffer.FetchBuffer`: records and bytes summed
per topic, the lag per partition handed out), each time under one lock of the
registry, never per record:

- client-wide (tag ``client-id``): ``fetch-latency-avg``/``-max`` (ms from a
  Fetch's send to its answer), ``fetch-rate``/``fetch-total``,
  ``fetch-size-avg``/``-max`` (bytes of an answer), ``records-per-request-avg``,
  ``records-consumed-rate``/``-total`` and ``bytes-consumed-rate``/``-total``
  (what polls handed out; bytes of the record sets, pro rata of the records),
  ``records-lag-max`` (the largest partition lag recorded in the windows);
- per topic (tags ``client-id``, ``topic``): ``records-consumed-rate``/``-total``,
  ``bytes-consumed-rate``/``-total``;
- per partition (tags ``client-id``, ``topic``, ``partition``): ``records-lag``
  (the last lag: the answer's high watermark, or last stable offset under
  read_committed, minus the position after the poll), ``records-lag-avg``,
  ``records-lag-max``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..metrics import Avg, Max, Metrics, Sensor, Value
from ..structs import TopicPartition

__all__ = ["FetchMetrics", "GROUP", "Handed"]

GROUP = "consumer-fetch-manager-metrics"

#: a partition piece a poll handed out: (tp, records, bytes, position after it,
#: high watermark, last stable offset, the end its lag counts to)
Handed = tuple[TopicPartition, int, int, int, int, int, int]


class FetchMetrics:
    """The fetch sensors of one consumer (its thread records; any thread reads)."""

    def __init__(self, registry: Metrics) -> None:
        self.registry = r = registry
        n = r.metric_name
        self._latency = self._new("fetch-latency", [
            (n("fetch-latency-avg", GROUP, "ms from a Fetch to its answer, average"), Avg()),
            (n("fetch-latency-max", GROUP, "ms from a Fetch to its answer, max"), Max())],
            meter=("fetch-rate", "fetch-total", True))
        self._size = self._new("fetch-size", [
            (n("fetch-size-avg", GROUP, "bytes per Fetch answer, average"), Avg()),
            (n("fetch-size-max", GROUP, "bytes per Fetch answer, max"), Max())])
        self._per_request = self._new("records-per-request", [
            (n("records-per-request-avg", GROUP, "records per Fetch answer"), Avg())])
        self._records = self._new("records-consumed", [],
                                  meter=("records-consumed-rate", "records-consumed-total", False))
        self._bytes = self._new("bytes-consumed", [],
                                meter=("bytes-consumed-rate", "bytes-consumed-total", False))
        self._lag_max = self._new("records-lag", [
            (n("records-lag-max", GROUP, "largest partition lag in the windows"), Max())])
        self._topics: dict[str, tuple[Sensor, Sensor]] = {}
        self._partitions: dict[TopicPartition, Sensor] = {}
        #: per partition: (position, high watermark, last stable offset, the end lag
        #: is counted to) last seen
        self.offsets: dict[TopicPartition, tuple[int, int, int, int]] = {}
        self._assignment: list[TopicPartition] | None = None     # (see follow)

    def _new(self, name: str, stats: list[tuple[Any, Any]],
             meter: tuple[str, str, bool] | None = None, tags: dict[str, Any] | None = None,
             parents: Iterable[Sensor] = ()) -> Sensor:
        s, new = self.registry.sensor(name, parents)
        if new:
            for metric, stat in stats:
                s.add(metric, stat)
            if meter is not None:
                rate, total, count = meter
                s.add_meter(self.registry.metric_name(rate, GROUP, **(tags or {})),
                            self.registry.metric_name(total, GROUP, **(tags or {})), count=count)
        return s

    def fetched(self, latency: float, nbytes: int, records: int, now: float) -> None:
        """A Fetch answer of ``nbytes`` with ``records`` came ``latency`` s after its send."""
        self.registry.record_all(((self._latency, latency * 1000), (self._size, nbytes),
                                  (self._per_request, records)), now)

    def consumed(self, handed: Iterable[Handed], now: float) -> None:
        """A poll handed out records: for each partition piece ``(tp, records,
        nbytes, position, high_watermark, last_stable, watermark)`` - ``records``
        of ``tp`` (and the last of an answer's ``nbytes``), its position now
        ``position``, ``watermark`` its end. Records and bytes are summed per
        topic (as Java's ``FetchMetricsAggregator`` sums an answer's), the lag is
        recorded per piece; all under one lock."""
        todo: list[tuple[Sensor, float]] = []
        by_topic: dict[str, list[int]] = {}
        most = -1.0
        for tp, records, nbytes, position, high, stable, end in handed:
            sums = by_topic.get(tp.topic)
            if sums is None:
                sums = by_topic[tp.topic] = [0, 0]
            sums[0] += records
            sums[1] += nbytes
            lag = self._lag(tp, position, high, stable, end)
            if lag is not None:
                todo.append(lag)
                most = max(most, lag[1])
        if most >= 0:
            todo.append((self._lag_max, most))
        for topic, (records, nbytes) in by_topic.items():
            sensors = self._topics.get(topic)
            if sensors is None:
                sensors = self._topics[topic] = self._topic_sensors(topic)
            if records:
                todo.append((sensors[0], records))
            if nbytes:
                todo.append((sensors[1], nbytes))
        self.registry.record_all(todo, now)

    def lag(self, tp: TopicPartition, position: int, high_watermark: int, last_stable: int,
            watermark: int, now: float) -> None:
        """Partition ``tp`` is at ``position``; its log ends at ``watermark``."""
        lag = self._lag(tp, position, high_watermark, last_stable, watermark)
        if lag is not None:
            self.registry.record_all((lag, (self._lag_max, lag[1])), now)

    def _lag(self, tp: TopicPartition, position: int, high_watermark: int, last_stable: int,
             watermark: int) -> tuple[Sensor, float] | None:
        """Note where ``tp`` is; its lag sensor and lag (None: its end is unknown).
        The client-wide maximum is recorded by the caller, once for all it records
        (what recording each lag into it too would give)."""
        self.offsets[tp] = (position, high_watermark, last_stable, watermark)
        if watermark < 0:
            return None
        s = self._partitions.get(tp)
        if s is None:
            s = self._partitions[tp] = self._partition_sensor(tp)
        return s, max(0, watermark - position)

    def follow(self, assignment: list[TopicPartition]) -> None:
        """Once per poll: drop the metrics of partitions a rebalance took away (the
        assignment list is a new one after every change: one comparison when not),
        as Java's ``maybeUpdateAssignment`` - stats_callback and KIP-714 pushes
        read the registry, not :meth:`keep` via ``metrics()``."""
        if assignment is not self._assignment:
            self._assignment = assignment
            self.keep(assignment)

    def keep(self, assigned: Iterable[TopicPartition]) -> None:
        """Drop the partition metrics of partitions no longer assigned (as Java).
        Also called by ``metrics()`` from any thread while the polling thread may
        record a new partition: it walks copies (``list(dict)`` is one step)."""
        keep = set(assigned)
        for tp in [tp for tp in list(self._partitions) if tp not in keep]:
            if self._partitions.pop(tp, None) is not None:
                self.registry.remove_sensor(f"{tp.topic}-{tp.partition}.records-lag")
        for tp in [tp for tp in list(self.offsets) if tp not in keep]:
            self.offsets.pop(tp, None)

    def _topic_sensors(self, topic: str) -> tuple[Sensor, Sensor]:
        tags = {"topic": topic}
        return (self._new(f"topic.{topic}.records-consumed", [],
                          meter=("records-consumed-rate", "records-consumed-total", False),
                          tags=tags, parents=(self._records,)),
                self._new(f"topic.{topic}.bytes-consumed", [],
                          meter=("bytes-consumed-rate", "bytes-consumed-total", False),
                          tags=tags, parents=(self._bytes,)))

    def _partition_sensor(self, tp: TopicPartition) -> Sensor:
        n = self.registry.metric_name
        tags = {"topic": tp.topic, "partition": tp.partition}
        return self._new(f"{tp.topic}-{tp.partition}.records-lag", [
            (n("records-lag", GROUP, "the partition's latest lag", **tags), Value()),
            (n("records-lag-avg", GROUP, "the partition's average lag", **tags), Avg()),
            (n("records-lag-max", GROUP, "the partition's max lag", **tags), Max())])

    def statistics(self) -> dict[str, Any]:
        """librdkafka's ``topics`` section of the statistics JSON: per partition
        ``consumer_lag``, ``hi_offset``, ``ls_offset``, ``app_offset``."""
        topics: dict[str, Any] = {}
        for tp, (position, high, stable, end) in sorted(self.offsets.items()):
            parts = topics.setdefault(tp.topic, {"topic": tp.topic, "partitions": {}})
            parts["partitions"][str(tp.partition)] = {
                "partition": tp.partition, "app_offset": position, "hi_offset": high,
                "ls_offset": stable,
                "consumer_lag": max(0, end - position) if end >= 0 else -1}
        return {"topics": topics}
