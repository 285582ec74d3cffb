"""The Schema Registry client's HTTP layer: urllib3, a deadline per attempt, safe
redirects, and secrets that never print.

Why urllib3 (2.x): it is pure Python with no dependencies of its own, on nearly
every Spark image already (requests and botocore need it), and its PoolManager
keeps connections alive per origin, which executors asking the registry often
benefit from. urllib (what the client used before) copies ``Authorization`` to
any host a redirect names and pools nothing; httpx brings httpcore, h11, anyio,
certifi and idna, and bounds a request no better than urllib3 does.

What urllib3 does not give, this module adds:

- A deadline per attempt. Socket timeouts (urllib3's, httpx's and urllib's alike)
  bound each read, so an answer dripping a byte at a time never ends. Here the
  TCP connect and the TLS handshake get the time left as their timeouts, and each
  socket the attempt connects or reuses is registered with its :class:`Deadline`,
  whose timer shuts the socket down when the deadline passes: the read blocked on
  it (a proxy's CONNECT answer, the status line, headers or body, over http or
  https) ends at once. One shutdown works whatever urllib3 and ``http.client``
  read internally, where resetting the timeout before every read would mean
  hooking their buffered and TLS reads. Name resolution is the system resolver's,
  and a name with several addresses gets the time left for each address tried.
- Redirects followed here (urllib3's ``redirect=False``), at most
  :data:`MAX_REDIRECTS`, within the attempt's deadline: the ``Authorization``
  header is dropped for good at the first hop to another origin (scheme, host,
  port: urllib3's ``is_same_host`` compares the same, this is that rule applied
  to the whole chain), and a redirect from https to http is refused (the answer
  would travel unprotected). 303 turns the request into a GET; 301, 302, 307 and
  308 keep the method and body, as urllib3 does.
- The proxies of the environment (``http_proxy``, ``https_proxy``, ``no_proxy``),
  as urllib used them; credentials in a proxy URL go as ``Proxy-Authorization``.
- Answers of at most :data:`MAX_ANSWER_BYTES` (the client's ``max_answer_bytes``):
  a Content-Length over it is refused before the body is read, and the body is
  read in pieces (decompressed, if the server compressed it) and refused as soon as
  it passes the cap, so no answer, with a length, chunked or running to the end of
  the connection, holds more memory than that.
- No secret in an error or a log line: URLs are shown by :func:`redact`, the
  credentials are :class:`Secret` (pickled with the client, printed as ``***``),
  and whatever an error quotes of an answer is scrubbed of them: each string of a
  JSON answer before it is serialised again, and the text in every spelling a
  server might echo them in (raw, JSON- or repr-escaped, URL-quoted, the base64
  token).
"""

from __future__ import annotations

import base64
import html
import http.client
import json
import logging
import os
import re
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import HTTPError, NewConnectionError
from urllib3.exceptions import SSLError as TLSError
from urllib3.exceptions import TimeoutError as SocketTimeoutError

from .errors import ConfigError, KprotoError, SchemaRegistryError

log = logging.getLogger("kproto.schema_registry")

#: Redirects followed in one attempt (urllib follows 10, requests 30, httpx 20).
MAX_REDIRECTS = 5
#: The largest answer read (bytes, decompressed): the client's default ``max_answer_bytes``.
#: (A schema is rarely over a few hundred kB.)
MAX_ANSWER_BYTES = 16 << 20
_PIECE = 1 << 16
_REDIRECTS = (301, 302, 303, 307, 308)
_ACCEPT = ("application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, "
           "application/json")
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: urllib3 retries nothing (the client retries, and follows redirects, itself)
_NO_RETRIES = urllib3.Retry(total=False)


