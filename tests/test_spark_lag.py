"""The Spark source's lag in a streaming query's progress (issue 33): the stream
reader reports the log ends it found (``reportLatestOffset``, PySpark 4.2+), so
each partition's lag is the progress's ``latestOffset`` minus its ``endOffset``
(PySpark's Python data sources cannot report custom source metrics)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from kproto import Admin, Consumer, Producer

pytest.importorskip("pyspark")

import kproto.spark as ks  # noqa: E402

from .spark_support import local_spark  # noqa: E402

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def spark():
    yield from local_spark("kproto-lag")


def _fill(bootstrap: str, topic: str, n: int) -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        for part in (0, 1):
            p.send_batch(topic, pa.table({"value": [b"v"] * n}), partition=part).result(30)


def _ends(bootstrap: str, topic: str) -> dict[str, int]:
    with Consumer(bootstrap_servers=bootstrap) as c:    # ListOffsets
        ends = c.end_offsets([(topic, 0), (topic, 1)])
    return {str(tp.partition): end for tp, end in ends.items()}


def test_reader_reports_the_log_ends(broker: Any, unique_topic: str) -> None:
    """As Spark calls it: after latestOffset (20 a trigger), reportLatestOffset gives
    the log ends; their difference with the batch's end is each partition's lag."""
    topic = broker.create_topic(unique_topic, 2)
    _fill(broker.bootstrap, topic, 30)
    reader = ks.KprotoStreamReader({"kafka.bootstrap.servers": broker.bootstrap,
                                    "subscribe": topic, "startingOffsets": "earliest",
                                    "maxOffsetsPerTrigger": "20"}, None)
    try:
        assert reader.reportLatestOffset() is None
        start = reader.initialOffset()
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        latest = reader.reportLatestOffset()
    finally:
        reader.stop()
    assert latest == {topic: _ends(broker.bootstrap, topic)} == {topic: {"0": 30, "1": 30}}
    assert {p: latest[topic][p] - o for p, o in end[topic].items()} == {"0": 20, "1": 20}


def test_query_progress_shows_lag(spark: Any, tansu: Any, unique_topic: str,
                                  tmp_path: Any) -> None:
    """A query reading 100 records a trigger from 2 x 150: its first progress shows
    the log ends, 100 records behind them in all."""
    with Admin(bootstrap_servers=tansu.bootstrap) as admin:
        admin.create_topics({unique_topic: 2})
    _fill(tansu.bootstrap, unique_topic, 150)
    stream = (spark.readStream.format("kproto")
              .option("kafka.bootstrap.servers", tansu.bootstrap)
              .option("subscribe", unique_topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "100").load())
    query = (stream.select("value").writeStream.format("parquet")
             .option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    first = progress[0]["sources"][0]
    latest, end = (json.loads(first[k]) if isinstance(first[k], str) else first[k]
                   for k in ("latestOffset", "endOffset"))
    ends = _ends(tansu.bootstrap, unique_topic)
    assert latest == {unique_topic: ends}
    lag = {p: latest[unique_topic][p] - end[unique_topic][p] for p in ends}
    assert sum(lag.values()) == 300 - 100
    last = progress[-1]["sources"][0]
    last_end = json.loads(last["endOffset"]) if isinstance(last["endOffset"], str) \
        else last["endOffset"]
    assert last_end == {unique_topic: ends}              # caught up: no lag left
