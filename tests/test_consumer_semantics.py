"""The consumer's delivery contract, as Kafka's Java client defines it.

Positions move only past records ``poll`` returned (``FetchCollector``): what
was fetched but not returned is neither committed nor skipped; records fetched
before ``seek``/``pause``/``assign`` are not returned after them; an error on
one partition does not cost the others their records; auto-commit covers the
records of earlier polls only, and its failure costs no records.

Each test here failed before the fetch buffer (kproto/consumer/fetch_buffer.py) took
the place of the list of fetched records.

On the broker matrix (tests/brokers.py); a test that subscribes needs groups
(not the mock). The KIP-392/KIP-320 tests stay on the mock: it is the
multi-node cluster, with leader epochs (noida-db's are -1).

Every test runs over each I/O driver (tests/aio_support.py): the blocking
consumer, and the same consumer through kproto.aio.AIOConsumer on asyncio's
event loop and uvloop's.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from kproto import Admin, Consumer, Producer, TopicPartition
from kproto.errors import TopicAuthorizationFailedError
from tests.aio_support import driver_fixture

pytestmark = pytest.mark.broker
consumer_driver = driver_fixture(globals())

FETCH, OFFSET_COMMIT = 1, 8
FAST = {"auto_offset_reset": "earliest", "fetch_max_wait_ms": 100,
        "request_timeout_ms": 3000}
GROUP = {**FAST, "session_timeout_ms": 6000, "heartbeat_interval_ms": 500}


@pytest.fixture
def proxied(broker):
    """The broker reached only through framed fault proxies (one per node)."""
    with broker.proxied() as proxied:
        yield proxied


def _hook(proxied, hook) -> None:
    for proxy in proxied.proxies:
        proxy.answer_hook = hook


def _fill(broker, topic: str, partitions: int, n: int, *, bootstrap: str | None = None) -> None:
    """``n`` records of values ``p<partition>-<offset>`` in each partition (the topic
    made first with ``partitions`` partitions; ``broker`` None: auto-created), sent
    to ``bootstrap`` (default the broker's)."""
    if broker is not None:
        broker.create_topic(topic, partitions)
    bootstrap = bootstrap or broker.bootstrap
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        for p in range(partitions):
            producer.send_batch(topic, pa.table({"value": [b"p%d-%d" % (p, i) for i in range(n)]}),
                                partition=p).result(30)


def _poll_until(consumer: Consumer, n: int, *, max_records: int | None = None,
                timeout: float = 20.0) -> list:
    """Records from polls until ``n`` arrived (each poll capped at ``max_records``)."""
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += consumer.poll(200, max_records=max_records)
    return got


def _offsets(records: list, partition: int | None = None) -> list[int]:
    return [r.offset for r in records if partition is None or r.partition == partition]


def test_position_and_commit_count_only_returned_records(broker, unique_topic):
    _fill(broker, unique_topic, 1, 10)
    tp = TopicPartition(unique_topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=unique_topic, **FAST) as c:
        c.assign([tp])
        got = _poll_until(c, 3, max_records=3)
        assert _offsets(got) == [0, 1, 2]
        assert c.position(tp) == 3               # not 10: the rest is fetched, not returned
        c.commit()
        assert c.committed([tp]) == {tp: 3}
        assert _offsets(c.poll(1000, max_records=3)) == [3, 4, 5]
        assert c.position(tp) == 6


@pytest.mark.brokers(needs=("groups",))
def test_close_commits_only_returned_records(broker, unique_topic):
    """poll(max_records=3) then close(): a restarted member resumes at offset 3."""
    _fill(broker, unique_topic, 1, 10)
    settings = {**GROUP, "group_id": unique_topic, "auto_commit_interval_ms": 60000}
    with Consumer(bootstrap_servers=broker.bootstrap, **settings) as c:
        c.subscribe([unique_topic])
        assert _offsets(_poll_until(c, 3, max_records=3)) == [0, 1, 2]
    with Consumer(bootstrap_servers=broker.bootstrap, **settings) as c:
        c.subscribe([unique_topic])
        assert _offsets(_poll_until(c, 7)) == list(range(3, 10))


@pytest.mark.brokers(needs=("groups",))
def test_auto_commit_covers_earlier_polls_only(broker, unique_topic):
    """At-least-once: the records a poll returns are committed by a later poll."""
    _fill(broker, unique_topic, 1, 5)
    tp = TopicPartition(unique_topic, 0)
    settings = {**GROUP, "group_id": unique_topic, "auto_commit_interval_ms": 0}
    with Consumer(bootstrap_servers=broker.bootstrap, **settings) as c:
        c.subscribe([unique_topic])
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            last = c.poll(200)
            got += last
            if last:
                # the records of this poll are not processed yet, as far as we know
                committed = c.committed([tp])[tp]
                assert committed is None or committed <= last[0].offset
        assert _offsets(got) == [0, 1, 2, 3, 4]
        c.poll(100)
        assert c.committed([tp]) == {tp: 5}


@pytest.mark.brokers(needs=("groups",))
def test_failed_auto_commit_keeps_the_polled_records(broker, proxied, unique_topic):
    """Every OffsetCommit dies with its connection: polls still return every record."""
    _fill(broker, unique_topic, 1, 6, bootstrap=proxied.bootstrap)
    settings = {**GROUP, "group_id": unique_topic, "auto_commit_interval_ms": 0,
                "request_timeout_ms": 1000, "session_timeout_ms": 6000}
    with Consumer(bootstrap_servers=proxied.bootstrap, **settings) as c:
        c.subscribe([unique_topic])

        def lose_commits(key, version, body):
            if key == OFFSET_COMMIT:
                raise ConnectionResetError("injected")
            return None

        _hook(proxied, lose_commits)
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < 6 and time.monotonic() < deadline:
            got += c.poll(200, max_records=2)   # several polls, each auto-committing
        assert _offsets(got) == list(range(6))
        assert sum(p.faults.get("rewrite", 0) for p in proxied.proxies) >= 1
        _hook(proxied, None)


@pytest.mark.brokers("tansu", "noida", reason="the claim is about one Fetch answer holding both "
                     "partitions; the mock leads them from different nodes, whose answers race "
                     "(seen failing under load: the error's answer came first)")
def test_an_error_on_one_partition_keeps_the_others_records(broker, proxied, unique_topic):
    _fill(broker, unique_topic, 2, 5, bootstrap=proxied.bootstrap)
    tps = [TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)]

    def deny_partition_1(key, version, body):
        if key == FETCH:
            for topic in body["responses"]:
                for p in topic["partitions"]:
                    if p["partition_index"] == 1:
                        p["error_code"] = TopicAuthorizationFailedError.code
                        p["records"] = None
        return body

    _hook(proxied, deny_partition_1)
    with Consumer(bootstrap_servers=proxied.bootstrap, **FAST) as c:
        c.assign(tps)
        c.seek(tps[0], 0)
        c.seek(tps[1], 0)
        first = c.poll_batch(5000)               # partition 0's records come first...
        assert first.column("partition").to_pylist() == [0] * 5
        assert first.column("offset").to_pylist() == list(range(5))
        with pytest.raises(TopicAuthorizationFailedError) as err:
            for _ in range(20):                 # ...partition 1's error on a later poll
                c.poll_batch(200)
        assert err.value.context["partition"] == 1
        assert c.position(tps[0]) == 5 and c.position(tps[1]) == 0
        _hook(proxied, None)
        got = _poll_until(c, 5)
        assert _offsets(got, 1) == list(range(5)) and not _offsets(got, 0)


