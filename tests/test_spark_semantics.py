"""The "kproto" Spark source's planning, held to Spark's Kafka source: option
validation (``KafkaSourceProvider``) and data loss detection in streaming
(``KafkaMicroBatchStream`` / ``KafkaOffsetReader``).

These run the driver-side planning code against real brokers without starting
Spark (the end-to-end Spark runs are in test_spark.py): the broker matrix
(tests/brokers.py); a test that deletes topics needs CreateTopics/DeleteTopics
(not the mock). A log start above 0 is injected by a proxy in front of a Tansu
broker of the module's (``trimmed``).
"""

from __future__ import annotations

import json
import logging

import pyarrow as pa
import pytest

from kproto import Admin, Producer
from kproto.errors import ConfigError, OffsetOutOfRangeError
from kproto.testing import FaultProxy, TansuBroker, free_port

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable  # noqa: E402

import kproto.spark as ks  # noqa: E402

pytestmark = pytest.mark.broker


def _produce(bootstrap: str, topic: str, counts: dict[int, int], first: int = 0) -> None:
    """``counts[p]`` records into partition p, values numbered from ``first``."""
    with Producer(bootstrap_servers=bootstrap) as p:
        for part, n in counts.items():
            p.send_batch(topic, pa.table({"value": [b"%d" % i for i in range(first, first + n)]}),
                         partition=part).result(30)


def _topic(broker, topic: str, partitions: int, counts: dict[int, int]) -> None:
    broker.create_topic(topic, partitions)
    _produce(broker.bootstrap, topic, counts)


def _recreate(broker, topic: str, partitions: int, counts: dict[int, int]) -> None:
    """Delete and create the topic again: the real-world way a log end moves back."""
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.delete_topics([topic])
    _topic(broker, topic, partitions, counts)


def _stream(bootstrap: str, topic: str, **options: str) -> ks.KprotoStreamReader:
    opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
            "fetchOffset.retryIntervalMs": "10", **options}
    return ks.KprotoStreamReader(opts, None)


def _batch(bootstrap: str, topic: str, **options: str) -> list[ks.KafkaRange]:
    opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **options}
    return ks.KprotoBatchReader(opts, None).partitions()


def _js(topic: str, offsets: dict[int, int]) -> str:
    """The JSON of an offsets option: ``{"topic": {"0": 23}}``."""
    return json.dumps({topic: {str(p): o for p, o in offsets.items()}})


def _ranges(parts: list[ks.KafkaRange]) -> set[tuple[int, int, int]]:
    return {(r.partition, r.start, r.end) for r in parts}


# ------------------------------------------------------------ streaming: data loss


@pytest.mark.brokers(needs=("create_topics",))
def test_stream_log_end_below_checkpoint_is_data_loss(broker, unique_topic, caplog):
    """The topic is recreated under a running query: its log end (10) is below the
    checkpointed offset (50). Spark: "Partition t-0 offset was changed from 50 to
    10" fails the query; with failOnDataLoss=false a warning, and the query goes
    on from 10. Before: the end was raised to 50, the 10 new records and all
    up to offset 50 were skipped in silence."""
    t = unique_topic
    _topic(broker, t, 1, {0: 50})
    reader = _stream(broker.bootstrap, t, startingOffsets="earliest")
    start = reader.initialOffset()
    checkpoint = reader.latestOffset(start, ReadAllAvailable())
    assert checkpoint == {t: {"0": 50}}
    assert _ranges(reader.partitions(start, checkpoint)) == {(0, 0, 50)}
    reader.stop()

    _recreate(broker, t, 1, {0: 10})
    strict = _stream(broker.bootstrap, t)
    end = strict.latestOffset(checkpoint, ReadAllAvailable())
    assert end == {t: {"0": 10}}                  # the end as it is, not raised to 50
    with pytest.raises(ks.DataLossError, match=rf"Partition {t}-0 offset was changed from 50 "
                       r"to 10\. .*failOnDataLoss to false"):
        strict.partitions(checkpoint, end)
    strict.stop()

    lenient = _stream(broker.bootstrap, t, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="kproto.spark"):
        end = lenient.latestOffset(checkpoint, ReadAllAvailable())
        assert lenient.partitions(checkpoint, end) == []
    assert "offset was changed from 50 to 10" in caplog.text
    assert '"failOnDataLoss" to "true"' in caplog.text
    _produce(broker.bootstrap, t, {0: 5}, first=10)
    later = lenient.latestOffset(end, ReadAllAvailable())
    assert _ranges(lenient.partitions(end, later)) == {(0, 10, 15)}   # on from the new end
    lenient.stop()


