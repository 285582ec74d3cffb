"""kproto's client against other Kafka clients, through real brokers (the broker matrix).

1. kproto produces (``send()`` and ``send_batch()``, every codec) and confluent-kafka,
   kafka-python and aiokafka each read every record intact: key, value, headers (null
   values, duplicates, non-ASCII keys), timestamp, and keyed records sit in the partition
   Java's murmur2 partitioner picks (kafka-python's ``murmur2`` is the independent reference).
2. Those clients produce (keys, headers, compression) and kproto reads every record back
   with ``poll_batch``, ``poll`` and ``read_range``; kproto's producer puts each key in the
   same partition as librdkafka's ``murmur2_random`` partitioner.
   Watermarks and offsets_for_times agree with librdkafka's.
3. Committed offsets are shared: what kproto commits, confluent-kafka (and aiokafka) see and
   resume from, and the other way round (kafka-python sees them too); kproto and
   confluent-kafka members share one consumer group, whichever of them leads.

Every record carries a distinct explicit timestamp, which identifies it whatever partition
it went to. Peer quirks: kafka-python needs ``api_version=(2, 3)`` against the mock cluster
(its ApiVersions v3+ answer is malformed), and refuses records with neither key nor value
and header values that are None. The mock cluster answers every Produce with
log_append_time 1234 and looks no timestamps up in ListOffsets.

On the broker matrix (tests/brokers.py): Tansu, librdkafka's mock and noida-db;
every test creates its topic with PARTITIONS partitions (noida-db auto-creates
one). Group membership needs groups (not the mock).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import confluent_kafka
import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2  # noqa: E402

from kproto import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.broker

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 4                  # every test's topic is created with 4 partitions
BASE_TS = 1_700_000_000_000     # record i has timestamp BASE_TS + i: unique, so it names it
TIMEOUT = 20.0
GROUP_SESSION_MS = 3000          # Tansu forms a group after session timeout / 2


def is_mock(broker: Any) -> bool:
    return broker.name == "mock"


def mock_append_time(broker: Any) -> int | None:
    """The mock cluster answers every Produce with log_append_time_ms 1234 (hard-coded in
    librdkafka's rdkafka_mock_handlers.c), which clients, Java's too, take for the
    record's timestamp in the delivery report."""
    return 1234 if is_mock(broker) else None


def java_partition(key: bytes, n: int = PARTITIONS) -> int:
    """The partition Java's default partitioner picks (kafka-python's implementation)."""
    return (murmur2(key) & 0x7FFFFFFF) % n


# ---------------------------------------------------------------- records


class Row(NamedTuple):
    """One record as a client read it (headers as a list of (str, bytes | None))."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int
    create_time: bool


Expected = dict[int, tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]

HEADER_SETS: list[list[tuple[str, bytes | None]]] = [
    [],
    [("trace", b"t-1")],
    [("dup", b"a"), ("dup", b"b"), ("null", None), ("ünï-çødé", b"\x00\xff\x80"), ("e", b"")],
]


def make_record(i: int, *, allow_empty: bool = True
                ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    """Record i: keys repeat (same key, same partition), some null or empty, values too."""
    if i % 6 == 0:
        key: bytes | None = None
    elif i % 50 == 7:
        key = b"" if allow_empty else b"\x00"
    elif i % 50 == 13:
        key = f"clé-ключ-{i}".encode() * 9            # long, non-ASCII
    else:
        key = b"user-%d" % (i % 37)
    if i % 9 == 4:
        value: bytes | None = None
    elif i % 9 == 8 and allow_empty:
        value = b""
    else:
        value = b"value-%d-" % i * (1 + i % 5)
    if key is None and value is None:
        value = b"v"      # kafka-python refuses a record with neither; keep every peer able
    return key, value, list(HEADER_SETS[i % len(HEADER_SETS)])


def check_rows(who: str, got: list[Row], expected: Expected,
               where: dict[int, tuple[int, int]] | None = None) -> None:
    """``got`` holds exactly the ``expected`` records (by timestamp), intact, keyed ones in
    Java's partition, in send order within each partition, at offsets 0, 1, 2..."""
    by_ts = {r.timestamp: r for r in got}
    assert len(by_ts) == len(got), f"{who}: records read twice"
    assert sorted(by_ts) == sorted(expected), f"{who}: wrong set of records"
    for ts, (key, value, headers) in expected.items():
        r = by_ts[ts]
        assert (r.key, r.value, r.headers) == (key, value, headers), f"{who}: record {ts}"
        assert r.create_time, f"{who}: record {ts} has LogAppendTime"
        if key is not None:
            assert r.partition == java_partition(key), f"{who}: key {key!r} misplaced"
        if where is not None and ts in where:
            assert (r.partition, r.offset) == where[ts], f"{who}: record {ts} moved"
    for p in range(PARTITIONS):
        rows = sorted((r for r in got if r.partition == p), key=lambda r: r.timestamp)
        assert [r.offset for r in rows] == list(range(len(rows))), f"{who}: partition {p}"


# ---------------------------------------------------------------- peers reading


def read_confluent(bootstrap: str, topic: str, n: int) -> list[Row]:
    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    rows: list[Row] = []

    def take(timeout: float) -> list[Row]:
        out = []
        for m in c.consume(1000, timeout):
            assert m.error() is None, m.error()
            kind, ts = m.timestamp()
            out.append(Row(m.partition(), m.offset(), m.key(), m.value(),
                           list(m.headers() or []), ts,
                           kind == confluent_kafka.TIMESTAMP_CREATE_TIME))
        return out

    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                  for p in range(PARTITIONS)])
        deadline = time.monotonic() + TIMEOUT
        while len(rows) < n and time.monotonic() < deadline:
            rows += take(0.5)
        rows += take(0.1)   # and nothing more
    finally:
        c.close()
    assert len(rows) == n, f"confluent-kafka read {len(rows)} of {n}"
    return rows


