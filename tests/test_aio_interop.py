"""kproto.aio against aiokafka and confluent-kafka, through the three brokers.

aiokafka and confluent-kafka produce (keys, headers, nulls, timestamps, a codec)
and kproto.aio reads every record intact with ``poll_batch``, ``async for`` and
``read_range``; kproto.aio produces (``send``, ``send_batch``) and both read
every record intact, keyed ones in Java's partition. The records and checks
are tests/test_client_interop.py's (its helpers, not copies).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pyarrow as pa
import pytest

from kproto.aio import AIOConsumer, AIOProducer
from tests.test_client_interop import (
    BASE_TS,
    PARTITIONS,
    PEER_SENT,
    TIMEOUT,
    Expected,
    Row,
    check_rows,
    headers_arrow,
    make_record,
    produce_aiokafka,
    produce_confluent,
    read_aiokafka,
    read_confluent,
    rows_of_arrow,
)

pytestmark = pytest.mark.broker

PEERS = {"aiokafka": (produce_aiokafka, read_aiokafka),
         "confluent-kafka": (produce_confluent, read_confluent)}


async def _read_aio(bootstrap: str, topic: str, n: int) -> dict[str, list[Row]]:
    """The records as kproto.aio reads them three ways."""
    out: dict[str, list[Row]] = {}
    async with AIOConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, p) for p in range(PARTITIONS)])
        rows: list[Row] = []
        deadline = time.monotonic() + TIMEOUT
        while len(rows) < n and time.monotonic() < deadline:
            rows += rows_of_arrow(await c.poll_batch(500), topic)
        out["poll_batch"] = rows
        await c.seek_to_beginning()
        rows = []
        async with asyncio.timeout(TIMEOUT):
            async for r in c:
                rows.append(Row(r.partition, r.offset, r.key, r.value, list(r.headers),
                                r.timestamp, r.timestamp_type == 0))
                if len(rows) == n:
                    break
        out["async for"] = rows
        out["read_range"] = rows_of_arrow(await c.read_range(topic), topic)
    return out


@pytest.mark.parametrize("peer", list(PEERS))
def test_peer_produced_read_by_kproto_aio(broker: Any, unique_topic: str, peer: str) -> None:
    broker.create_topic(unique_topic, PARTITIONS)
    expected = PEERS[peer][0](broker.bootstrap, unique_topic, "lz4")
    for how, rows in asyncio.run(_read_aio(broker.bootstrap, unique_topic, PEER_SENT)).items():
        check_rows(f"kproto.aio {how} ({peer})", rows, expected)


def test_kproto_aio_produced_read_by_peers(broker: Any, unique_topic: str) -> None:
    broker.create_topic(unique_topic, PARTITIONS)
    expected: Expected = {}
    where: dict[int, tuple[int, int]] = {}
    sent, rows_in_batch = 200, 100

    async def produce() -> None:
        async with AIOProducer(bootstrap_servers=broker.bootstrap, compression_type="zstd",
                               linger_ms=5, batch_size=2048) as p:
            deliveries = {}
            for i in range(sent):
                key, value, headers = make_record(i)
                ts = BASE_TS + i
                deliveries[ts] = await p.send(unique_topic, value, key=key,
                                              headers=headers or None, timestamp_ms=ts)
                expected[ts] = (key, value, headers)
            for ts, d in deliveries.items():
                md = await d
                where[ts] = (md.partition, md.offset)
            recs = [make_record(sent + j) for j in range(rows_in_batch)]
            stamps = [BASE_TS + sent + j for j in range(rows_in_batch)]
            table = pa.table({
                "key": pa.array([k for k, _, _ in recs], pa.binary()),
                "value": pa.array([v for _, v, _ in recs], pa.binary()),
                "headers": headers_arrow([h for _, _, h in recs]),
                "timestamp": pa.array(stamps, pa.timestamp("ms")),
            })
            written = await p.wait_batch(await p.send_batch(unique_topic, table), TIMEOUT)
            assert sum(b.record_count for b in written) == rows_in_batch
            expected.update(zip(stamps, recs, strict=True))

    asyncio.run(produce())
    for peer, (_, read) in PEERS.items():
        check_rows(f"{peer} reading kproto.aio", read(broker.bootstrap, unique_topic,
                                                      sent + rows_in_batch), expected, where)
