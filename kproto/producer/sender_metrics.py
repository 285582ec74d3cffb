"""The producer's metrics (Java's ``SenderMetricsRegistry``), recorded by the sender
thread per batch and per Produce request, never per record.

Group ``producer-metrics`` (tag ``client-id``): ``record-send-rate``/``-total``
(records in the batches sent, retries included, as Java counts them),
``batch-size-avg``/``-max`` (bytes of a batch as sent), ``compression-rate-avg``
(a ``send()`` batch's bytes as sent over its uncompressed size; 1.0 for
``send_batch`` batches, which are encoded by the caller), ``record-queue-time-avg``/
``-max`` (ms from a batch's first record to its first send),
``records-per-request-avg``, ``request-latency-avg``/``-max`` (ms from a Produce
request to its answer), ``record-retry-rate``/``-total``,
``record-error-rate``/``-total``, ``buffer-available-bytes``,
``buffer-total-bytes``, ``requests-in-flight``. Group ``producer-topic-metrics``
(tags ``client-id``, ``topic``): ``record-send-rate``/``-total``,
``byte-rate``/``-total``, ``record-retry-rate``/``-total``,
``record-error-rate``/``-total``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..metrics import Avg, Max, Metrics, Sensor

__all__ = ["SenderMetrics"]

GROUP, TOPIC_GROUP = "producer-metrics", "producer-topic-metrics"


class SenderMetrics:
    """The sensors of one producer (the sender thread records; any thread reads)."""

    def __init__(self, registry: Metrics, buffer_available: Callable[[], float],
                 buffer_total: int, in_flight: Callable[[], float]) -> None:
        self.registry = r = registry
        n = r.metric_name
        self._sent = self._sensor("records-sent", meter=("record-send-rate", "record-send-total"))
        self._batch = self._sensor("batch-size", [
            (n("batch-size-avg", GROUP, "bytes per batch sent"), Avg()),
            (n("batch-size-max", GROUP, "bytes per batch sent, max"), Max())])
        self._compression = self._sensor("compression-rate", [
            (n("compression-rate-avg", GROUP, "bytes sent over uncompressed bytes"), Avg())])
        self._queue = self._sensor("queue-time", [
            (n("record-queue-time-avg", GROUP, "ms a batch waited to be sent"), Avg()),
            (n("record-queue-time-max", GROUP, "ms a batch waited, max"), Max())])
        self._per_request = self._sensor("records-per-request", [
            (n("records-per-request-avg", GROUP, "records per Produce request"), Avg())])
        self._latency = self._sensor("request-latency", [
            (n("request-latency-avg", GROUP, "ms from a Produce request to its answer"), Avg()),
            (n("request-latency-max", GROUP, "ms to a Produce answer, max"), Max())])
        self._retries = self._sensor("record-retries",
                                     meter=("record-retry-rate", "record-retry-total"))
        self._errors = self._sensor("record-errors",
                                    meter=("record-error-rate", "record-error-total"))
        r.add_gauge(n("buffer-available-bytes", GROUP, "buffer_memory not in use"),
                    buffer_available)
        r.add_gauge(n("buffer-total-bytes", GROUP, "buffer_memory"), lambda: buffer_total)
        r.add_gauge(n("requests-in-flight", GROUP, "Produce requests awaiting answers"),
                    in_flight)
        self._topics: dict[str, tuple[Sensor, Sensor, Sensor, Sensor]] = {}

    def _sensor(self, name: str, stats: Sequence[tuple[Any, Any]] = (),
                meter: tuple[str, str] | None = None, tags: dict[str, str] | None = None,
                group: str = GROUP, parents: tuple[Sensor, ...] = ()) -> Sensor:
        s, new = self.registry.sensor(name, parents)
        if new:
            for metric, stat in stats:
                s.add(metric, stat)
            if meter is not None:
                s.add_meter(self.registry.metric_name(meter[0], group, **(tags or {})),
                            self.registry.metric_name(meter[1], group, **(tags or {})))
        return s

    def _topic(self, topic: str) -> tuple[Sensor, Sensor, Sensor, Sensor]:
        found = self._topics.get(topic)
        if found is None:
            tags, g = {"topic": topic}, TOPIC_GROUP
            found = self._topics[topic] = (
                self._sensor(f"topic.{topic}.records-sent", tags=tags, group=g,
                             meter=("record-send-rate", "record-send-total"),
                             parents=(self._sent,)),
                self._sensor(f"topic.{topic}.bytes", tags=tags, group=g,
                             meter=("byte-rate", "byte-total")),
                self._sensor(f"topic.{topic}.record-retries", tags=tags, group=g,
                             meter=("record-retry-rate", "record-retry-total"),
                             parents=(self._retries,)),
                self._sensor(f"topic.{topic}.record-errors", tags=tags, group=g,
                             meter=("record-error-rate", "record-error-total"),
                             parents=(self._errors,)))
        return found

    def request_sent(self, batches: list[Any], now: float) -> None:
        """A Produce request carrying ``batches`` was written."""
        records = 0
        for b in batches:
            sent, nbytes = self._topic(b.topic)[:2]
            size = len(b.payload)
            sent.record(b.count, now)
            nbytes.record(size, now)
            self._batch.record(size, now)
            if b.table is None and b.size > 0:
                self._compression.record(size / b.size, now)
            else:
                self._compression.record(1.0, now)
            if b.attempts == 1:
                self._queue.record((now - b.created) * 1000, now)
            records += b.count
        self._per_request.record(records, now)

    def answered(self, latency: float, now: float) -> None:
        """A Produce answer came ``latency`` s after its request."""
        self._latency.record(latency * 1000, now)

    def retried(self, b: Any, now: float) -> None:
        self._topic(b.topic)[2].record(b.count, now)

    def failed(self, b: Any, now: float) -> None:
        self._topic(b.topic)[3].record(b.count, now)