def read_kafka_python(bootstrap: str, topic: str, n: int, mock: bool) -> list[Row]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    extra = {"api_version": (2, 3)} if mock else {}
    c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), auto_offset_reset="earliest",
                      enable_auto_commit=False, **extra)
    rows: list[Row] = []
    try:
        c.assign([KTP(topic, p) for p in range(PARTITIONS)])
        c.seek_to_beginning()
        deadline = time.monotonic() + TIMEOUT
        while len(rows) < n and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                rows += [Row(m.partition, m.offset, m.key, m.value, list(m.headers),
                             m.timestamp, m.timestamp_type == 0) for m in records]
    finally:
        c.close()
    assert len(rows) == n, f"kafka-python read {len(rows)} of {n}"
    return rows


def read_aiokafka(bootstrap: str, topic: str, n: int) -> list[Row]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    async def run() -> list[Row]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap.split(","),
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        rows: list[Row] = []
        try:
            c.assign([ATP(topic, p) for p in range(PARTITIONS)])
            await c.seek_to_beginning()
            deadline = time.monotonic() + TIMEOUT
            while len(rows) < n and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=500)).values():
                    rows += [Row(m.partition, m.offset, m.key, m.value, list(m.headers),
                                 m.timestamp, m.timestamp_type == 0) for m in records]
        finally:
            await c.stop()
        return rows

    rows = asyncio.run(run())
    assert len(rows) == n, f"aiokafka read {len(rows)} of {n}"
    return rows


def read_all_peers(broker: Any, topic: str, n: int) -> dict[str, list[Row]]:
    return {
        "confluent-kafka": read_confluent(broker.bootstrap, topic, n),
        "kafka-python": read_kafka_python(broker.bootstrap, topic, n, is_mock(broker)),
        "aiokafka": read_aiokafka(broker.bootstrap, topic, n),
    }


# ---------------------------------------------------------------- kproto reading


def rows_of_arrow(data: pa.Table | pa.RecordBatch, topic: str) -> list[Row]:
    d = data.to_pydict()
    assert set(d["topic"]) <= {topic}
    ts = data.column("timestamp").cast(pa.int64()).to_pylist()
    return [Row(d["partition"][i], d["offset"][i], d["key"][i], d["value"][i],
                [(h["key"], h["value"]) for h in d["headers"][i] or []], ts[i],
                d["timestampType"][i] == 0) for i in range(data.num_rows)]


