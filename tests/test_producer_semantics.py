"""The producer's delivery guarantees, as Kafka's Java client defines them: no record
lost, duplicated or reordered by the client itself.

Against real Tansu brokers. Two fronts stand between client and broker:

- :class:`Gate` (here) answers chosen Produce requests itself with an error,
  without forwarding them: a broker that *refuses* a batch, so nothing of it
  is written (Tansu enforces no ``max.message.bytes``; the gate's size limit
  stands in for it). It can also hold Produce requests (a slow broker).
- :class:`kproto.testing.FaultProxy` for an unreachable broker.

Values carry sequence numbers; every test reads the log back.

The Gate's tests are Tansu's (the Gate does not rewrite Metadata: the broker
must advertise the Gate's port, which only Tansu can be told); the tests without
a front run on the broker matrix (tests/brokers.py).
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Callable

import pyarrow as pa
import pytest

from kproto import Admin, Consumer, Producer, TopicPartition, protocol
from kproto.errors import (
    InvalidRecordError,
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageTooLargeError,
)
from kproto.testing import FaultProxy, TansuBroker, free_port

pytestmark = pytest.mark.broker

NOT_LEADER = 6


def _read_frame(sock: socket.socket) -> bytes | None:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    size = struct.unpack(">i", head)[0]
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(min(size - len(body), 1 << 20))
        if not chunk:
            return None
        body += chunk
    return head + bytes(body)


class Gate:
    """A proxy in front of one broker, one request at a time per connection.

    ``refuse(topic, partition, records) -> error code`` (0: forward) is asked
    for every partition of every Produce request; a request with a refused
    partition is answered here and never forwarded: the refused partitions get
    their code, the others NOT_LEADER_OR_FOLLOWER (retriable, nothing written).
    While ``hold`` is set Produce requests wait; ``delay`` (seconds) slows every
    Produce request down; a request whose API key is in ``reset_on`` resets its
    connection. ``refused`` counts answers given.
    """

    def __init__(self, upstream_port: int, port: int) -> None:
        self.upstream_port, self.port = upstream_port, port
        self.refuse: Callable[[str, int, bytes], int] | None = None
        self.hold = threading.Event()
        self.delay = 0.0
        self.reset_on: set[int] = set()
        self.refused: dict[int, int] = {}
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._stop = threading.Event()
        self._server = socket.create_server(("127.0.0.1", port))
        self._server.settimeout(0.1)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def reset(self) -> None:
        self.refuse = None
        self.hold.clear()
        self.delay = 0.0
        self.reset_on = set()
        self.refused.clear()

    def drop(self) -> int:
        """Reset every connection now; returns how many sockets."""
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(socks)

    def stop(self) -> None:
        self._stop.set()
        self.drop()
        self._server.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        except OSError:
            client.close()
            return
        with self._lock:
            self._socks += [client, upstream]
        try:
            while not self._stop.is_set():
                frame = _read_frame(client)
                if frame is None:
                    break
                key, version, cid = struct.unpack_from(">hhi", frame, 4)
                if key in self.reset_on:
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                      struct.pack("ii", 1, 0))
                    break
                if key == 0:
                    while self.hold.is_set() and not self._stop.is_set():
                        time.sleep(0.005)
                    time.sleep(self.delay)
                    answer = self._judge(version, cid, frame)
                    if answer is not None:
                        client.sendall(answer)
                        continue
                upstream.sendall(frame)
                answer = _read_frame(upstream)
                if answer is None:
                    break
                client.sendall(answer)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                s.close()

    def _judge(self, version: int, cid: int, frame: bytes) -> bytes | None:
        refuse = self.refuse
        if refuse is None:
            return None
        _, body = protocol.decode_request(frame[4:])
        codes = {}
        for t in body["topic_data"]:
            for p in t["partition_data"]:
                codes[(t.get("name"), t.get("topic_id"), p["index"])] = \
                    refuse(t.get("name") or "", p["index"], bytes(p["records"]))
        if not any(codes.values()):
            return None
        responses: dict[tuple[str | None, object], list[dict[str, object]]] = {}
        for (name, tid, index), code in codes.items():
            self.refused[code] = self.refused.get(code, 0) + 1
            responses.setdefault((name, tid), []).append({
                "index": index, "error_code": code or NOT_LEADER, "base_offset": -1,
                "log_append_time_ms": -1, "log_start_offset": -1, "record_errors": [],
                "error_message": None})
        return protocol.encode_response(0, version, cid, {"throttle_time_ms": 0, "responses": [
            {"name": name, "topic_id": tid, "partition_responses": parts}
            for (name, tid), parts in responses.items()]})


def _count(records: bytes) -> int:
    return struct.unpack_from(">i", records, 57)[0]


def _sequence(records: bytes) -> int:
    return struct.unpack_from(">i", records, 53)[0]


@pytest.fixture(scope="module")
def gated():
    """A Tansu broker reachable only through a Gate."""
    port = free_port()
    broker = TansuBroker(advertised_port=port).start()
    gate = Gate(broker.port, port)
    try:
        yield gate
    finally:
        gate.stop()
        broker.stop()


@pytest.fixture
def gate(gated):
    gated.reset()
    yield gated
    gated.reset()


@pytest.fixture(scope="module")
def proxied():
    """A Tansu broker reachable only through a FaultProxy."""
    port = free_port()
    broker = TansuBroker(advertised_port=port).start()
    proxy = FaultProxy(broker.port, port=port).start()
    try:
        yield proxy
    finally:
        proxy.stop()
        broker.stop()


@pytest.fixture
def proxy(proxied):
    proxied.heal()
    yield proxied
    proxied.heal()


def _v(i: int, pad: int = 0) -> bytes:
    return b"seq-%09d" % i + b"." * pad


def _log(bootstrap: str, topic: str, partition: int = 0) -> list[int]:
    """The sequence numbers of the partition's records, in log order."""
    with Consumer(bootstrap_servers=bootstrap) as c:
        end = c.end_offsets([(topic, partition)])[TopicPartition(topic, partition)]
        table = c.read_range(topic, {partition: (0, end)})
    return [int(v[4:13]) for v in table.column("value").to_pylist()]


