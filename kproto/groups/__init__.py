"""Consumer groups: how members of a group share a topic's partitions.

A group protocol is a member's side of the coordinator conversation, driven by the
consumer it belongs to:

- ``member``: what every protocol shares (:class:`~kproto.groups.member.GroupMember`:
  the coordinator link, commits, committed offsets, auto-commit) and
  :func:`new_member` (here), which picks the protocol by
  ``group_protocol``;
- ``classic``: the classic protocol (JoinGroup / SyncGroup / Heartbeat), the
  :class:`~kproto.groups.classic.GroupCoordinator` that the consumer runs on its
  subscription, commits and the rebalance listener;
- ``assignors``: the client-side assignors the classic protocol's leader runs
  (range, roundrobin, sticky; Java's rules);
- ``share``: a share group's member (KIP-932, ShareGroupHeartbeat), which
  :class:`kproto.ShareConsumer` runs.

The KIP-848 consumer protocol's member goes beside ``classic`` as a module of
its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..net.cluster import Cluster
from ..structs import SubscriptionState
from .classic import CommitFailedError, GroupCoordinator
from .member import GroupMember, RebalanceListener

__all__ = ["GroupCoordinator", "GroupMember", "RebalanceListener", "CommitFailedError",
           "new_member"]


def new_member(subscription: SubscriptionState, cluster: Cluster,
               config: Mapping[str, Any]) -> GroupMember:
    """The member of ``group_id`` that ``group_protocol`` names: ``classic``
    (JoinGroup/SyncGroup, :mod:`kproto.groups.classic`) or ``consumer`` (KIP-848,
    :mod:`kproto.groups.consumer_protocol`)."""
    if config["group_protocol"] == "consumer":
        from .consumer_protocol import ConsumerMembership

        return ConsumerMembership(subscription, cluster, config)
    return GroupCoordinator(subscription, cluster, config)
