"""The broker fixtures give real, working brokers — and take them away again.

Checks that the ``tansu``, ``mock_cluster`` and ``noida`` fixtures (and the
:mod:`kproto.testing` classes behind them) answer ApiVersions, store data
(a produce/consume round trip through kafka-python and confluent-kafka,
peers independent of kproto), run side by side, and that ``stop()`` really
ends the process and frees the port. A few tests pin broker facts that
kproto's own code relies on and that are documented in :mod:`kproto.testing`.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kproto import testing
from kproto.testing import FaultProxy, MockCluster, NoidaBroker, TansuBroker, probe_api_versions

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[1]
PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19


# --------------------------------------------------------------------------- helpers


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited; only its process-table entry is left
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def _accepts(port: int, host: str = "127.0.0.1") -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except ConnectionRefusedError:
        return False
    return True


def _hosts_ports(bootstrap: str) -> list[tuple[str, int]]:
    return [(h, int(p)) for h, p in (a.rsplit(":", 1) for a in bootstrap.split(","))]


def _api_versions_v3_error_code(host: str, port: int) -> int:
    """Send a (flexible) ApiVersions v3 request by hand; return the response's error code."""
    client_id = b"kproto-probe"
    header = struct.pack(">hhih", API_VERSIONS, 3, 42, len(client_id)) + client_id + b"\x00"
    body = b"\x07kproto" + b"\x040.1" + b"\x00"  # compact strings: name, version; no tags
    frame = header + body
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", testing._recv_exact(sock, 4))
        response = testing._recv_exact(sock, size)
    # ApiVersions responses always use response header v0: just the correlation id.
    correlation_id, error_code = struct.unpack_from(">ih", response)
    assert correlation_id == 42
    return error_code


def _confluent_round_trip(bootstrap: str, topic: str, n: int = 20) -> list[tuple[Any, ...]]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    delivered: list[tuple[Any, int]] = []
    for i in range(n):
        producer.produce(
            topic, key=b"k%d" % i, value=b"v%d" % i, partition=0, headers=[("h", b"%d" % i)],
            on_delivery=lambda err, msg: delivered.append((err, msg.offset())),
        )  # fmt: skip
    assert producer.flush(10) == 0
    getattr(producer, "close", lambda: None)()
    assert [err for err, _ in delivered if err is not None] == []
    assert sorted(offset for _, offset in delivered) == list(range(n))

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"unused-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 10
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.key(), msg.value(), msg.headers()))
    finally:
        consumer.close()
    return got


def _kafka_python_round_trip(
    bootstrap: str, topic: str, n: int = 20, **config: Any
) -> list[tuple[Any, ...]]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **config)
    try:
        futures = [
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0,
                          headers=[("h", b"%d" % i)])
            for i in range(n)
        ]  # fmt: skip
        producer.flush(10)
        assert sorted(f.get(10).offset for f in futures) == list(range(n))
    finally:
        producer.close(5)

    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **config)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 10
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got += [(r.offset, r.key, r.value, [tuple(h) for h in r.headers]) for r in records]
    finally:
        consumer.close()
    return got


