"""The I/O driver seam (kproto/net/driver.py): where every client waits for the network.

The blocking driver's own behaviour on socket pairs (readiness, deadlines, a
socket reopened under the old descriptor number), then the clients on the
broker matrix: each waits through a driver, and the consumer's poll steps run
unchanged under the asyncio driver (kproto/aio/driver.py), with the event loop
free while they wait (tests/test_aio*.py test the asyncio clients).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from kproto import Admin, Consumer, Producer, TopicPartition
from kproto.aio.driver import AsyncioDriver
from kproto.net.driver import Offload, SelectorDriver, Steps, Wait
from tests.aio_support import Ticker


class _Conn:
    """What a driver uses of a BrokerConnection: its socket's descriptor, how many
    sockets it has opened, and how many answers it already read (``buffered``: while
    it re-authenticated, KIP-368)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.opened = sock, 1
        self.buffered = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def reopen(self, sock: socket.socket) -> None:
        self.sock, self.opened = sock, self.opened + 1


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made: list[tuple[socket.socket, socket.socket]] = []
    yield made
    for a, b in made:
        a.close()
        b.close()


def _pair(made: list) -> tuple[socket.socket, socket.socket]:
    made.append(socket.socketpair())
    return made[-1]


def test_wait_returns_the_readable_connections_or_none_at_the_deadline(pairs) -> None:
    (a, a_peer), (b, b_peer) = _pair(pairs), _pair(pairs)
    conn_a, conn_b = _Conn(a), _Conn(b)
    with SelectorDriver() as driver:
        start = time.monotonic()
        assert driver.wait([conn_a, conn_b], start + 0.2) == []
        assert 0.19 <= time.monotonic() - start < 1.0
        b_peer.send(b"x")
        assert driver.wait([conn_a, conn_b], time.monotonic() + 5) == [conn_b]
        a_peer.send(b"y")
        assert set(driver.wait([conn_a, conn_b], time.monotonic() + 5)) == {conn_a, conn_b}
        # only the connections of this wait count, even when others are readable
        assert driver.wait([conn_a], time.monotonic() + 5) == [conn_a]
        b.recv(1)
        assert driver.wait([conn_b], time.monotonic() + 0.05) == []
        # a deadline already past: a look without waiting
        assert driver.wait([conn_a], time.monotonic() - 1) == [conn_a]


def test_answers_already_read_make_a_connection_ready_without_a_wait(pairs) -> None:
    # a connection that re-authenticated holds the answers it read meanwhile: its
    # socket has nothing to read for them, the wait must not block on it
    (a, _), (b, b_peer) = _pair(pairs), _pair(pairs)
    conn_a, conn_b = _Conn(a), _Conn(b)
    conn_a.buffered = 2
    b_peer.send(b"x")
    with SelectorDriver() as driver:
        start = time.monotonic()
        assert driver.wait([conn_a, conn_b], start + 5) == [conn_a]
        assert time.monotonic() - start < 0.5
        conn_a.buffered = 0
        assert driver.wait([conn_a, conn_b], time.monotonic() + 5) == [conn_b]


def test_no_connections_is_a_pause_until_the_deadline() -> None:
    with SelectorDriver() as driver:
        start = time.monotonic()
        assert driver.wait([], start + 0.15) == []
        assert 0.14 <= time.monotonic() - start < 1.0


def test_a_connection_reopened_under_its_old_descriptor_number_is_watched(pairs) -> None:
    """The kernel drops a closed socket from the selector; the driver must register
    the new socket even though its descriptor number is the same (a check on the
    number alone would wait on nothing until the deadline)."""
    a, a_peer = socket.socketpair()
    conn = _Conn(a)
    with SelectorDriver() as driver:
        assert driver.wait([conn], time.monotonic() + 0.01) == []     # registered
        fd = a.fileno()
        a.close()
        a_peer.close()
        b, b_peer = _pair(pairs)
        if b.fileno() != fd:
            b, b_peer = b_peer, b
        assert b.fileno() == fd, "the new pair did not reuse the descriptor number"
        conn.reopen(b)
        b_peer.send(b"x")
        assert driver.wait([conn], time.monotonic() + 2) == [conn]


