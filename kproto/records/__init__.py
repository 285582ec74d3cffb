"""Record sets: bulk decode into columns, bulk encode from columns.

>>> from kproto import records
>>> cols = records.decode(record_set_bytes, topic="events", partition=0)   # doctest: +SKIP
>>> batch = cols.to_arrow()          # pyarrow.RecordBatch, Spark's Kafka schema, no copies

The decoder is Cython (``kproto._codec``) with a pure-Python reference twin
(``kproto._pure``); ``KPROTO_PURE=1`` selects the twin.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .. import columns as columns  # (kproto.records.columns, .compression, .fetched: the
from .. import compression
from .. import fetched as fetched  # same modules as kproto.columns, ...)
from ..columns import (
    COLUMNS,
    BinaryColumn,
    BinaryViewColumn,
    HeaderColumn,
    Record,
    RecordColumns,
    arrow_schema,
    binary_column,
)
from ..errors import EncodeError
from ..fetched import FetchedPartition, FetchSlice
from ..protocol import slicer
from .batch import RECORD_OVERHEAD


def _backend() -> Any:
    # Imported on first use: kproto._codec itself imports this package's modules.
    from .._backend import backend

    return backend


__all__ = [
    "decode", "encode", "encode_legacy", "slice_fetch", "decode_fetch_response", "RecordColumns",
    "BinaryColumn", "BinaryViewColumn", "HeaderColumn", "Record", "FetchedPartition",
    "FetchSlice", "COLUMNS", "arrow_schema", "compression", "concat", "buffer_pool", "Rows",
]


def decode(
    buf: Any, *, topic: str | None = None, partition: int = -1, start_offset: int = 0,
    check_crc: bool = True, aborted_transactions: Iterable[tuple[int, int]] | None = None,
    binary_view: bool = False,
    max_decompressed: int = compression.DEFAULT_MAX_DECOMPRESSED,
    stop_at_limit: bool = False,
) -> RecordColumns:
    """Decode any sequence of record sets (magic 0, 1, 2; any codec) into columns.

    * CRC-32 (magic 0/1) and CRC-32C (magic 2) are verified unless ``check_crc=False``;
      a mismatch raises :class:`~kproto.errors.CrcError`;
    * a truncated trailing record set is ignored (normal at the end of a fetch);
    * records below ``start_offset`` are dropped (a fetch may start mid-batch);
    * control batches are never returned as records; they, and batches emptied by
      compaction, still advance ``next_offset``;
    * ``aborted_transactions`` — the fetch response's ``[(producer_id, first_offset)]`` —
      turns on read_committed filtering: records of aborted transactions are dropped;
    * ``binary_view``: keys and values are Arrow ``binary_view`` pointing into ``buf``
      (or the decompressed buffers) instead of copies;
    * malformed input raises :class:`~kproto.errors.CorruptRecordError` with the byte
      offset; compressed batches expanding past ``max_decompressed`` bytes in all (the
      whole ``buf``; default 256 MiB) raise :class:`~kproto.errors.DecompressionLimitError`
      before the excess is allocated; with ``stop_at_limit``, decoding stops instead
      before the batch that would pass it (its ``next_offset`` is where the next fetch
      starts: what the consumers do, so a broker answering more than the limit at once
      is read in pieces), unless no batch before it reaches ``start_offset`` (it is the
      first, alone too big, or those before it end below the start and count towards
      the limit all the same): then it raises, since a fetch from ``next_offset`` would
      be the same fetch again.

    The result's ``next_offset`` is the offset to fetch next.
    """
    cols: RecordColumns = _backend().decode_records(
        buf, start_offset=start_offset, check_crc=check_crc,
        aborted_transactions=None if aborted_transactions is None else list(aborted_transactions),
        max_decompressed=max_decompressed, binary_view=binary_view,
        stop_at_limit=stop_at_limit)
    cols.topic = topic
    cols.partition = partition
    cols.next_offsets = {(topic, partition): cols.next_offset}
    return cols


concat = RecordColumns.concat


def buffer_pool(max_bytes: int | None = None) -> tuple[int, int, int]:
    """The pool that recycles decode output: ``(limit, bytes held, blocks held)``.

    When the arrays of a decoded :class:`RecordColumns` are released, their blocks of
    256 KiB or more are kept (up to ``limit`` bytes in all, 128 MiB by default) and the
    next :func:`decode` writes into them: pages already mapped, instead of fresh ones
    that fault on first touch (a consumer decoding fetch after fetch, a Spark task
    stepping through a range). ``max_bytes`` sets the limit; ``0`` turns the pool off
    and frees what it holds. The pure-Python twin has no pool: ``(0, 0, 0)``.

    >>> limit, held, blocks = buffer_pool()
    """
    pool = getattr(_backend(), "_buffer_pool", None)
    if pool is None:
        return 0, 0, 0
    limit, held, blocks = pool(max_bytes)
    return int(limit), int(held), int(blocks)


# --------------------------------------------------------------------------- fetch responses


def slice_fetch(body: Any, version: int) -> FetchSlice:
    """Walk a Fetch response body (no header) once: per-partition metadata and a
    zero-copy view of each partition's record set, without touching the records."""
    from .._backend import IS_PURE

    if IS_PURE:     # the pure twin is the protocol engine run over Fetch's schema
        return slicer.slice_fetch(body, version)
    result: FetchSlice = _backend().slice_fetch(body, version)
    return result