def test_seek_drops_records_fetched_before_it(broker, unique_topic):
    _fill(broker, unique_topic, 1, 10)
    tp = TopicPartition(unique_topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, **FAST) as c:
        c.assign([tp])
        assert _offsets(_poll_until(c, 3, max_records=3)) == [0, 1, 2]
        c.seek(tp, 0)
        assert _offsets(c.poll(5000, max_records=3)) == [0, 1, 2]
        c.seek(tp, 8)
        assert _offsets(_poll_until(c, 2)) == [8, 9]
        c.seek_to_beginning(tp)
        assert _offsets(c.poll(5000, max_records=1)) == [0]


def test_pause_and_assign_drop_buffered_records(broker, unique_topic):
    _fill(broker, unique_topic, 2, 20)
    p0, p1 = TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)
    with Consumer(bootstrap_servers=broker.bootstrap, **FAST) as c:
        c.assign([p0, p1])
        got = _poll_until(c, 1, max_records=1)  # both partitions fetched, one record out
        c.pause(p1)
        later = [r for _ in range(10) for r in c.poll(100, max_records=5)]
        assert not _offsets(later, 1), "records of a paused partition were returned"
        c.resume(p1)
        later += _poll_until(c, 40 - len(got) - len(later))
        seen = got + later
        for p in (0, 1):                        # nothing skipped, nothing twice
            assert _offsets(seen, p) == list(range(20))

        c.seek(p0, 0)
        c.seek(p1, 0)
        _poll_until(c, 1, max_records=1)
        c.assign([p0])
        rest = [r for _ in range(10) for r in c.poll(100, max_records=50)]
        assert not _offsets(rest, 1), "records of an unassigned partition were returned"


