"""PySpark Python Data Source "kproto": read Kafka into Spark as Arrow batches.

>>> import kproto.spark                                            # doctest: +SKIP
>>> kproto.spark.register(spark)                                   # doctest: +SKIP
>>> df = (spark.read.format("kproto")                              # doctest: +SKIP
...       .option("kafka.bootstrap.servers", "broker:9092")
...       .option("subscribe", "events")
...       .option("startingOffsets", "earliest")
...       .load())

The options and the schema are those of Spark's own Kafka source, so moving a
job is a one-word change (``format("kafka")`` -> ``format("kproto")``). The
driver plans offset ranges (Metadata + ListOffsets, big partitions split by
``minPartitions`` / ``maxRecordsPerPartition``); each executor task reads its
range with :func:`kproto.consumer.reader.iter_ranges` (in steps of bounded size) and
yields ``pyarrow.RecordBatch``es decoded by the Cython codec — never rows.

Supported options (Spark's names):

- ``kafka.bootstrap.servers`` (required); any other ``kafka.``-prefixed option
  is a kproto client setting under its Kafka name (``kafka.security.protocol``,
  ``kafka.sasl.mechanism``, ``kafka.max.partition.fetch.bytes``,
  ``kafka.isolation.level``...).
- one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a
  regular expression), ``assign`` (JSON ``{"topic": [0, 1]}``);
- ``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or JSON
  ``{"topic": {"0": 23, "1": -2}}`` (-2 earliest, -1 latest) naming every
  partition read; a batch cannot start at latest nor end at earliest, a stream
  has no end (checked as Spark does: :func:`offset_options`);
- ``startingTimestamp`` / ``endingTimestamp`` (ms, every partition),
  ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` (JSON of ms),
  ``startingOffsetsByTimestampStrategy`` (``error``, the default, or ``latest``);
- ``minPartitions``, ``maxRecordsPerPartition``: split ranges into more tasks;
- ``includeHeaders`` (default false), ``failOnDataLoss`` (default true: data
  loss fails the query, else it is logged), ``maxOffsetsPerTrigger``,
  ``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs`` (streams);
- for operators (streams, not in Spark's source): ``maxBytesPerTrigger``
  (bytes of keys and values a micro-batch, estimated: :mod:`.limits`) and
  ``commitOffsetsToGroup`` (the offsets read, committed to that group).

Writing (``df.write.format("kproto")``, :mod:`.sink`) is at-least-once, or
exactly-once with ``exactlyOnce=true`` (:mod:`.exactly_once`: a transaction per
task, committed by the driver when Spark commits).
"""

from __future__ import annotations

from typing import Any

try:
    from pyspark.sql.datasource import DataSource
except ImportError:  # pragma: no cover - kproto works without pyspark; this package needs it
    raise ImportError("kproto.spark needs pyspark (pip install 'kproto[spark]')") from None

# options.py: option parsing; source.py: planning and reading; sink.py: writing.
# ``X as X``: re-exported, so kproto.spark.X names all it did as one module
from .options import HEADERS_DDL as HEADERS_DDL
from .options import SCHEMA_DDL, OffsetSpec, _bool, offset_options
from .options import client_settings as client_settings
from .sink import KprotoCommitMessage as KprotoCommitMessage
from .sink import KprotoStreamWriter, KprotoWriter
from .source import STEP_BYTES as STEP_BYTES
from .source import DataLossError, KafkaRange, KprotoBatchReader, KprotoStreamReader
from .source import ReadAllAvailable as ReadAllAvailable
from .source import ReadMaxRows as ReadMaxRows
from .source import log as log
from .source import read_partition as read_partition
from .source import spark_arrow_schema as spark_arrow_schema
from .typed import read_formats, spark_schema

__all__ = ["KprotoDataSource", "register", "KafkaRange", "SCHEMA_DDL", "DataLossError",
           "OffsetSpec", "offset_options"]


def register(spark: Any) -> None:
    """Register the "kproto" format with a SparkSession."""
    spark.dataSource.register(KprotoDataSource)


class KprotoDataSource(DataSource):
    """``spark.read.format("kproto")``: Kafka topics as a DataFrame (see the module)."""

    @classmethod
    def name(cls) -> str:
        return "kproto"

    def schema(self) -> Any:
        headers = _bool(self.options, "includeHeaders", False)
        typed = read_formats(self.options)          # valueFormat/keyFormat (kproto.spark.typed)
        if typed:
            return spark_schema(spark_arrow_schema(headers), typed)
        return SCHEMA_DDL + (HEADERS_DDL if headers else "")

    def reader(self, schema: Any) -> KprotoBatchReader:
        return KprotoBatchReader(self.options, schema)

    def streamReader(self, schema: Any) -> KprotoStreamReader:
        return KprotoStreamReader(self.options, schema)

    def writer(self, schema: Any, overwrite: bool) -> KprotoWriter:
        return KprotoWriter(self.options, schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> KprotoStreamWriter:
        return KprotoStreamWriter(self.options, schema)
