"""The Cython record loop's fast paths against the pure twin, in the same run: recycled
output blocks (the buffer pool), and the record shapes each fast path has to tell apart.

Every case decodes with ``kproto._codec`` and ``kproto._pure`` and compares every column,
buffer by buffer where the layout is fixed (offsets, timestamps, binary data).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from kproto import _codec, records
from kproto._pure import records as pure

from .record_sets import Rec, batch_v2, rows_of
from .threads import run_at_once


def _big(n: int, seed: int, *, nulls: bool = False) -> list[Rec]:
    """Records whose columns pass the pool's 256 KiB block size."""
    out = []
    for i in range(n):
        j = (i * 7 + seed) % 11
        key = None if nulls and j == 0 else b"k%d-%d" % (seed, i)
        value = None if nulls and j == 1 else bytes([(i + seed) % 251]) * (100 + j * 40)
        headers = [] if j == 2 else [(f"h{seed}", b"x" * (j * 9)), ("t", None)]
        out.append(Rec(key, value, headers, 1_700_000_000_000 + i))
    return out


@cache
def _big_set(n: int, seed: int, *, nulls: bool = False, per_batch: int = 500,
             codec: int = 0) -> bytes:
    recs = _big(n, seed, nulls=nulls)
    return b"".join(batch_v2(recs[i:i + per_batch], base_offset=i, codec=codec)
                    for i in range(0, len(recs), per_batch))


def assert_same_columns(fast, slow) -> None:
    """Rows, and the Arrow-ready buffers themselves, equal."""
    assert rows_of(fast) == rows_of(slow)
    assert fast.next_offset == slow.next_offset
    for name in ("offset", "timestamp", "timestamp_type"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name))
    assert fast.to_arrow().equals(slow.to_arrow())


def _pool(max_bytes=None) -> tuple[int, int, int]:
    """The Cython core's pool (records.buffer_pool is its public face, (0, 0, 0) under
    KPROTO_PURE=1: the twin has no pool)."""
    return tuple(int(x) for x in _codec._buffer_pool(max_bytes))


def test_records_buffer_pool_is_the_backends() -> None:
    from kproto._backend import IS_PURE

    assert records.buffer_pool() == ((0, 0, 0) if IS_PURE else _pool())


@pytest.fixture
def pool():
    """A pool emptied before and after the test, at its default limit."""
    limit = _pool()[0]
    _pool(0)
    _pool(limit)
    yield limit
    _pool(0)
    _pool(limit)


def test_released_columns_go_to_the_pool_and_the_next_decode_takes_them(pool) -> None:
    data = _big_set(3000, 1)
    cols = _codec.decode_records(data)
    value_bytes = cols.value.data.nbytes
    assert value_bytes > 256 * 1024
    # the header columns' reservations, far bigger than their data, are back already
    _, held_before, blocks_before = _pool()
    assert held_before > 0
    del cols
    limit, held, blocks = _pool()
    assert limit == pool and blocks > blocks_before   # the smaller blocks: malloc's
    assert held >= held_before + value_bytes
    again = _codec.decode_records(data)
    assert _pool()[1] <= held - value_bytes     # taken again, not fresh blocks
    assert_same_columns(again, pure.decode_records(data))


@pytest.mark.parametrize("binary_view", [False, True])
def test_recycled_blocks_never_show_what_they_held(pool, binary_view: bool) -> None:
    """Big then small, nulls after none, views after copies: each decode into recycled
    blocks equals the pure twin's."""
    inputs = [_big_set(4000, 2), _big_set(1500, 3, nulls=True),
              _big_set(2500, 4, per_batch=1000, codec=3),
              _big_set(3000, 5, nulls=True, per_batch=77)]
    for _ in range(2):
        for data in inputs:
            fast = _codec.decode_records(data, binary_view=binary_view)
            assert_same_columns(fast, pure.decode_records(data, binary_view=binary_view))
            other = _codec.decode_records(data, binary_view=not binary_view)
            assert rows_of(other) == rows_of(fast)
            del fast, other
    assert _pool()[2] > 0