def decode_fetch_response(
    body: Any, version: int, *, topic_names: Mapping[uuid.UUID, str] | None = None,
    start_offsets: Mapping[tuple[str, int], int] | None = None, read_committed: bool = False,
    check_crc: bool = True, binary_view: bool = False,
    max_decompressed: int = compression.DEFAULT_MAX_DECOMPRESSED,
) -> RecordColumns:
    """Every record of a Fetch response in one :class:`RecordColumns`.

    ``topic_names`` maps topic ids to names (Fetch v13+ names topics by id only);
    ``start_offsets`` gives each partition's fetch offset (records before it are
    dropped); ``read_committed`` applies each partition's aborted-transaction list;
    ``max_decompressed`` caps each partition's record set (see :func:`decode`).
    Partitions with an error contribute no rows; the slice (errors, high
    watermarks, ...) is kept in the result's ``fetch`` attribute.
    """
    sliced = slice_fetch(body, version)
    parts = []
    for p in sliced.partitions:
        topic = p.topic
        if topic is None and p.topic_id is not None:
            topic = (topic_names or {}).get(p.topic_id, str(p.topic_id))
        if p.error_code or p.records is None:
            continue
        aborted = (p.aborted_transactions or []) if read_committed else None
        parts.append(decode(
            p.records, topic=topic, partition=p.partition,
            start_offset=(start_offsets or {}).get((topic or "", p.partition), 0),
            check_crc=check_crc, aborted_transactions=aborted, binary_view=binary_view,
            max_decompressed=max_decompressed))
    cols = RecordColumns.concat(parts) if parts else RecordColumns.empty()
    cols.fetch = sliced
    return cols


# --------------------------------------------------------------------------- encoding

_BinaryInput = tuple[np.ndarray, np.ndarray, "np.ndarray | None", int]


