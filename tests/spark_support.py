"""A local Spark session for the Spark test modules (each a module fixture of its own)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

#: What most modules set: few shuffle partitions (2 cores, small data).
SHUFFLE_2 = {"spark.sql.shuffle.partitions": "2"}


def local_spark(app: str, conf: Mapping[str, str] = SHUFFLE_2) -> Iterator[Any]:
    """A fixture body: a ``local[2]`` session named ``app`` (UI off, ``conf`` set,
    kproto's data source registered), stopped when the fixture ends."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kproto.spark

    builder = SparkSession.builder.master("local[2]").appName(app) \
        .config("spark.ui.enabled", "false")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    kproto.spark.register(session)
    yield session
    session.stop()
