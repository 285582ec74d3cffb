"""The consumer: Fetch from every leader, records decoded into Arrow columns.

The entry is :class:`~kproto.consumer.consumer.Consumer` (``from kproto import
Consumer``). What it is built from, one concern a module:

- ``consumer``: the facade: assign / subscribe / seek, ``poll`` and
  ``poll_batch`` over a long-poll Fetch per leader, offsets and commits (with a
  group: :mod:`kproto.groups`).
- ``fetches``: the consumer's Fetches in flight, one long-poll Fetch per leader,
  their answers queued in the fetch buffer.
- ``fetcher``: the one Fetch path every reader shares: requests, answers matched
  to them, the outcome per partition, decoding, ListOffsets.
- ``fetch_buffer``: fetched records not yet handed out, and the rule that moves
  positions (Java's FetchBuffer / FetchCollector).
- ``reader``: bounded reads (``read_range``, ``iter_range``, Spark's tasks).

:class:`~kproto.consumer.share.ShareConsumer` (``from kproto import
ShareConsumer``) is a share group's member (KIP-932): ``share`` (the facade),
``share_fetch`` (its ShareFetch sessions), ``share_buffer`` (records acquired,
not handed out yet), ``share_acks`` (acknowledgements as columns, their
acknowledgement batches).
"""

from typing import TYPE_CHECKING, Any

from ..structs import OffsetAndTimestamp, TopicPartition

if TYPE_CHECKING:
    from .consumer import Consumer
    from .share import ShareConsumer
    from .share_acks import AcknowledgeType

__all__ = ["Consumer", "TopicPartition", "OffsetAndTimestamp", "ShareConsumer",
           "AcknowledgeType"]

_LAZY = {"Consumer": "consumer", "ShareConsumer": "share", "AcknowledgeType": "share_acks"}


def __getattr__(name: str) -> Any:
    # the facades on first use, as in kproto/__init__.py: a bounded read (``reader``,
    # what a Spark task imports) does not load them and their buffers
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
