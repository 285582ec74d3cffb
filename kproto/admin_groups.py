"""Groups of every type as :class:`~kproto.admin.Admin` reports them, and the
answers of ListGroups, DescribeGroups, ConsumerGroupDescribe and
ShareGroupDescribe turned into them (Java's ``GroupListing``,
``ClassicGroupDescription``, ``ConsumerGroupDescription`` and
``ShareGroupDescription``).

A group's type (Java's ``GroupType``) is ``"classic"`` (JoinGroup/SyncGroup,
client-side assignors), ``"consumer"`` (KIP-848: the broker assigns, members
heartbeat with ConsumerGroupHeartbeat), ``"share"`` (KIP-932) or ``"streams"``
(KIP-1071).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import protocol
from .errors import ConfigError, error_for_code
from .structs import TopicPartition

__all__ = ["GROUP_TYPES", "GroupListing", "MemberDescription", "GroupDescription",
           "ConsumerMemberDescription", "ConsumerGroupDescription", "ShareMemberDescription",
           "ShareGroupDescription"]

#: The group types a broker may name (Java's GroupType, lower case as on the wire).
GROUP_TYPES = ("classic", "consumer", "share", "streams")


@dataclass(frozen=True)
class GroupListing:
    """A group as ListGroups names it."""

    group_id: str
    #: The classic protocol type ("consumer", "connect", ...; "" for share groups).
    protocol_type: str
    #: The group's state (ListGroups v4+; None from older brokers).
    state: str | None = None
    #: classic, consumer, share or streams (ListGroups v5+). A broker answering an
    #: older version has classic groups only: "classic" then.
    type: str | None = None


@dataclass(frozen=True)
class MemberDescription:
    """One member of a classic group, with the partitions assigned to it (consumer groups)."""

    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None = None
    assignment: frozenset[TopicPartition] = frozenset()
    subscription: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupDescription:
    """A classic group as DescribeGroups describes it."""

    group_id: str
    state: str
    protocol_type: str
    #: The chosen assignor (consumer groups).
    protocol: str
    members: list[MemberDescription] = field(default_factory=list)
    type: str = "classic"


@dataclass(frozen=True)
class ConsumerMemberDescription:
    """One member of a KIP-848 consumer group."""

    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None
    rack_id: str | None
    member_epoch: int
    #: The topics it subscribed to by name, and its broker-side regex (or None).
    subscription: tuple[str, ...]
    subscribed_topic_regex: str | None
    #: What it owns now, and what the broker's assignor wants it to own.
    assignment: frozenset[TopicPartition]
    target_assignment: frozenset[TopicPartition]
    #: "classic" (a classic member in a group being upgraded), "consumer", or None
    #: (ConsumerGroupDescribe v0 does not say).
    member_type: str | None = None


@dataclass(frozen=True)
class ConsumerGroupDescription:
    """A KIP-848 consumer group as ConsumerGroupDescribe describes it."""

    group_id: str
    #: Empty, Assigning, Reconciling, Stable, Dead, NotReady.
    state: str
    group_epoch: int
    #: The epoch of the target assignment (Java: targetAssignmentEpoch).
    assignment_epoch: int
    #: The broker-side assignor ("uniform", "range").
    assignor: str
    members: list[ConsumerMemberDescription] = field(default_factory=list)
    type: str = "consumer"


@dataclass(frozen=True)
class ShareMemberDescription:
    """One member of a share group."""

    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    member_epoch: int
    subscription: tuple[str, ...]
    assignment: frozenset[TopicPartition]


@dataclass(frozen=True)
class ShareGroupDescription:
    """A share group as ShareGroupDescribe describes it."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[ShareMemberDescription] = field(default_factory=list)
    type: str = "share"


_MEMBER_TYPES = {0: "classic", 1: "consumer"}


def group_types(types: Iterable[str]) -> list[str]:
    """``types`` checked and lower-cased (ListGroups' types_filter); ConfigError names a bad one."""
    out = []
    for t in types:
        if not isinstance(t, str) or t.lower() not in GROUP_TYPES:
            raise ConfigError(f"unknown group type {t!r}: use one of {', '.join(GROUP_TYPES)}")
        out.append(t.lower())
    return out


