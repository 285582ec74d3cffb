"""What the share group tests share: the mock's share settings, topics with
records, and bounded loops that poll until something has arrived.

Only librdkafka's mock cluster speaks share groups among the test brokers
(ShareGroupHeartbeat 76 v1, ShareFetch 78 v1, ShareAcknowledge 79 v1). As
measured against confluent-kafka 2.16.1's librdkafka 2.16.0:

- ``share.auto.offset.reset`` is latest by default: a share partition starts
  at the log end when first fetched; the tests set earliest;
- an acquisition lock lasts ``record_lock_duration_ms`` (default 30 s) and
  expires on a 1 s timer, so a timed-out record is available again within
  lock + ~1 s; the delivery limit is 5 (then the record is archived);
- ShareFetch does not long-poll (an empty answer is delayed at most 100 ms);
- closing ANY connection to a broker closes every share session on that broker
  (releasing what those sessions acquired): one consumer's close makes the
  others reopen their sessions and re-receive what they had not acknowledged.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kproto import Producer

SHARE_BROKERS = pytest.mark.brokers(
    "mock", reason="Tansu and noida-db do not speak share groups (no ShareGroupHeartbeat, "
    "ShareFetch or ShareAcknowledge)")

#: A bound on every wait in these tests (they return as soon as what they wait for arrived).
WAIT_S = 20.0


def share_topic(broker: Any, producer: Producer, n: int, *, partitions: int = 1,
                lock_ms: int = 30000, max_deliveries: int = 5) -> tuple[str, str]:
    """A new topic with ``n`` records ``b"0"``... spread over ``partitions`` (round-robin)
    and a new group name; the mock's share settings set for the test."""
    broker.process.set_share_groups(auto_offset_reset="earliest",
                                    record_lock_duration_ms=lock_ms,
                                    max_delivery_attempts=max_deliveries,
                                    heartbeat_interval_ms=200)
    topic = f"share-{uuid.uuid4().hex[:10]}"
    broker.create_topic(topic, partitions)
    produce(producer, topic, [str(i).encode() for i in range(n)], partitions)
    return topic, f"g-{uuid.uuid4().hex[:10]}"


def produce(producer: Producer, topic: str, values: list[bytes], partitions: int = 1) -> None:
    """Write ``values`` with a producer kept open (closing one would close the share
    sessions on its brokers, see the module docstring)."""
    for i, v in enumerate(values):
        producer.send(topic, value=v, partition=i % partitions)
    producer.flush()


def poll_until(poll: Callable[[], list[Any]], done: Callable[[list[Any]], bool],
               what: str) -> list[Any]:
    """Records from ``poll()`` until ``done(all so far)``; fails after WAIT_S."""
    got: list[Any] = []
    deadline = time.monotonic() + WAIT_S
    while not done(got):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}; got {len(got)} records")
        got.extend(poll())
    return got
