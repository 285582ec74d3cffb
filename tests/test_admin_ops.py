"""The Admin's cluster operations (issue 33) against the three test brokers: each
operation where the broker advertises its API (else what it answers instead),
errors per resource (a good and a bad resource in one call), and the same
operation seen by confluent-kafka's AdminClient on the same broker.

What each broker answered is in docs/broker-versions.md ("Admin operations").
"""

from __future__ import annotations

import pytest

from kproto import Consumer, Producer
from kproto.admin import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Admin,
    AlterConfigOp,
    ConfigResource,
    ResourcePattern,
    Results,
)
from kproto.errors import (
    GroupIdNotFoundError,
    KafkaConnectionError,
    KprotoError,
    ProtocolError,
    SecurityDisabledError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from kproto.structs import TopicPartition

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402
from confluent_kafka.admin import ConfigResource as CkConfigResource  # noqa: E402

NO_ADMIN = "librdkafka's mock advertises none of the config, ACL, record and log dir APIs"


def _produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        for i in range(n):
            p.send(topic, b"%d" % i, partition=partition)
        p.flush()


def test_results_raise_per_resource() -> None:
    r = Results({"a": 1}, {"b": UnknownTopicOrPartitionError(topic="b")})
    assert r["a"] == 1 and r.succeeded == {"a": 1} and sorted(r) == ["a", "b"]
    with pytest.raises(UnknownTopicOrPartitionError):
        r["b"]
    with pytest.raises(UnknownTopicOrPartitionError):
        r.all()
    assert Results({"a": 1}).all() == {"a": 1}


@pytest.mark.brokers("tansu", "noida", reason=NO_ADMIN)
def test_describe_configs_per_resource(broker, unique_topic) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics({unique_topic: 1}, configs={"retention.ms": "86400000"})
        good, bad = ("topic", unique_topic), ConfigResource("topic", unique_topic + "-absent")
        found = admin.describe_configs([good, bad])
        entry = found[good]["retention.ms"]
        if broker.name == "tansu":
            # Tansu: only the configs a topic was created with, each as DEFAULT_CONFIG;
            # an absent topic is error 0 with no configs
            assert found[bad] == {} and set(found[good]) == {"retention.ms"}
            assert (entry.value, entry.source) == ("86400000", "DEFAULT_CONFIG")
        else:
            assert isinstance(found.errors[bad], UnknownTopicOrPartitionError)
            with pytest.raises(UnknownTopicOrPartitionError, match="absent"):
                found[bad]
            assert (entry.value, entry.source, entry.is_default) == \
                ("86400000", "DYNAMIC_TOPIC_CONFIG", False)
            assert found[good]["cleanup.policy"].source == "DEFAULT_CONFIG"
    # the same configs as confluent-kafka's AdminClient describes them
    ck = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = ck.describe_configs([CkConfigResource("topic", unique_topic)]).values()
    theirs = {k: v.value for k, v in future.result(30).items()}
    assert theirs == {k: e.value for k, e in found[good].items()}


@pytest.mark.brokers("tansu", "noida", reason=NO_ADMIN)
def test_alter_configs_per_resource(broker, unique_topic) -> None:
    broker.create_topic(unique_topic, 1)
    good, bad = ConfigResource("topic", unique_topic), ("topic", unique_topic + "-absent")
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        incremental = admin.incremental_alter_configs({
            good: [AlterConfigOp("retention.ms", "3600000")],
            bad: [AlterConfigOp("retention.ms", "1")]})
        whole = admin.alter_configs({good: {"retention.ms": "7200000"},
                                     bad: {"retention.ms": "1"}})
        if broker.name == "tansu":
            # IncrementalAlterConfigs: error 0 for both; AlterConfigs not advertised
            assert incremental.all() == {good: None, ConfigResource(*bad): None}
            assert all(isinstance(e, UnsupportedVersionError) for e in whole.errors.values())
            assert len(whole.errors) == 2
            return
        assert incremental[good] is None and whole[good] is None
        for r in (incremental, whole):
            assert isinstance(r.errors[ConfigResource(*bad)], UnknownTopicOrPartitionError)
        assert admin.describe_configs([good], keys=["retention.ms"])[good][
            "retention.ms"].value == "7200000"
    ck = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = ck.describe_configs([CkConfigResource("topic", unique_topic)]).values()
    assert future.result(30)["retention.ms"].value == "7200000"


@pytest.mark.brokers("tansu", "noida", reason=NO_ADMIN)
def test_create_partitions_per_topic(broker, unique_topic) -> None:
    broker.create_topic(unique_topic, 2)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        if broker.name == "tansu":
            with pytest.raises(UnsupportedVersionError, match="CreatePartitions"):
                admin.create_partitions({unique_topic: 4})
            return
        result = admin.create_partitions({unique_topic: 4, unique_topic + "-absent": 3})
        assert result[unique_topic] is None
        assert isinstance(result.errors[unique_topic + "-absent"],
                          UnknownTopicOrPartitionError)
        assert len(admin.list_topics()[unique_topic].partitions) == 4
    ck = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert len(ck.list_topics(unique_topic, timeout=30).topics[unique_topic].partitions) == 4


@pytest.mark.brokers("tansu", "noida", reason=NO_ADMIN)
def test_delete_records_per_partition(broker, unique_topic) -> None:
    broker.create_topic(unique_topic, 2)
    _produce(broker.bootstrap, unique_topic, 10)
    tp0, tp9 = TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 9)
    absent = TopicPartition(unique_topic + "-absent", 0)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        result = admin.delete_records({tp0: 4, tp9: 1, absent: 1})
        assert isinstance(result.errors[tp9], UnknownTopicOrPartitionError)
        assert isinstance(result.errors[absent], UnknownTopicOrPartitionError)
        if broker.name == "tansu":
            # advertises DeleteRecords 0-2 but closes the connection on any of them
            assert isinstance(result.errors[tp0], KafkaConnectionError)
            return
        assert result[tp0] == 4
        assert admin.list_offsets({tp0: "earliest"})[tp0].offset == 4
    ck = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    try:
        low, high = ck.get_watermark_offsets(confluent_kafka.TopicPartition(unique_topic, 0),
                                             timeout=30)
    finally:
        ck.close()
    assert (low, high) == (4, 10)