def _expected(n: int = 20) -> list[tuple[Any, ...]]:
    return [(i, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(n)]


# --------------------------------------------------------------------------- Tansu


def test_tansu_answers_api_versions(tansu: TansuBroker) -> None:
    assert tansu.bootstrap == f"127.0.0.1:{tansu.port}"
    assert tansu.running and _pid_alive(tansu.pid or -1)
    versions = probe_api_versions(tansu.host, tansu.port)
    for key in (PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS):
        assert versions[key][0] == 0, key
    assert versions[API_VERSIONS][1] >= 3
    assert versions[FETCH][1] >= 4 and versions[PRODUCE][1] >= 3  # record batches (magic 2)


def test_tansu_round_trip_kafka_python(tansu: TansuBroker, unique_topic: str) -> None:
    assert _kafka_python_round_trip(tansu.bootstrap, unique_topic) == _expected()


def test_tansu_round_trip_confluent_kafka(tansu: TansuBroker, unique_topic: str) -> None:
    assert _confluent_round_trip(tansu.bootstrap, unique_topic) == _expected()


def test_tansu_consumer_group(tansu: TansuBroker, unique_topic: str) -> None:
    """Groups work; Tansu holds the join for ~session_timeout/2, so keep that short."""
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap)
    for i in range(3):
        producer.send(unique_topic, value=b"g%d" % i, partition=0)
    producer.flush(10)
    producer.close(5)
    consumer = KafkaConsumer(
        unique_topic, bootstrap_servers=tansu.bootstrap, group_id=f"group-{unique_topic}",
        auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=1000, heartbeat_interval_ms=200,
    )  # fmt: skip
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(values) < 3 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values += [r.value for r in records]
        assert values == [b"g0", b"g1", b"g2"]
        consumer.commit()
        (tp,) = [tp for tp in consumer.assignment() if tp.partition == 0]
        assert consumer.committed(tp) == 3
    finally:
        consumer.close()


def test_tansu_list_offsets_latest_quirk(tansu: TansuBroker, unique_topic: str) -> None:
    """Pins the quirk documented in kproto.testing: ListOffsets LATEST = last batch base + 1."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap, linger_ms=50)
    for batch in (5, 3):
        for i in range(batch):
            producer.send(unique_topic, value=b"x%d" % i, partition=0)
        producer.flush(10)
    producer.close(5)
    tp = TopicPartition(unique_topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=tansu.bootstrap, enable_auto_commit=False)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 6}  # 5 + 1, not 8: see kproto.testing
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        offsets: list[int] = []
        deadline = time.monotonic() + 10
        while len(offsets) < 8 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                offsets += [r.offset for r in records]
        assert offsets == list(range(8))
        assert consumer.highwater(tp) == 8  # Fetch's high watermark is right
    finally:
        consumer.close()


def test_two_tansu_brokers_side_by_side(tansu: TansuBroker, unique_topic: str) -> None:
    from confluent_kafka import Consumer

    with TansuBroker() as second:
        assert second.port != tansu.port and second.pid != tansu.pid
        assert probe_api_versions(second.host, second.port)
        assert probe_api_versions(tansu.host, tansu.port)
        assert _confluent_round_trip(second.bootstrap, unique_topic, 5) == _expected(5)
        # Separate in-memory stores: the first broker never heard of the topic.
        consumer = Consumer({"bootstrap.servers": tansu.bootstrap, "group.id": "unused"})
        try:
            assert unique_topic not in consumer.list_topics(timeout=10).topics
        finally:
            consumer.close()
    assert not second.running and not _pid_alive(second.pid or -1)
    assert tansu.running


def test_tansu_stop_ends_process_and_frees_port() -> None:
    broker = TansuBroker().start()
    pid, port, host = broker.pid, broker.port, broker.host
    assert pid is not None and _pid_alive(pid)
    assert broker in testing._live  # the atexit safety net knows about it
    assert broker.log_path is not None
    log_dir = broker.log_path.parent
    started = time.monotonic()
    broker.stop()
    assert time.monotonic() - started < 2
    assert broker.returncode == 0  # went down on SIGTERM, no SIGKILL needed
    assert not _pid_alive(pid)
    assert not broker.running and broker not in testing._live
    assert not log_dir.exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=2).close()
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))  # the port is ours to take again
    broker.stop()  # idempotent
    assert broker.pid == pid  # still reported, for messages


def test_tansu_stop_falls_back_to_sigkill() -> None:
    # With a client connected Tansu waits (up to ~5 s) on SIGTERM: stop_timeout cuts that short.
    broker = TansuBroker(stop_timeout=0.3).start()
    pid = broker.pid
    assert pid is not None
    with socket.create_connection((broker.host, broker.port), timeout=5):
        started = time.monotonic()
        broker.stop()
        assert time.monotonic() - started < 3
    assert broker.returncode == -signal.SIGKILL
    assert not _pid_alive(pid)


_ORPHAN_SCRIPT = """
import os, sys
from kproto.testing import TansuBroker, NoidaBroker
broker = {"tansu": TansuBroker, "noida": NoidaBroker}[sys.argv[2]]().start()
print(broker.pid, broker.port, flush=True)
if sys.argv[1] == "crash":
    os._exit(1)  # no atexit: only the parent-death signal can save us
