"""The ``kproto`` admin commands (configs, acls, cluster, log-dirs, records,
topics add-partitions, groups lag / delete), consume --format with a registry,
against the test brokers: their output, and one stderr line per failed resource."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kproto import Consumer, Producer
from tests.test_cli import run

NO_ADMIN = "librdkafka's mock advertises none of the config, record and log dir APIs"


@pytest.mark.brokers("noida", reason="the broker that describes and alters topic configs "
                     "(Tansu describes only a topic's creation configs)")
def test_configs_describe_and_alter(broker, unique_topic, capsys) -> None:
    broker.create_topic(unique_topic, 1)
    b = broker.bootstrap
    code, out, err = run(capsys, "-b", b, "configs", "alter", "topic", unique_topic,
                         "--set", "retention.ms=3600000")
    assert (code, out) == (0, f"altered topic {unique_topic}: retention.ms=3600000\n"), err
    code, out, _ = run(capsys, "-b", b, "configs", "describe", "topic", unique_topic,
                       "-k", "retention.ms")
    assert out.splitlines()[0].split() == ["name", "value", "source", "read", "only"]
    assert out.splitlines()[2].split() == ["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"]
    code, out, _ = run(capsys, "-b", b, "--json", "configs", "describe", "topic", unique_topic)
    assert {d["name"]: d["value"] for d in json.loads(out)}["retention.ms"] == "3600000"
    code, out, err = run(capsys, "-b", b, "configs", "describe", "topic", unique_topic + "-x")
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("kproto configs: error: UnknownTopicOrPartitionError: "), err


@pytest.mark.brokers("noida", reason="the broker with CreatePartitions and DeleteRecords "
                     "(Tansu closes the connection on DeleteRecords)")
def test_add_partitions_and_delete_records(broker, unique_topic, capsys) -> None:
    broker.create_topic(unique_topic, 1)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send_batch(unique_topic, pa.table({"value": [b"x"] * 10}), partition=0).result()
    b = broker.bootstrap
    code, out, err = run(capsys, "-b", b, "topics", "add-partitions", unique_topic,
                         unique_topic + "-x", "-p", "3")
    assert code == 1 and out == f"{unique_topic} now 3 partitions\n"
    assert err == (f"kproto topics: error: topic '{unique_topic}-x': "
                   "UnknownTopicOrPartitionError: UNKNOWN_TOPIC_OR_PARTITION (3): This server "
                   f"does not host this topic-partition. [topic={unique_topic}-x]\n")
    code, out, err = run(capsys, "-b", b, "--json", "records", "delete", unique_topic,
                         "--before", "6", "-p", "0")
    assert (code, json.loads(out)) == (0, [{"partition": 0, "low_watermark": 6}]), err
    code, out, _ = run(capsys, "-b", b, "--json", "offsets", unique_topic)
    assert [d["earliest"] for d in json.loads(out)] == [6, 0, 0]
    code, out, _ = run(capsys, "-b", b, "--json", "log-dirs", "--topic", unique_topic)
    assert sorted(r["partition"] for r in json.loads(out)) == [0, 1, 2]


def test_cluster(broker, capsys) -> None:
    code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "cluster")
    data = json.loads(out)
    assert code == 0 and [b["id"] for b in data["brokers"]] == sorted(broker.node_ids)
    assert data["source"] == ("Metadata" if broker.name == "mock" else "DescribeCluster")
    code, out, _ = run(capsys, "-b", broker.bootstrap, "cluster")
    assert out.splitlines()[0].startswith(f"cluster {data['cluster_id']}, controller ")


@pytest.mark.brokers("tansu", "noida", reason="the mock answers OffsetFetch for every "
                     "partition with a null topics array")
def test_groups_lag_and_delete(broker, unique_topic, capsys) -> None:
    broker.create_topic(unique_topic, 1)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send_batch(unique_topic, pa.table({"value": [b"x"] * 10}), partition=0).result()
    group = f"g-{unique_topic}"
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group) as c:
        c.commit({(unique_topic, 0): 4})
    b = broker.bootstrap
    code, out, _ = run(capsys, "-b", b, "groups", "lag", group)
    lines = out.splitlines()
    assert lines[0].split() == ["topic", "partition", "committed", "end", "lag", "member"]
    assert lines[2].split() == [unique_topic, "0", "4", "10", "6", "-"]
    assert lines[-1] == "total lag 6"
    code, out, _ = run(capsys, "-b", b, "--json", "groups", "lag", group)
    assert json.loads(out) == [{"topic": unique_topic, "partition": 0, "committed": 4,
                                "end": 10, "lag": 6, "member": None}]
    code, out, err = run(capsys, "-b", b, "groups", "delete", group)
    assert (code, out) == (0, f"deleted {group}\n"), err
    code, out, err = run(capsys, "-b", b, "groups", "lag", group)
    assert code == 1 and "has no committed offsets" in err


@pytest.mark.brokers("tansu", reason="one broker is enough for the ACL command's output")
def test_acls_list_and_errors(broker, capsys) -> None:
    code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "acls", "list")
    assert (code, json.loads(out)) == (0, [])
    code, out, err = run(capsys, "-b", broker.bootstrap, "acls", "create", "--topic", "t")
    assert code == 1 and "acls create needs a resource" in err and len(err.splitlines()) == 1


@pytest.mark.brokers("tansu", reason="one broker is enough: the registry decodes")
def test_consume_decoded_avro_to_stdout_and_parquet(broker, unique_topic, capsys, tmp_path
                                                    ) -> None:
    from kproto import formats
    from kproto.testing import SchemaRegistryServer

    schema = {"type": "record", "name": "User", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
    users = pa.array([{"name": "Zoë", "age": 31}, {"name": "Ana", "age": 7}],
                     formats.reader_type("avro", schema=schema))
    broker.create_topic(unique_topic, 1)
    with SchemaRegistryServer() as registry:
        with Producer(bootstrap_servers=broker.bootstrap) as p:
            p.send_batch(unique_topic, pa.table({"value": users}), value_format="avro",
                         value_schema=schema, registry=registry.url).result()
        code, out, err = run(capsys, "-b", broker.bootstrap, "consume", unique_topic,
                             "--format", "avro", "--registry", registry.url)
        assert code == 0, err
        assert [json.loads(line)["value"] for line in out.splitlines()] == users.to_pylist()
        path = tmp_path / "users.parquet"
        code, _, err = run(capsys, "-b", broker.bootstrap, "consume", unique_topic,
                           "--format", "avro", "--registry", registry.url, "-o", str(path))
        assert code == 0 and "wrote 2 records" in err
        assert pq.read_table(path).column("value").to_pylist() == users.to_pylist()
    code, _, err = run(capsys, "-b", broker.bootstrap, "consume", unique_topic,
                       "--format", "avro")
    assert code == 1 and "--format avro needs --registry URL" in err
