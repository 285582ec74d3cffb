"""KIP-714 client telemetry: the metrics a broker asks for, pushed to it as OTLP.

A client whose broker advertises GetTelemetrySubscriptions (71) and
PushTelemetry (72), with ``enable_metrics_push`` on (the default, as in Java)
and the ``opentelemetry-proto`` package installed (``pip install
kproto[telemetry]``), runs a :class:`TelemetryReporter` thread, Java's
``ClientTelemetryReporter`` state machine:

- GetTelemetrySubscriptions (a zero client instance id the first time: the
  broker assigns one) gives the subscription: requested metric name prefixes
  (none: nothing to push, ask again after the interval; ``"*"`` or ``""``: all),
  push interval (at least 100 ms, Kafka's least ``interval.ms``), accepted
  compression types, delta or cumulative temporality;
- the first push comes after a random 0.5-1.5 x the interval (so clients started
  together spread out), the next ones every interval; each carries the
  selected metrics as an OTLP ``MetricsData`` (Java's names: ``org.apache.kafka.``
  + the group without ``-metrics`` + the name, dashes as dots, e.g.
  ``org.apache.kafka.consumer.fetch.manager.records.lag.max``; tags as
  attributes with ``_`` for ``-``, ``client-id`` left out; rates, averages and
  maxima as gauges, ``-total`` counters as monotonic sums, as deltas since the
  last push when the broker asks for delta temporality), compressed with the
  first accepted type kproto has;
- UNKNOWN_SUBSCRIPTION_ID / UNSUPPORTED_COMPRESSION_TYPE: subscribe again at
  once; TELEMETRY_TOO_LARGE / THROTTLING_QUOTA_EXCEEDED: try at the next
  interval; INVALID_REQUEST / INVALID_RECORD / UNSUPPORTED_VERSION / others:
  telemetry stops; a connection failure: subscribe again after 5 minutes;
- ``close()`` sends a last push with ``terminating=True`` when a subscription
  was in force.

Without the package or the APIs it logs once and does nothing else. The
requests go on a connection of the reporter's own (a Cluster on its thread).
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from .compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress
from .errors import ConfigError, ErrorCode, KprotoError
from .metrics import MetricName, Metrics, StatsReporter, registry_for
from .net.blocking import BrokerConnection
from .net.cluster import Cluster
from .protocol import ApiKey

__all__ = ["TelemetryReporter", "Instruments", "otlp_name", "selector", "encode_metrics",
           "telemetry_available"]

log = logging.getLogger("kproto.telemetry")

DOMAIN = "org.apache.kafka"
DEFAULT_PUSH_INTERVAL_MS = 5 * 60 * 1000
MIN_PUSH_INTERVAL_MS = 100
_ZERO = uuid.UUID(int=0)
_SUPPORTED_CODECS = (ZSTD, LZ4, GZIP, SNAPPY)
_RESUBSCRIBE = {ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE}
_NEXT_INTERVAL = {ErrorCode.TELEMETRY_TOO_LARGE, ErrorCode.THROTTLING_QUOTA_EXCEEDED}
_warned: set[str] = set()


def _log_once(key: str, msg: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        log.info(msg, *args)


def telemetry_available() -> bool:
    """Whether the ``opentelemetry-proto`` package (``kproto[telemetry]``) is installed."""
    try:
        import opentelemetry.proto.metrics.v1.metrics_pb2  # noqa: F401
    except ImportError:
        return False
    return True


def otlp_name(name: MetricName) -> str:
    """Java's telemetry name of a metric (``TelemetryMetricNamingConvention``)."""
    group = name.group.lower().replace("-", ".").replace(".metrics", "")
    return f"{DOMAIN}.{group}.{name.name.lower().replace('-', '.')}"


def selector(requested: list[str] | None) -> Callable[[str], bool] | None:
    """The subscription's requested metrics as a test of a telemetry name (None:
    none requested). Prefixes; ``["*"]`` is all (Java's ``getSelectorFromRequestedMetrics``)."""
    if not requested:
        return None
    if requested == ["*"]:
        return lambda _name: True
    prefixes = tuple(requested)
    return lambda n: n.startswith(prefixes)