@pytest.mark.brokers(needs=("create_topics",))
def test_stream_deleted_partitions_are_data_loss(broker, unique_topic, caplog):
    """Partitions in the checkpoint that are gone: Spark's "Partitions [..] have
    been deleted"; with failOnDataLoss=false the others are read on."""
    t = unique_topic
    _topic(broker, t, 2, {0: 5, 1: 5})
    checkpoint = {t: {"0": 0, "1": 5}}
    _recreate(broker, t, 1, {0: 8})
    strict = _stream(broker.bootstrap, t)
    end = strict.latestOffset(checkpoint, ReadAllAvailable())
    assert end == {t: {"0": 8}}
    with pytest.raises(ks.DataLossError, match=rf"Partitions \[{t}-1\] have been deleted\."):
        strict.partitions(checkpoint, end)
    strict.stop()
    lenient = _stream(broker.bootstrap, t, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="kproto.spark"):
        assert _ranges(lenient.partitions(checkpoint, end)) == {(0, 0, 8)}
    assert f"Partitions [{t}-1] have been deleted" in caplog.text
    lenient.stop()


@pytest.mark.brokers(needs=("create_topics",))
def test_stream_new_partitions_read_from_earliest(broker, unique_topic):
    """A partition the checkpoint does not know (added since) is read from its
    earliest offset, with no data loss (it starts at 0)."""
    t = unique_topic
    _topic(broker, t, 2, {0: 4, 1: 6})
    reader = _stream(broker.bootstrap, t, maxOffsetsPerTrigger="100")
    checkpoint = {t: {"0": 1}}
    end = reader.latestOffset(checkpoint, ks.ReadMaxRows(100))
    assert end == {t: {"0": 4, "1": 6}}
    assert _ranges(reader.partitions(checkpoint, end)) == {(0, 1, 4), (1, 0, 6)}
    reader.stop()


@pytest.mark.brokers(needs=("create_topics",))
def test_stream_new_partition_gone_again_is_data_loss(broker, unique_topic):
    """A new partition in the batch's end that is gone when the batch is planned:
    Spark's "Cannot find initial offsets for partitions [..]"."""
    t = unique_topic
    _topic(broker, t, 2, {0: 3, 1: 3})
    reader = _stream(broker.bootstrap, t)
    checkpoint = {t: {"0": 0}}
    end = reader.latestOffset(checkpoint, ReadAllAvailable())
    assert end == {t: {"0": 3, "1": 3}}
    _recreate(broker, t, 1, {0: 3})
    with pytest.raises(ks.DataLossError, match=rf"Cannot find initial offsets for partitions "
                       rf"\[{t}-1\]"):
        reader.partitions(checkpoint, end)
    reader.stop()


@pytest.fixture(scope="module")
def trimmed():
    """A Tansu broker behind a proxy that answers as if retention had deleted
    offsets 0..6 of partition 1 of every topic (Tansu has no DeleteRecords): its
    earliest offset is 7 and a Fetch below 7 is OFFSET_OUT_OF_RANGE."""
    port = free_port()
    broker = TansuBroker(advertised_port=port).start()
    proxy = FaultProxy(broker.port, port=port, framed=True).start()

    def trim(key, version, body):
        if key == 2:                             # ListOffsets: earliest 0 -> 7
            for topic in body["topics"]:
                for p in topic["partitions"]:
                    if p["partition_index"] == 1 and p.get("offset") == 0:
                        p["offset"] = 7
        elif key == 1:                           # Fetch from below 7: out of range
            for topic in body["responses"]:
                for p in topic["partitions"]:
                    data = bytes(p["records"] or b"")
                    if p["partition_index"] == 1 and data and \
                            int.from_bytes(data[:8], "big") < 7:
                        p.update(error_code=1, log_start_offset=7, records=None)
        return body

    proxy.answer_hook = trim
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proxy.stop()
        broker.stop()


