"""RecordColumns.concat (what poll_batch joins a poll's pieces with) against Arrow's
own concatenation of each part's batch, on Hypothesis-generated parts: one topic
and partition each (a poll's pieces), nulls, headers, empty parts, and parts that
are themselves concatenations of several topics."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto import records
from kproto.columns import RecordColumns

maybe_bytes = st.one_of(st.none(), st.binary(max_size=12))
rows = st.lists(st.tuples(maybe_bytes, maybe_bytes,
                          st.lists(st.tuples(st.text(max_size=4), maybe_bytes), max_size=2)),
                max_size=6)


@st.composite
def part(draw: st.DrawFn) -> RecordColumns:
    topic = draw(st.sampled_from(["a", "topic-b", "c"]))
    partition, base = draw(st.integers(0, 5)), draw(st.integers(0, 1 << 40))
    got = draw(rows)
    data = records.encode(key=[k for k, _, _ in got], value=[v for _, v, _ in got],
                          headers=[h for _, _, h in got], base_offset=base) if got else b""
    return records.decode(data, topic=topic, partition=partition, start_offset=base,
                          check_crc=False)


parts = st.lists(part(), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(parts, min_size=1, max_size=4))
def test_concat_is_arrows_concatenation(groups: list[list[RecordColumns]]) -> None:
    pieces = [RecordColumns.concat(g) for g in groups]     # some of several topics
    joined = RecordColumns.concat(pieces)
    expected = pa.concat_batches([p.to_arrow() for p in pieces])
    assert joined.to_arrow().equals(expected)
    assert len(joined) == sum(len(p) for p in pieces)
