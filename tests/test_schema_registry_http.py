"""The registry client's HTTP layer against a misbehaving server (tests/http_faults.py)
and the in-memory registry: redirects never carry credentials to another origin,
every attempt ends at its deadline however the answer drips, retries stay within
their documented bound, and no secret reaches an error, a repr or a log line."""

from __future__ import annotations

import base64
import json
import logging
import pickle
import ssl
import time
import traceback
import urllib.parse

import pytest

from kproto.errors import ConfigError, SchemaRegistryError
from kproto.schema_registry import SchemaRegistryClient
from kproto.testing import SchemaRegistryServer
from tests.http_faults import FOREVER, FaultServer, answer, drip, redirect

PASSWORD = "Pa55word-s3cret"
TOKEN = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
#: generous: a call with a 1 s deadline ends well within this on a loaded 2-core machine
MARGIN = 3.0


def _secret_free(*texts: str) -> None:
    for text in texts:
        assert all(s not in text for s in (PASSWORD, "Pa55", "5555/", "5555?", "user:5555",
                                          TOKEN)), text


def _everything(exc: BaseException) -> str:
    """What a traceback of ``exc`` shows (its chained exceptions included) and its repr."""
    return "".join(traceback.format_exception(exc)) + repr(exc) + repr(vars(exc))


