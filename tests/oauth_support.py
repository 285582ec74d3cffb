"""Real parts for the OAUTHBEARER and re-authentication tests (tests/test_oauth.py,
tests/test_reauth.py).

- :class:`OidcServer`: a small OAuth 2 / OIDC token endpoint over HTTPS on
  loopback (``trustme`` certificate): ``POST /token`` answers the
  ``client_credentials`` grant (client id and secret in a Basic header, RFC 6749
  section 2.3.1) with an RS256 JWT signed by PyJWT with a key it publishes at
  ``/jwks`` (and ``/.well-known/openid-configuration``). Knobs: the token's
  lifetime, audience, missing claims.
- :class:`JwtValidator`: what a broker's OAUTHBEARER validator does (Java's
  ``OAuthBearerValidatorCallbackHandler``): the signature against the JWKS fetched
  over HTTPS from that server, ``exp``, ``iss``, ``aud``, ``sub``.
- :class:`ReauthGateway`: an IN-TEST SASL FRONT, NOT A BROKER, in front of a real
  Tansu (which takes SaslHandshake OAUTHBEARER but refuses every token: its 0.6.0
  validation callback knows PLAIN and SCRAM only). It logs clients in with PLAIN,
  SCRAM (``ToyScramServer``) or OAUTHBEARER (the JwtValidator), answering as a Java
  broker does (RFC 7628 error JSON, then error 58), gives the session a lifetime
  (``session_lifetime_ms``: ``max_reauth_ms`` as Kafka's
  ``connections.max.reauth.ms``, for OAUTHBEARER no longer than the token lives)
  and enforces it as Kafka's SocketServer does: a request other than SaslHandshake
  arriving after the session ended closes the connection. Re-authentication
  (KIP-368) is answered after every earlier request's answer went out (a broker
  handles one request of a connection at a time). Requests are forwarded frame by
  frame, so the gateway sees each one.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import re
import socket
import ssl
import struct
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from kproto import protocol
from kproto.protocol import ApiKey

from .test_security import ToyScramServer, _Server

ISSUER_PATH = "/realms/kproto"


class OidcServer:
    """A token endpoint on https://127.0.0.1:<port>/token (see the module docstring).

    ``clients``: client id -> secret. Each token: ``sub`` = the client id, ``aud``
    = :attr:`audience`, ``scope`` = the scope asked for (or ``"kafka"``), ``exp`` =
    now + :attr:`lifetime` seconds. :attr:`omit` names claims to leave out.
    """

    def __init__(self, ca: Any, clients: dict[str, str], *,  # noqa: ANN401
                 audience: str = "kafka-broker", lifetime: float = 300.0) -> None:
        self.clients = dict(clients)
        self.audience = audience
        self.lifetime = lifetime
        self.omit: set[str] = set()
        #: the server's clock (a test moves it with the client's)
        self.clock: Callable[[], float] = time.time
        self.requests: list[dict[str, Any]] = []
        self.kid = uuid.uuid4().hex[:12]
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # noqa: ANN401
                pass

            def do_GET(self) -> None:
                if self.path == "/jwks":
                    self._json(200, owner.jwks())
                elif self.path == ISSUER_PATH + "/.well-known/openid-configuration":
                    self._json(200, {"issuer": owner.issuer, "jwks_uri": owner.url + "/jwks",
                                     "token_endpoint": owner.token_url})
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(size).decode())
                status, body = owner.answer(self.path, dict(self.headers), form)
                self._json(status, body)

            def _json(self, status: int, body: Any) -> None:  # noqa: ANN401
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.socket = ctx.wrap_socket(self._httpd.socket, server_side=True)
        self.port = self._httpd.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.issuer = self.url + ISSUER_PATH
        self.token_url = self.url + "/token"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        name="OidcServer")
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def jwks(self) -> dict[str, Any]:
        key = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self._key.public_key()))
        return {"keys": [{**key, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def issue(self, sub: str, scope: str, **override: Any) -> str:  # noqa: ANN401
        """A signed token for ``sub`` (``override``: claims to change)."""
        now = int(self.clock())
        claims = {"iss": self.issuer, "sub": sub, "aud": self.audience, "scope": scope,
                  "iat": now, "exp": now + self.lifetime, "jti": uuid.uuid4().hex}
        claims.update(override)
        for name in self.omit:
            claims.pop(name, None)
        return jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": self.kid})

    def answer(self, path: str, headers: dict[str, str], form: dict[str, list[str]]
               ) -> tuple[int, dict[str, Any]]:
        """RFC 6749 section 4.4: the client credentials grant."""
        auth = headers.get("Authorization", "")
        self.requests.append({"path": path, "form": form, "authorization": auth})
        if path != "/token":
            return 404, {"error": "not_found"}
        if form.get("grant_type") != ["client_credentials"]:
            return 400, {"error": "unsupported_grant_type"}
        client, secret = "", ""
        if auth.startswith("Basic "):
            client, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        if not client or self.clients.get(client) != secret:
            return 401, {"error": "invalid_client",
                         "error_description": "Invalid client or Invalid client credentials"}
        scope = (form.get("scope") or ["kafka"])[0]
        token = self.issue(client, scope)
        return 200, {"access_token": token, "token_type": "Bearer",
                     "expires_in": int(self.lifetime), "scope": scope}


class JwtValidator:
    """A broker's token check: RS256 against the JWKS of ``server`` (fetched once over
    HTTPS, trusting ``cafile``), issuer, audience, ``exp`` and ``sub`` required."""

    def __init__(self, jwks_url: str, cafile: str, *, issuer: str, audience: str) -> None:
        self.jwks_url, self.issuer, self.audience = jwks_url, issuer, audience
        self._ctx = ssl.create_default_context(cafile=cafile)
        self._keys: jwt.PyJWKSet | None = None

    def __call__(self, token: str) -> dict[str, Any]:
        if self._keys is None:
            with urllib.request.urlopen(self.jwks_url, context=self._ctx, timeout=10) as f:
                self._keys = jwt.PyJWKSet.from_dict(json.load(f))
        kid = jwt.get_unverified_header(token).get("kid")
        key = next(k for k in self._keys.keys if k.key_id == kid)
        claims: dict[str, Any] = jwt.decode(token, key, algorithms=["RS256"],
                                            audience=self.audience, issuer=self.issuer,
                                            options={"require": ["exp", "sub", "iat"]})
        return claims


# --------------------------------------------------------------------------- the gateway

# RFC 7628 section 3.1, as Java's OAuthBearerClientInitialResponse parses it
_INITIAL = re.compile(r"n,(a=[^,]*)?,\x01((?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*)\x01")
_AUTH = re.compile(r"Bearer +([-_.a-zA-Z0-9]+)", re.IGNORECASE)


@dataclass
class Session:
    """One connection's login: its mechanism, principal and end (monotonic; None: none)."""

    mechanism: str = ""
    principal: str = ""
    ends_at: float | None = None
    logins: int = 0
    extensions: list[dict[str, str]] = field(default_factory=list)


