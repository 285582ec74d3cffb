"""The consume-transform-produce loop of docs/client.md is exactly once across a SIGKILL.

The loop's code is taken from the page itself (the sample under "Consume,
transform, produce: exactly once") and run in a subprocess against noida-db
(the broker with real transactions and consumer groups), its names pointed at
this test's topics. The harness around it only slows ``commit_transaction``
down (it flushes, says so, then waits), so the kill lands inside a transaction whose
records are written and not committed. The process is SIGKILLed there,
restarted (the loop's consumer is a static member, so the new process takes
the dead one's place in the group at once), and left to finish: a
read_committed reader of the output must find every input record transformed
exactly once, the group's committed
offsets must be the input's ends, and the output's log must hold the dead
process's aborted records too (so the kill did land mid-transaction).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kproto import Admin, Consumer, Producer

from .noida_support import parse, value

ROOT = Path(__file__).resolve().parent.parent
PARTS, PER_PARTITION = 3, 400

pytestmark = pytest.mark.broker

HARNESS = """
import sys, time
from kproto import Producer

_commit = Producer.commit_transaction


def commit(self, *args, **kwargs):
    self.flush()        # the transaction's records are written: the kill may come now
    print("committing", flush=True)
    time.sleep(0.3)
    return _commit(self, *args, **kwargs)


Producer.commit_transaction = commit
exec(compile(sys.stdin.read(), "docs/client.md (the exactly-once loop)", "exec"),
     {"__name__": "__main__"})
print("done", flush=True)
"""


def documented_loop() -> str:
    text = (ROOT / "docs" / "client.md").read_text()
    section = text.split("### Consume, transform, produce: exactly once", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S)[1]  # type: ignore[index]


def _loop_for(bootstrap: str, source: str, sink: str, group: str) -> str:
    code, n = re.subn(r'^BOOTSTRAP, SOURCE, SINK, GROUP = .*$',
                      f"BOOTSTRAP, SOURCE, SINK, GROUP = {bootstrap!r}, {source!r}, {sink!r}, "
                      f"{group!r}", documented_loop(), flags=re.M)
    assert n == 1, "the documented loop no longer names its settings on one line"
    return code


class _Loop:
    """The documented loop in a subprocess; its stdout lines come through a queue."""

    def __init__(self, code: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HARNESS], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(code)
        self.proc.stdin.close()
        self.lines: queue.Queue[str | None] = queue.Queue()
        out = self.proc.stdout

        def pump() -> None:
            for line in out:
                self.lines.put(line.strip())
            self.lines.put(None)

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()

    def wait_for(self, line: str, count: int, timeout: float) -> None:
        deadline, seen = time.monotonic() + timeout, 0
        while seen < count:
            try:
                got = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {count}x {line!r} within {timeout} s") from None
            if got is None:
                assert self.proc.stderr is not None
                raise AssertionError(f"the loop exited ({self.proc.wait()}): "
                                     f"{self.proc.stderr.read()[-2000:]}")
            seen += got == line

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._pump.join(10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def _read(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation) as c:
        return c.read_range(topic, {p: ("earliest", "latest") for p in range(PARTS)}
                            ).column("value").to_pylist()


def test_the_documented_loop_is_exactly_once_across_sigkill(noida: Any) -> None:
    run = uuid.uuid4().hex[:8]
    source, sink, group = f"eos-in-{run}", f"eos-out-{run}", f"eos-{run}"
    with Admin(bootstrap_servers=noida.bootstrap) as admin:
        admin.create_topics({source: PARTS, sink: PARTS}, configs={"retention.ms": "-1"})
    inputs = [value(p, s, b"in") for s in range(PER_PARTITION) for p in range(PARTS)]
    with Producer(bootstrap_servers=noida.bootstrap, enable_idempotence=True) as p:
        for v in inputs:
            p.send(source, v, key=v, partition=parse(v)[1])
    code = _loop_for(noida.bootstrap, source, sink, group)

    first = _Loop(code)
    try:
        first.wait_for("committing", 3, 120)        # two committed, the third in flight
        first.proc.send_signal(signal.SIGKILL)
        assert first.proc.wait(10) == -signal.SIGKILL
    finally:
        first.stop()
    written = _read(noida.bootstrap, sink, "read_uncommitted")
    committed_before = _read(noida.bootstrap, sink, "read_committed")
    assert 0 < len(committed_before) < len(written) <= len(inputs), \
        "the kill should land after a commit, with the next transaction's records written"

    second = _Loop(code)
    try:
        second.wait_for("done", 1, 120)
        assert second.proc.wait(30) == 0
    finally:
        second.stop()

    out = _read(noida.bootstrap, sink, "read_committed")
    assert sorted(out) == sorted(v.upper() for v in inputs), \
        f"{len(out)} records for {len(inputs)} inputs ({len(out) - len(set(out))} duplicated)"
    everything = _read(noida.bootstrap, sink, "read_uncommitted")
    assert len(everything) > len(out), "the dead process's aborted records are in the log"
    with Admin(bootstrap_servers=noida.bootstrap) as admin:
        offsets = admin.list_consumer_group_offsets(group)
    assert offsets == {(source, p): PER_PARTITION for p in range(PARTS)}
