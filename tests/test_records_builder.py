"""The producer's records builder (kproto/_builder.pxi: send()'s records encoded as they
are appended) against its pure twin (kproto/_pure/builder.py) and against kafka-python's
DefaultRecordBatchBuilder (golden bytes from an independent writer): the same batch for
the same records, every codec, headers, null and empty keys and values, negative
timestamp deltas; slices re-base offsets and timestamps; bad input raises."""

from __future__ import annotations

import random

import pytest

import kproto._pure.builder as pure
from kproto._backend import IS_PURE, backend
from kproto.errors import EncodeError

from .record_sets import batch_v2, sample_records

BUILDERS = [pure.RecordsBuilder] + ([] if IS_PURE else [backend.RecordsBuilder])


def _fill(cls: type, records: list) -> object:
    b = cls()
    for i, r in enumerate(records):
        assert b.append(r.key, r.value, r.timestamp, r.headers or None) == i
    return b


@pytest.mark.parametrize("cls", BUILDERS, ids=lambda c: c.__module__)
def test_the_batch_kafka_python_writes_for_the_same_records(cls: type) -> None:
    records = sample_records(40)
    built = _fill(cls, records).build()
    golden = batch_v2(records)
    # byte for byte but the partition leader epoch (bytes 12-15, outside the CRC): a
    # client's is -1 (Java's NO_PARTITION_LEADER_EPOCH), kafka-python writes 0
    assert built[12:16] == b"\xff" * 4
    assert built[:12] + built[16:] == golden[:12] + golden[16:]


@pytest.mark.parametrize("cls", BUILDERS, ids=lambda c: c.__module__)
@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_read_back_the_same(cls: type, codec: int) -> None:
    from kproto import records as kp_records

    rows = sample_records(30, seed=3)
    got = kp_records.decode(_fill(cls, rows).build(codec)).to_pylist()
    assert [(r.key, r.value, r.timestamp) for r in got] == [
        (r.key, r.value, r.timestamp) for r in rows]
    assert [list(r.headers) for r in got] == [
        [(k, v) for k, v in r.headers] for r in rows]


@pytest.mark.skipif(IS_PURE, reason="compares the Cython builder with its twin")
@pytest.mark.parametrize("seed", range(30))
def test_the_two_builders_agree_on_random_records_and_slices(seed: int) -> None:
    r = random.Random(seed)
    c, p = backend.RecordsBuilder(), pure.RecordsBuilder()
    n = r.randrange(1, 60)
    for i in range(n):
        key = None if r.random() < 0.3 else r.randbytes(r.randrange(0, 300))
        value = None if r.random() < 0.2 else r.randbytes(r.randrange(0, 3000))
        ts = r.randrange(-2**40, 2**41)
        headers = [(r.choice(["a", "ü", b"b"]), None if r.random() < 0.3 else
                    r.randbytes(r.randrange(5))) for _ in range(r.randrange(3))] \
            if r.random() < 0.3 else None
        assert c.append(key, value, ts, headers) == p.append(key, value, ts, headers) == i
    codec = seed % 5
    assert c.build(codec) == p.build(codec)
    assert c.nbytes == p.nbytes and c.count == p.count == n
    lo = r.randrange(n)
    hi = r.randrange(lo + 1, n + 1)
    cs, ps = c.slice(lo, hi), p.slice(lo, hi)
    assert cs.build() == ps.build()
    assert [cs.timestamp(i) for i in range(hi - lo)] == [c.timestamp(i) for i in range(lo, hi)]
    c.release()
    assert c.timestamp(n - 1) == p.timestamp(n - 1)      # timestamps outlive the records


@pytest.mark.parametrize("cls", BUILDERS, ids=lambda c: c.__module__)
def test_bad_input_raises(cls: type) -> None:
    b = cls()
    with pytest.raises(EncodeError, match="at least one record"):
        b.build()
    with pytest.raises(TypeError, match="key must be bytes"):
        b.append("text", b"v", 0)
    with pytest.raises(TypeError, match="value must be bytes"):
        b.append(None, bytearray(b"v"), 0)
    with pytest.raises(TypeError, match="header key"):
        b.append(None, b"v", 0, [(1, b"x")])
    with pytest.raises(TypeError, match="header value"):
        b.append(None, b"v", 0, [("k", "x")])
    with pytest.raises(OverflowError):
        b.append(None, b"v", 2**63)
    assert b.count == 0
    b.append(None, b"v", 5)
    with pytest.raises(IndexError):
        b.timestamp(1)
    with pytest.raises(IndexError):
        b.slice(0, 2)


@pytest.mark.parametrize("cls", BUILDERS, ids=lambda c: c.__module__)
@pytest.mark.parametrize(("codec", "level"), [(4, -1), (4, -7), (3, -3), (1, -1), (4, 19)])
def test_every_compression_level_reaches_the_codec(cls: type, codec: int, level: int) -> None:
    """Negative levels are levels (zstd's and lz4's faster ones, gzip's -1), not "unset":
    the payload is the codec's own output at that level, and reads back."""
    from kproto import records as kp_records
    from kproto.compression import compress

    rows = sample_records(200, seed=5)
    built = _fill(cls, rows).build(codec, level)
    assert built[61:] == compress(codec, _fill(cls, rows).build()[61:], level=level)
    assert built[61:] != _fill(cls, rows).build(codec)[61:] or codec == 1   # gzip -1 == 6
    assert len(kp_records.decode(built)) == 200
