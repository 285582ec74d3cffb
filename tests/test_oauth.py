"""SASL OAUTHBEARER (kproto.net.oauth, kproto.net.oidc) against real parts.

Which broker validates OAUTHBEARER tokens: none of the three test brokers.
Tansu 0.6.0 (``--authentication``) takes SaslHandshake OAUTHBEARER (rsasl's
mechanism) but its validation callback knows only PLAIN and SCRAM, so every
token is refused (error 58), and it has no option, environment variable or
source for a JWKS or issuer; noida-db offers PLAIN only and lets any token in;
librdkafka's mock cluster has no SaslHandshake. So tokens are validated by the
in-test gateway (tests/oauth_support.py: RS256 signature against the JWKS of a
real HTTPS token endpoint run by the test, issuer, audience, expiry) in front of a
real Tansu; the failure path is also run against Tansu's own rsasl server.
"""

from __future__ import annotations

import gc
import json
import logging
import pickle
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kproto.errors import ConfigError, SaslAuthenticationFailedError
from kproto.net import BrokerConnection
from kproto.net.oauth import (
    CallbackTokenProvider,
    OAuthToken,
    RefreshPolicy,
    SaslOauthBearer,
    check_extensions,
)
from kproto.net.oidc import OidcTokenProvider
from kproto.net.security import sasl_from_config
from kproto.protocol import ApiKey

from .http_faults import CLOSE, FOREVER, FaultServer, answer, redirect
from .oauth_support import JwtValidator, OidcServer, ReauthGateway, in_front_of_tansu

SECRET = "s3cret-Client-Pw!"          # distinctive: looked for in errors, reprs, logs
CLIENT = "kproto-app"


# --------------------------------------------------------------------------- the mechanism


class Scripted:
    def __init__(self, *answers: bytes | Exception) -> None:
        self.answers = list(answers)
        self.sent: list[bytes] = []

    def __call__(self, data: bytes) -> bytes:
        self.sent.append(data)
        got = self.answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got


def _static(token: str, expires: float | None = None) -> SaslOauthBearer:
    return SaslOauthBearer(CallbackTokenProvider(lambda: (token, expires)))


def test_initial_response_is_rfc7628_with_extensions() -> None:
    mech = SaslOauthBearer(CallbackTokenProvider(lambda: ("abc.def-_~+/=", None)),
                           extensions="logicalCluster=lkc-1, identityPoolId=pool-2")
    server = Scripted(b"")
    mech.authenticate(server)
    assert server.sent == [b"n,,\x01auth=Bearer abc.def-_~+/=\x01logicalCluster=lkc-1"
                           b"\x01identityPoolId=pool-2\x01\x01"]


@pytest.mark.parametrize("extensions, words", [
    ({"auth": "x"}, "reserved"), ({"bad name": "x"}, "invalid"), ({"k1": "x"}, "invalid"),
    ({"k": "\x01"}, "value"), ({"k": ""}, "value"), ("k", "key=value"), (5, "dict"),
])
def test_extensions_checked(extensions: Any, words: str) -> None:  # noqa: ANN401
    with pytest.raises(ConfigError, match=words):
        check_extensions(extensions)


@pytest.mark.parametrize("token", ["", "a b", "a\x01auth=Bearer x", "tok\n", "é"])
def test_token_that_would_break_the_framing_is_refused(token: str) -> None:
    with pytest.raises(SaslAuthenticationFailedError, match="RFC 6750") as info:
        _static(token).authenticate(Scripted(b""))
    assert token not in str(info.value) or not token


def test_server_error_json_gets_the_0x01_reply() -> None:
    # RFC 7628 3.2.2: the server's error challenge, the client's %x01, then the failure
    token = "eyJ.eyJ.sig"
    server = Scripted(b'{"status":"invalid_token","scope":"kafka write",'
                      b'"openid-configuration":"https://idp/.well-known/openid-configuration"}',
                      SaslAuthenticationFailedError(f"Authentication failed: {token}"))
    with pytest.raises(SaslAuthenticationFailedError) as info:
        _static(token).authenticate(server)
    assert server.sent[1] == b"\x01"
    err = info.value
    assert err.context["status"] == "invalid_token" and err.context["scope"] == "kafka write"
    assert "openid-configuration" in str(err.context["openid_configuration"])
    assert token not in str(err) and token not in repr(err)    # an echoing broker: cut out


