"""SASL GSSAPI (Kerberos): kproto/net/kerberos.py against a real MIT KDC.

What runs here:

- ``kdc``: a real MIT ``krb5kdc`` (:class:`kproto.testing.KerberosKdc`) with its
  own realm, principals and keytabs made by ``kadmin.local``: ``alice`` (the
  client), ``brief`` (tickets live 3 s), ``kafka/127.0.0.1`` (the broker's
  service principal, in the gateway's keytab) and ``kafka/localhost`` (known to
  the KDC, not to the gateway). ``KRB5_CONFIG`` points at its krb5.conf for the
  session; ``KRB5CCNAME`` at an empty cache of its own.
- :class:`KafkaGssapiServer`: Java's ``GssKrb5Server`` as Kafka's broker runs it,
  in Python: a python-gssapi acceptor with the service keytab, then RFC 4752's
  security-layer step (the wrapped layers bitmask + size, the client's wrapped
  answer). It is an IN-TEST SERVER, NOT A BROKER, plugged into
  ``ReauthGateway`` (tests/oauth_support.py) in front of a real Tansu that
  advertises the gateway's port, so logins end in real Kafka answers (and
  KIP-368 session lifetimes are enforced).

Tests that need the KDC or python-gssapi skip with the reason when they are not
installed (.ci/run installs them: krb5-kdc, krb5-admin-server, krb5-user,
libkrb5-dev, and the ``kerberos`` extra).
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kproto.errors import ConfigError, KprotoError, SaslAuthenticationFailedError
from kproto.net import BrokerConnection
from kproto.net.security import sasl_from_config
from kproto.protocol import ApiKey

from .oauth_support import ReauthGateway, in_front_of_tansu

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
FAILED = ("Authentication failed during authentication due to invalid credentials with "
          "SASL mechanism GSSAPI")


# --------------------------------------------------------------------------- the KDC


@dataclass
class Realm:
    kdc: Any                 # kproto.testing.KerberosKdc
    alice: Path              # alice's keytab
    brief: Path              # brief's keytab (3 s tickets)
    service: Path            # kafka/127.0.0.1's keytab (the gateway's)
    dir: Path


@pytest.fixture(scope="session")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    try:
        import gssapi  # noqa: F401
    except ImportError as exc:      # not installed, or built against a library now gone
        pytest.skip(f"python-gssapi cannot be imported ({exc}): pip install "
                    "'kproto[kerberos]' (it builds against libkrb5-dev)")
    from kproto.testing import KerberosKdc, find_kdc_tools

    try:
        find_kdc_tools()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    kdc = KerberosKdc()
    kdc.start()
    try:
        alice = kdc.add_principal("alice")
        brief = kdc.add_principal("brief", max_life="3 seconds")
        service = kdc.add_principal("kafka/127.0.0.1")
        kdc.add_principal("kafka/localhost")
        assert alice and brief and service
        d = tmp_path_factory.mktemp("krb5")
        with pytest.MonkeyPatch.context() as mp:
            for key in ("KRB5_KTNAME", "KRB5_CLIENT_KTNAME", "KRB5RCACHEDIR"):
                mp.delenv(key, raising=False)
            mp.setenv("KRB5_CONFIG", str(kdc.krb5_config))
            mp.setenv("KRB5CCNAME", f"FILE:{d}/default-cache")       # empty
            mp.setenv("KRB5_CLIENT_KTNAME", f"FILE:{d}/no-client.keytab")
            yield Realm(kdc, alice, brief, service, d)
    finally:
        kdc.stop()


# --------------------------------------------------------------------------- the server


class KafkaGssapiServer:
    """Java's GssKrb5Server as Kafka's broker runs it (see the module docstring).

    One object per login. ``challenge`` replaces the security-layer challenge and
    ``ap_rep`` changes the AP-REP (hostile-server tests); refusals are Kafka's
    message, the reason goes to ``reasons`` (what the broker would log).
    """

    def __init__(self, keytab: Path, reasons: list[str], *, qop: int = 1,
                 challenge: Callable[[Any], bytes] | None = None,
                 ap_rep: Callable[[bytes], bytes] | None = None) -> None:
        import gssapi

        self.gssapi = gssapi
        creds = gssapi.Credentials(usage="accept", store={"keytab": str(keytab)})
        self.ctx = gssapi.SecurityContext(creds=creds, usage="accept")
        self.reasons, self.qop, self.challenge, self.ap_rep = reasons, qop, challenge, ap_rep
        self.stage = 0
        self.peer = self.authzid = ""

    def __call__(self, token: bytes) -> tuple[str, Any]:
        try:
            return self._step(token)
        except (self.gssapi.exceptions.GSSError, ValueError) as exc:
            self.reasons.append(f"{type(exc).__name__}: {exc}")
            return "error", FAILED

    def _step(self, token: bytes) -> tuple[str, Any]:
        if self.stage == 0:                         # acceptSecContext
            out = self.ctx.step(token)
            if not self.ctx.complete:
                return "continue", out or b""
            self.stage, self.peer = 1, str(self.ctx.initiator_name)
            if out:                                 # mutual authentication: the AP-REP
                return "continue", self.ap_rep(out) if self.ap_rep else out
            token = b""                             # none: the challenge follows at once
        if self.stage == 1:                         # doHandshake1
            if token:
                raise ValueError("Handshake expecting no response data from server")
            self.stage = 2
            if self.challenge is not None:
                return "continue", self.challenge(self.ctx)
            offer = bytes([self.qop]) + (65536).to_bytes(3, "big")
            return "continue", self.ctx.wrap(offer, False).message
        message = self.ctx.unwrap(token).message     # doHandshake2
        if len(message) < 4:
            raise ValueError("Invalid message on server final handshake")
        if not message[0] & self.qop:
            raise ValueError(f"Client selected unsupported protection: {message[0]}")
        self.authzid = message[4:].decode("utf-8")
        return "done", (self.authzid or self.peer, 0, b"")


def _server(realm: Realm, reasons: list[str], keytab: Path | None = None,
            **kw: Any) -> Callable[[], KafkaGssapiServer]:
    """A factory of one login's server, for the gateway's ``mechanisms``."""
    return lambda: KafkaGssapiServer(keytab or realm.service, reasons, **kw)


@dataclass
class Gateway:
    gw: ReauthGateway
    reasons: list[str]

    @property
    def address(self) -> str:
        return self.gw.address


@pytest.fixture(scope="module")
def _gateway(realm: Realm) -> Iterator[Gateway]:

    reasons: list[str] = []
    gw = ReauthGateway(("127.0.0.1", 1), mechanisms={"GSSAPI": _server(realm, reasons)})
    with in_front_of_tansu(gw):
        yield Gateway(gw, reasons)


@pytest.fixture()
def gateway(_gateway: Gateway, realm: Realm) -> Gateway:
    """The gateway as Kafka's GSSAPI server, no session lifetime, nothing refused yet."""
    _gateway.reasons.clear()
    _gateway.gw.refused.clear()
    _gateway.gw.max_reauth_ms = 0
    _gateway.gw.mechanisms["GSSAPI"] = _server(realm, _gateway.reasons)
    return _gateway