# "exit": leave the broker running and return normally; atexit stops it
"""


@pytest.mark.parametrize("how", ["exit", "crash"])
def test_tansu_does_not_outlive_its_python_process(how: str, tmp_path: Path) -> None:
    _broker_does_not_outlive_its_python_process("tansu", how, tmp_path)


def _broker_does_not_outlive_its_python_process(kind: str, how: str, tmp_path: Path) -> None:
    pythonpath = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    # TMPDIR: a crashed process cannot remove its broker's log directory; keep it in tmp_path.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath), "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", _ORPHAN_SCRIPT, how, kind],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == (1 if how == "crash" else 0), done.stderr
    pid, port = map(int, done.stdout.split())
    # After a crash the kernel kills it; its threads may take a moment to let go of the port.
    deadline = time.monotonic() + 5
    while (_pid_alive(pid) or _accepts(port)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _pid_alive(pid)
    assert not _accepts(port)


def test_tansu_missing_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPROTO_TANSU", "/nonexistent/tansu")
    with pytest.raises(RuntimeError, match="KPROTO_TANSU='/nonexistent/tansu' is not an exec"):
        TansuBroker().start()


def test_tansu_early_exit_reports_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\necho 'no broker here' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("KPROTO_TANSU", str(fake))
    broker = TansuBroker()
    with pytest.raises(RuntimeError, match=r"(?s)exited with code 3.*no broker here"):
        broker.start()
    assert not broker.running and broker.log_path is None


def test_tansu_startup_timeout_kills_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\necho 'still thinking'\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv("KPROTO_TANSU", str(fake))
    broker = TansuBroker(startup_timeout=0.5)
    with pytest.raises(RuntimeError, match=r"(?s)did not answer ApiVersions.*still thinking"):
        broker.start()
    assert broker.pid is not None and not _pid_alive(broker.pid)
    assert broker not in testing._live


# --------------------------------------------------------------------------- librdkafka mock


def test_mock_cluster_answers_api_versions(mock_cluster: MockCluster) -> None:
    assert [node_id for node_id, _, _ in mock_cluster.brokers] == [1, 2, 3]
    addresses = _hosts_ports(mock_cluster.bootstrap)
    assert addresses == [(host, port) for _, host, port in mock_cluster.brokers]
    for host, port in addresses:
        assert host == "127.0.0.1"
        versions = probe_api_versions(host, port)
        assert versions[API_VERSIONS] == (0, 2)
        for key in (PRODUCE, FETCH, LIST_OFFSETS, METADATA):
            assert versions[key][0] == 0, key
        assert CREATE_TOPICS not in versions  # rely on auto-creation instead


def test_mock_cluster_round_trip_confluent_kafka(
    mock_cluster: MockCluster, unique_topic: str
) -> None:
    assert _confluent_round_trip(mock_cluster.bootstrap, unique_topic) == _expected()


def test_mock_cluster_round_trip_kafka_python(mock_cluster: MockCluster, unique_topic: str) -> None:
    # api_version <= (2, 3) keeps kafka-python off ApiVersions v3+, which the mock garbles.
    got = _kafka_python_round_trip(mock_cluster.bootstrap, unique_topic, api_version=(2, 3))
    assert got == _expected()


@pytest.mark.parametrize(("fixture", "error_code"), [("tansu", 0), ("mock_cluster", 35)])
def test_api_versions_v3_answer(
    request: pytest.FixtureRequest, fixture: str, error_code: int
) -> None:
    """Tansu answers v3 fine; the mock says UNSUPPORTED_VERSION (35) in a garbled body."""
    broker = request.getfixturevalue(fixture)
    host, port = _hosts_ports(broker.bootstrap)[0]
    assert _api_versions_v3_error_code(host, port) == error_code


def test_mock_cluster_stop_frees_ports() -> None:
    cluster = MockCluster(1).start()
    ((node_id, host, port),) = cluster.brokers
    assert node_id == 1 and probe_api_versions(host, port)
    assert cluster.bootstrap == f"127.0.0.1:{port}"
    cluster.stop()
    assert not cluster.running and cluster not in testing._live
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=2).close()
    cluster.stop()  # idempotent


# --------------------------------------------------------------------------- noida-db


def _confluent_read(bootstrap: str, topic: str, n: int) -> list[tuple[Any, ...]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"unused-{topic}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 10
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
        return got
    finally:
        consumer.close()


def _kproto_send(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    from kproto import Producer

    with Producer(bootstrap_servers=bootstrap, enable_idempotence=True) as producer:
        futures = [producer.send(topic, v, partition=0) for v in values]
        return [f.result(10).offset for f in futures]


def test_noida_answers_api_versions(noida: NoidaBroker) -> None:
    assert noida.bootstrap == f"127.0.0.1:{noida.port}"
    assert noida.running and _pid_alive(noida.pid or -1)
    assert noida.data_dir is not None and noida.data_dir.is_dir()
    versions = probe_api_versions(noida.host, noida.port)
    for key in (PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS):
        assert versions[key][0] == 0, key
    assert versions[API_VERSIONS] == (0, 3)
    assert versions[FETCH] == (0, 13)  # topic-ID Fetch advertised, yet Metadata has no IDs
    assert _api_versions_v3_error_code(noida.host, noida.port) == 0


def test_noida_round_trip_confluent_kafka(noida: NoidaBroker, unique_topic: str) -> None:
    assert _confluent_round_trip(noida.bootstrap, unique_topic) == _expected()


def test_noida_round_trip_kafka_python(noida: NoidaBroker, unique_topic: str) -> None:
    assert _kafka_python_round_trip(noida.bootstrap, unique_topic) == _expected()


def test_noida_kproto_producer(noida: NoidaBroker, unique_topic: str) -> None:
    """kproto's producer writes to noida-db (read back with confluent-kafka)."""
    values = [b"p%d" % i for i in range(5)]
    assert _kproto_send(noida.bootstrap, unique_topic, values) == list(range(5))
    assert _confluent_read(noida.bootstrap, unique_topic, 5) == list(enumerate(values))


