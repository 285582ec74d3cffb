"""Restart without loss, for real: noida-db killed (SIGKILL) or stopped, and started
again on the same port and data dir, under a producer, a group consumer and a
Spark streaming query (issue 15, item 4).

noida-db keeps its whole Kafka state in one file rewritten about once a second
(see :mod:`kproto.testing`, "noida-db facts"): SIGTERM saves, then noida-db goes
on answering Produce until it exits a few ms later (4-66 ms measured), so what it
acknowledges in that gap is not saved; SIGKILL loses what changed since the last
save, acknowledged (acks=all) or not. That is the broker's durability limit, not
the client's (docs/brokers.md), so the proofs are:

- graceful restart (SIGTERM, start again) mid-produce: 0 duplicated, in order,
  every record at the offset its acknowledgement named, and lost only records
  acknowledged after SIGTERM was sent (one run of sequence numbers per
  partition; every record acknowledged after the restart is there);
- kill -9 mid-produce at an arbitrary moment: 0 duplicated, in order, nothing
  damaged, and lost only acknowledged records of the broker's unsaved window
  (one run of sequence numbers per partition, acknowledged shortly before the
  kill; every record acknowledged after the restart is there); the count is
  measured and reported;
- kill -9 at a save boundary (the producer keeps sending, its requests held by
  a proxy, until the broker has saved everything it acknowledged): 0 lost,
  0 duplicated, in order — retries of batches the broker wrote but whose
  answers were lost are recognised (DUPLICATE_SEQUENCE_NUMBER) from the
  producer state noida-db saved with the records;
- a group consumer (commit after processing) across kill -9: every record at
  least once, none skipped, in order per partition; noida-db forgets its group
  members, the consumer rejoins and each re-delivery starts at the offset the
  restarted broker had committed: after a kill at an arbitrary moment, what
  noida had saved (acknowledged commits of its last ~1 s are lost with it);
  after a kill at a save boundary, exactly the last acknowledged commit, so
  the only duplicates are records polled after it (between the restart and
  the rejoin, their commit refused with CommitFailedError, as Java's);
- a Spark streaming query across kill -9 and restart: every record exactly once.

Each test has a broker of its own (module-scoped, killed and restarted here).
Counts: ``pytest -s`` prints them, ``KPROTO_NOIDA_REPORT=path`` saves them.
"""

from __future__ import annotations

import collections
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from kproto import Admin, Consumer, Producer
from kproto.testing import FaultProxy, NoidaBroker, free_port

from .noida_support import Ledger, LogCounter, parse, saved_mtime, settle_saved, value

try:        # the Spark session fixture of tests/test_spark.py (one per module)
    from .test_spark import spark  # noqa: F401
except ImportError:     # moved to conftest.py
    pass

pytestmark = pytest.mark.broker

LEDGER = Ledger("noida restart proofs")


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    LEDGER.report()


@pytest.fixture(scope="module")
def broker() -> Iterator[NoidaBroker]:
    """A noida-db of this module's own: the tests kill and restart it."""
    b = NoidaBroker()
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def topic(broker: NoidaBroker) -> str:
    return f"restart-{uuid.uuid4().hex[:10]}"


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics({topic: partitions})


# --------------------------------------------------------------------------- producing


class Sender(threading.Thread):
    """Sends ``value(p, seq)`` round-robin to ``partitions`` at about ``rate`` records/s
    and notes every outcome: acknowledgement time (time.time()) and offset, or error."""

    def __init__(self, producer: Producer, topic: str, partitions: int, total: int,
                 rate: float) -> None:
        super().__init__(daemon=True)
        self.producer, self.topic, self.partitions = producer, topic, partitions
        self.total, self.rate = total, rate
        self.acks: dict[tuple[int, int], tuple[float, int]] = {}
        self.failed: dict[tuple[int, int], BaseException] = {}
        self.sent = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    def _done(self, key: tuple[int, int], fut: Any) -> None:
        now = time.time()
        exc = fut.exception(0)
        with self._lock:
            if exc is not None:
                self.failed[key] = exc
            else:
                self.acks[key] = (now, fut.result(0).offset)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acks)

    def run(self) -> None:
        try:
            start = time.monotonic()
            for i in range(self.total):
                p, s = i % self.partitions, i // self.partitions
                fut = self.producer.send(self.topic, value(p, s), partition=p)
                fut.add_done_callback(lambda f, k=(p, s): self._done(k, f))
                self.sent = i + 1
                if i % 40 == 39:
                    time.sleep(max(0.0, start + (i + 1) / self.rate - time.monotonic()))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def _producer(bootstrap: str) -> Producer:
    return Producer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                    linger_ms=2, request_timeout_ms=3000, retry_backoff_ms=50,
                    retry_backoff_max_ms=250, delivery_timeout_ms=90000)


