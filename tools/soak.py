#!/usr/bin/env python3
"""Produce + consume soak: exactly-once, in order, with steady memory.

Starts a Tansu broker on loopback (kproto.testing.TansuBroker; or uses
--bootstrap-servers), then for --seconds runs at the same time

- a producer thread (idempotent, acks=all) writing at --rate records/s over
  --partitions partitions, alternating ``send()`` per record and
  ``send_batch()`` of Arrow tables, values carrying a generation, the
  partition, a sequence number and a CRC-32 of all three;
- a consumer (this thread) reading with ``poll_batch()`` and checking every
  record: CRC, partition, sequence == offset == the next one expected (so
  nothing lost, nothing twice, nothing out of order);
- a sampler reading this process's VmRSS (/proc/self/status) every
  --sample-every seconds.

Every --rotate seconds the producer moves to a new topic; once the consumer
has read the old topic to its end (checked against what was sent) it moves
too and the old topic is deleted, so the broker's in-memory log stays bounded
(and metadata, assignment and topic deletion are exercised all along).

At the end it prints records, rate, RSS at the start, after the warm-up
(--warmup seconds, default a fifth of the run, at most 60 s), at the end, the
growth after warm-up and its slope, and exits non-zero if a record was lost,
duplicated, reordered or damaged (1) or if RSS grew by more than
--max-growth-mb after the warm-up (2). --json writes the same as JSON.

    nice -n 10 .venv/bin/python tools/soak.py                  # 10 minutes
    .venv/bin/python tools/soak.py --seconds 25 --json out.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa  # noqa: E402

from kproto import Admin, Consumer, Producer  # noqa: E402
from kproto.testing import TansuBroker  # noqa: E402


def rss_kib(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def make_value(gen: int, partition: int, seq: int) -> bytes:
    body = b"g%04d:p%02d:%012d" % (gen, partition, seq)
    return body + b":%08x" % zlib.crc32(body)


class Failure(Exception):
    pass


def check_value(v: bytes, gen: int, partition: int, seq: int, offset: int) -> None:
    body, _, crc = v.rpartition(b":")
    if len(crc) != 8 or zlib.crc32(body) != int(crc, 16):
        raise Failure(f"damaged value at {partition}/{offset}: {v!r}")
    want = b"g%04d:p%02d:%012d" % (gen, partition, seq)
    if body != want or offset != seq:
        raise Failure(f"partition {partition} offset {offset}: got {body!r}, expected "
                      f"{want!r} at offset {seq} (lost, duplicated or reordered)")


class Sampler(threading.Thread):
    def __init__(self, every: float) -> None:
        super().__init__(daemon=True, name="soak-sampler")
        self.every, self.samples = every, [(0.0, rss_kib())]
        self.t0 = time.monotonic()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.samples.append((time.monotonic() - self.t0, rss_kib()))

    def stop(self) -> None:
        self.done.set()
        self.join()
        self.samples.append((time.monotonic() - self.t0, rss_kib()))


class Writer(threading.Thread):
    """Writes generation after generation (one topic each) at a steady rate."""

    def __init__(self, bootstrap: str, prefix: str, partitions: int, rate: float,
                 seconds: float, rotate: float) -> None:
        super().__init__(daemon=True, name="soak-producer")
        self.bootstrap, self.prefix, self.partitions = bootstrap, prefix, partitions
        self.rate, self.seconds, self.rotate = rate, seconds, rotate
        self.finished: queue.Queue[tuple[str, int, list[int]] | None] = queue.Queue()
        self.error: BaseException | None = None
        self.sent = 0

    def topic(self, gen: int) -> str:
        return f"{self.prefix}-{gen:04d}"

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
        finally:
            self.finished.put(None)

    def _run(self) -> None:
        tick = 0.05
        per_tick = max(1, int(self.rate * tick))
        with Producer(bootstrap_servers=self.bootstrap, enable_idempotence=True, linger_ms=5,
                      compression_type="lz4") as p:
            start = time.monotonic()
            gen = 0
            while time.monotonic() - start < self.seconds:
                topic = self.topic(gen)
                with Admin(bootstrap_servers=self.bootstrap) as admin:
                    admin.create_topics({topic: self.partitions}, exist_ok=True)
                counts = [0] * self.partitions
                gen_start = time.monotonic()
                pending: list[Any] = []
                n_tick = 0
                while time.monotonic() - gen_start < self.rotate and \
                        time.monotonic() - start < self.seconds:
                    due = gen_start + n_tick * tick
                    time.sleep(max(0.0, due - time.monotonic()))
                    part = n_tick % self.partitions
                    seqs = range(counts[part], counts[part] + per_tick)
                    if n_tick % 2:            # the bulk path
                        table = pa.table({"value": [make_value(gen, part, s) for s in seqs]})
                        pending.append(p.send_batch(topic, table, partition=part))
                    else:                     # the per-record path
                        pending += [p.send(topic, make_value(gen, part, s), partition=part)
                                    for s in seqs]
                    counts[part] += per_tick
                    self.sent += per_tick
                    n_tick += 1
                    if len(pending) > 20000:
                        pending = [f for f in pending if not f.done() or f.exception(0)]
                        for f in pending:
                            if f.done() and f.exception(0):
                                raise f.exception(0)
                p.flush(120)
                for f in pending:
                    exc = f.exception(0)
                    if exc is not None:
                        raise exc
                # the next topic exists before the consumer is told to move on to it
                # (else its metadata request would auto-create it with the default count)
                with Admin(bootstrap_servers=self.bootstrap) as admin:
                    admin.create_topics({self.topic(gen + 1): self.partitions}, exist_ok=True)
                self.finished.put((topic, gen, counts))
                gen += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds before the RSS baseline (default: a fifth, at most 60)")
    ap.add_argument("--rate", type=float, default=4000, help="records per second")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rotate", type=float, default=60, help="seconds per topic")
    ap.add_argument("--sample-every", type=float, default=2.0)
    ap.add_argument("--max-growth-mb", type=float, default=40.0,
                    help="RSS growth allowed after the warm-up (MiB)")
    ap.add_argument("--bootstrap-servers", default=None,
                    help="use this cluster instead of starting Tansu")
    ap.add_argument("--json", default=None, help="write the result here")
    args = ap.parse_args(argv)
    warmup = args.warmup if args.warmup is not None else min(60.0, args.seconds / 5)

    sampler = Sampler(args.sample_every)
    broker = None
    if args.bootstrap_servers is None:
        broker = TansuBroker().start()
        bootstrap = broker.bootstrap
    else:
        bootstrap = args.bootstrap_servers
    broker_rss_start = rss_kib(broker.pid) if broker and broker.pid else -1
    sampler.start()
    prefix = f"soak-{os.getpid()}-{int(time.time())}"
    writer = Writer(bootstrap, prefix, args.partitions, args.rate, args.seconds, args.rotate)
    result: dict[str, Any] = {"seconds": args.seconds, "rate_target": args.rate,
                              "partitions": args.partitions, "warmup_s": warmup,
                              "max_growth_mib": args.max_growth_mb}
    received = 0
    failure: str | None = None
    t0 = time.monotonic()
    topics_done = 0
    try:
        writer.start()
        with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                      fetch_max_wait_ms=100) as c, Admin(bootstrap_servers=bootstrap) as admin:
            gen = 0
            c.assign([(writer.topic(gen), p) for p in range(args.partitions)])
            expected = [0] * args.partitions
            finished: collections.deque[tuple[str, int, list[int]]] = collections.deque()
            writer_done = False
            while True:
                batch = c.poll_batch(200)
                if batch.num_rows:
                    parts = batch.column("partition").to_pylist()
                    offsets = batch.column("offset").to_pylist()
                    for part, off, v in zip(parts, offsets, batch.column("value").to_pylist(),
                                            strict=True):
                        check_value(v, gen, part, expected[part], off)
                        expected[part] += 1
                    received += batch.num_rows
                while True:
                    try:
                        item = writer.finished.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        writer_done = True
                    else:
                        finished.append(item)
                if writer.error is not None:
                    raise writer.error
                if finished:
                    topic, fgen, counts = finished[0]
                    assert fgen == gen
                    if expected == counts:        # this topic is read to its end: next
                        finished.popleft()
                        topics_done += 1
                        admin.delete_topics([topic])
                        gen += 1
                        expected = [0] * args.partitions
                        c.assign([(writer.topic(gen), p) for p in range(args.partitions)])
                    elif any(e > n for e, n in zip(expected, counts, strict=True)):
                        raise Failure(f"{topic}: read {expected}, only {counts} were sent")
                elif writer_done:
                    break
                if time.monotonic() - t0 > args.seconds + 180:
                    raise Failure(f"not finished 180 s after the run; read {expected} of "
                                  f"generation {gen}")
    except Failure as exc:
        failure = str(exc)
    except Exception as exc:  # noqa: BLE001 - a client error ends the soak as a failure
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        elapsed = time.monotonic() - t0
        sampler.stop()
        broker_rss_end = rss_kib(broker.pid) if broker and broker.pid and broker.running else -1
        if broker is not None:
            broker.stop()
    writer.join(5)
    samples = sampler.samples
    after = [(t, r) for t, r in samples if t >= warmup]
    warm = after[0][1] if after else samples[-1][1]
    end = samples[-1][1]
    slope = 0.0
    if len(after) >= 3:
        n = len(after)
        mt = sum(t for t, _ in after) / n
        mr = sum(r for _, r in after) / n
        var = sum((t - mt) ** 2 for t, _ in after)
        slope = sum((t - mt) * (r - mr) for t, r in after) / var * 60 / 1024 if var else 0.0
    growth = (max(r for _, r in after) - warm) / 1024 if after else 0.0
    result.update({
        "records_sent": writer.sent, "records_checked": received, "topics": topics_done,
        "elapsed_s": round(elapsed, 1), "rate": round(received / elapsed) if elapsed else 0,
        "rss_start_mib": round(samples[0][1] / 1024, 1), "rss_warm_mib": round(warm / 1024, 1),
        "rss_end_mib": round(end / 1024, 1),
        "rss_max_mib": round(max(r for _, r in samples) / 1024, 1),
        "rss_growth_after_warmup_mib": round(growth, 1),
        "rss_slope_after_warmup_mib_per_min": round(slope, 2),
        "broker_rss_start_mib": round(broker_rss_start / 1024, 1),
        "broker_rss_end_mib": round(broker_rss_end / 1024, 1),
        "samples": len(samples), "failure": failure,
    })
    if failure is None and writer.sent != received:
        failure = result["failure"] = f"sent {writer.sent} records, read {received}"
    status = 0
    if failure is not None:
        status = 1
    elif growth > args.max_growth_mb:
        status = 2
    result["status"] = ["ok", "records lost, duplicated, reordered or damaged",
                        f"RSS grew more than {args.max_growth_mb} MiB after the warm-up"][status]
    result["rss_samples"] = [(round(t, 1), round(r / 1024, 1)) for t, r in samples]
    for k, v in result.items():
        if k != "rss_samples":
            print(f"{k:38} {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())