def test_callback_shapes() -> None:
    far = time.time() + 3600
    extensions = {"traceId": "t1"}
    for fn, principal in [
        (lambda: ("t", far), None),
        (lambda cfg: ("t", far, "alice"), "alice"),                # confluent: oauth_cb(config)
        (lambda cfg: ("t", far * 1000, "alice", extensions), "alice"),  # milliseconds
    ]:
        tok = CallbackTokenProvider(fn, config="principal=x").token()
        assert tok.principal == principal and abs(tok.expires_at - far) < 1  # type: ignore

    class KafkaPythonProvider:          # kafka-python's AbstractTokenProvider
        def token(self) -> str:
            return "opaque-token"

        def extensions(self) -> dict[str, str]:
            return {"traceId": "t1"}

    mech = SaslOauthBearer(CallbackTokenProvider(KafkaPythonProvider()))
    server = Scripted(b"", b"")
    mech.authenticate(server)
    mech.authenticate(server)         # no expiry: asked for every login
    assert server.sent[0].endswith(b"\x01traceId=t1\x01\x01")
    with pytest.raises(SaslAuthenticationFailedError, match="expected a token string"):
        CallbackTokenProvider(lambda: 42).token()
    with pytest.raises(SaslAuthenticationFailedError, match="not a number"):
        CallbackTokenProvider(lambda: ("t", "soon")).token()
    with pytest.raises(SaslAuthenticationFailedError, match="expired"):
        CallbackTokenProvider(lambda: ("t", time.time() - 5)).token()


def test_callback_error_is_chained_and_typed() -> None:
    def broken() -> str:
        raise RuntimeError("IdP down")

    with pytest.raises(SaslAuthenticationFailedError, match="RuntimeError") as info:
        CallbackTokenProvider(broken).token()
    assert isinstance(info.value.__cause__, RuntimeError)


def test_refresh_policy_is_javas() -> None:
    policy = RefreshPolicy(window_jitter=0.0)
    now = 1_000_000.0
    # long-lived token: 80 % of the lifetime from its iat
    tok = OAuthToken("t", now + 3600, issued_at=now)
    assert policy.refresh_at(now, tok) == pytest.approx(now + 2880)
    # the buffer (300 s before expiry) wins over 95 %
    assert RefreshPolicy(0.95, 0.0).refresh_at(now, tok) == pytest.approx(now + 3300)
    # shorter than min_period + buffer: the window alone
    short = OAuthToken("t", now + 100)
    assert policy.refresh_at(now, short) == pytest.approx(now + 80)
    # jitter: between 80 % and 85 %
    for _ in range(50):
        assert now + 80 <= RefreshPolicy().refresh_at(now, short) <= now + 85
    with pytest.raises(ConfigError, match="window_factor"):
        RefreshPolicy(window_factor=0.2)


# --------------------------------------------------------------------------- real endpoint


@pytest.fixture(scope="module")
def ca() -> Any:  # noqa: ANN401
    trustme = pytest.importorskip("trustme")
    return trustme.CA()


@pytest.fixture(scope="module")
def ca_file(ca: Any, tmp_path_factory: pytest.TempPathFactory) -> str:  # noqa: ANN401
    path = tmp_path_factory.mktemp("oauth") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture()
def oidc(ca: Any) -> Iterator[OidcServer]:  # noqa: ANN401
    server = OidcServer(ca, {CLIENT: SECRET, "other-app": "other-secret"})
    yield server
    server.stop()


def _settings(oidc: OidcServer, ca_file: str, **more: Any) -> dict[str, Any]:  # noqa: ANN401
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl_allow_plaintext_plain": True,
            "sasl.oauthbearer.token.endpoint.url": oidc.token_url,
            "sasl.oauthbearer.client.id": CLIENT, "sasl.oauthbearer.client.secret": SECRET,
            "sasl.oauthbearer.scope": "kafka", "https.ca.location": ca_file, **more}


