"""The cooperative-sticky assignor (KIP-429) and what a member's rebalance protocol is.

:class:`CooperativeStickyAssignor` (``"cooperative-sticky"``, Java's
``CooperativeStickyAssignor``) assigns as :class:`~kproto.groups.assignors.StickyAssignor`
does (balanced, each member keeping what it owns where balance allows), but with
the ownership every member reports in its subscription's ``owned_partitions``
(with the generation it got them in: the subscription's ``generation_id`` from
version 2, else this assignor's user data, a bare int32), since a cooperative
member keeps its partitions while it rejoins. One rule more: a partition is never
given to a new owner in the rebalance in which another member still owns it.
Such a partition is left out: its owner sees it taken away, revokes it and
rejoins at once, and the follow-up rebalance assigns it (Java's
``adjustAssignment``). So no partition ever has two owners at a time.

:func:`rebalance_protocol` is Java's choice of a member's protocol: ``cooperative``
when every configured assignor supports it, else ``eager`` (the upgrade path
``["cooperative-sticky", "range"]`` is eager until the second roll leaves
``cooperative-sticky`` alone).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from .assignors import (
    DEFAULT_GENERATION,
    GroupAssignment,
    MemberSubscription,
    StickyAssignor,
    register_assignor,
)

__all__ = ["COOPERATIVE", "EAGER", "CooperativeStickyAssignor", "decode_generation",
           "encode_generation", "rebalance_protocol", "withheld"]

#: The rebalance protocols (Java's ``RebalanceProtocol``).
EAGER = "eager"
COOPERATIVE = "cooperative"


def encode_generation(generation: int) -> bytes:
    """The cooperative-sticky subscription user data: the generation, an int32
    (Java's ``COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0``)."""
    return int(generation).to_bytes(4, "big", signed=True)


def decode_generation(data: bytes | bytearray | memoryview | None) -> int | None:
    """The generation in cooperative-sticky user data: None when there is none,
    :data:`DEFAULT_GENERATION` when it cannot be read (as Java)."""
    if data is None:
        return None
    buf = bytes(data)
    if len(buf) < 4:
        return DEFAULT_GENERATION
    return int.from_bytes(buf[:4], "big", signed=True)


def rebalance_protocol(assignors: Iterable[Any]) -> str:
    """``cooperative`` when every assignor supports it (Java picks the newest
    protocol all of them support), else ``eager``."""
    supported = [getattr(a, "supported_protocols", (EAGER,)) for a in assignors]
    return COOPERATIVE if supported and all(COOPERATIVE in s for s in supported) else EAGER


def withheld(members: Iterable[MemberSubscription], result: GroupAssignment
             ) -> set[tuple[str, int]]:
    """The partitions ``result`` gives to a member that does not own them while
    another member of ``members`` still claims them (Java's
    ``validateCooperativeAssignment`` refuses exactly these)."""
    owners: dict[tuple[str, int], set[str]] = {}
    for m in members:
        for topic, claimed in m.owned_partitions.items():
            for p in claimed:
                owners.setdefault((topic, p), set()).add(m.member_id)
    out = set()
    for member_id, by_topic in result.items():
        for topic, assigned in by_topic.items():
            for p in assigned:
                claims = owners.get((topic, p), set())
                if claims and member_id not in claims:
                    out.add((topic, p))
    return out


class CooperativeStickyAssignor(StickyAssignor):
    """Java's ``CooperativeStickyAssignor`` (``"cooperative-sticky"``): see the
    module docstring. Supports both protocols, so it can be listed beside an
    eager assignor on the upgrade path."""

    name: str = "cooperative-sticky"
    java_class_names: ClassVar[tuple[str, ...]] = (
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
    )
    supported_protocols: ClassVar[tuple[str, ...]] = (COOPERATIVE, EAGER)

    def subscription_user_data(
        self, topics: set[str], owned: dict[str, list[int]], generation: int
    ) -> bytes | None:
        """The generation of the member's last assignment, an int32 (Java always
        sends it, -1 before the first assignment)."""
        return encode_generation(generation)

    @staticmethod
    def previous_ownership(member: MemberSubscription) -> tuple[dict[str, list[int]], int]:
        """``owned_partitions``, in the subscription's generation (version 2+) or
        the one in the user data (Java's ``memberData``)."""
        generation = member.generation
        if generation < 0:
            decoded = decode_generation(member.user_data)
            generation = DEFAULT_GENERATION if decoded is None else decoded
        return {t: list(ps) for t, ps in member.owned_partitions.items()}, generation

    def assign(
        self, members: list[MemberSubscription], partitions_per_topic: dict[str, int]
    ) -> GroupAssignment:
        """The sticky assignment, less the partitions that would change owner in
        this rebalance (:func:`withheld`): they are assigned in the next one."""
        result = super().assign(members, partitions_per_topic)
        held = withheld(members, result)
        if not held:
            return result
        out: GroupAssignment = {}
        for mid, by_topic in result.items():
            kept = {t: [p for p in ps if (t, p) not in held] for t, ps in by_topic.items()}
            out[mid] = {t: ps for t, ps in kept.items() if ps}
        return out


def owned_by_topic(tps: Iterable[Any]) -> dict[str, list[int]]:
    """``{topic: sorted partitions}`` of TopicPartitions."""
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return {t: sorted(ps) for t, ps in out.items()}


register_assignor(CooperativeStickyAssignor)