def _keytab_mech(realm: Realm, **kw: Any) -> Any:  # noqa: ANN401
    from kproto.net.kerberos import SaslGssapi

    return SaslGssapi(principal="alice", keytab=str(realm.alice), **kw)


def _meta(conn: BrokerConnection) -> None:
    assert conn.request(ApiKey.METADATA, {"topics": None})["brokers"]


def _refused(address: str, mech: Any, **kw: Any) -> SaslAuthenticationFailedError:  # noqa: ANN401
    start = time.monotonic()
    conn = BrokerConnection(address, sasl=mech, timeout=10, **kw)
    with pytest.raises(SaslAuthenticationFailedError) as info:
        conn.connect()
    assert time.monotonic() - start < 8 and not conn.connected
    return info.value


# --------------------------------------------------------------------------- settings


def test_without_gssapi_the_mechanism_is_a_config_error_naming_the_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)      # import gssapi -> ImportError
    with pytest.raises(ConfigError, match=r"python-gssapi.*kproto\[kerberos\].*libkrb5-dev"):
        sasl_from_config({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"})


def test_kinit_cmd_refused_min_time_accepted() -> None:
    from kproto.config import resolve

    with pytest.raises(ConfigError, match="sasl.kerberos.kinit.cmd.*runs no command"):
        resolve("producer", {"bootstrap.servers": "b:1", "sasl.kerberos.kinit.cmd": "kinit"})
    with pytest.raises(ConfigError, match="kinit.cmd is not supported"):
        sasl_from_config({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI",
                          "sasl_kerberos_kinit_cmd": "/usr/bin/kinit -R"})
    for bad in ("abc", "0", -5):
        with pytest.raises(ConfigError, match="request_timeout_ms must be a positive"):
            sasl_from_config({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI",
                              "request_timeout_ms": bad})
    done = resolve("producer", {"bootstrap.servers": "b:1",
                                "sasl.kerberos.min.time.before.relogin": "0"})
    assert done["sasl_kerberos_min_time_before_relogin"] == 0


def test_settings_with_java_and_librdkafka_names(realm: Realm) -> None:
    from kproto.config import resolve
    from kproto.net.kerberos import SaslGssapi

    librdkafka = resolve("consumer", {
        "bootstrap.servers": "b:1", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "GSSAPI", "sasl.kerberos.service.name": "kafka2",
        "sasl.kerberos.keytab": str(realm.alice), "sasl.kerberos.principal": "alice",
        "request.timeout.ms": 5000})
    mech = sasl_from_config(librdkafka)
    assert isinstance(mech, SaslGssapi)
    assert (mech.service_name, mech.principal, mech.keytab, mech.kdc_timeout) == \
        ("kafka2", "alice", str(realm.alice), 5.0)
    java = {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
            "sasl.jaas.config": f'{KRB5} required useKeyTab=true storeKey=true '
                                f'keyTab="{realm.alice}" principal="alice@KPROTO.TEST";'}
    mech = sasl_from_config(java)
    assert isinstance(mech, SaslGssapi) and mech.service_name == "kafka"
    assert (mech.principal, mech.keytab) == ("alice@KPROTO.TEST", str(realm.alice))
    cache = sasl_from_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
                              "sasl.kerberos.service.name": "kafka",
                              "sasl.jaas.config": f'{KRB5} required useTicketCache=true '
                                                  f'ticketCache="FILE:/tmp/kc";'})
    assert isinstance(cache, SaslGssapi) and cache.keytab is None
    assert (cache.use_ticket_cache, cache.ticket_cache) == (True, "FILE:/tmp/kc")


