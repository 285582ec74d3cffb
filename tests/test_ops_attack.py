"""Attacks on issue 33's operations surface (metrics, KIP-714 telemetry, lag, the
admin breadth and its CLI) as a hostile user or operator would make them: odd
settings, brokers that answer oddly, misused commands, secrets on the way."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from kproto import Consumer, protocol
from kproto.errors import ConfigError
from kproto.testing import MockCluster
from tests.test_cli import run


def _wait(cond: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# ------------------------------------------------------------------ metrics settings


@pytest.mark.parametrize("setting", [{"metrics_num_samples": 0},
                                     {"metrics_num_samples": -3},
                                     {"metrics_sample_window_ms": 0},
                                     {"metrics_sample_window_ms": -1000},
                                     {"statistics_interval_ms": -1},
                                     {"statistics_interval_ms": 10**13}])
def test_metrics_settings_out_of_range_are_refused(setting: dict[str, int]) -> None:
    """Java refuses metrics.num.samples < 1 and a window < 0 (ConfigDef atLeast),
    librdkafka a statistics.interval.ms outside 0..86400000; kproto read samples 0
    as 1, a window of 0 made every rate NaN, a negative interval meant never and a
    huge one killed the stats thread (OverflowError in Event.wait)."""
    name = next(iter(setting))
    with pytest.raises(ConfigError, match=name):
        Consumer(bootstrap_servers="127.0.0.1:1", stats_callback=lambda s: None, **setting)


# ------------------------------------------------------------------ telemetry


@pytest.mark.broker
def test_subscription_refused_again_and_again_is_no_hot_loop() -> None:
    """A broker answering every GetTelemetrySubscriptions with
    UNKNOWN_SUBSCRIPTION_ID (or UNSUPPORTED_COMPRESSION_TYPE): 'subscribe again
    at once' must not become thousands of requests a second."""
    pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    with MockCluster(num_brokers=1, config={"enable.metrics.push": False}) as mock:
        mock.set_telemetry(["org.apache.kafka.consumer"], 200)
        mock.push_request_errors(protocol.ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
                                 *([117] * 500 + [76] * 500))
        mock.start_request_tracking()
        c = Consumer(bootstrap_servers=mock.bootstrap)
        try:
            c.assign([("t", 0)])
            c.poll(100)
            reporter = c._instruments.telemetry
            assert reporter is not None
            time.sleep(2.0)
        finally:
            start = time.monotonic()
            c.close()
            assert time.monotonic() - start < 4.0
        subscribes = [k for _, k, _ in mock.requests() if k == 71]
        assert 1 <= len(subscribes) <= 20, len(subscribes)


# ------------------------------------------------------------------ the CLI


@pytest.mark.brokers("tansu", reason="the broker that accepts any topic config key "
                     "(noida refuses unknown ones, the mock has no IncrementalAlterConfigs)")
def test_configs_alter_never_prints_a_secret_it_set(broker, unique_topic, capsys) -> None:
    """``configs alter --set sasl.jaas.config=...`` (a broker's listener secret, set
    as kafka-configs.sh does): the confirmation printed it back in clear."""
    broker.create_topic(unique_topic, 1)
    secret = "org.apache.kafka.common.security.plain.PlainLoginModule password=\"Hx9-q\""
    for json_out in ((), ("--json",)):
        code, out, err = run(capsys, "-b", broker.bootstrap, *json_out, "configs", "alter",
                              "topic", unique_topic, "--set", f"sasl.jaas.config={secret}",
                              "--set", "retention.ms=1000")
        assert code == 0, err
        assert "Hx9-q" not in out + err
        assert "retention.ms" in out and "1000" in out and "***" in out


def test_a_secret_set_is_masked_in_errors() -> None:
    """The values of secret configs on a ``--set`` are masked in every error line
    (a broker may echo a refused value: "Invalid value ... for configuration ...")."""
    from kproto.cli_args import mask, secrets

    hidden = secrets(["configs", "alter", "broker", "1", "--set", "ssl.key.password=Pw1",
                      "--set=listener.name.x.sasl.jaas.config=Jaas2", "--set", "a.b=plain"])
    text = mask("Invalid value Pw1 for ssl.key.password; Jaas2; plain", hidden)
    assert text == "Invalid value *** for ssl.key.password; ***; plain"


