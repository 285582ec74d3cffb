"""Every ```python sample in README.md and docs/*.md runs, against Tansu and local Spark.

Samples in one file run in order in one namespace (a page's later samples may
use what its earlier ones made), seeded with the few names the prose
introduces (``arrow_table``, ``record_set_bytes``, ``spark``...). Broker
addresses in samples are pointed at the test broker, file paths at a temporary
directory. A sample that cannot run here says so in an HTML comment right
above it (``<!-- not run by tests/test_docs.py: why -->``); those are listed
in ``NOT_RUN`` so that a new one cannot slip in silently.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pyarrow as pa
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [p for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
         if "```python" in p.read_text()]
FENCE = re.compile(r"(?P<note><!-- not run by tests/test_docs.py:[^>]*-->\n)?```python\n"
                   r"(?P<code>.*?)```", re.S)
ADDRESSES = re.compile(r"(127\.0\.0\.1|localhost|broker1?):(9092|9093)")
#: (page, first line of the sample) of the samples that are shown but not run
NOT_RUN = {("security.md", "from kproto.net import BrokerConnection")}

pytestmark = pytest.mark.broker


def samples(page: Path) -> list[tuple[str, bool]]:
    return [(m["code"], m["note"] is None) for m in FENCE.finditer(page.read_text())]


@pytest.fixture(scope="module")
def spark_session():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("kproto-docs")
               .config("spark.ui.enabled", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _namespace(request: pytest.FixtureRequest, page: Path) -> dict:
    from kproto import Admin, Producer, records

    tansu = request.getfixturevalue("tansu")
    with Admin(bootstrap_servers=tansu.bootstrap) as admin:   # the client page uses 12
        admin.create_topics({"events": 12}, exist_ok=True)
    arrow_table = pa.table({"key": [b"k%d" % i for i in range(1000)],
                            "value": [b"v%d" % i for i in range(1000)]})
    with Producer(bootstrap_servers=tansu.bootstrap) as p:   # the samples read "events"
        p.send_batch("events", arrow_table).result()
    ns = {"arrow_table": arrow_table, "table": arrow_table,
          "record_set_bytes": records.encode(arrow_table)}
    if page.name == "README.md":
        from kproto import protocol

        ns["payload"] = protocol.encode_response(3, 12, 1, {
            "brokers": [], "topics": []})[4:]
    if page.name == "records.md":
        ns.update(_fetch_capture(tansu))
    if "spark" in page.read_text():
        ns["spark"] = request.getfixturevalue("spark_session")
    return ns


def _fetch_capture(tansu) -> dict:
    """A real Fetch response body for the records page's samples."""
    from kproto.net import BrokerConnection
    from kproto.protocol import ApiKey

    with BrokerConnection(tansu.bootstrap) as conn:
        meta = conn.request(ApiKey.METADATA, {"topics": [{"name": "events"}]})
        topic_id = meta["topics"][0]["topic_id"]
        version, body = conn.request_raw(ApiKey.FETCH, {
            "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1 << 20,
            "topics": [{"topic": "events", "topic_id": topic_id, "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                for p in range(12)]}]})
        return {"fetch_body": bytes(body), "version": version, "topic_id": topic_id}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_samples_run(request, page, tmp_path, monkeypatch):
    found = samples(page)
    shown = {(page.name, code.strip().splitlines()[0]) for code, run in found if not run}
    assert shown <= NOT_RUN, f"new samples marked not-run: {shown - NOT_RUN}"
    runnable = [code for code, run in found if run]
    tansu = request.getfixturevalue("tansu")
    ns = _namespace(request, page)
    monkeypatch.chdir(tmp_path)
    for i, code in enumerate(runnable):
        code = ADDRESSES.sub(tansu.bootstrap, code)
        code = re.sub(r'"(/data|/chk)/', lambda m: f'"{tmp_path}{m[1]}/', code)
        try:
            exec(compile(code, f"{page.name} sample {i + 1}", "exec"), ns)
        except Exception as exc:
            raise AssertionError(f"{page.name} sample {i + 1} failed: {exc!r}\n{code}") from exc
        query = ns.get("query")
        if query is not None and hasattr(query, "awaitTermination"):
            query.awaitTermination(60)
