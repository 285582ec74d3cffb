"""Small value types every layer shares; this module imports nothing of kproto.

- :class:`TopicPartition`, :class:`OffsetAndTimestamp` (public, re-exported by
  :mod:`kproto` and :mod:`kproto.consumer`);
- :class:`OffsetAndMetadata`, :class:`ConsumerGroupMetadata`: what a
  transactional producer commits, and for which group member;
- ``EARLIEST``/``LATEST``: ListOffsets' timestamps for the log start and end;
- topic-id helpers: Fetch v13+ and other requests name topics by id;
- :class:`SubscriptionState`: what a consumer reads (assignment, positions,
  paused partitions), owned by the consumer and handed to its group
  coordinator, as Java's ``SubscriptionState`` is.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

__all__ = ["TopicPartition", "OffsetAndTimestamp", "OffsetAndMetadata", "RecordMetadata",
           "ConsumerGroupMetadata", "EARLIEST", "LATEST", "NO_TOPIC_ID",
           "SubscriptionState", "as_tp", "topic_id_of", "topic_of"]

#: ListOffsets timestamps: the log start offset and the log end (high watermark).
EARLIEST, LATEST = -2, -1

#: The all-zero topic id: "no id" (a broker that assigns none, or a topic before ids).
NO_TOPIC_ID = uuid.UUID(int=0)


class TopicPartition(NamedTuple):
    """A (topic, partition) pair; plain tuples are accepted wherever one is."""

    topic: str
    partition: int


class OffsetAndTimestamp(NamedTuple):
    """What ``offsets_for_times`` finds: the first offset at or after a time."""

    offset: int
    timestamp: int


class RecordMetadata(NamedTuple):
    """Where a record was written."""

    topic: str
    partition: int
    #: -1 with ``acks=0`` (no answer) and for a duplicate the broker had already written.
    offset: int
    #: The record's timestamp (the broker's time for LogAppendTime topics), ms.
    timestamp: int


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next record to read) with its metadata string."""

    offset: int
    metadata: str | None = None
    #: The leader epoch of the last record read (KIP-320), -1 if unknown.
    leader_epoch: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """A group member as a transactional producer's offset commit names it
    (``Consumer.group_metadata()``; Java's ``ConsumerGroupMetadata``): the group
    coordinator refuses the commit from a member that is no longer in the group's
    generation (KIP-447). ``ConsumerGroupMetadata("etl")`` names a group only."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


def as_tp(x: Any) -> TopicPartition:
    """A :class:`TopicPartition` from one or from a ``(topic, partition)`` pair."""
    if isinstance(x, TopicPartition):
        return x
    topic, partition = x
    return TopicPartition(str(topic), int(partition))


def topic_id_of(metadata: Any, topic: str) -> uuid.UUID:
    """The id of ``topic`` in cluster ``metadata`` (:data:`NO_TOPIC_ID` if it has none)."""
    info = metadata.topics.get(topic)
    return info.topic_id if info is not None and info.topic_id is not None else NO_TOPIC_ID


def topic_of(p: Any, names: Mapping[uuid.UUID, str]) -> str:
    """The topic name of a sliced Fetch partition: its name, or (v13+) its id
    looked up in ``names`` (the id's text if unknown)."""
    if p.topic is not None:
        return str(p.topic)
    return names.get(p.topic_id, str(p.topic_id)) if p.topic_id is not None else ""


class SubscriptionState:
    """The partitions a consumer reads, their positions and which are paused.

    A position is the offset of the next record to hand to the application
    (None: not known yet - the committed offset or ``auto_offset_reset`` will
    say). The consumer owns this object; its group coordinator changes the
    assignment and commits the positions through it, and knows nothing else of
    the consumer.
    """

    def __init__(self) -> None:
        self.assignment: list[TopicPartition] = []
        self.positions: dict[TopicPartition, int | None] = {}
        self.paused: set[TopicPartition] = set()

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """Read exactly ``tps`` (in order, once each); positions of partitions kept
        stay, new ones start unknown."""
        self.assignment = list(dict.fromkeys(tps))
        self.positions = {tp: self.positions.get(tp) for tp in self.assignment}
        self.paused &= set(self.assignment)

    def assigned(self) -> set[TopicPartition]:
        return set(self.assignment)

    def committable(self) -> dict[TopicPartition, int]:
        """The known positions: what a commit of "everything returned" sends."""
        return {tp: pos for tp, pos in self.positions.items() if pos is not None}

    def is_readable(self, tp: TopicPartition) -> bool:
        """Assigned and not paused: its fetched records may be handed out."""
        return tp in self.positions and tp not in self.paused
