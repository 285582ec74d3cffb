"""A blocking transport for one broker, driving the sans-I/O :class:`Connection`.

:class:`BrokerConnection` opens a TCP connection, asks the broker which API
versions it speaks (ApiVersions at kproto's newest version, downgrading when
the broker answers UNSUPPORTED_VERSION, and to v0 when it answers with a body
that cannot be parsed), and then sends requests at the negotiated versions:
one at a time with :meth:`~BrokerConnection.request`, or pipelined with
:meth:`~BrokerConnection.request_many`.

With SASL, the connection logs in after ApiVersions and, when the broker gives
the session a lifetime (SaslAuthenticate v1+ ``session_lifetime_ms``, KIP-368),
logs in again on the open connection before it ends: the first request sent
after a random point between 85 % and 95 % of the lifetime (Java's choice)
runs SaslHandshake and SaslAuthenticate first. Answers to requests already in
flight that arrive meanwhile are kept and handed out by the next
:meth:`~BrokerConnection.receive`, in order, so nothing in flight is lost or
mixed up (Java's KafkaChannel does the same).

>>> with BrokerConnection("127.0.0.1:9092") as conn:          # doctest: +SKIP
...     meta = conn.request(ApiKey.METADATA, {"topics": None})
"""

from __future__ import annotations

import random
import socket
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Protocol

from .. import __version__, protocol
from ..errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    TlsCertificateError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    raise_for_code,
)
from ..protocol import ApiKey
from .connection import DEFAULT_MAX_RESPONSE_BYTES, Connection, Request, Response
from .node_metrics import NodeSensors

#: Largest response accepted (Kafka's own socket.request.max.bytes default).
MAX_RESPONSE_BYTES = DEFAULT_MAX_RESPONSE_BYTES
_READ_CHUNK = 1 << 20


#: A request's fields, or a function of the version giving them.
Fields = dict[str, Any] | Callable[[int], dict[str, Any]]


class SaslMechanism(Protocol):
    """A SASL client mechanism (see :mod:`kproto.net.security`).

    ``authenticate`` runs the whole exchange: it calls ``exchange(token)`` for
    every client token and gets the server's answer back, raising a
    :class:`~kproto.errors.KprotoError` when the server's answers are wrong.
    It runs again for every re-authentication (KIP-368), so a mechanism with
    credentials that expire (OAUTHBEARER) sends its current ones each time.
    A mechanism that names the broker it logs in to (GSSAPI's service
    principal ``kafka/<host>``) also has ``for_host(host)``, returning the
    mechanism for that broker: the connection calls it with the host it
    connected to.
    """

    name: str

    def authenticate(self, exchange: Callable[[bytes], bytes]) -> None: ...


def parse_address(address: str, default_port: int = 9092) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``, or a bare host) -> (host, port)."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or "]" in port:
        return address.strip().strip("[]"), default_port
    if not port.isdigit():
        raise ValueError(f"invalid port in broker address {address!r}")
    return host.strip("[]"), int(port)


#: :meth:`BrokerConnection.bounded` leaves a wait at least this many times the
#: broker's last handshake, and at least BOUND_MIN seconds.
BOUND_FLOOR = 4
BOUND_MIN = 0.05