def test_a_raising_stats_callback_is_logged_and_reports_go_on(caplog: Any) -> None:
    """A stats_callback that raises: logged, and the next report still comes."""
    calls: list[str] = []

    def boom(doc: str) -> None:
        calls.append(doc)
        raise ValueError("user bug")

    with caplog.at_level(logging.ERROR, logger="kproto.metrics"):
        c = Consumer(bootstrap_servers="127.0.0.1:1", stats_callback=boom,
                     statistics_interval_ms=20)
        try:
            _wait(lambda: len(calls) >= 3, 10.0)
        finally:
            c.close()
    assert any("stats_callback raised" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------ lag metrics


def _lag(c: Consumer, topic: str) -> dict[int, float]:
    return {int(n.tags["partition"]): v for n, v in c.metrics().items()
            if n.name == "records-lag" and n.tags.get("topic") == topic}


@pytest.mark.broker
def test_lag_after_seek_backwards_and_after_unassign(broker, unique_topic) -> None:
    """records-lag is the end minus the position after the poll (Java): 0 at the
    end, 7 after seeking back to 0 and taking 3 of 10; a partition no longer
    assigned has no lag metric; cycling assignments does not grow the registry."""
    import pyarrow as pa

    from kproto import Producer

    broker.create_topic(unique_topic, 2)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send_batch(unique_topic, pa.table({"value": [b"x"] * 10}), partition=0).result()
    c = Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                 max_poll_records=3, enable_metrics_push=False)
    try:
        c.assign([(unique_topic, 0)])
        got = 0
        deadline = time.monotonic() + 30
        while got < 10 and time.monotonic() < deadline:
            got += len(c.poll(1000))
        assert got == 10
        c.poll(200)
        assert _lag(c, unique_topic) == {0: 0.0}
        c.seek((unique_topic, 0), 0)
        taken = []
        while not taken:
            assert time.monotonic() < deadline
            taken = c.poll(1000)
        assert [r.offset for r in taken] == [0, 1, 2]
        assert _lag(c, unique_topic) == {0: 7.0}
        for i in range(2):                  # (each leader's node metrics made once)
            c.assign([(unique_topic, i)])
            c.poll(50)
        c.assign([(unique_topic, 0)])
        c.poll(50)
        before = (len(c._instruments.registry._sensors), len(c._instruments.registry._metrics))
        for i in range(20):
            c.assign([(unique_topic, i % 2)])
            c.poll(50)
        c.assign([(unique_topic, 0)])
        c.poll(50)
        after = (len(c._instruments.registry._sensors), len(c._instruments.registry._metrics))
        assert after == before
        c.assign([(unique_topic, 1)])
        assert 0 not in _lag(c, unique_topic)
    finally:
        c.close()


def test_metrics_from_another_thread_while_a_poll_records_a_new_partition() -> None:
    """``Consumer.metrics()`` from a monitoring thread drops the metrics of
    partitions no longer assigned (FetchMetrics.keep) while the polling thread may
    record a partition it has just been given. Made deterministic: the polling
    thread's recording runs exactly while keep() walks the partitions (from a
    comparison keep() makes); it raised 'dictionary changed size during iteration'
    out of metrics()."""
    import threading

    from kproto.consumer.fetch_metrics import FetchMetrics
    from kproto.metrics import Metrics
    from kproto.structs import TopicPartition

    fm = FetchMetrics(Metrics())
    old = [TopicPartition("t", i) for i in range(3)]
    fm.consumed([(tp, 1, 10, 5, 10, 10, 10) for tp in old], time.monotonic())
    fresh = TopicPartition("t", 99)
    done = threading.Event()

    def poll_thread() -> None:
        fm.consumed([(fresh, 1, 10, 5, 10, 10, 10)], time.monotonic())
        done.set()

    class Meanwhile:
        """Compared with a partition inside keep(): the polling thread runs then."""

        def __hash__(self) -> int:
            return hash(old[0])

        def __eq__(self, other: object) -> bool:
            if not done.is_set():
                t = threading.Thread(target=poll_thread)
                t.start()
                t.join(2.0)
            return False

    fm.keep([Meanwhile(), old[1]])
    _wait(done.is_set, 5.0)
    assert old[0] not in fm.offsets and old[1] in fm.offsets


