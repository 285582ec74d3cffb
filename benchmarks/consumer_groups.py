"""KIP-848 consumer group read throughput on librdkafka's mock, in one run:

    .venv/bin/python benchmarks/consumer_groups.py [RECORDS]

One topic of 4 partitions holds RECORDS records (16-byte keys, 100-byte values);
each client reads all of it as the only member of a ``group.protocol=consumer``
group of its own (the coordinator assigns; auto-commit on, as by default), from
its first record to its last (the join is not timed):

- kproto ``Consumer.poll`` (``group_protocol="consumer"``; Record objects, key,
  value and offset touched),
- confluent-kafka's ``Consumer.consume`` (``group.protocol=consumer``, 500
  messages a call; key, value and offset touched),
- kproto ``Consumer.poll_batch`` (Arrow batches), for reference.

Prints records/s of each and the ratios as JSON (BENCHMARKS.md). The mock keeps a
partition's last ~35,000 records of this size (older segments go), so RECORDS
stays at or below 100,000 (default).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable

import pyarrow as pa

from kproto import Consumer, Producer
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


def _kproto(bootstrap: str, topic: str) -> Consumer:
    c = Consumer(bootstrap_servers=bootstrap, group_id=f"k-{uuid.uuid4().hex[:8]}",
                 group_protocol="consumer", auto_offset_reset="earliest")
    c.subscribe([topic])
    return c


def kproto_poll(bootstrap: str, topic: str, n: int) -> float:
    c = _kproto(bootstrap, topic)

    def poll() -> int:
        records = c.poll(500)
        for r in records:
            r.key, r.value, r.offset         # noqa: B018 - what an application touches
        return len(records)
    try:
        return timed(n, poll)
    finally:
        c.close()


def kproto_poll_batch(bootstrap: str, topic: str, n: int) -> float:
    c = _kproto(bootstrap, topic)
    try:
        return timed(n, lambda: c.poll_batch(500).num_rows)
    finally:
        c.close()


def confluent(bootstrap: str, topic: str, n: int) -> float:
    import confluent_kafka

    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                  "group.id": f"c-{uuid.uuid4().hex[:8]}",
                                  "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest"})

    def poll() -> int:
        got = 0
        for m in c.consume(num_messages=500, timeout=0.5):
            if m.error() is None:
                m.key(), m.value(), m.offset()
                got += 1
        return got
    try:
        c.subscribe([topic])
        return timed(n, poll)
    finally:
        c.close()


def main(n: int) -> dict[str, float]:
    with MockCluster(3) as mock:
        mock.create_topic("group-bench", 4)
        table = pa.table({"key": pa.array([b"k%015d" % i for i in range(n)], pa.binary()),
                          "value": pa.array([b"x" * 100] * n, pa.binary())})
        with Producer(bootstrap_servers=mock.bootstrap, linger_ms=5) as producer:
            producer.send_batch("group-bench", table).result(300)
        out = {
            "kproto_poll": kproto_poll(mock.bootstrap, "group-bench", n),
            "confluent_consume": confluent(mock.bootstrap, "group-bench", n),
            "kproto_poll_batch": kproto_poll_batch(mock.bootstrap, "group-bench", n),
        }
    out["poll_vs_confluent"] = out["kproto_poll"] / out["confluent_consume"]
    out["poll_batch_vs_confluent"] = out["kproto_poll_batch"] / out["confluent_consume"]
    return out


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    print(json.dumps(main(*(args + [100_000][len(args):])), indent=2))