def encode(
    data: Any = None, *, key: Any = None, value: Any = None, timestamp: Any = None,
    headers: Any = None, base_offset: int = 0, compression: str | int | None = None,
    producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
    transactional: bool = False, compression_level: int | None = None,
) -> bytes:
    """Encode records into one record batch v2 (CRC-32C, any codec).

    ``data`` is a ``pyarrow.Table``/``RecordBatch`` with any of the columns
    ``key``, ``value`` (binary or string), ``timestamp`` (timestamp or int64 ms),
    ``headers`` (``list<struct<key: string, value: binary>>``), or a list of rows
    (dicts with those keys, or ``(key, value)`` tuples), or :class:`Rows` (some
    rows of a table in a given order, gathered by the encoder itself). Columns
    may instead be given as keywords (Arrow arrays, NumPy arrays or lists).
    Missing timestamps are "now"; the broker assigns offsets (``base_offset`` is
    for tests and compacted topics).

    >>> batch = encode(value=[b"a", b"b"], compression="lz4")   # doctest: +SKIP
    """
    rows = None
    if isinstance(data, Rows):
        n, rows = data.num_rows, data.index
        key_in, value_in, ts_in, headers_in = data.inputs()
    else:
        n, key, value, timestamp, headers = _columns_from(data, key, value, timestamp, headers)
        key_in, value_in = _binary_input(key, n, "key"), _binary_input(value, n, "value")
        ts_in, headers_in = _timestamps(timestamp, n), _header_input(headers, n)
    codec_id = _compression_id(compression)
    return bytes(_backend().encode_batch_v2(
        n, key_in, value_in, ts_in, headers_in, base_offset=base_offset,
        codec=codec_id, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, transactional=transactional,
        compression_level=compression_level,
        rows=rows))


class Rows:
    """Rows of a pyarrow Table picked by index, in that order, for :func:`encode`:
    the encoder reads them where they are (no copy of the rows first, as
    ``table.take(index)`` would make). ``index`` None is every row in order.
    ``slice()`` and ``take()`` give parts of the selection; every part shares the
    table's columns, prepared for the encoder once.

    >>> batch = encode(Rows(table, np.array([3, 0, 2])))      # doctest: +SKIP
    """

    __slots__ = ("table", "index", "_prepared")

    def __init__(self, table: Any, index: Any = None,
                 _prepared: list[Any] | None = None) -> None:
        self.table = table
        #: int64 row numbers of ``table`` (None: all of them, in order)
        self.index = None if index is None else np.ascontiguousarray(index, np.int64)
        self._prepared = _prepared if _prepared is not None else [None]

    @property
    def num_rows(self) -> int:
        return self.table.num_rows if self.index is None else len(self.index)

    def __len__(self) -> int:
        return self.num_rows

    def slice(self, offset: int = 0, length: int | None = None) -> Rows:
        """Rows ``offset`` to ``offset + length`` of the selection (like ``Table.slice``;
        of all rows in order: a slice of the table, encoded straight through)."""
        if self.index is None:
            return Rows(self.table.slice(offset, length))
        stop = len(self.index) if length is None else offset + length
        return Rows(self.table, self.index[offset:stop], self._prepared)

    def take(self, index: Any) -> Rows:
        """Rows ``index`` (positions in this selection) of the selection, in that order."""
        index = np.asarray(index, np.int64)
        return Rows(self.table, index if self.index is None else self.index[index],
                    self._prepared)

    def inputs(self) -> tuple[Any, Any, Any, Any]:
        """The table's key, value, timestamp and headers columns as the encoder takes
        them (made once, shared by every part)."""
        prepared = self._prepared[0]
        if prepared is None:
            t = self.table
            n, key, value, timestamp, headers = _columns_from(t, None, None, None, None)
            prepared = self._prepared[0] = (
                _binary_input(key, n, "key"), _binary_input(value, n, "value"),
                _timestamps(timestamp, n), _header_input(headers, n))
        return prepared

    def sizes(self) -> np.ndarray:
        """About how many bytes each selected row takes in a record batch (keys,
        values and headers from their offsets, plus the framing estimate
        ``batch.RECORD_OVERHEAD`` a record and 4 a header): an upper bound, for
        splitting rows into batches under a size limit."""
        key, value, _, headers = self.inputs()
        n = self.table.num_rows
        out = np.diff(key[0][:n + 1]).astype(np.int64)
        out += np.diff(value[0][:n + 1])
        out += RECORD_OVERHEAD
        if headers is not None:
            starts = np.asarray(headers[0][:n + 1], np.int64)
            out += 4 * np.diff(starts)
            for part in (headers[1], headers[2]):   # the headers' key and value bytes
                offsets = np.asarray(part[0], np.int64)
                out += offsets[starts[1:]] - offsets[starts[:-1]]
        return out if self.index is None else out[self.index]


def _compression_id(name: str | int | None) -> int:
    return compression.codec_id(name)