def test_columns_kept_alive_keep_their_blocks(pool) -> None:
    """Blocks are recycled only when NumPy lets go of them: arrays the caller keeps (a
    slice of a column, say) are never written by a later decode."""
    data = _big_set(3000, 6)
    first = _codec.decode_records(data)
    values = first.value.data[1000:5000]            # a view that keeps the block alive
    expected = values.copy()
    del first
    for _ in range(3):
        _codec.decode_records(_big_set(3000, 7))
    np.testing.assert_array_equal(values, expected)


def test_pool_limit(pool) -> None:
    data = _big_set(3000, 8)
    _pool(300 * 1024)
    del_me = _codec.decode_records(data)
    del del_me
    limit, held, _ = _pool()
    assert limit == 300 * 1024 and held <= limit
    assert _pool(0) == (0, 0, 0)
    del_me = _codec.decode_records(data)
    del del_me
    assert _pool() == (0, 0, 0)       # off: blocks are freed


def test_decoding_threads_share_the_pool(pool) -> None:
    """Several threads decode (the GIL released) and release columns at once: every result
    equals the pure twin's."""
    inputs = [_big_set(2000 + 300 * i, 10 + i, nulls=bool(i % 2)) for i in range(4)]
    expected = [rows_of(pure.decode_records(d)) for d in inputs]

    def work(k: int) -> None:
        for r in range(6):
            i = (k + r) % len(inputs)
            assert rows_of(_codec.decode_records(inputs[i])) == expected[i]

    run_at_once(work)


# --------------------------------------------------------------------------- record shapes
#
# The loop reads a record on a fast path (varints of up to 2 bytes, a one-byte header count,
# non-null header values, bodies of 8 bytes or more) and gives up on anything else, undoing
# the headers it appended, for the checked reader. Records written byte by byte put every
# field on each side of those lines, non-canonical varints included.


def _uvarint(u: int, pad: int = 0) -> bytes:
    """Base-128 bytes of ``u``, with ``pad`` redundant continuation bytes (non-canonical,
    accepted as Kafka does)."""
    out = bytearray()
    while True:
        b, u = u & 0x7F, u >> 7
        if u == 0 and pad == 0:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)
        if u == 0:
            pad -= 1


def _varint(n: int, pad: int = 0) -> bytes:
    return _uvarint((n << 1) ^ (n >> 63), pad)


def _bytes(b: bytes | None, pad: int = 0) -> bytes:
    return _varint(-1, pad) if b is None else _varint(len(b), pad) + b


def _record(key: bytes | None, value: bytes | None, headers=(), *, ts_delta: int = 0,
            offset_delta: int = 0, pads: tuple[int, ...] = (0,) * 8) -> bytes:
    """One record; ``pads[i]`` pads the i-th varint (length, timestamp delta, offset delta,
    key length, value length, header count, header key length, header value length)."""
    body = (b"\x00" + _varint(ts_delta, pads[1]) + _varint(offset_delta, pads[2])
            + _bytes(key, pads[3]) + _bytes(value, pads[4]) + _varint(len(headers), pads[5]))
    for hk, hv in headers:
        body += _bytes(hk.encode(), pads[6]) + _bytes(hv, pads[7])
    return _varint(len(body), pads[0]) + body


def _raw_batch(records_: list[bytes], base_offset: int = 0, last_delta: int | None = None,
               base_ts: int = 1_700_000_000_000) -> bytes:
    import struct

    import crc32c

    body = (struct.pack(">hiqqqhii", 0, len(records_) - 1 if last_delta is None else last_delta,
                        base_ts, base_ts, -1, -1, -1, len(records_)) + b"".join(records_))
    head = struct.pack(">qiibI", base_offset, len(body) + 9, 0, 2, crc32c.crc32c(body))
    return head + body


