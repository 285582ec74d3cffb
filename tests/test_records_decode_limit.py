"""``records.decode(stop_at_limit=True)``: an answer is decoded up to the compressed
batch that would take it past ``max_decompressed``, and the next Fetch starts at that
batch (commit f4dd018). Read as a consumer reads: decoding from an offset, then again
from each ``next_offset`` over what a broker answers from there, must give exactly the
records one unlimited decode gives, never skip or repeat one, and always move on or
raise DecompressionLimitError (never an empty answer that asks for itself again).
Both backends (the Cython decoder and its pure twin) must agree on every input.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto import Consumer, Producer, TopicPartition
from kproto import _codec as cython
from kproto._pure import records as pure
from kproto.errors import CorruptRecordError, DecompressionLimitError

from .record_sets import Rec, batch_v2, control_batch, message_set, patch_v2_attributes, rows_of

BIG = 1 << 40                      # a cap nothing here reaches


def _recs(n: int, size: int, seed: int = 0) -> list[Rec]:
    return [Rec(b"k%d" % (seed + i), bytes([97 + (seed + i) % 26]) * size, [],
                1_700_000_000_000 + seed + i) for i in range(n)]


@pytest.fixture(params=["pure", "cython"])
def impl(request: pytest.FixtureRequest):
    return pure if request.param == "pure" else cython


# ---------------------------------------------------------------- no progress, no hang

def test_batches_wholly_before_the_start_do_not_make_an_answer_that_asks_for_itself(impl):
    """A batch that ends before the start offset (a broker answering from earlier
    than asked, as one that sends its whole log) uses up the cap, and the first batch
    at the start does not fit in what is left: nothing at or past the start was
    decoded, so stopping there would hand back no records and ``next_offset`` equal
    to the start: the consumer fetches the same offset again, for ever. It raises
    DecompressionLimitError as a first batch past the cap does. (Before: 0 records,
    next_offset == start_offset.)"""
    below = batch_v2(_recs(10, 10_000), base_offset=100, codec=3)       # 100..109
    at = batch_v2(_recs(10, 10_000, 10), base_offset=110, codec=3)      # 110..119
    whole = impl.decode_records(below + at, start_offset=110)
    assert [int(o) for o in whole.offset] == list(range(110, 120))
    with pytest.raises(DecompressionLimitError):
        impl.decode_records(below + at, start_offset=110, max_decompressed=150_000,
                            stop_at_limit=True)
    # a batch at the start alone past the cap, after one before the start
    plain = batch_v2(_recs(10, 100), base_offset=100)
    with pytest.raises(DecompressionLimitError):
        impl.decode_records(plain + at, start_offset=110, max_decompressed=50_000,
                            stop_at_limit=True)
    # ...and after a batch that reaches the start, it stops there (the next Fetch
    # starts at it, and raises for it then)
    part = impl.decode_records(batch_v2(_recs(10, 100), base_offset=105) + at,
                               start_offset=110, max_decompressed=50_000, stop_at_limit=True)
    assert [int(o) for o in part.offset] == list(range(110, 115)) and part.next_offset == 115


@pytest.mark.brokers("tansu", reason="one broker is enough: the answers are rewritten")
def test_a_consumer_never_refetches_an_answer_that_stops_before_its_start(broker,
                                                                          unique_topic):
    """A broker that answers, before the batch asked for, a batch that ends before it
    (rewritten into Tansu's answers here) with both past max_decompressed_bytes:
    poll and read_range raise DecompressionLimitError instead of fetching the same
    offset again and again, returning nothing (before: poll returned no records until
    the deadline; read_range timed out with 'no records')."""
    with Producer(bootstrap_servers=broker.bootstrap, compression_type="lz4") as p:
        for lo in (0, 10):
            p.send_batch(unique_topic, pa.table({"value": [b"%02d" % i + b"x" * 20_000
                                                           for i in range(lo, lo + 10)]}),
                         partition=0).result(10)

    rewritten: list[int] = []

    def prepend_an_earlier_batch(key, version, body):
        if key == 1:                                   # Fetch
            for topic in body["responses"]:
                for part in topic["partitions"]:
                    recs = part.get("records")
                    if recs and len(recs) >= 12:
                        first = struct.unpack_from(">q", recs, 0)[0]
                        if first >= 10:
                            rewritten.append(first)
                            part["records"] = batch_v2(_recs(10, 20_000), base_offset=first - 10,
                                                       codec=3) + bytes(recs)
        return body

    with broker.proxied() as proxied:
        proxied.proxy.answer_hook = prepend_an_earlier_batch
        config = {"bootstrap_servers": proxied.bootstrap, "max_decompressed_bytes": 300_000,
                  "fetch_max_wait_ms": 100}
        with Consumer(**config) as c:
            c.assign([TopicPartition(unique_topic, 0)])
            c.seek(TopicPartition(unique_topic, 0), 10)
            deadline = time.monotonic() + 10
            with pytest.raises(DecompressionLimitError):
                while time.monotonic() < deadline:
                    assert not c.poll(200)
            with pytest.raises(DecompressionLimitError):
                c.read_range(unique_topic, {0: (10, 20)}, timeout_ms=10_000)
        assert rewritten and set(rewritten) == {10}


# ---------------------------------------------------------------- generated record sets

@dataclass
class Piece:
    """One record set in a generated log: its bytes, its first and last offset, the
    bytes it decompresses to (0: not compressed) and, for transactions, the aborted
    transaction it ends (``(producer_id, first_offset)``, markers only)."""
    data: bytes
    first: int
    last: int
    inflated: int
    ends_aborted: tuple[int, int] | None = None


def _empty_batch(base_offset: int, last_delta: int) -> bytes:
    """A v2 batch whose records compaction removed, its lastOffsetDelta kept."""
    batch = bytearray(batch_v2([], base_offset=base_offset))
    struct.pack_into(">i", batch, 23, last_delta)
    return patch_v2_attributes(bytes(batch), 0)


_V2 = st.tuples(st.just("v2"), st.sampled_from([0, 1, 2, 3, 4]), st.integers(1, 4),
              st.sampled_from([10, 700, 1000]), st.sampled_from([None, 1, 2]),
              st.sampled_from([1, 1, 3]))
_PACKED = st.tuples(st.just("v2"), st.sampled_from([1, 2, 3, 4]), st.integers(1, 4),
                    st.sampled_from([700, 1000]), st.sampled_from([None, 1, 2]),
                    st.just(1))
_SHAPES = st.one_of(
    _V2, _PACKED, _PACKED,
    st.tuples(st.just("legacy"), st.sampled_from([0, 1]), st.sampled_from([0, 1, 2, 3]),
              st.integers(1, 3), st.sampled_from([10, 1500])),
    st.tuples(st.just("marker"), st.sampled_from([1, 2]), st.booleans()),
    st.tuples(st.just("marker"), st.sampled_from([1, 2]), st.just(True)),
    st.tuples(st.just("empty"), st.integers(0, 3)),
    st.tuples(st.just("gap"), st.integers(1, 3)),
)


def _build(shapes: list[tuple]) -> list[Piece]:
    """The log the shapes describe, offsets increasing from 0; a marker ends its
    producer's open transaction (none open: it is left out)."""
    pieces: list[Piece] = []
    offset, seed, open_txns = 0, 0, {}
    for shape in shapes:
        kind = shape[0]
        if kind == "gap":
            offset += shape[1]
            continue
        if kind == "v2":
            _, codec, n, size, pid, step = shape
            recs = _recs(n, size, seed)
            data = batch_v2(recs, base_offset=offset, codec=codec, offset_step=step,
                            transactional=pid is not None,
                            producer_id=-1 if pid is None else pid)
            inflated = len(batch_v2(recs, offset_step=step)) - 61 if codec else 0
            if pid is not None:
                open_txns.setdefault(pid, offset)
            last = offset + (n - 1) * step
            pieces.append(Piece(data, offset, last, inflated))
        elif kind == "legacy":
            _, magic, codec, n, size = shape
            recs = _recs(n, size, seed)
            data = message_set(recs, magic=magic, base_offset=offset, codec=codec)
            if codec:
                inflated = len(message_set(recs, magic=magic, base_offset=offset))
                pieces.append(Piece(data, offset, offset + n - 1, inflated))
            else:                       # one record set per message
                at = 0
                for i in range(n):
                    size_i = struct.unpack_from(">i", data, at + 8)[0] + 12
                    pieces.append(Piece(data[at:at + size_i], offset + i, offset + i, 0))
                    at += size_i
            last = offset + n - 1
        elif kind == "marker":
            _, pid, abort = shape
            if pid not in open_txns:
                continue
            first = open_txns.pop(pid)
            pieces.append(Piece(control_batch(offset, pid, abort), offset, offset, 0,
                                (pid, first) if abort else None))
            last = offset
        else:
            last = offset + shape[1]
            pieces.append(Piece(_empty_batch(offset, shape[1]), offset, last, 0))
        seed += 10
        offset = last + 1
    return pieces


def _aborted(pieces: list[Piece], fetch_offset: int) -> list[tuple[int, int]]:
    """The aborted list a broker sends with a Fetch from ``fetch_offset``: the aborted
    transactions whose marker is at or after it (Kafka's collectAbortedTransactions)."""
    return [p.ends_aborted for p in pieces if p.ends_aborted and p.last >= fetch_offset]


def _outcome(mod, data: bytes, **kw):
    try:
        cols = mod.decode_records(data, **kw)
    except (DecompressionLimitError, CorruptRecordError) as exc:
        return type(exc), exc.offset
    return rows_of(cols), cols.next_offset


@settings(max_examples=500, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(shapes=st.lists(_SHAPES, min_size=2, max_size=10), data=st.data())
def test_read_in_pieces_is_one_unlimited_read_and_the_backends_agree(shapes, data):
    """From a start offset anywhere in a generated log (v2 batches of every codec,
    compacted and empty batches, offset gaps, legacy messages and wrappers,
    transactions and their markers), with a cap around the batches' sizes:

    * the Cython decoder and the pure twin give the same records and next_offset,
      or the same error, with stop_at_limit on and off, read_committed or not,
      binary_view or not;
    * fetching as a consumer does - from the start, then from each next_offset, the
      broker answering from the record set that holds it, with the aborted list for
      that offset - gives exactly the records of one decode without a cap, each
      answer moving on, unless the answer's first record set alone is past the cap,
      which raises DecompressionLimitError;
    * with a broker that answers from earlier record sets too, each answer moves on
      or raises DecompressionLimitError; what was read is the start of the records."""
    pieces = _build(shapes)
    if not pieces:
        return
    end = pieces[-1].last + 1
    start = data.draw(st.integers(0, end) | st.sampled_from(
        [p.first for p in pieces[:len(pieces) // 2 + 1]]), label="start")
    read_committed = data.draw(st.booleans(), label="read_committed")
    binary_view = data.draw(st.booleans(), label="binary_view")
    sums = [sum(p.inflated for p in pieces[:i + 1]) for i in range(len(pieces))]
    sizes = sorted({p.inflated for p in pieces} | set(sums))   # a batch's, an answer's
    cap = max(0, data.draw(st.sampled_from(sizes), label="cap")
              + data.draw(st.sampled_from([-1, 0, 1]), label="nudge"))
    if data.draw(st.booleans(), label="every batch fits"):
        rest = sum(p.inflated for p in pieces if p.last >= start)
        biggest = max(p.inflated for p in pieces)
        cap = data.draw(st.integers(biggest, max(biggest, rest // 2)), label="cap")

    def answer(fetch_offset: int, earlier: int = 0) -> bytes:
        i = next((i for i, p in enumerate(pieces) if p.last >= fetch_offset), len(pieces))
        return b"".join(p.data for p in pieces[max(0, i - earlier):])

    def decode(mod, buf: bytes, fetch_offset: int, **kw):
        return _outcome(mod, buf, start_offset=fetch_offset, binary_view=binary_view,
                        aborted_transactions=_aborted(pieces, fetch_offset)
                        if read_committed else None, **kw)

    whole = b"".join(p.data for p in pieces)
    for stop_at_limit in (False, True):
        for at in (start, 0):
            ours = decode(cython, whole, at, max_decompressed=cap, stop_at_limit=stop_at_limit)
            assert ours == decode(pure, whole, at, max_decompressed=cap,
                                  stop_at_limit=stop_at_limit)
    expected, next_offset = decode(cython, answer(start), start, max_decompressed=BIG)
    assert next_offset == max(start, end)
    earlier = data.draw(st.integers(0, 2), label="earlier record sets answered")
    got, position = [], start
    while position < end:
        outcome = decode(cython, answer(position, earlier), position, max_decompressed=cap,
                         stop_at_limit=True)
        assert outcome == decode(pure, answer(position, earlier), position,
                                 max_decompressed=cap, stop_at_limit=True)
        if outcome[0] is DecompressionLimitError:
            first = next(p for p in pieces if p.last >= position)
            assert earlier or first.inflated > cap
            break
        rows, nxt = outcome
        assert nxt > position                  # never an answer that asks for itself
        got += rows
        position = nxt
    else:
        assert got == expected
    assert got == expected[:len(got)]
