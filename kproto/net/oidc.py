"""OAUTHBEARER tokens from an OAuth 2 / OIDC token endpoint (KIP-768), and the
client settings that build the OAUTHBEARER mechanism.

:class:`OidcTokenProvider` is the client credentials grant as Java's
``OAuthBearerLoginCallbackHandler`` and librdkafka's
``sasl.oauthbearer.method=oidc`` send it, or a token read from a ``file://``
URL (Java's ``FileJwtRetriever``), checked as Java's ``ClientJwtValidator``
checks it (:func:`kproto.net.oauth.jwt_token`). Its HTTP is kproto's
(``kproto/_registry_http.py``): a deadline per attempt (the connect and read
timeouts together), redirects that drop the credentials at another origin and
never go from https to http, answers of at most 1 MiB, and nothing secret in an
error or a log. :func:`oauthbearer_from_config` picks the token source from
client settings (see :mod:`kproto.net.oauth` for the mechanism and the cache).
"""

from __future__ import annotations

import json
import logging
import math
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from .._registry_http import Secret, Transport, redact
from ..config import is_text
from ..errors import ConfigError, KprotoError, SaslAuthenticationFailedError
from .msk import IAM_OAUTH_HANDLER, java_class, msk_token_provider_from_config
from .oauth import (
    OAuthToken,
    RefreshPolicy,
    SaslOauthBearer,
    TokenProvider,
    _CachedProvider,
    jwt_token,
    token_provider,
)

__all__ = ["OidcTokenProvider", "oauthbearer_from_config", "MAX_TOKEN_ANSWER_BYTES"]

log = logging.getLogger("kproto.oauth")

#: The largest token endpoint answer read (a token is a few kB).
MAX_TOKEN_ANSWER_BYTES = 1 << 20
#: HTTP codes after which the token request is not tried again (Java's HttpJwtRetriever).
_FINAL_STATUS = frozenset({400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412,
                           413, 414, 415, 501, 505})
#: Java's OAuthBearerLoginCallbackHandler, which a Java config names to use KIP-768.
_JAVA_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                  "org.apache.kafka.common.security.oauthbearer.secured."
                  "OAuthBearerLoginCallbackHandler")


# --------------------------------------------------------------------------- OIDC


class _TokenEndpoint(Transport):
    """kproto's registry HTTP (deadline, redirects, caps, scrubbing) for a token endpoint:
    errors are SaslAuthenticationFailedError, answers RFC 6749 JSON."""

    peer = "token endpoint"

    def _error(self, text: str, url: str, status: int | None = None,
               code: int | None = None) -> KprotoError:
        return SaslAuthenticationFailedError(f"OAUTHBEARER token request: {text}",
                                             endpoint=url, status=status)

    def _too_big(self, method: str, url: str, limit: int, status: int, seen: str
                 ) -> KprotoError:
        return self._error(f"the answer is larger than {limit} bytes ({seen})", redact(url),
                           status)

    def _ssl_context(self) -> Any:  # noqa: ANN401
        try:
            return super()._ssl_context()
        except ConfigError:
            raise ConfigError(f"sasl_oauthbearer_ssl_cafile {self._tls[0]!r} cannot be read "
                              "as CA certificates (PEM)") from None

    def _answer(self, method: str, url: str, status: int, reason: str | None,
                raw: bytes) -> Any:  # noqa: ANN401
        shown = redact(url)
        body, parsed = None, True
        try:     # (errors are raised outside the handler: the body, maybe a token, unchained)
            body = json.loads(raw) if raw else None
        except (ValueError, RecursionError):
            parsed = False
        if not raw and 200 <= status < 300:     # (no status: tried again, as Java does)
            raise self._error(f"HTTP {status}, but the answer is empty (cut short?)", shown)
        if not parsed and 200 <= status < 300:
            kind = "an HTML page" if raw.lstrip()[:1] == b"<" else "not JSON"
            raise self._error(f"HTTP {status}, but the answer is {kind} ({len(raw)} bytes)",
                              shown, status)
        if 200 <= status < 300:
            if not isinstance(body, dict) or not isinstance(body.get("access_token"), str) \
                    or not body["access_token"].strip():
                keys = sorted(body)[:10] if isinstance(body, dict) else type(body).__name__
                raise self._error(f"HTTP {status}, but the answer has no access_token "
                                  f"string (it has: {keys})", shown, status)
            return body
        if isinstance(body, dict) and ("error" in body or "errorCode" in body):
            what = self.show(body.get("error", body.get("errorCode")), 100)
            more = body.get("error_description", body.get("errorSummary"))
            detail = what + (f": {self.show(more, 200)}" if more else "")
        else:
            detail = self.excerpt(raw) if raw else self.scrub(reason or "")
        raise self._error(f"HTTP {status}: {detail}", shown, status)


