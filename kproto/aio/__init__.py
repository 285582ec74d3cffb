"""kproto for asyncio: the same clients, driven by an event loop.

:class:`AIOConsumer`, :class:`AIOShareConsumer`, :class:`AIOProducer` and
:class:`AIOAdmin` take the settings of :class:`~kproto.consumer.Consumer`,
:class:`~kproto.consumer.share.ShareConsumer`, :class:`~kproto.producer.Producer`
and :class:`~kproto.admin.Admin` and run their logic: the polls' steps under
:class:`~kproto.aio.driver.AsyncioDriver` (waits on the loop, blocking
exchanges in a worker thread), the producer's sender thread with a hand-off of
its deliveries to the loop, the admin's calls in a worker thread. docs/asyncio.md
says what runs where, and how aiokafka's names map onto these.

>>> from kproto.aio import AIOConsumer, AIOProducer              # doctest: +SKIP
>>> async with AIOProducer(bootstrap_servers="127.0.0.1:9092") as producer:  # doctest: +SKIP
...     delivery = await producer.send("events", b"value")   # queued
...     metadata = await delivery                             # written
"""

from __future__ import annotations

from .admin import AIOAdmin
from .consumer import AIOConsumer
from .driver import AsyncioDriver
from .producer import AIOProducer
from .share import AIOShareConsumer

__all__ = ["AIOAdmin", "AIOConsumer", "AIOProducer", "AIOShareConsumer", "AsyncioDriver"]
