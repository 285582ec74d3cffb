"""Reading never creates topics; read_range takes the bounds Spark's options take.

Java's consumer has ``allow.auto.create.topics`` (default true): kproto's
Consumer has ``allow_auto_create_topics`` with the same default, while the
bounded readers (``read_range``, ``iter_range``), the CLI and the Spark source
never create a topic: an unknown topic is a clear UnknownTopicOrPartitionError
(the CLI: one line, exit 1) and stays unknown.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pyarrow as pa
import pytest

from kproto import Consumer, Producer, TopicPartition
from kproto.errors import UnknownTopicOrPartitionError

pytestmark = pytest.mark.broker

FAST = {"auto_offset_reset": "earliest", "fetch_max_wait_ms": 100}


@pytest.fixture
def bootstrap(broker) -> str:
    """Every broker of the matrix: each creates a topic on a Metadata request that
    allows it, and none on one that does not (the mock included)."""
    return broker.bootstrap


def _exists(bootstrap: str, topic: str) -> bool:
    from kproto.net.cluster import Cluster

    cluster = Cluster({"bootstrap_servers": bootstrap.split(",")})
    try:
        meta = cluster.refresh_metadata(all_topics=True)
    finally:
        cluster.close()
    return topic in meta.topics


def test_cli_consume_of_an_unknown_topic_is_one_line_exit_1(bootstrap, unique_topic):
    out = subprocess.run([sys.executable, "-m", "kproto", "-b", bootstrap, "consume",
                          unique_topic], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and "does not exist" in out.stderr
    assert unique_topic in out.stderr
    assert not _exists(bootstrap, unique_topic)


def test_bounded_reads_of_an_unknown_topic_raise_and_create_nothing(bootstrap, unique_topic):
    with Consumer(bootstrap_servers=bootstrap) as c:
        started = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError, match="does not exist"):
            c.read_range(unique_topic, {0: (0, 10)})
        assert time.monotonic() - started < 10
        with pytest.raises(UnknownTopicOrPartitionError):
            list(c.iter_range(unique_topic))
        with pytest.raises(UnknownTopicOrPartitionError):
            c.read_range(unique_topic)
        c.poll(200)             # the consumer's own refreshes must not create it either
    assert not _exists(bootstrap, unique_topic)


def test_spark_planning_of_an_unknown_topic_creates_nothing(bootstrap, unique_topic):
    """The Spark source's driver-side planning (no JVM needed)."""
    from kproto.spark import KprotoDataSource

    source = KprotoDataSource({"kafka.bootstrap.servers": bootstrap, "subscribe": unique_topic})
    with pytest.raises(Exception, match=unique_topic):   # Spark words it its own way
        source.reader(source.schema()).partitions()
    assert not _exists(bootstrap, unique_topic)


def test_the_consumer_creates_topics_only_if_allowed(bootstrap, unique_topic):
    """Java's default (allow.auto.create.topics=true) and the setting that turns it off."""
    off, on = unique_topic + "-off", unique_topic + "-on"
    with Consumer(bootstrap_servers=bootstrap, allow_auto_create_topics=False) as c:
        c.assign([(off, 0)])
        c.poll(300)
    assert not _exists(bootstrap, off)
    with Consumer(bootstrap_servers=bootstrap) as c:
        c.assign([(on, 0)])
        c.poll(300)
    assert _exists(bootstrap, on)


def test_read_range_bounds_as_spark_takes_them(broker, bootstrap, unique_topic):
    broker.create_topic(unique_topic, 2)
    with Producer(bootstrap_servers=bootstrap) as producer:
        for p in (0, 1):
            producer.send_batch(unique_topic, pa.table({"value": [b"%d" % i for i in range(5)]}),
                                partition=p).result(30)
    with Consumer(bootstrap_servers=bootstrap, **FAST) as c:
        def offsets(table: pa.Table, partition: int) -> list[int]:
            return [o for p, o in zip(table.column("partition").to_pylist(),
                                      table.column("offset").to_pylist(), strict=True)
                    if p == partition]

        every = c.read_range(unique_topic)                       # every partition, whole
        assert offsets(every, 0) == offsets(every, 1) == [0, 1, 2, 3, 4]
        part = c.read_range(unique_topic, {0: ("earliest", None), 1: (3, "latest")})
        assert offsets(part, 0) == [0, 1, 2, 3, 4] and offsets(part, 1) == [3, 4]
        import numpy as np

        assert offsets(c.read_range(unique_topic, {1: (np.int64(1), np.int64(2))}), 1) == [1]
        steps = pa.Table.from_batches(list(c.iter_range(unique_topic, {0: ("earliest", 2)})))
        assert offsets(steps, 0) == [0, 1]
        for bad in [(None, 3), (-1, 3), ("first", 3), (1.5, 3), (0, "end"), (True, 3)]:
            with pytest.raises(ValueError, match=rf"{unique_topic}\[0\]: bad"):
                c.read_range(unique_topic, {0: bad})
    assert TopicPartition(unique_topic, 0)
