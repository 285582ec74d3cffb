"""A kproto ShareConsumer and confluent-kafka's ShareConsumer (librdkafka 2.16)
in one share group on librdkafka's mock, reading one partition: together they
get every record exactly once when both accept everything."""

from __future__ import annotations

import time

import pytest

from kproto import Producer, ShareConsumer

from .share_support import SHARE_BROKERS, WAIT_S, share_topic

ck = pytest.importorskip("confluent_kafka")
pytestmark = [SHARE_BROKERS, pytest.mark.skipif(
    not hasattr(ck, "ShareConsumer"), reason="this confluent-kafka has no ShareConsumer")]


def test_kproto_and_confluent_share_one_partition(broker) -> None:
    n = 400
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
        topic, group = share_topic(broker, producer, n)
        ours = ShareConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                             max_poll_records=20, fetch_max_wait_ms=100)
        theirs = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                   "max.poll.records": 20})
        try:
            ours.subscribe([topic])
            theirs.subscribe([topic])
            mock = broker.process
            got_ours: list[int] = []
            got_theirs: list[int] = []
            deadline = time.monotonic() + WAIT_S
            while len(members := mock.share_group_members(group)) < 2:
                assert time.monotonic() < deadline, "both members to join"
                # (librdkafka joins from its poll; what it may read already counts)
                got_theirs += [m.offset() for m in theirs.poll(0.05) if m.error() is None]
            # the mock's assignor gives a partition to one member: both share it here
            mock.set_share_assignment(group, {m: [(topic, 0)] for m in members})
            while len(got_ours) + len(got_theirs) < n:
                assert time.monotonic() < deadline + WAIT_S, \
                    f"{len(got_ours)} + {len(got_theirs)} of {n} records"
                got_ours += [r.offset for r in ours.poll(100)]
                for m in theirs.poll(0.1):
                    assert m.error() is None
                    got_theirs.append(m.offset())
            everything = sorted(got_ours + got_theirs)
            assert everything == list(range(n))            # each record exactly once
            assert got_ours and got_theirs                  # and both read some
            ours.commit_sync()
            theirs.commit_sync()
        finally:
            ours.close()
            theirs.close()
