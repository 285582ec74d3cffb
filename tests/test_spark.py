"""The "kproto" Spark data source (batch reads) against a real local Spark and Tansu.

One SparkSession (local[2], the machine's Java) for the module: starting one
costs ~10 s. The Python workers run this interpreter (PYSPARK_PYTHON), so they
import the kproto under test.

Spark jobs are slow: the cheapest end-to-end write and read
(``test_write_then_read_back_identical_rows``) runs on every broker of the
matrix (tests/brokers.py), the rest on Tansu only.
"""

from __future__ import annotations

import zlib

import pyarrow as pa
import pytest

from kproto import Admin, Consumer, Producer

from .spark_support import local_spark

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def spark():
    yield from local_spark("kproto-tests")


@pytest.fixture(scope="module")
def filled(tansu):
    """A 4-partition topic with 20,000 keyed records (with headers on some)."""
    topic = "spark-source-filled"
    n = 20000
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    table = pa.table({
        "key": [b"key-%d" % i for i in range(n)],
        "value": [b"value-%d-" % i + b"x" * (i % 50) for i in range(n)],
        "timestamp": pa.array([1_700_000_000_000 + i for i in range(n)], pa.timestamp("ms")),
        "headers": pa.array([[{"key": "i", "value": b"%d" % i}] if i % 3 == 0 else []
                             for i in range(n)], header_type),
    })
    with Admin(bootstrap_servers=tansu.bootstrap) as admin:
        admin.create_topics({topic: 4}, exist_ok=True)
    with Producer(bootstrap_servers=tansu.bootstrap, compression_type="lz4") as p:
        p.send_batch(topic, table).result(30)
    with Consumer(bootstrap_servers=tansu.bootstrap) as c:
        ends = c.end_offsets([(topic, p) for p in range(4)])
        expected = c.read_range(topic, {tp.partition: (0, e) for tp, e in ends.items()})
    return topic, expected, {tp.partition: e for tp, e in ends.items()}


