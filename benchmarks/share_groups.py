"""Share groups (KIP-932) read throughput on librdkafka's mock, in one run:

    .venv/bin/python benchmarks/share_groups.py [RECORDS] [MAX_POLL_RECORDS]

One topic of 4 partitions holds RECORDS records (16-byte keys, 100-byte values);
each client reads all of it in a share group of its own (one member, implicit
acknowledgement: every poll accepts the previous one's records), from its first
record to its last (the join is not timed):

- kproto ``ShareConsumer.poll_batch`` (Arrow batches with delivery_count),
- confluent-kafka's ``ShareConsumer.poll`` (librdkafka's share consumer; each
  message's key, value and offset touched),
- kproto ``ShareConsumer.poll`` (ShareRecords; key, value and offset touched).

Both clients ask for MAX_POLL_RECORDS (default 2000) records per ShareFetch.
Prints records/s of each and the ratios as JSON (BENCHMARKS.md).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable

import pyarrow as pa

from kproto import Producer, ShareConsumer
from kproto.testing import MockCluster


def timed(n: int, poll: Callable[[], int], limit: float = 300.0) -> float:
    """Records/s of ``poll()`` (returns how many it got) from the first record to the n-th."""
    got = 0
    deadline = time.monotonic() + limit
    while got == 0:
        got = poll()
        if time.monotonic() > deadline:
            raise RuntimeError("no record arrived")
    start = time.perf_counter()
    first = got
    while got < n:
        got += poll()
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {got} of {n} records")
    return (got - first) / (time.perf_counter() - start)


def kproto_batches(bootstrap: str, topic: str, n: int, max_poll: int) -> float:
    c = ShareConsumer(bootstrap_servers=bootstrap, group_id=f"kb-{uuid.uuid4().hex[:8]}",
                      max_poll_records=max_poll, fetch_max_wait_ms=100)
    try:
        c.subscribe([topic])
        return timed(n, lambda: c.poll_batch(500).num_rows)
    finally:
        c.close()


def kproto_records(bootstrap: str, topic: str, n: int, max_poll: int) -> float:
    c = ShareConsumer(bootstrap_servers=bootstrap, group_id=f"kr-{uuid.uuid4().hex[:8]}",
                      max_poll_records=max_poll, fetch_max_wait_ms=100)

    def poll() -> int:
        records = c.poll(500)
        for r in records:
            r.key, r.value, r.offset         # noqa: B018 - what an application touches
        return len(records)
    try:
        c.subscribe([topic])
        return timed(n, poll)
    finally:
        c.close()


def confluent(bootstrap: str, topic: str, n: int, max_poll: int) -> float:
    import confluent_kafka

    c = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap,
                                       "group.id": f"ck-{uuid.uuid4().hex[:8]}",
                                       "max.poll.records": max_poll})

    def poll() -> int:
        got = 0
        for m in c.poll(0.5):
            if m.error() is None:
                m.key(), m.value(), m.offset()
                got += 1
        return got
    try:
        c.subscribe([topic])
        return timed(n, poll)
    finally:
        c.close()


def main(n: int, max_poll: int) -> dict[str, float]:
    with MockCluster(3) as mock:
        mock.set_share_groups(auto_offset_reset="earliest")
        mock.create_topic("share-bench", 4)
        table = pa.table({"key": pa.array([b"k%015d" % i for i in range(n)], pa.binary()),
                          "value": pa.array([b"x" * 100] * n, pa.binary())})
        # record batches of ~130 records (16 KiB), as a per-record producer writes them:
        # a broker answers a ShareFetch with whole batches
        with Producer(bootstrap_servers=mock.bootstrap, linger_ms=5, batch_size=16384) as producer:
            producer.send_batch("share-bench", table).result(300)
        out = {
            "kproto_poll_batch": kproto_batches(mock.bootstrap, "share-bench", n, max_poll),
            "confluent_poll": confluent(mock.bootstrap, "share-bench", n, max_poll),
            "kproto_poll": kproto_records(mock.bootstrap, "share-bench", n, max_poll),
        }
    out["poll_batch_vs_confluent"] = out["kproto_poll_batch"] / out["confluent_poll"]
    out["poll_vs_confluent"] = out["kproto_poll"] / out["confluent_poll"]
    return out


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    print(json.dumps(main(*(args + [200_000, 2000][len(args):])), indent=2))