def _table(start: int, stop: int, pad: int = 0) -> pa.Table:
    return pa.table({"value": [_v(i, pad) for i in range(start, stop)]})


# --------------------------------------------------------------------------- idempotence


@pytest.mark.parametrize("code, error", [(87, InvalidRecordError), (10, MessageTooLargeError)])
def test_idempotent_producer_goes_on_after_a_refused_batch(gate, unique_topic, code, error):
    """The broker refuses one batch for good (INVALID_RECORD; MESSAGE_TOO_LARGE for
    a single record): its records fail, and later batches to the partition are
    written (with a new producer id: the refused sequences are a gap), in order,
    once. Before, every later batch failed with OUT_OF_ORDER_SEQUENCE_NUMBER."""
    with Producer(bootstrap_servers=gate.address, enable_idempotence=True, linger_ms=0,
                  request_timeout_ms=5000) as p:
        first = [p.send(unique_topic, _v(i), partition=0) for i in range(10)]
        p.flush(20)
        gate.refuse = lambda t, part, recs: code if t == unique_topic else 0
        bad = p.send(unique_topic, _v(10), partition=0)
        assert isinstance(bad.exception(20), error)
        gate.refuse = None
        later = [p.send(unique_topic, _v(i), partition=0) for i in range(11, 40)]
        p.send_batch(unique_topic, _table(40, 60), partition=0).result(20)
        assert all(f.exception(0) is None for f in first + later)
    assert _log(gate.address, unique_topic) == [*range(10), *range(11, 60)]


def test_unknown_producer_id_resets_the_sequence_and_retries(gate, unique_topic):
    """UNKNOWN_PRODUCER_ID (the broker lost the producer's state) is retried from
    sequence 0 with a new producer id, not failed."""
    refused = []

    def once(t: str, part: int, recs: bytes) -> int:
        if t == unique_topic and not refused:
            refused.append(_sequence(recs))
            return 59
        return 0

    with Producer(bootstrap_servers=gate.address, enable_idempotence=True, linger_ms=0,
                  retry_backoff_ms=10) as p:
        p.send(unique_topic, _v(0), partition=0).result(20)
        gate.refuse = once
        futures = [p.send(unique_topic, _v(i), partition=0) for i in range(1, 30)]
        p.flush(20)
        assert all(f.exception(0) is None for f in futures)
    assert refused == [1]
    assert _log(gate.address, unique_topic) == list(range(30))