@pytest.fixture
def servers():
    with FaultServer() as first, FaultServer() as second:
        yield first, second


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """(server-side context, CA file) for 127.0.0.1."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca_file = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return context, str(ca_file)


# ---------------------------------------------------------------------- redirects

@pytest.mark.parametrize("where", ["another port", "another host"])
@pytest.mark.parametrize("given", ["basic_auth", "in the url"])
def test_credentials_never_follow_a_redirect_to_another_origin(servers, where, given):
    first, second = servers
    host = "127.0.0.1" if where == "another port" else "localhost"
    first.answers = [redirect(f"http://{host}:{second.port}/elsewhere/subjects")]
    second.answers = [[answer(200, b'["s"]')]]
    if given == "basic_auth":
        client = SchemaRegistryClient(first.url, basic_auth=f"alice:{PASSWORD}")
    else:
        client = SchemaRegistryClient(f"http://alice:{PASSWORD}@127.0.0.1:{first.port}")
    assert client.get_subjects() == ["s"]
    assert first.requests[0].headers["authorization"] == f"Basic {TOKEN}"
    assert [r.path for r in second.requests] == ["/elsewhere/subjects"]
    assert "authorization" not in second.requests[0].headers


def test_a_redirect_within_the_origin_keeps_credentials_method_and_body(servers):
    first, _ = servers
    first.answers = [redirect("/v2/subjects/s/versions", 307), [answer(200, b'{"id": 3}')]]
    client = SchemaRegistryClient(first.url, basic_auth=f"alice:{PASSWORD}")
    assert client.register("s", '{"type": "string"}') == 3
    hop, final = first.requests
    assert (hop.method, final.method, final.path) == ("POST", "POST", "/v2/subjects/s/versions")
    assert final.headers["authorization"] == f"Basic {TOKEN}"
    assert json.loads(final.body) == {"schema": '{"type": "string"}'}


def test_no_redirect_from_https_to_http(servers, tls):
    context, ca_file = tls
    plain, _ = servers
    with FaultServer(ssl_context=context) as secure:
        secure.answers = [redirect(f"http://127.0.0.1:{plain.port}/subjects")]
        client = SchemaRegistryClient(secure.url, basic_auth=f"alice:{PASSWORD}",
                                      ssl_ca_location=ca_file)
        with pytest.raises(SchemaRegistryError) as info:
            client.get_subjects()
    assert "https to http" in str(info.value) and not info.value.retriable
    assert plain.requests == []
    _secret_free(_everything(info.value))


def test_redirects_are_bounded(servers):
    first, _ = servers
    first.answers = [redirect(f"/hop/{i}") for i in range(30)]
    client = SchemaRegistryClient(first.url, max_retries=3)
    with pytest.raises(SchemaRegistryError) as info:
        client.get_subjects()
    assert "redirects" in str(info.value) and not info.value.retriable
    assert len(first.requests) == 6                     # the request and 5 redirects


def test_the_proxy_of_the_environment_is_used_as_urllib_did(servers, monkeypatch):
    proxy, registry = servers
    monkeypatch.setenv("http_proxy", f"http://puser:ppass@127.0.0.1:{proxy.port}")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    proxy.default = [answer(200, b'["via the proxy"]')]
    client = SchemaRegistryClient("http://registry.invalid:8081", basic_auth="alice:pw")
    assert client.get_subjects() == ["via the proxy"]
    (asked,) = proxy.requests
    assert asked.path == "http://registry.invalid:8081/subjects"
    assert asked.headers["proxy-authorization"] == "Basic " + base64.b64encode(
        b"puser:ppass").decode()
    assert SchemaRegistryClient(registry.url).get_subjects() == []     # no_proxy: direct
    assert len(proxy.requests) == 1 and len(registry.requests) == 1


# ---------------------------------------------------------------------- deadlines

HEADERS = answer(200, b'["s"]', {"Content-Type": "application/json",
                                 "X-Padding": "p" * 40})


def _ends_within_its_deadline(client: SchemaRegistryClient, deadline: float) -> SchemaRegistryError:
    started = time.monotonic()
    with pytest.raises(SchemaRegistryError) as info:
        client.get_subjects()
    elapsed = time.monotonic() - started
    assert elapsed < deadline + MARGIN, elapsed
    assert info.value.retriable and info.value.status is None
    assert f"{deadline:g} s" in str(info.value), str(info.value)
    return info.value


def test_dripping_headers_end_at_the_deadline(servers):
    first, _ = servers
    first.answers = [drip(HEADERS, every=0.25)]          # ~30 s for the whole answer
    _ends_within_its_deadline(SchemaRegistryClient(first.url, timeout=1, max_retries=0), 1)


def test_a_dripping_body_ends_at_the_deadline_on_a_reused_connection(servers):
    first, _ = servers
    body = json.dumps([f"subject-{i}" for i in range(20)]).encode()
    head, _, _ = answer(200, body).partition(b"\r\n\r\n")
    first.answers = [[answer(200, b'["s"]')], [head + b"\r\n\r\n", *drip(body, every=0.25)]]
    client = SchemaRegistryClient(first.url, timeout=1, max_retries=0)
    assert client.get_subjects() == ["s"]               # the connection is kept for the next
    _ends_within_its_deadline(client, 1)


def test_a_server_that_never_answers_ends_at_the_deadline(servers):
    first, _ = servers
    first.answers = [[FOREVER]]
    _ends_within_its_deadline(SchemaRegistryClient(first.url, timeout=1, max_retries=0), 1)


def test_dripping_over_tls_ends_at_the_deadline(tls):
    context, ca_file = tls
    with FaultServer(ssl_context=context) as secure:
        secure.answers = [drip(HEADERS, every=0.25)]
        client = SchemaRegistryClient(secure.url, ssl_ca_location=ca_file, timeout=1,
                                      max_retries=0)
        _ends_within_its_deadline(client, 1)


def test_retries_and_failover_stay_within_the_documented_bound(servers):
    """len(urls) * ((max_retries + 1) * timeout + the backoff sleeps): 2 * (3 * 0.5 + 0.3)."""
    first, second = servers
    first.default = second.default = [FOREVER]
    client = SchemaRegistryClient(f"{first.url},{second.url}", timeout=0.5, max_retries=2,
                                  retry_backoff=0.1)
    started = time.monotonic()
    with pytest.raises(SchemaRegistryError):
        client.get_subjects()
    elapsed = time.monotonic() - started
    assert len(first.requests) == len(second.requests) == 3
    assert 3.6 - 0.1 <= elapsed < 3.6 + MARGIN, elapsed


# ---------------------------------------------------------------------- answers

def test_failing_answers_then_success(servers):
    first, _ = servers
    first.answers = [[answer(502, b"<html>Bad gateway</html>")],
                     [answer(503, b'{"error_code": 50301, "message": "busy"}')],
                     [answer(200, b'["s"]')]]
    client = SchemaRegistryClient(first.url, max_retries=2, retry_backoff=0.01)
    assert client.get_subjects() == ["s"]
    assert len(first.requests) == 3


@pytest.mark.parametrize("body, expected", [
    (b"<html>not json", "not JSON"),
    (b'{"schemaType": "AVRO"}', "unexpected answer"),          # no "schema"
    (b'["a", "list"]', "unexpected answer"),
])
def test_garbage_answers_are_registry_errors(servers, body, expected):
    first, _ = servers
    first.default = [answer(200, body)]
    client = SchemaRegistryClient(first.url, max_retries=0)
    with pytest.raises(SchemaRegistryError) as info:
        client.get_schema(1)
    assert expected in str(info.value) and f"{first.url}/schemas/ids/1" in str(info.value)
    assert info.value.schema_id == 1 and not info.value.retriable


def test_an_answer_echoing_the_credentials_is_not_echoed(servers):
    first, _ = servers
    echo = f"bad request from alice:{PASSWORD} (Authorization: Basic {TOKEN})".encode()
    first.answers = [[answer(400, echo)], [answer(200, echo)],
                     [answer(400, json.dumps({"error_code": 400, "message": echo.decode()})
                             .encode())]]
    client = SchemaRegistryClient(first.url, basic_auth=f"alice:{PASSWORD}", max_retries=0)
    for _ in range(3):
        with pytest.raises(SchemaRegistryError) as info:
            client.get_subjects()
        assert "bad request" in str(info.value)
        _secret_free(_everything(info.value))


# ---------------------------------------------------------------------- credentials per URL

def _users(server: FaultServer) -> list[str | None]:
    """The user:password each request to ``server`` carried (None: no Authorization)."""
    found = [r.headers.get("authorization") for r in server.requests]
    return [None if a is None else base64.b64decode(a.split()[1]).decode() for a in found]


def test_credentials_in_a_url_go_to_that_url_only(servers):
    """Each URL of a list keeps its own user info (confluent-kafka sends the first URL's
    to every URL: to another organisation's registry too); basic_auth goes to all."""
    first, second = servers
    first.default = [answer(500, b'{"error_code": 50001, "message": "down"}')]
    second.default = [answer(200, b'["s"]')]
    hosts = [f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"]
    for url, expected in [
        (f"http://alice:apw@{hosts[0]},http://bob:bpw@{hosts[1]}", ["alice:apw", "bob:bpw"]),
        (f"http://alice:apw@{hosts[0]},http://{hosts[1]}", ["alice:apw", None]),
        (f"http://{hosts[0]},http://bob:bpw@{hosts[1]}", [None, "bob:bpw"]),
    ]:
        first.requests.clear()
        second.requests.clear()
        client = SchemaRegistryClient(url, max_retries=0)
        shipped = pickle.loads(pickle.dumps(client))                # as to an executor
        assert client.get_subjects() == shipped.get_subjects() == ["s"]
        assert _users(first) == [expected[0]] * 2 and _users(second) == [expected[1]] * 2
        assert "apw" not in repr(client) and "bpw" not in repr(vars(client))
    first.requests.clear()
    second.requests.clear()
    client = SchemaRegistryClient(f"{first.url},{second.url}", basic_auth="carol:cpw",
                                  max_retries=0)
    assert client.get_subjects() == ["s"]
    assert _users(first) == _users(second) == ["carol:cpw"]
    with pytest.raises(ConfigError, match="twice"):
        SchemaRegistryClient(f"{first.url},http://bob:bpw@{hosts[1]}", basic_auth="carol:cpw")


# ---------------------------------------------------------------------- secrets

#: passwords whose escaped forms (JSON, repr, URL-quoted) differ from them
NASTY = ["pässwörd", 'quo"te\\pw', "per%25cent@at:co/lon", "ünï'\"\\%@:/ ,#?€", "Pa55\nline"]


def _forms(user: str, password: str) -> list[str]:
    """Every way an answer or an error might spell the credentials."""
    forms = [base64.b64encode(f"{user}:{password}".encode()).decode()]
    for text in (password, f"{user}:{password}"):
        forms += [text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1],
                  repr(text)[1:-1], ascii(text)[1:-1], urllib.parse.quote(text, safe=""),
                  urllib.parse.quote(text), urllib.parse.quote_plus(text)]
    return forms


@pytest.mark.parametrize("password", NASTY)
@pytest.mark.parametrize("given", ["basic_auth", "in the url"])
def test_answers_echoing_a_nasty_password_are_scrubbed(servers, password, given):
    """An answer may echo the credentials however it likes: raw, in JSON (escaped when it
    is serialised again), base64, URL-quoted, in a redirect's Location."""
    first, _ = servers
    user = "user"
    both = f"{user}:{password}"
    token = base64.b64encode(both.encode()).decode()
    quoted = urllib.parse.quote(password, safe="")
    echoes = [
        answer(200, json.dumps({"oops": f"you sent {both}", both: [password]}).encode()),
        answer(200, json.dumps({"oops": f"you sent {both}"}, ensure_ascii=False).encode()),
        answer(400, json.dumps({"error_code": 400, "message": {"detail": both,
                                                              "token": token}}).encode()),
        answer(400, json.dumps({"error_code": 400, "message": [password, quoted]}).encode()),
        answer(401, f"plain: {both} / {token} / {quoted}".encode()),
        answer(200, f"not json {password} {urllib.parse.quote_plus(password)}".encode()),
        answer(302, b"", {"Location": f"ftp://elsewhere/{quoted}?{token}"}),
        answer(400, b"", reason=quoted),
    ]
    first.answers = [[one] for one in echoes]
    if given == "basic_auth":
        client = SchemaRegistryClient(first.url, basic_auth=(user, password), max_retries=0)
    else:
        client = SchemaRegistryClient(f"http://{user}:{quoted}@127.0.0.1:{first.port}",
                                      max_retries=0)
    for _ in echoes:
        with pytest.raises(SchemaRegistryError) as info:
            client.get_schema(1)
        shown = _everything(info.value)
        leaked = [form for form in _forms(user, password) if form in shown]
        assert not leaked, (leaked, shown)
        assert "***" in str(info.value), str(info.value)
    assert first.requests[0].headers["authorization"] == f"Basic {token}"



@pytest.mark.parametrize("url", [
    f"svc:{PASSWORD}@registry:8081",
    f"htps://user:{PASSWORD}@registry",
    f"http://user:{PASSWORD}@registry:notaport",
    "http://user:Pa55/word@registry",
    "http://user:5555/word@registry",            # parses as host "user", port 5555
    "http://user:5555?word@registry",
    "http://user:Pa55#word@registry",
    "http://user:Pa55,word@registry",
    f"http://user:{PASSWORD}@",
    f"http://registry,ftp://user:{PASSWORD}@other",
])
def test_a_refused_url_never_shows_its_password(url):
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient(url)
    _secret_free(_everything(info.value))
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient.from_config({"url": url})
    _secret_free(_everything(info.value))


def test_clients_with_credentials_never_show_them_and_pickle_with_them():
    with SchemaRegistryServer(users={"alice": PASSWORD}) as server:
        host = server.url.split("//")[1]
        clients = [
            SchemaRegistryClient(server.url, basic_auth=f"alice:{PASSWORD}",
                                 ssl_key_password=PASSWORD),
            SchemaRegistryClient(f"http://alice:{PASSWORD}@{host}"),
            SchemaRegistryClient.from_config({"url": server.url, "ssl.key.password": PASSWORD,
                                              "basic.auth.user.info": f"alice:{PASSWORD}"}),
        ]
        for client in clients:
            shipped = pickle.loads(pickle.dumps(client))   # as to a Spark executor
            assert shipped.get_subjects() == []            # still authenticates
            for one in (client, shipped):
                _secret_free(repr(one), str(one), repr(vars(one)),
                             repr({k: vars(v) for k, v in vars(one).items()
                                   if hasattr(v, "__dict__")}))


def test_errors_of_an_unreachable_or_failing_registry_never_show_credentials(servers):
    first, _ = servers
    first.default = [answer(500, b"oops")]
    for url in (f"http://alice:{PASSWORD}@127.0.0.1:9", f"http://alice:{PASSWORD}@{first.url[7:]}"):
        with pytest.raises(SchemaRegistryError) as info:
            SchemaRegistryClient(url, max_retries=0, timeout=2).get_schema(1)
        _secret_free(_everything(info.value))


def test_log_lines_never_show_credentials(servers, caplog):
    first, second = servers
    first.answers = [[answer(503, b"busy")], redirect(f"{second.url}/subjects"),
                     redirect("/again"), [answer(404, b'{"error_code": 40403}')]]
    second.default = [answer(200, b'["s"]')]
    client = SchemaRegistryClient(first.url, basic_auth=f"alice:{PASSWORD}",
                                  retry_backoff=0.01)
    with caplog.at_level(logging.DEBUG):
        assert client.get_subjects() == ["s"]
        with pytest.raises(SchemaRegistryError):
            client.get_schema(1)
        with pytest.raises(SchemaRegistryError):
            SchemaRegistryClient(f"http://alice:{PASSWORD}@127.0.0.1:9", max_retries=1,
                                 retry_backoff=0.01).get_subjects()
    assert "redirect" in caplog.text.lower()
    _secret_free(caplog.text, *(repr(r.args) for r in caplog.records))
