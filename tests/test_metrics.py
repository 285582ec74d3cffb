"""Client metrics (issue 33): the registry's stats as Java computes them, and each
client's metrics compared with what happened (records counted here, lag from
ListOffsets) on every test broker; the names against docs/client.md's table."""

from __future__ import annotations

import json
import math
import re
import threading
import time
from pathlib import Path

import pytest

from kproto import Consumer, Producer
from kproto.groups.coordinator_metrics import CoordinatorMetrics
from kproto.metrics import (
    Avg,
    CumulativeSum,
    Max,
    MetricName,
    Metrics,
    Rate,
    WindowedCount,
)
from kproto.protocol import ApiKey
from kproto.structs import SubscriptionState, TopicPartition

ROOT = Path(__file__).resolve().parent.parent


def value(metrics: dict[MetricName, float], group: str, name: str, **tags: object) -> float:
    """The value of the one metric with these tags (besides client-id)."""
    want = {k.replace("_", "-"): str(v) for k, v in tags.items()}
    found = [v for n, v in metrics.items() if n.group == group and n.name == name
             and {k: t for k, t in n.tags.items() if k != "client-id"} == want]
    assert len(found) == 1, f"{group}/{name} {want}: {len(found)} metrics"
    return found[0]


def doc_table() -> set[tuple[str, str]]:
    """(group, name) of every row of docs/client.md's metrics table."""
    text = (ROOT / "docs" / "client.md").read_text()
    section = text.split("<!-- metrics table -->")[1]
    rows = re.findall(r"^\| `([a-z-]+)` \| `([a-z-]+)` \|", section, re.M)
    assert rows, "docs/client.md has no metrics table"
    return set(rows)


# ---------------------------------------------------------------------- the stats


def test_windowed_stats_as_java() -> None:
    """Avg/Max over the kept samples; a sample older than samples x window is reset
    (Java's purgeObsoleteSamples); Rate divides by at least samples-1 windows."""
    m = Metrics(client_id="c", window_ms=1000, samples=2)
    s, _ = m.sensor("x")
    avg, mx = m.metric_name("a", "g"), m.metric_name("m", "g")
    rate, total = m.metric_name("r", "g"), m.metric_name("t", "g")
    s.add(avg, Avg())
    s.add(mx, Max())
    s.add(rate, Rate())
    s.add(total, CumulativeSum())
    assert math.isnan(m.snapshot()[avg]) and math.isnan(m.snapshot()[mx])
    t0 = time.monotonic()
    s.record(10, t0)
    s.record(30, t0 + 0.5)           # same window
    s.record(2, t0 + 1.2)            # second window
    stat = m._metrics[avg][0]
    assert stat.measure(t0 + 1.3, 1.0, 2) == pytest.approx(14.0)
    assert m._metrics[mx][0].measure(t0 + 1.3, 1.0, 2) == 30
    # 42 over max(elapsed 1.3 s, one whole window) = 1.3 s
    assert m._metrics[rate][0].measure(t0 + 1.3, 1.0, 2) == pytest.approx(42 / 1.3)
    # at t0 + 2.1 the first window (started t0) is older than 2 x 1 s: dropped
    assert m._metrics[avg][0].measure(t0 + 2.1, 1.0, 2) == pytest.approx(2.0)
    assert m._metrics[total][0].measure(t0 + 9, 1.0, 2) == 42
    # right after the start a rate counts a whole window (samples - 1) at least
    c, _ = m.sensor("y")
    n = m.metric_name("count-rate", "g")
    c.add(n, Rate(WindowedCount()))
    c.record(5, t0)
    c.record(7, t0 + 0.1)
    assert m._metrics[n][0].measure(t0 + 0.2, 1.0, 2) == pytest.approx(2 / 1.2)


def test_metric_names_hash_on_name_group_tags() -> None:
    a = MetricName("records-lag", "consumer-fetch-manager-metrics", "d1",
                   {"client-id": "c", "topic": "t", "partition": "0"})
    b = MetricName("records-lag", "consumer-fetch-manager-metrics", "other",
                   {"partition": "0", "topic": "t", "client-id": "c"})
    assert a == b and hash(a) == hash(b)
    assert a != MetricName("records-lag", "consumer-fetch-manager-metrics", "",
                           {"client-id": "c", "topic": "t", "partition": "1"})