def _provider(oidc: OidcServer, ca_file: str, **kw: Any) -> OidcTokenProvider:  # noqa: ANN401
    return OidcTokenProvider(oidc.token_url, CLIENT, SECRET, scope="kafka", cafile=ca_file, **kw)


def test_client_credentials_request_is_javas(oidc: OidcServer, ca_file: str) -> None:
    start = time.monotonic()
    tok = _provider(oidc, ca_file).token()
    took = time.monotonic() - start
    assert tok.principal == CLIENT and tok.expires_at > time.time() + 250  # type: ignore
    [req] = oidc.requests
    assert req["form"] == {"grant_type": ["client_credentials"], "scope": ["kafka"]}
    assert req["authorization"].startswith("Basic ")
    assert took < 5, took


def test_wrong_secret_is_final_and_secret_free(oidc: OidcServer, ca_file: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kproto")
    provider = OidcTokenProvider(oidc.token_url, CLIENT, "wrong-" + SECRET, cafile=ca_file)
    with pytest.raises(SaslAuthenticationFailedError, match="HTTP 401: invalid_client") as info:
        provider.token()
    assert len(oidc.requests) == 1                      # a 401 is not retried (Java)
    assert oidc.token_url in str(info.value)
    _no_secret(info.value, caplog.text, SECRET)


def test_token_without_exp_or_expired(oidc: OidcServer, ca_file: str) -> None:
    oidc.omit = {"exp"}
    with pytest.raises(SaslAuthenticationFailedError, match="no 'exp' claim") as info:
        _provider(oidc, ca_file).token()
    assert oidc.token_url in str(info.value)
    oidc.omit = {"sub"}
    with pytest.raises(SaslAuthenticationFailedError, match="'sub' claim"):
        _provider(oidc, ca_file).token()
    # another claim name for the principal (sasl.oauthbearer.sub.claim.name)
    oidc.omit = set()
    assert _provider(oidc, ca_file, sub_claim="aud").token().principal == "kafka-broker"
    oidc.lifetime = -30
    with pytest.raises(SaslAuthenticationFailedError, match="expired"):
        _provider(oidc, ca_file).token()


def test_refresh_before_expiry_and_old_token_while_refresh_fails(
        oidc: OidcServer, ca_file: str, caplog: pytest.LogCaptureFixture) -> None:
    oidc.lifetime = 100                 # shorter than min period + buffer: 80-85 % of it
    offset = [0.0]
    oidc.clock = provider_clock = lambda: time.time() + offset[0]  # noqa: E731
    provider = _provider(oidc, ca_file, clock=provider_clock)
    first = provider.token()
    offset[0] = 79
    assert provider.token() is first and provider.fetched == 1
    offset[0] = 86                      # past the refresh point, before the expiry:
    assert provider.token() is first    # it serves on while a new one is fetched apart
    _refreshed(provider)
    second = provider.token()
    assert second.value != first.value and provider.fetched == 2
    assert second.expires_at > first.expires_at  # type: ignore[operator]
    # the endpoint now refuses: the current token serves while valid, then the error
    caplog.set_level(logging.DEBUG, logger="kproto")
    oidc.clients[CLIENT] = "rotated"
    offset[0] = 86 + 86
    asked = len(oidc.requests)
    assert provider.token() is second                  # one attempt, a warning
    _refreshed(provider)
    assert provider.token() is second                  # within the backoff: no attempt
    _refreshed(provider)
    assert len(oidc.requests) == asked + 1
    assert "refreshing the OAUTHBEARER token failed" in caplog.text
    offset[0] = 86 + 101
    time.sleep(0.15)                                   # past the 0.1 s retry backoff
    with pytest.raises(SaslAuthenticationFailedError, match="401"):
        provider.token()
    _no_secret(None, caplog.text, SECRET)
    assert first.value not in caplog.text and second.value not in caplog.text


def _refreshed(provider: Any) -> None:  # noqa: ANN401
    """Wait for the provider's background refresh, if one runs."""
    thread = provider._refresher
    if thread is not None:
        thread.join(30)
        assert not thread.is_alive()


def test_a_slow_endpoint_never_holds_up_a_login_with_a_valid_token(
        oidc: OidcServer, ca_file: str) -> None:
    """Past the refresh point a login (a re-authentication on a consumer's poll, the
    producer's sender) got its token from a fetch on its own thread: an endpoint taking
    seconds held the poll that long (up to connect + read timeouts, 20 s by default).
    Java refreshes on a thread of its own; so does kproto now."""
    oidc.lifetime = 100
    offset = [0.0]
    oidc.clock = clock = lambda: time.time() + offset[0]  # noqa: E731
    provider = _provider(oidc, ca_file, clock=clock)
    first = provider.token()
    real, slow = oidc.answer, threading.Event()

    def answer(*args: Any) -> Any:  # noqa: ANN401
        slow.wait(30)                   # held until the test has its token
        return real(*args)

    oidc.answer = answer  # type: ignore[method-assign]
    try:
        offset[0] = 90
        start = time.monotonic()
        for _ in range(5):
            assert provider.token() is first
        took = time.monotonic() - start
        slow.set()
        _refreshed(provider)
    finally:
        oidc.answer = real  # type: ignore[method-assign]
    assert took < 1.0, took
    second = provider.token()
    assert second.value != first.value and provider.fetched == 2
    assert len(oidc.requests) == 2      # one refresh, however many logins asked meanwhile


# --------------------------------------------------------------------------- lying endpoints


@pytest.fixture()
def fault() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


def _fault_provider(url: str, **kw: Any) -> OidcTokenProvider:  # noqa: ANN401
    kw.setdefault("policy", RefreshPolicy(retry_backoff=0.05, retry_backoff_max=0.3))
    return OidcTokenProvider(url + "/token", CLIENT, SECRET, connect_timeout=0.5,
                             read_timeout=0.5, **kw)


def test_endpoint_that_hangs_ends_at_the_deadline(fault: FaultServer,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kproto")
    fault.default = [FOREVER]
    start = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError, match="no answer within the 1 s") as info:
        _fault_provider(fault.url).token()
    took = time.monotonic() - start
    assert took < 4, took            # attempts of 1 s within the 0.3 s retry window
    assert fault.url in str(info.value) and "plain http" in caplog.text
    _no_secret(info.value, caplog.text, SECRET)


@pytest.mark.parametrize("body, words", [
    (answer(200, b"<html><body>Login</body></html>"), "an HTML page"),
    (answer(200, b"{not json"), "not JSON"),
    (answer(200, b'{"token_type": "Bearer"}'), "no access_token"),
    (answer(200, b'{"access_token": "not-a-jwt"}'), "not a JWT"),
    (answer(200, b'{"access_token": "a.!!!.c"}'), "not base64url JSON"),
    (answer(200, b"x" * (11 << 20)), "larger than 1048576 bytes"),
    (answer(400, b'{"error":"invalid_scope","error_description":"scope kafka unknown"}'),
     "HTTP 400: invalid_scope: scope kafka unknown"),
])
def test_endpoint_that_lies(fault: FaultServer, body: bytes, words: str) -> None:
    fault.default = [body]
    with pytest.raises(SaslAuthenticationFailedError, match=words) as info:
        _fault_provider(fault.url).token()
    assert fault.url in str(info.value) and len(fault.requests) == 1


def _token_json(token: str) -> bytes:
    return json.dumps({"access_token": token, "token_type": "Bearer"}).encode()


def test_what_an_attacker_found(oidc: OidcServer, fault: FaultServer) -> None:
    token = oidc.issue(CLIENT, "kafka")
    # a token answered form-encoded (as GitHub does without Accept: json): refused, and
    # the body (the token) is in no exception chained to the error (JSONDecodeError.doc)
    fault.default = [answer(200, f"access_token={token}&token_type=bearer".encode())]
    with pytest.raises(SaslAuthenticationFailedError, match="not JSON") as info:
        _fault_provider(fault.url).token()
    _no_secret(info.value, "", token)
    # a token that would break the RFC 7628 framing is refused when fetched, not cached
    fault.default = [answer(200, _token_json(token + "\x01auth=Bearer x"))]
    with pytest.raises(SaslAuthenticationFailedError, match="RFC 6750"):
        _fault_provider(fault.url).token()
    # a redirect loop is not tried again and again
    fault.requests.clear()
    fault.default = redirect(fault.url + "/token", 302)
    with pytest.raises(SaslAuthenticationFailedError, match="more than 5 redirects"):
        _fault_provider(fault.url, policy=RefreshPolicy(retry_backoff=0.01,
                                                        retry_backoff_max=5)).token()
    assert len(fault.requests) == 6
    # credentials in the URL (urllib3 quoted part of a password that broke its parsing)
    with pytest.raises(ConfigError, match="holds credentials") as config:
        OidcTokenProvider(f"https://{CLIENT}:{SECRET}@idp.example/token")
    assert SECRET not in str(config.value)
    # a broker echoing the token in its first answer's error
    echo = Scripted(SaslAuthenticationFailedError(f"bad token {token}"))
    with pytest.raises(SaslAuthenticationFailedError, match="bad token") as info:
        _static(token).authenticate(echo)
    _no_secret(info.value, "", token)


def test_huge_or_odd_exp(oidc: OidcServer, fault: FaultServer) -> None:
    for exp, ok in [(10 ** 400, True), (1e300, True), (-5, False), (True, False),
                    ("2030", False)]:
        fault.default = [answer(200, _token_json(oidc.issue(CLIENT, "kafka", exp=exp)))]
        provider = _fault_provider(fault.url)
        if ok:
            assert provider.token().expires_at == 253402300799.0
        else:
            with pytest.raises(SaslAuthenticationFailedError, match="'exp' claim"):
                provider.token()


def test_an_answer_cut_short_is_no_answer(oidc: OidcServer, fault: FaultServer) -> None:
    """An endpoint that sends a status line and hangs: the deadline shut the socket, and
    what had been read was taken as a whole answer, an empty HTTP 200 ("the answer has
    no access_token", final). A connection cut in the headers, or an empty 2xx, is
    tried again (Java's HttpJwtRetriever retries an empty answer)."""
    fault.default = [b"HTTP/1.1 200 OK\r\n", FOREVER]
    with pytest.raises(SaslAuthenticationFailedError, match="no answer within the 1 s"):
        _fault_provider(fault.url).token()
    good = _token_json(oidc.issue(CLIENT, "kafka"))
    fault.requests.clear()
    fault.answers = [[b"HTTP/1.1 200 OK\r\nContent-Le", CLOSE], [answer(200, b"")],
                     [answer(200, good)]]
    provider = _fault_provider(fault.url, policy=RefreshPolicy(retry_backoff=0.01,
                                                               retry_backoff_max=5))
    assert provider.token().principal == CLIENT and len(fault.requests) == 3


def test_retries_5xx_then_succeeds(oidc: OidcServer, fault: FaultServer) -> None:
    good = _token_json(oidc.issue(CLIENT, "kafka"))
    fault.answers = [[answer(503, b"busy")], [answer(500, b"")], [answer(200, good)]]
    provider = _fault_provider(fault.url, policy=RefreshPolicy(retry_backoff=0.01,
                                                               retry_backoff_max=5))
    assert provider.token().principal == CLIENT and len(fault.requests) == 3


def test_redirects(fault: FaultServer) -> None:
    with FaultServer() as other:
        other.default = [answer(401, b'{"error":"invalid_client"}')]
        fault.default = redirect(other.url + "/token", 307)
        with pytest.raises(SaslAuthenticationFailedError, match="401"):
            _fault_provider(fault.url).token()
        assert "authorization" in fault.requests[0].headers
        assert "authorization" not in other.requests[0].headers    # another host: dropped
        assert other.requests[0].method == "POST"


def test_https_to_http_redirect_refused(ca: Any, fault: FaultServer, ca_file: str) -> None:  # noqa: ANN401
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    with FaultServer(ssl_context=ctx) as tls:
        tls.default = redirect(fault.url + "/token", 302)
        with pytest.raises(SaslAuthenticationFailedError, match="https to http"):
            _fault_provider(tls.url, cafile=ca_file).token()
        assert not fault.requests


def test_file_url_token(oidc: OidcServer, tmp_path: Any) -> None:  # noqa: ANN401
    path = tmp_path / "token.jwt"
    path.write_text(oidc.issue("file-user", "kafka") + "\n")
    assert OidcTokenProvider(f"file://{path}").token().principal == "file-user"
    with pytest.raises(SaslAuthenticationFailedError, match="cannot read"):
        OidcTokenProvider(f"file://{tmp_path}/missing").token()


def test_config_errors() -> None:
    base = {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"}
    for cfg, words in [
        ({}, "needs a token source"),
        ({"sasl_oauthbearer_token_endpoint_url": "https://idp/token"}, "client_id"),
        ({"sasl_oauthbearer_token_endpoint_url": "idp/token"}, "not an http"),
        ({"sasl_oauthbearer_method": "oidc"}, "needs sasl_oauthbearer_token_endpoint_url"),
        ({"sasl_oauthbearer_method": "magic"}, "'default' or 'oidc'"),
        ({"oauth_cb": print, "sasl_oauth_token_provider": object()}, "one token source"),
        ({"oauth_cb": print, "sasl_login_callback_handler_class": "com.acme.Handler"},
         "Java class"),
        ({"oauth_cb": print, "sasl_login_refresh_window_jitter": "x"}, "number"),
        ({"oauth_cb": print, "sasl_login_refresh_window_jitter": "nan"}, "finite"),
    ]:
        with pytest.raises(ConfigError, match=words):
            sasl_from_config({**base, **cfg})
    with pytest.raises(ConfigError, match="bearer token in clear"):
        sasl_from_config({**base, "security_protocol": "SASL_PLAINTEXT", "oauth_cb": print})
    # Java's handler class names the token endpoint: accepted
    mech = sasl_from_config({
        **base, "sasl_oauthbearer_token_endpoint_url": "https://idp/token",
        "sasl_oauthbearer_client_id": CLIENT, "sasl_oauthbearer_client_secret": SECRET,
        "sasl.login.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"})
    assert isinstance(mech, SaslOauthBearer)


def test_secret_never_in_repr_or_pickle_text(oidc: OidcServer, ca_file: str) -> None:
    mech = sasl_from_config(_settings(oidc, ca_file))
    assert isinstance(mech, SaslOauthBearer)
    token = mech.provider.token()
    for text in (repr(mech), str(mech), repr(mech.provider), repr(token), str(token)):
        assert SECRET not in text and token.value not in text and "***" in text
    again = pickle.loads(pickle.dumps(mech))      # to Spark executors: the token stays home
    assert again.provider._token is None and again.provider.token().principal == CLIENT


def _no_secret(exc: BaseException | None, logs: str, *secrets: str) -> None:
    """No secret in the exception, anything it chains to, their tracebacks, or the logs."""
    import traceback

    seen: list[str] = [logs]
    while exc is not None:          # (suppressed contexts too: a tool may still show them)
        seen += [str(exc), repr(exc), "".join(traceback.format_exception(exc)),
                 repr(vars(exc)), repr(getattr(exc, "doc", "")), repr(getattr(exc, "object", ""))]
        exc = exc.__cause__ or exc.__context__
    for secret in secrets:
        assert not any(secret in text for text in seen), secret
    gc.collect()


# --------------------------------------------------------------------------- a broker


@pytest.fixture(scope="module")
def oidc_module(ca: Any) -> Iterator[OidcServer]:  # noqa: ANN401
    server = OidcServer(ca, {CLIENT: SECRET})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gateway(oidc_module: OidcServer, ca_file: str) -> Iterator[ReauthGateway]:
    """Tansu advertising the gateway's port, so every connection goes through it."""

    validator = JwtValidator(oidc_module.url + "/jwks", ca_file, issuer=oidc_module.issuer,
                             audience="kafka-broker")
    gw = ReauthGateway(("127.0.0.1", 1), validator=validator)
    with in_front_of_tansu(gw):
        yield gw


@pytest.mark.broker
def test_login_extensions_and_one_token_for_all_connections(
        gateway: ReauthGateway, oidc_module: OidcServer, ca_file: str) -> None:
    before = len(oidc_module.requests)
    mech = sasl_from_config(_settings(oidc_module, ca_file,
                                      **{"sasl.oauthbearer.extensions": "traceId=abc"}))
    for _ in range(3):
        with BrokerConnection(gateway.address, sasl=mech, timeout=10) as conn:
            assert conn.request(ApiKey.METADATA, {"topics": None})["brokers"]
    assert len(oidc_module.requests) - before == 1      # the token is shared
    assert gateway.sessions[-1].principal == CLIENT
    assert gateway.sessions[-1].extensions == [{"traceId": "abc"}]


@pytest.mark.broker
def test_broker_refuses_other_audience_and_expired_token(
        gateway: ReauthGateway, oidc_module: OidcServer) -> None:
    cases = [(oidc_module.issue(CLIENT, "kafka", aud="another-service"), "InvalidAudience"),
             (oidc_module.issue(CLIENT, "kafka", exp=int(time.time()) - 60), "Expired")]
    for token, why in cases:
        # a provider that lies about the expiry: only the broker can tell
        mech = SaslOauthBearer(CallbackTokenProvider(lambda t=token: (t, time.time() + 60)))
        conn = BrokerConnection(gateway.address, sasl=mech, timeout=10)
        start = time.monotonic()
        with pytest.raises(SaslAuthenticationFailedError, match="invalid_token") as info:
            conn.connect()
        assert time.monotonic() - start < 5 and not conn.connected
        assert info.value.context["scope"] == "kafka" and why in gateway.refused[-2]
        assert token not in str(info.value)


@pytest.mark.broker
def test_tansu_rsasl_refuses_cleanly(oidc_module: OidcServer) -> None:
    from kproto.testing import TansuBroker

    token = oidc_module.issue(CLIENT, "kafka")
    with TansuBroker(extra_args=["--authentication"]) as broker:
        conn = BrokerConnection(broker.bootstrap, timeout=10,
                                sasl=SaslOauthBearer(CallbackTokenProvider(lambda: token)))
        with pytest.raises(SaslAuthenticationFailedError) as info:
            conn.connect()
    assert token not in str(info.value) and not conn.connected


@pytest.mark.broker
def test_producer_and_consumer_end_to_end(gateway: ReauthGateway, oidc_module: OidcServer,
                                          ca_file: str) -> None:
    from kproto import Admin, Consumer, Producer

    topic = f"oauth-{time.monotonic_ns()}"
    cfg = _settings(oidc_module, ca_file)
    java = {  # as a Java (or Spark) client is configured for KIP-768
        "bootstrap.servers": gateway.address, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER", "sasl_allow_plaintext_plain": True,
        "sasl.login.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url": oidc_module.token_url,
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                            f'OAuthBearerLoginModule required clientId="{CLIENT}" '
                            f'clientSecret="{SECRET}" scope="kafka" extension_app="admin";',
        "https.ca.location": ca_file}
    with Admin(java) as admin:
        admin.create_topics({topic: 1})
    assert gateway.sessions[-1].extensions == [{"app": "admin"}]
    with Producer({"bootstrap.servers": gateway.address, **cfg}) as producer:
        for i in range(20):
            producer.send(topic, f"v{i}".encode(), key=b"k")
        producer.flush(30)
    calls: list[str] = []

    def oauth_cb(config: str) -> tuple[str, float]:         # confluent-kafka's shape
        calls.append(config)
        return oidc_module.issue(CLIENT, "kafka"), time.time() + 300

    with Consumer({"bootstrap.servers": gateway.address, "auto.offset.reset": "earliest",
                   "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                   "sasl_allow_plaintext_plain": True, "sasl.oauthbearer.config": "scope=kafka"},
                  oauth_cb=oauth_cb) as consumer:
        consumer.assign([(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(1000)]
    assert got == [f"v{i}".encode() for i in range(20)]
    assert calls == ["scope=kafka"]                      # one token for every connection
    # every connection (Admin, Producer, Consumer and their Fetch connections) went
    # through the gateway and logged in there
    assert sum(s.principal == CLIENT for s in gateway.sessions) >= 4
