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

from kproto import protocol, records
from kproto.net import BrokerConnection
from kproto.protocol import ApiKey
from kproto.protocol.requests import find_coordinator_fields

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


# --------------------------------------------------------------------------- Kafka 4 group APIs
# What each broker advertises of the group, share and telemetry APIs (docs/broker-versions.md).
# librdkafka's mock has neither ListGroups nor DescribeGroups; Tansu has only
# ConsumerGroupDescribe of the KIP-848 / KIP-932 APIs.
GROUP_APIS = (15, 16, 68, 69, 71, 72, 76, 77, 78, 79)
ADVERTISED = {
    "mock_cluster": {68: (1, 1), 71: (0, 0), 72: (0, 0), 76: (1, 1), 78: (1, 1), 79: (1, 1)},
    "tansu": {15: (0, 5), 16: (0, 5), 69: (0, 0), 71: (0, 0)},
}


def coordinator(bootstrap: str, group: str) -> str:
    """The address of ``group``'s coordinator (FindCoordinator at the negotiated version)."""
    with BrokerConnection(bootstrap) as conn:
        answer = conn.request(ApiKey.FIND_COORDINATOR, find_coordinator_fields(group))
    c = answer["coordinators"][0] if answer.get("coordinators") else answer
    assert c["error_code"] == 0, answer
    return f"{c['host']}:{c['port']}"


def topic_leader(bootstrap: str, topic: str) -> tuple[str, uuid.UUID, int]:
    """(address of partition 0's leader, topic id, partition count); creates ``topic``."""
    with BrokerConnection(bootstrap) as conn:
        meta = conn.request(ApiKey.METADATA, {"topics": [{"name": topic}]})
    addresses = {b["node_id"]: f"{b['host']}:{b['port']}" for b in meta["brokers"]}
    [t] = meta["topics"]
    assert t["error_code"] == 0 and t["topic_id"] != uuid.UUID(int=0), t
    [p0] = [p for p in t["partitions"] if p["partition_index"] == 0]
    return addresses[p0["leader_id"]], t["topic_id"], len(t["partitions"])


@pytest.mark.parametrize("name", sorted(ADVERTISED))
def test_group_apis_advertised(request: pytest.FixtureRequest, name: str) -> None:
    bootstrap = request.getfixturevalue(name).bootstrap.split(",")[0]
    with BrokerConnection(bootstrap) as conn:
        got = {k: conn.broker_versions[k] for k in GROUP_APIS if k in conn.broker_versions}
        assert got == ADVERTISED[name]
        for key in got:  # kproto speaks a version of each
            lo, hi = protocol.API_VERSIONS[key]
            assert lo <= conn.versions[key] <= hi


def test_mock_consumer_group_heartbeat(mock_cluster: object) -> None:
    bootstrap = mock_cluster.bootstrap.split(",")[0]  # type: ignore[attr-defined]
    topic, group = f"kproto-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _, topic_id, partitions = topic_leader(bootstrap, topic)
    member = str(uuid.uuid4())  # v1: the member makes its own id (KIP-1082)
    with BrokerConnection(coordinator(bootstrap, group)) as conn:
        assert conn.versions[ApiKey.CONSUMER_GROUP_HEARTBEAT] == 1
        # librdkafka's mock asserts (aborting the process) unless names and regex are
        # both null or both set: librdkafka itself sends "" as the regex with names.
        joined = conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, {
            "group_id": group, "member_id": member, "member_epoch": 0,
            "rebalance_timeout_ms": 30_000, "subscribed_topic_names": [topic],
            "subscribed_topic_regex": "", "topic_partitions": []})
        assert joined["error_code"] == 0, joined
        assert joined["member_id"] == member and joined["member_epoch"] >= 1
        assert joined["heartbeat_interval_ms"] > 0
        [owned] = joined["assignment"]["topic_partitions"]
        assert owned["topic_id"] == topic_id
        assert sorted(owned["partitions"]) == list(range(partitions))  # the only member
        left = conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, {
            "group_id": group, "member_id": member, "member_epoch": -1})
        assert (left["error_code"], left["member_epoch"], left["assignment"]) == (0, -1, None)