def test_sensor_records_from_threads_and_reads_consistently() -> None:
    m = Metrics(client_id="c")
    s, _ = m.sensor("x")
    total = m.metric_name("t", "g")
    s.add(total, CumulativeSum())

    def work() -> None:
        for _ in range(5000):
            s.record(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert m.snapshot()[total] == 20000


def test_coordinator_metrics_rebalance_and_commit() -> None:
    m = Metrics(client_id="c")
    subs = SubscriptionState()
    subs.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    cm = CoordinatorMetrics(m, subs)
    g = "consumer-coordinator-metrics"
    assert value(m.snapshot(), g, "last-rebalance-seconds-ago") == -1
    cm.rebalance_started()
    cm.rebalance_started()           # a rejoin within the rebalance counts once
    time.sleep(0.05)
    cm.rebalance_done()
    cm.commit_done(time.monotonic() - 0.01)
    snap = m.snapshot()
    assert value(snap, g, "rebalance-total") == 1
    assert value(snap, g, "rebalance-latency-max") >= 50
    assert value(snap, g, "commit-total") == 1
    assert value(snap, g, "commit-latency-avg") >= 10
    assert value(snap, g, "assigned-partitions") == 2
    assert 0 <= value(snap, g, "last-rebalance-seconds-ago") < 5
    assert {(n.group, n.name) for n in snap} <= doc_table()
    # a KIP-848 reconciliation cut short (fenced): the next rebalance is timed alone
    cm.rebalance_started()
    time.sleep(0.2)
    cm.rebalance_failed()
    cm.rebalance_started()
    cm.rebalance_done()
    snap = m.snapshot()
    assert value(snap, g, "rebalance-total") == 2
    assert value(snap, g, "rebalance-latency-max") < 200


# ---------------------------------------------------------------------- on the brokers


def _produce(broker, topic: str, n: int, partitions: int = 2) -> dict[MetricName, float]:
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0,
                  enable_metrics_push=False) as p:
        for i in range(n):
            p.send(topic, b"value-%d" % i, key=b"k", partition=i % partitions)
        p.flush(60)
        return p.metrics()


@pytest.mark.broker
def test_producer_and_consumer_metrics_match_what_happened(broker, unique_topic) -> None:
    topic = broker.create_topic(unique_topic, 2)
    n = 300
    pm = _produce(broker, topic, n)
    assert value(pm, "producer-metrics", "record-send-total") == n
    assert value(pm, "producer-topic-metrics", "record-send-total", topic=topic) == n
    assert value(pm, "producer-metrics", "record-error-total") == 0
    assert value(pm, "producer-metrics", "batch-size-max") > 0
    assert value(pm, "producer-metrics", "request-latency-max") >= \
        value(pm, "producer-metrics", "request-latency-avg") > 0
    sent = value(pm, "producer-metrics", "request-total")
    assert sent >= value(pm, "producer-metrics", "response-total") >= 2
    nodes = {n.tags["node-id"]: v for n, v in pm.items()
             if n.group == "producer-node-metrics" and n.name == "request-total"}
    assert sum(nodes.values()) == sent

    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  enable_metrics_push=False) as c:
        c.assign(tps)
        got = 0
        deadline = time.monotonic() + 60
        while got < 120 and time.monotonic() < deadline:
            got += len(c.poll(2000, max_records=40))
        m = c.metrics()
        g = "consumer-fetch-manager-metrics"
        assert value(m, g, "records-consumed-total") == got
        assert value(m, g, "records-consumed-total", topic=topic) == got
        ends = c.end_offsets(tps)                       # ListOffsets
        lags = {tp: ends[tp] - c.position(tp) for tp in tps}
        seen = []           # lag is recorded for partitions a poll handed records of
        for tp in tps:
            found = [v for k, v in m.items() if k.name == "records-lag" and
                     k.tags.get("partition") == str(tp.partition)]
            if found:
                seen.append(lags[tp])
                assert found == [lags[tp]], tp
        assert seen
        assert value(m, g, "records-lag-max") >= max(seen) > 0
        assert value(m, g, "fetch-total") >= 1
        assert value(m, g, "fetch-latency-max") >= value(m, g, "fetch-latency-avg") > 0
        assert value(m, g, "bytes-consumed-total") > 0
        while got < n and time.monotonic() < deadline:
            got += len(c.poll(2000))
        assert got == n
        m = c.metrics()
        assert value(m, g, "records-consumed-total") == n
        for tp in tps:
            assert c.position(tp) == ends[tp]
            assert value(m, g, "records-lag", topic=topic, partition=tp.partition) == 0
        assert value(m, "consumer-metrics", "response-total") >= 2
        names = {(k.group, k.name) for k in {**pm, **m}}
    assert names <= doc_table(), sorted(names - doc_table())


