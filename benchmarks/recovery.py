"""The recovery benchmark's parts (issue 27): brokers behind fault proxies, the
faults, the client workloads (each in its own process), and the analysis.

:mod:`benchmarks.bench_recovery` runs them and prints the table; this module
holds what one scenario needs:

- :class:`Setup` starts a broker (Tansu, librdkafka's 3-broker mock cluster,
  or noida-db) with a :class:`~kproto.testing.FaultProxy` in front of each
  broker (``port_map`` mode: clients bootstrapped on ``proxied`` go through the
  proxies; clients on ``direct`` do not) and injects the faults;
- :func:`worker` is a client workload, run in a child process (spawned, so
  the proxies' threads in this process never hold the client's GIL): an
  unpaced producer (``send`` per record or ``send_batch`` of Arrow tables), a
  paced feeder, or a consumer (``poll`` or ``poll_batch``); it samples its
  count every 0.1 s and checks what it can (a consumer: every partition's
  offsets contiguous from 0);
- :func:`recovery` turns the samples into the numbers of the table.

Every value is 100 bytes: a 12-digit sequence number, then spaces, so a
producer's topic is read back and every sequence number counted (lost: sent
and not in the log; duplicated: in the log more than once).
"""

from __future__ import annotations

import collections
import logging
import os
import random
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

VALUE_SIZE = 100
DIGITS = 12
PARTITIONS = 4
SAMPLE_EVERY = 0.02
log = logging.getLogger("recovery")
COMPRESSION = "lz4"   # keeps the brokers' in-memory logs small: ~1M records/s for minutes


@dataclass(frozen=True)
class Timing:
    """Seconds for each phase of a scenario."""

    warmup: float       # clients connected and running before anything is measured
    healthy: float      # the healthy rate is measured over this
    cuts: float         # connections cut repeatedly for this long
    outage: float       # a simulated restart: connections reset, new ones refused this long
    prefill: int        # consumers: records in the topic before they start (the healthy drain)
    recover: float      # measured after the fault ends
    feed_rate: int      # records/s the feeder writes for the consumers


FULL = Timing(warmup=4, healthy=8, cuts=40, outage=10, prefill=2_000_000, recover=25,
              feed_rate=200_000)
QUICK = Timing(warmup=2, healthy=2, cuts=3, outage=1.5, prefill=300_000, recover=6,
               feed_rate=100_000)


# --------------------------------------------------------------------------- values


def values(start: int, n: int) -> Any:
    """``n`` values for sequence numbers ``start..start+n-1`` as a pyarrow binary array."""
    import pyarrow as pa

    seqs = np.arange(start, start + n, dtype=np.int64)
    body = np.full((n, VALUE_SIZE), 32, dtype=np.uint8)
    body[:, :DIGITS] = (seqs[:, None] // 10 ** np.arange(DIGITS - 1, -1, -1, dtype=np.int64)
                        % 10 + 48).astype(np.uint8)
    offsets = np.arange(0, (n + 1) * VALUE_SIZE, VALUE_SIZE, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(body)])


_PAD = b" " * (VALUE_SIZE - DIGITS)


def sequence_counts(batches: Any, sent: int) -> tuple[np.ndarray, int]:
    """How often each sequence number ``0..sent-1`` is in ``batches`` (pyarrow
    RecordBatches, their ``value`` column; 254 stands for 254 or more), and how
    many records there were."""
    counts = np.zeros(sent, dtype=np.uint8)
    total = 0
    for batch in batches:
        column = batch.column("value")
        if len(column) == 0:
            continue
        data = np.frombuffer(column.buffers()[2], dtype=np.uint8)
        starts = np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset:][:len(column)]
        digits = data[starts[:, None] + np.arange(DIGITS)].astype(np.int64) - 48
        seqs = digits @ (10 ** np.arange(DIGITS - 1, -1, -1, dtype=np.int64))
        if seqs.min() < 0 or seqs.max() >= sent:
            raise AssertionError(f"a value that was never sent: {seqs.min()}..{seqs.max()}")
        if (seqs[1:] > seqs[:-1]).all():         # no repeats inside: a plain add is right
            counts[seqs] += 1
        else:
            np.add.at(counts, seqs, np.uint8(1))
        counts[seqs] = np.minimum(counts[seqs], 254)  # uint8 wraps at 256: stop short of it
        total += len(column)
    return counts, total


