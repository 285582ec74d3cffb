"""The specialised Fetch writer (kproto/protocol/fetch_encode.py) against the
generic protocol engine, on Hypothesis-generated Fetch requests of every version:
where it writes a frame, the engine writes the same bytes; where it declines
(None), ``encode_request`` gives the engine's frame or error."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kproto import protocol
from kproto.consumer.fetcher import fetch_request
from kproto.errors import EncodeError
from kproto.protocol import ApiKey
from kproto.protocol.apis import APIS, REQUEST_HEADER
from kproto.protocol.engine import codec_for
from kproto.protocol.fetch_encode import encode_fetch
from kproto.structs import TopicPartition

VERSIONS = st.integers(0, 18)


def engine_frame(version: int, cid: int, client_id: str | None, fields: Any) -> bytes:
    """What encode_request wrote before the specialised writer: the engine alone."""
    out = bytearray(4)
    codec_for(REQUEST_HEADER, 2 if version >= 12 else 1).encode_into(out, {
        "request_api_key": 1, "request_api_version": version, "correlation_id": cid,
        "client_id": client_id})
    codec_for(APIS[ApiKey.FETCH].request, version).encode_into(out, fields)
    out[:4] = (len(out) - 4).to_bytes(4, "big")
    return bytes(out)


def engine_or_error(version: int, cid: int, client_id: str | None, fields: Any
                    ) -> bytes | type[BaseException]:
    try:
        return engine_frame(version, cid, client_id, fields)
    except (EncodeError, UnicodeEncodeError) as exc:     # (the engine lets a lone
        return type(exc)                                  # surrogate's error through)


int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)
#: values out of range or of another type, for the odd requests
odd = st.one_of(st.none(), st.booleans(), st.text(max_size=2), st.floats(allow_nan=False),
                st.integers(-2**70, 2**70), st.just("\ud800"), st.just("x" * 40000))


def optional(required: dict[str, Any], optional: dict[str, Any],
             extra: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts with the required keys, any of the optional ones, sometimes an extra one."""
    return st.tuples(st.fixed_dictionaries(required, optional=optional),
                     st.sampled_from(sorted(extra)), st.integers(0, 9)).map(
        lambda t: {**t[0], t[1]: extra[t[1]]} if t[2] == 9 else t[0])


def fetch_fields(valid: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Fetch request fields: well-typed values in range (``valid``), or any of
    them out of range or of another type."""
    def v(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return s if valid else st.one_of(s, odd)

    partitions = optional(
        {"partition": v(int32), "fetch_offset": v(int64), "partition_max_bytes": v(int32)},
        {"current_leader_epoch": v(int32), "log_start_offset": v(int64)},
        {"last_fetched_epoch": 3, "replica_directory_id": uuid.uuid4(), "high_watermark": 5})
    topics = optional(
        {"partitions": st.lists(partitions, max_size=4)},
        {"topic": v(st.text(max_size=20)), "topic_id": v(st.uuids())},
        {"_unknown_tags": {9: b"x"}})
    return optional(
        {"max_wait_ms": v(int32), "min_bytes": v(int32),
         "topics": st.lists(topics, max_size=3)},
        {"max_bytes": v(int32), "isolation_level": v(st.integers(-128, 127)),
         "session_id": v(int32), "session_epoch": v(int32),
         "forgotten_topics_data": st.one_of(st.just([]), st.just(
             [{"topic": "t", "topic_id": uuid.uuid4(), "partitions": [1]}])),
         "rack_id": v(st.text(max_size=20))},
        {"replica_id": 7, "cluster_id": "c", "replica_state": {"replica_id": 1}})


client_ids = st.one_of(st.none(), st.text(max_size=10))


def same_as_the_engine(version: int, cid: Any, client_id: Any, fields: Any) -> bool:
    """The property; True when the specialised writer wrote the frame."""
    expected = engine_or_error(version, cid, client_id, fields)
    fast = encode_fetch(version, cid, client_id, fields)
    if fast is not None:
        assert fast == expected
    try:
        got: bytes | type[BaseException] = protocol.encode_request(
            ApiKey.FETCH, version, cid, client_id, fields)
    except (EncodeError, UnicodeEncodeError) as exc:
        got = type(exc)
    assert got == expected
    return fast is not None


@settings(max_examples=600, deadline=None, database=None)
@given(VERSIONS, int32, client_ids, fetch_fields(valid=True))
def test_same_bytes_as_the_engine(version: int, cid: int, client_id: Any, fields: Any) -> None:
    same_as_the_engine(version, cid, client_id, fields)


@settings(max_examples=600, deadline=None, database=None)
@given(VERSIONS, st.one_of(int32, odd), st.one_of(client_ids, odd), fetch_fields(valid=False))
def test_odd_requests_as_the_engine(version: int, cid: Any, client_id: Any,
                                    fields: Any) -> None:
    """Values the fields cannot hold: the engine's error (or frame), never other bytes."""
    same_as_the_engine(version, cid, client_id, fields)


class _Part:
    leader_epoch = 4


class _Topic:
    partitions = {i: _Part() for i in range(8)}

    def __init__(self, topic_id: uuid.UUID) -> None:
        self.topic_id = topic_id


class _Meta:
    def __init__(self, ids: dict[str, uuid.UUID]) -> None:
        self.topics = {t: _Topic(i) for t, i in ids.items()}


@settings(max_examples=300, deadline=None, database=None)
@given(VERSIONS, int32, client_ids,
       st.dictionaries(st.tuples(st.sampled_from(["a", "bé", "topic-c"]), st.integers(0, 9)),
                       int64, min_size=1, max_size=12),
       st.booleans(), st.text(max_size=8), st.booleans())
def test_the_consumers_fetches_take_the_fast_path(version: int, cid: int, client_id: Any,
                                                  offsets: dict[tuple[str, int], int],
                                                  read_committed: bool, rack: str,
                                                  with_ids: bool) -> None:
    """Every Fetch fetch_request builds is written by the specialised writer (so
    the property above compares something), with the engine's bytes."""
    ids = {t: uuid.uuid4() if with_ids else uuid.UUID(int=0) for t in ("a", "bé", "topic-c")}
    req = fetch_request({TopicPartition(*tp): o for tp, o in offsets.items()}, _Meta(ids),
                        partition_bytes=1 << 20, max_wait_ms=500, max_bytes=50 << 20,
                        read_committed=read_committed, min_bytes=1, rack_id=rack)
    fast = encode_fetch(version, cid, client_id, req.fields)
    assert fast is not None
    assert fast == engine_frame(version, cid, client_id, req.fields)
