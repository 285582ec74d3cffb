"""Record sets built by independent writers (kafka-python's builders) and read back by
kafka-python's reader: the golden inputs and expected outputs of the record codec tests."""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

import crc32c as crc32c_pkg
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

Row = tuple[int, int, int, Any, Any, list]  # offset, timestamp, ts type, key, value, headers


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int


def sample_records(n: int, seed: int = 0) -> list[Rec]:
    """Records with every shape: null/empty keys and values, headers, non-ASCII."""
    out = []
    for i in range(n):
        j = (i + seed) % 7
        key = None if j == 0 else b"" if j == 1 else f"key-{i}".encode()
        value = None if j == 2 else b"" if j == 3 else (f"value-{i}-é-".encode() * (1 + j))
        headers = [] if j in (0, 4) else [("h", b"v%d" % i)] if j != 5 else [
            ("trace-ü", None), ("b", b"")]
        out.append(Rec(key, value, headers, 1_700_000_000_000 + 17 * i - (j == 6) * 5))
    return out


def batch_v2(records: list[Rec], *, base_offset: int = 0, codec: int = 0,
             transactional: bool = False, producer_id: int = -1, offset_step: int = 1) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec,
                                  is_transactional=transactional, producer_id=producer_id,
                                  producer_epoch=0 if producer_id >= 0 else -1,
                                  base_sequence=0 if producer_id >= 0 else -1,
                                  batch_size=1 << 30)
    for i, r in enumerate(records):
        hdrs = [(k, v) for k, v in r.headers]
        assert b.append(i * offset_step, timestamp=r.timestamp, key=r.key, value=r.value,
                        headers=hdrs) is not None
    return set_base_offset(bytes(b.build()), base_offset)


def set_base_offset(batch: bytes, base_offset: int) -> bytes:
    return struct.pack(">q", base_offset) + batch[8:]  # not covered by the CRC


def patch_v2_attributes(batch: bytes, set_bits: int) -> bytes:
    """Set attribute bits (e.g. LogAppendTime 0x08, control 0x20) and fix the CRC-32C."""
    attrs = struct.unpack_from(">h", batch, 21)[0] | set_bits
    body = batch[:21] + struct.pack(">h", attrs) + batch[23:]
    return body[:17] + struct.pack(">I", crc32c_pkg.crc32c(body[21:])) + body[21:]


def control_batch(base_offset: int, producer_id: int, abort: bool) -> bytes:
    """A transaction marker: a control batch with one record, key (version 0, type 0/1)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                  producer_id=producer_id, producer_epoch=0, base_sequence=-1,
                                  batch_size=1 << 20)
    b.append(0, timestamp=1, key=struct.pack(">hh", 0, 0 if abort else 1),
             value=struct.pack(">hi", 0, 0), headers=[])
    return patch_v2_attributes(set_base_offset(bytes(b.build()), base_offset), 0x20)


def message_set(records: list[Rec], *, magic: int, base_offset: int = 0, codec: int = 0) -> bytes:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for i, r in enumerate(records):
        b.append(base_offset + i, timestamp=r.timestamp, key=r.key, value=r.value)
    data = bytes(b.build())
    if codec and magic == 1 and base_offset:
        # kafka-python writes the wrapper at the last inner *relative* offset; a broker
        # assigns the absolute one.
        data = struct.pack(">q", base_offset + len(records) - 1) + data[8:]
    return data


def read_with_kafka_python(data: bytes, start_offset: int = 0) -> list[Row]:
    """Every data record as kafka-python's reader sees it (control batches skipped)."""
    rows: list[Row] = []
    mr = MemoryRecords(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        if getattr(batch, "is_control_batch", False):
            continue
        for r in batch:
            if r.offset < start_offset:
                continue
            ts_type = r.timestamp_type if r.timestamp_type is not None else -1
            ts = r.timestamp if r.timestamp is not None else -1
            headers = [(k, None if v is None else bytes(v)) for k, v in (r.headers or [])]
            rows.append((r.offset, ts, ts_type, _b(r.key), _b(r.value), headers))
    return rows


def _b(v: Any) -> bytes | None:
    return None if v is None else bytes(v)


def rows_of(cols: Any) -> list[Row]:
    """kproto RecordColumns -> the same row tuples."""
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers)
            for r in cols]


def fetch_response(version: int, record_sets: list[bytes]) -> dict[str, Any]:
    """A Fetch response (fields for ``protocol.encode``) at ``version`` with one partition of
    topic "events" per record set, every per-partition field set (tests/test_fetch_slicing.py,
    the fuzz seeds)."""
    topic_key = "topic_id" if version >= 13 else "topic"
    topic_val = uuid.UUID(int=7) if version >= 13 else "events"
    return {
        "throttle_time_ms": 3, "error_code": 0, "session_id": 9 if version >= 7 else 0,
        "responses": [{topic_key: topic_val, "partitions": [
            {"partition_index": i, "error_code": 0, "high_watermark": 100 + i,
             "last_stable_offset": 90 + i, "log_start_offset": i,
             "aborted_transactions": [{"producer_id": 5, "first_offset": 1}] if i == 0 else None,
             "preferred_read_replica": -1,
             "current_leader": {"leader_id": 2, "leader_epoch": 4} if i == 1 and version >= 12
             else {"leader_id": -1, "leader_epoch": -1},
             "records": rs}
            for i, rs in enumerate(record_sets)]}],
    }