def kproto_poll_batch(bootstrap: str, topic: str, n: int) -> list[Row]:
    rows: list[Row] = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + TIMEOUT
        while len(rows) < n and time.monotonic() < deadline:
            rows += rows_of_arrow(c.poll_batch(500), topic)
        rows += rows_of_arrow(c.poll_batch(200), topic)   # and nothing more
    return rows


def kproto_poll(bootstrap: str, topic: str, n: int) -> list[Row]:
    rows: list[Row] = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  max_poll_records=37) as c:
        c.assign([(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + TIMEOUT
        while len(rows) < n and time.monotonic() < deadline:
            for r in c.poll(500):
                assert r.topic == topic
                rows.append(Row(r.partition, r.offset, r.key, r.value, list(r.headers),
                                r.timestamp, r.timestamp_type == 0))
    return rows


def kproto_read_range(bootstrap: str, topic: str) -> list[Row]:
    with Consumer(bootstrap_servers=bootstrap) as c:
        tps = [(topic, p) for p in range(PARTITIONS)]
        starts, ends = c.beginning_offsets(tps), c.end_offsets(tps)
        table = c.read_range(topic, {p: (starts[TopicPartition(topic, p)],
                                         ends[TopicPartition(topic, p)])
                                     for p in range(PARTITIONS)})
    return rows_of_arrow(table, topic)


# ---------------------------------------------------------------- 1. kproto produces


SENT = 240
BATCH_ROWS = 300


def headers_arrow(sets: list[list[tuple[str, bytes | None]] | None]) -> pa.Array:
    typ = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    return pa.array([None if hs is None else [{"key": k, "value": v} for k, v in hs]
                     for hs in sets], typ)


@pytest.mark.parametrize("codec", CODECS)
def test_kproto_produced_read_by_peers(broker: Any, unique_topic: str, codec: str) -> None:
    broker.create_topic(unique_topic, PARTITIONS)
    expected: Expected = {}
    where: dict[int, tuple[int, int]] = {}
    with Producer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5,
                  batch_size=2048) as p:
        assert p.partitions_for(unique_topic) == list(range(PARTITIONS))
        futures = {}
        for i in range(SENT):
            key, value, headers = make_record(i)
            ts = BASE_TS + i
            # headers both as a list and as a dict, and "no headers" as None and as []
            hdrs: Any = headers
            if i % 3 == 0:
                hdrs = None if i % 2 else []
            elif i % 3 == 1:
                hdrs = dict(headers)
            futures[ts] = p.send(unique_topic, value, key=key, headers=hdrs, timestamp=ts)
            expected[ts] = (key, value, headers)
        p.flush()
        for ts, f in futures.items():
            md = f.result(0)
            assert md.topic == unique_topic and md.timestamp in (ts, mock_append_time(broker))
            where[ts] = (md.partition, md.offset)

        # send_batch: key/value/headers/timestamp columns, nulls in each
        recs = [make_record(SENT + j) for j in range(BATCH_ROWS)]
        stamps = [BASE_TS + SENT + j for j in range(BATCH_ROWS)]
        table = pa.table({
            "key": pa.array([k for k, _, _ in recs], pa.binary()),
            "value": pa.array([v for _, v, _ in recs], pa.binary()),
            "headers": headers_arrow([None if not h and j % 2 else h
                                      for j, (_, _, h) in enumerate(recs)]),
            "timestamp": pa.array(stamps, pa.timestamp("ms")),
        })
        batches = p.send_batch(unique_topic, table).result(TIMEOUT)
        assert sum(b.record_count for b in batches) == BATCH_ROWS
        expected.update(zip(stamps, recs, strict=True))

    for who, rows in read_all_peers(broker, unique_topic, SENT + BATCH_ROWS).items():
        check_rows(f"{who} ({codec})", rows, expected, where)


def test_kproto_default_timestamp_and_str_keys(broker: Any, unique_topic: str) -> None:
    """No timestamp: the producer stamps "now"; str keys/values are sent as UTF-8."""
    broker.create_topic(unique_topic, PARTITIONS)
    before = int(time.time() * 1000)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        mds = [p.send(unique_topic, f"välue-{i}", key=f"kéy-{i}").result(TIMEOUT)
               for i in range(20)]
    after = int(time.time() * 1000)
    for who, rows in read_all_peers(broker, unique_topic, 20).items():
        got = {(r.partition, r.offset): r for r in rows}
        for i, md in enumerate(mds):
            r = got[(md.partition, md.offset)]
            assert r.key == f"kéy-{i}".encode() and r.value == f"välue-{i}".encode(), who
            assert r.partition == java_partition(r.key), who
            assert before <= r.timestamp <= after, who
            assert md.timestamp in (r.timestamp, mock_append_time(broker)), who


# ---------------------------------------------------------------- 2. peers produce


PEER_SENT = 300


def produce_confluent(bootstrap: str, topic: str, codec: str) -> Expected:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.codec": codec,
                                  "partitioner": "murmur2_random", "linger.ms": 5,
                                  "batch.num.messages": 50})
    expected: Expected = {}
    for i in range(PEER_SENT):
        key, value, headers = make_record(i)
        p.produce(topic, value=value, key=key, headers=headers or None, timestamp=BASE_TS + i)
        expected[BASE_TS + i] = (key, value, headers)
    assert p.flush(TIMEOUT) == 0
    return expected