def _columns_from(data: Any, key: Any, value: Any, timestamp: Any, headers: Any
                  ) -> tuple[int, Any, Any, Any, Any]:
    if data is not None:
        if hasattr(data, "schema") and hasattr(data, "column"):
            names = data.schema.names
            get = (lambda c: data.column(c) if c in names else None)
            key, value = get("key"), get("value")
            timestamp, headers = get("timestamp"), get("headers")
            n = data.num_rows
        else:
            rows = list(data)
            n = len(rows)
            if rows and isinstance(rows[0], Mapping):
                key = [r.get("key") for r in rows]
                value = [r.get("value") for r in rows]
                timestamp = [r.get("timestamp") for r in rows] if any(
                    "timestamp" in r for r in rows) else None
                headers = [r.get("headers") or [] for r in rows]
            else:
                key = [r[0] for r in rows]
                value = [r[1] for r in rows]
                headers = [r[2] if len(r) > 2 else [] for r in rows]
                timestamp = [r[3] for r in rows] if rows and len(rows[0]) > 3 else None
        return n, key, value, timestamp, headers
    lengths = {len(c) for c in (key, value, timestamp, headers) if c is not None}
    if len(lengths) != 1:
        raise EncodeError(f"columns have different lengths {sorted(lengths)}"
                          if lengths else "nothing to encode")
    return lengths.pop(), key, value, timestamp, headers


class RawBinary:
    """A binary column given as Arrow-style buffers: int32/int64 ``offsets`` (n + 1),
    uint8 ``data``, and a little-endian validity bitmap or None (no nulls)."""

    __slots__ = ("offsets", "data", "validity")

    def __init__(self, offsets: np.ndarray, data: np.ndarray,
                 validity: np.ndarray | None = None) -> None:
        self.offsets, self.data, self.validity = offsets, data, validity

    def __len__(self) -> int:
        return len(self.offsets) - 1


def _one_chunk(col: Any) -> Any:
    """A chunked column as one array (its only chunk as it is: no copy)."""
    if hasattr(col, "combine_chunks"):
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


