"""Decoded columns back to Record objects (the per-record poll() path): the Cython
``record_rows`` against its pure twin and against kafka-python's reading of the same
golden bytes."""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

from kproto import records
from kproto._backend import IS_PURE, backend
from kproto._pure.rows import record_rows as pure_rows
from kproto.columns import BinaryColumn, Record
from kproto.consumer.fetch_buffer import Collected
from tests.record_sets import batch_v2, read_with_kafka_python, sample_records

pytestmark = pytest.mark.skipif(IS_PURE, reason="compares the extension with its pure twin")


def decoded(n: int = 70, seed: int = 0, *, base_offset: int = 0):
    data = batch_v2(sample_records(n, seed), base_offset=base_offset)
    cols = records.decode(data)
    cols.topic, cols.partition = "tópic", 7
    return data, cols


@pytest.mark.parametrize(("lo", "hi"), [(0, 70), (0, 0), (3, 4), (10, 69), (69, 70)])
def test_matches_the_pure_twin_and_kafka_python(lo: int, hi: int) -> None:
    data, cols = decoded(base_offset=1_000_000_000_000)
    got = backend.record_rows(cols, lo, hi, Record, [])
    assert got == pure_rows(cols, lo, hi, Record, [])
    golden = read_with_kafka_python(data)[lo:hi]
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers)
            for r in got] == golden
    for r in got:
        assert type(r) is Record and r.topic == "tópic" and r.partition == 7
        assert type(r.headers) is list and all(type(h) is tuple for h in r.headers)
        assert r.key is None or type(r.key) is bytes
        assert r.value is None or type(r.value) is bytes


def test_appends_to_the_list_it_is_given() -> None:
    _, cols = decoded(10)
    out = ["x"]
    assert backend.record_rows(cols, 0, 3, Record, out) is out
    assert out[0] == "x" and [r.offset for r in out[1:]] == [0, 1, 2]


def test_large_offsets_nulls_and_undecodable_header_names() -> None:
    """int64 offsets (a large binary column), a validity bitmap, a header name that is
    not UTF-8 (replaced, as the pure twin does)."""
    _, cols = decoded(8)
    v = cols.value
    wide = BinaryColumn(v.offsets.astype(np.int64), v.data, v.validity, v.null_count)
    cols.value = wide
    names = cols.headers.keys
    names.data = names.data.copy()
    if len(names.data):
        names.data[0] = 0xFF
    got = backend.record_rows(cols, 0, 8, Record, [])
    assert got == pure_rows(cols, 0, 8, Record, [])
    assert any(r.value is None for r in got) and any("\ufffd" in h for r in got
                                                     for h, _ in r.headers)


def test_bad_arguments_raise() -> None:
    _, cols = decoded(5)
    for rows in (backend.record_rows, pure_rows):
        with pytest.raises(IndexError):
            rows(cols, 0, 6, Record, [])
        with pytest.raises(IndexError):
            rows(cols, 3, 2, Record, [])
        with pytest.raises(TypeError):
            rows(cols, 0, 1, tuple, [])


def test_no_reference_leaks_and_not_tracked_by_the_cycle_collector() -> None:
    _, cols = decoded(50)
    topic = cols.topic
    before = sys.getrefcount(topic)
    got = backend.record_rows(cols, 0, 50, Record, [])
    assert sys.getrefcount(topic) == before + 50
    assert not any(gc.is_tracked(r) for r in got)      # no cycle through a record
    del got
    assert sys.getrefcount(topic) == before


def test_collected_pieces_become_records_in_order() -> None:
    _, a = decoded(20)
    _, b = decoded(5, seed=3)
    b.partition = 8
    got = Collected([(a, 5, 20), (b, 0, 5)]).to_records()
    assert [(r.partition, r.offset) for r in got] == \
        [(7, o) for o in range(5, 20)] + [(8, o) for o in range(5)]


def test_records_and_their_headers_are_not_gc_tracked() -> None:
    """A poll's records, header lists and header pairs are not tracked by the cyclic
    GC (they hold only str/bytes/int/None): tracked, the header lists of the records
    a poll hands out survived the collections their allocation set off and were
    promoted until a full collection ran, every ~15,000 records (a quarter of
    poll()'s CPU); now making records leaves the oldest generation alone."""
    _, cols = decoded(70)
    got = backend.record_rows(cols, 0, 70, Record, [])
    assert any(r.headers for r in got) and any(not r.headers for r in got)
    for r in got:
        assert not gc.is_tracked(r) and not gc.is_tracked(r.headers)
        assert not any(gc.is_tracked(h) for h in r.headers)
    gc.collect()
    old = len(gc.get_objects(2))
    keep = [backend.record_rows(cols, 0, 70, Record, []) for _ in range(200)]
    gc.collect(1)                       # what survives generations 0 and 1 goes to 2
    assert len(keep) == 200 and len(gc.get_objects(2)) - old < 1000     # (14,000 records)


def test_decoded_columns_hold_no_gc_tracked_buffers() -> None:
    """The NumPy arrays of decoded columns own their memory directly (their base is
    the decode buffer's owner, which the cyclic GC does not track), not through a
    memoryview and a managed buffer: two tracked objects per column, ~290 alive at
    each collection of a consumer's poll loop with small Fetch answers, set off a
    full collection every ~12 of them."""
    _, cols = decoded(70)
    arrays = [cols.offset, cols.timestamp, cols.timestamp_type, cols.key.offsets,
              cols.key.data, cols.value.offsets, cols.value.data, cols.headers.offsets,
              cols.headers.keys.offsets, cols.headers.keys.data, cols.headers.values.data]
    for a in arrays:
        assert a.base is not None and not gc.is_tracked(a.base), type(a.base)
        assert a.flags.writeable and a.flags.c_contiguous
    assert cols.offset.tolist() == list(range(70))