def encode_metrics(values: Mapping[MetricName, float], cumulative: Mapping[MetricName, bool],
                   wanted: Callable[[str], bool], *, delta: bool,
                   last: dict[MetricName, tuple[float, int]], start_ns: int, now_ns: int,
                   resource: Mapping[str, str]) -> bytes:
    """An OTLP ``MetricsData`` of the ``wanted`` metrics (one ResourceMetrics per metric,
    as Java's reporter builds it); ``last`` keeps each sum's last value for deltas."""
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.metrics.v1 import metrics_pb2
    from opentelemetry.proto.resource.v1 import resource_pb2

    def kv(k: str, v: str) -> Any:
        return common_pb2.KeyValue(key=k, value=common_pb2.AnyValue(string_value=v))

    res = resource_pb2.Resource(attributes=[kv(k, v) for k, v in resource.items()])
    data = metrics_pb2.MetricsData()
    for name, value in values.items():
        full = otlp_name(name)
        if value != value or not wanted(full):      # NaN: nothing recorded in the windows
            continue
        attrs = [kv(k.replace("-", "_"), v) for k, v in sorted(name.tags.items())
                 if k != "client-id"]
        metric = metrics_pb2.Metric(name=full, description=name.description)
        if cumulative.get(name):
            start = start_ns
            if delta:
                before, start = last.get(name, (0.0, start_ns))
                last[name] = (value, now_ns)
                value -= before
            metric.sum.CopyFrom(metrics_pb2.Sum(
                is_monotonic=True, aggregation_temporality=(
                    metrics_pb2.AGGREGATION_TEMPORALITY_DELTA if delta else
                    metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE),
                data_points=[metrics_pb2.NumberDataPoint(
                    as_double=value, time_unix_nano=now_ns, start_time_unix_nano=start,
                    attributes=attrs)]))
        else:
            metric.gauge.CopyFrom(metrics_pb2.Gauge(data_points=[metrics_pb2.NumberDataPoint(
                as_double=value, time_unix_nano=now_ns, attributes=attrs)]))
        data.resource_metrics.append(metrics_pb2.ResourceMetrics(
            resource=res, scope_metrics=[metrics_pb2.ScopeMetrics(metrics=[metric])]))
    return bytes(data.SerializeToString())


class _Subscription:
    def __init__(self, body: dict[str, Any], wanted: Callable[[str], bool] | None) -> None:
        self.instance_id: uuid.UUID = body["client_instance_id"]
        self.id: int = body["subscription_id"]
        # 0 or less: the default (Java); under Kafka's least client-metrics
        # interval.ms (100): that least, never a loop of pushes
        ms = body["push_interval_ms"]
        self.interval = (max(MIN_PUSH_INTERVAL_MS, ms) if ms > 0
                         else DEFAULT_PUSH_INTERVAL_MS) / 1000
        accepted = list(body["accepted_compression_types"] or ())
        self.codec = next((c for c in accepted if c in _SUPPORTED_CODECS), NONE)
        self.delta: bool = body["delta_temporality"]
        self.max_bytes: int = body["telemetry_max_bytes"]
        self.wanted = wanted


