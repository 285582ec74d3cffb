"""Write the seed corpora in tests/fuzz/corpus/<decoder>/ from the tests' golden inputs.

    .venv/bin/python -m tests.fuzz.seeds          # rewrites tests/fuzz/corpus/

Record sets come from kafka-python's builders (tests/record_sets.py: every magic and
codec, headers, control batches, transactions), Fetch bodies from the slicing tests'
sample response at every version, protocol bodies from a filled-in instance of every
response at every version plus request frames and consumer-protocol payloads. Each
file is one input in the targets' format (see targets.py); all are small. Both twins'
targets of a decoder (records_cython and records_pure, ...) start from the same seeds.
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import uuid
from pathlib import Path
from typing import Any

import cramjam
import crc32c as crc32c_pkg

from kproto import protocol
from kproto.protocol.apis import APIS
from kproto.protocol.schema import Field, Message

from ..record_sets import (
    Rec,
    batch_v2,
    control_batch,
    fetch_response,
    message_set,
    patch_v2_attributes,
    sample_records,
)
from .targets import (
    FETCH_VERSIONS,
    FLAG_CHECK_CRC,
    FLAG_COMMITTED,
    FLAG_SMALL_CAP,
    FLAG_START,
    FLAG_VIEWS,
    TARGETS,
    protocol_cases,
)

CORPUS = Path(__file__).parent / "corpus"


# --------------------------------------------------------------------------- record sets


def raw_snappy_batch(records: list[Rec]) -> bytes:
    """A v2 batch compressed with raw (unframed) snappy, as librdkafka writes it."""
    plain = batch_v2(records)
    body = bytes(cramjam.snappy.compress_raw(plain[61:]))
    head = bytearray(plain[:61])
    struct.pack_into(">i", head, 8, 49 + len(body))
    struct.pack_into(">h", head, 21, struct.unpack_from(">h", head, 21)[0] | 2)
    out = bytes(head) + body
    return out[:17] + struct.pack(">I", crc32c_pkg.crc32c(out[21:])) + out[21:]


def record_seeds() -> list[bytes]:
    recs = sample_records(7)
    plain = [Rec(r.key, r.value, [], r.timestamp) for r in recs]
    sets = [batch_v2(recs[:4], base_offset=3, codec=c) for c in range(5)]
    sets += [message_set(plain[:3], magic=m, base_offset=5, codec=c)
             for m in (0, 1) for c in range(4)]
    sets += [
        raw_snappy_batch(recs[:3]),
        patch_v2_attributes(batch_v2(recs[:2]), 0x08),                   # LogAppendTime
        batch_v2(recs[:2], base_offset=0, transactional=True, producer_id=5)
        + control_batch(2, 5, abort=True)
        + batch_v2(recs[2:4], base_offset=3, transactional=True, producer_id=6)
        + control_batch(5, 6, abort=False),
        batch_v2([Rec(b"k" * 20, b"v" * 40, [("h" * 3, b"x" * 13)], 2**40)]),  # long varints
        batch_v2(recs[:3], codec=4) + batch_v2(recs[3:], base_offset=3, codec=1),
    ]
    out = []
    for i, s in enumerate(sets):
        flags = [FLAG_CHECK_CRC, 0, FLAG_VIEWS, FLAG_START, FLAG_COMMITTED,
                 FLAG_SMALL_CAP][i % 6]
        out.append(bytes([flags]) + s)
    # a tail cut in the middle of a batch, and the batches with every flag
    out.append(bytes([0]) + sets[0] + sets[1][:40])
    out.append(bytes([0x1F]) + sets[12])
    return out


# --------------------------------------------------------------------------- fetch


def fetch_seeds() -> list[bytes]:
    sets = [batch_v2(sample_records(2), base_offset=10), b"", None]
    out = []
    for v in range(FETCH_VERSIONS):
        body = protocol.encode(1, v, "response", fetch_response(v, sets))
        out.append(bytes([v]) + body)
    return out


# --------------------------------------------------------------------------- protocol

_FILL = {"int8": 1, "int16": 2, "int32": 3, "int64": 4, "uint16": 5, "uint32": 6,
         "float64": 0.5, "bool": True, "string": "ab", "bytes": b"xy", "records": b"rs",
         "uuid": uuid.UUID(int=9)}


def filled(fields: tuple[Field, ...], version: int, flexible: bool) -> dict[str, Any]:
    """A value with every field of ``version`` set (one element per array, tags included)."""
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions or (f.tag is not None and not flexible):
            continue
        if f.type == "struct_array":
            out[f.name] = [filled(f.fields, version, flexible)]
        elif f.type == "struct":
            out[f.name] = filled(f.fields, version, flexible)
        elif f.type == "array":
            assert f.item is not None
            out[f.name] = [_FILL[f.item]]
        else:
            out[f.name] = _FILL[f.type]
    return out


def message_body(message: Message, version: int) -> bytes:
    from kproto.protocol.engine import codec_for

    return codec_for(message, version).encode(
        filled(message.fields, version, version in message.flexible))


def protocol_seeds() -> list[bytes]:
    out = []
    for i, case in enumerate(protocol_cases()):
        if case[0] == "response":
            out.append(bytes([i]) + message_body(APIS[case[1]].response, case[2]))
            if case[2] == APIS[case[1]].versions.lo:  # defaults: empty arrays, no tags
                out.append(bytes([i]) + protocol.encode(case[1], case[2], "response", {}))
        elif case[0] == "request":
            for key in (3, 18, 1):
                api = APIS[key]
                for v in (api.versions.lo, api.versions.hi):
                    frame = protocol.encode_request(
                        key, v, 7, "kproto",
                        filled(api.request.fields, v, v in api.request.flexible),
                        header_tags={3: b"z"} if v in api.flexible else None)
                    out.append(bytes([i]) + frame[4:])
        elif case[0] == "subscription":
            for v in (0, 3):
                out.append(bytes([i]) + protocol.encode_subscription(
                    {"topics": ["a", "b"], "user_data": b"u", "owned_partitions": [
                        {"topic": "a", "partitions": [0, 1]}], "generation_id": 2,
                     "rack_id": "r"} if v == 3 else {"topics": ["a"]}, v))
        else:
            out.append(bytes([i]) + protocol.encode_assignment(
                {"assigned_partitions": [{"topic": "a", "partitions": [0, 2]}],
                 "user_data": b"u"}))
    return out


def write_corpora(root: Path = CORPUS) -> dict[str, int]:
    """One directory per decoder (both twins' targets read it): name -> seeds written."""
    from .avro_target import avro_seeds
    from .formats_target import formats_seeds

    seeds = {"records": record_seeds(), "fetch": fetch_seeds(), "protocol": protocol_seeds(),
             "avro": avro_seeds(), "formats": formats_seeds()}
    counts = {}
    for decoder in sorted({d for d, _ in TARGETS.values()}):
        d = root / decoder
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for s in seeds[decoder]:
            (d / hashlib.sha1(s).hexdigest()).write_bytes(s)
        counts[decoder] = len(seeds[decoder])
    return counts


if __name__ == "__main__":
    for target, n in write_corpora().items():
        print(f"{target}: {n} seeds")