def _reader(spark, tansu, **options):
    r = spark.read.format("kproto").option("kafka.bootstrap.servers", tansu.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _checksum(rows) -> int:
    return sum(zlib.crc32(bytes(r[0]) + bytes(r[1]) + str(r[2]).encode()) for r in rows)


def test_batch_read_equals_what_was_produced(spark, tansu, filled):
    topic, expected, ends = filled
    df = _reader(spark, tansu, subscribe=topic)
    assert df.count() == expected.num_rows == sum(ends.values())
    got = df.select("key", "value", "offset").collect()
    want = zip(expected.column("key").to_pylist(), expected.column("value").to_pylist(),
               expected.column("offset").to_pylist(), strict=True)
    assert _checksum(got) == _checksum(want)
    stats = {r["partition"]: (r["lo"], r["hi"], r["n"]) for r in df.groupBy("partition")
             .agg({"offset": "min"}).withColumnRenamed("min(offset)", "lo")
             .join(df.groupBy("partition").agg({"offset": "max"})
                   .withColumnRenamed("max(offset)", "hi"), "partition")
             .join(df.groupBy("partition").count().withColumnRenamed("count", "n"),
                   "partition").collect()}
    assert stats == {p: (0, e - 1, e) for p, e in ends.items()}
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>")


def test_offsets_json_headers_and_min_partitions(spark, tansu, filled):
    topic, expected, ends = filled
    df = _reader(spark, tansu, subscribe=topic, includeHeaders="true", minPartitions="10",
                 startingOffsets=f'{{"{topic}": {{"0": 100, "1": -2, "2": -2, "3": -2}}}}',
                 endingOffsets=f'{{"{topic}": {{"0": 200, "1": 50, "2": -1, "3": -1}}}}')
    assert df.rdd.getNumPartitions() >= 10
    rows = df.collect()
    by_part: dict[int, list[int]] = {}
    for r in rows:
        by_part.setdefault(r["partition"], []).append(r["offset"])
    assert sorted(by_part[0]) == list(range(100, 200))
    assert sorted(by_part[1]) == list(range(0, 50))
    assert sorted(by_part[2]) == list(range(0, ends[2]))
    assert len(by_part[3]) == ends[3]
    ts = {r["value"]: r["timestamp"] for r in rows}
    first = expected.filter(pa.compute.equal(expected.column("partition"), 0)).slice(100, 1)
    value = first.column("value")[0].as_py()
    assert int(ts[value].timestamp() * 1000) == int(
        first.column("timestamp")[0].value)
    with_headers = [r for r in rows if r["headers"]]
    assert with_headers and all(h["key"] == "i" for r in with_headers for h in r["headers"])
    i = int(with_headers[0]["headers"][0]["value"])
    assert with_headers[0]["key"] == b"key-%d" % i


def test_max_records_per_partition_and_assign(spark, tansu, filled):
    topic, _, ends = filled
    df = _reader(spark, tansu, assign=f'{{"{topic}": [1, 3]}}', maxRecordsPerPartition="1000")
    assert df.rdd.getNumPartitions() == -(-ends[1] // 1000) + -(-ends[3] // 1000)
    assert df.count() == ends[1] + ends[3]


def test_task_streams_its_range_in_steps(mock_cluster, unique_topic, monkeypatch):
    """A task's range is read in steps and yielded as it goes, in offset order (on
    the mock cluster, which honours Fetch byte limits; Tansu answers with all)."""
    import kproto.consumer.reader
    import kproto.spark
    from kproto.config import resolve

    values = [b"value-%d-" % i + b"x" * (i % 50) for i in range(20000)]
    with Producer(bootstrap_servers=mock_cluster.bootstrap, batch_size=16384) as p:
        for v in values:                      # ~16 KB record batches
            p.send(unique_topic, v, partition=1)
        p.flush(30)
    monkeypatch.setattr(kproto.spark.source, "STEP_BYTES", 64 << 10)
    settings = tuple(resolve("consumer", bootstrap_servers=mock_cluster.bootstrap,
                             max_partition_fetch_bytes=32 << 10).items())
    part = kproto.spark.KafkaRange(unique_topic, 1, 3, 20000, settings, True, True)
    decoded = []                              # Fetch answers decoded, counted
    real_decode = kproto.consumer.fetcher.records.decode   # every read decodes through it
    monkeypatch.setattr(kproto.consumer.fetcher.records, "decode",
                        lambda *a, **k: decoded.append(1) or real_decode(*a, **k))
    task = kproto.spark.read_partition(part)
    batches = [next(task)]
    at_first = len(decoded)                   # the first batch comes before the rest is read
    batches += task
    assert at_first * 4 < len(decoded), (at_first, len(decoded))
    assert len(batches) > 10 and max(b.nbytes for b in batches) < 256 << 10
    got = pa.Table.from_batches(batches)
    assert got.schema == kproto.spark.spark_arrow_schema(True)
    assert got.column("offset").to_pylist() == list(range(3, 20000))
    assert got.column("value").to_pylist() == values[3:]


def test_limit_stops_early(spark, tansu, filled):
    rows = _reader(spark, tansu, subscribe=filled[0]).limit(7).collect()
    assert len(rows) == 7


def test_parquet_write_of_a_topic(spark, tansu, filled, tmp_path):
    topic, expected, _ = filled
    _reader(spark, tansu, subscribe=topic).write.parquet(str(tmp_path / "out"))
    back = spark.read.parquet(str(tmp_path / "out"))
    assert back.count() == expected.num_rows


def test_fail_on_data_loss(spark, tansu, filled):
    topic, _, ends = filled
    beyond = f'{{"{topic}": {{"0": {ends[0] + 100}}}}}'
    with pytest.raises(Exception, match="failOnDataLoss|log ends"):
        _reader(spark, tansu, assign=f'{{"{topic}": [0]}}', endingOffsets=beyond).count()
    lenient = _reader(spark, tansu, assign=f'{{"{topic}": [0]}}', endingOffsets=beyond,
                      failOnDataLoss="false")
    assert lenient.count() == ends[0]


def test_records_written_by_confluent_read_back(spark, tansu, unique_topic):
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": tansu.bootstrap,
                                  "compression.type": "zstd", "linger.ms": 5})
    for i in range(500):
        p.produce(unique_topic, value=b"c%d" % i, key=b"k%d" % (i % 10), partition=i % 4,
                  headers=[("n", b"%d" % i)])
    assert p.flush(30) == 0
    df = _reader(spark, tansu, subscribe=unique_topic, includeHeaders="true")
    rows = df.collect()
    assert sorted(r["value"] for r in rows) == sorted(b"c%d" % i for i in range(500))
    assert all(r["headers"][0]["value"] == r["value"][1:] for r in rows)


