"""SASL OAUTHBEARER (RFC 7628, KIP-255) and the tokens it sends (KIP-768 OIDC).

:class:`SaslOauthBearer` is the mechanism: it asks its token provider for a
token and sends RFC 7628's client initial response
(``n,,\\x01auth=Bearer <token>\\x01[key=value\\x01]*\\x01``, the pairs being KIP-255
SASL extensions). A broker that refuses the token answers with an error JSON
(``{"status": "invalid_token", "scope": ..., "openid-configuration": ...}``);
the client answers it with ``\\x01`` as RFC 7628 requires, the broker ends the
exchange with SASL_AUTHENTICATION_FAILED, and the error raised carries
``status`` and ``scope``.

A token provider is anything with ``token() -> OAuthToken``. Two come with kproto:

- :class:`kproto.net.oidc.OidcTokenProvider`: KIP-768's client credentials
  grant, as Java's ``OAuthBearerLoginCallbackHandler`` and librdkafka's
  ``sasl.oauthbearer.method=oidc`` do it (or a token read from a ``file://``
  URL, as Java's ``FileJwtRetriever``). The token is checked as Java's
  ``ClientJwtValidator`` does (:func:`jwt_token`: a JWT with ``exp`` and
  ``sub``, or the configured claim names, expiring in the future).
- :class:`CallbackTokenProvider`: a user function, as confluent-kafka's
  ``oauth_cb`` (returning ``(token, expiry)`` or ``(token, expiry, principal,
  extensions)``, expiry in seconds since the epoch) or an object with
  ``token()`` (and ``extensions()``), as kafka-python's
  ``sasl_oauth_token_provider``.

Both keep the token and share it between every connection of a client; a token
is fetched again once its refresh time passed (Java's
``ExpiringCredentialRefreshingLogin``: ``sasl.login.refresh.window.factor``
and ``.jitter`` of its lifetime, within ``min.period`` and ``buffer``), and the
old one still serves while a refresh fails. Secrets (the client secret, the
token) never appear in ``repr()``, errors or logs.
:func:`kproto.net.oidc.oauthbearer_from_config` builds it all from client
settings.
"""

from __future__ import annotations

import base64
import binascii
import inspect
import json
import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConfigError, KprotoError, SaslAuthenticationFailedError

__all__ = ["OAuthToken", "TokenProvider", "SaslOauthBearer", "RefreshPolicy",
           "CallbackTokenProvider", "token_provider", "check_extensions", "jwt_claims",
           "jwt_token"]

log = logging.getLogger("kproto.oauth")

#: RFC 6750 section 2.1 b64token: what a bearer token may hold.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
#: RFC 7628 section 3.1: extension keys and values.
_EXT_KEY = re.compile(r"[A-Za-z]+")
_EXT_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
#: The latest expiry taken as it is (the year 9999): a later one is cut to it.
MAX_EXPIRY = 253402300799.0


class OAuthToken:
    """A bearer token: its value (never shown), expiry (seconds since the epoch,
    None: unknown, then it is fetched for every login), principal and the SASL
    extensions that go with it."""

    __slots__ = ("value", "expires_at", "principal", "extensions", "issued_at")

    def __init__(self, value: str, expires_at: float | None = None, principal: str | None = None,
                 extensions: Mapping[str, str] | None = None,
                 issued_at: float | None = None) -> None:
        self.value = value
        self.expires_at = expires_at
        self.principal = principal
        self.extensions = dict(extensions or {})
        self.issued_at = issued_at

    def __repr__(self) -> str:
        return (f"OAuthToken(principal={self.principal!r}, expires_at={self.expires_at!r}, "
                f"value='***')")

    __str__ = __repr__


class TokenProvider(Protocol):
    """Where :class:`SaslOauthBearer` gets its tokens."""

    def token(self) -> OAuthToken: ...


