"""Client metrics: Java's registry (sensors, windowed stats, metric names with tags).

Every client instance (Producer, Consumer, ShareConsumer, Admin) owns one
:class:`Metrics` registry; its parts record into it per Fetch answer, per
batch and per request - never per record - and ``client.metrics()`` reads it
as Java's ``KafkaConsumer.metrics()`` does: ``{MetricName: value}``.

The stats are Java's (``org.apache.kafka.common.metrics.stats``): samples of
``metrics_sample_window_ms`` each, ``metrics_num_samples`` of them kept, so an
``-avg``/``-max``/``-rate`` covers the last window or two; ``-total`` counts
since the client started. A stat with no value in its windows reads NaN, as
in Java.

>>> m = Metrics(client_id="c1")
>>> s, new = m.sensor("fetch-latency")
>>> s.add(m.metric_name("fetch-latency-max", "consumer-fetch-manager-metrics"), Max())
>>> s.record(12.0); s.record(30.0)
>>> m.snapshot()[MetricName("fetch-latency-max", "consumer-fetch-manager-metrics",
...                         tags={"client-id": "c1"})]
30.0
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .errors import ConfigError

__all__ = ["MetricName", "Metrics", "Sensor", "Avg", "Max", "Min", "Rate", "WindowedCount",
           "WindowedSum", "CumulativeSum", "CumulativeCount", "Value", "StatsReporter",
           "registry_for"]

log = logging.getLogger("kproto.metrics")


class MetricName:
    """A metric's name, group, description and tags (Java's ``MetricName``, as
    kafka-python has it too). Equal and hashed by name, group and tags."""

    __slots__ = ("name", "group", "description", "tags", "_key")

    def __init__(self, name: str, group: str, description: str = "",
                 tags: Mapping[str, str] | None = None) -> None:
        self.name, self.group, self.description = name, group, description
        self.tags: dict[str, str] = dict(tags or {})
        self._key = (name, group, tuple(sorted(self.tags.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetricName) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"MetricName(name={self.name!r}, group={self.group!r}, tags={self.tags!r})"


# ---------------------------------------------------------------------- stats


class _Sample:
    __slots__ = ("value", "count", "start")

    def __init__(self, initial: float, now: float) -> None:
        self.value, self.count, self.start = initial, 0, now


class SampledStat:
    """A stat over ``samples`` windows of ``window_ms`` (Java's ``SampledStat``): a
    record goes into the current window, which is replaced by a fresh one when
    it is older than ``window_ms``; windows older than ``samples`` x
    ``window_ms`` are reset before measuring."""

    initial = 0.0

    def __init__(self) -> None:
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now: float, window: float, samples: int) -> None:
        if not self._samples:
            self._samples.append(_Sample(self.initial, now))
        sample = self._samples[self._current]
        if now - sample.start >= window:
            self._current = (self._current + 1) % samples
            if self._current >= len(self._samples):
                self._samples.append(_Sample(self.initial, now))
            else:
                sample = self._samples[self._current]
                sample.value, sample.count, sample.start = self.initial, 0, now
            sample = self._samples[self._current]
        self._update(sample, value)
        sample.count += 1

    def _update(self, sample: _Sample, value: float) -> None:
        raise NotImplementedError

    def _purge(self, now: float, window: float, samples: int) -> None:
        for s in self._samples:
            if now - s.start >= samples * window:
                s.value, s.count, s.start = self.initial, 0, now

    def measure(self, now: float, window: float, samples: int) -> float:
        self._purge(now, window, samples)
        return self._combine()

    def _combine(self) -> float:
        raise NotImplementedError


class Avg(SampledStat):
    """The mean of the values recorded in the windows (NaN: none)."""

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def _combine(self) -> float:
        count = sum(s.count for s in self._samples)
        return sum(s.value for s in self._samples) / count if count else math.nan


class Max(SampledStat):
    """The largest value recorded in the windows (NaN: none)."""

    initial = -math.inf

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value = max(sample.value, value)

    def _combine(self) -> float:
        found = [s.value for s in self._samples if s.count]
        return max(found) if found else math.nan


class Min(SampledStat):
    """The smallest value recorded in the windows (NaN: none)."""

    initial = math.inf

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value = min(sample.value, value)

    def _combine(self) -> float:
        found = [s.value for s in self._samples if s.count]
        return min(found) if found else math.nan


class WindowedSum(SampledStat):
    """The sum of the values recorded in the windows."""

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def _combine(self) -> float:
        return float(sum(s.value for s in self._samples))


class WindowedCount(WindowedSum):
    """How many values were recorded in the windows."""

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += 1.0


class Rate:
    """Per second over the windows (Java's ``Rate``): the windowed sum (or count)
    divided by the time the windows cover, at least ``samples - 1`` whole windows
    (so a burst just after start does not read as a huge rate)."""

    def __init__(self, stat: SampledStat | None = None) -> None:
        self.stat = stat if stat is not None else WindowedSum()
        self.record = self.stat.record  # type: ignore[method-assign]  # (a call less)

    def record(self, value: float, now: float, window: float, samples: int) -> None:
        self.stat.record(value, now, window, samples)

    def measure(self, now: float, window: float, samples: int) -> float:
        total = self.stat.measure(now, window, samples)
        oldest = min((s.start for s in self.stat._samples), default=now)
        elapsed = now - oldest
        full = int(elapsed // window)
        if full < samples - 1:
            elapsed += (samples - 1 - full) * window
        return total / max(elapsed, 0.001)


class CumulativeSum:
    """The sum of every value recorded since the start."""

    def __init__(self) -> None:
        self.total = 0.0

    def record(self, value: float, now: float, window: float, samples: int) -> None:
        self.total += value

    def measure(self, now: float, window: float, samples: int) -> float:
        return self.total


class CumulativeCount(CumulativeSum):
    """How many values were recorded since the start."""

    def record(self, value: float, now: float, window: float, samples: int) -> None:
        self.total += 1.0


class Value:
    """The last value recorded (NaN: none yet)."""

    def __init__(self) -> None:
        self.value = math.nan

    def record(self, value: float, now: float, window: float, samples: int) -> None:
        self.value = value

    def measure(self, now: float, window: float, samples: int) -> float:
        return self.value


#: a stat: record(value, now, window, samples) and measure(now, window, samples), in seconds
Stat = Any

#: stats kept as running totals (OTLP sums in KIP-714 telemetry); the others are gauges
CUMULATIVE = (CumulativeSum,)


class Sensor:
    """Records values into its stats (Java's ``Sensor``); a value recorded here is
    recorded in its parents too (a partition's lag into the client's maximum)."""

    __slots__ = ("name", "_registry", "_stats", "_parents", "_names")

    def __init__(self, name: str, registry: Metrics, parents: Iterable[Sensor] = ()) -> None:
        self.name = name
        self._registry = registry
        self._stats: list[Stat] = []
        self._parents = tuple(parents)
        self._names: list[MetricName] = []     # its metrics (remove_sensor drops them)

    def add(self, name: MetricName, stat: Stat) -> None:
        """Measure ``stat`` of this sensor's values as the metric ``name``."""
        self._stats.append(stat)
        self._names.append(name)
        self._registry._add(name, stat, self)

    def add_meter(self, rate: MetricName, total: MetricName, *, count: bool = False) -> None:
        """A ``-rate`` and its ``-total`` (Java's ``Meter``): of the values recorded,
        or with ``count`` of how many times something was recorded."""
        if count:
            self.add(rate, Rate(WindowedCount()))
            self.add(total, CumulativeCount())
        else:
            self.add(rate, Rate())
            self.add(total, CumulativeSum())

    def record(self, value: float = 1.0, now: float | None = None) -> None:
        """Record ``value`` (at ``now``, ``time.monotonic()`` by default)."""
        reg = self._registry
        if now is None:
            now = time.monotonic()
        with reg.lock:
            self._record(value, now, reg.window, reg.samples)

    def _record(self, value: float, now: float, window: float, samples: int) -> None:
        for stat in self._stats:
            stat.record(value, now, window, samples)
        for parent in self._parents:
            parent._record(value, now, window, samples)


class _Gauge:
    def __init__(self, fn: Callable[[], float]) -> None:
        self.fn = fn

    def measure(self, now: float, window: float, samples: int) -> float:
        return float(self.fn())


class Metrics:
    """The registry of one client instance (Java's ``Metrics``): its sensors and
    metrics, each metric tagged with ``client-id``.

    ``window_ms`` / ``samples``: ``metrics_sample_window_ms`` /
    ``metrics_num_samples``. Thread-safe (one lock; recording takes it once).
    """

    def __init__(self, *, client_id: str = "kproto", client_type: str = "consumer",
                 window_ms: int = 30000, samples: int = 2) -> None:
        self.client_id = client_id
        self.client_type = client_type
        self.window = window_ms / 1000
        self.samples = max(1, samples)
        self.lock = threading.RLock()
        self._sensors: dict[str, Sensor] = {}
        self._metrics: dict[MetricName, tuple[Stat, Sensor | None]] = {}

    def metric_name(self, name: str, group: str, description: str = "",
                    **tags: Any) -> MetricName:
        """A :class:`MetricName` with this client's ``client-id`` tag and ``tags``
        (keyword names with ``_`` for ``-``: ``node_id`` is ``node-id``)."""
        full = {"client-id": self.client_id}
        full.update({k.replace("_", "-"): str(v) for k, v in tags.items()})
        return MetricName(name, group, description, full)

    def sensor(self, name: str, parents: Iterable[Sensor] = ()) -> tuple[Sensor, bool]:
        """The sensor ``name`` and whether it is new (add its stats then)."""
        with self.lock:
            s = self._sensors.get(name)
            if s is not None:
                return s, False
            s = self._sensors[name] = Sensor(name, self, parents)
            return s, True

    def record_all(self, values: Iterable[tuple[Sensor, float]], now: float) -> None:
        """Record each ``(sensor, value)`` at ``now``, taking the lock once (what
        a Fetch answer or a poll records)."""
        with self.lock:
            window, samples = self.window, self.samples
            for sensor, value in values:
                sensor._record(value, now, window, samples)

    def add_gauge(self, name: MetricName, fn: Callable[[], float]) -> None:
        """A metric read by calling ``fn`` (Java's ``Gauge``)."""
        with self.lock:
            self._metrics[name] = (_Gauge(fn), None)

    def _add(self, name: MetricName, stat: Stat, sensor: Sensor) -> None:
        with self.lock:
            self._metrics[name] = (stat, sensor)

    def remove_sensor(self, name: str) -> None:
        """Drop sensor ``name`` and its metrics (a partition no longer assigned)."""
        with self.lock:
            s = self._sensors.pop(name, None)
            if s is not None:       # (its own metrics: not a walk of every metric)
                for n in s._names:
                    if self._metrics.get(n, (None, None))[1] is s:
                        del self._metrics[n]

    def snapshot(self) -> dict[MetricName, float]:
        """Every metric's value now: ``{MetricName: float}`` (what ``metrics()`` returns)."""
        now = time.monotonic()
        with self.lock:
            out = {}
            for name, (stat, _) in self._metrics.items():
                try:
                    out[name] = float(stat.measure(now, self.window, self.samples))
                except Exception:  # noqa: BLE001 - a gauge that fails reads NaN
                    out[name] = math.nan
            return out

    def kinds(self) -> dict[MetricName, bool]:
        """Whether each metric is a running total (a cumulative sum) or a gauge."""
        with self.lock:
            return {name: isinstance(stat, CUMULATIVE) for name, (stat, _) in
                    self._metrics.items()}

    def statistics(self, extra: Mapping[str, Any] | None = None) -> str:
        """The JSON snapshot ``stats_callback`` gets (docs/client.md lists its fields)."""
        values = self.snapshot()
        doc: dict[str, Any] = {
            "name": f"{self.client_id}#{self.client_type}", "client_id": self.client_id,
            "type": self.client_type, "ts": int(time.monotonic() * 1e6),
            "time": int(time.time()),
            "metrics": [{"group": n.group, "name": n.name, "tags": n.tags,
                         "value": None if math.isnan(v) or math.isinf(v) else v}
                        for n, v in sorted(values.items(), key=lambda kv: kv[0]._key)],
        }
        if extra:
            doc.update(extra)
        return json.dumps(doc)


def registry_for(config: Mapping[str, Any], client_type: str) -> Metrics | None:
    """The registry of a client with these settings, or None with ``metrics_enabled``
    off (then nothing is recorded and ``metrics()`` is empty)."""
    window, samples = config.get("metrics_sample_window_ms", 30000), \
        config.get("metrics_num_samples", 2)
    if window <= 0:
        raise ConfigError(f"metrics_sample_window_ms must be at least 1, not {window}")
    if samples < 1:
        raise ConfigError(f"metrics_num_samples must be at least 1, not {samples}")
    if not config.get("metrics_enabled", True):
        return None
    return Metrics(client_id=config.get("client_id") or "kproto", client_type=client_type,
                   window_ms=window, samples=samples)


class StatsReporter:
    """Calls ``callback(json_str)`` every ``interval_ms`` from a daemon thread with
    :meth:`Metrics.statistics` (librdkafka's ``statistics.interval.ms`` and
    ``stats_cb``); ``extra()`` adds client-specific sections. ``close()`` stops it."""

    def __init__(self, registry: Metrics, interval_ms: int, callback: Callable[[str], Any],
                 extra: Callable[[], Mapping[str, Any]] | None = None) -> None:
        self._registry, self._interval = registry, interval_ms / 1000
        self._callback, self._extra = callback, extra
        self._stop = threading.Event()
        self._in_callback = False
        self._gate = threading.Lock()      # (close vs. a report starting)
        self._thread = threading.Thread(target=self._run, name="kproto-stats", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                doc = self._registry.statistics(
                    self._extra() if self._extra is not None else None)
                with self._gate:
                    if self._stop.is_set():
                        return
                    self._in_callback = True
                try:
                    self._callback(doc)
                finally:
                    self._in_callback = False
            except Exception:  # noqa: BLE001 - a user callback must not end the reports
                log.exception("stats_callback raised")

    def close(self) -> None:
        """No report starts after this returns; one under way in the user's callback
        is not waited for (a slow callback does not hold the client's close)."""
        with self._gate:
            self._stop.set()
            busy = self._in_callback
        if threading.current_thread() is not self._thread and not busy:
            self._thread.join(5)