@pytest.mark.parametrize("options, message", [
    ({}, "exactly one of"),
    ({"subscribe": "a", "assign": '{"a": [0]}'}, "exactly one of"),
    ({"subscribe": "a", "kafka.group.id": "g"}, "not supported"),
    ({"assign": "[0]"}, "must be JSON"),
    ({"subscribe": "a", "endingOffsets": "earliest"},
     "ending offset can't be earliest for batch queries on Kafka"),
    ({"subscribe": "a", "startingOffsets": "latest"},
     "starting offset can't be latest for batch queries on Kafka"),
    ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'},
     "ending offset for a-0 can't be earliest for batch queries on Kafka"),
])
def test_bad_options_are_clear_errors(spark, tansu, options, message):
    with pytest.raises(Exception, match=message):
        _reader(spark, tansu, **options).count()


def test_nothing_to_read_is_an_empty_frame(spark, tansu, unique_topic):
    """An empty plan (an empty topic, a start at the end) reads no rows; it failed
    (pyspark then reads InputPartition(None), which read() refused)."""
    with Admin(bootstrap_servers=tansu.bootstrap) as admin:
        admin.create_topics({unique_topic: 2})
    assert _reader(spark, tansu, subscribe=unique_topic).count() == 0


def test_offsets_json_must_name_every_partition(spark, tansu, filled):
    """As Spark: a partition left out of a JSON of offsets fails the query (it was
    read from earliest in silence)."""
    topic = filled[0]
    with pytest.raises(Exception, match=rf"If startingOffsets contains specific offsets, you "
                       rf"must specify all TopicPartitions \(missing \[{topic}-2, {topic}-3\]\)"):
        _reader(spark, tansu, subscribe=topic,
                startingOffsets=f'{{"{topic}": {{"0": 100, "1": -2}}}}').count()


# ---------------------------------------------------------------- writing