# --------------------------------------------------------------------------- brokers and faults


class Setup:
    """A broker (``"tansu"``, ``"mock"`` with 3 brokers, ``"noida"``) with one
    fault proxy per broker; a context manager."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.broker: Any = None
        self.proxies: list[Any] = []
        self.topics: list[str] = []

    def __enter__(self) -> Setup:
        from kproto.testing import MockCluster, NoidaBroker, TansuBroker, proxy_cluster

        if self.kind == "mock":
            self.broker = MockCluster(3).start()
            brokers = self.broker.brokers
        else:
            self.broker = (TansuBroker() if self.kind == "tansu" else NoidaBroker()).start()
            brokers = [(0, self.broker.host, self.broker.port)]
        self.direct = ",".join(f"{h}:{p}" for _, h, p in brokers)
        self.proxies = proxy_cluster(brokers)
        self.proxied = ",".join(p.address for p in self.proxies)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for p in self.proxies:
            p.stop()
        self.broker.stop()

    def create_topic(self) -> str:
        topic = f"recovery-{uuid.uuid4().hex[:8]}"
        if self.kind == "mock":
            self.broker.create_topic(topic, PARTITIONS)
        else:
            from kproto import Admin

            with Admin(bootstrap_servers=self.direct) as admin:
                admin.create_topics({topic: PARTITIONS})
        self.topics.append(topic)
        return topic

    def delete_topics(self) -> None:
        """Delete the topics made so far (the brokers keep their logs in memory;
        the mock cannot delete)."""
        if self.kind != "mock" and self.topics:
            from kproto import Admin

            with Admin(bootstrap_servers=self.direct) as admin:
                admin.delete_topics(self.topics)
        self.topics = []

    def cut(self, seconds: float, rng: random.Random) -> int:
        """Cut every connection through the proxies every 0.2-0.6 s for ``seconds``
        (half the time mid-answer: ``cut_after`` a few KiB); returns how many cuts."""
        end, cuts = time.monotonic() + seconds, 0
        while True:
            time.sleep(min(rng.uniform(0.2, 0.6), max(0.0, end - time.monotonic())))
            if time.monotonic() >= end:
                return cuts
            for p in self.proxies:
                if rng.random() < 0.5:
                    p.cut_after(rng.randrange(1, 16384))
                else:
                    p.drop_connections()
            cuts += 1

    def outage(self, seconds: float) -> None:
        """A restart as the clients see it, log kept: every connection reset, new
        ones refused for ``seconds``."""
        for p in self.proxies:
            p.refuse = True
            p.drop_connections()
        time.sleep(seconds)
        for p in self.proxies:
            p.heal()

    def restart(self) -> float:
        """Really restart the broker (noida-db: SIGTERM, start on the same data);
        returns the seconds it took."""
        start = time.monotonic()
        self.broker.restart()
        return time.monotonic() - start

    def move_leaders(self, topic: str) -> dict[int, int]:
        """Move every partition's leader to another mock broker; returns the new leaders."""
        from kproto import Admin

        with Admin(bootstrap_servers=self.direct) as admin:
            info = admin.list_topics()[topic]
        leaders = {p: info.partitions[p].leader for p in info.partitions}
        ids = [b for b, _, _ in self.broker.brokers]
        moved = {}
        for partition in range(PARTITIONS):
            old = leaders.get(partition, -1)
            new = next(b for b in ids[partition % len(ids):] + ids if b != old)
            self.broker.set_leader(topic, partition, new)
            moved[partition] = new
        return moved


# --------------------------------------------------------------------------- client workloads