def test_noida_through_fault_proxy(noida: NoidaBroker, unique_topic: str) -> None:
    """noida-db cannot be told what to advertise: a proxy with a port_map rewrites it."""
    from confluent_kafka import Consumer

    proxy_port = testing.free_port()
    with FaultProxy(noida.port, port=proxy_port, port_map={noida.port: proxy_port}) as proxy:
        consumer = Consumer({"bootstrap.servers": proxy.address, "group.id": "unused"})
        try:
            brokers = consumer.list_topics(timeout=10).brokers
            assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", proxy_port)]
        finally:
            consumer.close()
        assert _confluent_round_trip(proxy.address, unique_topic, 5) == _expected(5)


@pytest.mark.parametrize("hard", [True, False], ids=["kill", "stop"])
def test_noida_restart_on_the_same_data_dir(hard: bool, tmp_path: Path) -> None:
    """kill -9 (or stop(keep_data=True)), start again: same port, same data, new process."""
    from kproto import Consumer

    data_dir = tmp_path / "noida-data"
    broker = NoidaBroker(data_dir=data_dir).start()
    try:
        assert broker.data_dir == data_dir
        port, pid = broker.port, broker.pid
        assert pid is not None
        assert _kproto_send(broker.bootstrap, "kept", [b"a", b"b", b"c"]) == [0, 1, 2]
        with Consumer(bootstrap_servers=broker.bootstrap, group_id="keeper") as consumer:
            consumer.commit({("kept", 0): 2})
        if hard:
            broker.wait_saved()  # noida-db saves ~1 s after a change; kill -9 loses the rest
            broker.kill()
            assert broker.returncode == -signal.SIGKILL
        else:
            broker.stop(keep_data=True)  # SIGTERM saves at once
            assert broker.returncode == 0
        assert not broker.running and not _pid_alive(pid) and not _accepts(port)
        assert broker in testing._live  # the log dir is still ours to delete at exit
        assert (data_dir / "kafka.json").is_file()
        broker.start()
        assert broker.port == port and broker.pid != pid
        assert _confluent_read(broker.bootstrap, "kept", 3) == [(0, b"a"), (1, b"b"), (2, b"c")]
        assert _kproto_send(broker.bootstrap, "kept", [b"d"]) == [3]  # appends after them
        with Consumer(bootstrap_servers=broker.bootstrap, group_id="keeper") as consumer:
            assert consumer.committed([("kept", 0)]) == {("kept", 0): 2}
    finally:
        broker.stop()
    assert data_dir.is_dir()  # a given data dir is never deleted
    assert broker not in testing._live and broker.log_path is None


