"""Acknowledgements of a share group's records (KIP-932), column-wise.

A share consumer acquires records for a while (the broker's acquisition lock)
and tells the broker what became of each: accepted (done), released (deliver
it again), rejected (never again) or, where the broker has it (ShareFetch /
ShareAcknowledge v2+, KIP-1222), renewed (keep the lock longer). What it
acquired is an :class:`InFlight` per partition: the acquired offsets, the
delivery count of each and the acknowledgement recorded so far (``PENDING``
until there is one), all NumPy arrays, so that a whole Arrow batch - or a
boolean mask over it - is acknowledged in a few vectorised steps.

On the wire an acknowledgement is a list of *acknowledgement batches*
``(first_offset, last_offset, acknowledge_types)``: one type for the whole
range, or one type per offset. :func:`encode_batches` builds them as Java's
``Acknowledgements.getAcknowledgementBatches`` does: a batch per run of
consecutive offsets; inside it, every run of more than
:data:`MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE` records of one type split out
as a batch of its own with a single type; a batch whose types are all the same
sent with that one type. Offsets the broker acquired but sent no record for
(a compacted log, control records) are acknowledged as ``GAP``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["AcknowledgeType", "GAP", "PENDING", "MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE",
           "InFlight", "encode_batches", "decode_batches"]

#: The type of an offset acquired with no record in the answer (Java's ACKNOWLEDGE_TYPE_GAP).
GAP = 0
#: Not acknowledged yet (never sent).
PENDING = -1
#: Java's threshold: a run of more records of one type than this is a batch of its own.
MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE = 10


class AcknowledgeType(enum.IntEnum):
    """What became of a delivered record (Java's ``AcknowledgeType``; the wire ids)."""

    #: Processed: the broker never delivers it again.
    ACCEPT = 1
    #: Not processed: delivered again (to any member), its delivery count one higher.
    RELEASE = 2
    #: Unprocessable: never delivered again (it does not count as processed).
    REJECT = 3
    #: Still being processed: the acquisition lock is extended (KIP-1222; ShareFetch
    #: and ShareAcknowledge v2+ only).
    RENEW = 4


def encode_batches(offsets: np.ndarray, types: np.ndarray) -> list[dict[str, Any]]:
    """The acknowledgement batches of ``offsets`` (int64, strictly increasing) with
    ``types`` (their acknowledge type each, ``GAP`` included), as the protocol's
    ``{"first_offset", "last_offset", "acknowledge_types"}`` dicts, in Java's layout
    (see the module docstring)."""
    n = len(offsets)
    if n == 0:
        return []
    offsets = np.asarray(offsets, np.int64)
    types = np.asarray(types, np.int8)
    # a run: consecutive offsets of one type; a segment: consecutive offsets
    new_segment = np.empty(n, bool)
    new_segment[0] = True
    np.not_equal(offsets[1:], offsets[:-1] + 1, out=new_segment[1:])
    new_run = new_segment.copy()
    new_run[1:] |= types[1:] != types[:-1]
    run_starts = np.flatnonzero(new_run)
    run_ends = np.append(run_starts[1:], n)
    long_run = (run_ends - run_starts) > MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE
    out: list[dict[str, Any]] = []
    begin = -1                      # start of the open batch of short runs (-1: none)
    for start, end, long, segment_start in zip(run_starts.tolist(), run_ends.tolist(),
                                               long_run.tolist(),
                                               new_segment[run_starts].tolist(), strict=True):
        if begin >= 0 and (long or segment_start):
            out.append(_batch(offsets, types, begin, start))
            begin = -1
        if long:
            out.append({"first_offset": int(offsets[start]),
                        "last_offset": int(offsets[end - 1]),
                        "acknowledge_types": [int(types[start])]})
        elif begin < 0:
            begin = start
    if begin >= 0:
        out.append(_batch(offsets, types, begin, n))
    return out


def _batch(offsets: np.ndarray, types: np.ndarray, lo: int, hi: int) -> dict[str, Any]:
    """Rows ``lo:hi`` (consecutive offsets) as one batch: one type if they share it."""
    kinds = types[lo:hi]
    same = bool((kinds == kinds[0]).all())
    return {"first_offset": int(offsets[lo]), "last_offset": int(offsets[hi - 1]),
            "acknowledge_types": [int(kinds[0])] if same else kinds.tolist()}


def decode_batches(batches: list[dict[str, Any]]) -> dict[int, int]:
    """``{offset: acknowledge type}`` of acknowledgement batches (what a broker reads
    from them); ValueError for a batch whose types fit neither form."""
    out: dict[int, int] = {}
    for b in batches:
        first, last, kinds = b["first_offset"], b["last_offset"], list(b["acknowledge_types"])
        span = last - first + 1
        if span < 1 or (len(kinds) != 1 and len(kinds) != span):
            raise ValueError(f"acknowledgement batch {first}-{last} has {len(kinds)} types")
        for i in range(span):
            out[first + i] = kinds[0] if len(kinds) == 1 else kinds[i]
    return out


@dataclass(eq=False)
class InFlight:
    """What one partition's answer acquired for this consumer and what became of it.

    ``offsets`` are every acquired offset in order; ``delivery_counts`` their
    delivery count; ``types`` the acknowledgement recorded for each (``PENDING``,
    ``GAP`` for an offset with no record, else an :class:`AcknowledgeType`);
    ``delivered`` which of them were handed to the application (a record not
    handed out yet cannot be acknowledged by it). ``sent`` marks acknowledgements
    already taken for sending, so that each goes to the broker once.
    """

    offsets: np.ndarray
    delivery_counts: np.ndarray
    types: np.ndarray
    delivered: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    sent: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def __post_init__(self) -> None:
        if len(self.delivered) != len(self.offsets):
            self.delivered = np.zeros(len(self.offsets), bool)
        if len(self.sent) != len(self.offsets):
            self.sent = np.zeros(len(self.offsets), bool)

    @classmethod
    def acquired(cls, ranges: list[dict[str, Any]], record_offsets: np.ndarray,
                 decoded_until: int, held: np.ndarray | None = None
                 ) -> tuple[InFlight, np.ndarray]:
        """From an answer's AcquiredRecords ``ranges`` and the offsets of the records
        it carried (decoded up to ``decoded_until``): the in-flight state and which
        records are this consumer's (records of the same batches acquired by others
        are not). An acquired offset with no record below ``decoded_until`` is a
        GAP (a compacted or control record), acknowledged with the next send; one
        at or past it was not decoded (a decompression bound) and is released, so
        the broker delivers it again. Offsets in ``held`` (acquired by an earlier
        answer and still this consumer's: librdkafka's mock sends them again with
        every answer) are left out."""
        if not ranges:
            empty = np.zeros(0, np.int64)
            return cls(empty, np.zeros(0, np.int16), np.zeros(0, np.int8)), \
                np.zeros(len(record_offsets), bool)
        firsts = np.array([r["first_offset"] for r in ranges], np.int64)
        lasts = np.array([r["last_offset"] for r in ranges], np.int64)
        counts = np.array([r["delivery_count"] for r in ranges], np.int16)
        order = np.argsort(firsts, kind="stable")
        firsts, lasts, counts = firsts[order], lasts[order], counts[order]
        lengths = np.maximum(lasts - firsts + 1, 0)
        total = int(lengths.sum())
        starts = np.repeat(firsts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        offsets = starts + np.arange(total, dtype=np.int64)
        offsets, first_seen = np.unique(offsets, return_index=True)   # overlaps: once
        dcounts = np.repeat(counts, lengths)[first_seen]
        if held is not None and len(held):
            new = ~np.isin(offsets, held)
            offsets, dcounts = offsets[new], dcounts[new]
        types = np.full(len(offsets), GAP, np.int8)
        record_offsets = np.asarray(record_offsets, np.int64)
        pos = np.searchsorted(offsets, record_offsets)
        pos_clipped = np.minimum(pos, max(len(offsets) - 1, 0))
        mine = (pos < len(offsets)) & (offsets[pos_clipped] == record_offsets) \
            if len(offsets) else np.zeros(len(record_offsets), bool)
        # a record delivered twice in one answer (a damaged batch) counts once
        if mine.any():
            idx = pos[mine]
            dup = np.zeros(len(idx), bool)
            dup[1:] = idx[1:] == idx[:-1]
            if dup.any():
                mine_idx = np.flatnonzero(mine)
                mine[mine_idx[dup]] = False
        types[offsets >= decoded_until] = AcknowledgeType.RELEASE
        types[pos[mine]] = PENDING
        return cls(offsets, dcounts, types), mine

    def __len__(self) -> int:
        return len(self.offsets)

    def rows_of(self, offsets: np.ndarray) -> np.ndarray:
        """The index of each of ``offsets`` here; -1 where it is not in flight."""
        offsets = np.asarray(offsets, np.int64)
        if not len(self.offsets):
            return np.full(len(offsets), -1, np.int64)
        pos = np.searchsorted(self.offsets, offsets)
        clipped = np.minimum(pos, len(self.offsets) - 1)
        return np.where(self.offsets[clipped] == offsets, clipped, -1)

    def deliver(self, rows: np.ndarray) -> None:
        """These rows were handed to the application."""
        self.delivered[rows] = True

    def unacknowledged(self) -> int:
        """How many records handed out have no acknowledgement yet."""
        return int((self.delivered & (self.types == PENDING)).sum())

    def acknowledge_all(self, kind: int) -> None:
        """Every record handed out and not acknowledged: ``kind`` (implicit mode)."""
        self.types[self.delivered & (self.types == PENDING)] = kind

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, types) acknowledged and not sent yet, marked as sent. A RENEW
        is sent once and leaves its record pending (it still has to be
        acknowledged)."""
        ready = ~self.sent & (self.types != PENDING)
        out = self.offsets[ready], self.types[ready]
        renew = ready & (self.types == AcknowledgeType.RENEW)
        self.sent |= ready & ~renew
        self.types[renew] = PENDING
        return out

    @property
    def done(self) -> bool:
        """Every acquired offset acknowledged and sent (nothing left to do here)."""
        return bool(self.sent.all())
