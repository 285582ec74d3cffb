"""Request fields whose shape changed between versions, as functions of the version.

:meth:`kproto.net.connection.Connection.send` calls such a function with the
version it picked, so callers describe what they want once, whatever the
broker speaks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["find_coordinator_fields", "offset_fetch_fields", "GROUP", "TRANSACTION"]

#: FindCoordinator key types: a consumer group, a transactional id.
GROUP, TRANSACTION = 0, 1


def find_coordinator_fields(key: str, key_type: int = GROUP) -> Callable[[int], dict[str, Any]]:
    """FindCoordinator for one key (v4+ batches keys: ``coordinator_keys``)."""
    def fields(version: int) -> dict[str, Any]:
        return {"key_type": key_type,
                **({"coordinator_keys": [key]} if version >= 4 else {"key": key})}
    return fields


def offset_fetch_fields(group_id: str, topics: list[dict[str, Any]] | None
                        ) -> Callable[[int], dict[str, Any]]:
    """OffsetFetch fields for any version (v8+ batches groups); ``topics`` None: all."""
    def fields(version: int) -> dict[str, Any]:
        if version >= 8:
            return {"groups": [{"group_id": group_id, "topics": topics}],
                    "require_stable": True}
        return {"group_id": group_id, "topics": topics, "require_stable": version >= 7}
    return fields