@pytest.mark.brokers("tansu", "noida", reason=NO_ADMIN)
def test_delete_groups_and_offsets(broker, unique_topic) -> None:
    broker.create_topic(unique_topic, 2)
    group = f"g-{unique_topic}"
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group) as c:
        c.commit({(unique_topic, 0): 3, (unique_topic, 1): 5})
    tp0 = TopicPartition(unique_topic, 0)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        offsets = admin.delete_consumer_group_offsets(group, [tp0])
        if broker.name == "tansu":
            assert isinstance(offsets.errors[tp0], UnsupportedVersionError)  # no OffsetDelete
        else:
            assert offsets[tp0] is None
            assert admin.list_consumer_group_offsets(group) == {(unique_topic, 1): 5}
        deleted = admin.delete_consumer_groups([group, group + "-absent"])
        assert deleted[group] is None
        if broker.name == "noida":
            assert isinstance(deleted.errors[group + "-absent"], GroupIdNotFoundError)
        else:                       # Tansu: error 0 for a group it never had
            assert deleted[group + "-absent"] is None
        assert admin.list_consumer_group_offsets(group) == {}
    ck = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = ck.list_consumer_group_offsets(
        [confluent_kafka.ConsumerGroupTopicPartitions(group)])
    [future] = listed.values()
    assert [tp for tp in future.result(30).topic_partitions if tp.offset >= 0] == []