def _read_log(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, int]]]:
    """[(offset, seq)] of every record of each partition, checked one by one."""
    with Consumer(bootstrap_servers=bootstrap) as c:
        table = c.read_range(topic, {p: ("earliest", "latest") for p in range(partitions)},
                             timeout_ms=30000)
    log: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
    for part, off, v in zip(table.column("partition").to_pylist(),
                            table.column("offset").to_pylist(),
                            table.column("value").to_pylist(), strict=True):
        tag, p, s = parse(v)
        assert tag == b"" and p == part, f"record {v!r} in partition {part}"
        log[part].append((off, s))
    for p, rows in log.items():
        offsets = [o for o, _ in rows]
        assert offsets == sorted(set(offsets)), f"partition {p}: offsets out of order"
    return log


def _check_produced(sender: Sender, log: dict[int, list[tuple[int, int]]]
                    ) -> dict[str, Any]:
    """What is in the log against what was sent and acknowledged: returns the counts
    and asserts 0 duplicated, in order, and acknowledged offsets right."""
    read = sum(len(rows) for rows in log.values())
    duplicated = 0
    lost_acked: dict[int, list[int]] = {}
    for p, rows in log.items():
        seqs = [s for _, s in rows]
        duplicated += len(seqs) - len(set(seqs))
        assert seqs == sorted(set(seqs)), f"partition {p}: duplicated or out of order"
        present = set(seqs)
        at = dict((s, o) for o, s in rows)
        sent_here = range((sender.sent - p + sender.partitions - 1) // sender.partitions)
        for s in sent_here:
            ack = sender.acks.get((p, s))
            if s not in present:
                if ack is not None:
                    lost_acked.setdefault(p, []).append(s)
            elif ack is not None and ack[1] >= 0:
                assert at[s] == ack[1], (f"partition {p} seq {s}: acknowledged at offset "
                                         f"{ack[1]}, found at {at[s]}")
        assert present <= set(sent_here), f"partition {p}: records never sent"
    present_of = {p: {s for _, s in rows} for p, rows in log.items()}
    unacked_missing = sum(
        1 for i in range(sender.sent)
        if (i % sender.partitions, i // sender.partitions) not in sender.acks
        and i // sender.partitions not in present_of[i % sender.partitions])
    return {"produced": sender.sent, "acknowledged": len(sender.acks),
            "failed": len(sender.failed), "read": read, "duplicated": duplicated,
            "lost_acknowledged": sum(len(v) for v in lost_acked.values()),
            "lost_unacknowledged": unacked_missing, "_lost": lost_acked}


def _produce_through(broker: NoidaBroker, bootstrap: str, topic: str, fault: Callable[
        [Sender], dict[str, Any]], *, partitions: int = 4, total: int = 8000,
        rate: float = 3000, fault_after: int = 3000) -> tuple[Sender, dict[str, Any],
                                                            LogCounter]:
    """Run a Sender and call ``fault(sender)`` once ``fault_after`` records are
    acknowledged; then wait for every record's outcome."""
    with LogCounter() as logs, _producer(bootstrap) as producer:
        sender = Sender(producer, topic, partitions, total, rate)
        sender.start()
        deadline = time.monotonic() + 30
        while sender.acked_count() < fault_after:
            assert time.monotonic() < deadline, "producer stuck before the fault"
            assert sender.error is None, sender.error
            time.sleep(0.005)
        info = fault(sender)
        sender.join(60)
        assert not sender.is_alive() and sender.error is None, sender.error
        start = time.monotonic()
        producer.flush(90)
        info["flush_after_fault_s"] = round(time.monotonic() - start, 2)
    return sender, info, logs


def test_graceful_restart_mid_produce_loses_only_what_noida_acked_after_sigterm(broker,
                                                                             topic):
    """SIGTERM, start again on the same data dir, while an idempotent acks=all producer
    sends. noida-db (0.2.3) saves its state on SIGTERM, then goes on answering Produce
    until it exits 4-66 ms later: what it acknowledges in that gap is not in the saved
    file and is gone after the restart (issue 27: the producer's next batch then meets
    OUT_OF_ORDER_SEQUENCE_NUMBER and takes a new producer id, as Java's does). This
    test used to assert 0 lost and failed when a batch's answer fell in that gap (about
    1 run in 20 under load; measured with every Produce answer and the saved file).
    Proven: nothing duplicated, in order, every record at its acknowledged offset; the
    records lost were acknowledged after SIGTERM was sent and before the restart, one
    run of sequence numbers per partition; nothing acknowledged after the restart lost."""
    _create(broker.bootstrap, topic, 4)

    def restart(sender: Sender) -> dict[str, Any]:
        acked, t0 = sender.acked_count(), time.monotonic()
        term = time.time()
        broker.stop(keep_data=True)
        down = time.monotonic()
        time.sleep(0.3)                             # the producer keeps sending meanwhile
        started = time.time()
        broker.start()
        return {"acked_at_stop": acked, "stop_s": round(down - t0, 3),
                "down_s": round(time.monotonic() - down, 3), "term_at": term,
                "started_at": started}

    sender, info, logs = _produce_through(broker, broker.bootstrap, topic, restart)
    counts = _check_produced(sender, _read_log(broker.bootstrap, topic, 4))
    lost = counts.pop("_lost")
    term, started = info.pop("term_at"), info.pop("started_at")
    LEDGER.add("produce: graceful restart (SIGTERM)", **counts, **info,
               client_retries=dict(logs.errors), new_producer_ids=logs.counts["new_producer_id"])
    assert counts["failed"] == 0 and counts["acknowledged"] == counts["produced"] == 8000
    assert counts["duplicated"] == 0
    for p, seqs in lost.items():
        assert seqs == list(range(seqs[0], seqs[-1] + 1)), f"partition {p}: lost {seqs}"
        for s in seqs:       # answered after noida's save on SIGTERM, before its exit
            assert term <= sender.acks[(p, s)][0] <= started, (p, s)
    assert counts["lost_unacknowledged"] == 0
    assert counts["read"] == 8000 - counts["lost_acknowledged"]


def test_kill9_mid_produce_loses_only_the_unsaved_window(broker, topic):
    """SIGKILL at an arbitrary moment of an idempotent acks=all producer's run, start
    again 0.3 s later. noida-db forgets what it had not saved (its last ~1 s),
    acknowledged or not; the producer then meets OUT_OF_ORDER_SEQUENCE_NUMBER (or
    UNKNOWN_PRODUCER_ID), takes a new producer id and goes on. Proven: nothing
    duplicated (retries included), in order, nothing damaged; the records lost
    are, per partition, one run of sequence numbers acknowledged before the kill
    and after noida's last save; every record acknowledged after the restart
    is in the log at its acknowledged offset."""
    _create(broker.bootstrap, topic, 4)

    def kill(sender: Sender) -> dict[str, Any]:
        broker.kill()
        killed = time.time()
        acked = sender.acked_count()
        last_save = saved_mtime(broker)
        time.sleep(0.3)
        t0 = time.monotonic()
        broker.start()
        return {"acked_at_kill": acked, "killed_at": killed,
                "last_save_before_kill_s": round(killed - last_save, 3),
                "restart_s": round(time.monotonic() - t0, 3)}

    sender, info, logs = _produce_through(broker, broker.bootstrap, topic, kill)
    log = _read_log(broker.bootstrap, topic, 4)
    counts = _check_produced(sender, log)
    lost = counts.pop("_lost")
    killed = info.pop("killed_at")
    lost_ack_ages = [killed - sender.acks[(p, s)][0] for p, seqs in lost.items() for s in seqs]
    LEDGER.add("produce: kill -9 at an arbitrary moment", **counts, **info,
               lost_acked_age_s=(round(min(lost_ack_ages), 3), round(max(lost_ack_ages), 3))
               if lost_ack_ages else None,
               client_retries=dict(logs.errors), new_producer_ids=logs.counts["new_producer_id"])
    assert counts["duplicated"] == 0 and counts["failed"] == 0
    assert counts["acknowledged"] == counts["produced"] == 8000
    for p, seqs in lost.items():
        assert seqs == list(range(seqs[0], seqs[-1] + 1)), f"partition {p}: lost {seqs}"
        for s in seqs:
            ack_time = sender.acks[(p, s)][0]
            # acknowledged before the kill, within noida's unsaved window (~1 s, plus
            # the time to write its state file)
            assert killed - 2.5 < ack_time <= killed, (p, s, killed - ack_time)
    # nothing acknowledged after the restart is missing (and offsets were checked)
    assert counts["lost_unacknowledged"] == 0
    assert counts["read"] == 8000 - counts["lost_acknowledged"]


@pytest.mark.parametrize("held", ["requests", "answers"])
def test_kill9_at_a_save_boundary_loses_nothing(broker, topic, held):
    """The producer keeps sending while a proxy holds either its requests or the
    broker's Produce answers (the broker wrote those batches; the client never
    hears so); once noida-db has saved everything (no save for 2 s), SIGKILL,
    connections reset, start again. The held batches are retried with their
    sequence numbers: those written and saved come back DUPLICATE_SEQUENCE_NUMBER
    from the producer state noida-db saved with the records, the others are
    written. So 0 lost, 0 duplicated, in order, although the broker was killed
    with requests in flight and answers lost."""
    _create(broker.bootstrap, topic, 4)
    proxy_port = free_port()
    proxy = FaultProxy(broker.port, port=proxy_port, port_map={broker.port: proxy_port})
    hold, release, cut = threading.Event(), threading.Event(), threading.Event()
    held_answers = []

    def hook(key: int, version: int, body: dict[str, Any]) -> None:
        if key == 0 and hold.is_set():
            held_answers.append([(t.get("name"), q["index"], q["base_offset"], q["error_code"])
                                 for t in body["responses"] for q in t["partition_responses"]])
            release.wait(60)
            if cut.is_set():
                raise OSError("answer lost with the broker")
        return None

    proxy.answer_hook = hook
    proxy.start()
    try:
        def kill_after_save(sender: Sender) -> dict[str, Any]:
            if held == "requests":
                proxy.stall = True
            else:
                hold.set()
            t0 = time.monotonic()
            settle_saved(broker, quiet=2.0)
            acked = sender.acked_count()
            broker.kill()
            killed = time.monotonic()
            cut.set()
            release.set()
            proxy.drop_connections()
            proxy.stall = False
            hold.clear()
            time.sleep(0.3)
            broker.start()
            return {"acked_at_kill": acked, "sent_at_kill": sender.sent,
                    "held_s": round(killed - t0, 2),
                    "held_request_chunks": proxy.faults.get("stall", 0),
                    "held_produce_answers": len(held_answers),
                    "batches_in_held_answers": sum(map(len, held_answers)),
                    "restarted_at": time.time()}

        sender, info, logs = _produce_through(broker, proxy.address, topic, kill_after_save)
    finally:
        release.set()
        proxy.stop()
    counts = _check_produced(sender, _read_log(broker.bootstrap, topic, 4))
    lost = counts.pop("_lost")
    duplicate_answers = sum(1 for _, off in sender.acks.values() if off < 0)
    # the batches whose answers were lost: written and saved before the kill, retried
    # after the restart with the same producer id and sequence, answered with the
    # offset of the first write (as Kafka answers a duplicate it still remembers)
    restarted = info.pop("restarted_at")
    lost_answers = {(p, base) for answer in held_answers for _, p, base, err in answer
                    if err == 0}
    reanswered = {(p, off) for (p, _), (t, off) in sender.acks.items() if t > restarted}
    info["lost_answers_reanswered_same_offset"] = len(lost_answers & reanswered)
    LEDGER.add(f"produce: kill -9 at a save boundary, {held} held", **counts, **info,
               records_answered_duplicate_sequence=duplicate_answers,
               client_retries=dict(logs.errors), new_producer_ids=logs.counts["new_producer_id"])
    assert counts["failed"] == 0 and counts["acknowledged"] == counts["produced"] == 8000
    assert not lost and counts["duplicated"] == 0 and counts["read"] == 8000
    if held == "answers":
        assert lost_answers and lost_answers <= reanswered | {
            (p, off) for (p, _), (_, off) in sender.acks.items() if off < 0}


# --------------------------------------------------------------------------- consuming


def _saved_commits(broker: NoidaBroker, group: str) -> dict[int, int]:
    """The group's committed offsets in noida-db's state file, by partition."""
    import json

    assert broker.data_dir is not None
    state = json.loads((broker.data_dir / "kafka.json").read_text())
    return {key[2]: o for key, o in state.get("committed_offsets", []) if key[0] == group}


def test_group_consumer_across_kill9_and_restart(broker, topic):
    """A consumer in a group, committing after processing each poll (manual commits),
    reads 12,000 records (3 partitions) while noida-db is killed twice. noida-db
    forgets its group members on a restart: the consumer's next heartbeat gets
    UNKNOWN_MEMBER_ID, it rejoins and every partition restarts at its committed
    offset (eager rebalance, as Java's consumer). Proven: every record delivered
    at least once, none skipped, each partition in order, and the duplicates
    are exactly the records of the re-deliveries, each of which starts at an
    offset this consumer committed:

    1. kill at an arbitrary moment (from another thread, fetches in flight):
       noida-db may also forget the commits of its last ~1 s, so a re-delivery
       starts at or before the last acknowledged commit (never before the
       first offset committed), at an offset this consumer did commit;
    2. kill at a save boundary (commit acknowledged, then noida saved, then
       SIGKILL, before the next poll): the committed offsets survive, so a
       re-delivery starts exactly at the last acknowledged commit: only records
       delivered after it (polled between the restart and the rejoin, their
       commit refused with CommitFailedError) come again.
    """
    from kproto.errors import KprotoError

    parts, per = 3, 4000
    _create(broker.bootstrap, topic, parts)
    with Producer(bootstrap_servers=broker.bootstrap, acks="all") as p:
        for part in range(parts):
            p.send_batch(topic, pa.table({"value": [value(part, s) for s in range(per)]}),
                         partition=part).result(30)
    settle_saved(broker, quiet=1.5)       # the records are on disk: this is about the consumer
    group = f"g-{topic}"
    delivered: dict[int, list[int]] = {p: [] for p in range(parts)}
    attempted: dict[int, set[int]] = {p: {0} for p in range(parts)}
    acked_commit: dict[int, int] = {p: 0 for p in range(parts)}
    # partitions with an acknowledged commit: a commit of offset 0 (a partition none
    # of whose records was handed out yet) is a commit too, and noida-db keeps it
    committed: set[int] = set()
    commit_errors: collections.Counter[str] = collections.Counter()
    commit_log: list[tuple[float, dict[int, int]]] = []     # (acknowledged at, offsets)
    # re-deliveries: (phase, partition, from offset, delivered up to, last acked commit)
    rewinds: list[tuple[str, int, int, int, int]] = []
    marks: dict[str, Any] = {}
    kill_now, killer_done = threading.Event(), threading.Event()
    phase = "before kills"

    def killer() -> None:
        try:
            kill_now.wait(60)
            broker.kill()
            marks["kill1_at"] = time.time()
            marks["kill1_acked_commit"] = dict(acked_commit)
            marks["kill1_saved_commits"] = _saved_commits(broker, group)
            marks["kill1_position"] = {p: (d[-1] + 1 if d else 0) for p, d in delivered.items()}
            marks["kill1_last_save_age_s"] = round(time.time() - saved_mtime(broker), 3)
            time.sleep(0.5)
            t0 = time.monotonic()
            broker.start()
            marks["kill1_restart_s"] = round(time.monotonic() - t0, 3)
        except BaseException as exc:  # noqa: BLE001 - raised by the test
            marks["killer_error"] = exc
        finally:
            killer_done.set()

    threading.Thread(target=killer, daemon=True).start()
    total = 0
    with LogCounter() as logs, Consumer(
            bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
            request_timeout_ms=3000, retry_backoff_ms=50, retry_backoff_max_ms=250) as c:
        c.subscribe([topic])
        deadline = time.monotonic() + 90
        while not all(d and d[-1] == per - 1 for d in delivered.values()):
            assert time.monotonic() < deadline, {p: len(d) for p, d in delivered.items()}
            if "killer_error" in marks:
                raise marks["killer_error"]
            records = c.poll(200, max_records=100)
            for r in records:
                tag, p, s = parse(r.value)
                assert p == r.partition and s == r.offset, \
                    f"partition {r.partition} offset {r.offset} holds {r.value!r}"
                d = delivered[p]
                top = d[-1] if d else -1
                if r.offset != top + 1:
                    assert r.offset <= top, f"partition {p}: skipped from {top} to {r.offset}"
                    if d[-1] != r.offset - 1:        # the start of a re-delivery
                        rewinds.append((phase, p, r.offset, top, acked_commit[p]))
                d.append(r.offset)
                total += 1
            if records:
                time.sleep(0.02)                # "processing"
                try:
                    # the consumer's positions (after a rejoin they are the committed
                    # offsets it restarted from, not what this loop saw last)
                    positions = {tp.partition: c.position(tp) for tp in c.assignment()}
                    for p, o in positions.items():
                        attempted[p].add(o)
                    c.commit({(topic, p): o for p, o in positions.items()})
                    acked_commit.update(positions)
                    committed.update(positions)
                    commit_log.append((time.time(), dict(positions)))
                except KprotoError as exc:     # not committed; a later commit covers it
                    commit_errors[type(exc).__name__] += 1
            if total >= 3000 and not kill_now.is_set():
                kill_now.set()                  # kill 1: whenever the other thread gets to it
                phase = "after kill 1"
            if killer_done.is_set() and total >= 8000 and phase == "after kill 1":
                # kill 2: at a save boundary; the last commit was acknowledged just now
                assert acked_commit == {tp.partition: c.position(tp) for tp in c.assignment()}
                settle_saved(broker, quiet=1.5)
                marks["kill2_saved_commits"] = _saved_commits(broker, group)
                assert marks["kill2_saved_commits"] == {p: acked_commit[p] for p in committed}
                broker.kill()
                phase = "after kill 2"
                time.sleep(0.3)
                broker.start()

    # the committed offsets the restarted broker had: after kill 1 what noida-db
    # had saved (acknowledged commits of its last moments lost), after kill 2
    # every acknowledged commit (checked above)
    kept1, kept2 = marks["kill1_saved_commits"], marks["kill2_saved_commits"]
    duplicated = 0
    for _, p, start, top, acked in rewinds:
        assert start in attempted[p], f"partition {p}: re-delivery from {start}, never committed"
        assert start <= acked and start in (kept1.get(p, 0), kept2.get(p, 0)), \
            (p, start, acked, kept1, kept2)
        duplicated += top + 1 - start
    for p, offs in delivered.items():
        assert set(offs) == set(range(per)), f"partition {p}: records missing"
    # how old the newest commit noida-db kept at kill 1 was, per partition
    killed_at = marks.pop("kill1_at")
    ages = {}
    for p, o in kept1.items():
        if o == marks["kill1_acked_commit"].get(p):
            continue                    # nothing of this partition's commits was lost
        t = next((t for t, offs in reversed(commit_log) if t < killed_at and offs.get(p) == o),
                 None)
        ages[p] = None if t is None else round(killed_at - t, 3)
    marks["kill1_lost_commits_kept_one_acked_s_before_kill"] = ages
    LEDGER.add("consume: group consumer, kill -9 twice", produced=parts * per, read=total,
               lost=0, duplicated=duplicated,
               redeliveries=[f"p{p} from {s} (had delivered up to {t}, last acked commit {a}, "
                             f"seen {ph})" for ph, p, s, t, a in rewinds],
               **marks, commit_errors=dict(commit_errors), client_log=dict(logs.counts))
    assert "kill2_saved_commits" in marks and min(marks["kill1_position"].values()) < per
    assert total == parts * per + duplicated


# --------------------------------------------------------------------------- Spark


def test_spark_stream_survives_kill9_and_restart(spark, broker, topic, tmp_path):
    """A streaming query (kproto source -> parquet sink, checkpointed, a trigger
    every 300 ms) reads 1,500 records written before; then noida-db is killed
    (after its last save: the records are on disk) and started again 2 s later
    while 1,500 more are produced (the producer retries until it is back), and
    1,500 after. The query goes on through the outage (its triggers meet a dead
    broker) and the sink holds every record exactly once."""
    parts, step = 3, 500
    _create(broker.bootstrap, topic, parts)

    def produce(start: int) -> None:
        with _producer(broker.bootstrap) as p:
            futures = [p.send(topic, value(part, s), partition=part)
                       for s in range(start, start + step) for part in range(parts)]
            p.flush(60)
        assert all(f.exception(0) is None for f in futures)

    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    produce(0)
    stream = (spark.readStream.format("kproto")
              .option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("kafka.request.timeout.ms", "5000").load())
    query = (stream.select("value", "partition", "offset").writeStream.format("parquet")
             .option("path", out).option("checkpointLocation", checkpoint)
             .trigger(processingTime="300 milliseconds").start())
    info: dict[str, Any] = {}

    def arrived() -> int:
        if query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")
        return sum(p["numInputRows"] for p in query.recentProgress)

    def wait_for(n: int, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while arrived() < n:
            assert time.monotonic() < deadline, (arrived(), n)
            time.sleep(0.2)

    try:
        wait_for(parts * step)
        settle_saved(broker, quiet=1.5)
        batches_before = query.lastProgress["batchId"]
        broker.kill()
        during = threading.Thread(target=produce, args=(step,), daemon=True)
        during.start()
        time.sleep(2.0)                   # triggers meet a dead broker meanwhile
        broker.start()
        during.join(60)
        assert not during.is_alive()
        produce(2 * step)
        wait_for(3 * parts * step)
        time.sleep(1.0)                   # nothing more may come
        info["micro_batches"] = query.lastProgress["batchId"] + 1
        info["micro_batches_before_kill"] = batches_before + 1
        info["rows_in_progress_reports"] = arrived()
        info["batches_rows_and_trigger_ms"] = [
            (q["batchId"], q["numInputRows"], q["durationMs"].get("triggerExecution"))
            for q in query.recentProgress if q["numInputRows"]]
    finally:
        query.stop()
    assert query.exception() is None
    rows = spark.read.parquet(out).collect()
    seen: dict[int, list[int]] = {p: [] for p in range(parts)}
    offsets: dict[int, set[int]] = {p: set() for p in range(parts)}
    for r in rows:
        _, p, s = parse(bytes(r["value"]))
        assert p == r["partition"]
        seen[p].append(s)
        offsets[p].add(r["offset"])
    duplicated = sum(len(v) - len(set(v)) for v in seen.values())
    LEDGER.add("spark: streaming query across kill -9 and restart", produced=3 * parts * step,
               produced_during_outage=parts * step, read=len(rows), duplicated=duplicated,
               lost=3 * parts * step - sum(len(set(v)) for v in seen.values()), **info)
    for p in range(parts):
        assert sorted(seen[p]) == list(range(3 * step)), f"partition {p}"
        assert len(offsets[p]) == 3 * step
    assert len(rows) == 3 * parts * step and info["rows_in_progress_reports"] == len(rows)