def check_extensions(extensions: Mapping[str, Any] | str | None, where: str = "SASL extensions"
                     ) -> dict[str, str]:
    """KIP-255 SASL extensions, checked (RFC 7628: keys are letters, values printable
    ASCII, ``auth`` reserved): a mapping, or librdkafka's ``"key=value,key2=value2"``."""
    if extensions is None or extensions == "":
        return {}
    if isinstance(extensions, str):
        pairs = {}
        for item in extensions.split(","):
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"{where}: {key.strip()[:40]!r} is not key=value")
            pairs[key.strip()] = value.strip()
        extensions = pairs
    if not isinstance(extensions, Mapping):
        raise ConfigError(f"{where} must be a dict or 'key=value,...', not "
                          f"{type(extensions).__name__}")
    out: dict[str, str] = {}
    for key, value in extensions.items():
        if not isinstance(key, str) or not _EXT_KEY.fullmatch(key):
            raise ConfigError(f"{where}: the name {str(key)[:40]!r} is invalid (letters only, "
                              "RFC 7628)")
        if key == "auth":
            raise ConfigError(f"{where}: the name 'auth' is reserved (it carries the token)")
        if not isinstance(value, str) or not _EXT_VALUE.fullmatch(value):
            raise ConfigError(f"{where}: the value of {key!r} is invalid (printable ASCII, "
                              "RFC 7628)")
        out[key] = value
    return out


def check_token(token: OAuthToken, where: str) -> str:
    """The token's value, if it is an RFC 6750 bearer token (which also keeps it from
    breaking the RFC 7628 framing): else a SaslAuthenticationFailedError."""
    value = token.value
    if not isinstance(value, str) or not _B64TOKEN.fullmatch(value):
        raise SaslAuthenticationFailedError(
            f"the token from {where} is not an RFC 6750 bearer token (empty, or characters "
            "other than A-Z a-z 0-9 - . _ ~ + / and trailing =)")
    return value


# --------------------------------------------------------------------------- the mechanism


class SaslOauthBearer:
    """SASL OAUTHBEARER: sends the provider's token and ``extensions`` (KIP-255).

    ``provider`` is a :class:`TokenProvider`; :func:`token_provider` turns a
    confluent-style ``oauth_cb`` or a kafka-python-style provider into one.
    Every login (and KIP-368 re-authentication) asks it for a token, so a
    refreshed token is used from then on.
    """

    name = "OAUTHBEARER"

    def __init__(self, provider: TokenProvider, *,
                 extensions: Mapping[str, str] | str | None = None) -> None:
        if not callable(getattr(provider, "token", None)):
            raise ConfigError("an OAUTHBEARER token provider needs a token() method")
        self.provider = provider
        self.extensions = check_extensions(extensions)
        #: The principal of the last login (from its token), for logs.
        self.principal: str | None = None

    def __repr__(self) -> str:
        return f"SaslOauthBearer({self.provider!r}, extensions={sorted(self.extensions)})"

    __str__ = __repr__

    def initial_response(self, token: OAuthToken) -> bytes:
        """RFC 7628's client initial response for ``token``."""
        value = check_token(token, repr(self.provider))
        extensions = {**self.extensions, **check_extensions(
            token.extensions, f"the SASL extensions of {self.provider!r}")}
        pairs = "".join(f"\x01{k}={v}" for k, v in extensions.items())
        return f"n,,\x01auth=Bearer {value}{pairs}\x01\x01".encode("ascii")

    def authenticate(self, exchange: Callable[[bytes], bytes]) -> None:
        """Send the token; on the server's error JSON answer ``\\x01`` and raise
        SaslAuthenticationFailedError with its ``status`` and ``scope``."""
        token = self.provider.token()
        answer = self._scrubbed(exchange, token, self.initial_response(token))
        if not answer:
            self.principal = token.principal
            log.debug("OAUTHBEARER login as %s", token.principal)
            return
        detail = _server_error(answer)
        try:
            self._scrubbed(exchange, token, b"\x01")
            ending = "the broker did not end the exchange"
        except SaslAuthenticationFailedError as exc:
            ending = exc.message or str(exc)
        status, scope = detail.get("status"), detail.get("scope")
        raise SaslAuthenticationFailedError(
            f"OAUTHBEARER token of {token.principal or 'the client'} refused: status "
            f"{status or 'not given'}" + (f", scope {scope}" if scope else "") + f" ({ending})",
            status=status, scope=scope, openid_configuration=detail.get("openid-configuration"))

    @staticmethod
    def _scrubbed(exchange: Callable[[bytes], bytes], token: OAuthToken, data: bytes) -> bytes:
        """``exchange(data)``, with the token cut out of any error (a broker may echo it):
        the scrubbed error is raised outside the handler, so it chains to nothing."""
        try:
            return exchange(data)
        except KprotoError as exc:
            text = str(getattr(exc, "message", None) or exc)
            if not token.value or token.value not in text:
                raise
            scrubbed = type(exc)(text.replace(token.value, "***"))
        raise scrubbed