@pytest.mark.parametrize("what", ["missing", "directory", "fifo", "not a keytab", "empty",
                                  "other principal", "malformed principal",
                                  "service slash"])
def test_bad_keytab_settings_are_config_errors(realm: Realm, tmp_path: Path,
                                               what: str) -> None:
    from kproto.net.kerberos import SaslGssapi

    text = tmp_path / "krb5.txt"
    text.write_text("[libdefaults]\n")
    empty = tmp_path / "empty.keytab"
    empty.write_bytes(b"")
    fifo = tmp_path / "fifo.keytab"
    os.mkfifo(fifo)                                       # reading it would block for ever
    keytab, principal, service, words = {
        "missing": (tmp_path / "nope.keytab", "alice", "kafka", "does not exist"),
        "directory": (tmp_path, "alice", "kafka", "is a directory"),
        "fifo": (fifo, "alice", "kafka", "is not a regular file"),
        "not a keytab": (text, "alice", "kafka", "not a Kerberos keytab"),
        "empty": (empty, None, "kafka", "not a Kerberos keytab"),
        "other principal": (realm.alice, "bob", "kafka", "has no key for bob.*No key table "
                                                         "entry found for bob@KPROTO.TEST"),
        "malformed principal": (realm.alice, "a@b@c", "kafka", "principal 'a@b@c': "
                                                              "Malformed representation"),
        "service slash": (realm.alice, "alice", "kafka/host", "first part of the broker"),
    }[what]
    with pytest.raises(ConfigError, match=words) as info:
        SaslGssapi(principal=principal, keytab=str(keytab), service_name=service)
    assert "Major (" not in str(info.value)               # MIT's words, not status codes
    assert "/" not in service or "kafka/host" in str(info.value)


# --------------------------------------------------------------------------- logins


@pytest.mark.broker
def test_keytab_login_then_kafka_answers(gateway: Gateway, realm: Realm) -> None:
    mech = _keytab_mech(realm)
    with BrokerConnection(gateway.address, sasl=mech, timeout=10) as conn:
        _meta(conn)
    # the broker saw the client's principal, authorization id as Java's client sends it
    assert gateway.gw.sessions[-1].principal == "alice@KPROTO.TEST"
    assert gateway.gw.sessions[-1].mechanism == "GSSAPI" and not gateway.reasons