@pytest.mark.brokers("tansu", "noida", reason=NO_ADMIN)
def test_acls(broker, unique_topic) -> None:
    binding = AclBinding(ResourcePattern("topic", unique_topic),
                         AccessControlEntry("User:etl", "*", "read", "allow"))
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        if broker.name == "noida":
            # no authorizer: each binding and filter gets SECURITY_DISABLED
            created = admin.create_acls([binding])
            assert isinstance(created.errors[binding], SecurityDisabledError)
            deleted = admin.delete_acls([binding.to_filter()])
            assert isinstance(deleted.errors[binding.to_filter()], SecurityDisabledError)
            with pytest.raises(SecurityDisabledError):
                admin.describe_acls()
            return
        assert admin.describe_acls(AclBindingFilter.ANY) == []
        # Tansu answers CreateAcls with a null results array (Kafka: one per creation)
        with pytest.raises(ProtocolError, match="CreateAclsResponse"):
            admin.create_acls([binding])


def test_acl_model_refuses_bad_names() -> None:
    with pytest.raises(KprotoError, match="operation 'reed' is not one of all, read"):
        AccessControlEntry("User:x", "*", "reed", "allow")
    with pytest.raises(KprotoError, match="pattern type 'any' is not one of literal"):
        ResourcePattern("topic", "t", "any")        # a binding names one pattern type


def test_describe_cluster(broker) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        c = admin.describe_cluster()
    assert list(c.brokers) == sorted(broker.node_ids)
    assert c.source == ("Metadata" if broker.name == "mock" else "DescribeCluster")
    ck = AdminClient({"bootstrap.servers": broker.bootstrap})
    if broker.name == "mock":       # no DescribeCluster: confluent-kafka's Metadata
        meta = ck.list_topics(timeout=30)
        assert (meta.cluster_id, meta.controller_id, sorted(meta.brokers)) == \
            (c.cluster_id, c.controller_id, sorted(c.brokers))
        return
    theirs = ck.describe_cluster().result(30)
    assert (theirs.cluster_id, sorted(n.id for n in theirs.nodes)) == \
        (c.cluster_id, sorted(c.brokers))
    assert c.controller is not None and c.controller.node_id == theirs.controller.id


def test_describe_log_dirs(broker, unique_topic) -> None:
    broker.create_topic(unique_topic, 1)
    _produce(broker.bootstrap, unique_topic, 5)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        result = admin.describe_log_dirs()
    assert sorted(result) == sorted(broker.node_ids)
    if broker.name != "noida":      # Tansu and the mock have no DescribeLogDirs
        assert all(isinstance(e, UnsupportedVersionError) for e in result.errors.values())
        return
    [dirs] = result.all().values()
    replicas = {tp: r for d in dirs.values() for tp, r in d.replicas.items()}
    assert replicas[TopicPartition(unique_topic, 0)].size > 0


@pytest.mark.brokers("tansu", "noida", reason=NO_ADMIN)
def test_list_partition_reassignments(broker, unique_topic) -> None:
    broker.create_topic(unique_topic, 2)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        if broker.name == "noida":
            with pytest.raises(UnsupportedVersionError, match="ListPartitionReassignments"):
                admin.list_partition_reassignments()
            return
        # Tansu lists every partition, with its replicas and nothing moving
        found = admin.list_partition_reassignments([(unique_topic, 0), (unique_topic, 1)])
        assert {tp: (r.adding_replicas, r.removing_replicas) for tp, r in found.items()} == \
            {(unique_topic, 0): ((), ()), (unique_topic, 1): ((), ())}


@pytest.mark.brokers("tansu", "noida", reason="the mock answers OffsetFetch for every "
                     "partition (topics null) with a null topics array")
def test_consumer_group_lag(broker, unique_topic) -> None:
    broker.create_topic(unique_topic, 2)
    _produce(broker.bootstrap, unique_topic, 10, partition=0)
    _produce(broker.bootstrap, unique_topic, 4, partition=1)
    group = f"g-{unique_topic}"
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group) as c:
        c.commit({(unique_topic, 0): 3, (unique_topic, 1): 4})
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        lag = admin.consumer_group_lag(group)
    assert {tp: (p.committed, p.end, p.lag, p.member) for tp, p in lag.items()} == {
        (unique_topic, 0): (3, 10, 7, None), (unique_topic, 1): (4, 4, 0, None)}