def test_stream_added_partition_not_starting_at_zero_is_data_loss(trimmed, unique_topic,
                                                                   caplog):
    """Spark's "Added partition t-1 starts from 7 instead of 0": records of a new
    partition went before the query saw it."""
    t = unique_topic
    with Admin(bootstrap_servers=trimmed) as admin:
        admin.create_topics({t: 2})
    with Producer(bootstrap_servers=trimmed) as p:
        for i in range(12):                       # one record per batch
            p.send_batch(t, pa.table({"value": [b"%d" % i]}), partition=1).result(30)
    checkpoint = {t: {"0": 0}}
    strict = _stream(trimmed, t)
    end = strict.latestOffset(checkpoint, ReadAllAvailable())
    with pytest.raises(ks.DataLossError, match=rf"Added partition {t}-1 starts from 7 "
                       "instead of 0"):
        strict.partitions(checkpoint, end)
    strict.stop()
    lenient = _stream(trimmed, t, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="kproto.spark"):
        assert _ranges(lenient.partitions(checkpoint, end)) == {(1, 7, 12)}
    assert "starts from 7 instead of 0" in caplog.text
    lenient.stop()


def test_task_below_log_start_is_data_loss(trimmed, unique_topic):
    """The log start moved past a planned start (retention between planning and
    reading): the task fails with failOnDataLoss=true (Spark's executor-side
    check), and reads from the new log start otherwise."""
    t = unique_topic
    with Admin(bootstrap_servers=trimmed) as admin:
        admin.create_topics({t: 2})
    with Producer(bootstrap_servers=trimmed) as p:
        for i in range(12):
            p.send_batch(t, pa.table({"value": [b"%d" % i]}), partition=1).result(30)
    settings = tuple(sorted(ks.client_settings({"kafka.bootstrap.servers": trimmed}).items()))
    strict = ks.KafkaRange(t, 1, 3, 12, settings, False, True)
    with pytest.raises(OffsetOutOfRangeError, match="gone"):
        list(ks.read_partition(strict))
    lenient = ks.KafkaRange(t, 1, 3, 12, settings, False, False)
    got = pa.Table.from_batches(list(ks.read_partition(lenient)))
    assert got.column("offset").to_pylist() == list(range(7, 12))


# ------------------------------------------------------------ option validation


BATCH_ERRORS = [
    ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries"),
    ({"startingOffsets": '{"t": {"0": -1}}'}, "startingOffsets for t-0 can't be latest"),
    ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries"),
    ({"endingOffsets": '{"t": {"0": -2}}'}, "ending offset for t-0 can't be earliest"),
    ({"startingOffsets": '{"t": {"0": -3}}'}, "-3 for t-0 is not an offset"),
    ({"startingOffsets": '{"t": {"0": 5, "1": 0}}', "endingOffsets": '{"t": {"0": 9}}'},
     "should have the same topic-partitions"),
    ({"startingOffsets": '{"t": {"0": 9}}', "endingOffsets": '{"t": {"0": 5}}'},
     "start offset 9 is greater than the end offset 5 for topic t partition 0"),
    ({"startingOffsetsByTimestamp": '{"t": {"0": 9}}',
      "endingOffsetsByTimestamp": '{"t": {"0": 5}}'},
     "start timestamp 9 is greater than the end timestamp 5"),
    ({"startingOffsetsByTimestamp": '{"t": {"0": -1}}'}, "not milliseconds since the epoch"),
    ({"startingTimestamp": "soon"}, "expected a single long value"),
    ({"endingTimestamp": "-1"}, "is not a time"),
    ({"startingOffsets": "[1]"}, "must be 'earliest', 'latest' or JSON"),
    ({"minPartitions": "0"}, "minPartitions must be positive"),
    ({"maxRecordsPerPartition": "-4"}, "maxRecordsPerPartition must be positive"),
    ({"startingOffsetsByTimestampStrategy": "skip"}, "must be 'error' or 'latest'"),
]


