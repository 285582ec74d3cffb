"""What ``Producer.send_batch`` takes: a table it would misread is refused, never
written as something else (a table without a ``value`` column used to go out as
tombstones, its other columns dropped: on a compacted topic that deletes every key).

The refusals are client-side (before any metadata request); the tests that show
what reaches the log read it back from a Tansu broker.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from kproto import Admin, Consumer, Producer
from kproto.errors import EncodeError

pytestmark = pytest.mark.broker

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _create(bootstrap: str, topic: str) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics({topic: 1})


def _end(bootstrap: str, topic: str) -> int:
    with Consumer(bootstrap_servers=bootstrap) as c:
        return c.end_offsets([(topic, 0)])[(topic, 0)]


@pytest.mark.parametrize("columns", [{"Value": [b"a", b"b"]}, {"payload": [b"a", b"b"]}])
def test_a_table_without_a_value_column_writes_nothing(tansu, unique_topic, columns):
    _create(tansu.bootstrap, unique_topic)
    table = pa.table({"key": [b"k1", b"k2"], **columns})
    with Producer(bootstrap_servers=tansu.bootstrap) as p, \
            pytest.raises(EncodeError) as info:
        p.send_batch(unique_topic, table, partition=0)
    message = str(info.value)
    assert "no 'value' column" in message and str(table.schema.names) in message
    assert "tombstone" in message                 # how to write tombstones on purpose
    assert _end(tansu.bootstrap, unique_topic) == 0


def test_tombstones_are_an_explicit_null_value_column(tansu, unique_topic):
    _create(tansu.bootstrap, unique_topic)
    for value in (pa.nulls(2), pa.nulls(2, pa.binary())):     # null type, or null binary
        with Producer(bootstrap_servers=tansu.bootstrap) as p:
            p.send_batch(unique_topic, pa.table({"key": [b"k1", b"k2"], "value": value}),
                         partition=0).result(10)
    with Consumer(bootstrap_servers=tansu.bootstrap) as c:
        got = c.read_range(unique_topic, {0: (0, 4)})
    assert got.column("key").to_pylist() == [b"k1", b"k2"] * 2
    assert got.column("value").to_pylist() == [None] * 4


@pytest.mark.parametrize("columns, named", [
    ({"Key": [b"k"]}, "['Key']"),                          # a near miss is not 'key'
    ({"timestamps": [1], "payload": [b"x"]}, "['payload', 'timestamps']"),
    ({"topic": ["other"]}, "['topic']"),                   # send_batch writes to its topic
    ({"offset": [7]}, "['offset']"),
])
def test_columns_send_batch_does_not_write_are_refused(tansu, unique_topic, columns, named):
    _create(tansu.bootstrap, unique_topic)
    with Producer(bootstrap_servers=tansu.bootstrap) as p, \
            pytest.raises(EncodeError, match="not written to Kafka") as info:
        p.send_batch(unique_topic, pa.table({"value": [b"v"], **columns}), partition=0)
    assert named in str(info.value) and "key, value, timestamp, headers, partition" in \
        str(info.value)
    assert _end(tansu.bootstrap, unique_topic) == 0


@pytest.mark.parametrize("column, data, expected", [
    ("value", pa.array([1, 2]), "column 'value' must be binary or string, not int64"),
    ("key", pa.array([1, 2]), "column 'key' must be binary or string, not int64"),
    ("timestamp", pa.array(["2024-01-01", "x"]),
     "column 'timestamp' must be a timestamp or integer milliseconds, not string"),
    ("partition", pa.array(["0", "1"]), "column 'partition' must be integers, not string"),
    ("partition", pa.array([0, -3]), "column 'partition': row 1 has partition -3"),
    ("headers", pa.array([{"a": b"x"}, {"a": b"y"}]),
     "column 'headers' must be list<struct<key: string, value: binary>>, not struct"),
    ("headers", pa.array([[b"x"], []]),
     "column 'headers' must be list<struct<key: string, value: binary>>, not list"),
])
def test_columns_of_the_wrong_type_name_the_column(tansu, unique_topic, column, data,
                                                   expected):
    columns = {"value": pa.array([b"a", b"b"]), column: data}
    with Producer(bootstrap_servers=tansu.bootstrap) as p, \
            pytest.raises(EncodeError) as info:
        p.send_batch(unique_topic, pa.table(columns))
    assert expected in str(info.value)


def test_a_negative_partition_argument_is_refused(tansu, unique_topic):
    """-1 used to mean 'no partition given': the rows went by key instead."""
    with Producer(bootstrap_servers=tansu.bootstrap) as p, \
            pytest.raises(EncodeError, match="partition -1"):
        p.send_batch(unique_topic, pa.table({"value": [b"v"]}), partition=-1)


def test_a_column_twice_is_refused(tansu, unique_topic):
    table = pa.Table.from_arrays([pa.array([b"a"]), pa.array([b"b"])], names=["value", "value"])
    with Producer(bootstrap_servers=tansu.bootstrap) as p, \
            pytest.raises(EncodeError, match=r"columns \['value'\] appear more than once"):
        p.send_batch(unique_topic, table, partition=0)


def test_the_spark_sink_refuses_the_same_tables():
    """The sink plans with send_batch's check (and its own 'topic' column): a DataFrame
    without 'value', or with a column Kafka does not hold, fails before any task runs."""
    types = pytest.importorskip("pyspark.sql.types")
    from kproto.spark import KprotoWriter

    def schema(*names):
        return types.StructType([types.StructField(n, types.BinaryType()) for n in names])

    options = {"kafka.bootstrap.servers": "127.0.0.1:1"}      # (never connected to)
    with pytest.raises(EncodeError, match="no 'value' column"):
        KprotoWriter({**options, "topic": "t"}, schema("key", "Value"))
    with pytest.raises(EncodeError, match=r"\['payload'\] are not written"):
        KprotoWriter({**options, "topic": "t"}, schema("value", "payload"))
    KprotoWriter(options, schema("topic", "key", "value"))   # a topic column is the sink's
