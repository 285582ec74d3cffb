"""The "kproto" Spark source's options for operators (issue 18, part 5):
``maxBytesPerTrigger`` (admission control by bytes) and ``commitOffsetsToGroup``
(each micro-batch's offsets in a consumer group, for lag in Kafka tooling).

They run the stream reader's driver-side methods against the test brokers, as
Spark calls them (latestOffset from the last batch's end, then commit); the
end-to-end run through Spark is in test_spark_exactly_once.py
(``test_stream_exactly_once_replay_and_operator_options``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from kproto import Admin, Producer
from kproto.errors import ConfigError

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import (  # noqa: E402
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxRows,
)

import kproto.spark as ks  # noqa: E402
from kproto.spark.limits import byte_limit  # noqa: E402

pytestmark = pytest.mark.broker

SIZES = {0: 100, 1: 1000}       # value bytes of each partition's records


def _fill(broker: Any, topic: str, n: int = 400) -> None:
    broker.create_topic(topic, 2)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for part, size in SIZES.items():
            p.send_batch(topic, pa.table({"value": [b"%d" % part * size] * n}),
                         partition=part).result(30)


def _stream(broker: Any, topic: str, **options: str) -> ks.KprotoStreamReader:
    return ks.KprotoStreamReader({"kafka.bootstrap.servers": broker.bootstrap,
                                  "subscribe": topic, "startingOffsets": "earliest",
                                  **options}, None)


def _batches(reader: ks.KprotoStreamReader, limit: Any) -> list[dict[int, int]]:
    """Spark's loop: latestOffset from the last end until nothing is new; the
    records each micro-batch reads, per partition."""
    start = reader.initialOffset()
    out = []
    while True:
        end = reader.latestOffset(start, limit)
        if end == start:
            return out
        (topic, a), = start.items()
        out.append({int(p): end[topic][p] - a[p] for p in a})
        reader.commit(end)
        start = end


def test_max_bytes_per_trigger_caps_each_micro_batch(broker: Any, unique_topic: str) -> None:
    """400 records of 100 bytes in partition 0, 400 of 1,000 in partition 1; 100,000
    bytes a micro-batch: every batch holds at most that many bytes of values and
    moves both partitions by the same fraction of their backlogs; together the
    batches read everything once. ReadAllAvailable (Trigger.Once) has no cap."""
    _fill(broker, unique_topic)
    reader = _stream(broker, unique_topic, maxBytesPerTrigger="100000")
    try:
        assert reader.getDefaultReadLimit() == ReadMaxBytes(100000)
        batches = _batches(reader, reader.getDefaultReadLimit())
        sizes = [sum(n * SIZES[p] for p, n in b.items()) for b in batches]
        assert all(s <= 100000 for s in sizes) and all(s >= 90000 for s in sizes[:-1]), sizes
        assert all(b[0] == b[1] for b in batches[:-1]), batches      # the same fraction
        assert [sum(b[p] for b in batches) for p in (0, 1)] == [400, 400]
        assert reader.latestOffset(reader.initialOffset(), ReadAllAvailable()) == \
            {unique_topic: {"0": 400, "1": 400}}
    finally:
        reader.stop()


def test_max_bytes_with_max_offsets_and_records_bigger_than_the_budget(
        broker: Any, unique_topic: str) -> None:
    """With maxOffsetsPerTrigger too, Spark passes ReadMaxRows and both caps hold.
    A budget smaller than one record still moves a record a batch (the partition
    with the most waiting), as Spark's file source admits one file too big."""
    _fill(broker, unique_topic, 20)
    both = _stream(broker, unique_topic, maxOffsetsPerTrigger="10", maxBytesPerTrigger="5500")
    tiny = _stream(broker, unique_topic, maxBytesPerTrigger="50")
    try:
        assert both.getDefaultReadLimit() == ReadMaxRows(10)
        batches = _batches(both, both.getDefaultReadLimit())
        assert all(sum(b.values()) <= 10 for b in batches)
        assert all(sum(n * SIZES[p] for p, n in b.items()) <= 5500 for b in batches)
        assert [sum(b[p] for b in batches) for p in (0, 1)] == [20, 20]
        steps = _batches(tiny, tiny.getDefaultReadLimit())
        assert len(steps) == 40 and all(sorted(b.values()) == [0, 1] for b in steps)
    finally:
        both.stop()
        tiny.stop()


def test_byte_limit_shares() -> None:
    """The arithmetic: no cap when it fits; the same fraction of every backlog; a
    partition without an estimate takes the others' mean; none at all, no cap."""
    begin = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    end = {("t", 0): 1000, ("t", 1): 300, ("t", 2): 5}
    per = {("t", 0): 10.0, ("t", 1): 10.0, ("t", 2): None}
    assert byte_limit(begin, end, per, 12000) == end
    assert byte_limit(begin, end, per, 6000) == {("t", 0): 500, ("t", 1): 200, ("t", 2): 5}
    assert byte_limit(begin, end, {("t", 0): 10.0}, 6000) == \
        {("t", 0): 500, ("t", 1): 200, ("t", 2): 5}
    assert byte_limit(begin, end, {}, 10) == end


@pytest.mark.brokers("tansu", "noida", reason="the mock's OffsetFetch answer cannot be parsed "
                     "(docs/brokers.md)")
def test_commit_offsets_to_group(broker: Any, unique_topic: str) -> None:
    """commitOffsetsToGroup: after every micro-batch the group holds the offsets the
    query has read (the next to read), so Kafka's tooling shows its lag; the
    query itself never reads them (a restart starts from its checkpoint)."""
    _fill(broker, unique_topic, 30)
    group = f"{unique_topic}-g"
    reader = _stream(broker, unique_topic, maxOffsetsPerTrigger="20",
                     commitOffsetsToGroup=group)
    seen = []
    try:
        start = reader.initialOffset()
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            while True:
                end = reader.latestOffset(start, reader.getDefaultReadLimit())
                # what latestOffset was asked from is done: the group has it now
                seen.append(admin.list_consumer_group_offsets(group))
                if end == start:
                    break
                start = end
    finally:
        reader.stop()
    tps = [(unique_topic, 0), (unique_topic, 1)]
    assert [[o[tp] for tp in tps] for o in seen] == [[0, 0], [10, 10], [20, 20], [30, 30]]


@pytest.mark.parametrize("options, message", [
    ({"maxBytesPerTrigger": "0"}, "maxBytesPerTrigger must be positive"),
    ({"maxBytesPerTrigger": "64m"}, "maxBytesPerTrigger must be positive"),
    ({"commitOffsetsToGroup": " "}, "must name a group"),
])
def test_operator_options_are_checked(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ks.KprotoStreamReader({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
                               **options}, None)
