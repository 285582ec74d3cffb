"""Helpers of the noida-db proofs (tests/test_noida_restart.py, test_noida_transactions.py).

Record values carry their partition, a sequence number and a CRC-32 of both (as
tests/test_reliability.py's do), so every record is checked on its own: never
damaged, never returned as another partition's, and across a partition exactly
once and in order. A module's counts (records produced, acknowledged, read,
lost, duplicated, per proof) go to a :class:`Ledger`, printed when the module
ends (``pytest -s``) and written as JSON to ``$KPROTO_NOIDA_REPORT`` when set.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import time
import zlib
from typing import Any

from kproto.testing import NoidaBroker


def value(partition: int, seq: int, tag: bytes = b"") -> bytes:
    body = tag + b"%02d:%010d" % (partition, seq)
    return body + b":%08x" % zlib.crc32(body)


def parse(v: bytes) -> tuple[bytes, int, int]:
    """(tag, partition, seq) of a value; AssertionError if it is damaged."""
    body, _, crc = v.rpartition(b":")
    assert len(crc) == 8 and zlib.crc32(body) == int(crc, 16), f"damaged value {v!r}"
    m = re.fullmatch(rb"(.*?)(\d\d):(\d{10})", body)
    assert m, f"damaged value {v!r}"
    return m.group(1), int(m.group(2)), int(m.group(3))


class Ledger:
    """Counts per proof, printed (and optionally saved) when the module ends."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: dict[str, dict[str, Any]] = {}

    def add(self, proof: str, **counts: Any) -> None:
        self.entries.setdefault(proof, {}).update(counts)

    def report(self) -> None:
        print(f"\n{self.name}:")
        for proof, counts in self.entries.items():
            print(f"  {proof}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
        path = os.environ.get("KPROTO_NOIDA_REPORT")
        if path:
            try:
                with open(path) as f:
                    old = json.load(f)
            except (OSError, ValueError):
                old = {}
            old[self.name] = self.entries
            with open(path, "w") as f:
                json.dump(old, f, indent=1, sort_keys=True, default=str)


class LogCounter(logging.Handler):
    """Counts what kproto logs (retries by error, new producer ids, rejoins...)."""

    PATTERNS = {
        "new_producer_id": re.compile(r"sequence gap, the producer takes a new producer id"),
        "produce_retry": re.compile(r"^retrying "),
        "fetch_failed": re.compile(r"fetch (to|from) broker \d+ failed"),
        "metadata_refresh_failed": re.compile(r"metadata refresh failed"),
        "heartbeat_failed": re.compile(r"heartbeat (failed|of generation|error)"),
        "rejoin": re.compile(r"rejoining|got \d+ partitions"),
        "commit_failed": re.compile(r"commit .*failed"),
    }

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.counts: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        for kind, pattern in self.PATTERNS.items():
            if pattern.search(msg):
                self.counts[kind] += 1
        if msg.startswith("retrying ") and isinstance(record.args, tuple) and record.args:
            exc = record.args[-1]
            code = getattr(exc, "code", None) or getattr(exc, "error_code", None)
            self.errors[type(exc).__name__ + (f"({code})" if code else "")] += 1

    def __enter__(self) -> LogCounter:
        logger = logging.getLogger("kproto")
        self._level = logger.level
        logger.addHandler(self)
        logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger("kproto")
        logger.removeHandler(self)
        logger.setLevel(self._level)


def settle_saved(broker: NoidaBroker, quiet: float = 2.0, timeout: float = 15.0) -> float:
    """Wait until noida-db's ``kafka.json`` has not changed for ``quiet`` s: then it
    holds every change made before (noida saves ~1 s after a change, so a change
    not yet saved would show as a new save within that time). Call it once
    nothing can change the broker's state any more (clients stopped or held).
    Returns the mtime (time.time() clock) of the last save."""
    assert broker.data_dir is not None
    path = broker.data_dir / "kafka.json"
    deadline = time.monotonic() + timeout
    while True:
        before = path.stat().st_mtime_ns if path.exists() else 0
        try:
            broker.wait_saved(timeout=quiet)
        except TimeoutError:
            return before / 1e9
        if time.monotonic() > deadline:
            raise TimeoutError(f"noida-db kept saving {path} for {timeout:g} s")


def saved_mtime(broker: NoidaBroker) -> float:
    assert broker.data_dir is not None
    path = broker.data_dir / "kafka.json"
    return path.stat().st_mtime_ns / 1e9 if path.exists() else 0.0
