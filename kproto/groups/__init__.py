"""Consumer groups: how members of a group share a topic's partitions.

A group protocol is a member's side of the coordinator conversation, driven by the
consumer it belongs to. Today there is one:

- ``classic``: the classic protocol (JoinGroup / SyncGroup / Heartbeat), the
  :class:`~kproto.groups.classic.GroupCoordinator` that the consumer runs on its
  subscription, commits and the rebalance listener;
- ``assignors``: the client-side assignors the classic protocol's leader runs
  (range, roundrobin, sticky; Java's rules).

The KIP-848 consumer protocol's member and the share group's member go beside
``classic`` as modules of their own.
"""

from .classic import CommitFailedError, GroupCoordinator, RebalanceListener

__all__ = ["GroupCoordinator", "RebalanceListener", "CommitFailedError"]