class Secret:
    """A secret (a password): pickles with its holder, as executors need it, but its
    repr and str are ``***``."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "***"

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, ...]:
        return (Secret, (self.value,))


def redact(text: str) -> str:
    """``text`` (a URL, or several separated by commas) without user info: from after
    the scheme (or the start) to the last ``@``, whatever it holds, becomes ``***``
    (a password may hold ``/``, ``#`` or ``,``, which end the user info for a parser)."""
    at = text.rfind("@")
    if at < 0:
        return text
    scheme = _SCHEME.match(text)
    return text[:scheme.end() if scheme else 0] + "***" + text[at:]


def _origin(parts: urllib.parse.SplitResult) -> tuple[str, str, int | None]:
    return (parts.scheme, (parts.hostname or "").lower(),
            parts.port or _DEFAULT_PORTS.get(parts.scheme))


# ---------------------------------------------------------------------- deadlines

_current = threading.local()


class Deadline:
    """One attempt's deadline: the sockets the attempt connects or reuses are shut
    down by a timer when it passes, which ends any read blocked on them."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        #: True once the timer shut the attempt's sockets down.
        self.passed = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._over = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def left(self) -> float:
        """The seconds left, as a socket timeout (never 0: that would not block)."""
        return max(self.at - time.monotonic(), 0.001)

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            if self.passed:
                _shut(sock)
            elif not self._over:
                self._sockets.append(sock)

    def _expire(self) -> None:
        with self._lock:
            if not self._over:
                self.passed = True
                for sock in self._sockets:
                    _shut(sock)

    def __enter__(self) -> Deadline:
        _current.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        with self._lock:
            self._over = True
            self._sockets.clear()
        _current.deadline = None


def _shut(sock: socket.socket) -> None:
    try:        # the plain socket's shutdown, under TLS too (SSLSocket's drops its state)
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass    # closed already


class _Bounded:
    """A urllib3 connection within the current attempt's :class:`Deadline`."""

    sock: Any
    timeout: Any

    def _new_conn(self) -> socket.socket:
        deadline: Deadline | None = getattr(_current, "deadline", None)
        if deadline is not None:
            self.timeout = deadline.left()              # the TCP connect
        sock: socket.socket = super()._new_conn()       # type: ignore[misc]
        if deadline is not None:
            deadline.watch(sock)                        # a proxy's CONNECT exchange
            sock.settimeout(deadline.left())            # the TLS handshake
        return sock

    def connect(self) -> None:
        super().connect()                               # type: ignore[misc]
        deadline: Deadline | None = getattr(_current, "deadline", None)
        if deadline is not None:
            deadline.watch(self.sock)

    def request(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401
        deadline: Deadline | None = getattr(_current, "deadline", None)
        if deadline is not None and self.sock is not None:
            deadline.watch(self.sock)                   # a kept-alive connection
        super().request(*args, **kwargs)                # type: ignore[misc]


class _HTTPConnection(_Bounded, HTTPConnection):
    pass


class _HTTPSConnection(_Bounded, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection

    def _validate_conn(self, conn: Any) -> None:  # noqa: ANN401
        # urllib3's, without its InsecureRequestWarning on every request: an
        # unverified connection here is ssl_verify=False, set explicitly
        if conn.is_closed:
            conn.connect()


# ---------------------------------------------------------------------- requests

Auth = tuple[str, Secret]
"""Basic-auth credentials: a user and a password."""


class Transport:
    """HTTP for one client: its TLS settings, every credential it holds (each request
    names the one it sends; an error is scrubbed of all), and a urllib3 PoolManager
    made on first use (again after unpickling, or in a forked child).

    Errors are made by :meth:`_error` and name the server as :attr:`peer`: a
    subclass for another kind of server (the OAUTHBEARER token endpoint,
    kproto.net.oauth) changes those two and how an answer is read (``_answer``)."""

    #: What the server is called in errors.
    peer = "registry"

    def __init__(self, credentials: Sequence[Auth],
                 tls: tuple[str | None, str | None, str | None, Secret | None, bool]) -> None:
        self._credentials = tuple(credentials)
        self._tls = tls
        self._managers: dict[str | None, urllib3.PoolManager] = {}   # proxy -> manager
        self._context: ssl.SSLContext | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"credentials": self._credentials, "tls": self._tls}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["credentials"], state["tls"])   # type: ignore[misc]

    def __repr__(self) -> str:
        return f"Transport(users={[u for u, _ in self._credentials]!r})"

    def _pool(self, url: str) -> urllib3.PoolManager:
        """The manager for ``url``: direct, or through the proxy the environment names
        for it (``https_proxy``, ``http_proxy``, ``no_proxy``: as urllib did)."""
        parts = urllib.parse.urlsplit(url)
        proxy = urllib.request.getproxies().get(parts.scheme)
        if proxy and urllib.request.proxy_bypass(parts.netloc):
            proxy = None
        with self._lock:
            if self._pid != os.getpid():                # new, unpickled, or a forked child
                self._managers, self._context, self._pid = {}, None, os.getpid()
            if self._context is None:
                self._context = self._ssl_context()
            manager = self._managers.get(proxy)
            if manager is None:
                kw: dict[str, Any] = {"num_pools": 8, "maxsize": 4, "ssl_context": self._context}
                try:
                    if proxy is None:
                        manager = urllib3.PoolManager(**kw)
                    else:
                        auth = urllib3.util.parse_url(proxy).auth
                        manager = urllib3.ProxyManager(proxy, proxy_headers=None if auth is None
                                                       else urllib3.make_headers(
                                                           proxy_basic_auth=auth), **kw)
                except (ValueError, HTTPError) as exc:
                    raise ConfigError(f"the {parts.scheme} proxy of the environment, "
                                      f"{redact(proxy or '')!r}: {redact(str(exc))}") from None
                manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
                self._managers[proxy] = manager
            return manager

    def _ssl_context(self) -> ssl.SSLContext:
        ca, cert, key, password, verify = self._tls
        try:
            if ca and os.path.isdir(ca):
                context = ssl.create_default_context(capath=ca)
            else:
                context = ssl.create_default_context(cafile=ca)
            if not verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if cert:
                context.load_cert_chain(cert, key, None if password is None else password.value)
        except (OSError, ValueError) as exc:    # ssl.SSLError is an OSError
            raise ConfigError(f"schema registry TLS settings (ssl_ca_location={ca!r}, "
                              f"ssl_certificate_location={cert!r}, ssl_key_location={key!r}): "
                              f"{type(exc).__name__}: {exc}") from None
        return context

    def scrub(self, text: str) -> str:
        """``text`` (something the registry answered) without our credentials, in
        any spelling of them (see :func:`_spellings`)."""
        for secret in _spellings(self._credentials):
            text = text.replace(secret, "***")
        return text

    def scrub_json(self, value: Any) -> Any:  # noqa: ANN401 - a JSON value
        """A JSON value (an answer) with every string in it, keys too, scrubbed: before it
        is serialised, which would escape a password holding ``"``, ``\\`` or non-ASCII."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list):
            return [self.scrub_json(v) for v in value]
        if isinstance(value, dict):
            return {self.scrub(str(k)): self.scrub_json(v) for k, v in value.items()}
        return value

    def show(self, value: Any, size: int = 200) -> str:  # noqa: ANN401 - a JSON value
        """A JSON value (part of an answer) as an error quotes it: scrubbed, then cut."""
        if isinstance(value, (bytes, str)):
            return self.excerpt(value, size)
        text = json.dumps(self.scrub_json(value), ensure_ascii=False, default=str)
        return self.scrub(text)[:size]

    def _error(self, text: str, url: str, status: int | None = None,
               code: int | None = None) -> KprotoError:
        """The exception for a failed request (``url`` already redacted)."""
        return SchemaRegistryError(text, url=url, status=status, error_code=code)

    def request(self, method: str, url: str, body: bytes | None, timeout: float, *,
                auth: Auth | None = None, limit: int = MAX_ANSWER_BYTES,
                headers: dict[str, str] | None = None) -> Any:  # noqa: ANN401
        """The JSON answer of ``method url`` (None for an empty one), sent with ``auth``
        (and ``headers``, instead of the registry's Accept and Content-Type), following
        redirects, within ``timeout`` seconds and ``limit`` bytes; a SchemaRegistryError
        (:meth:`_error`) otherwise."""
        if headers is not None:
            headers = dict(headers)
        else:
            headers = {"Accept": _ACCEPT}
            if body is not None:
                headers["Content-Type"] = _CONTENT_TYPE
        if auth is not None:
            headers["Authorization"] = f"Basic {_token(auth)}"
        with Deadline(timeout) as deadline:
            for hops in range(MAX_REDIRECTS + 1):
                pool = self._pool(url)
                try:
                    left = deadline.left()
                    answer = pool.urlopen(method, url, body=body, headers=headers,
                                          redirect=False, retries=_NO_RETRIES,
                                          preload_content=False,
                                          timeout=urllib3.Timeout(connect=left, read=left))
                    raw = self._read(answer, method, url, limit)
                except (HTTPError, http.client.HTTPException, OSError) as exc:
                    raise self._failure(exc, method, url, deadline) from None
                if deadline.passed:     # the deadline shut the socket: what was read is cut
                    raise self._failure(SocketTimeoutError(), method, url, deadline)
                location = answer.headers.get("Location")
                if answer.status not in _REDIRECTS or not location:
                    break
                if hops == MAX_REDIRECTS:
                    raise self._error(f"{method} failed: more than {MAX_REDIRECTS} redirects",
                                      redact(url), answer.status)
                url, method, body = self._redirect(answer.status, method, url, location,
                                                   body, headers)
        return self._answer(method, url, answer.status, answer.reason, raw)

    def _read(self, answer: Any, method: str, url: str, limit: int) -> bytes:  # noqa: ANN401
        """The body of ``answer`` (decompressed), at most ``limit`` bytes: a longer one is
        refused at its Content-Length, or as soon as the pieces read pass the limit."""
        try:
            length = answer.length_remaining      # None: chunked, or to the connection's end
            if length is not None and length > limit:
                raise self._too_big(method, url, limit, answer.status, f"Content-Length: {length}")
            pieces, size = [], 0
            while piece := answer.read(_PIECE):
                size += len(piece)
                if size > limit:
                    raise self._too_big(method, url, limit, answer.status, "read past it")
                pieces.append(piece)
        except BaseException:
            answer.close()                        # the rest unread: the connection goes
            answer.release_conn()
            raise
        answer.release_conn()
        return b"".join(pieces)

    def _too_big(self, method: str, url: str, limit: int, status: int, seen: str
                 ) -> KprotoError:
        return self._error(f"{method} failed: the answer is larger than {limit} bytes, "
                           f"the client's max_answer_bytes ({seen})", redact(url), status)

    def _redirect(self, status: int, method: str, url: str, location: str, body: bytes | None,
                  headers: dict[str, str]) -> tuple[str, str, bytes | None]:
        target = urllib.parse.urljoin(url, location)
        refused = None
        try:
            old, new = urllib.parse.urlsplit(url), urllib.parse.urlsplit(target)
            if new.scheme not in ("http", "https") or not new.hostname:
                refused = "not an http(s) URL"
            elif old.scheme == "https" and new.scheme == "http":
                refused = "refused: a redirect from https to http"
            elif _origin(old) != _origin(new) and "Authorization" in headers:
                del headers["Authorization"]
                log.info("%s %s: redirected to another origin, %s; credentials dropped",
                         method, redact(url), self.scrub(redact(target)))
        except ValueError:                       # a port that is no number
            refused = "not a URL"
        if refused:
            raise self._error(f"{method} failed: HTTP {status} redirects to "
                              f"{self.scrub(redact(target))!r}, {refused}", redact(url), status)
        log.debug("%s %s: HTTP %d redirects to %s", method, redact(url), status,
                  self.scrub(redact(target)))
        if status == 303 and method != "HEAD":
            headers.pop("Content-Type", None)
            return target, "GET", None
        return target, method, body

    def _failure(self, exc: BaseException, method: str, url: str,
                 deadline: Deadline) -> KprotoError:
        """The error for a request that got no (whole) answer."""
        reason = redact(self.scrub(str(exc.__cause__ or exc)))
        if deadline.passed or (isinstance(exc, SocketTimeoutError)
                               and not isinstance(exc, NewConnectionError)):
            text = f"no answer within the {deadline.seconds:g} s deadline"
        elif isinstance(exc, TLSError):
            text = f"TLS: {reason}"
        else:
            text = f"{self.peer} unreachable ({reason})"
        return self._error(f"{method} failed: {text}", redact(url))

    def _answer(self, method: str, url: str, status: int, reason: str | None,
                raw: bytes) -> Any:  # noqa: ANN401 - a JSON value
        if 200 <= status < 300:
            if not raw:
                return None
            try:
                return json.loads(raw)
            except ValueError:
                raise SchemaRegistryError(f"{method}: the answer is not JSON: "
                                          f"{self.excerpt(raw)!r}", url=redact(url),
                                          status=status) from None
        code, message = None, None
        try:
            detail = json.loads(raw)
            code, message = detail.get("error_code"), detail.get("message")
        except (ValueError, AttributeError):
            message = self.excerpt(raw)
        try:
            code = None if isinstance(code, bool) or code is None else int(code)
        except (TypeError, ValueError):
            code = None
        shown = self.show(message, 4000) if message else self.scrub(reason or "")
        text = f"{method} failed: HTTP {status}" + (f", error {code}" if code else "") \
            + f": {shown}"
        raise SchemaRegistryError(text, url=redact(url), status=status, error_code=code)

    def excerpt(self, raw: bytes | str, size: int = 200) -> str:
        """The start of an answer, scrubbed (before it is cut: no part of a secret is left)."""
        text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        return self.scrub(text)[:size]


def _token(auth: Auth) -> str:
    user, password = auth
    return base64.b64encode(f"{user}:{password.value}".encode()).decode()


def _spellings(credentials: Sequence[Auth]) -> list[str]:
    """Every spelling of the credentials an answer might echo, longest first: the
    base64 token, and ``user:password`` and the password raw, JSON-escaped (ASCII or
    not), repr- and ascii()-escaped, URL-quoted (as a path, a component, a form) and
    HTML-escaped. An empty password has none."""
    found: set[str] = set()
    for user, password in credentials:
        if not password.value:
            continue
        found.add(_token((user, password)))
        for text in (f"{user}:{password.value}", password.value):
            found.update((text, json.dumps(text)[1:-1],
                          json.dumps(text, ensure_ascii=False)[1:-1], repr(text)[1:-1],
                          ascii(text)[1:-1], urllib.parse.quote(text),
                          urllib.parse.quote(text, safe=""), urllib.parse.quote_plus(text),
                          html.escape(text)))
    return sorted(found - {""}, key=len, reverse=True)