@pytest.mark.broker
def test_a_tiny_push_interval_is_no_hot_loop() -> None:
    """A broker asking for pushes every 1 ms (Kafka's own client-metrics interval.ms
    is at least 100): the reporter pushes at most every 100 ms, never in a loop."""
    pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    with MockCluster(num_brokers=1, config={"enable.metrics.push": False}) as mock:
        mock.set_telemetry(["org.apache.kafka.consumer"], 1)
        mock.start_request_tracking()
        c = Consumer(bootstrap_servers=mock.bootstrap)
        try:
            c.assign([("t", 0)])
            c.poll(100)
            reporter = c._instruments.telemetry
            assert reporter is not None
            _wait(lambda: reporter.pushes >= 1)
            time.sleep(1.0)
        finally:
            c.close()
        pushes = [at for _, k, at in mock.requests() if k == 72]
        assert 2 <= len(pushes) <= 25, len(pushes)


@pytest.mark.brokers("noida", reason="the broker that keeps a group's offsets of a deleted "
                     "topic (Tansu drops them with the topic; the mock has no null-safe "
                     "OffsetFetch)")
def test_group_lag_with_offsets_of_a_deleted_topic(broker, unique_topic, capsys) -> None:
    """A group's committed offsets of a topic since deleted: the lag of its other
    partitions is still shown (the deleted one's as '-', as kafka-consumer-groups.sh);
    the whole call raised UnknownTopicOrPartitionError."""
    import json

    from kproto.admin import Admin

    gone, group = unique_topic + "-gone", "g-" + unique_topic
    broker.create_topic(unique_topic, 2)
    broker.create_topic(gone, 1)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_consumer_group_offsets(group, {(unique_topic, 0): 0, (gone, 0): 0})
        admin.delete_topics([gone])
        lag = admin.consumer_group_lag(group)
        assert {(tp.topic, tp.partition): (p.committed, p.end, p.lag)
                for tp, p in lag.items()} == {(unique_topic, 0): (0, 0, 0),
                                              (gone, 0): (0, None, None)}
    code, out, err = run(capsys, "-b", broker.bootstrap, "--json", "groups", "lag", group)
    assert code == 0, err
    assert {(r["topic"], r["end"], r["lag"]) for r in json.loads(out)} == \
        {(unique_topic, 0, 0), (gone, None, None)}
    code, out, err = run(capsys, "-b", broker.bootstrap, "groups", "lag", group)
    assert code == 0 and out.splitlines()[-1] == "total lag 0", err
    assert [line.split()[3:5] for line in out.splitlines() if line.startswith(gone)] == \
        [["-", "-"]]
    code, out, err = run(capsys, "-b", broker.bootstrap, "--json", "groups", "describe", group)
    assert code == 0, err
    assert {(r["topic"], r["end"], r["lag"]) for r in json.loads(out)[0]["offsets"]} == \
        {(unique_topic, 0, 0), (gone, None, None)}
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert gone not in admin.list_topics()      # (not created again by a look)


@pytest.mark.brokers("tansu", reason="the broker that stores any topic config and describes "
                     "it without flagging it sensitive (noida refuses the names, the mock "
                     "has no CreateTopics configs)")
def test_configs_describe_masks_secrets_a_broker_does_not_flag(broker, unique_topic,
                                                               capsys) -> None:
    """A broker that answers a secret config (ssl.key.password, sasl.jaas.config)
    with is_sensitive false: kproto configs describe printed the values in clear."""
    from kproto.admin import Admin

    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics({unique_topic: 1}, configs={
            "sasl.jaas.config": "Jq7-secret", "ssl.key.password": "Pk3-secret",
            "retention.ms": "60000"})
    for json_out in ((), ("--json",)):
        code, out, err = run(capsys, "-b", broker.bootstrap, *json_out, "configs",
                              "describe", "topic", unique_topic, "--synonyms")
        assert code == 0, err
        assert "-secret" not in out + err and "60000" in out and "***" in out


