"""Consumer groups against real brokers: join/sync/heartbeat, rebalance on leave, commits.

On the broker matrix (tests/brokers.py) where groups work: Tansu and noida-db
(librdkafka's mock advertises JoinGroup v6 but reads v5). Tansu forms a group
only after half the session timeout, so these tests use a short one (6 s, also
noida-db's minimum, Kafka's ``group.min.session.timeout.ms``). Three kproto
consumers split a 12-partition topic; one leaves (LeaveGroup on close,
committing its positions first) and the other two take over its partitions
from the committed offsets: every record is delivered exactly once across the
rebalance.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pyarrow as pa
import pytest

from kproto import Admin, Consumer, Producer, TopicPartition
from tests.aio_support import driver_fixture

consumer_driver = driver_fixture(globals())   # each test over each I/O driver

GROUP_SETTINGS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500,
                  "auto_offset_reset": "earliest", "auto_commit_interval_ms": 200,
                  "fetch_max_wait_ms": 200}


class Member(threading.Thread):
    """A consumer in a thread, recording what it received and what it was assigned."""

    def __init__(self, bootstrap: str, group: str, topic: str, **settings):
        super().__init__(daemon=True)
        self.consumer = Consumer(bootstrap_servers=bootstrap, group_id=group,
                                 **{**GROUP_SETTINGS, **settings})
        self.topic = topic
        self.seen: list[tuple[int, int]] = []
        self.events: list[tuple[str, set[TopicPartition]]] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None
        member = self

        class Listener:
            def on_partitions_revoked(self, revoked):
                member.events.append(("revoked", set(revoked)))

            def on_partitions_assigned(self, assigned):
                member.events.append(("assigned", set(assigned)))

        self.consumer.subscribe([topic], listener=Listener())

    def run(self):
        try:
            while not self.stop.is_set():
                batch = self.consumer.poll_batch(200)
                self.seen += zip(batch.column("partition").to_pylist(),
                                 batch.column("offset").to_pylist(), strict=True)
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            self.consumer.close()

    @property
    def assignment(self) -> set[TopicPartition]:
        assigned = [e for kind, e in self.events if kind == "assigned"]
        return assigned[-1] if assigned else set()


def _produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        for part in range(partitions):
            p.send_batch(topic, pa.table({"value": [f"{tag}-{part}-{i}".encode()
                                                    for i in range(per_partition)]}),
                         partition=part)
        p.flush()


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.mark.brokers(needs=("groups",))
def test_three_consumers_split_then_two_take_over(broker, unique_topic):
    group = f"g-{unique_topic}"
    broker.create_topic(unique_topic, 12)
    _produce(broker.bootstrap, unique_topic, 12, 50, "a")
    members = [Member(broker.bootstrap, group, unique_topic) for _ in range(3)]
    for m in members:
        m.start()
    try:
        _wait(lambda: sum(len(m.seen) for m in members) >= 600, 60, "the first 600 records")
        _wait(lambda: all(len(m.assignment) == 4 for m in members), 30, "a 4/4/4 split")
        owned = [m.assignment for m in members]
        assert set().union(*owned) == {TopicPartition(unique_topic, p) for p in range(12)}
        # let auto-commit run once, then one member leaves
        time.sleep(0.5)
        leaver = members.pop()
        leaver.stop.set()
        leaver.join(30)
        assert not leaver.is_alive() and leaver.error is None
        _wait(lambda: all(len(m.assignment) == 6 for m in members), 60, "a 6/6 split")
        _produce(broker.bootstrap, unique_topic, 12, 50, "b")
        _wait(lambda: sum(len(m.seen) for m in members + [leaver]) >= 1200, 60,
              "all 1200 records")
        time.sleep(0.5)       # anything delivered twice would show up by now
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(30)
    for m in members + [leaver]:
        assert m.error is None, m.error
    counts = Counter(rec for m in members + [leaver] for rec in m.seen)
    assert len(counts) == 1200
    assert max(counts.values()) == 1, [rec for rec, n in counts.items() if n > 1][:5]
    # the leaver's partitions went to the others
    taken = set().union(*(m.assignment for m in members))
    assert leaver.assignment <= taken
    # the group's committed offsets are the ends of the log after closing
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        offsets = admin.list_consumer_group_offsets(group)
    assert offsets == {TopicPartition(unique_topic, p): 100 for p in range(12)}


@pytest.mark.brokers(needs=("groups",))
@pytest.mark.parametrize("strategy", ["roundrobin", "sticky"])
def test_other_assignors_and_describe_group(broker, unique_topic, strategy):
    group = f"g-{strategy}-{unique_topic}"
    broker.create_topic(unique_topic, 5)
    members = [Member(broker.bootstrap, group, unique_topic,
                      partition_assignment_strategy=[strategy]) for _ in range(2)]
    for m in members:
        m.start()
    try:
        _wait(lambda: sorted(len(m.assignment) for m in members) == [2, 3], 60,
              "a 2/3 split")
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            [desc] = admin.describe_groups([group])
        # Tansu 0.6 leaves DescribeGroups' protocol_data (the chosen assignor) empty
        assert desc.protocol_type == "consumer" and desc.protocol in (strategy, "")
        assert desc.state == "Stable"
        # ... and its members' metadata and assignments (only their ids are there)
        assert sorted(md.member_id for md in desc.members) == sorted(
            m.consumer._group.member_id for m in members)
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(30)
    assert all(m.error is None for m in members)