def test_mock_share_group_fetch_and_acknowledge(mock_cluster: object) -> None:
    """ShareGroupHeartbeat, ShareFetch (opening a session, then acquiring records
    produced after it: a share group starts at the latest offset), ShareAcknowledge."""
    bootstrap = mock_cluster.bootstrap.split(",")[0]  # type: ignore[attr-defined]
    topic, group = f"kproto-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}"
    leader, topic_id, _ = topic_leader(bootstrap, topic)
    member = str(uuid.uuid4())
    with BrokerConnection(coordinator(bootstrap, group)) as conn:
        joined = conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, {
            "group_id": group, "member_id": member, "member_epoch": 0,
            "subscribed_topic_names": [topic]})
    assert joined["error_code"] == 0 and joined["member_epoch"] >= 1, joined
    assert [t["topic_id"] for t in joined["assignment"]["topic_partitions"]] == [topic_id]

    def share_fetch(conn: BrokerConnection, epoch: int) -> dict:
        answer = conn.request(ApiKey.SHARE_FETCH, {
            "group_id": group, "member_id": member, "share_session_epoch": epoch,
            "max_wait_ms": 200, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100,
            "batch_size": 100, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": []}]}]})
        assert answer["error_code"] == 0, answer
        [t] = answer["responses"]
        [p] = t["partitions"]
        assert (t["topic_id"], p["partition_index"], p["error_code"]) == (topic_id, 0, 0)
        return answer

    with BrokerConnection(leader) as conn:
        assert conn.versions[ApiKey.SHARE_FETCH] == conn.versions[ApiKey.SHARE_ACKNOWLEDGE] == 1
        opened = share_fetch(conn, 0)
        assert opened["acquisition_lock_timeout_ms"] > 0
        ident = {"topic_id": topic_id} if conn.versions[ApiKey.PRODUCE] >= 13 else {"name": topic}
        produced = conn.request(ApiKey.PRODUCE, {"acks": -1, "timeout_ms": 10_000, "topic_data": [
            {**ident, "partition_data": [{"index": 0, "records": records.encode(
                key=[None] * 3, value=[b"a", b"b", b"c"])}]}]})
        base = produced["responses"][0]["partition_responses"][0]["base_offset"]
        epoch, acquired = 1, []
        while not acquired and epoch < 50:  # bounded: 50 fetches of at most 200 ms
            p = share_fetch(conn, epoch)["responses"][0]["partitions"][0]
            acquired, epoch = p["acquired_records"], epoch + 1
        assert [(a["first_offset"], a["last_offset"], a["delivery_count"])
                for a in acquired] == [(base, base + 2, 1)]
        got = records.decode(p["records"]).to_pylist()
        assert [(r.offset, r.value) for r in got] == [(base, b"a"), (base + 1, b"b"),
                                                      (base + 2, b"c")]
        acked = conn.request(ApiKey.SHARE_ACKNOWLEDGE, {
            "group_id": group, "member_id": member, "share_session_epoch": epoch,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0,
                        "acknowledgement_batches": [{"first_offset": base,
                                                     "last_offset": base + 2,
                                                     "acknowledge_types": [1]}]}]}]})
        assert acked["error_code"] == 0, acked
        [t] = acked["responses"]
        assert [(p["partition_index"], p["error_code"]) for p in t["partitions"]] == [(0, 0)]


@pytest.mark.parametrize("name", sorted(ADVERTISED))
def test_telemetry_subscription_and_push(request: pytest.FixtureRequest, name: str) -> None:
    bootstrap = request.getfixturevalue(name).bootstrap.split(",")[0]
    with BrokerConnection(bootstrap) as conn:
        sub = conn.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, {})
        assert sub["error_code"] == 0 and sub["client_instance_id"] != uuid.UUID(int=0)
        assert sub["push_interval_ms"] > 0 and sub["telemetry_max_bytes"] > 0
        if ApiKey.PUSH_TELEMETRY not in conn.versions:
            return  # Tansu: GetTelemetrySubscriptions only
        pushed = conn.request(ApiKey.PUSH_TELEMETRY, {
            "client_instance_id": sub["client_instance_id"],
            "subscription_id": sub["subscription_id"], "terminating": True,
            "compression_type": 0, "metrics": b""})
        assert pushed["error_code"] == 0


def test_tansu_group_descriptions(tansu: object) -> None:
    """ListGroups v5 (with a type filter), DescribeGroups v5 and ConsumerGroupDescribe v0
    of a group that does not exist: Tansu answers each as an empty group, error 0 (Kafka
    answers Dead for DescribeGroups and GROUP_ID_NOT_FOUND for ConsumerGroupDescribe)."""
    bootstrap = tansu.bootstrap.split(",")[0]  # type: ignore[attr-defined]
    group = f"absent-{uuid.uuid4().hex[:8]}"
    with BrokerConnection(coordinator(bootstrap, group)) as conn:
        assert conn.versions[ApiKey.LIST_GROUPS] == 5
        listed = conn.request(ApiKey.LIST_GROUPS, {"states_filter": ["Stable"],
                                                   "types_filter": ["consumer"]})
        assert listed["error_code"] == 0 and group not in {g["group_id"] for g in listed["groups"]}
        [described] = conn.request(ApiKey.DESCRIBE_GROUPS, {
            "groups": [group], "include_authorized_operations": False})["groups"]
        assert (described["group_id"], described["error_code"], described["group_state"],
                described["members"]) == (group, 0, "Empty", [])
        [cg] = conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, {"group_ids": [group]})["groups"]
        assert (cg["group_id"], cg["error_code"], cg["group_state"], cg["members"]) == \
            (group, 0, "Empty", [])