class OidcTokenProvider(_CachedProvider):
    """KIP-768: a token from an OAuth 2 / OIDC token endpoint by the client
    credentials grant (``POST grant_type=client_credentials[&scope=...]`` with
    ``Authorization: Basic base64(client_id:client_secret)``, as Java and librdkafka
    send it; ``header_urlencode``: the two URL-encoded first, KIP-1025), or read from
    a ``file://`` URL. Each attempt is bounded by ``connect_timeout`` +
    ``read_timeout`` seconds; a failed one (unreachable, timed out, 5xx, 429) is tried
    again with backoff within the policy's ``retry_backoff_max``; a 4xx other than
    408/429 is final. The token is checked (:func:`jwt_token`).

    ``cafile`` (PEM): the CAs of the endpoint's certificate (else the system's).
    """

    def __init__(self, endpoint_url: str, client_id: str | None = None,
                 client_secret: str | None = None, *, scope: str | None = None,
                 cafile: str | None = None, connect_timeout: float = 10.0,
                 read_timeout: float = 10.0, header_urlencode: bool = False,
                 sub_claim: str = "sub", scope_claim: str = "scope",
                 policy: RefreshPolicy | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(policy, clock)
        self.url = str(endpoint_url or "").strip()
        parts = urllib.parse.urlsplit(self.url)
        self.endpoint = redact(self.url)
        self.path: str | None = None
        if parts.scheme == "file":
            self.path = urllib.parse.unquote(parts.path)
        elif parts.scheme in ("http", "https") and parts.hostname:
            if "@" in parts.netloc:
                raise ConfigError(f"sasl_oauthbearer_token_endpoint_url {self.endpoint!r} "
                                  "holds credentials: give them as sasl_oauthbearer_client_id "
                                  "and sasl_oauthbearer_client_secret")
            if not client_id or not str(client_id).strip() or not client_secret or \
                    not str(client_secret).strip():
                raise ConfigError(f"the OAUTHBEARER token endpoint {self.endpoint} needs "
                                  "sasl_oauthbearer_client_id and "
                                  "sasl_oauthbearer_client_secret")
            if parts.scheme == "http":
                log.warning("the OAUTHBEARER token endpoint %s is plain http: the client "
                            "secret and the token cross the network in clear", self.endpoint)
        else:
            raise ConfigError(f"sasl_oauthbearer_token_endpoint_url {self.endpoint!r} is not "
                              "an http(s):// or file:// URL")
        self.client_id = str(client_id or "").strip()
        self._secret = Secret(str(client_secret or "").strip())
        for name, text in (("id", self.client_id), ("secret", self._secret.value)):
            if not is_text(text):      # (a UnicodeEncodeError's repr would hold it all)
                raise ConfigError(f"sasl_oauthbearer_client_{name} is not valid text (it has "
                                  "a lone surrogate: bytes that were not UTF-8?)")
        self.scope = (scope or "").strip() or None
        for name, value in (("connect", connect_timeout), ("read", read_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not 0 < value <= 3600:
                raise ConfigError(f"sasl_login_{name}_timeout_ms must be in 1..3600000, not "
                                  f"{value!r} s")
        self.timeout = float(connect_timeout) + float(read_timeout)
        self.header_urlencode = bool(header_urlencode)
        self.sub_claim, self.scope_claim = sub_claim or "sub", scope_claim or "scope"
        auth = (self.client_id, self._secret)
        if self.header_urlencode:
            auth = (urllib.parse.quote_plus(self.client_id),
                    Secret(urllib.parse.quote_plus(self._secret.value)))
        self._auth = auth
        self._transport = _TokenEndpoint([(self.client_id, self._secret), auth],
                                         (cafile, None, None, None, True))

    def __repr__(self) -> str:
        return f"OidcTokenProvider({self.endpoint}, client_id={self.client_id!r}, " \
               f"client_secret='***')"

    __str__ = __repr__

    def _fetch(self, *, retry: bool) -> OAuthToken:
        value = self._read_file() if self.path is not None else self._post(retry)
        return jwt_token(value.strip(), self.endpoint, sub_claim=self.sub_claim,
                         scope_claim=self.scope_claim)

    def _read_file(self) -> str:
        assert self.path is not None
        try:
            with open(self.path, "rb") as f:
                data = f.read(MAX_TOKEN_ANSWER_BYTES + 1)
        except OSError as exc:
            raise SaslAuthenticationFailedError(
                f"cannot read the OAUTHBEARER token file {self.path!r}: {exc.strerror}") from None
        if len(data) > MAX_TOKEN_ANSWER_BYTES:
            raise SaslAuthenticationFailedError(f"the OAUTHBEARER token file {self.path!r} is "
                                                f"larger than {MAX_TOKEN_ANSWER_BYTES} bytes")
        return data.decode("utf-8", "replace")

    def _post(self, retry: bool) -> str:
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        body = urllib.parse.urlencode(form).encode()
        headers = {"Accept": "application/json", "Cache-Control": "no-cache",
                   "Content-Type": "application/x-www-form-urlencoded"}
        start = time.monotonic()
        end = start + self.policy.retry_backoff_max
        attempt = 0
        while True:
            attempt += 1
            try:
                answer = self._transport.request("POST", self.url, body, self.timeout,
                                                 auth=self._auth, headers=headers,
                                                 limit=MAX_TOKEN_ANSWER_BYTES)
                return str(answer["access_token"])
            except SaslAuthenticationFailedError as exc:
                status = exc.context.get("status")
                wait = self.policy.retry_backoff * 2 ** min(attempt - 1, 30)
                # final: a 4xx Java does not retry, a 2xx that is no token, a redirect
                # that went wrong (too many, or refused)
                final = status in _FINAL_STATUS or (status is not None and 200 <= status < 400)
                if final or not retry or time.monotonic() + wait > end:
                    if attempt > 1:
                        exc.context["attempts"] = attempt
                    raise
                log.debug("token request to %s failed (%s); attempt %d in %.2f s",
                          self.endpoint, exc, attempt + 1, wait)
                time.sleep(wait)


# --------------------------------------------------------------------------- settings


def _number(c: Mapping[str, Any], key: str, default: float) -> float:
    value = c.get(key)
    if value is None:
        return default
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number, not {value!r}") from None
    if not math.isfinite(out):
        raise ConfigError(f"{key} must be a finite number, not {value!r}")
    return out


def oauthbearer_from_config(c: Mapping[str, Any]) -> SaslOauthBearer:
    """The OAUTHBEARER mechanism for normalized client settings ``c`` (see
    :func:`kproto.net.security.sasl_from_config`): a token provider from
    ``oauth_cb`` (confluent-kafka), ``sasl_oauth_token_provider`` (kafka-python)
    or ``sasl_oauthbearer_token_endpoint_url`` (KIP-768 / librdkafka's
    ``sasl.oauthbearer.method=oidc``: with ``sasl_oauthbearer_client_id``,
    ``_client_secret``, ``_scope``) or AWS MSK IAM (Java's
    ``sasl_login_callback_handler_class`` ``IAMOAuthBearerLoginCallbackHandler``:
    :func:`kproto.net.msk.msk_token_provider_from_config`), exactly one of them; the
    ``sasl_oauthbearer_extensions``; and Java's ``sasl_login_*`` timing settings.
    Mistakes are a :class:`~kproto.errors.ConfigError`."""
    handler = c.get("sasl_login_callback_handler_class")
    client_handler = java_class(c.get("sasl_client_callback_handler_class"))
    iam = java_class(handler) == IAM_OAUTH_HANDLER or \
        (not handler and client_handler == IAM_OAUTH_HANDLER)
    if handler and not iam and str(handler).strip().removeprefix("kafkashaded.") \
            not in _JAVA_HANDLERS:          # (Databricks' shaded Kafka names the same class)
        raise ConfigError(f"sasl.login.callback.handler.class {str(handler)[:120]!r} is a Java "
                          "class: pass a Python token provider as oauth_cb= (or "
                          "sasl_oauth_token_provider=) instead (AWS MSK IAM's "
                          f"{IAM_OAUTH_HANDLER} is known)")
    aws = sorted(k for k, v in c.items() if k.startswith("sasl_aws_") and v not in (None, ""))
    if aws and not iam:
        raise ConfigError(f"{', '.join(aws)}: AWS MSK IAM settings, which with OAUTHBEARER need "
                          f"sasl.login.callback.handler.class={IAM_OAUTH_HANDLER} (or use "
                          "sasl_mechanism AWS_MSK_IAM)")
    policy = RefreshPolicy(
        _number(c, "sasl_login_refresh_window_factor", 0.8),
        _number(c, "sasl_login_refresh_window_jitter", 0.05),
        _number(c, "sasl_login_refresh_min_period_seconds", 60),
        _number(c, "sasl_login_refresh_buffer_seconds", 300),
        _number(c, "sasl_login_retry_backoff_ms", 100) / 1000,
        _number(c, "sasl_login_retry_backoff_max_ms", 10000) / 1000)
    url = c.get("sasl_oauthbearer_token_endpoint_url")
    method = str(c.get("sasl_oauthbearer_method") or "default").strip().lower()
    if method not in ("default", "oidc"):
        raise ConfigError(f"sasl_oauthbearer_method must be 'default' or 'oidc', not "
                          f"{method!r}")
    given = [k for k in ("oauth_cb", "sasl_oauth_token_provider") if c.get(k) is not None]
    if url:
        given.append("sasl_oauthbearer_token_endpoint_url")
    if iam:
        given.append(f"AWS MSK IAM ({IAM_OAUTH_HANDLER.rpartition('.')[2]})")
    if len(given) > 1:
        raise ConfigError(f"OAUTHBEARER takes one token source, not {' and '.join(given)}")
    if method == "oidc" and not url:
        raise ConfigError("sasl_oauthbearer_method=oidc needs "
                          "sasl_oauthbearer_token_endpoint_url")
    if not given:
        raise ConfigError("sasl_mechanism OAUTHBEARER needs a token source: "
                          "sasl_oauthbearer_token_endpoint_url (with client id and secret), "
                          "oauth_cb= or sasl_oauth_token_provider=")
    provider: TokenProvider
    if iam:
        provider = msk_token_provider_from_config(c, policy)
    elif url:
        provider = OidcTokenProvider(
            str(url), c.get("sasl_oauthbearer_client_id"), c.get("sasl_oauthbearer_client_secret"),
            scope=c.get("sasl_oauthbearer_scope"), cafile=c.get("sasl_oauthbearer_ssl_cafile"),
            connect_timeout=_number(c, "sasl_login_connect_timeout_ms", 10000) / 1000,
            read_timeout=_number(c, "sasl_login_read_timeout_ms", 10000) / 1000,
            header_urlencode=_flag(c.get("sasl_oauthbearer_header_urlencode")),
            sub_claim=str(c.get("sasl_oauthbearer_sub_claim_name") or "sub"),
            scope_claim=str(c.get("sasl_oauthbearer_scope_claim_name") or "scope"),
            policy=policy)
    else:
        source = c.get(given[0])
        provider = token_provider(source, config=c.get("sasl_oauthbearer_config"),
                                  policy=policy)
    return SaslOauthBearer(provider, extensions=c.get("sasl_oauthbearer_extensions"))


def _flag(value: Any) -> bool:  # noqa: ANN401
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)

