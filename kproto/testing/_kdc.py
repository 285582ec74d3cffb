"""A real MIT Kerberos KDC with a realm of its own, for tests (see :mod:`kproto.testing`).

:class:`KerberosKdc` runs Debian's / MIT's ``krb5kdc`` (packages ``krb5-kdc``
and ``krb5-admin-server`` for ``kadmin.local``; ``krb5-user`` for ``kinit``)
on a free 127.0.0.1 TCP port. Everything lives in a temporary directory: the
``krb5.conf`` clients read (``KRB5_CONFIG``), the ``kdc.conf``
(``KRB5_KDC_PROFILE``), the database made by ``kdb5_util create -s``, and the
keytabs ``kadmin.local`` exports. Nothing under /etc is read or written::

    with KerberosKdc() as kdc:                      # realm KPROTO.TEST
        keytab = kdc.add_principal("alice")         # alice@KPROTO.TEST, its keytab
        kdc.add_principal("kafka/127.0.0.1")        # a broker's service principal
        os.environ.update(kdc.environ)              # KRB5_CONFIG for the clients

``find_kdc_tools()`` says which programs are missing (a RuntimeError naming
the packages), so tests can skip with that reason.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ._process import LOOPBACK, _live, _live_lock, free_port

__all__ = ["KerberosKdc", "find_kdc_tools"]

_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
_TOOLS = {  # program -> Debian package
    "krb5kdc": "krb5-kdc",
    "kdb5_util": "krb5-kdc",
    "kadmin.local": "krb5-admin-server",
    "kinit": "krb5-user",
}


def find_kdc_tools() -> dict[str, str]:
    """Paths of ``krb5kdc``, ``kdb5_util``, ``kadmin.local`` and ``kinit``;
    RuntimeError naming the missing programs and their Debian packages."""
    found, missing = {}, []
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
    for prog, package in _TOOLS.items():
        where = shutil.which(prog, path=path)
        if where is None:
            missing.append(f"{prog} ({package})")
        else:
            found[prog] = where
    if missing:
        raise RuntimeError("MIT Kerberos programs not installed: " + ", ".join(missing)
                           + " (apt-get install krb5-kdc krb5-admin-server krb5-user)")
    return found


class KerberosKdc:
    """An MIT ``krb5kdc`` on 127.0.0.1 with realm ``realm``, in a temp directory.

    ``start()`` makes the realm and returns once the KDC takes TCP connections;
    ``stop()`` ends the process by its PID (SIGTERM, then SIGKILL) and removes
    the directory. ``environ`` holds the variables a client needs
    (``KRB5_CONFIG``; ``KRB5_KDC_PROFILE`` for the admin tools). Clients reach
    the KDC over TCP only (``udp_preference_limit = 1``), with DNS
    canonicalization of host names off, so ``kafka@127.0.0.1`` names
    ``kafka/127.0.0.1@REALM``.

    Parameters:
        realm: the realm's name.
        max_life: the longest ticket the KDC issues (a kadmin time, e.g. ``"1h"``).
        time_offset: seconds added to the KDC's clock (``krb5kdc -T``), for
            clock skew tests.
    """

    def __init__(self, realm: str = "KPROTO.TEST", *, max_life: str = "1h",
                 time_offset: int = 0) -> None:
        if not re.fullmatch(r"[A-Z0-9.-]+", realm):
            raise ValueError(f"a test realm is upper-case letters, digits, '.', '-': {realm!r}")
        self.realm = realm
        self.max_life = max_life
        self.time_offset = time_offset
        self.host = LOOPBACK
        self.port: int | None = None
        self.dir: Path | None = None
        self.log_path: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._tools: dict[str, str] = {}

    def __repr__(self) -> str:
        state = f"pid {self._proc.pid}" if self.running and self._proc else "stopped"
        return f"KerberosKdc({self.realm}, {self.host}:{self.port}, {state})"

    def __enter__(self) -> KerberosKdc:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def krb5_config(self) -> Path:
        """The krb5.conf that points clients at this KDC."""
        assert self.dir is not None, "start() the KDC first"
        return self.dir / "krb5.conf"

    @property
    def environ(self) -> dict[str, str]:
        """``KRB5_CONFIG`` and ``KRB5_KDC_PROFILE`` for this realm."""
        assert self.dir is not None, "start() the KDC first"
        return {"KRB5_CONFIG": str(self.krb5_config),
                "KRB5_KDC_PROFILE": str(self.dir / "kdc.conf")}

    # -- lifecycle

    def start(self, timeout: float = 20.0) -> KerberosKdc:
        """Make the realm (database, stash) and start ``krb5kdc``; returns ``self``."""
        with self._lock:
            if self.running:
                return self
            self._tools = find_kdc_tools()
            self.dir = Path(tempfile.mkdtemp(prefix="kproto-kdc-"))
            self.log_path = self.dir / "kdc.log"
            try:
                self.port = free_port(self.host)
                self._write_config()
                self._run(self._tools["kdb5_util"], "create", "-s", "-r", self.realm,
                          "-P", secrets.token_hex(16))
                for attempt in range(3):
                    if self._spawn(time.monotonic() + timeout / 3, last=attempt == 2):
                        break
                    self.port = free_port(self.host)     # someone took the port: again
                    self._write_config()
                with _live_lock:
                    _live.add(self)
                return self
            except BaseException:
                self._stop_process()
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None
                raise

    def _write_config(self) -> None:
        assert self.dir is not None
        d, realm, where = self.dir, self.realm, f"{self.host}:{self.port}"
        (d / "krb5.conf").write_text(f"""\
