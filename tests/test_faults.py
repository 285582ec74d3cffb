"""Broker and network faults: the client loses nothing, duplicates nothing, never hangs.

A :class:`kproto.testing.FaultProxy` sits between the client and a single-node
broker of the matrix (tests/brokers.py: Tansu, noida-db; Metadata answers are
rewritten to name the proxy, so every connection crosses it; the mock's three
nodes are tests/test_reliability.py's). The restart test is Tansu's (in-memory:
the restarted log is empty; noida-db's restarts are tests/test_noida_*.py's).
Values carry sequence numbers, so delivery is checked record by record.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from kproto import Consumer, Producer, TopicPartition
from kproto.errors import KafkaConnectionError, KafkaTimeoutError
from kproto.testing import FaultProxy, TansuBroker
from tests.aio_support import driver_fixture

pytestmark = pytest.mark.broker
consumer_driver = driver_fixture(globals())   # each test over each I/O driver


@pytest.fixture
def proxy(broker, unique_topic):
    """The broker reachable only through a fault proxy (the topic made with 4 partitions)."""
    broker.create_topic(unique_topic, 4)
    with broker.proxied() as proxied:
        yield proxied.proxy


single_node = pytest.mark.brokers(needs=("single_node",))


def _values(n: int, start: int = 0) -> pa.Table:
    return pa.table({"value": [b"seq-%09d" % i for i in range(start, start + n)]})


def _seq(batch: pa.RecordBatch | pa.Table) -> list[int]:
    return [int(v[4:]) for v in batch.column("value").to_pylist()]


class Chaos(threading.Thread):
    """Resets every connection through the proxy every ``every`` seconds."""

    def __init__(self, proxy: FaultProxy, every: float) -> None:
        super().__init__(daemon=True)
        self.proxy, self.every, self.done = proxy, every, threading.Event()
        self.drops = 0
        self.paused = threading.Lock()      # held: no resets

    def run(self) -> None:
        while not self.done.wait(self.every):
            with self.paused:
                self.drops += bool(self.proxy.drop_connections())

    def __enter__(self) -> Chaos:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join()


@single_node
def test_consumer_exactly_once_in_order_across_connection_resets(proxy, unique_topic):
    """Five rounds of: produce 8000 records, then read them while responses are cut
    mid-way (once per round, at a different byte) and connections reset every 0.3 s.
    The cut is armed before the round's records are written: the consumer's Fetch
    waiting at the log end carries them through the proxy as soon as they land (armed
    after, a loaded machine let whole rounds pass uncut). The producer is idempotent,
    so a cut that lands on its answer cannot write a batch twice."""
    got: list[int] = []
    with Consumer(bootstrap_servers=proxy.address, auto_offset_reset="earliest",
                  request_timeout_ms=5000) as c, Producer(bootstrap_servers=proxy.address,
                                                          max_request_size=16384,
                                                          enable_idempotence=True) as p:
        c.assign([(unique_topic, 0)])
        proxy.delay = 0.002        # resets land mid-response, not only between requests
        with Chaos(proxy, 0.3) as chaos:
            for round_ in range(5):
                proxy.cut_after(3000 + 20011 * round_)
                with chaos.paused:    # (resets while writing only slow the test down)
                    p.send_batch(unique_topic, _values(8000, 8000 * round_),
                                 partition=0).result(30)
                deadline = time.monotonic() + 60
                while len(got) < 8000 * (round_ + 1) and time.monotonic() < deadline:
                    got += _seq(c.poll_batch(200))
    assert proxy.faults.get("cut", 0) >= 5 and chaos.drops >= 1
    assert got == list(range(40000))                   # every record, once, in order


@single_node
def test_idempotent_producer_loses_and_duplicates_nothing(proxy, unique_topic):
    n = 20000
    with Producer(bootstrap_servers=proxy.address, enable_idempotence=True, linger_ms=1,
                  batch_size=2048, request_timeout_ms=3000, retry_backoff_ms=20) as p:
        proxy.delay = 0.002
        with Chaos(proxy, 0.1) as chaos:
            futures = [p.send(unique_topic, b"seq-%09d" % i, partition=1) for i in range(n)]
            p.flush(60)
        offsets = [f.result().offset for f in futures]
    assert chaos.drops >= 3
    with Consumer(bootstrap_servers=proxy.address) as c:
        end = c.end_offsets([(unique_topic, 1)])[TopicPartition(unique_topic, 1)]
        table = c.read_range(unique_topic, {1: (0, end)})
    seq = _seq(table)
    assert sorted(seq) == list(range(n))          # nothing lost
    assert len(seq) == n == end                   # nothing written twice
    assert seq == list(range(n))                  # and in order
    known = [o for o in offsets if o >= 0]
    assert len(set(known)) == len(known)


@single_node
def test_truncated_and_corrupted_responses_never_become_wrong_data(proxy, unique_topic):
    n = 5000
    with Producer(bootstrap_servers=proxy.address) as p:
        p.send_batch(unique_topic, _values(n), partition=2).result(30)
    errors: list[Exception] = []

    def read_until(c: Consumer, count: int, got: list[int]) -> None:
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            try:
                got += _seq(c.poll_batch(200))
            except Exception as exc:     # a corrupted batch must say so, never pass
                errors.append(exc)

    with Consumer(bootstrap_servers=proxy.address, auto_offset_reset="earliest",
                  request_timeout_ms=5000) as c:
        c.assign([(unique_topic, 2)])
        got: list[int] = []
        proxy.cut_after(3000)                # the next response stops mid-way
        read_until(c, n, got)
        assert got == list(range(n)) and not errors
        with Producer(bootstrap_servers=proxy.address) as p:
            p.send_batch(unique_topic, _values(n, n), partition=2).result(30)
        proxy.corrupt_next(offset=300, min_size=10000)   # lands inside a record batch
        read_until(c, 2 * n, got)
    assert proxy.faults == {"cut": 1, "corrupt": 1}
    assert got == list(range(2 * n))
    assert len(errors) == 1 and "CRC" in str(errors[0]), errors


@single_node
def test_broker_that_stops_answering_times_out_and_recovers(proxy, unique_topic):
    with Producer(bootstrap_servers=proxy.address) as p:
        p.send_batch(unique_topic, _values(100), partition=3).result(30)
    with Consumer(bootstrap_servers=proxy.address, auto_offset_reset="earliest",
                  request_timeout_ms=1500, fetch_max_wait_ms=200) as c:
        c.assign([(unique_topic, 3)])
        assert len(_seq(c.poll_batch(5000))) == 100
        proxy.stall = True
        start = time.monotonic()
        with pytest.raises((KafkaTimeoutError, KafkaConnectionError)):
            c.end_offsets([(unique_topic, 3)])
        assert time.monotonic() - start < 10
        start = time.monotonic()
        # poll returns: after its timeout plus, at worst, the connection attempts of one
        # metadata refresh (a known broker, then a bootstrap server) that began in it
        assert c.poll_batch(500).num_rows == 0
        assert time.monotonic() - start < 0.5 + 2 * 1.5 + 0.8
        proxy.stall = False
        proxy.drop_connections()
        with Producer(bootstrap_servers=proxy.address) as p:
            p.send_batch(unique_topic, _values(50, 100), partition=3).result(30)
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < 50 and time.monotonic() < deadline:
            got += _seq(c.poll_batch(500))
        assert got == list(range(100, 150))


def test_broker_killed_and_restarted_mid_consume(unique_topic):
    """A real restart: Tansu is killed and started again on the same port.

    This Tansu build keeps data in memory only (its S3/postgres engines are not
    usable here), so the restarted broker's log is empty: the consumer must
    reconnect, see OFFSET_OUT_OF_RANGE for its old position, reset to the new
    log start (auto_offset_reset=earliest) and read what is written after the
    restart — without hanging or raising.
    """
    with TansuBroker() as broker:
        port = broker.port
        with Producer(bootstrap_servers=broker.bootstrap) as p:
            p.send_batch(unique_topic, _values(500), partition=0).result(30)
        with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                      request_timeout_ms=2000) as c:
            c.assign([(unique_topic, 0)])
            got: list[int] = []
            while len(got) < 500:
                got += _seq(c.poll_batch(1000))
            broker.stop()
            start = time.monotonic()
            assert c.poll_batch(1000).num_rows == 0
            assert time.monotonic() - start < 5
            restarted = TansuBroker(port=port).start()
            try:
                with Producer(bootstrap_servers=restarted.bootstrap) as p:
                    # fewer records than before: the old position (500) is past the end
                    p.send_batch(unique_topic, _values(300, 1000), partition=0).result(30)
                after: list[int] = []
                deadline = time.monotonic() + 60
                while len(after) < 300 and time.monotonic() < deadline:
                    after += _seq(c.poll_batch(500))
                assert after == list(range(1000, 1300))
            finally:
                restarted.stop()
