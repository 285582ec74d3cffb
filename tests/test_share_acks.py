"""Acknowledgement batches (KIP-932): kproto's column-wise encoder against a
line-by-line port of Java's ``Acknowledgements.getAcknowledgementBatches``
(clients/.../consumer/internals/Acknowledgements.java) on Hypothesis-generated
acknowledgements: the same batches, and they decode back to the same type per
offset. Plus the in-flight state an answer's AcquiredRecords make."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kproto.consumer.share_acks import (
    GAP,
    MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE,
    PENDING,
    AcknowledgeType,
    InFlight,
    decode_batches,
    encode_batches,
)


def java_batches(acks: dict[int, int]) -> list[dict]:
    """Java's getAcknowledgementBatches, ported as written (a TreeMap walk)."""
    batches: list[dict] = []
    if not acks:
        return batches
    current = None

    def flush(batch: dict) -> None:
        for b in optimise(batch):
            if can_single(b):
                del b["acknowledge_types"][1:]
            batches.append(b)

    for offset in sorted(acks):
        if current is None:
            current = {"first_offset": offset, "acknowledge_types": []}
        elif offset != current["last_offset"] + 1:
            flush(current)
            current = {"first_offset": offset, "acknowledge_types": []}
        current["last_offset"] = offset
        current["acknowledge_types"].append(acks[offset])
    flush(current)
    return batches


def optimise(batch: dict) -> list[dict]:
    """Java's maybeOptimiseAcknowledgementTypes."""
    out: list[dict] = []
    types = batch["acknowledge_types"]
    current_offset, start, same = batch["first_offset"], 0, 1
    i = 1
    while i < len(types):
        kind, prev = types[i], types[i - 1]
        if kind == prev and same >= MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE:
            while i < len(types):
                if types[i] != types[i - 1]:
                    break
                i += 1
                same += 1
            first_last = current_offset + i - same - start - 1
            if first_last >= current_offset:
                out.append({"first_offset": current_offset, "last_offset": first_last,
                            "acknowledge_types": list(types[start:i - same])})
            out.append({"first_offset": current_offset + i - same - start,
                        "last_offset": current_offset + i - start - 1,
                        "acknowledge_types": [kind]})
            same = 1
            current_offset = current_offset + i - start
            start = i
        elif kind == prev:
            same += 1
        else:
            same = 1
        i += 1                           # (Java's for-loop increment, after the while too)
    if start < len(types):
        out.append({"first_offset": current_offset,
                    "last_offset": current_offset + len(types) - start - 1,
                    "acknowledge_types": list(types[start:])})
    return out


def can_single(batch: dict) -> bool:
    types = batch["acknowledge_types"]
    return len(types) > 1 and all(t == types[0] for t in types)


KINDS = st.sampled_from([GAP, 1, 2, 3])


@st.composite
def acknowledgements(draw) -> dict[int, int]:
    """Offsets in runs with holes, each run of types made of runs of one type
    (long ones too: Java's threshold is 10)."""
    offset = draw(st.integers(0, 2**40))
    out: dict[int, int] = {}
    for _ in range(draw(st.integers(0, 6))):
        offset += draw(st.integers(0, 3))            # a hole (or none)
        for _ in range(draw(st.integers(1, 5))):
            kind = draw(KINDS)
            for _ in range(draw(st.sampled_from([1, 2, 9, 10, 11, 12, 30]))):
                out[offset] = kind
                offset += 1
    return out


@given(acknowledgements())
def test_batches_are_javas_and_decode_to_the_same_types(acks: dict[int, int]) -> None:
    offsets = np.array(sorted(acks), np.int64)
    types = np.array([acks[o] for o in sorted(acks)], np.int8)
    ours = encode_batches(offsets, types)
    assert ours == java_batches(acks)
    assert decode_batches(ours) == acks


