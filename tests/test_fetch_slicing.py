"""Fetch response slicing: Cython walker vs the protocol engine (pure twin), every version."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto import _codec, protocol, records
from kproto.errors import ProtocolError
from kproto.protocol import slicer as pure_fetch
from kproto.protocol.apis import FETCH

from .record_sets import batch_v2, fetch_response, read_with_kafka_python, rows_of, sample_records
from .schema_strategies import instance

VERSIONS = list(range(0, 19))


@pytest.mark.parametrize("version", VERSIONS)
def test_slice_matches_engine(version: int) -> None:
    sets = [batch_v2(sample_records(5), base_offset=10), batch_v2(sample_records(3)), b""]
    body = protocol.encode(1, version, "response", fetch_response(version, sets))
    ours = _codec.slice_fetch(body, version)
    assert ours == pure_fetch.slice_fetch(body, version)
    assert [bytes(p.records) for p in ours.partitions] == sets
    p0, p1 = ours.partitions[0], ours.partitions[1]
    assert p0.high_watermark == 100 and p1.partition == 1
    if version >= 4:
        assert p0.aborted_transactions == [(5, 1)] and p1.aborted_transactions is None
        assert p0.last_stable_offset == 90
    else:
        assert p0.last_stable_offset == -1
    if version >= 12:
        assert p1.current_leader == (2, 4) and p0.current_leader is None
    if version >= 13:
        assert p0.topic is None and p0.topic_id == uuid.UUID(int=7)
    else:
        assert p0.topic == "events"


def test_records_are_zero_copy_views() -> None:
    body = bytearray(protocol.encode(1, 12, "response", fetch_response(
        12, [batch_v2(sample_records(2))])))
    view = _codec.slice_fetch(body, 12).partitions[0].records
    assert isinstance(view, memoryview) and view.obj is body


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16, 18])
def test_random_responses_agree(version: int) -> None:
    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(instance(FETCH.response, version))
    def check(value: dict) -> None:
        body = protocol.encode(1, version, "response", value)
        assert _codec.slice_fetch(body, version) == pure_fetch.slice_fetch(body, version)

    check()


@pytest.mark.parametrize("version", [0, 4, 11, 12, 13])
def test_truncations_and_mutations_raise_protocol_error(version: int) -> None:
    rng = random.Random(version)
    body = protocol.encode(1, version, "response", fetch_response(
        version, [batch_v2(sample_records(2)), b"xy"]))
    for n in range(len(body)):
        for impl in (_codec.slice_fetch, pure_fetch.slice_fetch):
            with pytest.raises(ProtocolError):
                impl(body[:n], version)
    for _ in range(400):
        data = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        for impl in (_codec.slice_fetch, pure_fetch.slice_fetch):
            try:
                impl(bytes(data), version)
            except ProtocolError:
                pass


@pytest.mark.parametrize("version", [4, 12, 13])
def test_decode_fetch_response_one_batch(version: int) -> None:
    recs = sample_records(20)
    sets = [batch_v2(recs[:10], base_offset=0, codec=1), batch_v2(recs[10:], base_offset=0)]
    body = protocol.encode(1, version, "response", fetch_response(version, sets))
    names = {uuid.UUID(int=7): "events"}
    cols = records.decode_fetch_response(body, version, topic_names=names,
                                         start_offsets={("events", 1): 4})
    assert len(cols) == 10 + 6
    expected = read_with_kafka_python(sets[0]) + read_with_kafka_python(sets[1], 4)
    assert rows_of(cols) == expected
    batch = cols.to_arrow()
    assert batch.column("topic").to_pylist() == ["events"] * 16
    assert batch.column("partition").to_pylist() == [0] * 10 + [1] * 6
    assert cols.next_offsets == {("events", 0): 10, ("events", 1): 10}


@given(st.integers(0, 18))
@settings(max_examples=19, deadline=None, database=None)
def test_bad_version(version: int) -> None:
    with pytest.raises(ValueError):
        _codec.slice_fetch(b"", 19 + version)