@pytest.mark.broker
def test_metrics_off(broker, unique_topic) -> None:
    topic = broker.create_topic(unique_topic, 2)
    with Producer(bootstrap_servers=broker.bootstrap, metrics_enabled=False) as p:
        p.send(topic, b"v", partition=0).result(30)
        assert p.metrics() == {}
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  metrics_enabled=False) as c:
        c.assign([(topic, 0)])
        assert len(c.poll(10000)) == 1
        assert c.metrics() == {}


@pytest.mark.broker
@pytest.mark.brokers(needs=("groups",))
def test_group_metrics(broker, unique_topic) -> None:
    topic = broker.create_topic(unique_topic, 2)
    _produce(broker, topic, 20)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=unique_topic,
                  auto_offset_reset="earliest", enable_auto_commit=False,
                  session_timeout_ms=broker.session_timeout_ms(10000),
                  enable_metrics_push=False) as c:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 60
        while got < 20 and time.monotonic() < deadline:
            got += len(c.poll(1000))
        c.commit()
        m = c.metrics()
        g = "consumer-coordinator-metrics"
        assert value(m, g, "rebalance-total") >= 1
        assert value(m, g, "rebalance-latency-max") > 0
        assert value(m, g, "commit-total") == 1
        assert value(m, g, "assigned-partitions") == 2
        assert 0 <= value(m, g, "last-rebalance-seconds-ago") < 60


@pytest.mark.broker
@pytest.mark.brokers("mock", reason="KIP-848 groups: only the mock has ConsumerGroupHeartbeat")
def test_kip848_group_metrics(broker, unique_topic) -> None:
    """group_protocol="consumer": a rebalance is timed from the member becoming
    RECONCILING to its target applied (Java's transitionTo); commits through the
    shared OffsetCommit path."""
    topic = broker.create_topic(unique_topic, 2)
    _produce(broker, topic, 20)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=unique_topic,
                  group_protocol="consumer", auto_offset_reset="earliest",
                  enable_auto_commit=False, enable_metrics_push=False) as c:
        g = "consumer-coordinator-metrics"
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 60
        while (got < 20 or len(c.assignment()) < 2) and time.monotonic() < deadline:
            got += len(c.poll(200))
        assert got == 20
        c.commit()
        m = c.metrics()
        assert value(m, g, "rebalance-total") >= 1
        assert value(m, g, "rebalance-latency-max") > 0
        assert value(m, g, "rebalance-latency-total") >= value(m, g, "rebalance-latency-max")
        assert value(m, g, "commit-total") == 1
        assert value(m, g, "commit-latency-max") > 0
        assert value(m, g, "assigned-partitions") == 2
        assert 0 <= value(m, g, "last-rebalance-seconds-ago") < 60


@pytest.mark.broker
@pytest.mark.brokers("mock", reason="one broker is enough for the JSON's shape")
def test_stats_callback_json(broker, unique_topic) -> None:
    topic = broker.create_topic(unique_topic, 1)
    _produce(broker, topic, 5, partitions=1)
    reports: list[str] = []
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  statistics_interval_ms=50, stats_cb=reports.append,
                  enable_metrics_push=False) as c:
        c.assign([(topic, 0)])
        got = 0
        while got < 5:
            got += len(c.poll(5000))
        end = c.end_offsets([(topic, 0)])[TopicPartition(topic, 0)]
        count = len(reports)
        deadline = time.monotonic() + 10
        while len(reports) < count + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        doc = json.loads(reports[-1])
    assert {"name", "client_id", "type", "ts", "time", "metrics", "topics"} <= set(doc)
    assert doc["type"] == "consumer"
    part = doc["topics"][topic]["partitions"]["0"]
    assert part["consumer_lag"] == 0 and part["hi_offset"] == end == part["app_offset"]
    consumed = [e for e in doc["metrics"] if e["name"] == "records-consumed-total"
                and "topic" not in e["tags"]]
    assert consumed == [{"group": "consumer-fetch-manager-metrics",
                         "name": "records-consumed-total", "tags": {"client-id": "kproto"},
                         "value": 5.0}]


