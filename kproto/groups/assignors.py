"""Partition assignors for classic (JoinGroup/SyncGroup) consumer groups.

Three eager assignors, named as in the Java client, run by the group leader over
the members' decoded subscriptions (see PROTOCOL_NOTES §6); the fourth,
``cooperative-sticky``, is in :mod:`kproto.groups.cooperative`:

* :class:`RangeAssignor` (``"range"``): per topic, the members subscribed to it
  in Java order each get a contiguous range; the first ``partitions % members``
  members get one extra partition.
* :class:`RoundRobinAssignor` (``"roundrobin"``): every partition of every
  subscribed topic, sorted by (topic, partition), dealt in turn to the sorted
  members, skipping members not subscribed to the partition's topic.
* :class:`StickyAssignor` (``"sticky"``): balanced like round robin, but keeps
  each member's previous partitions where balance allows (Java's eager
  ``StickyAssignor``). Each member reports its previous assignment in its
  subscription ``user_data`` (:func:`encode_sticky_user_data`).

Java orders members as follows: static members (with a ``group.instance.id``)
first, sorted by instance id, then dynamic members sorted by member id. Strings
compare by UTF-16 code units, as ``String.compareTo`` does (:func:`java_string_key`).

Everything is pure Python and deterministic: the same input always gives the
same output, whatever the order of ``members``.

Example::

    assignor = get_assignor("range")
    plan = assignor.assign(
        [MemberSubscription("m1", ("t",)), MemberSubscription("m2", ("t",))], {"t": 3}
    )
    # {"m1": {"t": [0, 1]}, "m2": {"t": [2]}}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..errors import ConfigError, ProtocolError
from ..protocol.apis import STICKY_ASSIGNOR_USER_DATA
from ..protocol.engine import codec_for

__all__ = [
    "ASSIGNORS",
    "DEFAULT_GENERATION",
    "Assignor",
    "MemberSubscription",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "decode_sticky_user_data",
    "encode_sticky_user_data",
    "get_assignor",
    "java_string_key",
    "register_assignor",
]

#: Generation reported when a member has no previous assignment (Java ``DEFAULT_GENERATION``).
DEFAULT_GENERATION = -1

#: ``member_id -> {topic: sorted partitions}``, the result of :meth:`Assignor.assign`.
GroupAssignment = dict[str, dict[str, list[int]]]

_TP = tuple[str, int]


@dataclass(frozen=True)
class MemberSubscription:
    """One group member's subscription, as decoded from its JoinGroup metadata.

    ``topics`` are the subscribed topics. ``user_data`` is the assignor-specific
    blob from the subscription (for ``sticky``, the member's previous
    assignment). ``owned_partitions`` and ``generation`` are the KIP-429 fields
    of subscription v1/v2 (``{topic: partitions}``, ``-1`` when absent);
    ``group_instance_id`` is the member's static id (JoinGroup v5+) and
    ``rack_id`` its rack (subscription v3).
    """

    member_id: str
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: dict[str, tuple[int, ...]] = field(default_factory=dict)
    generation: int = -1
    group_instance_id: str | None = None
    rack_id: str | None = None


@runtime_checkable
class Assignor(Protocol):
    """The interface every partition assignor implements."""

    #: The protocol name sent in JoinGroup (``"range"``, ``"roundrobin"``, ``"sticky"``).
    name: str

    def subscription_user_data(
        self, topics: set[str], owned: dict[str, list[int]], generation: int
    ) -> bytes | None:
        """Return what this member puts in its ``Subscription.user_data``.

        ``owned`` is the member's last assignment and ``generation`` the
        generation in which it received it (``-1``: never assigned). The
        coordinator keeps both across the eager revocation that precedes every
        rejoin (Java's assignors keep them from ``onAssignment``), so they
        still describe what the member owned when its JoinGroup is built.
        """
        ...

    def assign(
        self, members: list[MemberSubscription], partitions_per_topic: dict[str, int]
    ) -> GroupAssignment:
        """Compute the group's assignment (run by the group leader).

        ``partitions_per_topic`` gives the partition count of every topic the
        leader has metadata for; subscribed topics missing from it (or with no
        partitions) are skipped, as in Java. The result has an entry for every
        member (possibly empty), lists each member's partitions sorted by topic
        then partition, and assigns each partition of each subscribed topic to
        exactly one member subscribed to that topic.
        """
        ...

    def assignment_user_data(self, member_id: str) -> bytes | None:
        """Return the ``Assignment.user_data`` for ``member_id`` after :meth:`assign`."""
        ...


# --------------------------------------------------------------------------- ordering helpers


def java_string_key(value: str) -> bytes:
    """Sort key that orders strings like Java's ``String.compareTo`` (UTF-16 code units).

    It differs from Python's code-point order only between supplementary
    characters (above U+FFFF) and characters in U+E000..U+FFFF.
    """
    return value.encode("utf-16-be", "surrogatepass")


def _member_key(member: MemberSubscription) -> tuple[Any, ...]:
    """Java ``MemberInfo`` order: static members by instance id, then dynamic by member id."""
    if member.group_instance_id is not None:
        return (0, java_string_key(member.group_instance_id), java_string_key(member.member_id))
    return (1, java_string_key(member.member_id))


def _tp_key(tp: _TP) -> tuple[bytes, int]:
    return (java_string_key(tp[0]), tp[1])


def _check_members(members: Iterable[MemberSubscription]) -> list[MemberSubscription]:
    members = list(members)
    seen: set[str] = set()
    for m in members:
        if m.member_id in seen:
            raise ValueError(f"duplicate member id {m.member_id!r} in assignment input")
        seen.add(m.member_id)
    return members


def _topics_with_partitions(
    member: MemberSubscription, partitions_per_topic: Mapping[str, int]
) -> frozenset[str]:
    """The member's subscribed topics that have metadata and at least one partition."""
    return frozenset(t for t in member.topics if partitions_per_topic.get(t, 0) > 0)


def _to_result(
    members: list[MemberSubscription], owned: Mapping[str, Iterable[_TP]]
) -> GroupAssignment:
    out: GroupAssignment = {}
    for m in members:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(owned.get(m.member_id, ()), key=_tp_key):
            by_topic.setdefault(topic, []).append(partition)
        out[m.member_id] = by_topic
    return out


class _AssignorBase:
    """Shared defaults: no subscription or assignment user data."""

    name: str = ""
    #: The rebalance protocols it supports (Java's ``supportedProtocols``): eager
    #: only, but for ``cooperative-sticky`` (:mod:`kproto.groups.cooperative`).
    supported_protocols: ClassVar[tuple[str, ...]] = ("eager",)
    #: Java class names accepted by :func:`get_assignor`.
    java_class_names: ClassVar[tuple[str, ...]] = ()

    def subscription_user_data(
        self, topics: set[str], owned: dict[str, list[int]], generation: int
    ) -> bytes | None:
        """Return ``None``: this assignor sends no subscription user data."""
        return None

    def assignment_user_data(self, member_id: str) -> bytes | None:
        """Return ``None``: this assignor sends no assignment user data."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


# --------------------------------------------------------------------------- range


class RangeAssignor(_AssignorBase):
    """Java's ``RangeAssignor`` (``"range"``), without rack awareness.

    For each topic, the members subscribed to it are sorted (static members by
    ``group_instance_id`` first, then dynamic members by member id). With ``N``
    partitions and ``C`` members, each member gets a contiguous run of ``N // C``
    partitions and the first ``N % C`` members get one more. Co-subscribed
    topics with equal partition counts are therefore co-partitioned.
    """

    name: str = "range"
    java_class_names: ClassVar[tuple[str, ...]] = (
        "org.apache.kafka.clients.consumer.RangeAssignor",
    )

    def assign(
        self, members: list[MemberSubscription], partitions_per_topic: dict[str, int]
    ) -> GroupAssignment:
        """Assign contiguous partition ranges per topic (see the class docstring)."""
        members = _check_members(members)
        by_topic: dict[str, list[MemberSubscription]] = {}
        for m in members:
            for topic in _topics_with_partitions(m, partitions_per_topic):
                by_topic.setdefault(topic, []).append(m)
        owned: dict[str, list[_TP]] = {m.member_id: [] for m in members}
        for topic in sorted(by_topic, key=java_string_key):
            consumers = sorted(by_topic[topic], key=_member_key)
            per_member, extra = divmod(partitions_per_topic[topic], len(consumers))
            start = 0
            for i, m in enumerate(consumers):
                length = per_member + (1 if i < extra else 0)
                owned[m.member_id].extend((topic, p) for p in range(start, start + length))
                start += length
        return _to_result(members, owned)


# --------------------------------------------------------------------------- round robin


class RoundRobinAssignor(_AssignorBase):
    """Java's ``RoundRobinAssignor`` (``"roundrobin"``).

    All partitions of all subscribed topics are sorted by (topic, partition) and
    dealt to the sorted members in a circle; a member not subscribed to the
    partition's topic is skipped (the circle still advances past it).
    """

    name: str = "roundrobin"
    java_class_names: ClassVar[tuple[str, ...]] = (
        "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    )

    def assign(
        self, members: list[MemberSubscription], partitions_per_topic: dict[str, int]
    ) -> GroupAssignment:
        """Deal partitions round robin over the sorted members (see the class docstring)."""
        members = _check_members(members)
        ordered = sorted(members, key=_member_key)
        subs = [_topics_with_partitions(m, partitions_per_topic) for m in ordered]
        topics = sorted(set().union(*subs), key=java_string_key) if subs else []
        owned: dict[str, list[_TP]] = {m.member_id: [] for m in members}
        pos = 0
        n = len(ordered)
        for topic in topics:
            for partition in range(partitions_per_topic[topic]):
                while topic not in subs[pos]:
                    pos = (pos + 1) % n
                owned[ordered[pos].member_id].append((topic, partition))
                pos = (pos + 1) % n
        return _to_result(members, owned)


# --------------------------------------------------------------------------- sticky user data


def encode_sticky_user_data(
    assignment: Mapping[str, Iterable[int]], generation: int | None = DEFAULT_GENERATION
) -> bytes:
    """Encode a ``StickyAssignor`` user data blob (Java ``serializeTopicPartitionAssignment``).

    The layout is declared once, as
    :data:`~kproto.protocol.apis.headers.STICKY_ASSIGNOR_USER_DATA` (no version
    prefix; version 1 adds ``generation``). Java always writes version 1; pass
    ``generation=None`` to write version 0. Topics and partitions are written
    sorted; topics with no partitions are omitted (Java groups a flat partition
    list by topic). A topic name over 32767 UTF-8 bytes raises
    :class:`~kproto.errors.EncodeError` (a ``ValueError``).
    """
    items = sorted(
        ((t, sorted(set(ps))) for t, ps in assignment.items()),
        key=lambda item: java_string_key(item[0]),
    )
    fields: dict[str, Any] = {
        "previous_assignment": [{"topic": t, "partitions": ps} for t, ps in items if ps]
    }
    if generation is None:
        return codec_for(STICKY_ASSIGNOR_USER_DATA, 0).encode(fields)
    fields["generation"] = generation
    return codec_for(STICKY_ASSIGNOR_USER_DATA, 1).encode(fields)


def decode_sticky_user_data(data: bytes | bytearray | memoryview | None) -> tuple[
    dict[str, list[int]], int
] | None:
    """Decode a ``StickyAssignor`` user data blob into ``(assignment, generation)``.

    Like Java, version 1 (with generation) is tried first, then version 0 (the
    generation is then :data:`DEFAULT_GENERATION`). As a fallback, a blob with a
    leading int16 version (as kafka-python 3.x writes it) is also accepted, and
    finally versions 1 and 0 followed by trailing bytes (Java ignores them).
    Returns ``None`` for empty or undecodable data, which Java treats as "no
    previous assignment".
    """
    if not data:
        return None
    buf = bytes(data)
    attempts: list[tuple[int, int, bool]] = [(1, 0, True), (0, 0, True)]  # version, start, whole
    if len(buf) >= 2:
        prefix = int.from_bytes(buf[:2], "big", signed=True)
        if prefix in STICKY_ASSIGNOR_USER_DATA.versions:
            attempts.append((prefix, 2, True))
    attempts += [(1, 0, False), (0, 0, False)]
    for version, start, whole in attempts:
        try:
            fields, _ = codec_for(STICKY_ASSIGNOR_USER_DATA, version).decode(
                buf, start, whole=whole)
        except ProtocolError:
            continue
        assignment: dict[str, list[int]] = {}
        for entry in fields["previous_assignment"]:
            assignment.setdefault(entry["topic"], []).extend(entry["partitions"])
        generation: int = fields["generation"]  # DEFAULT_GENERATION when absent (v0)
        return assignment, generation
    return None


# --------------------------------------------------------------------------- sticky


class StickyAssignor(_AssignorBase):
    """Java's eager ``StickyAssignor`` (``"sticky"``).

    Goals, in order: (1) the assignment is balanced: member partition counts
    differ by at most one when all members subscribe to the same topics, and
    otherwise no partition can move from a member to another eligible member
    with at least two fewer partitions; (2) as many partitions as possible stay
    with their previous owner.

    Previous ownership comes from each member's ``user_data``
    (:func:`decode_sticky_user_data`); if that is absent or undecodable, the
    KIP-429 ``owned_partitions``/``generation`` of the subscription are used. A
    partition claimed by several members goes to the claim with the highest
    generation; two claims in that same generation cancel each other (neither
    member keeps it). This is decided per partition (Java's equal-subscription
    path instead drops every claim of a member older than the newest
    generation). Claims on topics the member no longer subscribes to, or on
    partitions that no longer exist, are dropped.

    With identical subscriptions the quota algorithm of Java's
    ``AbstractStickyAssignor.constrainedAssign`` is used: it moves the minimum
    number of partitions. Otherwise unowned partitions go one by one (fewest
    eligible members first) to the eligible member with the fewest partitions,
    then single moves from the fullest to the emptiest eligible member
    rebalance the result, preferring partitions that were not sticky.
    """

    name: str = "sticky"
    java_class_names: ClassVar[tuple[str, ...]] = (
        "org.apache.kafka.clients.consumer.StickyAssignor",
    )

    def subscription_user_data(
        self, topics: set[str], owned: dict[str, list[int]], generation: int
    ) -> bytes | None:
        """Encode ``owned`` and ``generation`` as version-1 sticky user data.

        Returns ``None`` (Java sends no user data) when the member has never had
        an assignment: nothing owned and ``generation`` below zero.
        """
        if not any(owned.values()) and generation < 0:
            return None
        return encode_sticky_user_data(owned, generation)

    @staticmethod
    def previous_ownership(member: MemberSubscription) -> tuple[dict[str, list[int]], int]:
        """Return ``(partitions, generation)`` a member claims to have owned."""
        decoded = decode_sticky_user_data(member.user_data)
        if decoded is not None:
            return decoded
        if member.owned_partitions:
            owned = {t: list(ps) for t, ps in member.owned_partitions.items()}
            return owned, member.generation
        return {}, DEFAULT_GENERATION

    def assign(
        self, members: list[MemberSubscription], partitions_per_topic: dict[str, int]
    ) -> GroupAssignment:
        """Compute a balanced assignment that keeps previous ownership where possible."""
        members = sorted(_check_members(members), key=lambda m: java_string_key(m.member_id))
        if not members:
            return {}
        subs = {m.member_id: _topics_with_partitions(m, partitions_per_topic) for m in members}
        kept = self._valid_claims(members, subs, partitions_per_topic)
        first = subs[members[0].member_id]
        if all(s == first for s in subs.values()):
            topics = sorted(first, key=java_string_key)
            return _to_result(
                members, self._constrained(members, topics, partitions_per_topic, kept)
            )
        return _to_result(members, self._general(members, subs, partitions_per_topic, kept))

    # -- previous ownership

    def _valid_claims(
        self,
        members: list[MemberSubscription],
        subs: Mapping[str, frozenset[str]],
        partitions_per_topic: Mapping[str, int],
    ) -> dict[str, set[_TP]]:
        best: dict[_TP, tuple[int, list[str]]] = {}
        for m in members:
            claimed, generation = self.previous_ownership(m)
            mine = subs[m.member_id]
            for topic, partitions in claimed.items():
                if topic not in mine:
                    continue
                for p in set(partitions):
                    if not 0 <= p < partitions_per_topic[topic]:
                        continue
                    tp = (topic, p)
                    cur = best.get(tp)
                    if cur is None or generation > cur[0]:
                        best[tp] = (generation, [m.member_id])
                    elif generation == cur[0]:
                        cur[1].append(m.member_id)
        kept: dict[str, set[_TP]] = {m.member_id: set() for m in members}
        for tp, (_, owners) in best.items():
            if len(owners) == 1:
                kept[owners[0]].add(tp)
        return kept

    # -- identical subscriptions

    @staticmethod
    def _constrained(
        members: list[MemberSubscription],
        topics: list[str],
        partitions_per_topic: Mapping[str, int],
        kept: Mapping[str, set[_TP]],
    ) -> dict[str, list[_TP]]:
        all_tps = [(t, p) for t in topics for p in range(partitions_per_topic[t])]
        min_quota, extra = divmod(len(all_tps), len(members))
        max_quota = min_quota + (1 if extra else 0)
        remaining_extra = extra
        owned: dict[str, list[_TP]] = {}
        taken: set[_TP] = set()
        # Keep previous partitions up to the quota; the first members holding at
        # least max_quota keep max_quota, the rest are trimmed to min_quota.
        for m in sorted(members, key=lambda m: (-len(kept[m.member_id]),
                                                java_string_key(m.member_id))):
            mine = sorted(kept[m.member_id], key=_tp_key)
            if len(mine) > min_quota:
                if remaining_extra > 0 and len(mine) >= max_quota:
                    mine = mine[:max_quota]
                    remaining_extra -= 1
                else:
                    mine = mine[:min_quota]
            owned[m.member_id] = mine
            taken.update(mine)
        unassigned = [tp for tp in all_tps if tp not in taken]
        it = iter(unassigned)
        # Fill members below min_quota round robin, then hand out the extra slots.
        under = [m.member_id for m in members if len(owned[m.member_id]) < min_quota]
        at_min = [m.member_id for m in members if len(owned[m.member_id]) == min_quota]
        i = 0
        while under:
            i %= len(under)
            mid = under[i]
            owned[mid].append(next(it))
            if len(owned[mid]) >= min_quota:
                under.pop(i)
                at_min.append(mid)
            else:
                i += 1
        for mid in at_min:
            if remaining_extra <= 0:
                break
            tp = next(it, None)
            if tp is None:
                break
            owned[mid].append(tp)
            remaining_extra -= 1
        leftover = next(it, None)
        if leftover is not None:  # pragma: no cover - quota arithmetic guarantees this
            raise AssertionError(f"sticky assignor left {leftover} unassigned")
        return owned

    # -- differing subscriptions

    @staticmethod
    def _general(
        members: list[MemberSubscription],
        subs: Mapping[str, frozenset[str]],
        partitions_per_topic: Mapping[str, int],
        kept: Mapping[str, set[_TP]],
    ) -> dict[str, set[_TP]]:
        order = {m.member_id: i for i, m in enumerate(members)}  # members sorted by id
        eligible: dict[str, list[str]] = {}
        for m in members:
            for t in subs[m.member_id]:
                eligible.setdefault(t, []).append(m.member_id)
        owned: dict[str, set[_TP]] = {mid: set(tps) for mid, tps in kept.items()}
        count = {mid: len(tps) for mid, tps in owned.items()}
        taken = set().union(*owned.values())
        unassigned = [
            (t, p)
            for t in eligible
            for p in range(partitions_per_topic[t])
            if (t, p) not in taken
        ]
        unassigned.sort(key=lambda tp: (len(eligible[tp[0]]),) + _tp_key(tp))
        for tp in unassigned:
            mid = min(eligible[tp[0]], key=lambda c: (count[c], order[c]))
            owned[mid].add(tp)
            count[mid] += 1

        # Per member and topic: the sticky partitions it holds and the others
        # ("fresh"), to find movable partitions without rescanning everything.
        sticky: dict[str, dict[str, set[int]]] = {mid: {} for mid in owned}
        fresh: dict[str, dict[str, set[int]]] = {mid: {} for mid in owned}
        for mid, tps in owned.items():
            for t, p in tps:
                bucket = sticky if (t, p) in kept[mid] else fresh
                bucket[mid].setdefault(t, set()).add(p)
        topics = sorted(eligible, key=java_string_key)
        topic_key = {t: java_string_key(t) for t in topics}

        def rank(c: str) -> tuple[int, int]:
            return (count[c], order[c])

        # Emptiest eligible member per topic; kept up to date as partitions move.
        target = {t: min(eligible[t], key=rank) for t in topics}
        while True:
            floor = min(count.values())
            best: tuple[Any, ...] | None = None
            # Fullest members first; stop once no larger imbalance is possible.
            for mid in sorted(owned, key=lambda c: (-count[c], order[c])):
                limit = count[mid] - floor
                if limit < 2 or (best is not None and limit < -best[0][0]):
                    break
                for t in sorted(set(sticky[mid]) | set(fresh[mid]), key=topic_key.__getitem__):
                    has_fresh = bool(fresh[mid].get(t))
                    if not has_fresh and not sticky[mid].get(t):
                        continue
                    dst = target[t]
                    diff = count[mid] - count[dst]
                    if diff < 2:
                        continue
                    # Largest imbalance first; then prefer moving non-sticky partitions.
                    key = (-diff, 0 if has_fresh else 1, order[mid], topic_key[t])
                    if best is None or key < best[0]:
                        best = (key, mid, t, dst, has_fresh)
            if best is None:
                break
            _, src, t, dst, has_fresh = best
            pool = fresh[src][t] if has_fresh else sticky[src][t]
            p = min(pool)
            pool.discard(p)
            owned[src].discard((t, p))
            owned[dst].add((t, p))
            bucket = sticky if (t, p) in kept[dst] else fresh
            bucket[dst].setdefault(t, set()).add(p)
            count[src] -= 1
            count[dst] += 1
            # Only src and dst changed rank. A topic whose emptiest member was
            # dst must be searched again (dst grew); any other topic's emptiest
            # member is unchanged unless src (which shrank) now ranks below it.
            # The dst check must come first: src may have taken over a topic
            # whose entry was dst, hiding that the entry went stale.
            for t in subs[src] | subs[dst]:
                if target[t] == dst:
                    target[t] = min(eligible[t], key=rank)
                elif t in subs[src] and rank(src) < rank(target[t]):
                    target[t] = src
        return owned


# --------------------------------------------------------------------------- registry

#: Assignor classes by protocol name (``cooperative-sticky`` registers itself from
#: :mod:`kproto.groups.cooperative`, which the ``kproto.groups`` package imports).
ASSIGNORS: dict[str, type] = {}
_ALIASES: dict[str, type] = {}


def register_assignor(cls: type) -> None:
    """Make an assignor class known to :func:`get_assignor` by its ``name`` and its
    ``java_class_names`` (full and short)."""
    name: str = getattr(cls, "name")   # noqa: B009 (a class attribute mypy cannot see)
    ASSIGNORS[name] = cls
    _ALIASES[name] = cls
    for java in getattr(cls, "java_class_names", ()):
        _ALIASES[java.lower()] = cls
        _ALIASES[java.rsplit(".", 1)[1].lower()] = cls


for _cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor):
    register_assignor(_cls)
del _cls


def get_assignor(name_or_obj: str | Assignor | type) -> Assignor:
    """Return an assignor instance for a name, a Java class name, a class or an instance.

    Names are case-insensitive: ``"range"``, ``"RoundRobin"``,
    ``"org.apache.kafka.clients.consumer.StickyAssignor"`` and ``"StickyAssignor"``
    all work. An object that already implements :class:`Assignor` is returned
    as is, and an assignor class is instantiated. Anything else raises
    :class:`~kproto.errors.ConfigError` listing the valid names.
    """
    if isinstance(name_or_obj, str):
        cls = _ALIASES.get(name_or_obj.strip().lower())
        if cls is None:
            valid = ", ".join(sorted(ASSIGNORS))
            raise ConfigError(
                f"unknown partition assignor {name_or_obj!r}; valid names: {valid} "
                "(or their Java class names)"
            )
        assignor: Assignor = cls()
        return assignor
    if isinstance(name_or_obj, type):
        if not all(hasattr(name_or_obj, a) for a in ("name", "assign")):
            raise ConfigError(f"{name_or_obj!r} is not a partition assignor class")
        instance: Assignor = name_or_obj()
        return instance
    if isinstance(name_or_obj, Assignor):
        return name_or_obj
    valid = ", ".join(sorted(ASSIGNORS))
    raise ConfigError(
        f"invalid partition assignor {name_or_obj!r}: expected a name ({valid}) or an assignor"
    )
