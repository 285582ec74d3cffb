"""RecordColumns: Arrow conversion (zero-copy, Spark's Kafka schema), pandas, concat."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kproto import records
from kproto.records.columns import binary_column

from .record_sets import batch_v2, rows_of, sample_records


def decoded(topic: str, partition: int, n: int, base: int = 0) -> records.RecordColumns:
    return records.decode(batch_v2(sample_records(n, seed=partition), base_offset=base),
                          topic=topic, partition=partition)


def test_arrow_schema_is_sparks_kafka_schema() -> None:
    batch = decoded("t", 2, 7).to_arrow()
    assert batch.schema == records.arrow_schema()
    assert batch.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp",
                                  "timestampType", "headers"]
    assert batch.column("topic").to_pylist() == ["t"] * 7
    assert batch.column("partition").to_pylist() == [2] * 7


def test_to_arrow_shares_the_buffers() -> None:
    cols = decoded("t", 0, 50)
    batch = cols.to_arrow()
    value_buf = batch.column("value").buffers()[2]
    assert value_buf.address == cols.value.data.ctypes.data
    assert batch.column("offset").buffers()[1].address == cols.offset.ctypes.data


def test_rows_pandas_and_iteration_agree() -> None:
    cols = decoded("t", 1, 9, base=100)
    rows = rows_of(cols)
    frame = cols.to_pandas()
    assert list(frame["offset"]) == [r[0] for r in rows]
    assert [None if v is None else bytes(v) for v in frame["value"]] == [r[4] for r in rows]
    assert cols.to_pylist()[3].offset == 103 and len(cols) == 9


def test_concat_partitions() -> None:
    parts = [decoded("a", 0, 5), decoded("b", 3, 4, base=10), records.RecordColumns.empty("c", 1)]
    cols = records.concat(parts)
    batch = cols.to_arrow()
    assert batch.column("topic").to_pylist() == ["a"] * 5 + ["b"] * 4
    assert batch.column("partition").to_pylist() == [0] * 5 + [3] * 4
    assert rows_of(cols) == rows_of(parts[0]) + rows_of(parts[1])
    assert cols.next_offsets == {("a", 0): 5, ("b", 3): 14, ("c", 1): -1}
    assert batch.column("headers").to_pylist()[:5] == \
        parts[0].to_arrow().column("headers").to_pylist()


def test_binary_column_helpers() -> None:
    col = binary_column([b"a", None, b"", b"xyz"])
    assert [col.get(i) for i in range(4)] == [b"a", None, b"", b"xyz"]
    arr = col.to_arrow()
    assert arr.to_pylist() == [b"a", None, b"", b"xyz"] and arr.null_count == 1
    assert col.offsets.dtype == np.int32


def test_large_offsets_become_large_binary() -> None:
    col = records.BinaryColumn(np.array([0, 2, 5], np.int64), np.frombuffer(b"abcde", np.uint8))
    arr = col.to_arrow()
    assert arr.type == pa.large_binary() and arr.to_pylist() == [b"ab", b"cde"]
