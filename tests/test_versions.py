"""Version negotiation as a pure function of a broker's ApiVersions answer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto import protocol
from kproto.errors import UnsupportedVersionError
from kproto.protocol import API_VERSIONS, ApiKey

from .schema_strategies import instance

# What Apache Kafka 3.9 and 4.1 brokers advertise (PROTOCOL_NOTES §1).
KAFKA_3_9 = {0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 6),
             11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1),
             18: (0, 4), 19: (0, 7), 20: (0, 6), 22: (0, 5), 36: (0, 2)}
KAFKA_4_1 = {0: (0, 13), 1: (4, 18), 2: (1, 10), 3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 6),
             11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1),
             18: (0, 4), 19: (2, 7), 20: (1, 6), 22: (0, 5), 32: (1, 4), 36: (0, 2), 57: (0, 2),
             68: (0, 1)}


def test_our_ranges_cover_current_kafka() -> None:
    assert API_VERSIONS[ApiKey.PRODUCE] == (0, 13)
    assert API_VERSIONS[ApiKey.FETCH] == (0, 18)
    assert API_VERSIONS[ApiKey.METADATA] == (0, 13)
    assert set(API_VERSIONS) == {int(k) for k in ApiKey}
    for key, (lo, hi) in KAFKA_4_1.items():
        if key in API_VERSIONS:
            assert API_VERSIONS[key][0] <= lo and API_VERSIONS[key][1] >= hi


def test_highest_common_version() -> None:
    assert protocol.negotiate(KAFKA_3_9) == {k: hi for k, (lo, hi) in KAFKA_3_9.items()}
    chosen = protocol.negotiate(KAFKA_4_1)
    assert chosen[ApiKey.FETCH] == 18 and chosen[ApiKey.PRODUCE] == 13
    assert chosen[ApiKey.CONSUMER_GROUP_HEARTBEAT] == 1
    assert chosen[ApiKey.DESCRIBE_CONFIGS] == 4
    assert 57 not in chosen  # an API kproto does not speak (UpdateFeatures) is left out


def test_lower_client_maximum_wins() -> None:
    ours = {**API_VERSIONS, ApiKey.FETCH: (0, 11)}
    assert protocol.negotiate(KAFKA_4_1, ours)[ApiKey.FETCH] == 11


def test_kafka_4_produce_floor_quirk() -> None:
    # 4.x advertises Produce min 0 but closes the connection on v0-2.
    assert protocol.common_ranges(KAFKA_4_1)[ApiKey.PRODUCE] == (3, 13)
    assert protocol.common_ranges(KAFKA_3_9)[ApiKey.PRODUCE] == (0, 11)
    ours = {**API_VERSIONS, ApiKey.PRODUCE: (0, 2)}
    assert ApiKey.PRODUCE not in protocol.negotiate(KAFKA_4_1, ours)
    assert protocol.negotiate(KAFKA_3_9, ours)[ApiKey.PRODUCE] == 2


def test_no_overlap_and_pick() -> None:
    chosen = protocol.negotiate({ApiKey.FETCH: (19, 20), ApiKey.METADATA: (0, 1)})
    assert chosen == {ApiKey.METADATA: 1}
    assert protocol.pick(chosen, ApiKey.METADATA) == 1
    with pytest.raises(UnsupportedVersionError, match="Fetch"):
        protocol.pick(chosen, ApiKey.FETCH)


def test_accepts_a_decoded_api_versions_body() -> None:
    body = protocol.decode(18, 3, "response", protocol.encode(18, 3, "response", {
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                     for k, (lo, hi) in KAFKA_4_1.items()]}))
    assert protocol.negotiate(body) == protocol.negotiate(KAFKA_4_1)


def test_api_versions_retry() -> None:
    error = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    assert protocol.api_versions_retry(error, 4) == 2
    assert protocol.api_versions_retry({"error_code": 35, "api_keys": []}, 4) == 0
    assert protocol.api_versions_retry({"error_code": 0, "api_keys": []}, 4) is None
    assert protocol.api_versions_retry(error, 0) is None


# ---------------------------------------------------------------- topic ids (Java's fallback)

def _fetch_fields(*ids: object) -> dict:
    return {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": f"t{i}", "topic_id": tid, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024,
                 "current_leader_epoch": -1, "log_start_offset": -1}]}
                for i, tid in enumerate(ids)]}


def test_topic_id_versions_come_from_the_declarations() -> None:
    # Fetch v13 and Produce v13 drop the topic name for its id; OffsetCommit and
    # OffsetFetch v10 likewise (Kafka's JSON: "topic"/"name" end where "topic_id" starts)
    assert protocol.versions.TOPIC_ID_VERSIONS == {
        ApiKey.PRODUCE: 13, ApiKey.FETCH: 13, ApiKey.OFFSET_COMMIT: 10, ApiKey.OFFSET_FETCH: 10}


def test_a_topic_without_id_steps_down_to_a_version_that_names_it() -> None:
    import uuid

    real, zero = uuid.uuid4(), uuid.UUID(int=0)
    fillable = protocol.fillable
    assert fillable(ApiKey.FETCH, 16, _fetch_fields(real, real), KAFKA_4_1) == 16
    assert fillable(ApiKey.FETCH, 16, _fetch_fields(real, zero), KAFKA_4_1) == 12
    assert fillable(ApiKey.FETCH, 12, _fetch_fields(zero), KAFKA_4_1) == 12
    assert fillable(ApiKey.METADATA, 12, {"topics": [{"name": "t", "topic_id": zero}]}) == 12
    with pytest.raises(UnsupportedVersionError, match="Fetch: a topic .* has no topic id"):
        fillable(ApiKey.FETCH, 16, _fetch_fields(zero), {ApiKey.FETCH: (13, 16)})


def test_connection_sends_a_name_based_fetch_when_a_topic_has_no_id() -> None:
    """The sans-I/O connection applies the rule to every request it frames."""
    import struct
    import uuid

    from kproto.net.connection import Connection

    conn = Connection(versions={ApiKey.FETCH: 16}, broker_ranges={ApiKey.FETCH: (0, 16)})
    assert conn.send(ApiKey.FETCH, _fetch_fields(uuid.UUID(int=0))).version == 12
    frame = conn.data_to_send()
    assert struct.unpack_from(">hh", frame, 4) == (ApiKey.FETCH, 12)
    assert conn.send(ApiKey.FETCH, _fetch_fields(uuid.uuid4())).version == 16
    assert conn.send(ApiKey.FETCH, lambda v: _fetch_fields(uuid.UUID(int=0))).version == 12


def test_api_keys_are_generated_from_the_declarations() -> None:
    """ApiKey is written by tools/gen_api_keys.py from the Api(...) declarations
    (one source per wire fact): a declaration added without regenerating fails."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("gen_api_keys",
                                                  root / "tools" / "gen_api_keys.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.render() == (root / "kproto/protocol/keys.py").read_text(), \
        "run: python tools/gen_api_keys.py"
    from kproto.protocol.apis import APIS

    assert {int(k) for k in ApiKey} == set(APIS)