def produce_kafka_python(bootstrap: str, topic: str, codec: str, mock: bool) -> Expected:
    from kafka import KafkaProducer

    extra = {"api_version": (2, 3)} if mock else {}
    p = KafkaProducer(bootstrap_servers=bootstrap.split(","), linger_ms=5, batch_size=2048,
                      compression_type=None if codec == "none" else codec, **extra)
    expected: Expected = {}
    try:
        for i in range(PEER_SENT):
            key, value, headers = make_record(i)
            headers = [(k, v) for k, v in headers if v is not None]  # it refuses null values
            p.send(topic, value=value, key=key, headers=headers, timestamp_ms=BASE_TS + i)
            expected[BASE_TS + i] = (key, value, headers)
        p.flush(TIMEOUT)
    finally:
        p.close()
    return expected


def produce_aiokafka(bootstrap: str, topic: str, codec: str) -> Expected:
    from aiokafka import AIOKafkaProducer

    expected: Expected = {}

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap.split(","), linger_ms=5,
                             max_batch_size=2048,
                             compression_type=None if codec == "none" else codec)
        await p.start()
        try:
            futures = []
            for i in range(PEER_SENT):
                key, value, headers = make_record(i)
                futures.append(await p.send(topic, value=value, key=key, headers=headers,
                                            timestamp_ms=BASE_TS + i))
                expected[BASE_TS + i] = (key, value, headers)
            await p.flush()
            await asyncio.gather(*futures)
        finally:
            await p.stop()

    asyncio.run(run())
    return expected


PRODUCERS: dict[str, Callable[[Any, str, str], Expected]] = {
    "confluent-kafka": lambda b, t, c: produce_confluent(b.bootstrap, t, c),
    "kafka-python": lambda b, t, c: produce_kafka_python(b.bootstrap, t, c, is_mock(b)),
    "aiokafka": lambda b, t, c: produce_aiokafka(b.bootstrap, t, c),
}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("peer", list(PRODUCERS))
def test_peer_produced_read_by_kproto(broker: Any, unique_topic: str, peer: str,
                                      codec: str) -> None:
    broker.create_topic(unique_topic, PARTITIONS)
    expected = PRODUCERS[peer](broker, unique_topic, codec)
    check_rows(f"poll_batch ({peer}, {codec})",
               kproto_poll_batch(broker.bootstrap, unique_topic, PEER_SENT), expected)
    check_rows(f"read_range ({peer}, {codec})",
               kproto_read_range(broker.bootstrap, unique_topic), expected)
    if codec == "zstd":
        check_rows(f"poll ({peer}, {codec})",
                   kproto_poll(broker.bootstrap, unique_topic, PEER_SENT), expected)


