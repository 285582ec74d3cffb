"""The ``kproto`` command against real brokers: output, JSON, exit codes, errors.

Commands run in-process through ``kproto.cli.main`` (fast) except one run of
the installed ``python -m kproto`` entry point. On the broker matrix
(tests/brokers.py); the entry point and the settings errors (which never reach a
broker) on Tansu only.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kproto import Producer, records
from kproto.cli import main
from kproto.testing import free_port

pytestmark = pytest.mark.broker


def run(capsys, *argv: str, stdin: bytes | None = None, monkeypatch=None) -> tuple[int, str, str]:
    if stdin is not None:
        import io

        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.brokers(needs=("create_topics",))
def test_metadata_table_and_json(broker, unique_topic, capsys):
    code, out, _ = run(capsys, "-b", broker.bootstrap, "topics", "create", unique_topic,
                       "-p", "3")
    assert code == 0
    code, out, _ = run(capsys, "-b", broker.bootstrap, "metadata", unique_topic)
    assert code == 0 and "broker" in out and unique_topic in out and "isr" in out
    code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "metadata", unique_topic)
    data = json.loads(out)
    node = broker.node_ids[0]
    assert data["brokers"][0]["id"] == node
    [topic] = data["topics"]
    assert topic["name"] == unique_topic and len(topic["partitions"]) == 3
    assert all(p["leader"] == node and p["isr"] == [node] for p in topic["partitions"])


@pytest.mark.brokers(needs=("create_topics",))
def test_topics_list_create_delete(broker, unique_topic, capsys):
    assert run(capsys, "-b", broker.bootstrap, "topics", "create", unique_topic, "-p", "2")[0] == 0
    code, out, err = run(capsys, "-b", broker.bootstrap, "topics", "create", unique_topic)
    assert code == 1 and "TopicAlreadyExists" in err and err.count("\n") == 1
    assert run(capsys, "-b", broker.bootstrap, "topics", "create", unique_topic,
               "--if-not-exists")[0] == 0
    code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "topics", "list")
    assert {"name": unique_topic, "partitions": 2} in json.loads(out)
    assert run(capsys, "-b", broker.bootstrap, "topics", "delete", unique_topic)[0] == 0
    code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "topics", "list")
    assert unique_topic not in {t["name"] for t in json.loads(out)}


def test_produce_lines_then_consume_json(broker, unique_topic, capsys, monkeypatch):
    lines = b"".join(b"k%d:value %d\n" % (i % 3, i) for i in range(50))
    code, _, err = run(capsys, "-b", broker.bootstrap, "produce", unique_topic, "-K", ":",
                       "-H", "source=cli", stdin=lines, monkeypatch=monkeypatch)
    assert code == 0 and "produced 50 records" in err
    code, out, _ = run(capsys, "-b", broker.bootstrap, "consume", unique_topic,
                       "--format", "json")
    got = [json.loads(line) for line in out.splitlines()]
    assert sorted(int(r["value"].split()[1]) for r in got) == list(range(50))
    assert all(r["key"] == f"k{int(r['value'].split()[1]) % 3}" for r in got)
    assert all(r["headers"] == [["source", "cli"]] for r in got)
    code, out, _ = run(capsys, "-b", broker.bootstrap, "consume", unique_topic, "-n", "5",
                       "--format", "raw")
    assert len(out.splitlines()) == 5 and out.startswith("value ")


def test_consume_to_parquet_with_offsets_and_progress(broker, unique_topic, capsys, tmp_path):
    n = 5000
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send_batch(unique_topic, pa.table({"value": [b"%d" % i for i in range(n)]}),
                     partition=0).result()
    out_file = tmp_path / "out.parquet"
    code, _, err = run(capsys, "-b", broker.bootstrap, "consume", unique_topic, "-p", "0",
                       "--from", "100", "--to", "4100", "-o", str(out_file), "--progress")
    assert code == 0 and "wrote 4,000 records" in err and "rec/s" in err and "ETA" in err
    table = pq.read_table(out_file)
    assert table.column("offset").to_pylist() == list(range(100, 4100))
    code, out, _ = run(capsys, "-b", broker.bootstrap, "consume", unique_topic, "-p", "0",
                       "--from", "-3", "--format", "json")
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [4997, 4998, 4999]


def test_produce_parquet_file_and_offsets(broker, unique_topic, capsys, tmp_path):
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"key": [b"a", b"b", b"c"], "value": [b"1", b"2", b"3"]}), source)
    code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "produce", unique_topic,
                       "-f", str(source), "-z", "zstd")
    assert code == 0 and json.loads(out)["records"] == 3
    code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "offsets", unique_topic)
    data = json.loads(out)
    assert sum(d["latest"] for d in data) == 3 and all(d["earliest"] == 0 for d in data)


@pytest.mark.brokers(needs=("admin_groups",))
def test_groups_list_and_describe_with_lag(broker, unique_topic, capsys):
    from kproto import Consumer

    group = f"g-{unique_topic}"
    broker.create_topic(unique_topic, 2)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send_batch(unique_topic, pa.table({"value": [b"x"] * 10}), partition=0).result()
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group) as c:
        c.commit({(unique_topic, 0): 4})
    code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "groups", "list")
    assert group in {g["group_id"] for g in json.loads(out)}
    code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "groups", "describe", group)
    [desc] = json.loads(out)
    assert desc["offsets"] == [{"topic": unique_topic, "partition": 0, "committed": 4,
                                "end": 10, "lag": 6, "member": None}]
    code, out, _ = run(capsys, "-b", broker.bootstrap, "groups", "describe", group)
    assert code == 0 and "lag" in out


def test_decode_record_set_and_fetch_capture(capsys, tmp_path):
    capture = tmp_path / "set.bin"
    capture.write_bytes(records.encode(key=[b"k1", b"k2"], value=[b"v1", b"v2"],
                                       compression="gzip"))
    code, out, _ = run(capsys, "--json", "decode", str(capture))
    lines = out.splitlines()
    assert json.loads(lines[0])["records"] == 2
    assert [json.loads(x)["value"] for x in lines[1:]] == ["v1", "v2"]
    bad = bytearray(records.encode(value=[b"v"]))
    bad[16] = 7                                      # magic 7 does not exist
    capture.write_bytes(bytes(bad))
    code, _, err = run(capsys, "decode", str(capture))
    assert code == 1 and err.startswith("kproto decode: error: ") and err.count("\n") == 1
    assert "magic" in err


@pytest.mark.parametrize("argv, message", [
    (["-X", "noequals", "metadata"], "malformed -X setting 'noequals'"),
    (["-X", "lingr.ms=5", "produce", "t"], "did you mean"),
    (["consume", "t", "--from", "soon"], "bad offset 'soon'"),
])
def test_bad_settings_are_one_clear_line(tansu, capsys, argv, message, monkeypatch):
    code, _, err = run(capsys, "-b", tansu.bootstrap, *argv, stdin=b"x\n",
                       monkeypatch=monkeypatch)
    assert code == 1 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_bad_bootstrap_and_unknown_partition(broker, unique_topic, capsys):
    port = free_port()
    code, _, err = run(capsys, "-b", f"127.0.0.1:{port}", "-X", "request.timeout.ms=1000",
                       "metadata")
    assert code == 1 and f"127.0.0.1:{port}" in err and "is the broker running" in err
    broker.create_topic(unique_topic, 4)
    code, _, err = run(capsys, "-b", broker.bootstrap, "offsets", unique_topic, "-p", "9")
    assert code == 1 and "has no partition 9" in err


def test_entry_point_runs(tansu):
    out = subprocess.run([sys.executable, "-m", "kproto", "-b", tansu.bootstrap, "--json",
                          "metadata"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["brokers"][0]["port"] == tansu.port
    out = subprocess.run([sys.executable, "-m", "kproto", "--debug", "-b", "127.0.0.1:1",
                          "-X", "request.timeout.ms=500", "metadata"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "Traceback" in out.stderr


@pytest.mark.brokers("noida", reason="Tansu and the mock have no ListTransactions, "
                     "DescribeTransactions or DescribeProducers")
def test_transactions_list_describe_and_producers(broker, unique_topic, capsys):
    topic = broker.create_topic(unique_topic, 2)
    txn_id = f"{topic}-w"
    with Producer(bootstrap_servers=broker.bootstrap, transactional_id=txn_id) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"x", partition=1).result(10)
        code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "transactions", "list",
                           "-s", "Ongoing")
        assert code == 0
        listed = [t for t in json.loads(out) if t["transactional_id"] == txn_id]
        assert listed == [{"transactional_id": txn_id, "producer_id": p._txn.producer_id,
                           "state": "Ongoing"}]
        code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "transactions",
                           "describe", txn_id)
        [desc] = json.loads(out)
        assert (desc["state"], desc["producer_epoch"], desc["partitions"]) == \
            ("Ongoing", p._txn.epoch, [f"{topic}[1]"])
        code, out, _ = run(capsys, "-b", broker.bootstrap, "transactions", "describe", txn_id)
        assert code == 0 and txn_id in out and "Ongoing" in out and "partitions" in out
        p.commit_transaction()
    code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "transactions", "describe",
                       txn_id)
    assert json.loads(out)[0]["state"] == "CompleteCommit"
    code, out, _ = run(capsys, "-b", broker.bootstrap, "transactions", "producers", topic)
    assert code == 0 and "producer id" in out
    code, _, err = run(capsys, "-b", broker.bootstrap, "transactions", "describe")
    assert code == 1 and "needs transactional ids" in err
    code, _, err = run(capsys, "-b", broker.bootstrap, "transactions", "producers", "nope-x")
    assert code == 1 and "not found" in err
