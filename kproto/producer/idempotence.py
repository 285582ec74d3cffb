"""The idempotent producer's state: its producer id and epoch, and per partition the
sequence numbers given out, in flight and acknowledged.

Modelled on the idempotence part of the Java client's ``TransactionManager``
(the transactional producer is to build on it):

- every partition has a next sequence, a last acknowledged sequence and the
  batches in flight by sequence (a batch is "in flight" from the moment it gets
  its sequence until it is written or failed for good, retries included);
- a batch that fails for good leaves a gap in the partition's sequences. When
  the broker refused it (a definite error), the gap is certain: the partition
  needs a new producer epoch (:meth:`IdempotenceState.request_reset`). When its
  fate is unknown (delivery timeout, retries exhausted after a lost answer), the
  partition is *unresolved*: no new batch is sent to it until its batches in
  flight are done; then, if the last acknowledged sequence is not the one before
  the next sequence, it needs a new epoch too (Java's ``maybeResolveSequences``);
- OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID answers are retried,
  asking for a new epoch where they show a real gap (Java's ``canRetry``);
- once a new producer id/epoch is set, the partitions that asked for it restart
  their batches in flight at sequence 0 (Java's ``startSequencesAtBeginning``);
  the other partitions move to it, from sequence 0, as soon as they have
  nothing in flight (Java's ``maybeUpdateProducerIdAndEpoch``).

Java bumps an idempotent producer's epoch on the client; Tansu refuses such a
bump (PRODUCER_FENCED), and for a producer without a transactional id Kafka's
InitProducerId hands out a new producer id whatever id and epoch it is sent.
So here a "new epoch" is a new producer id from InitProducerId, which every
broker accepts from sequence 0; the sender asks for it when
:attr:`IdempotenceState.needs_producer_id` is set.

The state belongs to the sender thread: nothing here locks.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..errors import ErrorCode

__all__ = ["IdempotenceState", "next_sequence"]

log = logging.getLogger("kproto.producer")

OUT_OF_ORDER_SEQUENCE_NUMBER = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
UNKNOWN_PRODUCER_ID = ErrorCode.UNKNOWN_PRODUCER_ID


def next_sequence(sequence: int, count: int) -> int:
    """``sequence + count``, wrapping past Int32.MAX to 0 as Kafka's sequences do."""
    return (sequence + count) & 0x7FFFFFFF


class SequencedBatch(Protocol):
    """What the state needs of a batch (kproto.producer's ``_Batch`` has it)."""

    topic: str
    partition: int
    count: int
    #: -1 until the state assigns one
    sequence: int
    producer_id: int
    producer_epoch: int
    #: set when the state gave the batch new sequences after it was first sent
    sequence_reset: bool


class _Partition:
    __slots__ = ("producer_id", "epoch", "next_sequence", "last_acked", "in_flight")

    def __init__(self, producer_id: int, epoch: int) -> None:
        self.producer_id, self.epoch = producer_id, epoch
        self.next_sequence = 0
        self.last_acked = -1
        #: batches with a sequence and not yet done, by sequence
        self.in_flight: list[Any] = []