[libdefaults]
  default_realm = {realm}
  dns_lookup_kdc = false
  dns_lookup_realm = false
  dns_canonicalize_hostname = false
  rdns = false
  udp_preference_limit = 1
  kdc_timeout = 2000
  max_retries = 1
  forwardable = false
[realms]
  {realm} = {{
    kdc = {where}
  }}
[domain_realm]
  {self.host} = {realm}
  localhost = {realm}
""")
        (d / "kdc.conf").write_text(f"""\
[kdcdefaults]
  kdc_ports = ""
  kdc_listen = ""
  kdc_tcp_listen = {where}
[realms]
  {realm} = {{
    database_name = {d}/principal
    key_stash_file = {d}/stash
    acl_file = {d}/kadm5.acl
    kdc_listen = ""
    kdc_tcp_listen = {where}
    max_life = {self.max_life}
    max_renewable_life = 0
  }}
[logging]
  kdc = FILE:{d}/kdc.log
""")
        (d / "kadm5.acl").write_text("")

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KRB5")}
        env.update(self.environ)
        return env

    def _run(self, *cmd: str, stdin: str | None = None) -> str:
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60,
                              env=self._env(), cwd=self.dir, check=False)
        # kadmin.local reports failed commands on stderr but exits 0
        if done.returncode or re.search(r"^\S+: .*(while|error|Error)", done.stderr, re.M):
            raise RuntimeError(f"{Path(cmd[0]).name} failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-2000:]}")
        return done.stdout

    def _spawn(self, deadline: float, *, last: bool) -> bool:
        """Start krb5kdc; True once its port takes connections, False when it
        exited because the port was taken (and this is not the last attempt)."""
        assert self.dir is not None and self.log_path is not None
        cmd = [self._tools["krb5kdc"], "-n", "-r", self.realm, "-P", str(self.dir / "kdc.pid")]
        if self.time_offset:
            cmd += ["-T", str(self.time_offset)]
        with open(self.dir / "krb5kdc.out", "ab") as out:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, env=self._env(),
                                          cwd=self.dir, start_new_session=True)
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                tail = self.log_tail()
                if not last and "in use" in tail:
                    return False
                raise RuntimeError(f"krb5kdc exited with code {self._proc.returncode}:\n{tail}")
            try:
                with socket.create_connection((self.host, self.port or 0), timeout=1):
                    return True
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"krb5kdc did not listen on {self.host}:{self.port} in time:\n"
                           f"{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        """The end of the KDC's log and its stdout/stderr."""
        if self.dir is None:
            return ""
        text = ""
        for name in ("kdc.log", "krb5kdc.out"):
            path = self.dir / name
            if path.exists():
                text += path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _stop_process(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()          # our child's PID only; a reaped child is never signalled
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def stop(self) -> None:
        """Stop the KDC and remove its directory; safe to call twice."""
        with self._lock:
            self._stop_process()
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None
            with _live_lock:
                _live.discard(self)

    def pause(self) -> None:
        """Stop the KDC process but keep the realm: :meth:`resume` starts it again
        on the same port (tests of a KDC that is down)."""
        with self._lock:
            self._stop_process()

    def resume(self, timeout: float = 20.0) -> None:
        """Start the KDC again after :meth:`pause`."""
        with self._lock:
            if not self.running:
                self._spawn(time.monotonic() + timeout, last=True)

    # -- principals

    def kadmin(self, *commands: str) -> str:
        """Run ``kadmin.local`` commands (one kadmin.local process) and return its output."""
        assert self.dir is not None, "start() the KDC first"
        return self._run(self._tools["kadmin.local"], "-r", self.realm,
                         stdin="".join(c + "\n" for c in commands))

    def principal(self, name: str) -> str:
        """``name`` with this realm appended when it has none."""
        return name if "@" in name else f"{name}@{self.realm}"

    def add_principal(self, name: str, *, max_life: str | None = None,
                      keytab: bool = True) -> Path | None:
        """Create ``name`` with a random key; return the path of a keytab holding
        it (None with ``keytab=False``). ``max_life`` caps its tickets (e.g.
        ``"5 seconds"``)."""
        assert self.dir is not None, "start() the KDC first"
        life = f'-maxlife "{max_life}" ' if max_life else ""
        commands = [f"addprinc -randkey {life}{self.principal(name)}"]
        path = self.dir / (re.sub(r"[^A-Za-z0-9.-]", "_", name) + ".keytab")
        if keytab:
            commands.append(f"ktadd -k {path} {self.principal(name)}")
        self.kadmin(*commands)
        return path if keytab else None

    def rekey(self, name: str) -> None:
        """Give ``name`` a new random key: keytabs made before no longer work."""
        self.kadmin(f"cpw -randkey {self.principal(name)}")

    def kinit(self, name: str, keytab: str | os.PathLike[str], ccache: str,
              lifetime: str | None = None) -> None:
        """``kinit -k -t keytab name`` into the credential cache ``ccache``."""
        cmd = [self._tools["kinit"], "-k", "-t", str(keytab), "-c", ccache]
        if lifetime:
            cmd += ["-l", lifetime]
        self._run(*cmd, self.principal(name))