def _closed_but_held(conn: _Conn, peer: socket.socket) -> int:
    """Close ``conn``'s socket while a copy of it stays open, as in a child the
    process forked (its peer gone: readable for ever); returns the copy."""
    held = os.dup(conn.fileno())
    conn.sock.close()
    peer.close()
    return held


@pytest.mark.parametrize("same_number", [True, False], ids=["reused-number", "new-number"])
def test_a_closed_socket_held_open_elsewhere_never_wakes_a_wait(pairs, same_number) -> None:
    """A socket closed while another process still holds it (a fork) stays in the
    selector: the kernel drops a registration only when the socket itself goes,
    and unregistering by its number no longer reaches it. Its events must not
    make the next connection on that number look readable (the caller would
    then block reading it), nor end waits at once with nothing (a busy loop)."""
    a, a_peer = socket.socketpair()
    conn = _Conn(a)
    held = -1
    try:
        with SelectorDriver() as driver:
            assert driver.wait([conn], time.monotonic() + 0.01) == []     # registered
            fd = a.fileno()
            if same_number:
                held = _closed_but_held(conn, a_peer)
                b, _ = _pair(pairs)
                if b.fileno() != fd:
                    b = pairs[-1][1]
                assert b.fileno() == fd, "the new pair did not reuse the descriptor number"
                conn.reopen(b)
                watched = conn
            else:
                b, _ = _pair(pairs)
                held = _closed_but_held(conn, a_peer)
                watched = _Conn(b)
            for _ in range(2):
                start = time.monotonic()
                assert driver.wait([watched], start + 0.2) == []
                assert time.monotonic() - start >= 0.19
    finally:
        if held >= 0:
            os.close(held)
        a_peer.close()


def test_run_drives_steps_and_returns_what_they_return(pairs) -> None:
    a, a_peer = _pair(pairs)
    conn = _Conn(a)

    def echo(n: int) -> Steps[bytes]:
        got = b""
        for i in range(n):
            a_peer.send(b"%d" % i)
            while not (yield Wait([conn], time.monotonic() + 5)):
                pass
            got += a.recv(10)
        yield Wait([], time.monotonic())          # a pause
        return got

    with SelectorDriver() as driver:
        assert driver.run(echo(3)) == b"012"

        def failing() -> Steps[None]:
            yield Wait([conn], time.monotonic())
            raise ValueError("from the step")

        with pytest.raises(ValueError, match="from the step"):
            driver.run(failing())
        a_peer.send(b"z")                         # the driver still works after it
        assert driver.wait([conn], time.monotonic() + 2) == [conn]


def test_an_offload_is_made_in_place_by_the_blocking_driver_and_off_the_loop_by_asyncio(
        pairs) -> None:
    """A step's blocking exchange: the blocking driver calls it on its thread, the
    asyncio driver on a worker thread while the loop goes on; an error it raises
    ends the steps with it."""
    a, a_peer = _pair(pairs)
    conn = _Conn(a)

    def steps(log: list) -> Steps[list]:
        yield Offload(lambda: log.append(threading.current_thread().name))
        a_peer.send(b"x")
        ready = yield Wait([conn], time.monotonic() + 5)
        log.append(len(ready))
        return log

    with SelectorDriver() as driver:
        assert driver.run(steps([])) == [threading.current_thread().name, 1]
    a.recv(1)

    async def on_loop() -> tuple[list, int]:
        def slow() -> Steps[int]:
            yield Offload(lambda: time.sleep(0.2))
            return 7

        def failing() -> Steps[None]:
            yield Offload(lambda: 1 / 0)

        async with Ticker(0.001) as ticker:
            driver = AsyncioDriver()
            got = await driver.run(steps([]))
            assert await driver.run(slow()) == 7
            with pytest.raises(ZeroDivisionError):
                await driver.run(failing())
        return got, ticker.ticks

    got, ticks = asyncio.run(on_loop())
    assert got[0] != threading.current_thread().name and got[1] == 1
    assert ticks >= 50, f"the loop ran {ticks} ticks during a 0.2 s offload"


