"""The ``kproto`` command against real brokers: output, JSON, exit codes, errors.

Commands run in-process through ``kproto.cli.main`` (fast) except one run of
the installed ``python -m kproto`` entry point. On the broker matrix
(tests/brokers.py); the entry point and the settings errors (which never reach a
broker) on Tansu only.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid

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
    # tqdm's line: count/total [elapsed<ETA, rate, MB]
    assert code == 0 and "wrote 4,000 records" in err and "rec/s" in err, err
    assert re.search(r"4\.00k/4\.00k \[\d\d:\d\d<\d\d:\d\d, ", err), err
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
    assert out.startswith(f"group {group}: classic, Empty, protocol -, 0 members")


@pytest.mark.brokers("noida", reason="the only broker that lists its groups with their "
                     "state: the mock has no ListGroups, Tansu lists only groups with offsets")
def test_groups_list_by_type_and_state(broker, unique_topic, capsys):
    from kproto import Consumer

    group = f"g-{unique_topic}"
    broker.create_topic(unique_topic, 1)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group) as c:
        c.commit({(unique_topic, 0): 0})

    def listed(*argv: str) -> list[str]:
        code, out, _ = run(capsys, "-b", broker.bootstrap, "--json", "groups", "list", *argv)
        assert code == 0
        return [g["group_id"] for g in json.loads(out)]

    assert group in listed("--type", "classic") and group in listed("-t", "share", "-t", "classic")
    assert group not in listed("--type", "consumer")
    assert group in listed("--state", "Empty") and group not in listed("-s", "Stable")
    code, out, _ = run(capsys, "-b", broker.bootstrap, "groups", "list", "-t", "classic")
    [row] = [line.split() for line in out.splitlines() if group in line]
    assert row == [group, "classic", "Empty"]  # no protocol: a group of offsets only


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


def one_line(err: str, *named: str) -> None:
    """``err`` is one error line naming each of ``named``, and no traceback."""
    assert err.count("\n") == 1 and err.endswith("\n") and "Traceback" not in err, err
    assert err.startswith("kproto"), err
    for name in named:
        assert name in err, (name, err)


@pytest.mark.parametrize("argv, named", [
    (["-X", "noequals", "metadata"], ["-X", "'noequals' is not KEY=VALUE"]),
    (["-X", "lingr.ms=5", "produce", "t"], ["did you mean"]),
    (["consume", "t", "--from", "soon"], ["--from", "bad offset 'soon'"]),
])
def test_bad_settings_are_one_clear_line(tansu, capsys, argv, named, monkeypatch):
    got, _, err = run(capsys, "-b", tansu.bootstrap, *argv, stdin=b"x\n",
                      monkeypatch=monkeypatch)
    assert got == 1
    one_line(err, *named)


@pytest.fixture
def bad_files(tmp_path):
    pq.write_table(pa.table({"key": [b"k"], "Value": [b"v"]}), tmp_path / "Value.parquet")
    pq.write_table(pa.table({"value": [b"v"], "timestamp": ["2024-01-01T00:00"]}),
                   tmp_path / "text-timestamp.parquet")
    pq.write_table(pa.table({"value": [{"a": 1}]}), tmp_path / "struct.parquet")
    (tmp_path / "text.parquet").write_text("hello")
    (tmp_path / "empty.parquet").write_bytes(b"")
    (tmp_path / "garbage.bin").write_bytes(b"hello, not a record set")
    return tmp_path


# {topic}: an existing topic (1 partition), {nope}: no such topic, {dir}: bad_files
@pytest.mark.parametrize("argv, named", [
    ("metadata {nope}", ["topic '{nope}' does not exist"]),
    ("topics delete {nope}", ["UNKNOWN_TOPIC_OR_PARTITION", "{nope}"]),
    ("produce {topic} -f {dir}/missing.parquet", ["No such file", "missing.parquet"]),
    ("produce {topic} -f {dir}/text.parquet", ["{dir}/text.parquet", "Parquet"]),
    ("produce {topic} -f {dir}/empty.parquet", ["{dir}/empty.parquet", "Parquet"]),
    ("produce {topic} -f {dir}/Value.parquet", ["{dir}/Value.parquet", "no 'value' column",
                                                "'Value'"]),
    ("produce {topic} -f {dir}/text-timestamp.parquet", ["{dir}/text-timestamp.parquet",
                                                         "column 'timestamp'", "string"]),
    ("produce {topic} -f {dir}/struct.parquet", ["{dir}/struct.parquet", "column 'value'"]),
    ("produce {topic} -p 5", ["has no partition 5"]),
    ("consume {nope}", ["UNKNOWN_TOPIC_OR_PARTITION", "{nope}"]),
    ("consume {topic} -p 3", ["has no partition 3"]),
    ("consume {topic} -o {dir}/no/such/dir/out.parquet", ["{dir}/no/such/dir/out.parquet"]),
    ("offsets {nope}", ["UNKNOWN_TOPIC_OR_PARTITION", "{nope}"]),
    ("groups describe {nope}", ["group '{nope}' does not exist"]),
    ("transactions producers {nope}", ["topic '{nope}' does not exist"]),
    ("transactions producers {topic} -p 3", ["has no partition 3"]),
    ("decode {dir}/missing.bin", ["No such file", "missing.bin"]),
    ("decode {dir}/garbage.bin", ["{dir}/garbage.bin", "no whole record set"]),
    ("decode {dir}/garbage.bin --fetch-version 12", ["ProtocolError"]),
])
def test_each_command_s_failures_are_one_line_exit_1(tansu, unique_topic, bad_files, capsys,
                                                    monkeypatch, argv, named):
    """On Tansu only: what is under test is the CLI's own (argument and file checks, the
    table check, one line and exit 1 for any error); the broker answers behind these
    errors are tested on all three brokers by the client tests."""
    from kproto import Admin

    with Admin(bootstrap_servers=tansu.bootstrap) as admin:
        admin.create_topics({unique_topic: 1})
    where = {"topic": unique_topic, "nope": f"{unique_topic}-nope", "dir": str(bad_files)}
    code, out, err = run(capsys, "-b", tansu.bootstrap, *argv.format(**where).split(),
                         stdin=b"x\n", monkeypatch=monkeypatch)
    assert code == 1 and out == ""
    one_line(err, *(n.format(**where) for n in named))


@pytest.mark.parametrize("argv, named", [
    ("topics create t -c KEY", ["-c/--config", "'KEY' is not KEY=VALUE"]),
    ("topics create t -p 0", ["-p/--partitions", "'0' is not a positive integer"]),
    ("topics create t -r -1", ["-r/--replication-factor", "'-1'"]),
    ("topics create", ["topics create needs topic names"]),
    ("topics list t", ["topics list takes no topic names (got t)"]),
    ("produce t -z brotli", ["-z/--compression", "'brotli'"]),
    ("produce t -p -1", ["-p/--partition", "'-1' is not a partition"]),
    ("produce t -H", ["-H/--header"]),
    ("consume t -n -5", ["-n/--count", "'-5' is not a positive integer"]),
    ("consume t -n 0", ["-n/--count", "'0'"]),
    ("consume t --to later", ["--to", "'later'"]),
    ("offsets t -t -1", ["-t/--time", "'-1'"]),
    ("offsets t -p x", ["-p/--partition", "'x'"]),
    ("groups describe", ["groups describe needs group ids"]),
    ("groups list g", ["groups list takes no group ids"]),
    ("groups list -t queue", ["-t/--type", "'queue'"]),
    ("groups describe g -t consumer", ["groups describe takes no --type/--state"]),
    ("transactions list -s Bogus", ["-s/--state", "'Bogus'"]),
    ("transactions describe", ["transactions describe needs transactional ids"]),
    ("decode f --fetch-version 99", ["--fetch-version", "99"]),
    ("bench -n 0", ["-n/--records", "'0'"]),
    ("metdata", ["invalid choice: 'metdata'"]),
    ("metadata --nope", ["unrecognized arguments: --nope"]),
])
def test_malformed_command_lines_are_one_line_exit_1(capsys, argv, named):
    """Usage errors exit 1 as every error (not argparse's 2), one line naming the
    argument and pointing at --help."""
    code, out, err = run(capsys, "-b", "127.0.0.1:1", *argv.split())
    assert code == 1 and out == ""
    one_line(err, *named, "--help")


def test_no_broker_given(capsys, monkeypatch):
    monkeypatch.delenv("KPROTO_BOOTSTRAP_SERVERS", raising=False)
    code, _, err = run(capsys, "metadata")
    assert code == 1
    one_line(err, "no broker given", "KPROTO_BOOTSTRAP_SERVERS")


@pytest.mark.parametrize("argv", [
    ["-X", "sasl.password:hunter2", "metadata"],            # ':' for '='
    ["-X", "sasl.password", "hunter2", "metadata"],         # ' ' for '='
    ["-X", "sasl.oauthbearer.client.secret", "hunter2", "metadata"],
    ["-X", "ssl.key.password=hunter2", "-X", "security.protocol=SSLX", "metadata"],
    ["-b", "http://user:hunter2@127.0.0.1:1", "-X", "request.timeout.ms=500", "metadata"],
    ["-b", "user:hunter2@127.0.0.1:1", "-X", "request.timeout.ms=500", "metadata"],
    ["--bootstrap-servers=127.0.0.1:1,u:hunter2@127.0.0.1:2", "-X", "request.timeout.ms=500",
     "metadata"],
])
def test_errors_never_print_a_secret(capsys, argv):
    code, out, err = run(capsys, "-b", "127.0.0.1:1", *argv)
    assert code == 1
    one_line(err)
    assert "hunter2" not in err + out


@pytest.mark.parametrize("argv", [
    "metadata", "topics list", "topics create t", "produce t", "consume t", "offsets t",
    "groups list", "groups describe g", "transactions list",
])
def test_unreachable_bootstrap_fails_in_bounded_time(capsys, monkeypatch, argv):
    address = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    code, _, err = run(capsys, "-b", address, "-X", "request.timeout.ms=1000",
                       "-X", "max.block.ms=1000", *argv.split(), stdin=b"x\n",
                       monkeypatch=monkeypatch)
    assert code == 1 and time.monotonic() - start < 30
    one_line(err, address, "is the broker running")


def test_a_bug_is_one_line_unless_debugging(capsys, monkeypatch):
    """An exception kproto does not expect says so and how to see it; --debug (or
    KPROTO_DEBUG=1) prints the traceback; ^C exits 130 without a word."""
    import kproto.cli as cli

    def broken(args):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(cli, "cmd_bench", broken)
    code, _, err = run(capsys, "bench")
    assert code == 1
    one_line(err, "ZeroDivisionError: float division by zero", "--debug")
    code, _, err = run(capsys, "--debug", "bench")
    assert code == 1 and "Traceback" in err and "ZeroDivisionError" in err
    monkeypatch.setenv("KPROTO_DEBUG", "1")
    code, _, err = run(capsys, "bench")
    assert code == 1 and "Traceback" in err

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_bench", interrupted)
    assert run(capsys, "bench") == (130, "", "")


def test_consume_file_of_an_empty_range_and_produce_it_back(tansu, unique_topic, capsys,
                                                            tmp_path):
    """``consume -o`` writes a file (with Kafka's columns) even for no records, and a
    file it wrote produces back (its topic, offset and timestampType are Kafka's)."""
    from kproto import Admin

    with Admin(bootstrap_servers=tansu.bootstrap) as admin:
        admin.create_topics({unique_topic: 1, f"{unique_topic}-copy": 1})
    out = tmp_path / "out.parquet"
    assert run(capsys, "-b", tansu.bootstrap, "consume", unique_topic, "-o", str(out))[0] == 0
    assert pq.read_table(out).num_rows == 0 and "offset" in pq.read_table(out).schema.names
    with Producer(bootstrap_servers=tansu.bootstrap) as p:
        p.send_batch(unique_topic, pa.table({"key": [b"a", b"b"], "value": [b"1", None]}),
                     partition=0).result(10)
    assert run(capsys, "-b", tansu.bootstrap, "consume", unique_topic, "-o", str(out))[0] == 0
    code, _, err = run(capsys, "-b", tansu.bootstrap, "produce", f"{unique_topic}-copy",
                       "-f", str(out))
    assert code == 0, err
    code, got, _ = run(capsys, "-b", tansu.bootstrap, "consume", f"{unique_topic}-copy",
                       "--format", "json")
    assert [(r["key"], r["value"]) for r in map(json.loads, got.splitlines())] == \
        [("a", "1"), ("b", None)]


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


def test_a_closed_pipe_ends_quietly(tansu, unique_topic):
    """``kproto consume ... | head -1``: exit 0, nothing on stderr (a BrokenPipeError
    is an OSError, and was reported as an error)."""
    with Producer(bootstrap_servers=tansu.bootstrap) as p:
        p.send_batch(unique_topic, pa.table({"value": [b"x" * 100] * 5000}),
                     partition=0).result(30)
    proc = subprocess.Popen([sys.executable, "-m", "kproto", "-b", tansu.bootstrap, "consume",
                             unique_topic, "--format", "raw"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"x" * 100 + b"\n"
    proc.stdout.close()
    assert proc.wait(60) == 0
    assert proc.stderr.read() == b""
    proc.stderr.close()


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
    code, _, err = run(capsys, "-b", broker.bootstrap, "transactions", "list", "-s", "Bogus")
    assert code == 1 and "'Bogus'" in err       # not an empty list: no such state
    code, _, err = run(capsys, "-b", broker.bootstrap, "transactions", "producers", "nope-x")
    assert code == 1 and "topic 'nope-x' does not exist" in err


def test_groups_describe_shows_a_kip848_group(tansu, capsys, monkeypatch):
    """The type, epochs and target assignments of a KIP-848 consumer group. No test
    broker can both host such a group and describe it (docs/broker-versions.md), so
    Admin.describe_groups gives the description here; the rest (offsets) is Tansu's."""
    from kproto.admin import Admin, ConsumerGroupDescription, ConsumerMemberDescription
    from kproto.structs import TopicPartition

    group = f"g848-{uuid.uuid4().hex[:8]}"
    member = ConsumerMemberDescription(
        "m-1", "client-a", "/127.0.0.1", None, None, 5, ("events",), None,
        frozenset({TopicPartition("events", 0)}),
        frozenset({TopicPartition("events", 0), TopicPartition("events", 1)}), "consumer")
    desc = ConsumerGroupDescription(group, "Reconciling", 5, 5, "uniform", [member])
    monkeypatch.setattr(Admin, "describe_groups", lambda self, ids: [desc])
    code, out, _ = run(capsys, "-b", tansu.bootstrap, "groups", "describe", group)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"group {group}: consumer, Reconciling, assignor uniform, epoch 5, " \
                       "1 members"
    assert lines[1].split() == ["member", "client", "host", "epoch", "assignment", "target"]
    assert [line.split() for line in lines[2:] if line.startswith("m-1")] == [
        ["m-1", "client-a", "/127.0.0.1", "5", "events[0]", "events[0]", "events[1]"]]
    code, out, _ = run(capsys, "-b", tansu.bootstrap, "--json", "groups", "describe", group)
    [got] = json.loads(out)
    assert (got["type"], got["epoch"], got["members"][0]["target"]) == \
        ("consumer", 5, ["events[0]", "events[1]"])
