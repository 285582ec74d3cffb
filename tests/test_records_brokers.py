"""Record sets written by real producers (librdkafka, kafka-python) into real brokers (Tansu,
librdkafka's mock cluster), fetched raw at several Fetch versions and decoded by kproto —
compared with kafka-python's reader and with what was produced. And the other way: batches
kproto encodes are accepted by both brokers and read back by librdkafka."""

from __future__ import annotations

import uuid

import pytest

from kproto import protocol, records
from kproto.net import BrokerConnection
from kproto.protocol import ApiKey

from .record_sets import read_with_kafka_python

MESSAGES = 150


def produced(i: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]:
    key = None if i % 5 == 0 else b"key-%d" % i
    value = None if i % 7 == 3 else b"value-%d-" % i * (1 + i % 4)
    headers = [("n", b"%d" % i)] if i % 3 == 0 else []
    return key, value, headers


@pytest.fixture(scope="module", params=["tansu", "mock_cluster"])
def broker(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(request.param).bootstrap


def leader_of(bootstrap: str, topic: str, partition: int = 0) -> tuple[str, uuid.UUID]:
    with BrokerConnection(bootstrap.split(",")[0]) as conn:
        meta = conn.request(ApiKey.METADATA, {"topics": [{"name": topic}]})
    addresses = {b["node_id"]: f"{b['host']}:{b['port']}" for b in meta["brokers"]}
    [t] = meta["topics"]
    [p] = [p for p in t["partitions"] if p["partition_index"] == partition]
    return addresses[p["leader_id"]], t["topic_id"]


def fetch_versions(conn: BrokerConnection, topic_id: uuid.UUID) -> list[int]:
    lo, hi = conn.broker_versions[ApiKey.FETCH]
    if topic_id == uuid.UUID(int=0):
        hi = min(hi, 12)  # no topic id: v13+ cannot name the topic (Java falls back too)
    return sorted({v for v in (max(lo, 4), 11, 12, hi) if lo <= v <= hi})


def fetch_raw(conn: BrokerConnection, version: int, topic: str, topic_id: uuid.UUID,
              offset: int = 0) -> memoryview:
    ident = {"topic_id": topic_id} if version >= 13 else {"topic": topic}
    _, raw = conn.request_raw(ApiKey.FETCH, {
        "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 8 << 20,
        "topics": [{**ident, "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 8 << 20}]}]},
        version=version)
    return raw


def check_fetch(bootstrap: str, topic: str, expected: list) -> None:
    """Fetch the partition from 0 to its end at several versions (as many requests as the
    broker needs); kproto's rows must equal kafka-python's reading and what was produced."""
    address, topic_id = leader_of(bootstrap, topic)
    with BrokerConnection(address) as conn:
        for version in fetch_versions(conn, topic_id):
            got, offset = [], 0
            while offset < MESSAGES:
                raw = fetch_raw(conn, version, topic, topic_id, offset)
                [part] = records.slice_fetch(raw, version).partitions
                assert part.error_code == 0 and part.high_watermark == MESSAGES
                cols = records.decode_fetch_response(raw, version, topic_names={topic_id: topic},
                                                     start_offsets={(topic, 0): offset})
                rows = [(r.offset, r.key, r.value, r.headers) for r in cols]
                theirs = read_with_kafka_python(bytes(part.records), offset)
                assert [(o, k, v, h) for o, _, _, k, v, h in theirs] == rows
                assert {r.topic for r in cols} <= {topic}
                assert cols.next_offsets[(topic, 0)] > offset, "no progress"
                offset = cols.next_offsets[(topic, 0)]
                got += rows
            assert [o for o, *_ in got] == list(range(MESSAGES))
            assert [(k, v, h) for _, k, v, h in got] == expected, f"Fetch v{version}"


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_produced(broker: str, codec: str) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = f"rdk-{codec}-{uuid.uuid4().hex[:6]}"
    p = confluent_kafka.Producer({"bootstrap.servers": broker, "compression.codec": codec,
                                  "linger.ms": 20, "batch.num.messages": 40})
    expected = []
    for i in range(MESSAGES):
        key, value, headers = produced(i)
        p.produce(topic, value=value, key=key, headers=headers or None, partition=0)
        expected.append((key, value, headers))
    assert p.flush(30) == 0
    check_fetch(broker, topic, expected)


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_kafka_python_produced(tansu, codec: str) -> None:
    from kafka import KafkaProducer

    topic = f"kp-{codec}-{uuid.uuid4().hex[:6]}"
    p = KafkaProducer(bootstrap_servers=tansu.bootstrap, linger_ms=20, batch_size=4096,
                      compression_type=None if codec == "none" else codec)
    expected = []
    for i in range(MESSAGES):
        key, value, headers = produced(i)
        if key is None and value is None:
            value = b""  # kafka-python refuses a record with neither
        p.send(topic, value=value, key=key, headers=headers, partition=0)
        expected.append((key, value, headers))
    p.flush(30)
    p.close()
    check_fetch(tansu.bootstrap, topic, expected)


@pytest.mark.parametrize("codec", ["none", "snappy", "zstd"])
def test_kproto_encoded_batches_accepted_and_read_by_librdkafka(broker: str, codec: str) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = f"kproto-{codec}-{uuid.uuid4().hex[:6]}"
    with BrokerConnection(broker.split(",")[0]) as conn:  # create it (auto-create on Metadata)
        conn.request(ApiKey.METADATA, {"topics": [{"name": topic}]}, version=4)
    address, topic_id = leader_of(broker, topic)
    rows = [produced(i) for i in range(MESSAGES)]
    with BrokerConnection(address) as conn:
        version = conn.versions[ApiKey.PRODUCE]
        ident = {"topic_id": topic_id} if version >= 13 else {"name": topic}
        for start in range(0, MESSAGES, 50):
            chunk = rows[start:start + 50]
            batch = records.encode(key=[r[0] for r in chunk], value=[r[1] for r in chunk],
                                   headers=[r[2] for r in chunk], compression=codec)
            answer = conn.request(ApiKey.PRODUCE, {"acks": -1, "timeout_ms": 10_000,
                                                   "topic_data": [{**ident, "partition_data": [
                                                       {"index": 0, "records": batch}]}]})
            [pr] = answer["responses"][0]["partition_responses"]
            assert pr["error_code"] == 0 and pr["base_offset"] == start
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker, "group.id": topic,
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = []
    try:
        while len(got) < MESSAGES:
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(got)} messages came back"
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value(), [(k, v) for k, v in msg.headers() or []]))
    finally:
        consumer.close()
    assert got == rows
    check_fetch(broker, topic, rows)


@pytest.mark.broker
@pytest.mark.parametrize("name", ["tansu", "mock", "noida"])
def test_every_fetch_version_the_broker_speaks(request: pytest.FixtureRequest, name: str) -> None:
    """Every Fetch version from 4 the broker answers (Tansu 4-17, the mock 4-16,
    noida-db 4-12): slice and decode each version's real bytes. A topic without an
    id in Metadata (noida-db's are all zero) is fetched by name: up to v12, as
    kproto and Java do (noida-db answers v13 with topic id 0 and error 3)."""
    from .brokers import FIXTURES, BrokerUnderTest

    broker = BrokerUnderTest(name, request.getfixturevalue(FIXTURES[name]))
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = f"versions-{uuid.uuid4().hex[:6]}"
    broker.create_topic(topic, 1)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(MESSAGES):
        p.produce(topic, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    address, topic_id = leader_of(broker.bootstrap, topic)
    with BrokerConnection(address) as conn:
        lo, hi = conn.broker_versions[ApiKey.FETCH]
        if topic_id == uuid.UUID(int=0):
            hi = min(hi, 12)
        for version in range(max(lo, 4), hi + 1):
            raw = fetch_raw(conn, version, topic, topic_id, offset=10)
            [part] = records.slice_fetch(raw, version).partitions
            [[engine]] = [t["partitions"] for t in
                          protocol.decode(ApiKey.FETCH, version, "response", raw)["responses"]]
            assert part.high_watermark == engine["high_watermark"] == MESSAGES
            assert bytes(part.records) == engine["records"]
            cols = records.decode_fetch_response(raw, version, topic_names={topic_id: topic},
                                                 start_offsets={(topic, 0): 10})
            values = [r.value for r in cols]
            assert values and values == [b"v%d" % i for i in range(10, 10 + len(values))]