def test_write_then_read_back_identical_rows(spark, broker, unique_topic):
    broker.create_topic(unique_topic, 4)
    rows = [(b"k%d" % i, b"v%d" % i, i % 4, [("h", b"%d" % i)]) for i in range(3000)]
    df = spark.createDataFrame(rows, "key binary, value binary, partition int, "
                                     "headers array<struct<key: string, value: binary>>")
    (df.write.format("kproto").mode("append")
     .option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", unique_topic).option("kafka.compression.type", "lz4").save())
    back = _reader(spark, broker, subscribe=unique_topic, includeHeaders="true").collect()
    got = sorted((r["key"], r["value"], r["partition"], [(h["key"], h["value"])
                                                         for h in r["headers"]]) for r in back)
    assert got == sorted((bytes(k), bytes(v), p, h) for k, v, p, h in rows)


def test_write_routes_by_topic_column_and_strings(spark, tansu, unique_topic):
    a, b = f"{unique_topic}-a", f"{unique_topic}-b"
    df = spark.createDataFrame([(a if i % 2 else b, f"v{i}") for i in range(100)],
                               "topic string, value string")
    (df.write.format("kproto").mode("append")
     .option("kafka.bootstrap.servers", tansu.bootstrap).save())
    assert _reader(spark, tansu, subscribe=a).count() == 50
    values = {r["value"] for r in _reader(spark, tansu, subscribe=b).collect()}
    assert values == {b"v%d" % i for i in range(0, 100, 2)}


def test_write_failures_fail_the_job(spark, tansu):
    df = spark.createDataFrame([(b"x",)], "value binary")
    with pytest.raises(Exception, match="'topic' option or column"):
        (df.write.format("kproto").mode("append")
         .option("kafka.bootstrap.servers", tansu.bootstrap).save())
    with pytest.raises(Exception, match="Invalid|invalid|topic"):
        (df.write.format("kproto").mode("append")
         .option("kafka.bootstrap.servers", tansu.bootstrap)
         .option("topic", "bad topic name with spaces!").save())


# ---------------------------------------------------------------- streaming


def _produce_seq(bootstrap: str, topic: str, start: int, n: int) -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        p.send_batch(topic, pa.table({"value": [b"%08d" % i for i in range(start, start + n)]}))
        p.flush()


def test_streaming_available_now_with_rate_limit_and_restart(spark, tansu, unique_topic,
                                                              tmp_path):
    with Admin(bootstrap_servers=tansu.bootstrap) as admin:
        admin.create_topics({unique_topic: 4})
    _produce_seq(tansu.bootstrap, unique_topic, 0, 2000)
    checkpoint = str(tmp_path / "checkpoint")
    out = str(tmp_path / "out")

    def run() -> list[int]:
        stream = (spark.readStream.format("kproto")
                  .option("kafka.bootstrap.servers", tansu.bootstrap)
                  .option("subscribe", unique_topic).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", "500").load())
        query = (stream.select("value", "partition", "offset").writeStream.format("parquet")
                 .option("path", out).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    first = run()
    assert sum(first) == 2000 and len(first) >= 4 and max(first) <= 500
    values = [int(r["value"]) for r in spark.read.parquet(out).collect()]
    assert sorted(values) == list(range(2000))           # no gap, no duplicate
    _produce_seq(tansu.bootstrap, unique_topic, 2000, 300)
    second = run()
    assert sum(second) == 300                              # exactly the new records
    values = [int(r["value"]) for r in spark.read.parquet(out).collect()]
    assert sorted(values) == list(range(2300))


def test_stream_to_kafka_sink(spark, tansu, unique_topic, tmp_path):
    source, sink = f"{unique_topic}-in", f"{unique_topic}-out"
    _produce_seq(tansu.bootstrap, source, 0, 1000)
    stream = (spark.readStream.format("kproto")
              .option("kafka.bootstrap.servers", tansu.bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest").load())
    query = (stream.select("key", "value").writeStream.format("kproto")
             .option("kafka.bootstrap.servers", tansu.bootstrap).option("topic", sink)
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    values = sorted(int(r["value"]) for r in _reader(spark, tansu, subscribe=sink).collect())
    assert values == list(range(1000))


def test_streaming_log_end_below_checkpoint_is_data_loss(spark, tansu, unique_topic, tmp_path):
    """The topic is deleted and created again under a query: its log ends (10) are
    below the checkpointed offsets (50). As Spark: the query fails with "offset
    was changed from 50 to 10"; with failOnDataLoss=false it goes on from the new
    ends (the 20 records written at re-creation are lost, as with Spark)."""
    t = unique_topic

    def fill(first: int, n: int) -> None:
        with Producer(bootstrap_servers=tansu.bootstrap) as p:
            for part in (0, 1):
                start = first + part * n
                p.send_batch(t, pa.table({"value": [b"%d" % i for i in range(start, start + n)]}),
                             partition=part).result(30)

    def run(**options: str) -> int:
        reader = (spark.readStream.format("kproto")
                  .option("kafka.bootstrap.servers", tansu.bootstrap).option("subscribe", t)
                  .option("startingOffsets", "earliest")
                  .option("fetchOffset.retryIntervalMs", "10"))
        for k, v in options.items():
            reader = reader.option(k, v)
        query = (reader.load().select("value").writeStream.format("parquet")
                 .option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", str(tmp_path / "cp"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        return sum(p["numInputRows"] for p in query.recentProgress)

    with Admin(bootstrap_servers=tansu.bootstrap) as admin:
        admin.create_topics({t: 2})
    fill(0, 50)
    assert run() == 100
    with Admin(bootstrap_servers=tansu.bootstrap) as admin:
        admin.delete_topics([t])
        admin.create_topics({t: 2})
    fill(1000, 10)
    with pytest.raises(Exception, match=rf"Partition {t}-0 offset was changed from 50 to 10"):
        run()
    assert run(failOnDataLoss="false") == 0
    fill(2000, 5)
    assert run(failOnDataLoss="false") == 10
    values = sorted(int(r["value"]) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert values == list(range(100)) + list(range(2000, 2010))