def worker(role: str, bootstrap: str, topic: str, rate: int, stop: Any, shared: Any,
           conn: Any) -> None:
    """A client workload in a child process; sends its result dict down ``conn``.

    ``role``: ``send``/``send_batch`` (unpaced, idempotent, acks=all), ``feed``
    (``send_batch`` paced at ``rate`` records/s), ``poll``/``poll_batch`` (every
    partition of ``topic`` from offset 0, no group). ``shared.value`` is kept at
    the count (acknowledged or consumed) for the parent; ``stop`` set ends it
    (a producer flushes first)."""
    log_to = os.environ.get("KPROTO_RECOVERY_LOG")      # a directory: the kproto DEBUG log
    if log_to:
        logging.basicConfig(filename=os.path.join(log_to, f"{role}-{topic}.log"),
                            level=logging.DEBUG,
                            format="%(created).3f %(threadName)s %(name)s %(message)s")
    try:
        if role in ("poll", "poll_batch"):
            result = _consume(role, bootstrap, topic, stop, shared)
        else:
            result = _produce(role, bootstrap, topic, rate, stop, shared)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the run
        result = {"crash": repr(exc)}
    conn.send(result)
    conn.close()


class _Sampler(threading.Thread):
    def __init__(self, read: Any, shared: Any) -> None:
        super().__init__(daemon=True)
        self.read, self.shared, self.samples = read, shared, []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            t, counts = time.monotonic(), self.read()
            self.samples.append((t, *counts))
            self.shared.value = counts[0]
            self.done.wait(SAMPLE_EVERY)

    def finish(self) -> list[tuple[float, ...]]:
        self.done.set()
        self.join()
        return self.samples


def _produce(role: str, bootstrap: str, topic: str, rate: int, stop: Any,
             shared: Any) -> dict[str, Any]:
    from kproto import Producer
    from kproto.errors import KafkaTimeoutError

    counts = [0, 0]          # acknowledged, failed: touched only on the sender thread
    sent = 0
    errors: dict[str, int] = {}

    def on_delivery(error: Any, _metadata: Any) -> None:
        counts[error is not None] += 1

    pending: collections.deque[tuple[Any, int]] = collections.deque()  # send_batch's

    def read() -> tuple[int, int, int]:
        while pending and pending[0][0].done():      # BatchFutures, oldest first
            future, n = pending.popleft()
            counts[future.exception(0) is not None] += n
        return counts[0], sent, counts[1]

    producer = Producer(bootstrap_servers=bootstrap, enable_idempotence=True,
                        compression_type=COMPRESSION, client_id=f"recovery-{role}")
    sampler = _Sampler(read, shared)
    sampler.start()
    chunk = 2000 if role != "feed" else max(1, rate // 20)
    next_at = time.monotonic()
    try:
        while not stop.is_set():
            try:
                if role == "send":
                    for _ in range(chunk):
                        producer.send(topic, b"%012d" % sent + _PAD, on_delivery=on_delivery)
                        sent += 1
                else:
                    if role == "feed":
                        next_at += 0.05
                        time.sleep(max(0.0, next_at - time.monotonic()))
                    pending.append((producer.send_batch(topic, {"value": values(sent, chunk)}),
                                    chunk))
                    sent += chunk
            except KafkaTimeoutError as exc:        # a full buffer past max_block_ms
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
        flush_start = time.monotonic()
        producer.flush(120)
        flushed = time.monotonic() - flush_start
        read()                                   # count the send_batch futures flush ended
    finally:
        producer.close(5)
        samples = sampler.finish()
    return {"samples": samples, "sent": sent, "acked": counts[0], "failed": counts[1],
            "errors": errors, "flush_seconds": flushed}


def _consume(role: str, bootstrap: str, topic: str, stop: Any,
             shared: Any) -> dict[str, Any]:
    from kproto import Consumer

    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                        client_id=f"recovery-{role}")
    consumer.assign([(topic, p) for p in range(PARTITIONS)])
    expected = [0] * PARTITIONS       # next offset of each partition
    gaps = [0]
    dups = [0]
    sampler = _Sampler(lambda: (sum(expected),), shared)
    sampler.start()

    def check(partition: int, first: int, n: int) -> None:
        log.debug("partition %d: offset %d where %d was next", partition, first,
                  expected[partition])
        if first > expected[partition]:
            gaps[0] += first - expected[partition]
        elif first < expected[partition]:
            dups[0] += expected[partition] - first
        expected[partition] = first + n

    try:
        while not stop.is_set():
            if role == "poll":
                for r in consumer.poll(100):
                    if r.offset != expected[r.partition]:
                        check(r.partition, r.offset, 1)
                    else:
                        expected[r.partition] += 1
            else:
                batch = consumer.poll_batch(100)
                if batch.num_rows:
                    parts = batch.column("partition").to_numpy()
                    offsets = batch.column("offset").to_numpy()
                    for p in np.unique(parts):
                        o = offsets[parts == p]
                        if not (o[1:] - o[:-1] == 1).all():
                            gaps[0] += int((o[1:] - o[:-1] - 1).clip(0).sum())
                        check(int(p), int(o[0]), 0)
                        expected[int(p)] = int(o[-1]) + 1
    finally:
        consumer.close()
        samples = sampler.finish()
    return {"samples": samples, "consumed": sum(expected), "positions": expected,
            "gaps": gaps[0], "duplicates": dups[0]}