def test_noida_stop_ends_process_and_frees_port() -> None:
    broker = NoidaBroker().start()
    pid, port, data_dir = broker.pid, broker.port, broker.data_dir
    assert pid is not None and _pid_alive(pid) and data_dir is not None
    assert broker in testing._live
    tmpdir = data_dir.parent  # the temporary dir holds the data dir and the log
    assert broker.log_path == tmpdir / "noida.log"
    with socket.create_connection((broker.host, port), timeout=5):
        started = time.monotonic()
        broker.stop()  # SIGTERM ends it at once, even with a client connected
        assert time.monotonic() - started < 2
    assert broker.returncode == 0
    assert not _pid_alive(pid) and not _accepts(port)
    assert not broker.running and broker not in testing._live
    assert not tmpdir.exists() and broker.data_dir is None
    broker.stop()  # idempotent
    assert broker.pid == pid


def test_noida_restart_after_a_plain_stop_starts_empty_on_the_same_port() -> None:
    broker = NoidaBroker().start()
    try:
        port, first_dir = broker.port, broker.data_dir
        _kproto_send(broker.bootstrap, "gone", [b"x"])
        broker.stop()
        broker.start()
        assert broker.port == port and broker.data_dir != first_dir
        from confluent_kafka import Consumer

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
        try:
            assert "gone" not in consumer.list_topics(timeout=10).topics
        finally:
            consumer.close()
    finally:
        broker.stop()


def test_noida_does_not_outlive_its_python_process(tmp_path: Path) -> None:
    _broker_does_not_outlive_its_python_process("noida", "crash", tmp_path)


def test_noida_missing_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KPROTO_NOIDA", raising=False)
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "noida_db" else real(name, *a))
    with pytest.raises(RuntimeError, match=r"'noida-db' package, which is not installed"):
        NoidaBroker().start()
    monkeypatch.setenv("KPROTO_NOIDA", "/nonexistent/noida-db")
    with pytest.raises(RuntimeError, match="KPROTO_NOIDA='/nonexistent/noida-db' is not an exec"):
        testing.find_noida()


def test_noida_early_exit_reports_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "noida-db"
    fake.write_text("#!/bin/sh\necho 'error: kafka: no such luck' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("KPROTO_NOIDA", str(fake))
    broker = NoidaBroker()
    with pytest.raises(RuntimeError, match=r"(?s)noida-db exited with code 1.*no such luck"):
        broker.start()
    assert not broker.running and broker.log_path is None and broker.data_dir is None
    assert broker not in testing._live