@given(st.lists(st.booleans(), min_size=1, max_size=200), st.sampled_from([2, 3]))
def test_a_mask_encodes_as_runs(mask: list[bool], otherwise: int) -> None:
    """acknowledge_batch(accept=mask): what goes on the wire for a poll's records."""
    offsets = np.arange(100, 100 + len(mask), dtype=np.int64)
    types = np.where(np.array(mask), np.int8(1), np.int8(otherwise))
    ours = encode_batches(offsets, types)
    assert ours == java_batches(dict(zip(offsets.tolist(), types.tolist(), strict=True)))
    assert decode_batches(ours) == dict(zip(offsets.tolist(), types.tolist(), strict=True))
    if all(mask):
        assert ours == [{"first_offset": 100, "last_offset": 99 + len(mask),
                         "acknowledge_types": [1]}]


def test_in_flight_from_acquired_records() -> None:
    """Records of the answer's batches that another member acquired are not this
    consumer's; acquired offsets with no record are GAPs below where decoding
    stopped and released past it; offsets still held from an earlier answer are
    left to it."""
    ranges = [{"first_offset": 10, "last_offset": 12, "delivery_count": 1},
              {"first_offset": 15, "last_offset": 17, "delivery_count": 3}]
    records = np.array([9, 10, 11, 13, 14, 15, 16], np.int64)   # 12 compacted, 17 not decoded
    inflight, mine = InFlight.acquired(ranges, records, decoded_until=17)
    assert mine.tolist() == [False, True, True, False, False, True, True]
    assert inflight.offsets.tolist() == [10, 11, 12, 15, 16, 17]
    assert inflight.delivery_counts.tolist() == [1, 1, 1, 3, 3, 3]
    assert inflight.types.tolist() == [PENDING, PENDING, GAP, PENDING, PENDING,
                                       AcknowledgeType.RELEASE]
    offsets, types = inflight.take()          # the GAP and the release go at once
    assert (offsets.tolist(), types.tolist()) == ([12, 17], [GAP, 2])
    assert inflight.take()[0].tolist() == []
    again, mine = InFlight.acquired(ranges, records, 17, held=np.array([10, 11, 15, 16]))
    assert again.offsets.tolist() == [12, 17] and not mine.any()


def test_renew_is_sent_once_and_the_record_stays_pending() -> None:
    inflight, _ = InFlight.acquired(
        [{"first_offset": 0, "last_offset": 1, "delivery_count": 1}],
        np.array([0, 1]), 2)
    inflight.deliver(np.array([0, 1]))
    inflight.types[0] = AcknowledgeType.RENEW
    assert inflight.take()[1].tolist() == [AcknowledgeType.RENEW]
    assert inflight.unacknowledged() == 2 and not inflight.done
    inflight.acknowledge_all(AcknowledgeType.ACCEPT)
    assert inflight.take()[1].tolist() == [1, 1] and inflight.done


def test_a_known_layout() -> None:
    """Java's layout, spelled out: a run of more than 10 of one type is its own
    single-type batch; shorter runs share a batch with a type per offset; a hole
    starts a new batch; a batch of one type is sent with that one type."""
    acks = {**{o: 1 for o in range(0, 12)}, 12: 2, 13: 2, 14: 2, 15: 1, 16: 1,
            **{o: 3 for o in range(20, 25)}}
    expected = [{"first_offset": 0, "last_offset": 11, "acknowledge_types": [1]},
                {"first_offset": 12, "last_offset": 16, "acknowledge_types": [2, 2, 2, 1, 1]},
                {"first_offset": 20, "last_offset": 24, "acknowledge_types": [3]}]
    assert java_batches(acks) == expected
    offsets = np.array(sorted(acks), np.int64)
    assert encode_batches(offsets, np.array([acks[o] for o in sorted(acks)], np.int8)) \
        == expected
    assert [int(k) for k in AcknowledgeType] == [1, 2, 3, 4]      # the wire ids