class BrokerConnection:
    """A blocking connection to one broker, with ApiVersions negotiation.

    ``versions`` maps API key to the version chosen for this connection;
    ``broker_versions`` is what the broker advertised. Every blocking call
    gives up after ``timeout`` seconds with :class:`~kproto.errors.KafkaTimeoutError`.
    """

    def __init__(self, address: str, *, client_id: str = "kproto",
                 timeout: float = 30.0, max_response_bytes: int = MAX_RESPONSE_BYTES,
                 ssl_context: ssl.SSLContext | None = None, sasl: SaslMechanism | None = None,
                 connect_timeout: float | None = None) -> None:
        self.address = address
        self.host, self.port = parse_address(address)
        self.client_id = client_id
        self.timeout = timeout
        self.connect_timeout = timeout if connect_timeout is None else connect_timeout
        self.max_response_bytes = max_response_bytes
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.versions: dict[int, int] = {}
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_version = -1
        self.finalized_features: dict[str, int] = {}
        self._sock: socket.socket | None = None
        self._conn: Connection | None = None
        #: Requests sent with a ``context`` that a close left unanswered (see take_lost).
        self._lost: list[Request] = []
        #: How many sockets this connection has opened (changes on every reconnect).
        self.opened = 0
        #: Answers read while re-authenticating, for requests sent before: the next
        #: receive() hands them out (they count as in flight until then).
        self._stash: list[Response] = []
        #: ``time.monotonic()`` from which the next request re-authenticates first
        #: (None: the session has no lifetime, or no SASL).
        self.reauthenticate_at: float | None = None
        #: When the broker ends the session (``time.monotonic()``; None: never).
        self.session_ends_at: float | None = None
        #: Re-authentications done on this connection's sockets so far.
        self.reauthentications = 0
        #: this broker's request metrics (kproto.net.node_metrics; None: not recorded)
        self.metrics: NodeSensors | None = None
        #: How long a connect (socket, TLS, ApiVersions, SASL) took, by address: shared
        #: by a client's connections (Cluster.new_connection), for :meth:`bounded`.
        self.handshakes: dict[str, float] = {}

    # -- lifecycle

    def connect(self) -> BrokerConnection:
        """Open the socket and negotiate versions (idempotent)."""
        if self._sock is None:
            began = time.monotonic()
            self._open()
            try:
                self._negotiate()
                if self.sasl is not None:
                    self._authenticate(self.sasl)
            except BaseException:
                self.close()
                raise
            self.handshakes[self.address] = time.monotonic() - began
        return self

    @contextmanager
    def bounded(self, deadline: float | None) -> Iterator[BrokerConnection]:
        """Within this block, connecting and each request end by ``deadline`` (a
        ``time.monotonic()`` value), not after the whole connect and request
        timeouts: a caller with a timeout of its own (a poll) is not held by a
        broker that accepts connections and never answers. None: no bound.

        A connect (or request) cut short starts again from nothing, so the bound
        never cuts below what a handshake is known to need: each wait gets at
        least ``BOUND_FLOOR`` times the last handshake with this address (or with
        the client's slowest other one; at least ``BOUND_MIN`` s) - a silent
        broker holds a poll that much longer - and a client's first connect of all
        keeps the connect timeout (nothing is known yet: a slow TLS + SASL
        handshake would be cut on every short poll, for ever)."""
        shakes = self.handshakes
        known = shakes.get(self.address, max(shakes.values(), default=None))
        if deadline is None or (known is None and self._sock is None):
            yield self
            return
        saved = self.timeout, self.connect_timeout
        left = max(deadline - time.monotonic(), BOUND_FLOOR * (known or 0.0), BOUND_MIN)
        self.timeout, self.connect_timeout = min(self.timeout, left), \
            min(self.connect_timeout, left)
        try:
            yield self
        finally:
            self.timeout, self.connect_timeout = saved

    def close(self) -> None:
        """Close the socket. Requests in flight will never be answered: those sent
        with a ``context`` are kept for :meth:`take_lost`; a reconnect starts with
        nothing in flight. Answers already read (while re-authenticating) are still
        handed out by :meth:`receive`."""
        self.reauthenticate_at = self.session_ends_at = None
        if self._conn is not None:
            self._lost += [r for r in self._conn.close() if r.context is not None]
            self._conn = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def abort(self) -> None:
        """Shut the socket down without closing it; safe from another thread: a call
        blocked on this connection fails at once (the owner still calls close())."""
        sock = self._sock
        if sock is not None:
            try:
                # the plain socket's shutdown, also for TLS (SSLSocket's drops its state)
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> BrokerConnection:
        return self.connect()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- requests

    def request(self, api_key: int, fields: Fields, *, version: int | None = None
                ) -> dict[str, Any]:
        """Send one request and return the decoded response body.

        ``version`` defaults to the negotiated version of ``api_key``.
        """
        [resp] = self.request_many([(api_key, fields)], version=version)
        if resp.error is not None:
            raise resp.error
        body: dict[str, Any] = resp.body
        return body

    def request_raw(self, api_key: int, fields: Fields, *, version: int | None = None
                    ) -> tuple[int, memoryview]:
        """Send one request; return (version, the response body undecoded).

        For responses decoded in bulk elsewhere, e.g. Fetch responses by
        :func:`kproto.records.decode_fetch_response`.
        """
        [resp] = self.request_many([(api_key, fields)], version=version, raw=True)
        return resp.request.version, resp.body

    def request_many(self, requests: Sequence[tuple[int, Fields]], *,
                     version: int | None = None, raw: bool = False) -> list[Response]:
        """Pipeline several requests (all written before any answer is read) and
        return their :class:`~kproto.net.Response` objects in order."""
        self.connect()
        self._maybe_reauthenticate()
        assert self._conn is not None
        if self.in_flight:
            # the answers read next would be theirs, not ours
            raise IllegalStateError(f"{self.in_flight} requests to {self.address} are in "
                                    "flight (sent with send()): a blocking request must wait "
                                    "for them, use another connection")
        sent = [self._conn.send(key, fields, version=version, raw=raw)
                for key, fields in requests]
        self._write(self._conn.data_to_send(), sent)
        return self._read_responses(len(sent))

    def api_versions(self, version: int) -> dict[str, Any]:
        """Send ApiVersions at ``version`` and return the body, as decoded."""
        fields: dict[str, Any] = {}
        if version >= 3:
            fields = {"client_software_name": "kproto", "client_software_version": __version__}
        return self.request(ApiKey.API_VERSIONS, fields, version=version)

    # -- internals

    @property
    def connected(self) -> bool:
        """True while the socket is open (it closes on any I/O or framing error)."""
        return self._sock is not None

    def fileno(self) -> int:
        """The socket's file descriptor (for selectors)."""
        if self._sock is None:
            raise KafkaConnectionError(f"connection to {self.address} is closed")
        return self._sock.fileno()

    def _open(self) -> None:
        try:
            sock = socket.create_connection((self.host, self.port), self.connect_timeout)
        except TimeoutError as exc:
            raise KafkaTimeoutError(f"connecting to {self.address} timed out after "
                                    f"{self.connect_timeout} s") from exc
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {self.address}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is not None:
            try:
                sock = self.ssl_context.wrap_socket(sock, server_hostname=self.host)
            except ssl.SSLCertVerificationError as exc:
                sock.close()
                raise TlsCertificateError(
                    f"TLS handshake with {self.address} failed: {exc} (check ssl.ca.location "
                    "and that the broker's certificate names this host)") from exc
            except (ssl.SSLError, ssl.CertificateError) as exc:
                sock.close()
                raise KafkaConnectionError(f"TLS handshake with {self.address} failed: "
                                           f"{exc}") from exc
            except OSError as exc:
                sock.close()
                raise KafkaConnectionError(f"TLS handshake with {self.address} failed: "
                                           f"{exc}") from exc
        self._sock = sock
        self.opened += 1
        self._conn = Connection(client_id=self.client_id,
                                max_response_bytes=self.max_response_bytes)

    def _negotiate(self) -> None:
        version = protocol.API_VERSIONS[ApiKey.API_VERSIONS][1]
        while True:
            try:
                body = self.api_versions(version)
            except ProtocolError:
                # Some brokers (librdkafka's mock cluster) answer a newer ApiVersions
                # than they speak with a body we cannot parse: fall back to v0.
                if version == 0:
                    raise
                self.close()
                self._open()
                version = 0
                continue
            retry = protocol.api_versions_retry(body, version)
            if retry is None:
                break
            version = retry
        if body["error_code"] != 0:
            raise UnsupportedVersionError(
                f"{self.address} refused ApiVersions (error {body['error_code']})")
        self.api_versions_version = version
        self.broker_versions = protocol.broker_ranges(body)
        self.versions = protocol.negotiate(body)
        #: Feature levels the cluster finalized (KIP-584; ApiVersions v3+), e.g.
        #: ``{"transaction.version": 2}``: empty from older brokers.
        self.finalized_features = {f["name"]: f["max_version_level"]
                                   for f in body.get("finalized_features") or ()}
        assert self._conn is not None
        self._conn.versions = self.versions
        self._conn.broker_ranges = self.broker_versions

    def _authenticate(self, sasl: SaslMechanism) -> None:
        """Log in (again): SaslHandshake v1, then the mechanism's SaslAuthenticate
        round trips; schedule the re-authentication if the session has a lifetime."""
        hs = self._call(ApiKey.SASL_HANDSHAKE, {"mechanism": sasl.name},
                        min(1, self.versions.get(ApiKey.SASL_HANDSHAKE, 1)))
        if hs["error_code"]:
            enabled = ", ".join(hs["mechanisms"] or []) or "none"
            raise UnsupportedSaslMechanismError(
                f"{self.address} does not enable SASL mechanism {sasl.name} "
                f"(it enables: {enabled})")
        lifetime = [0, 0.0]      # the last session_lifetime_ms, and when its request went

        def exchange(token: bytes) -> bytes:
            sent = time.monotonic()
            body = self._call(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
            raise_for_code(body["error_code"],
                           f"SASL {sasl.name} authentication with {self.address} failed: "
                           f"{body['error_message'] or 'no reason given'}")
            lifetime[:] = [int(body.get("session_lifetime_ms") or 0), sent]
            out: bytes = body["auth_bytes"]
            return out

        bind = getattr(sasl, "for_host", None)      # GSSAPI: the service is service/host
        (sasl if bind is None else bind(self.host)).authenticate(exchange)
        ms, sent = lifetime
        if ms > 0:     # KIP-368: log in again at 85-95 % of it, as Java does
            self.session_ends_at = sent + ms / 1000
            self.reauthenticate_at = sent + ms / 1000 * random.uniform(0.85, 0.95)
        else:
            self.reauthenticate_at = self.session_ends_at = None

    def _maybe_reauthenticate(self) -> None:
        """Re-authenticate (KIP-368) if the session's re-authentication time passed,
        before the next request goes out; a failure closes the connection."""
        if self.reauthenticate_at is None or time.monotonic() < self.reauthenticate_at \
                or self.sasl is None:
            return
        try:
            self._authenticate(self.sasl)
        except BaseException:
            self.close()
            raise
        self.reauthentications += 1

    def _call(self, api_key: int, fields: Fields, version: int | None = None
              ) -> dict[str, Any]:
        """One request and its answer, also with other requests in flight: their
        answers, read first, are kept for :meth:`receive` (re-authentication)."""
        assert self._conn is not None
        req = self._conn.send(api_key, fields, version=version)
        self._write(self._conn.data_to_send(), (req,))
        deadline = time.monotonic() + self.timeout
        while True:
            for resp in self._read(deadline):
                if resp.request is not req:
                    self._stash.append(resp)
                    continue
                if resp.error is not None:
                    raise resp.error
                body: dict[str, Any] = resp.body
                return body

    def _write(self, data: bytes, requests: Sequence[Request] = ()) -> None:
        assert self._sock is not None
        self._wait_throttle()
        m = self.metrics
        if m is not None:
            now = time.monotonic()
            for r in requests:
                r.sent_at = now
            m.sent(len(requests), len(data), now)
        try:
            self._sock.sendall(data)
        except TimeoutError as exc:
            self.close()
            raise KafkaTimeoutError(f"writing to {self.address} timed out") from exc
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(f"connection to {self.address} failed: {exc}") from exc

    def _wait_throttle(self) -> None:
        assert self._conn is not None
        wait = self._conn.throttled_until - time.monotonic()
        if wait > 0:
            time.sleep(min(wait, self.timeout))

    def _read_responses(self, count: int) -> list[Response]:
        out: list[Response] = []
        deadline = time.monotonic() + self.timeout
        while len(out) < count:
            out += self.receive(deadline)
        return out

    # -- non-blocking use (several connections driven by one selector)

    def send(self, api_key: int, fields: Fields, *, version: int | None = None,
             raw: bool = False, expect_response: bool = True, context: Any = None) -> Request:
        """Write one request now and return it; its answer comes from :meth:`receive`.

        Lets one thread keep requests in flight on many connections (see
        :func:`kproto.net.cluster.Cluster.send_many`) or send the next Fetch
        before the caller has finished with the last one.
        """
        self.connect()
        self._maybe_reauthenticate()
        assert self._conn is not None
        req = self._conn.send(api_key, fields, version=version, raw=raw,
                              expect_response=expect_response, context=context)
        try:
            self._write(self._conn.data_to_send(), (req,))
        except (KafkaConnectionError, KafkaTimeoutError):
            # the caller gets this error for this request: it is not one of the lost
            self._lost = [r for r in self._lost if r is not req]
            raise
        return req

    @property
    def in_flight(self) -> int:
        """Requests written whose answers :meth:`receive` has not handed out yet."""
        return len(self._stash) + (0 if self._conn is None else self._conn.in_flight)

    @property
    def buffered(self) -> int:
        """Answers already read (while re-authenticating) that :meth:`receive` hands
        out without waiting: a driver treats the connection as ready."""
        return len(self._stash)

    def requests_in_flight(self) -> list[Request]:
        """The requests written whose answers were not handed out yet, oldest first."""
        return [r.request for r in self._stash] + \
            ([] if self._conn is None else self._conn.requests_in_flight())

    def take_lost(self) -> list[Request]:
        """The requests sent with a ``context`` (see :meth:`send`) that were in flight
        when the connection closed, for whatever reason: they will never be
        answered. Returned once, oldest first. Whoever keeps requests in flight
        with a context collects them, so that none is waited for forever or
        matched against an answer on the reopened connection."""
        lost, self._lost = self._lost, []
        return lost

    def receive(self, deadline: float) -> list[Response]:
        """Read once (waiting until ``deadline``, a ``time.monotonic()`` value) and
        return the responses completed, possibly none. Answers read while
        re-authenticating come first, without a read (even after a close)."""
        if self._stash:
            kept, self._stash = self._stash, []
            return kept
        return self._read(deadline)

    def _read(self, deadline: float) -> list[Response]:
        if self._sock is None or self._conn is None:
            raise KafkaConnectionError(f"connection to {self.address} is closed")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            self.close()
            raise KafkaTimeoutError(f"{self.address} did not answer within {self.timeout} s")
        self._sock.settimeout(remaining)
        chunks = []
        try:
            chunks.append(self._sock.recv(_READ_CHUNK))
            pending = getattr(self._sock, "pending", None)
            while chunks[-1] and pending is not None and pending():
                chunks.append(self._sock.recv(_READ_CHUNK))   # TLS records already read
        except TimeoutError as exc:
            self.close()
            raise KafkaTimeoutError(f"{self.address} did not answer within "
                                    f"{self.timeout} s") from exc
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(f"connection to {self.address} failed: {exc}") from exc
        if not chunks[0]:
            self.close()
            raise KafkaConnectionError(f"{self.address} closed the connection")
        data = b"".join(chunks)
        now = time.monotonic()
        try:
            out = self._conn.receive_data(data, now)
        except ProtocolError:
            self.close()
            raise
        m = self.metrics
        if m is not None:
            m.received([now - r.request.sent_at for r in out if r.request.sent_at], len(data),
                       now)
        return out
