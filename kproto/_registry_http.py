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
- No secret in an error or a log line: URLs are shown by :func:`redact`, the
  credentials are :class:`Secret` (pickled with the client, printed as ``***``),
  and whatever text of an answer an error quotes is scrubbed of them.
"""

from __future__ import annotations

import base64
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
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import HTTPError, NewConnectionError
from urllib3.exceptions import SSLError as TLSError
from urllib3.exceptions import TimeoutError as SocketTimeoutError

from .errors import ConfigError, SchemaRegistryError

log = logging.getLogger("kproto.schema_registry")

#: Redirects followed in one attempt (urllib follows 10, requests 30, httpx 20).
MAX_REDIRECTS = 5
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

class Transport:
    """HTTP for one client: its credentials and TLS settings, and a urllib3
    PoolManager made on first use (again after unpickling, or in a forked child)."""

    def __init__(self, auth: tuple[str, Secret] | None,
                 tls: tuple[str | None, str | None, str | None, Secret | None, bool]) -> None:
        self._auth = auth
        self._tls = tls
        self._managers: dict[str | None, urllib3.PoolManager] = {}   # proxy -> manager
        self._context: ssl.SSLContext | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"_auth": self._auth, "_tls": self._tls}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["_auth"], state["_tls"])   # type: ignore[misc]

    def __repr__(self) -> str:
        user = None if self._auth is None else self._auth[0]
        return f"Transport(user={user!r})"

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
        """``text`` (something the registry answered) without our credentials."""
        if self._auth is not None:
            user, password = self._auth
            for secret in (self._token(), f"{user}:{password.value}", password.value):
                if secret:
                    text = text.replace(secret, "***")
        return text

    def _token(self) -> str:
        assert self._auth is not None
        user, password = self._auth
        return base64.b64encode(f"{user}:{password.value}".encode()).decode()

    def request(self, method: str, url: str, body: bytes | None, timeout: float) -> Any:  # noqa: ANN401
        """The JSON answer of ``method url`` (None for an empty one), following
        redirects, within ``timeout`` seconds; a SchemaRegistryError otherwise."""
        headers = {"Accept": _ACCEPT}
        if body is not None:
            headers["Content-Type"] = _CONTENT_TYPE
        if self._auth is not None:
            headers["Authorization"] = f"Basic {self._token()}"
        with Deadline(timeout) as deadline:
            for hops in range(MAX_REDIRECTS + 1):
                pool = self._pool(url)
                try:
                    left = deadline.left()
                    answer = pool.urlopen(method, url, body=body, headers=headers,
                                          redirect=False, retries=_NO_RETRIES,
                                          timeout=urllib3.Timeout(connect=left, read=left))
                except (HTTPError, http.client.HTTPException, OSError) as exc:
                    raise self._failure(exc, method, url, deadline) from None
                location = answer.headers.get("Location")
                if answer.status not in _REDIRECTS or not location:
                    break
                if hops == MAX_REDIRECTS:
                    raise SchemaRegistryError(f"{method} failed: more than {MAX_REDIRECTS} "
                                              "redirects", url=redact(url), status=answer.status)
                url, method, body = self._redirect(answer.status, method, url, location,
                                                   body, headers)
        return self._answer(method, url, answer)

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
                         method, redact(url), redact(target))
        except ValueError:                       # a port that is no number
            refused = "not a URL"
        if refused:
            raise SchemaRegistryError(f"{method} failed: HTTP {status} redirects to "
                                      f"{redact(target)!r}, {refused}", url=redact(url),
                                      status=status)
        log.debug("%s %s: HTTP %d redirects to %s", method, redact(url), status, redact(target))
        if status == 303 and method != "HEAD":
            headers.pop("Content-Type", None)
            return target, "GET", None
        return target, method, body

    def _failure(self, exc: BaseException, method: str, url: str,
                 deadline: Deadline) -> SchemaRegistryError:
        """The error for a request that got no (whole) answer."""
        reason = redact(self.scrub(str(exc.__cause__ or exc)))
        if deadline.passed or (isinstance(exc, SocketTimeoutError)
                               and not isinstance(exc, NewConnectionError)):
            text = f"no answer within the {deadline.seconds:g} s deadline"
        elif isinstance(exc, TLSError):
            text = f"TLS: {reason}"
        else:
            text = f"registry unreachable ({reason})"
        return SchemaRegistryError(f"{method} failed: {text}", url=redact(url))

    def _answer(self, method: str, url: str, answer: Any) -> Any:  # noqa: ANN401
        status, raw = answer.status, answer.data
        if 200 <= status < 300:
            if not raw:
                return None
            try:
                return json.loads(raw)
            except ValueError:
                raise SchemaRegistryError(f"{method}: the answer is not JSON: "
                                          f"{self.excerpt(raw)!r}", url=redact(url),
                                          status=status) from None
        code = None
        try:
            detail = json.loads(raw)
            code, message = detail.get("error_code"), detail.get("message") or answer.reason
        except (ValueError, AttributeError):
            message = self.excerpt(raw) or answer.reason
        try:
            code = None if code is None else int(code)
        except (TypeError, ValueError):
            code = None
        text = f"{method} failed: HTTP {status}" + (f", error {code}" if code else "") \
            + f": {self.scrub(str(message))}"
        raise SchemaRegistryError(text, url=redact(url), status=status, error_code=code)

    def excerpt(self, raw: bytes | str, size: int = 200) -> str:
        """The start of an answer, scrubbed (before it is cut: no part of a secret is left)."""
        text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        return self.scrub(text)[:size]
