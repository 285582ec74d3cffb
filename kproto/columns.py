"""Decoded records as columns: NumPy buffers laid out the way Arrow wants them.

A :class:`RecordColumns` holds no Python object per record. Each column is one
or a few NumPy arrays:

* ``offset``, ``timestamp`` (ms since the epoch): int64; ``timestamp_type``:
  int32 (0 CreateTime, 1 LogAppendTime, -1 none: magic 0);
* ``key`` and ``value``: a :class:`BinaryColumn` — int32 offsets (int64 once a
  column passes 2 GiB) + data + an Arrow validity bitmap (None when nothing is
  null) — or, in ``binary_view`` mode, a :class:`BinaryViewColumn` whose
  16-byte views point into the fetched (or decompressed) buffers;
* ``headers``: list offsets + key strings + nullable binary values, i.e.
  Arrow's ``list<struct<key: string, value: binary>>``.

:meth:`RecordColumns.to_arrow` wraps these buffers without copying them
(``pyarrow.Array.from_buffers``) into a batch with the schema of Spark's Kafka
source: key, value, topic, partition, offset, timestamp, timestampType, headers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import pandas
    import pyarrow

#: Column names and order of Spark's Kafka source.
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
           "headers")


def arrow_schema(*, headers: bool = True, binary_view: bool = False,
                 large: bool = False) -> pyarrow.Schema:
    """The Arrow schema :meth:`RecordColumns.to_arrow` produces."""
    import pyarrow as pa

    binary = pa.binary_view() if binary_view else (pa.large_binary() if large else pa.binary())
    fields = [
        pa.field("key", binary), pa.field("value", binary), pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("ms")), pa.field("timestampType", pa.int32()),
    ]
    if headers:
        fields.append(pa.field("headers", HEADERS_TYPE()))
    return pa.schema(fields)


def HEADERS_TYPE() -> pyarrow.DataType:  # noqa: N802 - reads as the type it returns
    import pyarrow as pa

    return pa.list_(pa.struct([pa.field("key", pa.string(), nullable=False),
                               pa.field("value", pa.binary())]))


class Record(NamedTuple):
    """One record, for convenience iteration (the columns are the fast path)."""

    topic: str | None
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(eq=False)
class BinaryColumn:
    """Variable-length bytes: ``data[offsets[i]:offsets[i+1]]``, null where the bit is 0."""

    offsets: np.ndarray
    data: np.ndarray
    validity: np.ndarray | None = None
    null_count: int = 0

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def get(self, i: int) -> bytes | None:
        if self.validity is not None and not (self.validity[i >> 3] >> (i & 7)) & 1:
            return None
        return self.data[self.offsets[i]:self.offsets[i + 1]].tobytes()

    def to_arrow(self, typ: pyarrow.DataType | None = None) -> pyarrow.Array:
        import pyarrow as pa

        large = self.offsets.dtype == np.int64
        if typ is None:
            typ = pa.large_binary() if large else pa.binary()
        elif large and typ == pa.binary():
            typ = pa.large_binary()
        elif large and typ == pa.string():
            typ = pa.large_string()
        validity = pa.py_buffer(self.validity) if self.null_count else None
        return pa.Array.from_buffers(typ, len(self), [
            validity, pa.py_buffer(self.offsets), pa.py_buffer(self.data)], self.null_count)


@dataclass(eq=False)
class BinaryViewColumn:
    """Arrow ``binary_view``: 16-byte views into ``buffers`` (no copy of the bytes)."""

    views: np.ndarray  #: uint8, 16 bytes a value
    buffers: list[Any]
    validity: np.ndarray | None = None
    null_count: int = 0

    def __len__(self) -> int:
        return len(self.views) // 16

    def get(self, i: int) -> bytes | None:
        if self.validity is not None and not (self.validity[i >> 3] >> (i & 7)) & 1:
            return None
        view = self.views[16 * i:16 * i + 16]
        n = int(view[:4].view("<i4")[0])
        if n <= 12:
            return view[4:4 + n].tobytes()
        buf_index, start = (int(x) for x in view[8:16].view("<i4"))
        return bytes(memoryview(self.buffers[buf_index])[start:start + n])

    def to_arrow(self, typ: pyarrow.DataType | None = None) -> pyarrow.Array:
        import pyarrow as pa

        validity = pa.py_buffer(self.validity) if self.null_count else None
        return pa.Array.from_buffers(pa.binary_view(), len(self), [
            validity, pa.py_buffer(self.views), *(pa.py_buffer(b) for b in self.buffers)],
            self.null_count)


@dataclass(eq=False)
class HeaderColumn:
    """``list<struct<key: string, value: binary>>``: record i has headers
    ``offsets[i]`` to ``offsets[i+1]`` of ``keys``/``values``."""

    offsets: np.ndarray
    keys: BinaryColumn
    values: BinaryColumn

    def get(self, i: int) -> list[tuple[str, bytes | None]]:
        return [(bytes(self.keys.get(j) or b"").decode("utf-8", "replace"), self.values.get(j))
                for j in range(int(self.offsets[i]), int(self.offsets[i + 1]))]

    def to_arrow(self) -> pyarrow.Array:
        import pyarrow as pa

        typ = HEADERS_TYPE()
        keys = self.keys.to_arrow(pa.string())
        values = self.values.to_arrow(pa.binary())
        struct = pa.StructArray.from_arrays([keys, values], fields=list(typ.value_type))
        return pa.ListArray.from_arrays(pa.array(self.offsets, pa.int32())
                                        if self.offsets.dtype != np.int32
                                        else pa.Array.from_buffers(
                                            pa.int32(), len(self.offsets),
                                            [None, pa.py_buffer(self.offsets)]),
                                        struct, type=typ)


def _empty_binary() -> BinaryColumn:
    return BinaryColumn(np.zeros(1, np.int32), np.zeros(0, np.uint8))


@dataclass(eq=False)
class RecordColumns:
    """The records of one or more record sets, as columns (see the module docstring).

    ``topic``/``partition`` label every row when the columns come from one
    partition; after :meth:`concat` the per-row labels are in
    ``partition_column`` and ``topic_index`` (into ``topics``).
    ``next_offset`` is the offset to fetch next (after the last batch seen,
    control and empty batches included).
    """

    offset: np.ndarray
    timestamp: np.ndarray
    timestamp_type: np.ndarray
    key: BinaryColumn | BinaryViewColumn
    value: BinaryColumn | BinaryViewColumn
    headers: HeaderColumn
    next_offset: int = -1
    topic: str | None = None
    partition: int = -1
    topics: list[str] = field(default_factory=list)
    topic_index: np.ndarray | None = None
    partition_column: np.ndarray | None = None
    next_offsets: dict[tuple[str | None, int], int] = field(default_factory=dict)
    #: The sliced Fetch response, when the columns come from decode_fetch_response.
    fetch: Any = None

    @classmethod
    def empty(cls, topic: str | None = None, partition: int = -1,
              next_offset: int = -1) -> RecordColumns:
        z64 = np.zeros(0, np.int64)
        return cls(z64, z64.copy(), np.zeros(0, np.int32), _empty_binary(), _empty_binary(),
                   HeaderColumn(np.zeros(1, np.int32), _empty_binary(), _empty_binary()),
                   next_offset, topic, partition)

    def __len__(self) -> int:
        return len(self.offset)

    def __repr__(self) -> str:
        where = f"{self.topic}[{self.partition}]" if self.topic_index is None else \
            f"{len(self.next_offsets)} partitions"
        return f"<RecordColumns {len(self)} records of {where}, next offset {self.next_offset}>"

    # -- labels

    def partitions(self) -> np.ndarray:
        """The partition of every row (int32)."""
        if self.partition_column is not None:
            return self.partition_column
        return np.full(len(self), self.partition, np.int32)

    def topic_of_rows(self) -> tuple[list[str], np.ndarray]:
        """(topics, index of each row's topic in ``topics``)."""
        if self.topic_index is not None:
            return self.topics, self.topic_index
        return [self.topic or ""], np.zeros(len(self), np.int32)

    # -- conversions

    def to_arrow(self, *, headers: bool = True) -> pyarrow.RecordBatch:
        """A ``pyarrow.RecordBatch`` with Spark's Kafka schema, sharing these buffers."""
        import pyarrow as pa

        topic = self._topic_array()
        parts = self.partitions()
        arrays = [
            self.key.to_arrow(), self.value.to_arrow(), topic,
            pa.Array.from_buffers(pa.int32(), len(self), [None, pa.py_buffer(parts)]),
            pa.Array.from_buffers(pa.int64(), len(self), [None, pa.py_buffer(self.offset)]),
            pa.Array.from_buffers(pa.timestamp("ms"), len(self),
                                  [None, pa.py_buffer(self.timestamp)]),
            pa.Array.from_buffers(pa.int32(), len(self),
                                  [None, pa.py_buffer(self.timestamp_type)]),
        ]
        names = list(COLUMNS[:7])
        if headers:
            arrays.append(self.headers.to_arrow())
            names.append("headers")
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def _topic_array(self) -> pyarrow.Array:
        import pyarrow as pa

        n = len(self)
        if self.topic_index is None:  # one topic: repeat it (cheaper than a dictionary cast)
            name = (self.topic or "").encode()
            offsets = np.arange(0, (n + 1) * len(name), len(name) or 1, dtype=np.int64)
            if not name:
                offsets = np.zeros(n + 1, np.int64)
            typ = pa.large_string() if len(name) * n > 0x7FFFFFFF else pa.string()
            if typ == pa.string():
                offsets = offsets.astype(np.int32)
            return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(name * n)])
        index = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(self.topic_index)])
        # (take: 8x faster than casting a DictionaryArray to string)
        return pa.array(self.topics, pa.string()).take(index)

    def to_pandas(self, **kwargs: Any) -> pandas.DataFrame:
        """A pandas DataFrame (through Arrow)."""
        return self.to_arrow().to_pandas(**kwargs)

    def record(self, i: int) -> Record:
        """Row ``i`` as a :class:`Record`."""
        if self.topic_index is None:
            topic = self.topic
        else:
            topic = self.topics[int(self.topic_index[i])]
        return Record(topic, int(self.partitions()[i]),
                      int(self.offset[i]), int(self.timestamp[i]), int(self.timestamp_type[i]),
                      self.key.get(i), self.value.get(i), self.headers.get(i))

    def __iter__(self) -> Iterator[Record]:
        for i in range(len(self)):
            yield self.record(i)

    def to_pylist(self) -> list[Record]:
        """Every row as a :class:`Record` (convenient, slow: one object per record)."""
        return list(self)

    # -- combining

    @staticmethod
    def concat(parts: Sequence[RecordColumns]) -> RecordColumns:
        """One :class:`RecordColumns` with the rows of ``parts`` (e.g. many partitions)."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return RecordColumns.empty()
        topics: list[str] = []
        topic_ids: dict[str, int] = {}
        index_parts, partition_parts = [], []
        next_offsets: dict[tuple[str | None, int], int] = {}
        for p in parts:
            next_offsets.update(p.next_offsets or {(p.topic, p.partition): p.next_offset})
        if all(p.topic_index is None for p in parts):
            # one topic and partition a part (a poll's pieces): two repeats, not one
            # array a part for each column
            lengths = [len(p) for p in parts]
            ids = [topic_ids.setdefault(p.topic or "", len(topic_ids)) for p in parts]
            index_parts = [np.repeat(np.array(ids, np.int32), lengths)]
            partition_parts = [np.repeat(np.array([p.partition for p in parts], np.int32),
                                         lengths)]
        else:
            for p in parts:
                names, index = p.topic_of_rows()
                remap = np.array([topic_ids.setdefault(n, len(topic_ids)) for n in names]
                                 or [0], np.int32)
                index_parts.append(remap[index])
                partition_parts.append(p.partitions())
        topics = list(topic_ids)
        same_topic = all(p.topic == parts[0].topic and p.topic_index is None for p in parts)
        same_partition = same_topic and all(p.partition == parts[0].partition for p in parts)
        out = RecordColumns(
            np.concatenate([p.offset for p in parts]),
            np.concatenate([p.timestamp for p in parts]),
            np.concatenate([p.timestamp_type for p in parts]),
            _concat_binary([p.key for p in parts]),
            _concat_binary([p.value for p in parts]),
            _concat_headers([p.headers for p in parts]),
            next_offset=parts[-1].next_offset,
            topic=parts[0].topic if same_topic else None,
            partition=parts[0].partition if same_partition else -1,
        )
        if not same_partition:
            out.topics = topics
            out.topic_index = np.concatenate(index_parts)
            out.partition_column = np.concatenate(partition_parts)
        out.next_offsets = next_offsets
        return out


def _concat_binary(cols: Sequence[BinaryColumn | BinaryViewColumn]) -> BinaryColumn:
    plain = [c if isinstance(c, BinaryColumn) else _materialize(c) for c in cols]
    if not plain:
        return binary_column([])
    firsts = [int(c.offsets[0]) for c in plain]
    sizes = [int(c.offsets[-1]) - first for c, first in zip(plain, firsts, strict=True)]
    lengths = [len(c) for c in plain]
    total, n = sum(sizes), sum(lengths)
    dtype = np.int64 if total > 0x7FFFFFFF else np.int32
    offsets = np.empty(n + 1, dtype)
    offsets[0] = 0
    # each part's end offsets moved from where its data starts to where it lands
    shift = np.cumsum([0, *sizes[:-1]], dtype=np.int64) - np.array(firsts, np.int64)
    offsets[1:] = np.concatenate([c.offsets[1:] for c in plain]).astype(np.int64) \
        + np.repeat(shift, lengths)
    data = np.concatenate([c.data[first:first + size]
                           for c, first, size in zip(plain, firsts, sizes, strict=True)])
    null_count = sum(c.null_count for c in plain)
    validity = None
    if null_count:
        valid = np.ones(n, bool)
        row = 0
        for c, k in zip(plain, lengths, strict=True):
            if c.validity is not None:
                valid[row:row + k] = np.unpackbits(c.validity, bitorder="little")[:k].astype(bool)
            row += k
        validity = np.packbits(valid, bitorder="little")
    return BinaryColumn(offsets, data.astype(np.uint8, copy=False), validity, null_count)


def _materialize(c: BinaryViewColumn) -> BinaryColumn:
    values = [c.get(i) for i in range(len(c))]
    return binary_column(values)


def _concat_headers(cols: Sequence[HeaderColumn]) -> HeaderColumn:
    counts = [c.offsets[1:] - c.offsets[:-1] for c in cols]
    offsets = np.zeros(sum(len(c) for c in counts) + 1, np.int32)
    np.cumsum(np.concatenate(counts) if counts else [], out=offsets[1:])
    return HeaderColumn(offsets, _concat_binary([c.keys for c in cols]),
                        _concat_binary([c.values for c in cols]))


def binary_column(values: Sequence[bytes | None]) -> BinaryColumn:
    """A :class:`BinaryColumn` from Python values (for tests and small inputs)."""
    lengths = np.fromiter((0 if v is None else len(v) for v in values), np.int64, len(values))
    total = int(lengths.sum())
    dtype = np.int64 if total > 0x7FFFFFFF else np.int32
    offsets = np.zeros(len(values) + 1, dtype)
    np.cumsum(lengths, out=offsets[1:])
    data = np.frombuffer(b"".join(v for v in values if v is not None), np.uint8).copy()
    nulls = [v is None for v in values]
    null_count = sum(nulls)
    validity = np.packbits(~np.array(nulls, bool), bitorder="little") if null_count else None
    return BinaryColumn(offsets, data, validity, null_count)