def test_stats_callback_must_be_callable() -> None:
    from kproto.errors import ConfigError

    with pytest.raises(ConfigError, match="stats_callback must be callable"):
        Consumer(bootstrap_servers="127.0.0.1:1", stats_callback="print")


@pytest.mark.broker
@pytest.mark.brokers("mock", reason="share groups: only the mock has them")
def test_share_consumer_request_metrics(broker) -> None:
    from kproto import ShareConsumer

    from .share_support import poll_until, share_topic

    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        topic, group = share_topic(broker, p, 10)
    with ShareConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                       fetch_max_wait_ms=100, enable_metrics_push=False) as c:
        c.subscribe([topic])
        poll_until(lambda: c.poll(500), lambda g: len(g) >= 10, "10 records")
        m = c.metrics()
    sent = value(m, "consumer-metrics", "request-total")
    nodes = [v for n, v in m.items() if n.group == "consumer-node-metrics"
             and n.name == "request-total"]
    assert sent > 0 and sum(nodes) == sent
    assert {(n.group, n.name) for n in m} <= doc_table()


@pytest.mark.broker
def test_admin_request_metrics_and_close(broker, unique_topic) -> None:
    """Admin.metrics(): its requests per broker (admin-client-node-metrics) add up to
    the client-wide count (admin-client-metrics); close() stops its reporters."""
    from kproto import Admin

    topic = broker.create_topic(unique_topic, 1)
    reports: list[str] = []
    admin = Admin(bootstrap_servers=broker.bootstrap, enable_metrics_push=False,
                  statistics_interval_ms=20, stats_callback=reports.append)
    try:
        assert topic in admin.list_topics()
        assert admin.list_offsets({(topic, 0): "latest"})[TopicPartition(topic, 0)].offset == 0
        m = admin.metrics()
        sent = value(m, "admin-client-metrics", "request-total")
        nodes = {n.tags["node-id"]: v for n, v in m.items()
                 if n.group == "admin-client-node-metrics" and n.name == "request-total"}
        assert sent >= 2 and sum(nodes.values()) == sent
        assert value(m, "admin-client-metrics", "response-total") == sent
        assert value(m, "admin-client-metrics", "incoming-byte-total") > 0
        assert {(n.group, n.name) for n in m} <= doc_table(), \
            sorted({(n.group, n.name) for n in m} - doc_table())
        deadline = time.monotonic() + 10
        while not reports and time.monotonic() < deadline:
            time.sleep(0.02)
        assert json.loads(reports[-1])["type"] == "admin"
    finally:
        admin.close()
    count = len(reports)
    time.sleep(0.2)                           # ten intervals: none after close()
    assert len(reports) == count
    with Admin(bootstrap_servers=broker.bootstrap, metrics_enabled=False) as off:
        off.list_topics()
        assert off.metrics() == {}


@pytest.mark.broker
@pytest.mark.brokers("mock", reason="share groups: only the mock has them")
def test_share_fetch_metrics_match_what_happened(broker) -> None:
    """consumer-share-fetch-manager-metrics (Java's ShareFetchMetricsManager): the
    records acquired, the ShareFetch answers, and the acknowledgements sent and
    failed - the failed ones counted as the commit callback was told."""
    from kproto import ShareConsumer
    from kproto.consumer.share_metrics import GROUP as G
    from kproto.errors import ErrorCode

    from .share_support import poll_until, share_topic

    calls: list[tuple[dict, BaseException | None]] = []
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        topic, group = share_topic(broker, p, 10)
        with ShareConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                           fetch_max_wait_ms=100, max_poll_records=4,
                           enable_metrics_push=False) as c:
            c.set_acknowledgement_commit_callback(lambda o, e: calls.append((o, e)))
            c.subscribe([topic])
            poll_until(lambda: c.poll(500), lambda g: len(g) >= 10, "10 records")
            m = c.metrics()
            assert value(m, G, "records-fetched-total") == 10
            assert 1 <= value(m, G, "records-per-request-max") <= 4
            assert value(m, G, "bytes-consumed-total") > 0
            assert value(m, G, "fetch-size-max") >= value(m, G, "fetch-size-avg") > 0
            assert value(m, G, "fetch-total") >= 3          # 4 records an answer at most
            assert value(m, G, "fetch-latency-max") >= value(m, G, "fetch-latency-avg") > 0
            assert value(m, G, "fetch-throttle-time-max") == 0
            # the last poll's records: acknowledged by commit_sync, which the broker refuses
            broker.process.push_request_errors(ApiKey.SHARE_ACKNOWLEDGE,
                                               ErrorCode.INVALID_SHARE_SESSION_EPOCH)
            assert any(e is not None for e in c.commit_sync().values())
            m = c.metrics()
    acked = sum(len(o) for offsets, _ in calls for o in offsets.values())
    failed = sum(len(o) for offsets, e in calls if e is not None for o in offsets.values())
    assert acked == 10 and failed >= 1
    assert value(m, G, "acknowledgements-send-total") == 10
    assert value(m, G, "acknowledgements-error-total") == failed
    assert {(n.group, n.name) for n in m} <= doc_table(), \
        sorted({(n.group, n.name) for n in m} - doc_table())


