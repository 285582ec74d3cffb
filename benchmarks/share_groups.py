"""Share groups (KIP-932) read throughput on librdkafka's mock, alternating runs:

    .venv/bin/python benchmarks/share_groups.py [RECORDS] [MAX_POLL_RECORDS]
        [--batch-bytes B] [--rounds R]

One topic of 4 partitions (3 brokers: one leads two) holds RECORDS records
(16-byte keys, 100-byte values) in record batches of at most B bytes (default
16384, as a per-record producer with Kafka's batch.size writes them; 1048576:
what ``send_batch`` writes by default). A broker answers a ShareFetch with
whole record batches, so B is how much of each answer is records other members
may get. Each run reads all of it in a share group of its own (one member,
implicit acknowledgement: every poll accepts the previous one's records), timed
from its first record to its last (the join is not timed); both clients ask for
MAX_POLL_RECORDS (default 2000) records per ShareFetch:

- ``mock_ceiling``: ShareFetch round trips alone, on kproto's share sessions and
  connections: a request always in flight to every leader, each acquired offset
  accepted by the next request to it, nothing decoded or handed out. What the
  mock gives a client asking as these do (its brokers share one thread);
- ``kproto_poll_batch``: ``ShareConsumer.poll_batch`` (Arrow batches);
- ``kproto_poll``: ``ShareConsumer.poll`` (ShareRecords; key, value, offset touched);
- ``confluent_poll``: confluent-kafka's ``ShareConsumer.poll`` (each message's
  key, value and offset touched).

Every round runs each path once (the order rotates from round to round); the
medians, the spread (min-max) and each kproto path's client CPU (its polling
thread's CPU time per record: the mock runs on threads of this process) are
printed as JSON, then the client alone: the ShareFetch answers of one
``poll_batch`` run replayed through kproto's decode and hand-out with no broker
(what kproto could take from a broker that cost nothing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from kproto import Producer, ShareConsumer
from kproto.testing import MockCluster

TOPIC = "share-bench"


def timed(n: int, poll: Callable[[], int], limit: float = 300.0) -> dict[str, float]:
    """Records/s of ``poll()`` (returns how many it got) from the first record to the
    n-th, and this thread's CPU time per record (microseconds)."""
    got = 0
    deadline = time.monotonic() + limit
    while got == 0:
        got = poll()
        if time.monotonic() > deadline:
            raise RuntimeError("no record arrived")
    start, cpu = time.perf_counter(), time.thread_time()
    first = got
    while got < n:
        got += poll()
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {got} of {n} records")
    wall, cpu = time.perf_counter() - start, time.thread_time() - cpu
    return {"rate": (got - first) / wall, "client_cpu_us": cpu / (got - first) * 1e6}


def consumer(bootstrap: str, max_poll: int) -> ShareConsumer:
    c = ShareConsumer(bootstrap_servers=bootstrap, group_id=f"kb-{uuid.uuid4().hex[:8]}",
                      max_poll_records=max_poll, fetch_max_wait_ms=100)
    c.subscribe([TOPIC])
    return c


def kproto_poll_batch(bootstrap: str, n: int, max_poll: int) -> dict[str, float]:
    c = consumer(bootstrap, max_poll)
    try:
        return timed(n, lambda: c.poll_batch(500).num_rows)
    finally:
        c.close()


def kproto_poll(bootstrap: str, n: int, max_poll: int) -> dict[str, float]:
    c = consumer(bootstrap, max_poll)

    def poll() -> int:
        records = c.poll(500)
        for r in records:
            r.key, r.value, r.offset         # noqa: B018 - what an application touches
        return len(records)
    try:
        return timed(n, poll)
    finally:
        c.close()


def mock_ceiling(bootstrap: str, n: int, max_poll: int) -> dict[str, float]:
    """ShareFetch round trips alone (see the module docstring), through the share
    consumer's own sessions with its decode step replaced."""
    c = consumer(bootstrap, max_poll)
    sessions = c._sessions
    acquired = [0]

    def accept_all(session: Any, tp: Any, p: dict[str, Any]) -> None:
        for r in p.get("acquired_records") or []:
            offsets = np.arange(r["first_offset"], r["last_offset"] + 1, dtype=np.int64)
            sessions.add_acks(tp, offsets, np.ones(len(offsets), np.int8))   # ACCEPT
            acquired[0] += len(offsets)

    def steps(before: int) -> Any:
        deadline = time.monotonic() + 0.5
        while acquired[0] == before and time.monotonic() < deadline:
            c._apply_assignment()
            sessions.send(c._assigned, set(), deadline)
            sessions.take((yield sessions.wait(deadline)))

    def poll() -> int:
        assert c._member is not None
        c._member.poll()
        before = acquired[0]
        c._driver.run(steps(before))
        return acquired[0] - before
    sessions._partition = accept_all          # type: ignore[method-assign]
    try:
        return timed(n, poll)
    finally:
        c.close()