# ------------------------------------------------------------------ ACLs


@pytest.mark.parametrize("make", [
    lambda a: a.ResourcePattern("topic", None),
    lambda a: a.ResourcePattern("topic", 7),
    lambda a: a.AccessControlEntry(None, "*", "read", "allow"),
    lambda a: a.AccessControlEntry("User:x", None, "read", "allow"),
    lambda a: a.ResourcePattern("topic", "t", "match"),
    lambda a: a.AccessControlEntry("User:x", "*", "any", "allow"),
])
def test_acl_binding_refuses_what_only_a_filter_may_hold(make: Any) -> None:
    """None (any) names, principals and hosts, MATCH/ANY patterns and operations
    belong to filters: a binding to create with one is a ConfigError (Java's
    requireNonNull), not a request the encoder or broker chokes on."""
    import kproto.admin as admin

    with pytest.raises(ConfigError):
        make(admin)


@pytest.mark.brokers("tansu", "noida", reason="the mock's classic rebalance is slow to settle "
                     "(a minute and more under load)")
def test_revoked_partitions_leave_the_pushed_and_reported_lag(broker, unique_topic) -> None:
    """A group member that loses a partition in a rebalance: its lag metric goes
    from what stats_callback and KIP-714 push (the registry, the statistics JSON's
    topics) by the next poll, as Java's FetchMetricsManager.maybeUpdateAssignment;
    it stayed there until someone called metrics()."""
    import pyarrow as pa

    from kproto import Producer

    broker.create_topic(unique_topic, 2)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for part in (0, 1):
            p.send_batch(unique_topic, pa.table({"value": [b"x"] * 5}), partition=part).result()
    group = "g-" + unique_topic
    settings = dict(bootstrap_servers=broker.bootstrap, group_id=group,
                    auto_offset_reset="earliest", enable_metrics_push=False,
                    session_timeout_ms=10000, heartbeat_interval_ms=200)
    a = Consumer(**settings)
    b = None
    try:
        a.subscribe([unique_topic])
        deadline = time.monotonic() + 60
        got = 0
        while got < 10:
            assert time.monotonic() < deadline
            got += len(a.poll(500))
        a.poll(100)

        def lagged() -> set[int]:
            return {int(n.tags["partition"]) for n in a._instruments.registry.snapshot()
                    if n.name == "records-lag" and n.tags.get("topic") == unique_topic}

        assert lagged() == {0, 1}
        b = Consumer(**settings)
        b.subscribe([unique_topic])
        while not (len(a.assignment()) == 1 and len(b.assignment()) == 1):
            assert time.monotonic() < deadline
            a.poll(100)
            b.poll(100)
        a.poll(100)
        [kept] = [tp.partition for tp in a.assignment()]
        assert lagged() == {kept}
        stats = a._fetch_metrics.statistics()["topics"][unique_topic]["partitions"]
        assert set(stats) == {str(kept)}
    finally:
        a.close()
        if b is not None:
            b.close()


@pytest.mark.brokers("noida", reason="the broker that describes a classic group's members' "
                     "assignments (Tansu answers none; the mock's OffsetFetch answer is not "
                     "null-safe)")