def test_idempotent_producer_goes_on_after_a_delivery_timeout(proxy, unique_topic):
    """The broker is unreachable until a batch expires (delivery_timeout_ms): that
    batch fails, its sequences are unresolved, and once the broker is back the
    next batches go with a new producer id: written, in order, once."""
    with Producer(bootstrap_servers=proxy.address, enable_idempotence=True, linger_ms=0,
                  request_timeout_ms=400, delivery_timeout_ms=1500, retry_backoff_ms=20,
                  retry_backoff_max_ms=100) as p:
        p.send(unique_topic, _v(0), partition=0).result(20)
        proxy.blackhole = True            # requests vanish, answers never come
        proxy.refuse = True
        proxy.drop_connections()
        lost = p.send(unique_topic, _v(1), partition=0)
        assert isinstance(lost.exception(20), KafkaTimeoutError)
        proxy.heal()
        proxy.drop_connections()          # the blackhole left garbage framing behind
        futures = [p.send(unique_topic, _v(i), partition=0) for i in range(2, 30)]
        p.flush(30)
        assert all(f.exception(0) is None for f in futures), \
            [f.exception(0) for f in futures if f.exception(0)][:1]
    assert _log(proxy.address, unique_topic) == [0, *range(2, 30)]


# --------------------------------------------------------------------------- too large


@pytest.mark.parametrize("idempotent", [False, True])
def test_batches_too_large_for_the_topic_are_split(gate, unique_topic, idempotent):
    """MESSAGE_TOO_LARGE for a batch of several records: it is split and re-sent
    (halves, until each fits), for send() and send_batch() batches; a single
    record too large fails alone. Order and exactly-once hold across the splits."""
    limit = 8000                      # the "topic's max.message.bytes"
    seen: list[int] = []

    def too_large(t: str, part: int, recs: bytes) -> int:
        if len(recs) > limit:
            return 10
        seen.append(_count(recs))
        return 0

    gate.refuse = too_large
    with Producer(bootstrap_servers=gate.address, enable_idempotence=idempotent,
                  linger_ms=50, batch_size=1 << 20) as p:
        futures = [p.send(unique_topic, _v(i, 200), partition=0) for i in range(200)]
        big = p.send(unique_topic, _v(10**6, limit), partition=0)
        bulk = p.send_batch(unique_topic, _table(200, 400, 200), partition=0)
        futures += [p.send(unique_topic, _v(i, 200), partition=0) for i in range(400, 450)]
        p.flush(30)
        assert isinstance(big.exception(0), MessageTooLargeError)
        assert all(f.exception(0) is None for f in futures)
        metas = bulk.result(0)
    assert gate.refused.get(10, 0) >= 4 and max(seen) < 200
    assert sum(m.record_count for m in metas) == 200 and len(metas) > 1
    offsets = [f.result(0).offset for f in futures]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert _log(gate.address, unique_topic) == list(range(450))


def test_split_of_a_partition_s_rows_of_a_send_batch(gate, unique_topic):
    """send_batch rows bound for several partitions are encoded in place
    (records.Rows, no copy of each partition's rows); a batch of them the broker
    finds too large is split and re-sent like any other: every row lands once,
    in call order, in its partition."""
    limit = 6000
    gate.refuse = lambda t, part, recs: 10 if len(recs) > limit else 0
    table = _table(0, 300, 100).append_column("partition", pa.array(
        [i % 3 % 2 for i in range(300)], pa.int32()))
    with Producer(bootstrap_servers=gate.address) as p:
        metas = p.send_batch(unique_topic, table).result(30)
    assert gate.refused.get(10, 0) >= 2 and len(metas) > 2
    assert sum(m.record_count for m in metas) == 300
    for part in (0, 1):
        assert _log(gate.address, unique_topic, part) == [
            i for i in range(300) if i % 3 % 2 == part]


