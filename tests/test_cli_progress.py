"""``kproto consume`` shows a live progress line (count, rate) on a real terminal,
and none when stderr is a pipe. The terminal is tmux's (a pane captured while
the command runs); .ci/run installs tmux, and without it the test skips."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from kproto import Producer

ROOT = Path(__file__).resolve().parent.parent
TMUX = shutil.which("tmux")
N = 2000


def _fill(broker, topic: str) -> None:
    broker.create_topic(topic, 1)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send_batch(topic, pa.table({"value": [b"v%d" % i for i in range(N)]}),
                     partition=0).result()


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed (.ci/run installs it)")
@pytest.mark.brokers("tansu", reason="one broker is enough for the terminal's output")
def test_progress_line_in_a_terminal(broker, unique_topic, tmp_path) -> None:
    _fill(broker, unique_topic)
    socket = f"kproto-test-{uuid.uuid4().hex[:8]}"    # a tmux server of this test's own
    command = " ".join(shlex.quote(a) for a in [
        sys.executable, "-m", "kproto", "-b", broker.bootstrap, "consume", unique_topic,
        "--follow", "-o", str(tmp_path / "out.parquet")])
    tmux = [TMUX, "-L", socket]
    subprocess.run([*tmux, "new-session", "-d", "-x", "160", "-y", "10", "-s", "t",
                    f"cd {shlex.quote(str(ROOT))} && TERM=xterm {command}; sleep 60"],
                   check=True, timeout=30)
    try:
        deadline, pane = time.monotonic() + 60, ""
        while time.monotonic() < deadline:
            pane = subprocess.run([*tmux, "capture-pane", "-p", "-t", "t"], check=True,
                                  capture_output=True, text=True, timeout=30).stdout
            # consuming (--follow: no end), N records read so far, at a rate, live
            if re.search(r"2\.00k(rec)? \[\d\d:\d\d, +[\d.]+k?rec/s", pane):
                break
            time.sleep(0.2)
        assert re.search(r"2\.00k(rec)? \[\d\d:\d\d, +[\d.]+k?rec/s", pane), pane
    finally:
        subprocess.run([*tmux, "kill-server"], timeout=30)


@pytest.mark.brokers("tansu", reason="one broker is enough for the piped output")
def test_no_progress_when_piped(broker, unique_topic, tmp_path) -> None:
    _fill(broker, unique_topic)
    done = subprocess.run([sys.executable, "-m", "kproto", "-b", broker.bootstrap, "consume",
                           unique_topic, "-o", str(tmp_path / "out.parquet")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"wrote {N:,} records to {tmp_path / 'out.parquet'}\n"