class ReauthGateway(_Server):
    """IN-TEST SASL FRONT, NOT A BROKER (see the module docstring).

    ``users``: PLAIN and SCRAM users, name -> (password, "plain"|"sha256"|"sha512").
    ``validator``: checks OAUTHBEARER tokens (a JwtValidator), raising on a bad one.
    ``max_reauth_ms``: the session lifetime given (0: none, re-authentication off).
    ``grace``: seconds past the end a request is still let through (scheduling on a
    loaded test machine; the clients aim at 85-95 % of the lifetime).
    ``mechanisms``: more server mechanisms, name -> a factory of one login's
    stepper (token -> ("continue", answer) | ("done", (principal, 0, answer)) |
    ("error", message)), e.g. GSSAPI in tests/test_kerberos.py.
    """

    def __init__(self, upstream: tuple[str, int], *, users: dict[str, tuple[str, str]] | None
                 = None, validator: Any = None, max_reauth_ms: int = 0,  # noqa: ANN401
                 grace: float = 0.5,
                 mechanisms: dict[str, Callable[[], Callable[[bytes], tuple[str, Any]]]]
                 | None = None) -> None:
        self.users = users or {}
        self.mechanisms = mechanisms or {}
        self.validator = validator
        self.max_reauth_ms = max_reauth_ms
        self.grace = grace
        self.sessions: list[Session] = []
        #: connections closed because a request came after the session ended
        self.expired_kills = 0
        #: re-authentications that succeeded, and those refused
        self.reauths = 0
        self.refused: list[str] = []
        #: requests answered after a re-authentication began, while they were in flight
        self.drained_during_reauth = 0
        super().__init__(upstream)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- one connection

    def serve(self, raw: socket.socket) -> None:
        raw.settimeout(0.2)
        up = socket.create_connection(self.upstream, timeout=10)
        up.settimeout(0.2)
        self.track(up)
        session = Session()
        self.sessions.append(session)
        lock = threading.Lock()                 # both threads write to raw
        pending = threading.Condition()
        state = {"outstanding": 0, "closed": False}
        try:
            frame = self._frame(raw)
            if frame is None or not self._sasl(raw, up, frame, session, lock, reauth=False):
                return

            def relay() -> None:
                try:
                    while (answer := self._frame(up)) is not None:
                        with lock:
                            raw.sendall(struct.pack(">i", len(answer)) + answer)
                        with pending:
                            state["outstanding"] -= 1
                            pending.notify_all()
                except OSError:
                    pass
                finally:
                    with pending:
                        state["closed"] = True
                        pending.notify_all()
                    _shut(raw)

            reader = threading.Thread(target=relay, daemon=True, name="ReauthGateway-relay")
            self._threads_add(reader)
            reader.start()
            while (frame := self._frame(raw)) is not None:
                key, _version, _cid, body = _header(frame)
                if key == ApiKey.SASL_HANDSHAKE:
                    with pending:
                        waiting = state["outstanding"]
                        pending.wait_for(lambda: state["outstanding"] <= 0 or state["closed"],
                                         timeout=30)
                    self.drained_during_reauth += waiting
                    if not self._sasl(raw, up, frame, session, lock, reauth=True):
                        return
                    continue
                if session.ends_at is not None and time.monotonic() > session.ends_at + \
                        self.grace:
                    self.expired_kills += 1         # Kafka: "Disconnecting expired channel"
                    return
                expects = not (key == ApiKey.PRODUCE and body.get("acks") == 0)
                with pending:
                    state["outstanding"] += int(expects)
                up.sendall(struct.pack(">i", len(frame)) + frame)
        finally:
            _shut(up)
            _shut(raw)

    def _threads_add(self, t: threading.Thread) -> None:
        with self._lock:
            self._threads.append(t)

    def _frame(self, sock: socket.socket) -> bytes | None:
        """One size-prefixed frame, or None when the peer closed or the gateway stops."""
        size = self._exact(sock, 4)
        if size is None:
            return None
        return self._exact(sock, struct.unpack(">i", size)[0])

    def _exact(self, sock: socket.socket, n: int) -> bytes | None:
        out = bytearray()
        while len(out) < n:
            if self.stopping.is_set():
                return None
            try:
                chunk = sock.recv(n - len(out))
            except TimeoutError:
                continue
            except OSError:
                return None
            if not chunk:
                return None
            out += chunk
        return bytes(out)

    # -- SASL

    def _sasl(self, raw: socket.socket, up: socket.socket, frame: bytes, session: Session,
              lock: threading.Lock, *, reauth: bool) -> bool:
        """Run a login from ``frame`` on (ApiVersions forwarded before the first)."""
        mechanism, scram, failed = "", None, ""
        stepper: Callable[[bytes], tuple[str, Any]] | None = None
        while True:
            key, version, cid, body = _header(frame)
            if key == ApiKey.API_VERSIONS and not reauth:
                up.sendall(struct.pack(">i", len(frame)) + frame)
                answer = self._frame(up)
                if answer is None:
                    return False
                with lock:
                    raw.sendall(struct.pack(">i", len(answer)) + answer)
            elif key == ApiKey.SASL_HANDSHAKE:
                mechanism = body["mechanism"]
                offered = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER",
                           *self.mechanisms]
                ok = mechanism in offered and (not reauth or mechanism == session.mechanism)
                self._send(raw, lock, key, version, cid,
                           {"error_code": 0 if ok else 33, "mechanisms": offered})
                if not ok:
                    return False
            elif key == ApiKey.SASL_AUTHENTICATE:
                token: bytes = body["auth_bytes"]
                if failed:                      # RFC 7628: the client's %x01 after our error
                    self._fail(raw, lock, key, version, cid, failed)
                    return False
                if mechanism in self.mechanisms:
                    stepper = stepper or self.mechanisms[mechanism]()
                    outcome = stepper(token)
                elif mechanism == "OAUTHBEARER":
                    outcome = self._oauthbearer(token, session)
                elif mechanism == "PLAIN":
                    outcome = self._plain(token)
                else:
                    if scram is None:
                        name = token.decode().split(",")[2][2:]
                        password, kind = self.users.get(name, ("", ""))
                        want = "sha256" if mechanism.endswith("256") else "sha512"
                        scram = ToyScramServer(name if kind == want else "\x00unknown",
                                               password, want)
                        answer = scram(token)
                        outcome = ("error", "invalid credentials") if answer.startswith(b"e=") \
                            else ("continue", answer)
                    else:
                        answer = scram(token)
                        outcome = ("error", "invalid credentials") if answer.startswith(b"e=") \
                            else ("done", (name, 0, answer))
                kind, detail = outcome
                if kind == "challenge":           # the OAUTHBEARER error JSON
                    failed = detail[1]
                    self._send(raw, lock, key, version, cid, {
                        "error_code": 0, "error_message": None, "auth_bytes": detail[0],
                        "session_lifetime_ms": 0})
                elif kind == "error":
                    self._fail(raw, lock, key, version, cid, str(detail))
                    return False
                elif kind == "continue":
                    self._send(raw, lock, key, version, cid, {
                        "error_code": 0, "error_message": None, "auth_bytes": detail,
                        "session_lifetime_ms": 0})
                else:
                    principal, token_ends_ms, answer = detail
                    if reauth and principal != session.principal:
                        self._fail(raw, lock, key, version, cid,
                                   "Cannot change principals during re-authentication")
                        return False
                    lifetime = self.max_reauth_ms
                    if lifetime and token_ends_ms:
                        lifetime = min(lifetime, max(0, token_ends_ms - int(time.time() * 1000)))
                    session.mechanism, session.principal = mechanism, principal
                    session.ends_at = time.monotonic() + lifetime / 1000 if lifetime else None
                    session.logins += 1
                    self.reauths += int(reauth)
                    self._send(raw, lock, key, version, cid, {
                        "error_code": 0, "error_message": None, "auth_bytes": answer,
                        "session_lifetime_ms": lifetime})
                    return True
            else:
                return False                    # anything else before login: hang up
            frame = self._frame(raw)
            if frame is None:
                return False

    def _plain(self, token: bytes) -> tuple[str, Any]:
        _authz, user, password = token.decode().split("\x00")
        if self.users.get(user, ("", ""))[0] != password or not password:
            return "error", "Authentication failed: Invalid username or password"
        return "done", (user, 0, b"")

    def _oauthbearer(self, token: bytes, session: Session) -> tuple[str, Any]:
        match = _INITIAL.fullmatch(token.decode("utf-8", "replace"))
        if match is None:
            return "error", "Invalid OAUTHBEARER client first message"
        pairs = dict(p.split("=", 1) for p in match.group(2).split("\x01") if p)
        auth = _AUTH.fullmatch(pairs.pop("auth", ""))
        if auth is None or self.validator is None:
            return "error", "Invalid OAUTHBEARER client first message: no bearer token"
        try:
            claims = self.validator(auth.group(1))
        except Exception as exc:  # noqa: BLE001 - every refusal is the RFC 7628 error JSON
            reason = f"{type(exc).__name__}: {exc}"
            self.refused.append(reason)
            error = json.dumps({"status": "invalid_token", "scope": "kafka",
                                "openid-configuration": "https://idp.invalid/.well-known"})
            return "challenge", (error.encode(), f"Authentication failed: {error}")
        session.extensions.append(pairs)
        return "done", (claims["sub"], int(claims["exp"]) * 1000, b"")

    @staticmethod
    def _send(raw: socket.socket, lock: threading.Lock, key: int, version: int, cid: int,
              body: dict[str, Any]) -> None:
        with lock:
            raw.sendall(protocol.encode_response(key, version, cid, body))

    def _fail(self, raw: socket.socket, lock: threading.Lock, key: int, version: int,
              cid: int, message: str) -> None:
        self.refused.append(message)
        self._send(raw, lock, key, version, cid, {
            "error_code": 58, "error_message": message, "auth_bytes": b"",
            "session_lifetime_ms": 0})


def _header(frame: bytes) -> tuple[int, int, int, dict[str, Any]]:
    header, body = protocol.decode_request(frame, strict=False)
    return header["request_api_key"], header["request_api_version"], \
        header["correlation_id"], body


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


@contextlib.contextmanager
def in_front_of_tansu(gw: ReauthGateway) -> Iterator[ReauthGateway]:
    """A real Tansu advertising ``gw``'s port (so every client connection, also to
    the brokers the metadata names, goes through the gateway); both stopped at the
    end. Fails the test if Tansu cannot start."""
    import pytest

    from kproto.testing import TansuBroker

    broker = TansuBroker(advertised_port=gw.port)
    try:
        broker.start()
    except RuntimeError as exc:
        gw.stop()
        pytest.fail(f"could not start the Tansu broker: {exc}", pytrace=False)
    gw.upstream = (broker.host, broker.port)
    try:
        yield gw
    finally:
        gw.stop()
        broker.stop()