def test_on_delivery_reports_the_part_that_carried_the_record(gate, unique_topic):
    """After a split, each record's on_delivery callback gets the outcome of the
    part that carried it (its offset; the error of a part that failed), not the
    outcome of the batch it was first put in."""
    limit = 3000

    def too_large(t: str, part: int, recs: bytes) -> int:
        return 10 if len(recs) > limit else 0

    gate.refuse = too_large
    reports: dict[int, tuple[BaseException | None, object]] = {}
    with Producer(bootstrap_servers=gate.address, linger_ms=50, batch_size=1 << 20) as p:
        for i in range(40):
            p.send(unique_topic, _v(i, 200), partition=0,
                   on_delivery=lambda err, meta, i=i: reports.__setitem__(i, (err, meta)))
        big = p.send(unique_topic, _v(10**6, limit), partition=0,
                     on_delivery=lambda err, meta: reports.__setitem__(-1, (err, meta)))
        p.flush(30)
    assert isinstance(big.exception(0), MessageTooLargeError)
    err, meta = reports.pop(-1)
    assert isinstance(err, MessageTooLargeError) and meta is None
    assert sorted(reports) == list(range(40))
    assert all(err is None for err, _ in reports.values())
    assert [meta.offset for _, meta in (reports[i] for i in range(40))] == list(range(40))


# --------------------------------------------------------------------------- ordering


@pytest.mark.parametrize("idempotent", [False, True])
def test_send_and_send_batch_keep_call_order_per_partition(gate, unique_topic, idempotent):
    """Records a lingering send() batch holds go before the send_batch() rows
    that follow them (one queue per partition), also while batches are retried
    (every third Produce answer refused with a retriable error)."""
    n = [0]

    def every_third(t: str, part: int, recs: bytes) -> int:
        n[0] += 1
        return NOT_LEADER if n[0] % 3 == 0 else 0

    gate.refuse = every_third
    with Producer(bootstrap_servers=gate.address, enable_idempotence=idempotent,
                  linger_ms=300, retry_backoff_ms=10, max_in_flight=5) as p:
        i = 0
        for _ in range(6):
            for _ in range(5):
                p.send(unique_topic, _v(i), partition=0)
                i += 1
            p.send_batch(unique_topic, _table(i, i + 20), partition=0)
            i += 20
        p.flush(30)
    assert gate.refused.get(NOT_LEADER, 0) >= 2
    assert _log(gate.address, unique_topic) == list(range(i))


def test_send_and_send_batch_keep_call_order_on_the_broker_matrix(broker, unique_topic):
    """The same on every broker of the matrix (the mock: 3 brokers), idempotent."""
    with Producer(bootstrap_servers=broker.bootstrap, enable_idempotence=True,
                  linger_ms=300) as p:
        i = 0
        for _ in range(4):
            for _ in range(3):
                p.send(unique_topic, _v(i), partition=0)
                i += 1
            p.send_batch(unique_topic, _table(i, i + 10), partition=0)
            i += 10
        p.flush(30)
    assert _log(broker.bootstrap, unique_topic) == list(range(i))


# --------------------------------------------------------------------------- flush


