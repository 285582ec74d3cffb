"""kproto's protocol layer against real brokers, over a plain socket.

Tansu (an Apache-Kafka-compatible broker) and librdkafka's mock cluster are
started by fixtures (tests/conftest.py). kproto sends ApiVersions at v0 and at
its newest version (downgrading on UNSUPPORTED_VERSION or an unparsable
answer), negotiates, then sends CreateTopics, Metadata and ListOffsets at the
negotiated versions and decodes every response.
"""

from __future__ import annotations

import socket
import struct
import uuid

import pytest

from kproto import protocol
from kproto.net import BrokerConnection
from kproto.protocol import ApiKey

pytestmark = pytest.mark.broker


def raw_round_trip(address: str, api_key: int, version: int, fields: dict) -> tuple[int, bytes]:
    """Send one framed request on a fresh socket; return (correlation id, response payload)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(protocol.encode_request(api_key, version, 42, "kproto-test", fields))
        size = struct.unpack(">i", _recv(sock, 4))[0]
        payload = _recv(sock, size)
    return struct.unpack_from(">i", payload)[0], payload


def _recv(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "broker closed the connection"
        out += chunk
    return out


@pytest.fixture(scope="module", params=["tansu", "mock_cluster"])
def broker(request: pytest.FixtureRequest) -> str:
    """The bootstrap address of one real broker of each kind."""
    started = request.getfixturevalue(request.param)
    return started.bootstrap.split(",")[0]


def test_api_versions_v0(broker: str) -> None:
    corr, payload = raw_round_trip(broker, ApiKey.API_VERSIONS, 0, {})
    assert corr == 42
    _, body = protocol.decode_response(ApiKey.API_VERSIONS, 0, payload)
    assert body["error_code"] == 0
    keys = {a["api_key"]: (a["min_version"], a["max_version"]) for a in body["api_keys"]}
    for key in (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH):
        assert key in keys, f"broker does not advertise API {key}"


def test_api_versions_newest_with_downgrade(broker: str) -> None:
    newest = protocol.API_VERSIONS[ApiKey.API_VERSIONS][1]
    version: int | None = newest
    answers = []
    while version is not None:
        _, payload = raw_round_trip(broker, ApiKey.API_VERSIONS, version, {
            "client_software_name": "kproto", "client_software_version": "0.1.0"})
        try:
            _, body = protocol.decode_response(ApiKey.API_VERSIONS, version, payload)
        except Exception:
            answers.append((version, "unparsable"))
            version = 0 if version else None  # the mock cluster's quirk: retry at v0
            continue
        answers.append((version, body["error_code"]))
        version = protocol.api_versions_retry(body, version)
    assert answers[-1][1] == 0, answers
    assert protocol.negotiate(body)[ApiKey.METADATA] >= 1


def test_negotiated_session(broker: str) -> None:
    topic = f"kproto-{uuid.uuid4().hex[:8]}"
    with BrokerConnection(broker) as conn:
        assert conn.api_versions_version >= 0
        for key, version in conn.versions.items():
            lo, hi = conn.broker_versions[key]
            assert lo <= version <= hi and version <= protocol.API_VERSIONS[key][1]

        if ApiKey.CREATE_TOPICS in conn.versions:
            created = conn.request(ApiKey.CREATE_TOPICS, {
                "topics": [{"name": topic, "num_partitions": 3, "replication_factor": 1}],
                "timeout_ms": 10_000})
            assert [(t["name"], t["error_code"]) for t in created["topics"]] == [(topic, 0)]
            expected_partitions = 3
        else:  # librdkafka's mock cluster has no CreateTopics: Metadata auto-creates
            expected_partitions = 4

        meta = conn.request(ApiKey.METADATA, {"topics": [{"name": topic}]})
        assert meta["brokers"], "no brokers in metadata"
        broker_ids = {b["node_id"] for b in meta["brokers"]}
        [t] = meta["topics"]
        assert (t["name"], t["error_code"]) == (topic, 0)
        assert sorted(p["partition_index"] for p in t["partitions"]) == \
            list(range(expected_partitions))
        assert all(p["leader_id"] in broker_ids for p in t["partitions"])

        # ListOffsets must go to each partition's leader.
        addresses = {b["node_id"]: f"{b['host']}:{b['port']}" for b in meta["brokers"]}
        for p in t["partitions"]:
            with BrokerConnection(addresses[p["leader_id"]]) as leader:
                answer = leader.request(ApiKey.LIST_OFFSETS, {
                    "replica_id": -1,
                    "topics": [{"name": topic, "partitions": [
                        {"partition_index": p["partition_index"], "timestamp": ts}
                        for ts in (-2,)]}]})
                [part] = answer["topics"][0]["partitions"]
                assert part["error_code"] == 0
                assert part["offset"] == 0  # a new topic starts empty


def test_every_negotiated_metadata_version_decodes(broker: str) -> None:
    """Metadata at every version both sides support: the broker's bytes decode."""
    with BrokerConnection(broker) as conn:
        lo, hi = protocol.common_ranges(
            {k: v for k, v in conn.broker_versions.items()})[ApiKey.METADATA]
        for version in range(lo, hi + 1):
            topics = [] if version == 0 else None  # v0: empty means all topics
            body = conn.request(ApiKey.METADATA, {"topics": topics}, version=version)
            assert body["brokers"], f"Metadata v{version}: no brokers"