def _binary_input(col: Any, n: int, name: str) -> _BinaryInput:
    if isinstance(col, RawBinary):
        return col.offsets, col.data, col.validity, 0
    if col is None:
        return (np.zeros(n + 1, np.int32), np.zeros(0, np.uint8),
                np.zeros((n + 7) // 8, np.uint8), 0)
    col = _one_chunk(col)
    if hasattr(col, "buffers") and hasattr(col, "type"):
        import pyarrow as pa

        if pa.types.is_binary_view(col.type) or pa.types.is_string_view(col.type):
            col = col.cast(pa.large_binary())
        if not (pa.types.is_binary(col.type) or pa.types.is_string(col.type)
                or pa.types.is_large_binary(col.type) or pa.types.is_large_string(col.type)):
            raise EncodeError(f"column {name!r} must be binary or string, not {col.type}")
        validity, offsets, data = col.buffers()[:3]
        wide = pa.types.is_large_binary(col.type) or pa.types.is_large_string(col.type)
        off = np.frombuffer(offsets, np.int64 if wide else np.int32)[col.offset:col.offset + n + 1]
        raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        valid = np.frombuffer(validity, np.uint8) if col.null_count and validity else None
        return off, raw, valid, col.offset
    values = [None if v is None else v.encode() if isinstance(v, str) else bytes(v) for v in col]
    c = binary_column(values)
    return c.offsets, c.data, c.validity, 0


def _timestamps(col: Any, n: int) -> np.ndarray:
    if col is None:
        return np.full(n, int(time.time() * 1000), np.int64)
    col = _one_chunk(col)
    if hasattr(col, "type"):
        import pyarrow as pa

        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms", tz=col.type.tz)).cast(pa.int64())
        col = col.fill_null(int(time.time() * 1000)).to_numpy(zero_copy_only=False)
    elif not isinstance(col, np.ndarray):
        now = int(time.time() * 1000)
        col = [now if t is None else t for t in col]
    return np.ascontiguousarray(np.asarray(col, np.int64)[:n])


def _header_input(col: Any, n: int) -> tuple[np.ndarray, _BinaryInput, _BinaryInput] | None:
    if col is None:
        return None
    col = _one_chunk(col)
    if hasattr(col, "offsets") and hasattr(col, "values"):
        import pyarrow as pa

        offsets = np.asarray(col.offsets.to_numpy(zero_copy_only=False), np.int32)
        if col.null_count:  # a null header list is no headers
            counts = np.diff(offsets)
            null = np.asarray(col.is_null().to_numpy(zero_copy_only=False), bool)
            first = int(offsets[0])
            # the entries of the lists that are not null (a null list may span some)
            keep = pa.array(np.repeat(~null, counts))
            values = col.values.slice(first, int(offsets[-1]) - first).filter(keep)
            counts[null] = 0
            offsets = np.zeros(n + 1, np.int32)
            np.cumsum(counts, out=offsets[1:])
        else:
            values = col.values
        total = len(values)
        return (np.ascontiguousarray(offsets),
                _binary_input(values.field("key"), total, "headers.key"),
                _binary_input(values.field("value"), total, "headers.value"))
    rows = list(col)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum([len(r or ()) for r in rows], out=offsets[1:])
    flat = [h for r in rows for h in (r or ())]
    hkeys = [(k.encode() if isinstance(k, str) else bytes(k)) for k, _ in flat]
    hvals = [None if v is None else v.encode() if isinstance(v, str) else bytes(v)
             for _, v in flat]
    return (offsets, _binary_input(hkeys, len(flat), "headers.key"),
            _binary_input(hvals, len(flat), "headers.value"))


def encode_legacy(data: Any = None, *, key: Any = None, value: Any = None,
                  timestamp: Any = None, magic: int = 1, base_offset: int = 0,
                  compression: str | int | None = None) -> bytes:
    """Encode a magic 0 or 1 message set (for old brokers and tests; never headers).

    Takes the same inputs as :func:`encode`. With compression, the messages are
    wrapped in one compressed message (inner offsets relative in magic 1, as
    Kafka 0.10+ writes them; the wrapper carries the last absolute offset).
    """
    import struct
    import zlib

    if magic not in (0, 1):
        raise EncodeError(f"legacy message sets are magic 0 or 1, not {magic}")
    n, key, value, timestamp, headers = _columns_from(data, key, value, timestamp, None)
    if headers is not None and any(headers):
        raise EncodeError("magic 0/1 messages cannot carry headers")
    keys = _python_values(_binary_input(key, n, "key"), n)
    values = _python_values(_binary_input(value, n, "value"), n)
    stamps = _timestamps(timestamp, n)
    codec = _compression_id(compression)
    if codec == 4:
        raise EncodeError("zstd needs record batches (magic 2)")

    def message(offset: int, k: bytes | None, v: bytes | None, ts: int, attributes: int) -> bytes:
        body = struct.pack(">bb", magic, attributes)
        if magic == 1:
            body += struct.pack(">q", ts)
        for part in (k, v):
            body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
        crc = zlib.crc32(body)
        return struct.pack(">qiI", offset, len(body) + 4, crc) + body

    relative = codec and magic == 1
    inner = b"".join(message(i if relative else base_offset + i, keys[i], values[i],
                             int(stamps[i]), 0) for i in range(n))
    if not codec:
        return inner
    from .. import compression as codecs

    wrapped = codecs.compress(codec, inner, magic=magic)
    return message(base_offset + n - 1, None, wrapped, int(stamps.max()) if n else -1, codec)


def _python_values(col: _BinaryInput, n: int) -> list[bytes | None]:
    offsets, data, validity, bit0 = col
    out: list[bytes | None] = []
    raw = data.tobytes()
    for i in range(n):
        bit = bit0 + i
        if validity is not None and not (int(validity[bit >> 3]) >> (bit & 7)) & 1:
            out.append(None)
        else:
            out.append(raw[int(offsets[i]):int(offsets[i + 1])])
    return out