@pytest.mark.parametrize("peer", ["confluent-kafka", "aiokafka"])
def test_offsets_and_times_agree_with_peers(broker: Any, unique_topic: str, peer: str) -> None:
    """Watermarks and offsets_for_times of peer-produced records: kproto's against what is
    really in the log (read by confluent-kafka) and against librdkafka's answers.

    Broker quirks: Tansu's ListOffsets LATEST is the last batch's base + 1 (so librdkafka's
    high watermark is wrong there; kproto checks it against Fetch's), and neither broker
    looks timestamps up (Tansu answers offset 0, the mock -1), so for offsets_for_times
    kproto can only be compared with librdkafka, asking the same question (noida-db looks
    them up, as Kafka)."""
    broker.create_topic(unique_topic, PARTITIONS)
    expected = PRODUCERS[peer](broker, unique_topic, "lz4")
    log = read_confluent(broker.bootstrap, unique_topic, PEER_SENT)
    check_rows(peer, log, expected)
    counts = {p: sum(r.partition == p for r in log) for p in range(PARTITIONS)}
    probes = {p: BASE_TS + 150 + p for p in range(PARTITIONS)}
    probes[0] = BASE_TS + 10**6                                  # after every record
    CTP = confluent_kafka.TopicPartition
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap,
                                  "group.id": f"w-{unique_topic}"})
    try:
        marks = {p: c.get_watermark_offsets(CTP(unique_topic, p), timeout=TIMEOUT)
                 for p in range(PARTITIONS)}
        found = c.offsets_for_times([CTP(unique_topic, p, probes[p])
                                     for p in range(PARTITIONS)], timeout=TIMEOUT)
        theirs = {t.partition: t.offset for t in found}
    finally:
        c.close()
    tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
    with Consumer(bootstrap_servers=broker.bootstrap) as k:
        starts, ends = k.beginning_offsets(tps), k.end_offsets(tps)
        ours = k.offsets_for_times({tp: probes[tp.partition] for tp in tps})
    watermarks = {tp.partition: (starts[tp], ends[tp]) for tp in tps}
    assert watermarks == {p: (0, counts[p]) for p in range(PARTITIONS)}
    if broker.name != "tansu":                 # (Tansu's LATEST is wrong: see above)
        assert watermarks == marks
    assert {tp.partition: -1 if o is None else o.offset for tp, o in ours.items()} == theirs


def partition_keys() -> list[bytes]:
    return ([b"user-%d" % i for i in range(200)] + [bytes([i]) for i in range(256)]
            + [f"ключ-🔑-{i}".encode() for i in range(50)]
            + [b"\xff" * n for n in range(1, 40)])


def test_same_partitions_as_librdkafka_murmur2_random(broker: Any, unique_topic: str) -> None:
    broker.create_topic(unique_topic, PARTITIONS)
    keys = partition_keys()
    theirs: dict[bytes, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        theirs[msg.key()] = msg.partition()

    cp = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                   "partitioner": "murmur2_random", "linger.ms": 5})
    for k in keys:
        cp.produce(unique_topic, value=b"c", key=k, on_delivery=delivered)
    assert cp.flush(TIMEOUT) == 0
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=5) as p:
        futures = [p.send(unique_topic, b"k", key=k) for k in keys]
        ours = {k: f.result(TIMEOUT).partition for k, f in zip(keys, futures, strict=True)}
        table = pa.table({"key": pa.array(keys, pa.binary()), "value": [b"b"] * len(keys)})
        p.send_batch(unique_topic, table).result(TIMEOUT)
    assert len(set(theirs.values())) == PARTITIONS
    assert ours == theirs
    assert ours == {k: java_partition(k) for k in keys}
    # send_batch put every key in the same partition too (read it back)
    rows = kproto_read_range(broker.bootstrap, unique_topic)
    assert len(rows) == 3 * len(keys)
    assert all(r.partition == theirs[r.key] for r in rows)


# ---------------------------------------------------------------- 3. committed offsets


COMMIT_RECORDS = 40


def fill_partitions(broker: Any, topic: str) -> None:
    """The topic, made with PARTITIONS partitions, and COMMIT_RECORDS records in every
    partition (offsets 0..COMMIT_RECORDS-1)."""
    broker.create_topic(topic, PARTITIONS)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=5) as p:
        for part in range(PARTITIONS):
            for i in range(COMMIT_RECORDS):
                p.send(topic, b"%d-%d" % (part, i), partition=part)


def first_offsets_confluent(c: Any, want: Iterable[int], topic: str) -> dict[int, int]:
    """The offset of the first record a confluent consumer returns per partition."""
    want = set(want)
    first: dict[int, int] = {}
    deadline = time.monotonic() + TIMEOUT
    while set(first) != want and time.monotonic() < deadline:
        for m in c.consume(100, 0.5):
            assert m.error() is None, m.error()
            assert m.topic() == topic
            first.setdefault(m.partition(), m.offset())
    return first


