"""The I/O driver (kproto/net/driver.py) under faults, through the clients.

A process that forks while a client has connections open - multiprocessing's
fork start method, a shell-out - leaves the child holding copies of those
sockets. When the client's connections are then cut and it reconnects, the old
sockets live on in the child (and, their peer gone, are readable for ever). The
consumer's poll must still return within its timeout, no wait may wake for
them (a busy loop), and every record must arrive once. (noida-db answers an
empty Fetch at once: there, fast polling is the broker's, not a spurious wake.)
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

from kproto import Consumer, Producer, TopicPartition
from kproto.net.driver import SelectorDriver

pytestmark = pytest.mark.broker


@pytest.fixture
def proxied(broker):
    """The broker reached only through fault proxies (one per node)."""
    with broker.proxied() as proxied:
        yield proxied


@pytest.fixture
def forked() -> Iterator[list[int]]:
    """Fork children that hold every descriptor of this process until the test ends."""
    kids: list[int] = []
    yield kids
    for pid in kids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _fork_holding_sockets(kids: list[int]) -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                     # the child: hold everything, do nothing
        try:
            os.read(read_end, 1)
        finally:
            os._exit(0)
    os.close(read_end)
    os.close(write_end)
    kids.append(pid)


def _send(bootstrap: str, topic: str, start: int, n: int) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        values = [b"%d" % i for i in range(start, start + n)]
        producer.send_batch(topic, pa.table({"value": values}), partition=0).result(30)


def test_poll_keeps_its_timeout_after_a_cut_with_the_old_sockets_held_by_a_child(
        broker, proxied, unique_topic, forked, monkeypatch) -> None:
    broker.create_topic(unique_topic, 1)
    _send(broker.bootstrap, unique_topic, 0, 5)
    early_empty = 0                # waits on connections that ended early with nothing
    real_wait = SelectorDriver.wait

    def counted(self, conns, deadline):
        nonlocal early_empty
        ready = real_wait(self, conns, deadline)
        if conns and not ready and deadline - time.monotonic() > 0.01:
            early_empty += 1
        return ready

    monkeypatch.setattr(SelectorDriver, "wait", counted)
    tp = TopicPartition(unique_topic, 0)
    # Fetches at the log end are held by the broker for 3 s: a poll that blocks on
    # one instead of returning at its timeout shows
    with Consumer(bootstrap_servers=proxied.bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=3000, request_timeout_ms=5000) as consumer:
        consumer.assign([tp])
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            got += [r.offset for r in consumer.poll(200)]
        assert got == [0, 1, 2, 3, 4]
        consumer.poll(100)                         # a Fetch in flight at the log end
        for round_ in range(3):
            _fork_holding_sockets(forked)
            assert sum(p.drop_connections() for p in proxied.proxies) >= 1
            for _ in range(4):
                start = time.monotonic()
                got += [r.offset for r in consumer.poll(200)]
                took = time.monotonic() - start
                assert took < 1.0, f"poll(200) took {took:.2f} s after cut {round_}"
        assert early_empty == 0, f"{early_empty} waits woke with nothing (a busy loop)"
        _send(broker.bootstrap, unique_topic, 5, 5)
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            got += [r.offset for r in consumer.poll(200)]
        assert got == list(range(10))
