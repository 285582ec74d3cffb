"""Admin's group calls against the three test brokers: ListGroups with type and state
filters, describing groups of every type, and what each broker lacks.

Which broker has what (docs/broker-versions.md): noida-db ListGroups v0-4 and
DescribeGroups v0-5; Tansu ListGroups v0-5, DescribeGroups v0-5 and
ConsumerGroupDescribe v0; librdkafka's mock none of these (it hosts KIP-848 and
share groups: ConsumerGroupHeartbeat, ShareGroupHeartbeat). None has
ShareGroupDescribe, and none can both host a KIP-848 group and describe it, so
ConsumerGroupDescribe's members are checked on an answer made with kproto's codec
(topic ids resolved with a real broker's Metadata).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from kproto import protocol
from kproto.admin import Admin, ConsumerGroupDescription, GroupDescription
from kproto.admin_groups import consumer_descriptions, listings
from kproto.errors import ConfigError, GroupIdNotFoundError, UnsupportedVersionError
from kproto.net import BrokerConnection
from kproto.protocol import ApiKey
from kproto.structs import TopicPartition

confluent_kafka = pytest.importorskip("confluent_kafka")


@pytest.fixture
def classic_group(broker, unique_topic) -> Iterator[tuple[str, str, str]]:
    """(group, topic, member id): a confluent-kafka consumer in a classic group,
    assigned both partitions of a new topic."""
    broker.create_topic(unique_topic, 2)
    group = f"g-{unique_topic}"
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group,
        "session.timeout.ms": broker.session_timeout_ms(30_000)})
    try:
        consumer.subscribe([unique_topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the consumer got no partitions within 60 s"
        yield group, unique_topic, consumer.memberid()
    finally:
        consumer.close()


@pytest.mark.brokers("noida", reason="the broker that lists groups with members and "
                     "states: the mock has no ListGroups, Tansu lists only groups with offsets")
def test_list_groups_by_type_and_state(broker, classic_group) -> None:
    group, _, _ = classic_group
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        # noida-db answers ListGroups v4: no types on the wire, its groups are classic
        [listed] = [g for g in admin.list_groups() if g.group_id == group]
        assert (listed.protocol_type, listed.state, listed.type) == ("consumer", "Stable",
                                                                     "classic")
        assert group in {g.group_id for g in admin.list_groups(types=["classic"])}
        assert group in {g.group_id for g in admin.list_groups(types=["CLASSIC", "share"])}
        assert group not in {g.group_id for g in admin.list_groups(types=["consumer"])}
        assert group in {g.group_id for g in admin.list_groups(states=["stable"])}
        assert group not in {g.group_id for g in admin.list_groups(states=["Empty"])}


@pytest.mark.brokers("tansu", reason="the broker answering ListGroups v5")
def test_list_groups_v5(broker, unique_topic) -> None:
    """Tansu lists only groups with committed offsets (state Unknown, type classic)
    and ignores types_filter: kproto filters the answer too."""
    from kproto import Consumer

    broker.create_topic(unique_topic, 1)
    group = f"g-{unique_topic}"
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group) as c:
        c.commit({(unique_topic, 0): 0})
    with BrokerConnection(broker.bootstrap) as conn:
        assert conn.versions[ApiKey.LIST_GROUPS] == 5
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        [listed] = [g for g in admin.list_groups(types=["classic"]) if g.group_id == group]
        assert (listed.type, listed.state, listed.protocol_type) == ("classic", "Unknown",
                                                                     "consumer")
        assert group not in {g.group_id for g in admin.list_groups(types=["consumer"])}


def test_list_groups_unknown_type() -> None:
    with Admin(bootstrap_servers="127.0.0.1:1") as admin:
        with pytest.raises(ConfigError, match="unknown group type 'queue': use one of "
                                              "classic, consumer, share, streams"):
            admin.list_groups(types=["queue"])


def test_listings_by_version() -> None:
    """What each ListGroups version carries: types from v5, states from v4."""
    v5 = {"groups": [
        {"group_id": "a", "protocol_type": "consumer", "group_state": "Stable",
         "group_type": "consumer"},
        {"group_id": "b", "protocol_type": "", "group_state": "Empty", "group_type": "share"},
        {"group_id": "c", "protocol_type": "consumer", "group_state": "Stable",
         "group_type": ""}]}
    assert [(g.group_id, g.type, g.state) for g in listings(v5, 5, [], [])] == [
        ("a", "consumer", "Stable"), ("b", "share", "Empty"), ("c", None, "Stable")]
    assert [g.group_id for g in listings(v5, 5, [], ["empty"])] == ["b"]
    # a broker that ignored types_filter; a group of no stated type stays
    assert [g.group_id for g in listings(v5, 5, ["share"], [])] == ["b", "c"]
    v3 = {"groups": [{"group_id": "a", "protocol_type": "consumer"}]}
    assert [(g.type, g.state) for g in listings(v3, 3, [], [])] == [("classic", None)]
    assert listings(v3, 3, ["consumer"], []) == []


@pytest.mark.brokers("mock", reason="the broker without ListGroups/DescribeGroups")
def test_mock_lacks_group_listing_and_description(broker) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        with pytest.raises(UnsupportedVersionError, match="no version of ListGroups"):
            admin.list_groups()
        with pytest.raises(UnsupportedVersionError, match="speaks none of DescribeGroups, "
                                                          "ConsumerGroupDescribe, "
                                                          "ShareGroupDescribe"):
            admin.describe_groups(["g"])


@pytest.mark.brokers("tansu", "noida", reason="the mock has no DescribeGroups")
def test_describe_classic_group(broker, classic_group) -> None:
    group, topic, member = classic_group
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        [desc] = admin.describe_groups([group])
        assert isinstance(desc, GroupDescription)
        assert (desc.type, desc.state, desc.protocol_type) == ("classic", "Stable", "consumer")
        assert [m.member_id for m in desc.members] == [member]
        if broker.name == "noida":  # Tansu leaves out the protocol and member data
            assert desc.protocol == "range"
            assert desc.members[0].assignment == {TopicPartition(topic, 0),
                                                  TopicPartition(topic, 1)}
            assert desc.members[0].subscription == (topic,)
        assert admin.describe_consumer_groups([group]) == [desc]
        assert admin.describe_classic_groups([group]) == [desc]


@pytest.mark.brokers("tansu", "noida", reason="the mock has no DescribeGroups")
def test_describe_absent_group(broker) -> None:
    """A group nobody knows: Dead (Kafka before DescribeGroups v6, noida-db), Empty with
    no protocol (Tansu: ConsumerGroupDescribe, asked next, also answers Empty)."""
    group = f"absent-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        [desc] = admin.describe_groups([group])
    assert isinstance(desc, GroupDescription)
    assert (desc.group_id, desc.state, desc.protocol_type, desc.members) == \
        (group, {"noida": "Dead", "tansu": "Empty"}[broker.name], "", [])


@pytest.mark.brokers("tansu", reason="the broker with ConsumerGroupDescribe")
def test_tansu_consumer_group_describe_of_a_classic_group(broker, classic_group) -> None:
    """Tansu answers ConsumerGroupDescribe for a classic group as if it were one (Kafka:
    GROUP_ID_NOT_FOUND), with no members and a member id as the assignor - which is
    why describe_groups asks DescribeGroups first."""
    group, _, member = classic_group
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        body = admin._coordinator_request(group, ApiKey.CONSUMER_GROUP_DESCRIBE, {
            "group_ids": [group], "include_authorized_operations": False})
        [g] = body["groups"]
        assert (g["error_code"], g["group_state"], g["members"]) == (0, "Stable", [])
        assert (g["group_epoch"], g["assignment_epoch"], g["assignor_name"]) == (-1, -1, member)
        [desc] = admin.describe_groups([group])
        assert isinstance(desc, GroupDescription)


def test_describe_share_groups_needs_share_group_describe(broker) -> None:
    """No test broker has ShareGroupDescribe (the mock hosts share groups but cannot
    describe them): a clear error naming the API."""
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        with pytest.raises(UnsupportedVersionError,
                           match="the broker supports no version of ShareGroupDescribe"):
            admin.describe_share_groups(["shares"])


@pytest.mark.brokers("mock", reason="the broker hosting KIP-848 groups")
def test_kip848_group_on_the_mock_cannot_be_described(broker, unique_topic) -> None:
    """A real KIP-848 group (confluent-kafka, group.protocol=consumer) on the mock,
    which has no ConsumerGroupDescribe: the error names what is missing."""
    broker.create_topic(unique_topic, 2)
    group = f"g-{unique_topic}"
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap,
                                         "group.id": group, "group.protocol": "consumer"})
    try:
        consumer.subscribe([unique_topic])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert len(consumer.assignment()) == 2, "no KIP-848 assignment within 60 s"
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            with pytest.raises(UnsupportedVersionError, match="ConsumerGroupDescribe"):
                admin.describe_consumer_groups([group])
    finally:
        consumer.close()


@pytest.mark.brokers("tansu", "mock", reason="noida-db's Metadata has no topic ids")
def test_consumer_group_description_names_topics_by_id(broker, unique_topic) -> None:
    """A ConsumerGroupDescribe v1 answer (made and read back with kproto's codec) whose
    assignments carry topic ids without names: the names come from Metadata; an id no
    topic has (deleted since) is left out."""
    broker.create_topic(unique_topic, 3)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        topic_id = admin.list_topics()[unique_topic].topic_id
        assert topic_id is not None
        gone = uuid.uuid4()
        answer = {"throttle_time_ms": 0, "groups": [{
            "error_code": 0, "error_message": None, "group_id": "g", "group_state": "Stable",
            "group_epoch": 7, "assignment_epoch": 7, "assignor_name": "uniform",
            "members": [{
                "member_id": "m1", "instance_id": "i1", "rack_id": None, "member_epoch": 7,
                "client_id": "c", "client_host": "/127.0.0.1",
                "subscribed_topic_names": [unique_topic], "subscribed_topic_regex": None,
                "assignment": {"topic_partitions": [
                    {"topic_id": topic_id, "topic_name": "", "partitions": [0, 2]},
                    {"topic_id": gone, "topic_name": "", "partitions": [0]}]},
                "target_assignment": {"topic_partitions": [
                    {"topic_id": topic_id, "topic_name": "", "partitions": [0, 1, 2]}]},
                "member_type": 1}],
            "authorized_operations": -2147483648}]}
        frame = protocol.encode_response(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, 5, answer)
        _, body = protocol.decode_response(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, frame[4:])
        [desc] = consumer_descriptions(body, admin._topic_names)
    assert isinstance(desc, ConsumerGroupDescription)
    assert (desc.type, desc.state, desc.group_epoch, desc.assignor) == \
        ("consumer", "Stable", 7, "uniform")
    [m] = desc.members
    assert (m.member_id, m.group_instance_id, m.member_epoch, m.member_type) == \
        ("m1", "i1", 7, "consumer")
    assert m.assignment == {TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 2)}
    assert m.target_assignment == {TopicPartition(unique_topic, p) for p in range(3)}


def test_consumer_group_describe_error_names_the_group() -> None:
    body = {"groups": [{"error_code": 69, "error_message": "Group g is not a consumer group.",
                        "group_id": "g"}]}
    with pytest.raises(GroupIdNotFoundError, match="not a consumer group"):
        consumer_descriptions(body, lambda ids: {})
