"""The Cython record loop's fast paths against the pure twin, in the same run: recycled
output blocks (the buffer pool), and the record shapes each fast path has to tell apart.

Every case decodes with ``kproto._codec`` and ``kproto._pure`` and compares every column,
buffer by buffer where the layout is fixed (offsets, timestamps, binary data).
"""

from __future__ import annotations

import threading
from functools import cache

import numpy as np
import pytest

from kproto import _codec, records
from kproto._pure import records as pure

from .record_sets import Rec, batch_v2, rows_of


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


@pytest.fixture
def pool():
    """A pool emptied before and after the test, at its default limit."""
    limit = records.buffer_pool()[0]
    records.buffer_pool(0)
    records.buffer_pool(limit)
    yield limit
    records.buffer_pool(0)
    records.buffer_pool(limit)


def test_released_columns_go_to_the_pool_and_the_next_decode_takes_them(pool) -> None:
    data = _big_set(3000, 1)
    cols = _codec.decode_records(data)
    value_bytes = cols.value.data.nbytes
    assert records.buffer_pool()[1:] == (0, 0) and value_bytes > 256 * 1024
    del cols
    limit, held, blocks = records.buffer_pool()
    assert limit == pool and blocks >= 1 and held >= value_bytes   # the smaller: malloc's
    again = _codec.decode_records(data)
    assert records.buffer_pool()[1] < held // 4      # taken again, not fresh blocks
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
    assert records.buffer_pool()[2] > 0


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
    records.buffer_pool(300 * 1024)
    del_me = _codec.decode_records(data)
    del del_me
    limit, held, _ = records.buffer_pool()
    assert limit == 300 * 1024 and held <= limit
    assert records.buffer_pool(0) == (0, 0, 0)
    del_me = _codec.decode_records(data)
    del del_me
    assert records.buffer_pool() == (0, 0, 0)       # off: blocks are freed


def test_decoding_threads_share_the_pool(pool) -> None:
    """Several threads decode (the GIL released) and release columns at once: every result
    equals the pure twin's."""
    inputs = [_big_set(2000 + 300 * i, 10 + i, nulls=bool(i % 2)) for i in range(4)]
    expected = [rows_of(pure.decode_records(d)) for d in inputs]
    failures: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for r in range(6):
                i = (k + r) % len(inputs)
                assert rows_of(_codec.decode_records(inputs[i])) == expected[i]
        except BaseException as exc:   # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]