# a confluent group join takes ~4 s: subscribe once, on the mock cluster
@pytest.mark.parametrize("join", ["assign", pytest.param("subscribe", marks=pytest.mark.brokers(
    "mock", reason="a confluent group join takes ~4 s: once, on the mock, is enough"))])
def test_kproto_commits_confluent_resumes(broker: Any, unique_topic: str, join: str) -> None:
    topic, group = unique_topic, f"g-{unique_topic}"
    fill_partitions(broker, topic)
    offsets = {(topic, 0): 5, (topic, 1): 17, (topic, 2): 0, (topic, 3): COMMIT_RECORDS}
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group) as k:
        k.commit(offsets)
        assert k.committed(list(offsets)) == offsets
    CTP = confluent_kafka.TopicPartition
    c = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500})
    try:
        seen = c.committed([CTP(topic, p) for p in range(PARTITIONS)], timeout=TIMEOUT)
        assert {(t.topic, t.partition): t.offset for t in seen} == offsets
        assert all(t.error is None for t in seen)
        if join == "assign":
            c.assign([CTP(topic, p) for p in range(PARTITIONS)])   # offset: the stored one
        else:
            c.subscribe([topic])
        first = first_offsets_confluent(c, range(3), topic)
        assert first == {0: 5, 1: 17, 2: 0}     # and nothing of partition 3 (all read)
    finally:
        c.close()
    if join == "assign":
        assert committed_aiokafka(broker.bootstrap, group, topic) == [5, 17, 0, COMMIT_RECORDS]


def committed_aiokafka(bootstrap: str, group: str, topic: str) -> list[int | None]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    async def run() -> list[int | None]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=group,
                             enable_auto_commit=False)
        await c.start()
        try:
            return [await c.committed(ATP(topic, p)) for p in range(PARTITIONS)]
        finally:
            await c.stop()

    return asyncio.run(run())


def test_confluent_commits_kproto_resumes(broker: Any, unique_topic: str) -> None:
    topic, group = unique_topic, f"g-{unique_topic}"
    fill_partitions(broker, topic)
    CTP = confluent_kafka.TopicPartition
    c = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest"})
    try:
        c.assign([CTP(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(3)])
        read: dict[int, int] = {}
        deadline = time.monotonic() + TIMEOUT
        while len(read) < 3 and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                assert m.error() is None, m.error()
                read.setdefault(m.partition(), m.offset())
        assert read == {0: 0, 1: 0, 2: 0}
        # explicit offsets, synchronously (partition 3 is left uncommitted)
        done = c.commit(offsets=[CTP(topic, 0, 9), CTP(topic, 1, 23), CTP(topic, 2, 1)],
                        asynchronous=False)
        assert all(t.error is None for t in done)
    finally:
        c.close()
    committed = {(topic, 0): 9, (topic, 1): 23, (topic, 2): 1, (topic, 3): None}
    tps = list(committed)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group) as k:
        assert k.committed(tps) == committed
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group,
                  auto_offset_reset="earliest") as k:
        k.assign(tps)
        assert {tp: k.position(tp) for tp in tps} == {**committed, (topic, 3): 0}
        first: dict[int, int] = {}
        deadline = time.monotonic() + TIMEOUT
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            b = k.poll_batch(500)
            for part, off in zip(b.column("partition").to_pylist(),
                                 b.column("offset").to_pylist(), strict=True):
                first.setdefault(part, off)
        assert first == {0: 9, 1: 23, 2: 1, 3: 0}
    # and kafka-python agrees on what is committed
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    extra = {"api_version": (2, 3)} if is_mock(broker) else {}
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap.split(","), group_id=group,
                       enable_auto_commit=False, **extra)
    try:
        assert [kc.committed(KTP(topic, p)) for p in range(PARTITIONS)] == [9, 23, 1, None]
    finally:
        kc.close()




def test_assign_after_committed(broker: Any, unique_topic: str) -> None:
    """Look up what a peer committed, then read from there: the natural order of calls
    (confluent-kafka and Java allow committed() then assign() on one consumer)."""
    topic, group = unique_topic, f"g-{unique_topic}"
    fill_partitions(broker, topic)
    CTP = confluent_kafka.TopicPartition
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[CTP(topic, 0, 11)], asynchronous=False)
    finally:
        c.close()
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group) as k:
        assert k.committed([(topic, 0)]) == {(topic, 0): 11}
        k.assign([(topic, 0)])
        assert k.position((topic, 0)) == 11