@pytest.mark.broker
def test_ticket_cache_login(gateway: Gateway, realm: Realm, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    from kproto.net.kerberos import SaslGssapi

    cache = f"FILE:{tmp_path}/cc"
    realm.kdc.kinit("alice", realm.alice, cache)
    monkeypatch.setenv("KRB5CCNAME", cache)                # kinit's cache, as users have
    with BrokerConnection(gateway.address, sasl=SaslGssapi(), timeout=10) as conn:
        _meta(conn)
    assert gateway.gw.sessions[-1].principal == "alice@KPROTO.TEST"
    # a principal that is not the cache's is named
    err = _refused(gateway.address, SaslGssapi(principal="brief"))
    assert "holds no ticket for brief" in str(err)


@pytest.mark.broker
def test_producer_consumer_admin_with_a_keytab_and_with_a_ticket_cache(
        gateway: Gateway, realm: Realm, tmp_path: Path) -> None:
    from kproto import Admin, Consumer, Producer

    topic = f"krb5-{time.monotonic_ns()}"
    cache = f"FILE:{tmp_path}/cc"
    realm.kdc.kinit("alice", realm.alice, cache)
    keytab = {"bootstrap.servers": gateway.address, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanisms": "GSSAPI", "sasl.kerberos.service.name": "kafka",
              "sasl.kerberos.keytab": str(realm.alice), "sasl.kerberos.principal": "alice"}
    jaas_cache = {"bootstrap.servers": gateway.address, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
                  "sasl.jaas.config": f'{KRB5} required useTicketCache=true '
                                      f'ticketCache="{cache}";'}
    with Admin(keytab) as admin:
        admin.create_topics({topic: 1})
    values = [f"v{i}".encode() for i in range(20)]
    with Producer(jaas_cache) as producer:
        for v in values:
            producer.send(topic, v, partition=0)
        producer.flush(30)
    got: list[bytes] = []
    with Consumer(keytab, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(500)]
    assert got == values
    assert not gateway.reasons and not gateway.gw.refused
    assert {s.principal for s in gateway.gw.sessions[-3:]} == {"alice@KPROTO.TEST"}


@pytest.mark.broker
def test_reauthentication_runs_a_fresh_context(gateway: Gateway, realm: Realm) -> None:
    gateway.gw.max_reauth_ms = 1500
    mech = _keytab_mech(realm)
    with BrokerConnection(gateway.address, sasl=mech, timeout=10) as conn:
        end = time.monotonic() + 4
        while time.monotonic() < end:
            _meta(conn)
            time.sleep(0.1)
        assert conn.reauthentications >= 2
    assert gateway.gw.expired_kills == 0 and gateway.gw.reauths >= 2


@pytest.mark.broker
def test_tickets_renewed_from_the_keytab(gateway: Gateway, realm: Realm) -> None:
    # brief's tickets live 3 s: the second login is past them, and logs in again
    from kproto.net.kerberos import SaslGssapi

    mech = SaslGssapi(principal="brief", keytab=str(realm.brief))
    for _ in range(2):
        with BrokerConnection(gateway.address, sasl=mech, timeout=10) as conn:
            _meta(conn)
        time.sleep(3.5)
    assert gateway.gw.sessions[-1].principal == "brief@KPROTO.TEST"


@pytest.mark.broker
def test_a_pickled_mechanism_logs_in(gateway: Gateway, realm: Realm) -> None:
    # as sent to Spark executors: settings only, no key, no credential cache
    mech = _keytab_mech(realm)
    data = pickle.dumps(mech)
    assert realm.alice.read_bytes()[-16:] not in data
    copy = pickle.loads(data)
    assert copy._ccache != mech._ccache
    with BrokerConnection(gateway.address, sasl=copy, timeout=10) as conn:
        _meta(conn)


# --------------------------------------------------------------------------- failures


@pytest.mark.broker
def test_wrong_keytab(gateway: Gateway, realm: Realm, tmp_path: Path) -> None:
    # a keytab exported before the principal's key was changed
    from kproto.net.kerberos import SaslGssapi

    realm.kdc.add_principal("rekeyed")
    old = tmp_path / "old.keytab"
    realm.kdc.kadmin(f"ktadd -k {old} rekeyed")
    realm.kdc.rekey("rekeyed")
    err = _refused(gateway.address, SaslGssapi(principal="rekeyed", keytab=str(old)))
    text = str(err)
    assert f"keytab {str(old)!r} does not match the KDC's for rekeyed" in text
    assert "export it again" in text and "Major (" not in text


@pytest.mark.broker
def test_wrong_service_name(gateway: Gateway, realm: Realm) -> None:
    err = _refused(gateway.address, _keytab_mech(realm, service_name="kafkax"))
    text = str(err)
    assert "kafkax/127.0.0.1" in text and "sasl.kerberos.service.name ('kafkax')" in text
    assert "Server kafkax/127.0.0.1@KPROTO.TEST not found in Kerberos database" in text


@pytest.mark.broker
def test_service_principal_of_the_host_as_connected(gateway: Gateway, realm: Realm) -> None:
    # "localhost" -> kafka/localhost: known to the KDC, not in the broker's keytab, so
    # the broker refuses it (and says why in its log)
    port = gateway.address.rpartition(":")[2]
    err = _refused(f"localhost:{port}", _keytab_mech(realm))
    text = str(err)
    assert FAILED in text and "refused the Kerberos login to kafka/localhost" in text
    assert any("kafka/localhost" in r or "Wrong principal" in r or "No key table" in r
               for r in gateway.reasons), gateway.reasons


@pytest.mark.broker
def test_expired_ticket(gateway: Gateway, realm: Realm, tmp_path: Path) -> None:
    from kproto.net.kerberos import SaslGssapi

    cache = f"FILE:{tmp_path}/cc"
    realm.kdc.kinit("alice", realm.alice, cache, lifetime="2s")
    time.sleep(3)
    err = _refused(gateway.address, SaslGssapi(ticket_cache=cache))
    assert "ticket has expired: kinit again" in str(err) and "expired]" in str(err)
    # with a keytab as well (Java: useTicketCache + useKeyTab), the keytab takes over
    mech = SaslGssapi(ticket_cache=cache, use_ticket_cache=True, keytab=str(realm.alice),
                      principal="alice")
    with BrokerConnection(gateway.address, sasl=mech, timeout=10) as conn:
        _meta(conn)


@pytest.mark.broker
def test_no_ticket_at_all(gateway: Gateway, realm: Realm, tmp_path: Path) -> None:
    from kproto.net.kerberos import SaslGssapi

    err = _refused(gateway.address, SaslGssapi(ticket_cache=f"FILE:{tmp_path}/none"))
    assert "no ticket in cache" in str(err) and "run kinit" in str(err)


@pytest.mark.broker
def test_kdc_down(gateway: Gateway, realm: Realm) -> None:
    realm.kdc.pause()
    try:
        err = _refused(gateway.address, _keytab_mech(realm))     # a fresh memory cache
    finally:
        realm.kdc.resume()
    text = str(err)
    assert "no KDC of the realm answers" in text and str(realm.kdc.krb5_config) in text
    assert "Cannot contact any KDC for realm 'KPROTO.TEST'" in text
    with BrokerConnection(gateway.address, sasl=_keytab_mech(realm), timeout=10) as conn:
        _meta(conn)                                     # and back


@pytest.mark.broker
def test_kdc_that_never_answers(gateway: Gateway, realm: Realm, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    silent = socket.create_server(("127.0.0.1", 0))      # takes connections, never reads
    try:
        conf = realm.kdc.krb5_config.read_text().replace(
            f"kdc = 127.0.0.1:{realm.kdc.port}", f"kdc = 127.0.0.1:{silent.getsockname()[1]}")
        (tmp_path / "krb5.conf").write_text(conf)
        monkeypatch.setenv("KRB5_CONFIG", str(tmp_path / "krb5.conf"))
        start = time.monotonic()
        err = _refused(gateway.address, _keytab_mech(realm, kdc_timeout=1.0))
        assert time.monotonic() - start < 5
        assert "no answer from the KDC within 1 s" in str(err)
    finally:
        silent.close()                                  # the abandoned call ends too


@pytest.mark.broker
def test_kdc_that_answers_garbage(gateway: Gateway, realm: Realm, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    liar = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = liar.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"\x00\x00\x00\x05hello")

    threading.Thread(target=serve, daemon=True).start()
    try:
        conf = realm.kdc.krb5_config.read_text().replace(
            f"kdc = 127.0.0.1:{realm.kdc.port}", f"kdc = 127.0.0.1:{liar.getsockname()[1]}")
        (tmp_path / "krb5.conf").write_text(conf)
        monkeypatch.setenv("KRB5_CONFIG", str(tmp_path / "krb5.conf"))
        err = _refused(gateway.address, _keytab_mech(realm, kdc_timeout=5.0))
        assert "login as alice from keytab" in str(err), str(err)
    finally:
        liar.close()


@pytest.mark.broker
def test_clock_skew_between_kdc_and_broker(gateway: Gateway, realm: Realm,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # a KDC an hour ahead (krb5kdc -T): its tickets start in the broker's future
    from kproto.net.kerberos import SaslGssapi
    from kproto.testing import KerberosKdc

    with KerberosKdc("SKEW.TEST", time_offset=3600) as skewed:
        alice = skewed.add_principal("alice")
        service = skewed.add_principal("kafka/127.0.0.1")
        monkeypatch.setenv("KRB5_CONFIG", str(skewed.krb5_config))
        gateway.gw.mechanisms["GSSAPI"] = _server(realm, gateway.reasons, keytab=service)
        err = _refused(gateway.address, SaslGssapi(principal="alice", keytab=str(alice)))
    assert FAILED in str(err) and "clocks more than 5 minutes apart" in str(err)
    assert any("Ticket not yet valid" in r for r in gateway.reasons), gateway.reasons


@pytest.mark.broker
@pytest.mark.parametrize("challenge, words", [
    (lambda ctx: b"\x00garbage" * 5, "security-layer message (40 bytes) did not verify"),
    (lambda ctx: b"", "security-layer message (0 bytes) did not verify"),
    (lambda ctx: ctx.wrap(b"\x01\x00\x00", False).message, "is 3 bytes, not 4"),
    (lambda ctx: ctx.wrap(b"\x06\x01\x00\x00", False).message,
     "requires a security layer (offered bitmask 0x06)"),
], ids=["garbage", "empty", "short", "no-layer-none"])
def test_hostile_security_layer_step(gateway: Gateway, realm: Realm,
                                     challenge: Callable[[Any], bytes], words: str) -> None:
    gateway.gw.mechanisms["GSSAPI"] = _server(realm, gateway.reasons, challenge=challenge)
    err = _refused(gateway.address, _keytab_mech(realm))
    assert words in str(err)


@pytest.mark.broker
@pytest.mark.parametrize("ap_rep", [lambda t: t[:-3], lambda t: b"\x00" * len(t),
                                    lambda t: b""], ids=["cut", "zeros", "empty"])
def test_hostile_ap_rep(gateway: Gateway, realm: Realm, ap_rep: Callable[[bytes], bytes]
                        ) -> None:
    gateway.gw.mechanisms["GSSAPI"] = _server(realm, gateway.reasons, ap_rep=ap_rep)
    err = _refused(gateway.address, _keytab_mech(realm))
    assert "the broker's Kerberos answer did not verify (service kafka/127.0.0.1)" in str(err)


@pytest.mark.broker
def test_errors_never_carry_key_material(gateway: Gateway, realm: Realm) -> None:
    key = realm.alice.read_bytes()
    # every 8-byte window of the keytab that is not printable text (its keys, mostly)
    binary = {key[i:i + 8] for i in range(len(key) - 8)
              if not key[i:i + 8].decode("latin-1").isprintable()}
    texts = []
    for mech in (_keytab_mech(realm, service_name="kafkax"), _keytab_mech(realm)):
        texts.append(repr(mech))
        try:
            with BrokerConnection(gateway.address, sasl=mech, timeout=10) as conn:
                _meta(conn)
        except KprotoError as exc:
            texts += [str(exc), repr(exc)]
    assert len(texts) == 4 and str(realm.alice) in texts[0]
    for text in texts:
        data = text.encode("utf-8", "surrogateescape")
        assert not [w for w in binary if w in data]


def test_no_host_is_a_config_error(realm: Realm) -> None:
    with pytest.raises(ConfigError, match="broker's host name"):
        _keytab_mech(realm).authenticate(lambda token: b"")


def test_keytab_file_unreadable(realm: Realm, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    from kproto.net.kerberos import SaslGssapi

    path = tmp_path / "locked.keytab"
    path.write_bytes(realm.alice.read_bytes())
    path.chmod(0)
    with pytest.raises(ConfigError, match="not readable"):
        SaslGssapi(principal="alice", keytab=str(path))


def test_principal_without_realm_and_no_default_realm(realm: Realm, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from kproto.net.kerberos import SaslGssapi

    conf = tmp_path / "krb5.conf"
    conf.write_text("[libdefaults]\n  dns_lookup_realm = false\n")
    monkeypatch.setenv("KRB5_CONFIG", str(conf))
    with pytest.raises(ConfigError, match=f"{conf} names no default_realm: set it, or give "
                                          r"the principal with its realm \(name@REALM\)"):
        SaslGssapi(principal="alice")