# --------------------------------------------------------------------------- analysis


def rate_between(samples: list[tuple[float, ...]], t0: float, t1: float) -> float:
    """Records/s counted between ``t0`` and ``t1`` (samples are ``(t, count, ...)``)."""
    return (count_at(samples, t1) - count_at(samples, t0)) / max(t1 - t0, 1e-9)


def count_at(samples: list[tuple[float, ...]], t: float, column: int = 1) -> float:
    """The count at ``t``, interpolated between the samples around it."""
    ts = [s[0] for s in samples]
    i = int(np.searchsorted(ts, t))
    if i <= 0:
        return samples[0][column]
    if i >= len(samples):
        return samples[-1][column]
    (ta, *a), (tb, *b) = samples[i - 1], samples[i]
    return a[column - 1] + (b[column - 1] - a[column - 1]) * (t - ta) / max(tb - ta, 1e-9)


def back_to_healthy(samples: list[tuple[float, ...]], start: float, end: float,
                    healthy: float, share: float = 0.9, window: float = 0.5) -> float | None:
    """Seconds from ``start`` until the rate over the ``window`` that begins then
    first reaches ``share`` of ``healthy``, counted from the first progress after
    ``start`` on (so a burst after a still time does not count for the still time;
    None: not before ``end``)."""
    first = first_after(samples, start, end)
    if first is None:
        return None
    t = start + first
    while t + window <= end:
        if rate_between(samples, t, t + window) >= share * healthy:
            return t - start
        t += SAMPLE_EVERY
    return None


def drained(samples: list[tuple[float, ...]], start: float, end: float,
            backlog: float) -> float | None:
    """Seconds from ``start`` until ``backlog`` more records were counted (None: not by ``end``)."""
    target = count_at(samples, start) + backlog
    for t, count, *_ in samples:
        if start <= t <= end and count >= target:
            return t - start
    return None


def time_of(samples: list[tuple[float, ...]], count: float) -> float:
    """When the count reached ``count`` (interpolated between samples)."""
    prev_t, prev_c = samples[0][0], samples[0][1]
    for t, c, *_ in samples:
        if c >= count:
            return prev_t + (t - prev_t) * (count - prev_c) / max(c - prev_c, 1e-9)
        prev_t, prev_c = t, c
    raise AssertionError(f"the count never reached {count}")


def first_after(samples: list[tuple[float, ...]], start: float, end: float) -> float | None:
    """Seconds from ``start`` until the count first moves (None: not by ``end``):
    how long the client took to be connected and working again."""
    base = count_at(samples, start)
    return next((t - start for t, count, *_ in samples if start <= t <= end and count > base),
                None)