def confluent_poll(bootstrap: str, n: int, max_poll: int) -> dict[str, float]:
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
        c.subscribe([TOPIC])
        out = timed(n, poll)
        out.pop("client_cpu_us")        # its client runs on librdkafka's threads
        return out
    finally:
        c.close()


PATHS = {"mock_ceiling": mock_ceiling, "kproto_poll_batch": kproto_poll_batch,
         "kproto_poll": kproto_poll, "confluent_poll": confluent_poll}


def client_alone(bootstrap: str, n: int, max_poll: int, repeat: int = 3) -> dict[str, float]:
    """Records/s of kproto's client work alone: the answers of one poll_batch run
    replayed through the share sessions' decode (``_partition``), the buffer's
    hand-out and ``to_arrow`` / ``to_records`` (best of ``repeat``)."""
    from kproto.consumer.share_buffer import ShareBuffer
    from kproto.structs import TopicPartition

    c = consumer(bootstrap, max_poll)
    sessions = c._sessions
    answers: list[tuple[TopicPartition, dict[str, Any]]] = []
    decode = sessions._partition

    def keep(session: Any, tp: TopicPartition, p: dict[str, Any]) -> Any:
        if p.get("acquired_records"):
            answers.append((tp, dict(p, records=bytes(p["records"] or b""))))
        return decode(session, tp, p)
    sessions._partition = keep                # type: ignore[method-assign]
    try:
        got = 0
        while got < n:
            got += c.poll_batch(500).num_rows
        sessions._partition = decode          # type: ignore[method-assign]
        out = {}
        for mode in ("poll_batch", "poll"):
            best = 0.0
            for _ in range(repeat):
                sessions.inflight.clear()
                buffer, records = ShareBuffer(), 0
                cpu = time.thread_time()
                for tp, p in answers:
                    buffer.add([decode(None, tp, p)])
                    while len(buffer):
                        collected = buffer.collect(None if mode == "poll_batch" else max_poll)
                        if mode == "poll_batch":
                            records += collected.to_arrow().num_rows
                        else:
                            for r in collected.to_records():
                                r.key, r.value, r.offset    # noqa: B018
                                records += 1
                    sessions.inflight.clear()
                best = max(best, records / (time.thread_time() - cpu))
            out[f"kproto_{mode}"] = best
        return out
    finally:
        sessions.inflight.clear()
        c.close()


def produce(bootstrap: str, n: int, batch_bytes: int) -> None:
    table = pa.table({"key": pa.array([b"k%015d" % i for i in range(n)], pa.binary()),
                      "value": pa.array([b"x" * 100] * n, pa.binary())})
    # send_batch writes record batches of up to max_request_size (less the request's
    # own framing); batch_size alone does not bound them
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=min(batch_bytes, 16384),
                  max_request_size=batch_bytes + 1024) as producer:
        producer.send_batch(TOPIC, table).result(300)


def main(n: int, max_poll: int, batch_bytes: int, rounds: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {p: [] for p in PATHS}
    with MockCluster(3) as mock:
        mock.set_share_groups(auto_offset_reset="earliest")
        mock.create_topic(TOPIC, 4)
        produce(mock.bootstrap, n, batch_bytes)
        names = list(PATHS)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                runs[name].append(PATHS[name](mock.bootstrap, n, max_poll))
        alone = client_alone(mock.bootstrap, n, max_poll)
    out: dict[str, Any] = {"records": n, "max_poll_records": max_poll,
                           "batch_bytes": batch_bytes, "rounds": rounds}
    for name, rs in runs.items():
        rates = [r["rate"] for r in rs]
        out[name] = {"median": round(statistics.median(rates)), "min": round(min(rates)),
                     "max": round(max(rates))}
        if "client_cpu_us" in rs[0]:
            out[name]["client_cpu_us_per_record"] = round(
                statistics.median(r["client_cpu_us"] for r in rs), 2)
    conf = out["confluent_poll"]["median"]
    for name in ("kproto_poll_batch", "kproto_poll"):
        out[f"{name}_vs_confluent"] = round(out[name]["median"] / conf, 2)
    for name in ("kproto_poll_batch", "kproto_poll", "confluent_poll"):
        out[f"{name}_vs_ceiling"] = round(out[name]["median"]
                                          / out["mock_ceiling"]["median"], 2)
    out["client_alone_records_per_s"] = {k: round(v) for k, v in alone.items()}
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", type=int, nargs="?", default=50_000)
    ap.add_argument("max_poll_records", type=int, nargs="?", default=2000)
    ap.add_argument("--batch-bytes", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(json.dumps(main(a.records, a.max_poll_records, a.batch_bytes, a.rounds), indent=2))