def _fill_batches(broker, topic: str, partition: int, batches: int, per_batch: int) -> None:
    """``batches`` record batches of ``per_batch`` records in one partition."""
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
        for b in range(batches):
            values = [b"b%d-%d" % (b, i) for i in range(per_batch)]
            producer.send_batch(topic, pa.table({"value": values}), partition=partition).result(30)


@pytest.mark.brokers("tansu", reason="noida-db and the mock answer this Fetch before "
                     "max_wait_ms (checked: the test passes there without fetching ahead)")
def test_a_partition_at_the_log_end_does_not_hold_back_the_others(broker, unique_topic):
    """One Fetch in flight per broker: when it held only the partitions that were
    drained, the broker kept it for fetch_max_wait_ms (they are at the log end) while
    the other partition's next records waited behind it, once per batch. Buffered
    partitions are fetched ahead, so every Fetch has something to answer at once."""
    broker.create_topic(unique_topic, 2)
    _fill_batches(broker, unique_topic, 0, 1, 1)
    _fill_batches(broker, unique_topic, 1, 8, 5)
    settings = {**FAST, "fetch_max_wait_ms": 1500, "max_partition_fetch_bytes": 1}
    with Consumer(bootstrap_servers=broker.bootstrap, **settings) as c:
        c.assign([TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)])
        start = time.monotonic()
        got = _poll_until(c, 41, max_records=2, timeout=30)
        took = time.monotonic() - start
    assert _offsets(got, 0) == [0] and _offsets(got, 1) == list(range(40))
    assert took < 6, f"{took:.1f} s for 8 batches: Fetches waited out fetch_max_wait_ms"


def test_seek_drops_records_fetched_ahead(broker, unique_topic):
    """Records fetched ahead of the buffered ones (and the Fetch still out) are dropped
    by a seek like the buffered ones: after it, every offset once, in order."""
    broker.create_topic(unique_topic, 1)
    _fill_batches(broker, unique_topic, 0, 12, 2)
    tp = TopicPartition(unique_topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, max_partition_fetch_bytes=1,
                  **FAST) as c:
        c.assign([tp])
        assert _offsets(_poll_until(c, 3, max_records=1)) == [0, 1, 2]
        for _ in range(3):                     # fetches ahead arrive meanwhile
            assert c.poll(300, max_records=1)
        c.seek(tp, 1)
        got = _poll_until(c, 23, max_records=2)
        assert _offsets(got) == list(range(1, 24))
        c.seek(tp, 20)
        assert _offsets(_poll_until(c, 4)) == [20, 21, 22, 23]


@pytest.fixture
def mock_proxies(mock_cluster):
    """(proxies by node id): the mock cluster reached only through framed proxies."""
    from kproto.testing import proxy_cluster

    proxies = proxy_cluster(mock_cluster.brokers)
    try:
        yield {node: proxy for (node, _, _), proxy in zip(mock_cluster.brokers, proxies,
                                                           strict=True)}
    finally:
        for proxy in proxies:
            proxy.stop()


