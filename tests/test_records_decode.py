"""The record decoder against record sets written by kafka-python, read by kafka-python.

Every case runs through the pure-Python reference and the Cython decoder in
the same run (the ``impl`` fixture), and both must equal kafka-python's reader.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from kproto.errors import CorruptRecordError, CrcError

from .record_sets import (
    Rec,
    batch_v2,
    control_batch,
    message_set,
    patch_v2_attributes,
    read_with_kafka_python,
    rows_of,
    sample_records,
)

CODECS_V2 = [0, 1, 2, 3, 4]
CODECS_LEGACY = [0, 1, 2, 3]


@pytest.fixture(params=["pure", "cython"])
def impl(request: pytest.FixtureRequest):
    if request.param == "pure":
        from kproto._pure import records as mod
    else:
        from kproto import _codec as mod
    return mod


def decode(impl, data, **kw):
    return impl.decode_records(data, **kw)


@pytest.mark.parametrize("codec", CODECS_V2)
def test_v2_batches_match_kafka_python(impl, codec: int) -> None:
    recs = sample_records(40)
    data = (batch_v2(recs[:15], base_offset=100, codec=codec)
            + batch_v2(recs[15:], base_offset=115, codec=codec))
    cols = decode(impl, data)
    assert rows_of(cols) == read_with_kafka_python(data)
    assert len(cols) == 40 and cols.next_offset == 140
    assert cols.offset.dtype == np.int64 and cols.timestamp_type.dtype == np.int32


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS_LEGACY)
def test_legacy_message_sets_match_kafka_python(impl, magic: int, codec: int) -> None:
    recs = [Rec(r.key, r.value, [], r.timestamp) for r in sample_records(12)]
    data = (message_set(recs[:5], magic=magic, base_offset=10, codec=codec)
            + message_set(recs[5:], magic=magic, base_offset=15, codec=codec))
    cols = decode(impl, data)
    assert rows_of(cols) == read_with_kafka_python(data)
    assert [int(o) for o in cols.offset] == list(range(10, 22))
    assert cols.next_offset == 22


def test_mixed_magics_in_one_buffer(impl) -> None:
    recs = sample_records(9)
    plain = [Rec(r.key, r.value, [], r.timestamp) for r in recs]
    data = (message_set(plain[:3], magic=0, base_offset=0)
            + message_set(plain[3:6], magic=1, base_offset=3, codec=1)
            + batch_v2(recs[6:], base_offset=6, codec=3))
    assert rows_of(decode(impl, data)) == read_with_kafka_python(data)


def test_truncated_trailing_batch_is_ignored(impl) -> None:
    data = batch_v2(sample_records(5), base_offset=0) + batch_v2(sample_records(5), base_offset=5)
    for cut in range(1, 70):
        cols = decode(impl, data[:-cut])
        assert len(cols) == 5 and cols.next_offset == 5


def test_start_offset_drops_earlier_records(impl) -> None:
    data = batch_v2(sample_records(10), base_offset=50, codec=1)
    cols = decode(impl, data, start_offset=57)
    assert [int(o) for o in cols.offset] == [57, 58, 59]
    assert rows_of(cols) == read_with_kafka_python(data, start_offset=57)
    assert cols.next_offset == 60


def test_log_append_time_uses_max_timestamp(impl) -> None:
    recs = sample_records(4)
    data = patch_v2_attributes(batch_v2(recs), 0x08)
    cols = decode(impl, data)
    max_ts = struct.unpack_from(">q", data, 35)[0]
    assert list(cols.timestamp) == [max_ts] * 4
    assert list(cols.timestamp_type) == [1] * 4


def test_control_batches_are_skipped_but_advance(impl) -> None:
    data = batch_v2(sample_records(3), base_offset=0) + control_batch(3, 7, abort=False)
    cols = decode(impl, data)
    assert len(cols) == 3 and cols.next_offset == 4


def test_empty_compacted_batch_advances_next_offset(impl) -> None:
    batch = bytearray(batch_v2([], base_offset=0))
    struct.pack_into(">i", batch, 23, 9)  # lastOffsetDelta kept by compaction
    data = patch_v2_attributes(bytes(batch), 0)
    cols = decode(impl, data)
    assert len(cols) == 0 and cols.next_offset == 10


def test_read_committed_drops_aborted_transactions(impl) -> None:
    recs = sample_records(3)
    data = (batch_v2(recs, base_offset=0, transactional=True, producer_id=5)   # aborted
            + control_batch(3, 5, abort=True)
            + batch_v2(recs, base_offset=4, transactional=True, producer_id=6)  # committed
            + control_batch(7, 6, abort=False)
            + batch_v2(recs, base_offset=8, transactional=True, producer_id=5)  # new txn
            + control_batch(11, 5, abort=False))
    everything = decode(impl, data)
    assert len(everything) == 9
    committed = decode(impl, data, aborted_transactions=[(5, 0)])
    assert [int(o) for o in committed.offset] == [4, 5, 6, 8, 9, 10]
    assert committed.next_offset == 12


def test_binary_view_points_into_the_buffers(impl) -> None:
    recs = sample_records(30)
    data = batch_v2(recs[:10], base_offset=0) + batch_v2(recs[10:], base_offset=10, codec=3)
    plain, views = decode(impl, data), decode(impl, data, binary_view=True)
    assert rows_of(views) == rows_of(plain)
    assert views.value.buffers[0] is data
    table = views.to_arrow()
    assert str(table.schema.field("value").type) == "binary_view"
    assert table.column("value").to_pylist() == [r[4] for r in rows_of(plain)]


def test_crc_errors(impl) -> None:
    good = batch_v2(sample_records(3))
    bad = bytearray(good)
    bad[-1] ^= 1
    with pytest.raises(CrcError, match="CRC-32C"):
        decode(impl, bytes(bad))
    assert len(decode(impl, bytes(bad), check_crc=False)) == 3
    legacy = bytearray(message_set([Rec(b"k", b"v", [], 1)], magic=1))
    legacy[-1] ^= 1
    with pytest.raises(CrcError, match="CRC-32"):
        decode(impl, bytes(legacy))


def test_bogus_sizes_are_corrupt_not_truncated(impl) -> None:
    with pytest.raises(CorruptRecordError, match="below the minimum"):
        decode(impl, struct.pack(">qi", 0, 3) + b"\x00" * 20)
    data = batch_v2(sample_records(3))
    with pytest.raises(CorruptRecordError, match="limit"):
        decode(impl, data, max_batch_bytes=len(data) - 13)
    with pytest.raises(CorruptRecordError, match="magic"):
        decode(impl, data[:16] + b"\x07" + data[17:], check_crc=False)


def test_pure_and_cython_agree_on_every_corruption() -> None:
    """Bit flips and truncations of golden batches: both twins raise CorruptRecordError
    (or agree on a result), never crash."""
    import random

    from kproto import _codec
    from kproto._pure import records as pure

    rng = random.Random(1)
    golden = (batch_v2(sample_records(6), base_offset=3)
              + message_set([Rec(b"k", b"v", [], 5)], magic=1, base_offset=9, codec=1)
              + batch_v2(sample_records(4), base_offset=10, codec=2))
    for _ in range(600):
        data = bytearray(golden)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data[: rng.randint(0, len(data))] if rng.random() < 0.2 else data)
        for check in (True, False):
            outcomes = []
            for mod in (pure, _codec):
                try:
                    outcomes.append(rows_of(mod.decode_records(data, check_crc=check)))
                except CorruptRecordError as exc:
                    outcomes.append(type(exc))
            assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("magic,codec", [(2, 3), (2, 1), (1, 2), (0, 1)])
def test_stop_at_limit_returns_the_batches_that_fit(impl, magic: int, codec: int) -> None:
    """``max_decompressed`` bounds one answer: with ``stop_at_limit`` (what the
    consumers pass) decoding stops before the compressed batch that would pass it,
    and ``next_offset`` is that batch's first offset (the next Fetch starts there);
    without it, or when the first batch alone is too big, DecompressionLimitError."""
    from kproto.errors import DecompressionLimitError

    recs = [Rec(b"k%d" % i, b"v" * 10_000, [], 1_700_000_000_000 + i) for i in range(30)]
    make = batch_v2 if magic == 2 else (
        lambda rs, base_offset, codec: message_set(rs, magic=magic, base_offset=base_offset,
                                                   codec=codec))
    data = b"".join(make(recs[i:i + 10], base_offset=100 + i, codec=codec)
                    for i in range(0, 30, 10))       # three batches of ~100 KB each
    whole = decode(impl, data)
    assert len(whole) == 30 and whole.next_offset == 130
    with pytest.raises(DecompressionLimitError):
        decode(impl, data, max_decompressed=250_000)
    part = decode(impl, data, max_decompressed=250_000, stop_at_limit=True)
    assert rows_of(part) == rows_of(whole)[:20] and part.next_offset == 120
    rest = decode(impl, data[len(b"".join(make(recs[i:i + 10], base_offset=100 + i,
                                                    codec=codec) for i in range(0, 20, 10))):],
                  max_decompressed=250_000, stop_at_limit=True)
    assert rows_of(rest) == rows_of(whole)[20:] and rest.next_offset == 130
    with pytest.raises(DecompressionLimitError):
        decode(impl, data, max_decompressed=50_000, stop_at_limit=True)