class IdempotenceState:
    """Producer id, epoch and sequence numbers of an idempotent producer."""

    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self._partitions: dict[tuple[str, int], _Partition] = {}
        #: partition -> the sequence after its last batch whose fate is unknown
        self._unresolved: dict[tuple[str, int], int] = {}
        #: partitions whose batches in flight restart at 0 with the next producer id
        self._to_rewrite: set[tuple[str, int]] = set()
        self._reset_required = False

    # -- producer id

    @property
    def needs_producer_id(self) -> bool:
        """True until the first InitProducerId, and after a partition asked for a
        new epoch: nothing is sent until :meth:`set_producer_id`."""
        return self.producer_id < 0 or self._reset_required

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        """Take the id and epoch InitProducerId gave; restart the sequences of the
        partitions that asked for it."""
        self.producer_id, self.epoch = producer_id, epoch
        for tp in self._to_rewrite:
            self._start_at_beginning(tp)
        self._to_rewrite.clear()
        self._reset_required = False
        log.debug("producer id %d epoch %d", producer_id, epoch)

    def reset_sequences(self) -> None:
        """Forget every partition's sequences (none may be in flight): a transactional
        producer's new epoch starts them all at 0 (Java's resetSequenceNumbers)."""
        self._partitions.clear()
        self._unresolved.clear()
        self._to_rewrite.clear()

    def request_reset(self, tp: tuple[str, int]) -> None:
        """The partition has a gap in its sequences: get a new producer id/epoch and
        restart the partition's sequences at 0 (Java's requestEpochBumpForPartition)."""
        log.info("%s[%d]: sequence gap, the producer takes a new producer id", *tp)
        self._reset_required = True
        self._to_rewrite.add(tp)

    def _start_at_beginning(self, tp: tuple[str, int]) -> None:
        old = self._partitions.get(tp)
        part = self._partitions[tp] = _Partition(self.producer_id, self.epoch)
        for b in old.in_flight if old is not None else ():
            b.sequence, b.producer_id, b.producer_epoch = \
                part.next_sequence, self.producer_id, self.epoch
            b.sequence_reset = True
            part.next_sequence = next_sequence(part.next_sequence, b.count)
            part.in_flight.append(b)
        self._unresolved.pop(tp, None)

    # -- sending

    def can_send(self, batch: SequencedBatch) -> bool:
        """May ``batch`` (the first queued for its partition) be sent now?"""
        if self.needs_producer_id:
            return False
        part = self._partitions.get((batch.topic, batch.partition))
        if batch.sequence >= 0:
            # a retry goes only as the first in flight of its partition (keeps order)
            return part is None or not part.in_flight or part.in_flight[0] is batch
        if part is None:
            return True
        if part.in_flight and self._stale(part):
            return False        # its sequence 0 with the new id could overtake them
        # earlier sequences of unknown fate: wait until they are resolved
        return (batch.topic, batch.partition) not in self._unresolved

    def assign(self, batch: SequencedBatch) -> None:
        """Give ``batch`` (without a sequence) the partition's next sequences."""
        tp = (batch.topic, batch.partition)
        part = self._partitions.get(tp)
        if part is None or (self._stale(part) and not part.in_flight):
            part = self._partitions[tp] = _Partition(self.producer_id, self.epoch)
        batch.sequence = part.next_sequence
        batch.producer_id, batch.producer_epoch = part.producer_id, part.epoch
        part.next_sequence = next_sequence(part.next_sequence, batch.count)
        part.in_flight.append(batch)

    def split(self, batch: SequencedBatch, parts: list[Any]) -> None:
        """``batch`` was too large and is re-sent as ``parts`` (its records, in
        order): they take its sequence range, id and epoch (as Java's
        ProducerBatch.split does; the broker refused the whole batch)."""
        part = self._partitions.get((batch.topic, batch.partition))
        seq = batch.sequence
        for p in parts:
            p.sequence, p.producer_id, p.producer_epoch = \
                seq, batch.producer_id, batch.producer_epoch
            p.sequence_reset = batch.sequence_reset
            seq = next_sequence(seq, p.count)
        if part is not None and batch in part.in_flight:
            i = part.in_flight.index(batch)
            part.in_flight[i:i + 1] = parts

    # -- outcomes

    def completed(self, batch: SequencedBatch) -> None:
        """The broker wrote ``batch`` (or had it already: DUPLICATE_SEQUENCE_NUMBER)."""
        part = self._remove(batch)
        if part is not None and (batch.producer_id, batch.producer_epoch) == \
                (part.producer_id, part.epoch):
            part.last_acked = max(part.last_acked, next_sequence(batch.sequence,
                                                                 batch.count - 1))

    def failed(self, batch: SequencedBatch, *, refused: bool) -> None:
        """``batch`` failed for good: ``refused`` when the broker answered that it
        did not write it, else its fate is unknown (Java's handleFailedBatch)."""
        part = self._remove(batch)
        if part is None or batch.sequence < 0:
            return
        tp = (batch.topic, batch.partition)
        if refused:
            self.request_reset(tp)
        else:
            after = next_sequence(batch.sequence, batch.count)
            self._unresolved[tp] = max(self._unresolved.get(tp, 0), after)

    def can_retry(self, batch: SequencedBatch, error_code: int) -> bool | None:
        """For OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID: True (retry,
        after a new producer id where the error shows a real gap, Java's
        canRetry); None for other errors (retriable or not as the error says)."""
        tp = (batch.topic, batch.partition)
        if error_code == UNKNOWN_PRODUCER_ID:
            # the broker lost this producer's state: start again from sequence 0
            if not batch.sequence_reset:
                self.request_reset(tp)
            return True
        if error_code == OUT_OF_ORDER_SEQUENCE_NUMBER:
            unresolved = self._unresolved.get(tp)
            part = self._partitions.get(tp)
            last = part.last_acked if part is not None else -1
            is_next = batch.sequence == next_sequence(last, 1)
            if unresolved is None and (batch.sequence_reset or not is_next):
                return True     # an earlier batch is not written yet: wait for it
            if unresolved is None or unresolved == batch.sequence:
                self.request_reset(tp)      # a real gap before this batch
            return True
        return None

    def resolve(self) -> None:
        """Settle the unresolved partitions that have nothing in flight any more
        (Java's maybeResolveSequences)."""
        for tp in list(self._unresolved):
            part = self._partitions.get(tp)
            if part is not None and part.in_flight:
                continue
            del self._unresolved[tp]
            if part is not None and part.next_sequence != next_sequence(part.last_acked, 1):
                self.request_reset(tp)

    def _remove(self, batch: SequencedBatch) -> _Partition | None:
        part = self._partitions.get((batch.topic, batch.partition))
        if part is not None and batch in part.in_flight:
            part.in_flight.remove(batch)
        return part

    def _stale(self, part: _Partition) -> bool:
        return (part.producer_id, part.epoch) != (self.producer_id, self.epoch)