def test_flush_returns_while_another_thread_keeps_sending(gate, unique_topic):
    """flush() waits for the records sent before it, not for the ones another thread
    keeps adding (Java snapshots the incomplete batches when flush begins). Before,
    it waited for the producer to have nothing pending at all: never, here."""
    stop = threading.Event()
    gate.delay = 0.003                  # a batch in flight takes a few ms
    with Producer(bootstrap_servers=gate.address, linger_ms=20) as p:
        p.send(unique_topic, b"warm-up", partition=0).result(20)

        def busy() -> None:
            i = 0
            while not stop.is_set():
                p.send(unique_topic, _v(i), partition=1)
                i += 1

        threads = [threading.Thread(target=busy, daemon=True) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            time.sleep(0.2)
            mine = p.send(unique_topic, b"mine", partition=0)
            start = time.monotonic()
            p.flush(15)
            assert mine.done() and time.monotonic() - start < 10
        finally:
            stop.set()
            for t in threads:
                t.join()


# --------------------------------------------------------------------------- buffer memory


def test_buffer_accounting_returns_to_zero_and_backpressure_still_works(gate, unique_topic):
    """Thousands of batches through successes, refusals, splits and retries: the
    bytes accounted against buffer_memory come back to exactly 0, and a full
    buffer still blocks send() for max_block_ms, then raises."""
    calls = [0]

    def mixed(t: str, part: int, recs: bytes) -> int:
        calls[0] += 1
        if len(recs) > 3000:
            return 10                       # split
        if calls[0] % 7 == 0:
            return NOT_LEADER               # retried
        if calls[0] % 11 == 0:
            return 87                       # refused for good
        return 0

    gate.refuse = mixed
    with Producer(bootstrap_servers=gate.address, linger_ms=0, batch_size=6000,
                  buffer_memory=64 * 1024, max_block_ms=500, retry_backoff_ms=5) as p:
        futures = [p.send(unique_topic, _v(i, 40), partition=i % 2) for i in range(3000)]
        bulk = [p.send_batch(unique_topic, _table(k, k + 100, 40)) for k in range(0, 1000, 100)]
        p.flush(60)
        failed = sum(f.exception(0) is not None for f in futures)
        for b in bulk:
            b.done()
        assert gate.refused.get(10, 0) and gate.refused.get(NOT_LEADER, 0) and failed
        assert p._accumulator.queued_bytes == 0
        gate.refuse = None
        gate.hold.set()                     # the broker stops answering
        sent = 0
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="buffer_memory"):
            while sent < 10_000:
                p.send(unique_topic, b"x" * 1000, partition=0)
                sent += 1
        assert 40 <= sent <= 80, sent       # ~64 KiB of 1 KB records
        assert time.monotonic() - start < 10
        gate.hold.clear()
        p.flush(30)
        assert p._accumulator.queued_bytes == 0


# --------------------------------------------------------------------------- sender thread


def test_requests_lost_with_a_closed_connection_are_retried_not_mismatched(
        gate, unique_topic, caplog):
    """A Produce request is in flight when a failed metadata refresh closes every
    connection. Before, the producer kept it as in flight for the node, and the
    first answer on the reopened connection (to another partition's request) was
    matched to it: an assertion killed the sender thread, every later send()
    failed. Now the closed connection hands its unanswered requests back and they
    are retried; the reopened connection starts with nothing in flight."""
    caplog.set_level(logging.ERROR, logger="kproto.producer")
    with Admin(bootstrap_servers=gate.address) as admin:
        admin.create_topics({unique_topic: 2})
    with Producer(bootstrap_servers=gate.address, enable_idempotence=True, linger_ms=0,
                  metadata_max_age_ms=200, request_timeout_ms=4000,
                  retry_backoff_ms=20) as p:
        p.send(unique_topic, _v(0), partition=0).result(20)
        p.send(unique_topic, _v(0), partition=1).result(20)
        gate.hold.set()                       # the next Produce stays in flight
        gate.reset_on = {3}                   # and metadata refreshes fail
        first = p.send(unique_topic, _v(1), partition=0)
        time.sleep(0.8)           # refreshes fail meanwhile: every connection is closed
        gate.reset_on = set()
        gate.hold.clear()
        second = p.send(unique_topic, _v(1), partition=1)
        assert first.exception(20) is None and second.exception(20) is None
        assert p._sender.is_alive()
        p.send(unique_topic, _v(2), partition=0).result(20)
    assert not [r for r in caplog.records if "died" in r.getMessage()]
    assert _log(gate.address, unique_topic, 0) == [0, 1, 2]
    assert _log(gate.address, unique_topic, 1) == [0, 1]


