"""Bulk encode from columns: identical bytes from both twins, read back by peers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto import _codec, _pure, records
from kproto.errors import EncodeError

from .record_sets import read_with_kafka_python, rows_of

TS = 1_700_000_000_000


def table(n: int = 6) -> pa.Table:
    headers = [[("a", b"1")], [], None, [("ü", None), ("b", b"")], [], [("x", b"y" * 20)]]
    return pa.table({
        "key": pa.array([b"k0", None, b"", b"k3" * 10, None, b"k5"][:n], pa.binary()),
        "value": pa.array(["v0", "v1" * 50, None, "", "v4", "é"][:n], pa.string()),
        "timestamp": pa.array([TS + i * 7 for i in range(n)], pa.timestamp("ms")),
        "headers": pa.array(headers[:n], records.columns.HEADERS_TYPE()),
    })


def expected_rows(t: pa.Table, base_offset: int = 0) -> list:
    out = []
    for i, row in enumerate(t.to_pylist()):
        value = row["value"].encode() if isinstance(row["value"], str) else row["value"]
        ts = int(row["timestamp"].timestamp() * 1000) if row["timestamp"] else None
        out.append((base_offset + i, ts, 0, row["key"], value,
                    [(h["key"], h["value"]) for h in row["headers"] or []]))
    return out


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_table_round_trip_and_kafka_python_reads_it(codec) -> None:
    t = table()
    batch = records.encode(t, compression=codec, base_offset=40)
    assert read_with_kafka_python(batch) == expected_rows(t, 40)
    assert rows_of(records.decode(batch)) == expected_rows(t, 40)


def test_aiokafka_reads_it() -> None:
    aiokafka_records = pytest.importorskip("aiokafka.record.memory_records")
    t = table()
    batch = records.encode(t, compression="lz4")
    mr = aiokafka_records.MemoryRecords(batch)
    got = []
    while (b := mr.next_batch()) is not None:
        got += [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in b]
    assert got == [(o, ts, k, v, h) for o, ts, _, k, v, h in expected_rows(t)]


def test_twins_write_identical_bytes() -> None:
    t = table()
    args = (len(t), records._binary_input(t.column("key"), len(t), "key"),
            records._binary_input(t.column("value"), len(t), "value"),
            records._timestamps(t.column("timestamp"), len(t)),
            records._header_input(t.column("headers"), len(t)))
    kw = dict(base_offset=5, producer_id=9, producer_epoch=1, base_sequence=3,
              transactional=True)
    assert _codec.encode_batch_v2(*args, **kw) == _pure.encode_batch_v2(*args, **kw)


def test_sliced_arrow_inputs() -> None:
    t = table().slice(2, 3)
    batch = records.encode(t)
    assert read_with_kafka_python(batch) == expected_rows(t)


def test_rows_and_keyword_columns() -> None:
    rows = [{"key": b"a", "value": b"1", "headers": [("h", b"v")], "timestamp": TS},
            {"key": None, "value": "two", "timestamp": TS + 1}]
    got = read_with_kafka_python(records.encode(rows))
    assert got == [(0, TS, 0, b"a", b"1", [("h", b"v")]), (1, TS + 1, 0, None, b"two", [])]
    got = read_with_kafka_python(records.encode(value=np.array([b"x", b"yy"], object),
                                                timestamp=[TS, TS]))
    assert [r[4] for r in got] == [b"x", b"yy"]
    with pytest.raises(EncodeError):
        records.encode(value=[b"x"], key=[b"a", b"b"])
    with pytest.raises(EncodeError):
        records.encode(value=[])


def test_producer_fields() -> None:
    from kafka.record.default_records import DefaultRecordBatch

    batch = records.encode(value=[b"a"] * 3, timestamp=[TS] * 3, producer_id=77,
                           producer_epoch=2, base_sequence=10, transactional=True)
    b = DefaultRecordBatch(batch)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional) == \
        (77, 2, 10, True)
    assert b.validate_crc()


values = st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(values, st.data(), st.sampled_from([None, "gzip", "snappy", "lz4", "zstd"]))
def test_encode_decode_round_trip(vals, data, codec) -> None:
    n = len(vals)
    keys = data.draw(st.lists(st.one_of(st.none(), st.binary(max_size=10)), min_size=n,
                              max_size=n))
    ts = data.draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n))
    hdrs = data.draw(st.lists(st.lists(st.tuples(st.text(max_size=4),
                                                 st.one_of(st.none(), st.binary(max_size=4))),
                                       max_size=2), min_size=n, max_size=n))
    batch = records.encode(key=keys, value=vals, timestamp=ts, headers=hdrs, compression=codec)
    for mod in (_codec, _pure):
        cols = mod.decode_records(batch)
        got = [(r.key, r.value, r.timestamp, r.headers) for r in cols]
        assert got == [(k, v, t, [(hk, hv) for hk, hv in h])
                       for k, v, t, h in zip(keys, vals, ts, hdrs, strict=True)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4"])
def test_legacy_builder_read_by_kafka_python_and_kproto(magic: int, codec) -> None:
    keys = [b"a", None, b"", b"dd"]
    vals = [b"1", b"22", None, b""]
    ts = [TS, TS + 1, TS + 2, TS + 3]
    data = records.encode_legacy(key=keys, value=vals, timestamp=ts, magic=magic,
                                 compression=codec, base_offset=70)
    want = [(70 + i, ts[i] if magic else -1, 0 if magic else -1, keys[i], vals[i], [])
            for i in range(4)]
    assert read_with_kafka_python(data) == want
    for mod in (_codec, _pure):
        assert rows_of(mod.decode_records(data)) == want


def test_legacy_builder_refuses_headers_and_zstd() -> None:
    with pytest.raises(EncodeError):
        records.encode_legacy([(b"k", b"v", [("h", b"x")])])
    with pytest.raises(EncodeError):
        records.encode_legacy(value=[b"v"], compression="zstd")


def _twin_args(t: pa.Table) -> tuple:
    n = len(t)
    return (records._binary_input(t.column("key"), n, "key"),
            records._binary_input(t.column("value"), n, "value"),
            records._timestamps(t.column("timestamp"), n),
            records._header_input(t.column("headers"), n))


@pytest.mark.parametrize("index", [[5, 0, 3], [2, 2, 1, 4, 0, 5, 3], [4], list(range(6))[::-1]])
@pytest.mark.parametrize("codec", [None, "lz4"])
def test_rows_encode_as_the_taken_rows(index: list[int], codec) -> None:
    """records.Rows: the encoder gathers the rows itself; the bytes are those of the
    same rows taken out of the table first, from both twins; a sliced table and one
    of several chunks too (the send_batch path: a partition's rows of a table)."""
    t = table()
    want = records.encode(t.take(pa.array(index)), compression=codec)
    assert records.encode(records.Rows(t, index), compression=codec) == want
    kw = dict(base_offset=3, rows=np.array(index, np.int64))
    assert _codec.encode_batch_v2(len(index), *_twin_args(t), **kw) == \
        _pure.encode_batch_v2(len(index), *_twin_args(t), **kw)
    assert read_with_kafka_python(want) == [
        (i,) + row[1:] for i, row in enumerate(expected_rows(t.take(pa.array(index))))]
    chunked = pa.concat_tables([t.slice(0, 2), t.slice(2)])
    assert records.encode(records.Rows(chunked, index), compression=codec) == want
    shifted = pa.concat_tables([t.slice(0, 1), t]).combine_chunks().slice(1)
    assert records.encode(records.Rows(shifted, index), compression=codec) == want


def test_rows_slices_share_the_prepared_columns() -> None:
    t = table()
    rows = records.Rows(t, [5, 4, 3, 2, 1])
    part = rows.slice(1, 3)
    assert (part.num_rows, len(part), list(part.index)) == (3, 3, [4, 3, 2])
    assert list(rows.slice(3).index) == [2, 1]
    assert part.inputs() is rows.inputs()
    assert records.encode(part) == records.encode(t.take(pa.array([4, 3, 2])))


@pytest.mark.parametrize("encode", [_codec.encode_batch_v2, _pure.encode_batch_v2])
def test_rows_out_of_the_columns_are_refused(encode) -> None:
    args = _twin_args(table())
    for index in ([0, 6], [-1], [1, 2, 99]):
        with pytest.raises(EncodeError,
                           match=r"rows\[\d\] = -?\d+ is not a row of the columns \(6 rows\)"):
            encode(len(index), *args, rows=np.array(index, np.int64))
    with pytest.raises(EncodeError, match="rows has 2 values for 3 records"):
        encode(3, *args, rows=np.array([0, 1], np.int64))


def test_null_header_lists_spanning_entries_are_no_headers() -> None:
    """A null list may still span entries of the child array (Arrow allows it):
    they are not headers of any record."""
    entries = pa.array([{"key": "a", "value": b"1"}, {"key": "b", "value": b"2"},
                        {"key": "c", "value": None}], records.columns.HEADERS_TYPE().value_type)
    headers = pa.ListArray.from_arrays(pa.array([0, 1, 2, 3], pa.int32()), entries,
                                       type=records.columns.HEADERS_TYPE(),
                                       mask=pa.array([False, True, False]))
    t = pa.table({"value": pa.array([b"x", b"y", b"z"]), "headers": headers,
                  "timestamp": pa.array([TS] * 3, pa.int64())})
    for data in (t, t.slice(1), records.Rows(t, [2, 1, 0])):
        got = [r[5] for r in read_with_kafka_python(records.encode(data))]
        want = {0: [("a", b"1")], 1: [], 2: [("c", None)]}
        rows = data.index if isinstance(data, records.Rows) else range(3 - len(data), 3)
        assert got == [want[int(r)] for r in rows]


def test_rows_of_every_row_take_and_sizes() -> None:
    """Rows(table): every row in order (a slice of it is a slice of the table);
    take() picks positions of the selection; sizes() bounds each record's bytes in
    a batch from above, within its framing estimate."""
    t = table()
    every = records.Rows(t)
    assert (every.index, every.num_rows) == (None, 6)
    assert records.encode(every) == records.encode(t)
    assert records.encode(every.slice(2, 3)) == records.encode(t.slice(2, 3))
    picked = records.Rows(t, [5, 4, 3]).take([2, 0])
    assert list(picked.index) == [3, 5] and list(every.take([4, 1]).index) == [4, 1]
    assert records.encode(picked) == records.encode(t.take(pa.array([3, 5])))
    sizes = every.sizes()
    headers = [len(h or ()) for h in t.column("headers").to_pylist()]
    for i in range(6):
        actual = len(records.encode(t.slice(i, 1))) - records.batch.HEADER_SIZE
        assert actual <= sizes[i] <= actual + records.batch.RECORD_OVERHEAD + 4 * headers[i]
    assert records.Rows(t, [5, 0, 5]).sizes().tolist() == [sizes[5], sizes[0], sizes[5]]


@pytest.mark.parametrize(("codec", "level"), [("zstd", -1), ("zstd", -20), ("lz4", -4),
                                              ("gzip", -1), ("gzip", 1), ("zstd", 22)])
def test_compression_levels_reach_the_codec_in_both_twins(codec: str, level: int) -> None:
    """``compression_level`` is the codec's level, negative ones included (they were taken
    for "unset" and silently replaced by the default); None is the default."""
    from kproto.compression import codec_id, compress

    values = [b"%d-" % i + b"abcdefgh" * (i % 17) for i in range(500)]
    args = (500, records._binary_input(None, 500, "key"),
            records._binary_input(values, 500, "value"),
            records._timestamps(np.zeros(500, np.int64), 500), None)
    kw = dict(codec=codec_id(codec), compression_level=level)
    fast = _codec.encode_batch_v2(*args, **kw)
    assert fast == _pure.encode_batch_v2(*args, **kw)
    assert fast == records.encode(value=values, compression=codec, compression_level=level,
                                  timestamp=np.zeros(500, np.int64))
    plain = _codec.encode_batch_v2(*args)
    assert fast[61:] == compress(codec_id(codec), plain[61:], level=level)
    assert [r.value for r in records.decode(fast).to_pylist()] == values


@pytest.mark.parametrize(("codec", "level"), [("gzip", -2), ("gzip", 10), ("zstd", 23),
                                              ("zstd", -131073), ("lz4", 1.5), ("zstd", True)])
def test_compression_levels_a_codec_does_not_have_are_refused(codec: str, level) -> None:
    from kproto import Producer
    from kproto.errors import ConfigError

    with pytest.raises(ConfigError, match="compression[ _]level"):
        records.encode(value=[b"x"], compression=codec, compression_level=level)
    if isinstance(level, float):
        return          # (the Producer's config reads numbers the way it reads strings)
    with pytest.raises(ConfigError, match="compression[ _]level"):
        Producer(bootstrap_servers="127.0.0.1:1", compression_type=codec,
                 compression_level=level)