def test_reassign_with_group_id(broker: Any, unique_topic: str) -> None:
    """A consumer with a group_id that assign()s, reads (positions come from the group's
    committed offsets), then assign()s other partitions."""
    topic = unique_topic
    fill_partitions(broker, topic)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic}",
                  auto_offset_reset="earliest") as k:
        k.assign([(topic, 0)])
        assert k.position((topic, 0)) == 0
        k.assign([(topic, 1)])
        assert k.position((topic, 1)) == 0


@pytest.mark.parametrize("first", ["kproto", "confluent-kafka"])
@pytest.mark.brokers(needs=("groups",))
def test_mixed_group_with_confluent(broker: Any, unique_topic: str, first: str) -> None:
    """kproto and confluent-kafka members of one consumer group: whichever leads, the other
    decodes its assignment (ConsumerProtocol) and together they hold each partition once.

    Tansu only: the mock cluster advertises JoinGroup v6 but parses it as v5 (non-flexible
    strings and arrays, rdkafka_mock_handlers.c) and drops the connection; kproto picks v6,
    librdkafka never asks for more than v5."""
    topic, group = unique_topic, f"g-{unique_topic}"
    bootstrap = broker.bootstrap
    session_ms = broker.session_timeout_ms(GROUP_SESSION_MS)
    fill_partitions(broker, topic)
    all_parts = set(range(PARTITIONS))
    stop = threading.Event()
    ours: list[set[int]] = [set()]
    errors: list[BaseException] = []

    def kproto_member() -> None:
        try:
            with Consumer(bootstrap_servers=bootstrap, group_id=group,
                          session_timeout_ms=session_ms, heartbeat_interval_ms=300,
                          enable_auto_commit=False, auto_offset_reset="earliest") as k:
                k.subscribe([topic])
                while not stop.is_set():
                    k.poll_batch(100)
                    ours[0] = {tp.partition for tp in k.assignment()}
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "session.timeout.ms": session_ms, "heartbeat.interval.ms": 300,
        "auto.offset.reset": "earliest", "partition.assignment.strategy": "range,roundrobin"})
    member = threading.Thread(target=kproto_member, daemon=True)
    try:
        deadline = time.monotonic() + 30
        if first == "kproto":
            member.start()
            while ours[0] != all_parts and time.monotonic() < deadline and not errors:
                time.sleep(0.1)
            assert ours[0] == all_parts, errors
        c.subscribe([topic])
        if first != "kproto":
            while {t.partition for t in c.assignment()} != all_parts and \
                    time.monotonic() < deadline:
                c.poll(0.1)
            assert {t.partition for t in c.assignment()} == all_parts
            member.start()
        while time.monotonic() < deadline and not errors:
            c.poll(0.1)
            theirs = {t.partition for t in c.assignment()}
            if ours[0] and theirs and ours[0] | theirs == all_parts and not ours[0] & theirs:
                break
        theirs = {t.partition for t in c.assignment()}
        assert not errors, errors
        assert ours[0] and theirs, (ours[0], theirs)
        assert ours[0] | theirs == all_parts and not ours[0] & theirs, (ours[0], theirs)
    finally:
        stop.set()
        member.join(15) if member.is_alive() else None
        c.close()




@pytest.mark.brokers(needs=("groups",))
def test_kproto_leaves_the_group_on_close(broker: Any, unique_topic: str,
                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kproto.group")
    broker.create_topic(unique_topic, PARTITIONS)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{unique_topic}",
                  session_timeout_ms=broker.session_timeout_ms(GROUP_SESSION_MS),
                  heartbeat_interval_ms=300) as k:
        k.subscribe([unique_topic])
        deadline = time.monotonic() + TIMEOUT
        while len(k.assignment()) < PARTITIONS and time.monotonic() < deadline:
            k.poll_batch(100)
        assert len(k.assignment()) == PARTITIONS
    failed = [r.getMessage() for r in caplog.records if "LeaveGroup" in r.getMessage()]
    assert not failed