def test_connection_resets_never_kill_the_sender(gate, unique_topic, caplog):
    """Connections reset every few ms while batches to 6 partitions are in flight
    (max 5 requests per connection): requests lost with a connection are retried,
    answers on a reopened connection are never matched to them, and the sender
    thread lives on. Idempotence keeps the log exact."""
    caplog.set_level(logging.ERROR, logger="kproto.producer")
    with Admin(bootstrap_servers=gate.address) as admin:
        admin.create_topics({unique_topic: 6})
    stop = threading.Event()
    drops = []

    def chaos() -> None:
        while not stop.wait(0.03):
            drops.append(gate.drop())

    with Producer(bootstrap_servers=gate.address, enable_idempotence=True, linger_ms=1,
                  batch_size=1024, request_timeout_ms=2000, retry_backoff_ms=5) as p:
        t = threading.Thread(target=chaos, daemon=True)
        t.start()
        try:
            futures = []
            for i in range(6000):
                futures.append(p.send(unique_topic, _v(i // 6), partition=i % 6))
                if i % 200 == 199:
                    time.sleep(0.01)
            p.flush(60)
        finally:
            stop.set()
            t.join()
        assert p._sender.is_alive()
        assert all(f.exception(0) is None for f in futures)
    assert sum(d > 0 for d in drops) >= 5, drops
    assert not [r for r in caplog.records if "died" in r.getMessage()]
    for part in range(6):
        assert _log(gate.address, unique_topic, part) == list(range(1000))


def test_an_unexpected_sender_error_fails_pending_records_and_later_sends(
        tansu, unique_topic, monkeypatch):
    """The sender thread must never die silently: a bug there fails what is
    pending with that error, and every later send() raises it at once."""
    with Producer(bootstrap_servers=tansu.bootstrap, linger_ms=0) as p:
        p.send(unique_topic, b"ok", partition=0).result(20)

        def broken(*args: object) -> None:
            raise RuntimeError("bug in the sender")

        monkeypatch.setattr(p._sender, "_handle_response", broken)
        pending = p.send(unique_topic, b"x", partition=0)
        exc = pending.exception(20)
        assert isinstance(exc, KafkaConnectionError) and "bug in the sender" in str(exc)
        with pytest.raises(KafkaConnectionError, match="bug in the sender"):
            p.send(unique_topic, b"y", partition=0)
        p.flush(5)                          # returns: nothing can be sent any more


# --------------------------------------------------------------------------- close


def test_close_with_a_timeout_while_batches_are_in_flight(gate, unique_topic, caplog):
    """close(timeout) while the broker holds the answers: close returns within about
    the timeout, every future is done (failed), the sender thread ends (it fails
    the batches itself, Java's forceClose) without crashing or writing again."""
    caplog.set_level(logging.ERROR, logger="kproto.producer")
    p = Producer(bootstrap_servers=gate.address, linger_ms=0, request_timeout_ms=30000)
    p.send(unique_topic, b"warm-up", partition=0).result(20)
    gate.hold.set()
    futures = [p.send(unique_topic, _v(i), partition=i % 2) for i in range(200)]
    bulk = p.send_batch(unique_topic, _table(0, 100))
    time.sleep(0.3)                          # the requests are in flight
    start = time.monotonic()
    p.close(1.0)
    took = time.monotonic() - start
    gate.hold.clear()
    assert took < 1.0 + 5.0 + 1.0       # the timeout, then at most 5 s for the sender
    assert all(f.done() for f in futures) and bulk.done()
    assert all(isinstance(f.exception(0), KafkaConnectionError) for f in futures)
    p._sender.join(10)
    assert not p._sender.is_alive()
    assert not [r for r in caplog.records if "died" in r.getMessage()]


def test_every_done_callback_runs_once(broker, unique_topic):
    """add_done_callback() racing the sender's completion never loses a callback
    nor runs one twice. The race window (between "is the batch done?" and adding
    the callback) is a few bytecodes; a callbacks list whose append pauses 20 ms
    widens it so that the sender completes the batch inside it (linger 0)."""

    class SlowList(list):
        def append(self, item):
            time.sleep(0.02)
            super().append(item)

    n = 40
    calls = [0] * n
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
        for i in range(n):
            future = producer.send(unique_topic, b"v", partition=0)
            future._batch.callbacks = SlowList(future._batch.callbacks)
            future.add_done_callback(lambda _f, i=i: calls.__setitem__(i, calls[i] + 1))
        producer.flush(60)
    assert calls == [1] * n
