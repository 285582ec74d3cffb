"""KIP-714 client telemetry (issue 33) against librdkafka's mock cluster: the
subscription fetched, pushes at the broker's interval (the mock's own request
log), the requested metrics only, OTLP payloads decoded here with the
opentelemetry-proto messages (read off the wire by a FaultProxy in front of
the mock), the terminating push on close, re-subscribing on
UNKNOWN_SUBSCRIPTION_ID; and telemetry off where it cannot run."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from kproto import Consumer, Producer, protocol
from kproto.compression import decompress
from kproto.metrics import MetricName
from kproto.testing import MockCluster, proxy_cluster

metrics_pb2 = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")

pytestmark = pytest.mark.broker

PREFIXES = ["org.apache.kafka.consumer.fetch.manager.records.consumed",
            "org.apache.kafka.consumer.node.request.total"]


@pytest.fixture
def mock():
    """A mock of its own (its telemetry settings are global); its hosting client
    pushes no telemetry of its own (the request log holds only ours)."""
    with MockCluster(num_brokers=1, config={"enable.metrics.push": False}) as cluster:
        yield cluster


class Pushes:
    """The PushTelemetry requests clients send through ``proxies``, decoded."""

    def __init__(self, proxies: list[Any]) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        for proxy in proxies:
            proxy.request_hook = self.hook

    def hook(self, frame: bytes) -> None:
        header, body = protocol.decode_request(frame[4:])
        if header["request_api_key"] == protocol.ApiKey.PUSH_TELEMETRY:
            with self.lock:
                self.bodies.append(body)

    def data(self, body: dict[str, Any]) -> Any:
        raw = decompress(body["compression_type"], body["metrics"])
        return metrics_pb2.MetricsData.FromString(bytes(raw))

    def points(self, body: dict[str, Any]) -> dict[tuple[str, tuple], Any]:
        """{(name, attributes): the metric} of one push."""
        out = {}
        for rm in self.data(body).resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data")
                    [point] = getattr(m, kind).data_points
                    attrs = tuple(sorted((a.key, a.value.string_value) for a in point.attributes))
                    out[(m.name, attrs)] = m
        return out


def _wait(cond: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_pushes_the_requested_metrics_at_the_interval(mock: MockCluster) -> None:
    mock.create_topic("t", 1)
    mock.set_telemetry(PREFIXES, 500)
    proxies = proxy_cluster(mock.brokers)
    pushes = Pushes(proxies)
    try:
        with Producer(bootstrap_servers=mock.bootstrap, enable_metrics_push=False) as p:
            for i in range(25):
                p.send("t", b"%d" % i, partition=0)
        mock.start_request_tracking()
        c = Consumer(bootstrap_servers=",".join(p.address for p in proxies),
                     auto_offset_reset="earliest", group_id="telemetry-group")
        c.assign([("t", 0)])
        got = 0
        while got < 25:
            got += len(c.poll(2000))
        reporter = c._instruments.telemetry
        assert reporter is not None
        _wait(lambda: reporter.pushes >= 4)
        c.close()
        assert not reporter._thread.is_alive()
    finally:
        for proxy in proxies:
            proxy.stop()
    log = [(key, at) for _, key, at in mock.requests() if key in (71, 72)]
    assert log[0][0] == 71 and {k for k, _ in log[1:]} == {72}     # subscribed once
    assert reporter.subscription is not None
    assert reporter.client_instance_id is not None and reporter.client_instance_id.int
    times = [at for _, at in log]
    # the first push 0.5-1.5 intervals after the subscription (jitter), then every
    # interval; the last is the terminating push of close()
    assert times[1] - times[0] >= 0.5 * 0.5 - 0.02
    assert all(b - a >= 0.5 - 0.02 for a, b in zip(times[1:-2], times[2:-1], strict=True))
    bodies = pushes.bodies
    assert len(bodies) == len(log) - 1 == reporter.pushes
    assert [b["terminating"] for b in bodies] == [False] * (len(bodies) - 1) + [True]
    assert {b["client_instance_id"] for b in bodies} == {reporter.client_instance_id}
    last = pushes.points(bodies[-1])
    names = {name for name, _ in last}
    assert names and all(n.startswith(tuple(PREFIXES)) for n in names)
    assert "org.apache.kafka.consumer.fetch.manager.records.consumed.total" in names
    assert any(n == "org.apache.kafka.consumer.node.request.total" for n in names)
    # tags as attributes (node_id), client-id left out; the totals are monotonic sums
    node_attrs = [dict(a) for n, a in last if n.endswith("node.request.total")]
    assert all(set(a) == {"node_id"} for a in node_attrs)
    total = [m for (n, a), m in last.items()
             if n.endswith("records.consumed.total") and not a][0]
    assert total.sum.is_monotonic
    consumed = 0.0
    delta = total.sum.aggregation_temporality == \
        metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
    for body in bodies:
        for (n, a), m in pushes.points(body).items():
            if n.endswith("records.consumed.total") and not a:
                consumed = consumed + m.sum.data_points[0].as_double if delta \
                    else m.sum.data_points[0].as_double
    assert consumed == 25
    rm = pushes.data(bodies[-1]).resource_metrics[0]
    assert {(a.key, a.value.string_value) for a in rm.resource.attributes} == \
        {("group_id", "telemetry-group")}


def test_resubscribes_on_unknown_subscription_id(mock: MockCluster) -> None:
    mock.set_telemetry(PREFIXES, 300)
    mock.push_request_errors(protocol.ApiKey.PUSH_TELEMETRY, 117)    # UNKNOWN_SUBSCRIPTION_ID
    mock.start_request_tracking()
    c = Consumer(bootstrap_servers=mock.bootstrap)
    c.assign([("t2", 0)])
    c.poll(100)
    reporter = c._instruments.telemetry
    assert reporter is not None
    _wait(lambda: reporter.pushes >= 2)
    c.close()
    keys = [key for _, key, _ in mock.requests() if key in (71, 72)]
    # subscribe, push (refused), subscribe again at once, pushes
    assert keys[:4] == [71, 72, 71, 72]


def test_nothing_requested_nothing_pushed(mock: MockCluster) -> None:
    mock.set_telemetry([], 200)
    mock.start_request_tracking()
    c = Consumer(bootstrap_servers=mock.bootstrap)
    c.assign([("t3", 0)])
    c.poll(100)
    _wait(lambda: sum(k == 71 for _, k, _ in mock.requests()) >= 3)
    c.close()
    assert 72 not in {k for _, k, _ in mock.requests()}


def test_off_without_the_broker_apis(tansu: Any, caplog: Any) -> None:
    """Tansu has no KIP-714 APIs: the reporter looks at the client's connection,
    opens none of its own, logs once and ends."""
    caplog.set_level(logging.INFO, "kproto.telemetry")
    import kproto.telemetry as kt

    kt._warned.discard("apis")
    for _ in range(2):
        with Producer(bootstrap_servers=tansu.bootstrap) as p:
            p.partitions_for("telemetry-off")
            reporter = p._instruments.telemetry
            assert reporter is not None
            reporter._thread.join(10)
            assert not reporter._thread.is_alive() and reporter.subscription is None
    assert sum("does not advertise KIP-714" in r.message for r in caplog.records) == 1


def test_off_without_the_package(monkeypatch: Any, caplog: Any) -> None:
    import kproto.telemetry as kt

    caplog.set_level(logging.INFO, "kproto.telemetry")
    monkeypatch.setattr(kt, "telemetry_available", lambda: False)
    kt._warned.discard("package")
    for _ in range(2):
        c = Consumer(bootstrap_servers="127.0.0.1:1")
        assert c._instruments.telemetry is None
        c.close()
    assert sum("kproto[telemetry]" in r.message for r in caplog.records) == 1
    c = Consumer(bootstrap_servers="127.0.0.1:1", enable_metrics_push=False)
    assert c._instruments.telemetry is None
    c.close()


def test_delta_and_cumulative_sums() -> None:
    from kproto.telemetry import encode_metrics, otlp_name, selector

    name = MetricName("records-consumed-total", "consumer-fetch-manager-metrics", "",
                      {"client-id": "c", "topic": "t"})
    gauge = MetricName("records-lag-max", "consumer-fetch-manager-metrics", "",
                       {"client-id": "c"})
    assert otlp_name(name) == "org.apache.kafka.consumer.fetch.manager.records.consumed.total"
    assert otlp_name(MetricName("request-total", "producer-node-metrics")) == \
        "org.apache.kafka.producer.node.request.total"
    everything = selector(["*"])
    assert everything is not None and selector([]) is None
    kinds = {name: True, gauge: False}
    last: dict = {}
    pushed = []
    for total in (10.0, 25.0):
        raw = encode_metrics({name: total, gauge: 3.0}, kinds, everything, delta=True,
                             last=last, start_ns=1, now_ns=int(total), resource={})
        pushed.append(metrics_pb2.MetricsData.FromString(raw))
    sums = [[m for rm in d.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
             if m.WhichOneof("data") == "sum"][0] for d in pushed]
    assert [s.sum.data_points[0].as_double for s in sums] == [10.0, 15.0]
    assert [s.sum.data_points[0].start_time_unix_nano for s in sums] == [1, 10]
    raw = encode_metrics({name: 25.0, gauge: float("nan")}, kinds, selector(["org.apache"]),
                         delta=False, last={}, start_ns=1, now_ns=2, resource={})
    [rm] = metrics_pb2.MetricsData.FromString(raw).resource_metrics     # NaN: left out
    metric = rm.scope_metrics[0].metrics[0]
    assert metric.sum.data_points[0].as_double == 25.0
    assert metric.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE


def test_close_is_not_held_by_a_stalled_broker(mock: MockCluster) -> None:
    """The terminating push gets 2 s; then the reporter's socket is shut down."""
    mock.set_telemetry(PREFIXES, 300)
    proxies = proxy_cluster(mock.brokers)
    try:
        c = Consumer(bootstrap_servers=",".join(p.address for p in proxies))
        c.assign([("t4", 0)])
        c.poll(100)
        reporter = c._instruments.telemetry
        assert reporter is not None
        _wait(lambda: reporter.subscription is not None)
        for proxy in proxies:
            proxy.stall = True
        time.sleep(0.5)                 # a push is now held by the broker
        start = time.monotonic()
        c.close()
        assert time.monotonic() - start < 4.0
        _wait(lambda: not reporter._thread.is_alive(), 5.0)
    finally:
        for proxy in proxies:
            proxy.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # its sockets
@pytest.mark.parametrize("subscribed", [True, False])
def test_a_client_dropped_without_close_stops_its_reporter(mock: MockCluster,
                                                           subscribed: bool) -> None:
    """A consumer nobody holds (never closed: a test's or a caller's leak) takes its
    reporter thread with it once collected, subscribed (pushing every interval) or
    still waiting for the client's first connection; it never pushes forever."""
    import gc

    mock.create_topic("t5", 1)
    mock.set_telemetry(PREFIXES, 60000)
    c = Consumer(bootstrap_servers=mock.bootstrap)
    reporter = c._instruments.telemetry
    assert reporter is not None
    if subscribed:
        c.assign([("t5", 0)])
        c.poll(100)
        _wait(lambda: reporter.subscription is not None)
    del c
    gc.collect()
    _wait(lambda: not reporter._thread.is_alive(), 10.0)