def listings(body: Mapping[str, Any], version: int, types: list[str],
             states: list[str]) -> list[GroupListing]:
    """The groups of one broker's ListGroups answer at ``version``, filtered here
    too (a version before v5 cannot filter types: its groups are all classic;
    states are asked for from v4, the caller's check)."""
    out = []
    wanted_states = {s.lower() for s in states}
    for g in body["groups"]:
        kind = (g.get("group_type") or None) if version >= 5 else "classic"
        if types and kind is not None and kind not in types:
            continue  # (a v5 broker filters itself; Tansu 0.6 ignores types_filter)
        state = g.get("group_state") if version >= 4 else None
        if wanted_states and (state or "").lower() not in wanted_states:
            continue
        out.append(GroupListing(g["group_id"], g["protocol_type"], state, kind))
    return out


def classic_description(g: Mapping[str, Any]) -> GroupDescription:
    """One group of a DescribeGroups answer (consumer groups' member data decoded)."""
    members = []
    for m in g["members"]:
        assigned: frozenset[TopicPartition] = frozenset()
        topics: tuple[str, ...] = ()
        if g["protocol_type"] == "consumer":
            if m["member_assignment"]:
                a = protocol.decode_assignment(m["member_assignment"])
                assigned = frozenset(TopicPartition(x["topic"], p)
                                     for x in a["assigned_partitions"] or []
                                     for p in x["partitions"])
            if m["member_metadata"]:
                topics = tuple(protocol.decode_subscription(m["member_metadata"])["topics"] or ())
        members.append(MemberDescription(m["member_id"], m["client_id"], m["client_host"],
                                         m.get("group_instance_id"), assigned, topics))
    return GroupDescription(g["group_id"], g["group_state"], g["protocol_type"],
                            g["protocol_data"], members)


#: topic ids -> names, for ids an answer gives without a name (looked up in Metadata).
NameLookup = Callable[[set[uuid.UUID]], Mapping[uuid.UUID, str]]


def _unnamed(groups: Iterable[Mapping[str, Any]], *assignments: str) -> set[uuid.UUID]:
    return {t["topic_id"] for g in groups for m in g["members"] for a in assignments
            for t in m[a]["topic_partitions"] if not t["topic_name"]}


def _partitions(assignment: Mapping[str, Any], names: Mapping[uuid.UUID, str]
                ) -> frozenset[TopicPartition]:
    out: set[TopicPartition] = set()
    for t in assignment["topic_partitions"]:
        name = t["topic_name"] or names.get(t["topic_id"])
        if name is None:
            # a topic deleted since: Java's admin drops it too (no name to give)
            continue
        out.update(TopicPartition(name, p) for p in t["partitions"])
    return frozenset(out)


def _check(g: Mapping[str, Any]) -> None:
    cls = error_for_code(g["error_code"])
    if cls is not None:
        raise cls(g.get("error_message"), group=g["group_id"])


def _checked_names(body: Mapping[str, Any], lookup: NameLookup, *assignments: str
                   ) -> Mapping[uuid.UUID, str]:
    """A describe answer's groups checked (a group's error raised naming it), and the
    names of the topics their members' ``assignments`` give by id alone."""
    for g in body["groups"]:
        _check(g)
    unnamed = _unnamed(body["groups"], *assignments)
    return lookup(unnamed) if unnamed else {}


def consumer_descriptions(body: Mapping[str, Any], lookup: NameLookup
                          ) -> list[ConsumerGroupDescription]:
    """A ConsumerGroupDescribe answer; a group's error is raised naming it."""
    names = _checked_names(body, lookup, "assignment", "target_assignment")
    return [ConsumerGroupDescription(
        g["group_id"], g["group_state"], g["group_epoch"], g["assignment_epoch"],
        g["assignor_name"], [ConsumerMemberDescription(
            m["member_id"], m["client_id"], m["client_host"], m["instance_id"], m["rack_id"],
            m["member_epoch"], tuple(m["subscribed_topic_names"]), m["subscribed_topic_regex"],
            _partitions(m["assignment"], names), _partitions(m["target_assignment"], names),
            _MEMBER_TYPES.get(m.get("member_type", -1))) for m in g["members"]])
        for g in body["groups"]]


def share_descriptions(body: Mapping[str, Any], lookup: NameLookup
                       ) -> list[ShareGroupDescription]:
    """A ShareGroupDescribe answer; a group's error is raised naming it."""
    names = _checked_names(body, lookup, "assignment")
    return [ShareGroupDescription(
        g["group_id"], g["group_state"], g["group_epoch"], g["assignment_epoch"],
        g["assignor_name"], [ShareMemberDescription(
            m["member_id"], m["client_id"], m["client_host"], m["rack_id"], m["member_epoch"],
            tuple(m["subscribed_topic_names"]), _partitions(m["assignment"], names))
            for m in g["members"]])
        for g in body["groups"]]