class _CountingLock:
    """A registry lock that counts how often it is taken."""

    def __init__(self) -> None:
        self.inner, self.taken = threading.RLock(), 0

    def __enter__(self) -> None:
        self.taken += 1
        self.inner.acquire()

    def __exit__(self, *exc: object) -> None:
        self.inner.release()


def test_a_poll_records_its_fetch_metrics_at_once() -> None:
    """What one collect hands out - here 4 partitions of 2 topics, one taken in two
    polls - is recorded under one lock, records and bytes summed per topic (as
    Java's FetchMetricsAggregator), the lag per partition: the same values as
    recording each piece alone, with one lock a poll (was one per sensor per
    partition: 12 here)."""
    from kproto import records
    from kproto.consumer.fetch_buffer import CompletedFetch, FetchBuffer
    from kproto.consumer.fetch_metrics import GROUP, FetchMetrics

    m = Metrics(client_id="c")
    lock = m.lock = _CountingLock()       # type: ignore[assignment]
    buf = FetchBuffer()
    buf.metrics = FetchMetrics(m)
    tps = [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0),
           TopicPartition("b", 3)]
    positions: dict[TopicPartition, int | None] = {tp: 0 for tp in tps}
    sizes = []

    def fetched(n: int) -> None:
        for i, tp in enumerate(tps):
            at = positions[tp]
            data = records.encode(value=[b"v"] * (n + i), base_offset=at)
            cols = records.decode(data, topic=tp.topic, partition=tp.partition, start_offset=at)
            buf.add([CompletedFetch(tp, at, cols, cols.next_offset, nbytes=len(data),
                                    high_watermark=200 + i, last_stable=200 + i,
                                    watermark=200 + i)])
            sizes.append(len(data))

    fetched(1)                            # (1, 2, 3, 4 records: the sensors made)
    assert len(buf.collect(positions, lambda tp: True)) == 10
    fetched(10)
    lock.taken = 0
    assert len(buf.collect(positions, lambda tp: True, max_records=10 + 11 + 12 + 5)) == 38
    assert lock.taken == 1
    snap = m.snapshot()
    assert value(snap, GROUP, "records-consumed-total") == 48
    assert value(snap, GROUP, "records-consumed-total", topic="a") == 3 + 21
    assert value(snap, GROUP, "records-consumed-total", topic="b") == 7 + 17
    for i, tp in enumerate(tps):
        lag = 200 + i - positions[tp]      # type: ignore[operator]
        assert value(snap, GROUP, "records-lag", topic=tp.topic, partition=tp.partition) == lag
    lock.taken = 0
    assert len(buf.collect(positions, lambda tp: True)) == 8 and lock.taken == 1
    snap = m.snapshot()
    assert value(snap, GROUP, "records-consumed-total", topic="b") == 7 + 25
    assert value(snap, GROUP, "records-lag", topic="b", partition=3) == 203 - 17
    assert value(snap, GROUP, "records-lag-max", topic="b", partition=3) == 203 - 4
    assert value(snap, GROUP, "records-lag-avg", topic="b", partition=3) == \
        (203 - 4 + 203 - 9 + 203 - 17) / 3
    assert value(snap, GROUP, "bytes-consumed-total") == sum(sizes)