def _any_unknown_topic_id(value: object) -> bool:
    """The reference: any ``topic_id`` anywhere in the request fields (through
    lists) missing or zero - what fillable walked before it looked only where the
    declarations put topic ids."""
    import uuid

    if isinstance(value, dict):
        if "topic_id" in value:
            tid = value["topic_id"]
            if tid is None or (isinstance(tid, uuid.UUID) and not tid.int):
                return True
        return any(_any_unknown_topic_id(v) for v in value.values() if isinstance(v, list))
    if isinstance(value, list):
        return any(_any_unknown_topic_id(v) for v in value if isinstance(v, dict))
    return False


def _zero_some_ids(value: object, draw: object) -> object:
    import uuid

    if isinstance(value, list):
        return [_zero_some_ids(v, draw) for v in value]
    if isinstance(value, dict):
        out = {k: _zero_some_ids(v, draw) for k, v in value.items()}
        if "topic_id" in out and draw(st.integers(0, 3)) == 0:     # type: ignore[operator]
            out["topic_id"] = uuid.UUID(int=0)
        return out
    return value


@settings(max_examples=300, deadline=None, database=None)
@given(st.data())
def test_fillable_looks_where_topic_ids_are_declared(data: st.DataObject) -> None:
    """fillable looks for a missing topic id only in the arrays the declarations give
    topic ids (not in every partition), and decides as a walk of everything did, on
    requests generated from the declarations with some ids zeroed."""
    key = data.draw(st.sampled_from(sorted(protocol.versions.TOPIC_ID_VERSIONS)))
    api = protocol.APIS[key]
    first = protocol.versions.TOPIC_ID_VERSIONS[key]
    version = data.draw(st.integers(first, api.request.versions.hi))
    fields = _zero_some_ids(data.draw(instance(api.request, version)), data.draw)
    expected = first - 1 if _any_unknown_topic_id(fields) else version
    assert protocol.fillable(key, version, fields) == expected