@pytest.mark.parametrize("options, message", BATCH_ERRORS)
def test_batch_options_refused_as_spark_does(options, message):
    opts = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", **options}
    with pytest.raises(ConfigError, match=message):
        ks.KprotoBatchReader(opts, None)


@pytest.mark.parametrize("options, message", [
    ({"endingOffsets": "latest"}, "ending offset not valid in streaming queries"),
    ({"endingOffsetsByTimestamp": '{"t": {"0": 1}}'}, "ending timestamp not valid"),
    ({"endingTimestamp": "1"}, "ending timestamp not valid in streaming queries"),
    ({"startingOffsets": '{"t": {"0": -7}}'}, "-7 for t-0 is not an offset"),
])
def test_stream_options_refused_as_spark_does(options, message):
    opts = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", **options}
    with pytest.raises(ConfigError, match=message):
        ks.KprotoStreamReader(opts, None)


def test_options_spark_accepts():
    """What Spark takes stays accepted: latest/-1 in streams, -2 starts and -1 ends."""
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
    start, end = ks.offset_options({**base, "startingOffsets": '{"t": {"0": -2, "1": 4}}',
                                    "endingOffsets": '{"t": {"0": -1, "1": 4}}'}, False)
    assert (start.kind, end.kind if end else None) == ("offsets", "offsets")
    start, end = ks.offset_options({**base, "startingOffsets": '{"t": {"0": -1}}'}, True)
    assert start.table == {("t", 0): -1} and end is None
    start, _ = ks.offset_options({**base, "startingTimestamp": "5",
                                  "startingOffsets": "latest"}, True)
    assert (start.kind, start.ms) == ("timestamp", 5)   # Spark's order of preference


@pytest.mark.parametrize("option", ["startingOffsets", "endingOffsets"])
def test_json_leaving_out_a_partition_is_refused(broker, unique_topic, option):
    """Spark requires every partition read in a JSON of offsets; before, a left
    out partition was read from earliest (start) or latest (end) in silence."""
    t = unique_topic
    _topic(broker, t, 3, {0: 5, 1: 5, 2: 5})
    given = {0: 1, 2: -2} if option == "startingOffsets" else {0: 3, 2: -1}
    with pytest.raises(ConfigError, match=rf"If {option} contains specific offsets, you must "
                       rf"specify all TopicPartitions \(missing \[{t}-1\]\)"):
        _batch(broker.bootstrap, t, **{option: _js(t, given)})
    full = {**given, 1: 2}
    assert len(_batch(broker.bootstrap, t, **{option: _js(t, full)})) == 3
    with pytest.raises(ConfigError, match=rf"not read by this query \[{t}-9\]"):
        _batch(broker.bootstrap, t, **{option: _js(t, {**full, 9: 0})})


def test_stream_json_leaving_out_a_partition_is_refused(broker, unique_topic):
    t = unique_topic
    _topic(broker, t, 2, {0: 5, 1: 5})
    reader = _stream(broker.bootstrap, t, startingOffsets=_js(t, {0: 2}))
    with pytest.raises(ConfigError, match=rf"missing \[{t}-1\]"):
        reader.initialOffset()
    reader.stop()
    reader = _stream(broker.bootstrap, t, startingOffsetsByTimestamp=_js(t, {1: 0}))
    with pytest.raises(ConfigError, match=rf"startingOffsetsByTimestamp .*missing \[{t}-0\]"):
        reader.initialOffset()
    reader.stop()


def test_starting_time_after_every_record(broker, unique_topic):
    """Spark's default startingOffsetsByTimestampStrategy "error" refuses a start
    time no record reaches; "latest" starts at the end. An ending time no record
    reaches ends at the end."""
    t = unique_topic
    _topic(broker, t, 1, {0: 5})
    future = str(2**62)
    with pytest.raises(ConfigError, match=rf"No offset matched from request of "
                       rf"topic-partition {t}-0 and timestamp {future}"):
        _batch(broker.bootstrap, t, startingTimestamp=future)
    assert _batch(broker.bootstrap, t, startingTimestamp=future,
                  startingOffsetsByTimestampStrategy="latest") == []
    assert _ranges(_batch(broker.bootstrap, t, endingTimestamp=future)) == {(0, 0, 5)}