def test_group_lag_shows_assigned_partitions_nobody_committed(broker, unique_topic,
                                                              capsys) -> None:
    """A member assigned two partitions that committed only one: the other was
    left out of the lag (its whole backlog invisible); Java's
    kafka-consumer-groups.sh lists it with '-' for the committed offset and lag."""
    import json

    import pyarrow as pa

    from kproto import Producer
    from kproto.admin import Admin

    broker.create_topic(unique_topic, 2)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for part in (0, 1):
            p.send_batch(unique_topic, pa.table({"value": [b"x"] * 5}), partition=part).result()
    group = "g-" + unique_topic
    c = Consumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                 auto_offset_reset="earliest", enable_metrics_push=False)
    try:
        c.subscribe([unique_topic])
        deadline = time.monotonic() + 60
        while len(c.assignment()) < 2:
            assert time.monotonic() < deadline
            c.poll(200)
        c.commit({(unique_topic, 0): 3})
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            lag = admin.consumer_group_lag(group)
        got = {tp.partition: (p.committed, p.end, p.lag, p.member is not None)
               for tp, p in lag.items()}
        assert got == {0: (3, 5, 2, True), 1: (None, 5, None, True)}
        code, out, err = run(capsys, "-b", broker.bootstrap, "--json", "groups", "lag", group)
        assert code == 0, err
        assert [(r["partition"], r["committed"], r["lag"]) for r in json.loads(out)] == \
            [(0, 3, 2), (1, None, None)]
        code, out, err = run(capsys, "-b", broker.bootstrap, "groups", "lag", group)
        assert code == 0 and out.splitlines()[-1] == "total lag 2", err
    finally:
        c.close()


def test_unassigning_thousands_of_partitions_is_quick() -> None:
    """Dropping a partition's lag metrics walked every metric of the client (a
    new dict per partition): unassigning 5,000 partitions held the registry lock -
    and the poll, and metrics() - for ~8 s. Now a partition's own metrics."""
    from kproto.consumer.fetch_metrics import FetchMetrics
    from kproto.metrics import Metrics
    from kproto.structs import TopicPartition

    fm = FetchMetrics(Metrics())
    tps = [TopicPartition("t", i) for i in range(5000)]
    fm.consumed([(tp, 1, 10, 5, 10, 10, 10) for tp in tps], time.monotonic())
    names = set(fm.registry.snapshot())
    start = time.monotonic()
    fm.keep(tps[:10])
    assert time.monotonic() - start < 3.0      # (~15 ms; it was ~8 s)
    left = set(fm.registry.snapshot())
    assert {n.tags.get("partition") for n in left} - {None} == {str(i) for i in range(10)}
    assert names - left == {n for n in names if int(n.tags.get("partition", 0)) >= 10}
    assert len(names - left) == 3 * 4990


def test_a_slow_stats_callback_does_not_hold_close() -> None:
    """close() while stats_callback is still running (a slow user callback) waited
    5 s for it; now it returns at once, and no report starts after it."""
    import threading

    inside, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def slow(doc: str) -> None:
        calls.append(doc)
        inside.set()
        release.wait(30)

    c = Consumer(bootstrap_servers="127.0.0.1:1", stats_callback=slow,
                 statistics_interval_ms=10, enable_metrics_push=False)
    try:
        assert inside.wait(10)
        start = time.monotonic()
        c.close()
        assert time.monotonic() - start < 2.0
    finally:
        release.set()
    reporter = c._instruments.stats
    assert reporter is not None
    reporter._thread.join(5)
    assert not reporter._thread.is_alive() and len(calls) == 1


# ------------------------------------------------------------------ admin input


@pytest.mark.parametrize("call", [
    lambda a: a.delete_records({("t", 0): 5.9}),
    lambda a: a.delete_records({("t", 0): "5"}),
    lambda a: a.delete_records({("t", 0): True}),
    lambda a: a.create_partitions({"t": "3"}),
    lambda a: a.create_partitions({"t": 2.5}),
])
def test_admin_offsets_and_counts_must_be_whole_numbers(call: Any) -> None:
    """delete_records({tp: 5.9}) deleted before offset 5 (int() of it), "x" raised
    ValueError; create_partitions({t: "3"}) an EncodeError: a ConfigError naming
    the value now, before any request."""
    from kproto.admin import Admin

    admin = Admin(bootstrap_servers="127.0.0.1:1", enable_metrics_push=False)
    try:
        with pytest.raises(ConfigError, match="whole number"):
            call(admin)
    finally:
        admin.close()


@pytest.mark.brokers("tansu", "noida", reason="the brokers that delete topics and groups "
                     "(the mock has no DeleteGroups)")