# ---------------------------------------------------------------- the clients, on brokers


@pytest.mark.broker
def test_every_client_waits_through_a_driver(broker, unique_topic, monkeypatch) -> None:
    """Producer (its sender thread), consumer poll, bounded read, and a request
    to several brokers at once: each one's waits for answers go through
    SelectorDriver.wait (the only module that touches a selector:
    tests/test_sourcecode.py)."""
    waits: list[str] = []
    real_wait = SelectorDriver.wait

    def recorded(self, conns, deadline):
        waits.append(sys._getframe(1).f_code.co_name)
        return real_wait(self, conns, deadline)

    monkeypatch.setattr(SelectorDriver, "wait", recorded)
    broker.create_topic(unique_topic, 2)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
        for i in range(20):
            producer.send(unique_topic, b"v%d" % i, partition=i % 2)
        producer.flush(30)
    assert "_poll_responses" in waits                       # the sender thread
    tps = [TopicPartition(unique_topic, p) for p in (0, 1)]
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign(tps)
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += c.poll(500)
        assert len(got) == 20
        assert "run" in waits                               # the poll's steps
        assert c.read_range(unique_topic).num_rows == 20
        assert "wait" in waits                              # the bounded read's lanes
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        waits.clear()
        ends = admin.list_offsets({tp: "latest" for tp in tps})
        assert sum(o.offset for o in ends.values()) == 20
        assert "collect" in waits                           # Cluster.send_many


@pytest.mark.broker
def test_the_consumers_poll_steps_run_under_an_asyncio_driver(broker, unique_topic) -> None:
    """The seam is real: the same poll logic, driven by the event loop, gets every
    record, and the loop runs other tasks while the poll waits for a Fetch."""
    broker.create_topic(unique_topic, 1)
    tp = TopicPartition(unique_topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=200) as consumer, \
            Producer(bootstrap_servers=broker.bootstrap) as producer:
        consumer.assign([tp])
        consumer.seek(tp, 0)

        def produce_later() -> None:
            time.sleep(0.5)
            for i in range(50):
                producer.send(unique_topic, b"%03d" % i, partition=0)
            producer.flush(30)

        async def main() -> tuple[list, int]:
            driver = AsyncioDriver()
            async with Ticker(0.005) as ticker:
                writer = threading.Thread(target=produce_later)
                writer.start()
                got: list = []
                deadline = time.monotonic() + 30
                while len(got) < 50 and time.monotonic() < deadline:
                    batch = await driver.run(
                        consumer._poll_steps(time.monotonic() + 1.0, None))
                    got += batch.to_records()
            writer.join()
            return got, ticker.ticks

        records, ticks = asyncio.run(main())
    assert [r.value for r in records] == [b"%03d" % i for i in range(50)]
    assert [r.offset for r in records] == list(range(50))
    assert ticks >= 20, f"the event loop ran only {ticks} ticks while the poll waited"


# ---------------------------------------------------------------- the packages (issue 28)


def test_a_bounded_read_does_not_import_the_consumer() -> None:
    """kproto.consumer.reader is what a Spark task imports: the package it moved
    into (kproto/consumer/) must not load the consumer's facade and its fetch
    buffer (which brings the pure-Python twins) with it: kproto.reader did not."""
    import subprocess

    code = ("import sys, kproto.spark, kproto.consumer.reader; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('kproto'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert "kproto.consumer.reader" in out
    assert not {"kproto.consumer.consumer", "kproto.consumer.fetch_buffer"} & set(out)
    # Consumer: still there, on first use
    import kproto.consumer
    assert kproto.consumer.Consumer.__module__ == "kproto.consumer.consumer"