def _server_error(answer: bytes) -> dict[str, str]:
    """The RFC 7628 section 3.2.2 error JSON (its string members, shortened)."""
    try:
        detail = json.loads(answer.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        detail = None
    if not isinstance(detail, dict):
        return {"status": "unreadable error answer"}
    return {str(k)[:40]: str(v)[:200] for k, v in detail.items()
            if isinstance(v, (str, int, float))}


# --------------------------------------------------------------------------- caching


@dataclass(frozen=True)
class RefreshPolicy:
    """When a token is fetched again (Java's ``sasl.login.refresh.*``): at
    ``window_factor`` (+ up to ``window_jitter``, at random) of its lifetime, no
    sooner than ``min_period`` seconds after the fetch and no later than ``buffer``
    seconds before it expires (both ignored for a token that lives shorter than
    their sum). ``retry_backoff``/``retry_backoff_max``: seconds between attempts
    when fetching fails (doubling), and the whole window of attempts."""

    window_factor: float = 0.8
    window_jitter: float = 0.05
    min_period: float = 60.0
    buffer: float = 300.0
    retry_backoff: float = 0.1
    retry_backoff_max: float = 10.0

    def __post_init__(self) -> None:
        for name, low, high in (("window_factor", 0.5, 1.0), ("window_jitter", 0.0, 0.25),
                                ("min_period", 0, 900), ("buffer", 0, 3600),
                                ("retry_backoff", 0, 3600), ("retry_backoff_max", 0, 86400)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not low <= value <= high:
                raise ConfigError(f"OAUTHBEARER refresh setting {name} must be a number in "
                                  f"{low}..{high}, not {value!r}")

    def refresh_at(self, now: float, token: OAuthToken) -> float:
        """The time (seconds since the epoch) to fetch a new token after ``token``."""
        expires = token.expires_at
        if expires is None:
            return now                     # unknown lifetime: a new one for every login
        pct = self.window_factor + self.window_jitter * random.random()
        if now + self.min_period + self.buffer > expires:
            return now + (expires - now) * pct
        start = token.issued_at if token.issued_at is not None and token.issued_at <= now \
            else now
        proposed = start + (expires - start) * pct
        return max(min(proposed, expires - self.buffer), now + self.min_period)


class _CachedProvider:
    """A token fetched by :meth:`_fetch`, kept until its refresh time, shared by every
    thread. Past the refresh time, while the token is still valid, it serves on and a
    new one is fetched on a thread of its own (Java's refresher thread: a login or a
    re-authentication - on a consumer's poll, a producer's sender - never waits on the
    token endpoint while it holds a valid token); a failed refresh is tried again
    after a backoff. Without a valid token the caller fetches it (one fetch at a time)."""

    def __init__(self, policy: RefreshPolicy | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.policy = policy or RefreshPolicy()
        self._clock = clock
        self._lock = threading.Lock()
        self._token: OAuthToken | None = None
        self._refresh_at = 0.0
        self._retry_at = 0.0
        self._failures = 0
        #: The thread fetching a new token in the background, while there is one.
        self._refresher: threading.Thread | None = None
        #: Tokens fetched so far (for tests and logs).
        self.fetched = 0

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_lock", "_token", "_refresher"):
            state.pop(name)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._token, self._refresher = None, None
        self._refresh_at = self._retry_at = 0.0

    def _fetch(self, *, retry: bool) -> OAuthToken:
        raise NotImplementedError

    def token(self) -> OAuthToken:
        """The current token (see the class docstring)."""
        with self._lock:
            now = self._clock()
            old = self._token
            if old is not None and old.expires_at is not None and now < old.expires_at:
                if now >= self._refresh_at and now >= self._retry_at and \
                        self._refresher is None:
                    self._refresher = threading.Thread(target=self._refresh, daemon=True,
                                                       name="kproto-oauthbearer-refresh")
                    self._refresher.start()
                return old
            return self._keep(self._fetch(retry=True))

    def _keep(self, new: OAuthToken) -> OAuthToken:
        """Check ``new`` and make it the current token (under the lock)."""
        now = self._clock()
        check_token(new, repr(self))
        if new.expires_at is not None and new.expires_at <= now:
            raise SaslAuthenticationFailedError(
                f"the token from {self!r} expired {now - new.expires_at:.0f} s ago (is "
                "this host's clock right?)")
        self._token, self._failures, self.fetched = new, 0, self.fetched + 1
        self._refresh_at = self.policy.refresh_at(now, new)
        log.debug("OAUTHBEARER token for %s from %r, valid until %s, refreshed in %.1f s",
                  new.principal, self, new.expires_at, self._refresh_at - now)
        return new

    def _refresh(self) -> None:
        """The refresher thread: one attempt; a failure logs a warning (no secrets) and
        sets when the next attempt may be made (the current token serves meanwhile)."""
        try:
            new = self._fetch(retry=False)
            with self._lock:
                self._keep(new)
        except Exception as exc:  # noqa: BLE001 - the thread's end: every failure is logged
            reason = exc if isinstance(exc, KprotoError) else type(exc).__name__
            with self._lock:
                self._failures += 1
                wait = self.policy.retry_backoff * 2 ** min(self._failures - 1, 30)
                now = self._clock()
                self._retry_at = now + min(wait, self.policy.retry_backoff_max)
                left = (self._token.expires_at or now) - now if self._token else 0.0
            log.warning("refreshing the OAUTHBEARER token failed (%s); the current one, "
                        "valid %.0f s more, serves meanwhile", reason, left)
        finally:
            with self._lock:
                self._refresher = None


def _expiry(value: Any, what: str, *, millis_above: float | None = None) -> float:
    """A finite expiry in seconds since the epoch (a huge one cut to MAX_EXPIRY)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SaslAuthenticationFailedError(f"{what} is not a number")
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if math.isnan(seconds) or seconds < 0:
        raise SaslAuthenticationFailedError(f"{what} is not a time (negative or NaN)")
    if millis_above is not None and millis_above < seconds < math.inf:
        seconds /= 1000.0               # milliseconds, as Java's and librdkafka's C API
    return min(seconds, MAX_EXPIRY)


def jwt_claims(token: str, where: str) -> dict[str, Any]:
    """The claims (payload) of a JWT, not checked against any key (the broker does
    that); a SaslAuthenticationFailedError naming ``where`` when it is no JWT."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise SaslAuthenticationFailedError(
            f"the token from {where} is not a JWT (header.payload.signature)")
    claims = None
    try:       # (the error is raised outside the handler: no part of the token chained)
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload.decode("utf-8"))
        readable = True
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
        readable = False
    if not readable:
        raise SaslAuthenticationFailedError(
            f"the token from {where} is not a JWT: its payload is not base64url JSON")
    if not isinstance(claims, dict):
        raise SaslAuthenticationFailedError(
            f"the token from {where} is not a JWT: its payload is not a JSON object")
    return claims


def jwt_token(value: str, where: str, *, sub_claim: str = "sub",
              scope_claim: str = "scope") -> OAuthToken:
    """``value`` checked as Java's ClientJwtValidator does: a JWT whose ``exp`` is a
    number, ``sub_claim`` a non-empty string, ``scope_claim`` (optional) a string or a
    list of them and ``iat`` (optional) a number."""
    claims = jwt_claims(value, where)
    if "exp" not in claims:
        raise SaslAuthenticationFailedError(f"the token from {where} has no 'exp' claim "
                                            "(when it expires)")
    expires = _expiry(claims["exp"], f"the 'exp' claim of the token from {where}")
    sub = claims.get(sub_claim)
    if not isinstance(sub, str) or not sub.strip():
        raise SaslAuthenticationFailedError(f"the token from {where} has no '{sub_claim}' claim "
                                            "(a non-empty string: the principal)")
    scope = claims.get(scope_claim)
    scopes = [scope] if isinstance(scope, str) else scope if isinstance(scope, list) else []
    if any(not isinstance(s, str) or not s.strip() for s in scopes):
        raise SaslAuthenticationFailedError(f"the '{scope_claim}' claim of the token from "
                                            f"{where} holds an empty or non-string scope")
    issued = claims.get("iat")
    issued_at = None if issued is None else _expiry(issued, f"the 'iat' claim of the token "
                                                            f"from {where}")
    return OAuthToken(value, expires, sub.strip(), None, issued_at)


# --------------------------------------------------------------------------- user functions


def _takes_argument(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True                       # a builtin: confluent's convention, one argument
    return any(p.kind == p.VAR_POSITIONAL or (p.default is p.empty and p.kind in (
        p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)) for p in params)


class CallbackTokenProvider(_CachedProvider):
    """Tokens from user code: a function (confluent-kafka's ``oauth_cb``: called with
    ``config`` - librdkafka's ``sasl.oauthbearer.config`` - when it has a parameter
    without a default)
    returning a token string, ``(token, expiry)``, ``(token, expiry, principal)``,
    ``(token, expiry, principal, extensions)`` or an :class:`OAuthToken`; or an object
    whose ``token()`` returns one of those and whose ``extensions()``, if it has one,
    the SASL extensions (kafka-python's ``sasl_oauth_token_provider``).

    Expiry is in seconds since the epoch (a value above 10**11 is taken as
    milliseconds); when none is given and the token is a JWT its ``exp`` is used,
    else the function is called for every login. Its exceptions become
    :class:`~kproto.errors.SaslAuthenticationFailedError` (chained to them).
    """

    def __init__(self, source: Any, *, config: str | None = None,  # noqa: ANN401
                 policy: RefreshPolicy | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(policy, clock)
        if not callable(source) and not callable(getattr(source, "token", None)):
            raise ConfigError(f"an OAUTHBEARER token provider must be callable or have a "
                              f"token() method, not {type(source).__name__}")
        self.source = source
        self.config = config or ""

    def __repr__(self) -> str:
        name = getattr(self.source, "__qualname__", None) or type(self.source).__qualname__
        return f"CallbackTokenProvider({name})"

    def _fetch(self, *, retry: bool) -> OAuthToken:
        where = repr(self)
        extensions: Any = None
        try:
            method = getattr(self.source, "token", None)
            if callable(method):
                got = method()
                more = getattr(self.source, "extensions", None)
                extensions = more() if callable(more) else None
            elif _takes_argument(self.source):
                got = self.source(self.config)
            else:
                got = self.source()
        except KprotoError:
            raise
        except Exception as exc:
            raise SaslAuthenticationFailedError(
                f"the OAUTHBEARER token provider {where} failed: {type(exc).__name__}") from exc
        if isinstance(got, OAuthToken):
            token = got
        else:
            parts = got if isinstance(got, tuple) else (got,)
            if not 1 <= len(parts) <= 4 or not isinstance(parts[0], str):
                raise SaslAuthenticationFailedError(
                    f"{where} returned {type(got).__name__}: expected a token string or "
                    "(token, expiry[, principal[, extensions]])")
            value, expiry, principal, exts = (*parts, None, None, None)[:4]
            token = OAuthToken(value, None if expiry is None else _expiry(
                expiry, f"the expiry from {where}", millis_above=1e11),
                None if principal is None else str(principal), exts or extensions)
        if token.expires_at is None or token.principal is None:
            try:
                claims = jwt_claims(token.value, where)
            except SaslAuthenticationFailedError:
                claims = {}               # not a JWT (e.g. an AWS MSK IAM token): fine
            if token.expires_at is None and "exp" in claims:
                token.expires_at = _expiry(claims["exp"], f"the 'exp' claim of {where}")
            if token.principal is None and isinstance(claims.get("sub"), str):
                token.principal = claims["sub"]
        return token


# --------------------------------------------------------------------------- settings


def token_provider(source: Any, *, config: str | None = None,  # noqa: ANN401
                   policy: RefreshPolicy | None = None) -> TokenProvider:
    """``source`` as a :class:`TokenProvider`: a provider made here as it is, anything
    else through :class:`CallbackTokenProvider`."""
    if isinstance(source, _CachedProvider):
        return source
    return CallbackTokenProvider(source, config=config, policy=policy)