def test_one_name_as_a_string_is_one_name(broker, unique_topic) -> None:
    """``delete_topics("ab")`` / ``delete_consumer_groups("g1")``: a string is one
    name (as subscribe() takes one); it was iterated into its letters - topics
    and groups 'a', 'b', ... deleted (or created), the one named left alone."""
    from kproto.admin import Admin

    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics(unique_topic)
        assert unique_topic in admin.list_topics()
        letters = set(unique_topic)
        assert not letters & set(admin.list_topics())
        assert list(admin.delete_consumer_groups("g" + unique_topic)) == ["g" + unique_topic]
        [desc] = admin.describe_groups("g" + unique_topic)
        assert desc.group_id == "g" + unique_topic
        admin.delete_topics(unique_topic)
        deadline = time.monotonic() + 30
        while unique_topic in admin.list_topics():
            assert time.monotonic() < deadline
            time.sleep(0.2)


@pytest.mark.brokers("noida", reason="the broker that describes a topic's configs by key")
def test_config_keys_and_changes_given_oddly(broker, unique_topic) -> None:
    """describe_configs(keys="retention.ms") asked for configs 'r', 'e', 't'... and
    answered none; incremental_alter_configs({r: "retention.ms=1"}) raised
    AttributeError building the request (ops must be AlterConfigOps)."""
    from kproto.admin import Admin, AlterConfigOp

    broker.create_topic(unique_topic, 1)
    res = ("topic", unique_topic)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert list(admin.describe_configs([res], keys="retention.ms")[res]) == ["retention.ms"]
        with pytest.raises(ConfigError, match="AlterConfigOp"):
            admin.incremental_alter_configs({res: "retention.ms=1"})
        admin.incremental_alter_configs({res: AlterConfigOp("retention.ms", "7000")}).all()
        assert admin.describe_configs([res], keys=["retention.ms"])[res][
            "retention.ms"].value == "7000"


@pytest.mark.parametrize("make", [
    lambda a: a.AlterConfigOp("retention.ms", 3600000),
    lambda a: a.AlterConfigOp("", "1"),
    lambda a: a.Admin(bootstrap_servers="127.0.0.1:1", enable_metrics_push=False
                      ).alter_configs({("topic", "t"): {"retention.ms": 1000}}),
])
def test_config_values_are_strings(make: Any) -> None:
    """An int config value (AlterConfigOp("retention.ms", 3600000)) was accepted
    and failed as an EncodeError deep in the request (or after connecting); an
    empty config name went to the broker. ConfigError at once."""
    import kproto.admin as admin

    with pytest.raises(ConfigError, match="config"):
        make(admin)


@pytest.mark.broker
def test_log_dirs_of_one_broker_by_its_id(broker) -> None:
    """describe_log_dirs(1) raised TypeError ('int' is not iterable) after asking
    for metadata; describe_log_dirs(["1"]) said broker '1' is not in the cluster.
    One id is one broker; an id that is not a whole number is a ConfigError."""
    from kproto.admin import Admin

    node = min(broker.node_ids)
    with Admin(bootstrap_servers=broker.bootstrap, enable_metrics_push=False) as admin:
        assert list(admin.describe_log_dirs(node)) == [node]
        with pytest.raises(ConfigError, match="broker id"):
            admin.describe_log_dirs([str(node)])


@pytest.mark.brokers("tansu", reason="the broker that answers a secret config unflagged "
                     "(noida refuses the names, the mock has no DescribeConfigs)")
def test_config_entry_repr_hides_a_secret(broker, unique_topic) -> None:
    """print(admin.describe_configs(...)) showed ssl.key.password in clear when the
    broker did not flag it sensitive; the value stays readable as .value."""
    from kproto.admin import Admin

    res = ("topic", unique_topic)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics({unique_topic: 1}, configs={"ssl.key.password": "Pk5-secret",
                                                         "retention.ms": "60000"})
        found = admin.describe_configs([res])
    entries = found[res]
    assert "-secret" not in repr(found) + repr(entries)
    assert "60000" in repr(entries["retention.ms"])
    assert entries["ssl.key.password"].value == "Pk5-secret"