def _both(data: bytes, **kw) -> None:
    """Both twins, both binary modes: the same columns."""
    for binary_view in (False, True):
        fast = _codec.decode_records(data, binary_view=binary_view, **kw)
        assert_same_columns(fast, pure.decode_records(data, binary_view=binary_view, **kw))


# a field value for each side of the 1-, 2- and 3-byte varint lines (zigzag: 63/64, 8191/8192)
SIZES = [0, 1, 12, 13, 16, 17, 63, 64, 200, 8191, 8192]


@pytest.mark.parametrize("size", SIZES)
def test_key_and_value_lengths_across_the_varint_lines(size: int) -> None:
    blob = bytes(range(256)) * (size // 256 + 1)
    recs = [_record(blob[:size], b"v" * (size % 50), [("h", b"x")]),
            _record(b"k", blob[:size], [], offset_delta=1),
            _record(blob[:size], blob[:size], [("h" * min(size, 300), blob[:size])],
                    offset_delta=2),
            _record(None, blob[:size], [], offset_delta=3)]
    _both(_raw_batch(recs))
    _both(_raw_batch(recs[:1]) + _raw_batch(recs, base_offset=1))   # a value at the end


@pytest.mark.parametrize("delta", [0, 1, 63, 64, 4095, 4096, 2**31 - 1, -1, -64, -65, -2**31])
def test_timestamp_and_offset_deltas_across_the_varint_lines(delta: int) -> None:
    recs = [_record(b"k", b"v", ts_delta=delta, offset_delta=0),
            _record(b"k", b"v", [("a", b"b")], ts_delta=-delta, offset_delta=max(delta, 1))]
    _both(_raw_batch(recs, base_offset=5, last_delta=max(delta, 1)))


@pytest.mark.parametrize("which", range(8))
@pytest.mark.parametrize("pad", [1, 2, 4])
def test_non_canonical_varints_in_every_field(which: int, pad: int) -> None:
    pads = tuple(pad if i == which else 0 for i in range(8))
    recs = [_record(b"key", b"value", [("h", b"v"), ("i", b"")], offset_delta=i, pads=pads)
            for i in range(3)]
    _both(_raw_batch(recs))


@pytest.mark.parametrize("count", [1, 2, 63, 64, 65, 300])
def test_header_counts_across_the_varint_line(count: int) -> None:
    headers = [(f"h{i}", None if i % 17 == 5 else b"v" * (i % 9)) for i in range(count)]
    recs = [_record(b"k", b"v", headers), _record(b"k", b"v", headers[:1], offset_delta=1)]
    _both(_raw_batch(recs))


def test_headers_the_fast_path_gives_up_on_are_undone() -> None:
    """A null header value, or a long one, after headers the fast path already appended:
    the record is read again by the checked path and its headers appear once."""
    shapes = [
        [("a", b"1"), ("b", None)],                       # a null value after a header
        [("a", b"1"), ("b", b"2"), ("c", b"x" * 9000)],   # a 3-byte value length
        [("a", b"1"), ("b" * 9000, b"2")],                # a 3-byte key length
        [("a", b""), ("b", b"")],                         # empty values, the last at the end
        [("", None)],
    ]
    recs = [_record(b"k", b"v", h, offset_delta=i) for i, h in enumerate(shapes)]
    recs.append(_record(b"k", b"v", [("z", b"9")], offset_delta=len(recs)))
    _both(_raw_batch(recs))
    _both(_raw_batch(recs), start_offset=2)              # not kept: nothing to undo


def test_header_room_grows_with_the_headers() -> None:
    """Header room for the fast path: one small header a record, then records whose
    headers take more and more (63 a record, long values), a null header value (the
    checked path starts a bitmap, which later fast records must find covered), records
    before start_offset."""
    import random

    rng = random.Random(17)
    recs = []
    for i in range(400):
        count = 1 if i < 120 else rng.choice([0, 2, 17, 63])
        headers = [(f"h{i}.{h}", b"v" * rng.choice([0, 3, 13, 200, 4000])) for h in range(count)]
        if i in (130, 131, 300):
            headers.insert(count // 2, ("null", None))
        recs.append(_record(b"k%d" % i, b"x" * (i % 40), headers, offset_delta=i))
    batches = _raw_batch(recs[:150]) + _raw_batch(recs[150:], base_offset=150)
    _both(batches)
    _both(batches, start_offset=125)


def test_header_room_follows_the_batch_bytes_not_its_claimed_count() -> None:
    """A batch claiming 2**31 - 1 records holds three: a fast record with a header, one the
    checked path reads (a null header value), a fast one again. The fuzzer (ASan) found a
    version of the loop that sized header room from the claimed count (8 GB, docs/
    fuzzing.md finding 21); room follows the batch's bytes, and the decode reports the
    missing records with the address space limited to 1 GB more than the process has."""
    import subprocess
    import sys
    import textwrap

    recs = [_record(b"k", b"v", [("a", b"1")]),
            _record(b"k", b"v", [("a", b"1"), ("b", None)], offset_delta=1),
            _record(b"k", b"v", [("a", b"1")], offset_delta=2)]
    batch = bytearray(_raw_batch(recs))
    batch[57:61] = (2**31 - 1).to_bytes(4, "big")
    script = textwrap.dedent(f"""
        import resource
        from kproto import _codec
        from kproto.errors import CorruptRecordError
        size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 30), size + (1 << 30)))
        try:
            _codec.decode_records({bytes(batch)!r}, check_crc=False)
        except CorruptRecordError as e:
            print("corrupt:", e)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("corrupt:"), out.stderr[-2000:]


def test_short_records_take_the_checked_path() -> None:
    """Bodies under 8 bytes (null key and value, no headers: 6) decode the same."""
    recs = [_record(None, None, offset_delta=i) for i in range(5)]
    recs += [_record(b"", b"", [("", b"")], offset_delta=5), _record(b"k", None, offset_delta=6)]
    _both(_raw_batch(recs))


def test_nulls_start_mid_batch_and_across_batches() -> None:
    """The bitmaps kept ahead of the rows: a first null in the middle of a batch, in a later
    batch, in header values; views and copies."""
    first = [_record(b"k%d" % i, b"v" * i, [("h", b"x")], offset_delta=i) for i in range(40)]
    nulls = [_record(None if i % 3 else b"k", None if i % 5 == 1 else b"v" * 20,
                     [("h", None if i % 7 == 3 else b"y")], offset_delta=i) for i in range(40)]
    data = _raw_batch(first) + _raw_batch(nulls, base_offset=40) + _raw_batch(first,
                                                                              base_offset=80)
    _both(data)
    _both(data, start_offset=45)
    _both(_raw_batch(nulls[3:] + first, base_offset=0))


def test_malformed_records_fail_alike_in_both_twins() -> None:
    """Every truncation and a flip of every byte of a batch whose records take the fast
    path: the same outcome from both twins (the error class and its offset)."""
    from kproto.errors import KprotoError

    recs = [_record(b"key-%d" % i, b"value" * 20, [("h", b"x" * i), ("t", b"1")],
                    offset_delta=i, ts_delta=70 * i) for i in range(4)]
    good = _raw_batch(recs)

    def outcome(mod, data):
        try:
            return rows_of(mod.decode_records(data, check_crc=False))
        except KprotoError as exc:
            return type(exc), exc.offset

    for i in range(61, len(good)):
        for data in (good[:8] + (len(good) - 12 - (len(good) - i)).to_bytes(4, "big")
                     + good[12:i],
                     good[:i] + bytes([good[i] ^ 0x80]) + good[i + 1:],
                     good[:i] + bytes([good[i] ^ 0x01]) + good[i + 1:]):
            assert outcome(_codec, data) == outcome(pure, data), i