class TelemetryReporter:
    """The KIP-714 state machine on a thread of its own (see the module docstring)."""

    def __init__(self, registry: Metrics, config: Mapping[str, Any], client: Cluster,
                 resource: Mapping[str, str]) -> None:
        self._registry, self._config = registry, config
        self._resource = dict(resource)
        self._cond = threading.Condition()
        # the client's Cluster, weakly: a client dropped without close() stops its
        # reporter (no thread pushing for a client nobody holds)
        self._client = weakref.ref(client, self._client_gone)
        self._closing = False
        self._done = False
        self._start_ns = time.time_ns()
        self._own: Cluster | None = None        # the thread's (see close)
        self._aborted = False                   # close() gave up waiting: send nothing more
        self._last: dict[MetricName, tuple[float, int]] = {}
        #: for tests and tools: the subscription in force (None: none yet)
        self.subscription: _Subscription | None = None
        #: pushes answered without error so far
        self.pushes = 0
        self._thread = threading.Thread(target=self._run, name="kproto-telemetry", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the client's side

    def close(self, timeout: float = 2.0) -> None:
        """Send the terminating push (if subscribed) and stop, within ``timeout`` s
        (a request still unanswered then is cut short: its socket is shut down)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            own = self._own
            if self._thread.is_alive() and own is not None:
                self._aborted = True
                own.abort()
                self._thread.join(1.0)

    def _client_gone(self, _ref: object) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    @property
    def client_instance_id(self) -> uuid.UUID | None:
        """The id the broker gave this client (Java's ``clientInstanceId()``), once known."""
        sub = self.subscription
        return sub.instance_id if sub is not None else None

    # ------------------------------------------------------------------ the thread

    def _sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` unless closing; True when closing."""
        with self._cond:
            if not self._closing:
                self._cond.wait(max(0.0, seconds))
            return self._closing

    def _run(self) -> None:
        cluster: Cluster | None = None
        try:
            if not self._broker_supports():
                return
            cluster = self._own = Cluster(self._config)
            if self._closing:
                return
            self._loop(cluster)
        except Exception:  # noqa: BLE001 - telemetry never takes the client down
            log.warning("client telemetry stopped", exc_info=True)
        finally:
            if cluster is not None:
                cluster.close()

    def _broker_supports(self) -> bool:
        """Wait for the client's first connection and look at what its broker speaks
        (no connection of our own to a broker without the APIs)."""
        while True:
            client = self._client()
            if client is None or client._closed:
                return False
            try:
                conns = [*client._connections.values(), client._bootstrap_conn]
            except RuntimeError:        # changed size under us (the client's thread)
                conns = []
            for conn in conns:
                if conn is not None and conn.broker_versions:
                    versions = conn.broker_versions
                    if ApiKey.GET_TELEMETRY_SUBSCRIPTIONS in versions \
                            and ApiKey.PUSH_TELEMETRY in versions:
                        return True
                    _log_once("apis", "the broker at %s does not advertise KIP-714 "
                              "telemetry: metrics are not pushed", conn.address)
                    return False
            del client
            if self._sleep(0.1):
                return False

    def _loop(self, cluster: Cluster) -> None:
        instance_id = _ZERO
        wait = 0.0
        refused = 0             # GetTelemetrySubscriptions refused in a row (backoff)
        conn: BrokerConnection | None = None
        while True:
            if self._sleep(wait):
                break
            try:
                if conn is None or not conn.connected:
                    conn = cluster.any_connection()
                body = conn.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
                                    {"client_instance_id": instance_id})
            except KprotoError as exc:
                log.debug("GetTelemetrySubscriptions failed: %s", exc)
                wait = DEFAULT_PUSH_INTERVAL_MS / 1000
                continue
            code = body["error_code"]
            if code:
                wait = self._error_wait(code, "GetTelemetrySubscriptions", None)
                if wait < 0:
                    return
                # "subscribe again at once" answered again: back off (retry_backoff_ms,
                # doubling to retry_backoff_max_ms), never a loop of requests
                wait = max(wait, self._backoff(refused))
                refused += 1
                continue
            refused = 0
            sub = _Subscription(body, selector(body["requested_metrics"]))
            if sub.instance_id != _ZERO:
                instance_id = sub.instance_id
            old = self.subscription
            if old is not None and old.delta != sub.delta:
                self._last.clear()
            self.subscription = sub
            if sub.wanted is None:
                wait = sub.interval              # nothing requested: ask again later
                continue
            wait = self._push_loop(conn, sub, random.uniform(0.5, 1.5) * sub.interval)
            if wait < 0:
                return
        self._terminating_push(conn)

    def _backoff(self, attempt: int) -> float:
        first = max(1, self._config.get("retry_backoff_ms", 100))
        cap = max(first, self._config.get("retry_backoff_max_ms", 1000))
        return min(cap, first * 2 ** min(attempt, 30)) / 1000

    def _push_loop(self, conn: BrokerConnection, sub: _Subscription, first: float) -> float:
        """Push every interval while the subscription holds: the wait before the
        next GetTelemetrySubscriptions, -1 to stop, or 0 once closing."""
        wait = first
        while True:
            if self._sleep(wait):
                return 0.0
            try:
                code = self._push(conn, sub, terminating=False)
            except KprotoError as exc:
                log.debug("PushTelemetry failed: %s", exc)
                return DEFAULT_PUSH_INTERVAL_MS / 1000
            if code:
                return self._error_wait(code, "PushTelemetry", sub)
            self.pushes += 1
            wait = sub.interval

    def _push(self, conn: BrokerConnection, sub: _Subscription, *, terminating: bool) -> int:
        assert sub.wanted is not None
        payload = encode_metrics(
            self._registry.snapshot(), self._registry.kinds(), sub.wanted, delta=sub.delta,
            last=self._last, start_ns=self._start_ns, now_ns=time.time_ns(),
            resource=self._resource)
        body = conn.request(ApiKey.PUSH_TELEMETRY, {
            "client_instance_id": sub.instance_id, "subscription_id": sub.id,
            "terminating": terminating, "compression_type": sub.codec,
            "metrics": compress(sub.codec, payload)})
        return int(body["error_code"])

    def _error_wait(self, code: int, what: str, sub: _Subscription | None) -> float:
        """Java's ``maybeFetchErrorIntervalMs``: the wait before subscribing again, or
        -1 when telemetry stops for good."""
        if code in _RESUBSCRIBE:
            return 0.0
        if code in _NEXT_INTERVAL:
            return sub.interval if sub is not None else DEFAULT_PUSH_INTERVAL_MS / 1000
        _log_once(f"error{code}", "%s answered error %d: client telemetry stops", what, code)
        return -1.0

    def _terminating_push(self, conn: BrokerConnection | None) -> None:
        sub = self.subscription
        if conn is None or sub is None or sub.wanted is None or self._aborted:
            return
        try:
            if self._push(conn, sub, terminating=True) == 0:
                self.pushes += 1
        except KprotoError as exc:
            log.debug("the terminating PushTelemetry failed: %s", exc)


class Instruments:
    """A client's metrics registry and what reports it: ``stats_callback`` every
    ``statistics_interval_ms``, and KIP-714 pushes (see the module docstring).

    ``resource``: the OTLP resource attributes (Java's: ``group_id``,
    ``group_instance_id``, ``transactional_id``, ``client_rack``)."""

    def __init__(self, config: Mapping[str, Any], client_type: str, cluster: Cluster,
                 resource: Mapping[str, Any] | None = None,
                 extra: Callable[[], Mapping[str, Any]] | None = None) -> None:
        self.registry = registry_for(config, client_type)
        self.stats: StatsReporter | None = None
        self.telemetry: TelemetryReporter | None = None
        callback, interval = config.get("stats_callback"), config.get("statistics_interval_ms", 0)
        if callback is not None and not callable(callback):
            raise ConfigError(f"stats_callback must be callable, not {type(callback).__name__}")
        if not 0 <= interval <= 86400000:      # (librdkafka's range: up to a day)
            raise ConfigError(f"statistics_interval_ms must be 0 (no statistics) to "
                              f"86400000 (a day), not {interval}")
        if self.registry is None:
            return
        cluster.metrics = self.registry
        if interval > 0 and callback is not None:
            self.stats = StatsReporter(self.registry, interval, callback, extra)
        if config.get("enable_metrics_push", True):
            if not telemetry_available():
                _log_once("package", "opentelemetry-proto is not installed (pip install "
                          "kproto[telemetry]): metrics are not pushed to brokers (KIP-714)")
                return
            labels = {k: str(v) for k, v in (resource or {}).items() if v}
            if config.get("client_rack"):
                labels["client_rack"] = str(config["client_rack"])
            self.telemetry = TelemetryReporter(self.registry, config, cluster, labels)

    def metrics(self) -> dict[MetricName, float]:
        """Every metric's value now (empty with ``metrics_enabled`` off)."""
        return self.registry.snapshot() if self.registry is not None else {}

    def close(self, timeout: float = 2.0) -> None:
        """Stop the reporters (the terminating push first, for at most ``timeout`` s)."""
        if self.telemetry is not None:
            self.telemetry.close(timeout)
        if self.stats is not None:
            self.stats.close()