def test_fetches_follow_the_preferred_read_replica(mock_proxies, unique_topic):
    """KIP-392: a leader that answers "read from replica R" (and no records) is
    followed - the next Fetch of that partition goes to R - and an error from R
    sends the partition back to its leader (the mock serves no follower fetch)."""
    bootstrap = ",".join(p.address for p in mock_proxies.values())
    _fill(None, unique_topic, 1, 5, bootstrap=bootstrap)   # auto-created
    tp = TopicPartition(unique_topic, 0)
    with Consumer(bootstrap_servers=bootstrap, client_rack="rack-b", **FAST) as c:
        c.assign([tp])
        c.seek(tp, 0)
        c._cluster.refresh_metadata([unique_topic])
        leader = c._cluster.metadata.leader(unique_topic, 0)
        replica = next(node for node in mock_proxies if node != leader)
        redirected = {"leader": 0, "replica": 0}

        def prefer_replica(key, version, body):
            if key == FETCH and version >= 11 and redirected["leader"] < 3:
                redirected["leader"] += 1
                for topic in body["responses"]:
                    for p in topic["partitions"]:
                        p["preferred_read_replica"] = replica
                        p["records"] = None     # as Kafka: a redirect carries no records
            return body

        def count(key, version, body):
            if key == FETCH:
                redirected["replica"] += 1
            return None

        mock_proxies[leader].answer_hook = prefer_replica
        mock_proxies[replica].answer_hook = count
        got = _poll_until(c, 5)
        assert _offsets(got) == list(range(5))
        assert redirected["leader"] >= 1
        assert redirected["replica"] >= 1, "the preferred read replica was never asked"


def test_fetch_carries_the_leader_epoch(mock_proxies, unique_topic):
    """KIP-320: Fetch names the leader epoch our metadata knows, so a broker whose
    leadership differs refuses it (UNKNOWN_LEADER_EPOCH / FENCED_LEADER_EPOCH: a
    metadata refresh) instead of serving a log that may have been truncated. Here
    Metadata answers claim an epoch 5 newer than the mock's: no records until
    metadata tells the truth again, then all of them, once."""
    bootstrap = ",".join(p.address for p in mock_proxies.values())
    _fill(None, unique_topic, 1, 5, bootstrap=bootstrap)
    tp = TopicPartition(unique_topic, 0)
    refused = []

    def newer_epoch(key, version, body):
        if key == 3:                            # Metadata
            for topic in body["topics"]:
                for p in topic["partitions"]:
                    p["leader_epoch"] = max(p["leader_epoch"], 0) + 5
        elif key == FETCH:
            refused.extend(p["error_code"] for t in body["responses"]
                           for p in t["partitions"] if p["error_code"])
        return body

    for proxy in mock_proxies.values():
        proxy.answer_hook = newer_epoch
    with Consumer(bootstrap_servers=bootstrap, **FAST) as c:
        c.assign([tp])
        c.seek(tp, 0)
        assert c.poll(1500) == []
        assert refused and set(refused) <= {74, 75}, refused
        for proxy in mock_proxies.values():
            proxy.answer_hook = None
        c._cluster.mark_stale()
        assert _offsets(_poll_until(c, 5)) == list(range(5))


@pytest.mark.brokers(needs=("create_topics",))
def test_an_answer_about_a_deleted_topic_is_not_called_damage(broker, unique_topic):
    """A Fetch for a topic deleted since the metadata was read: Tansu answers it
    with topic id 0 and UNKNOWN_TOPIC_OR_PARTITION (Kafka: the id it was asked
    about and UNKNOWN_TOPIC_ID). As Java, an answer part that does not match the
    request is ignored (and metadata refreshed), not raised as damage."""
    gone, kept = unique_topic + "-gone", unique_topic + "-kept"
    _fill(broker, gone, 1, 3)
    _fill(broker, kept, 1, 3)
    with Consumer(bootstrap_servers=broker.bootstrap, **FAST) as c:
        c.assign([TopicPartition(gone, 0)])
        assert _offsets(_poll_until(c, 3)) == [0, 1, 2]
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.delete_topics([gone])
        for _ in range(5):                      # Fetches of the deleted topic's id
            assert c.poll(200) == []
        c.assign([TopicPartition(kept, 0)])
        assert _offsets(_poll_until(c, 3)) == [0, 1, 2]


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), -1, "100", None])
def test_a_poll_timeout_that_is_not_a_duration_is_refused(timeout) -> None:
    """(nan made a poll loop for ever, inf raised OverflowError from deep inside)"""
    from kproto.errors import ConfigError

    with Consumer(bootstrap_servers="127.0.0.1:9", auto_offset_reset="earliest") as c:
        start = time.monotonic()
        with pytest.raises(ConfigError, match="poll timeout_ms must be a number"):
            c.poll(timeout)
        with pytest.raises(ConfigError, match="poll timeout_ms"):
            c.poll_batch(timeout)
        assert time.monotonic() - start < 1
