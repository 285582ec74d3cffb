"""Transactional ``send_batch`` against the non-transactional one, same run (issue 18).

The same pyarrow table (``KPROTO_BENCH_RECORDS`` records, default 1,000,000:
16-byte keys, 100-byte text-like values, bench_clients.make_table) is sent to a
fresh 4-partition topic on one Tansu broker by:

- ``plain``: ``Producer()`` (acks=all, no idempotence), ``send_batch`` and wait;
- ``idempotent``: the same with ``enable_idempotence=True``;
- ``transactional``: ``Producer(transactional_id=...)``, ``init_transactions()``,
  ``begin_transaction()``, ``send_batch``, ``commit_transaction()``;
- ``transactional x10``: the table in 10 transactions (begin, a tenth, commit).

Each round times the whole of it, producer creation to the last acknowledgement
(the commit, for transactions). The modes alternate round by round, so machine
noise hits them alike; the table is the median round of each and its ratio to
``plain``. Tansu accepts the transactional requests (AddPartitionsToTxn, EndTxn
and the markers) as Kafka does, so the ratio is the client's cost of transactions.

    python3 dev.py bench -k bench_transactions
    python benchmarks/bench_transactions.py --table     # runs it, prints markdown
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import kproto
from kproto.testing import TansuBroker

if __package__:
    from .bench_clients import make_table
else:                           # run as a script: benchmarks/ is sys.path[0]
    from bench_clients import make_table

RECORDS = int(os.environ.get("KPROTO_BENCH_RECORDS", "1000000"))
ROUNDS = 1 if RECORDS < 100_000 else 5
TIMEOUT = 60 + RECORDS / 10_000
CODECS = ["none", "lz4"]


@pytest.fixture(scope="module")
def broker() -> Any:
    with TansuBroker() as b:
        yield b.bootstrap


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return make_table(RECORDS)


def _settings(broker: str, codec: str) -> dict[str, Any]:
    return {"bootstrap_servers": broker, "compression_type": codec, "linger_ms": 5}


def plain(broker: str, codec: str, data: pa.Table, topic: str, **extra: Any) -> int:
    with kproto.Producer(**_settings(broker, codec), **extra) as p:
        return sum(m.record_count for m in p.send_batch(topic, data).result(TIMEOUT))


def idempotent(broker: str, codec: str, data: pa.Table, topic: str) -> int:
    return plain(broker, codec, data, topic, enable_idempotence=True)


def transactional(broker: str, codec: str, data: pa.Table, topic: str,
                  transactions: int = 1) -> int:
    with kproto.Producer(**_settings(broker, codec), transactional_id=topic) as p:
        p.init_transactions(TIMEOUT)
        step, sent = -(-data.num_rows // transactions), 0
        for start in range(0, data.num_rows, step):
            p.begin_transaction()
            future = p.send_batch(topic, data.slice(start, step))
            p.commit_transaction(TIMEOUT)
            sent += sum(m.record_count for m in future.result(0))
        return sent


MODES: dict[str, Callable[..., int]] = {
    "plain": plain, "idempotent": idempotent, "transactional": transactional,
    "transactional x10": lambda *a: transactional(*a, transactions=10)}


@pytest.mark.parametrize("codec", CODECS)
def test_transactional_send_batch_against_plain(benchmark: Any, broker: str, table: pa.Table,
                                                codec: str) -> None:
    walls: dict[str, list[float]] = {m: [] for m in MODES}

    def rounds() -> None:
        for _ in range(ROUNDS):
            for mode, fn in MODES.items():
                topic = f"bench-txn-{codec}-{uuid.uuid4().hex[:8]}"
                t0 = time.perf_counter()
                sent = fn(broker, codec, table, topic)
                walls[mode].append(time.perf_counter() - t0)
                assert sent == table.num_rows, f"{mode}: {sent:,} of {table.num_rows:,} sent"

    benchmark.pedantic(rounds, rounds=1, iterations=1)
    medians = {m: statistics.median(w) for m, w in walls.items()}
    benchmark.extra_info.update(records=table.num_rows, codec=codec, rounds=walls,
                                medians=medians)


def tables(path: str) -> str:
    """The markdown table of BENCHMARKS.md from a pytest-benchmark JSON file."""
    out = ["| codec | mode | records/s | wall s (median) | ÷ plain |", "|---|---|---|---|---|"]
    for b in json.load(open(path))["benchmarks"]:
        info = b["extra_info"]
        if "medians" not in info:
            continue
        base = info["medians"]["plain"]
        for mode, wall in info["medians"].items():
            out.append(f"| {info['codec']} | {mode} | {info['records'] / wall / 1e6:.2f} M/s | "
                       f"{wall:.2f} | {base / wall:.2f}× |")
    return "\n".join(out)


if __name__ == "__main__":
    from summarize import table_main  # benchmarks/ is sys.path[0] here

    sys.exit(table_main(__file__, __doc__, tables, sys.argv[1:]))
