"""KIP-368 re-authentication (kproto/net/blocking.py) against a broker that enforces
the session lifetime.

The in-test gateway (tests/oauth_support.py: ``ReauthGateway``, NOT A BROKER, in front
of a real Tansu that advertises the gateway's port) answers SaslAuthenticate with
``session_lifetime_ms`` (Kafka's ``connections.max.reauth.ms``, for OAUTHBEARER no
longer than the token lives) and, as Kafka's SocketServer, closes a connection that
sends a request other than SaslHandshake after its session ended. A client that does
not re-authenticate loses its connection (and whatever it had in flight) at the first
request past the lifetime; these tests hold connections past it, with requests in
flight while the re-authentication runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kproto.errors import KafkaConnectionError, SaslAuthenticationFailedError
from kproto.net import BrokerConnection
from kproto.net.cluster import ClusterMetadata
from kproto.net.driver import SelectorDriver
from kproto.net.oauth import CallbackTokenProvider, RefreshPolicy, SaslOauthBearer
from kproto.net.oidc import OidcTokenProvider
from kproto.net.security import SaslPlain, SaslScram
from kproto.protocol import ApiKey
from kproto.structs import TopicPartition

from .oauth_support import JwtValidator, OidcServer, ReauthGateway, in_front_of_tansu

pytestmark = pytest.mark.broker

PASSWORD = "reauth-Pw-42"
CLIENT, SECRET = "kproto-app", "s3cret-Client-Pw!"
LIFETIME_MS = 2000
USERS = {"alice": (PASSWORD, "plain"), "bob256": (PASSWORD, "sha256"),
         "bob512": (PASSWORD, "sha512")}


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    path = tmp_path_factory.mktemp("reauth") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return ca, str(path)


@pytest.fixture(scope="module")
def oidc(ca_file: tuple[Any, str]) -> Iterator[OidcServer]:
    server = OidcServer(ca_file[0], {CLIENT: SECRET})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gateway(oidc: OidcServer, ca_file: tuple[Any, str]) -> Iterator[ReauthGateway]:

    validator = JwtValidator(oidc.url + "/jwks", ca_file[1], issuer=oidc.issuer,
                             audience="kafka-broker")
    gw = ReauthGateway(("127.0.0.1", 1), users=USERS, validator=validator,
                       max_reauth_ms=LIFETIME_MS)
    with in_front_of_tansu(gw):
        yield gw


@pytest.fixture()
def fresh(gateway: ReauthGateway) -> ReauthGateway:
    """The gateway with its counters at zero and the default lifetime."""
    gateway.max_reauth_ms = LIFETIME_MS
    gateway.expired_kills = gateway.reauths = gateway.drained_during_reauth = 0
    gateway.refused.clear()
    return gateway


def _oauth(oidc: OidcServer, ca_file: tuple[Any, str]) -> SaslOauthBearer:
    return SaslOauthBearer(OidcTokenProvider(oidc.token_url, CLIENT, SECRET,
                                             cafile=ca_file[1]))


def _mech(name: str, oidc: OidcServer, ca_file: tuple[Any, str]) -> Any:  # noqa: ANN401
    if name == "PLAIN":
        return SaslPlain("alice", PASSWORD)
    if name == "OAUTHBEARER":
        return _oauth(oidc, ca_file)
    return SaslScram("bob" + name[-3:], PASSWORD, "sha" + name[-3:])


def _sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.monotonic()))


def _meta(conn: BrokerConnection) -> None:
    assert conn.request(ApiKey.METADATA, {"topics": None})["brokers"]


@pytest.mark.parametrize("name", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_connection_held_past_the_lifetime(fresh: ReauthGateway, oidc: OidcServer,
                                           ca_file: tuple[Any, str], name: str) -> None:
    with BrokerConnection(fresh.address, sasl=_mech(name, oidc, ca_file), timeout=10) as conn:
        _meta(conn)
        logged_in = time.monotonic()
        _sleep_until(logged_in + LIFETIME_MS / 1000 + fresh.grace + 0.3)   # past its end
        start = time.monotonic()
        _meta(conn)         # re-authenticates first (without: the gateway hangs up)
        took = time.monotonic() - start
        assert fresh.expired_kills == 0 and fresh.reauths == 1
        assert conn.reauthentications == 1 and conn.opened == 1
        assert conn.session_ends_at is not None and conn.reauthenticate_at is not None
        assert conn.session_ends_at > logged_in + LIFETIME_MS / 1000 + 0.5
        margin = conn.session_ends_at - conn.reauthenticate_at     # 5-15 % of the lifetime
        assert 0.05 * LIFETIME_MS / 1000 - 0.01 <= margin <= 0.15 * LIFETIME_MS / 1000 + 0.01
    assert took < 2, took


def test_requests_in_flight_while_reauthenticating(fresh: ReauthGateway, oidc: OidcServer,
                                                   ca_file: tuple[Any, str]) -> None:
    from kproto import Admin
    from kproto.consumer.fetcher import fetch_request

    topic = f"reauth-{time.monotonic_ns()}"
    with Admin(bootstrap_servers=fresh.address, security_protocol="SASL_PLAINTEXT",
               sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob256",
               sasl_plain_password=PASSWORD) as admin:
        admin.create_topics({topic: 1})
    conn = BrokerConnection(fresh.address, sasl=SaslScram("bob256", PASSWORD), timeout=10)
    with conn:
        meta = ClusterMetadata.from_response(conn.request(ApiKey.METADATA,
                                                          {"topics": [{"name": topic}]}))

        def fetch(wait_ms: int) -> dict[str, Any]:      # held by the broker: the topic is empty
            return fetch_request({TopicPartition(topic, 0): 0}, meta, partition_bytes=1 << 16,
                                 max_wait_ms=wait_ms, max_bytes=1 << 20,
                                 read_committed=False).fields

        logged_in = time.monotonic()
        # before the re-authentication time (85-95 % of the lifetime): a long-polling
        # Fetch and three Metadata requests, none read
        _sleep_until(logged_in + 0.75 * LIFETIME_MS / 1000)
        sent = [conn.send(ApiKey.FETCH, fetch(1200), raw=True)]
        sent += [conn.send(ApiKey.METADATA, {"topics": None}) for _ in range(3)]
        _sleep_until(logged_in + 0.97 * LIFETIME_MS / 1000)
        # past it: this send re-authenticates with the four in flight, the Fetch still at
        # the broker (the gateway answers the handshake once it is answered, past the
        # first session's end: without re-authentication the gateway hangs up)
        sent.append(conn.send(ApiKey.FETCH, fetch(1500), raw=True))
        assert time.monotonic() > logged_in + LIFETIME_MS / 1000 + fresh.grace
        assert conn.in_flight == 5 and conn.requests_in_flight() == sent
        # the four answers read while re-authenticating make the connection ready at
        # once, while the socket has nothing to read until the new Fetch is answered
        with SelectorDriver() as driver:
            start = time.monotonic()
            assert driver.wait([conn], time.monotonic() + 5) == [conn]
            assert time.monotonic() - start < 0.5       # (the new Fetch is held 1.5 s)
        kept = conn.receive(time.monotonic())          # no wait, no read
        assert [r.request for r in kept] == sent[:4]     # each answer to its request
        assert all(r.error is None for r in kept) and conn.in_flight == 1
        got = []
        while len(got) < 1:
            got += conn.receive(time.monotonic() + 10)
        assert got[0].request is sent[-1] and conn.in_flight == 0
        assert conn.reauthentications == 1
        assert all(r.error is None for r in got)
        # the Fetch was still at the broker when the re-authentication began
        assert fresh.drained_during_reauth >= 1
    assert fresh.expired_kills == 0 and conn.opened == 1


def test_oauthbearer_session_ends_with_the_token_and_a_fresh_one_is_sent(
        fresh: ReauthGateway, oidc: OidcServer, ca_file: tuple[Any, str]) -> None:
    fresh.max_reauth_ms = 60_000          # the token, not the broker, bounds the session
    oidc.lifetime = 4
    try:
        mech = _oauth(oidc, ca_file)
        with BrokerConnection(fresh.address, sasl=mech, timeout=10) as conn:
            _meta(conn)
            logged_in = time.monotonic()
            _sleep_until(logged_in + 4 + fresh.grace + 0.2)      # past the token's end
            _meta(conn)
            assert fresh.expired_kills == 0 and conn.reauthentications == 1
            assert conn.session_ends_at is not None
    finally:
        oidc.lifetime = 300
    provider = mech.provider
    assert isinstance(provider, OidcTokenProvider) and provider.fetched == 2
    assert fresh.expired_kills == 0 and fresh.reauths == 1


def test_failed_reauthentication_closes_and_keeps_answers(
        fresh: ReauthGateway, oidc: OidcServer) -> None:
    subjects = iter([CLIENT, "somebody-else"])     # the broker refuses a new principal

    def oauth_cb() -> tuple[str, float]:
        return oidc.issue(next(subjects), "kafka"), time.time() + 3

    # a new token at half its 3 s life, before the re-authentication (1.7-1.9 s)
    policy = RefreshPolicy(window_factor=0.5, window_jitter=0, min_period=0, buffer=0)
    provider = CallbackTokenProvider(oauth_cb, policy=policy)
    conn = BrokerConnection(fresh.address, timeout=10, sasl=SaslOauthBearer(provider))
    with conn:
        _meta(conn)
        logged_in = time.monotonic()
        _sleep_until(logged_in + 0.75 * LIFETIME_MS / 1000)
        before = conn.send(ApiKey.METADATA, {"topics": None})
        provider.token()        # past its refresh point: the new token is fetched apart
        if provider._refresher is not None:
            provider._refresher.join(5)
        _sleep_until(logged_in + 0.97 * LIFETIME_MS / 1000)
        with pytest.raises(SaslAuthenticationFailedError, match="principals"):
            conn.send(ApiKey.METADATA, {"topics": None})
        assert not conn.connected
        [answer] = conn.receive(time.monotonic() + 1)  # the earlier request's answer stays
        assert answer.request is before and answer.body["brokers"]
        with pytest.raises(KafkaConnectionError):
            conn.receive(time.monotonic() + 1)


def test_producer_and_consumer_across_lifetimes(fresh: ReauthGateway, oidc: OidcServer,
                                                ca_file: tuple[Any, str]) -> None:
    """The producer's sender (Produce requests in flight, acks=all) with SCRAM and a
    consumer (long-polling Fetches on their own connections) with OAUTHBEARER, both
    running for three session lifetimes: nothing lost, duplicated or reordered, no
    connection killed."""
    from kproto import Admin, Consumer, Producer

    topic = f"reauth-e2e-{time.monotonic_ns()}"
    scram = {"bootstrap.servers": fresh.address, "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob512",
             "sasl.password": PASSWORD}
    with Admin(scram) as admin:
        admin.create_topics({topic: 2})
    oauth = {"bootstrap.servers": fresh.address, "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "OAUTHBEARER", "sasl_allow_plaintext_plain": True,
             "sasl.oauthbearer.token.endpoint.url": oidc.token_url,
             "sasl.oauthbearer.client.id": CLIENT, "sasl.oauthbearer.client.secret": SECRET,
             "https.ca.location": ca_file[1], "auto.offset.reset": "earliest",
             "fetch.max.wait.ms": 500}
    with Producer(scram, linger_ms=5, acks="all") as producer, Consumer(oauth) as consumer:
        consumer.assign([(topic, 0), (topic, 1)])
        sent, got, _ = _produce_while_polling(producer, consumer, topic,
                                              3 * LIFETIME_MS / 1000 + 0.5, 500)
        producer_conns = list(producer._cluster._connections.values())
        fetch_conns = list(consumer._fetches._conns.values())
    for p in (0, 1):
        assert got[p] == [v for k, v in enumerate(sent) if k % 2 == p]
    assert fresh.expired_kills == 0
    producer_reauths = sum(c.reauthentications for c in producer_conns)
    fetch_reauths = sum(c.reauthentications for c in fetch_conns)
    assert producer_reauths >= 2 and fetch_reauths >= 2, (producer_reauths, fetch_reauths)


def test_poll_keeps_its_timeout_while_a_slow_endpoint_refreshes_the_token(
        fresh: ReauthGateway, oidc: OidcServer, ca_file: tuple[Any, str]) -> None:
    """A consumer re-authenticating every ~0.9 s while its token endpoint takes 2 s
    to answer the refresh: poll(100 ms) stays near 100 ms (the refresh runs on a thread
    of its own, the valid token serves meanwhile; it held each poll for the whole
    fetch), the new token is used once it arrives, and no connection is killed."""
    from kproto import Admin, Consumer

    fresh.max_reauth_ms = 1000
    settings = {"bootstrap.servers": fresh.address, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "sasl_allow_plaintext_plain": True,
                "sasl.oauthbearer.token.endpoint.url": oidc.token_url,
                "sasl.oauthbearer.client.id": CLIENT, "sasl.oauthbearer.client.secret": SECRET,
                "https.ca.location": ca_file[1], "sasl.login.refresh.window.factor": 0.5,
                "sasl.login.refresh.window.jitter": 0, "sasl.login.refresh.buffer.seconds": 0,
                "sasl.login.refresh.min.period.seconds": 0}
    topic = f"reauth-slow-idp-{time.monotonic_ns()}"
    real = oidc.answer

    def slow(*args: Any) -> Any:  # noqa: ANN401
        time.sleep(2)
        return real(*args)

    oidc.lifetime = 8               # refreshed at 4 s, in the background for 2 s
    try:
        with Admin(settings) as admin:
            admin.create_topics({topic: 1})
        with Consumer(settings, auto_offset_reset="earliest", fetch_max_wait_ms=200) as c:
            c.assign([(topic, 0)])
            c.poll(100)
            provider = c._cluster.sasl.provider           # type: ignore[union-attr]
            oidc.answer = slow  # type: ignore[method-assign]
            worst, end = 0.0, time.monotonic() + 7
            while time.monotonic() < end:
                start = time.monotonic()
                c.poll(100)
                worst = max(worst, time.monotonic() - start)
            fetch_reauths = sum(x.reauthentications for x in c._fetches._conns.values())
    finally:
        oidc.answer = real  # type: ignore[method-assign]
        oidc.lifetime = 300
    assert worst < 1.0, worst
    assert provider.fetched == 2 and fetch_reauths >= 4, (provider.fetched, fetch_reauths)
    assert fresh.expired_kills == 0 and not fresh.refused


def test_connections_cut_during_reauthentication_lose_and_repeat_nothing(
        fresh: ReauthGateway) -> None:
    """The gateway hangs up on every second re-authentication, at its SaslHandshake,
    before the answers of what was in flight went out (Produce requests of an
    idempotent producer, a consumer's long-polling Fetch): every record arrives once,
    in order, no send fails, and the consumer's positions end at the end."""
    from kproto import Admin, Consumer, Producer

    from .oauth_support import _shut

    fresh.max_reauth_ms = 600
    real, cuts = fresh._sasl, [0, 0]

    def cutting(raw: Any, up: Any, frame: bytes, session: Any, lock: Any, *,  # noqa: ANN401
                reauth: bool) -> bool:
        if reauth:
            cuts[0] += 1
            if cuts[0] % 2 == 0:
                cuts[1] += 1
                _shut(raw)
                _shut(up)
                return False
        return real(raw, up, frame, session, lock, reauth=reauth)

    topic = f"reauth-cut-{time.monotonic_ns()}"
    scram = {"bootstrap.servers": fresh.address, "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob512",
             "sasl.password": PASSWORD}
    with Admin(scram) as admin:
        admin.create_topics({topic: 2})
    fresh._sasl = cutting  # type: ignore[method-assign]
    try:
        with Producer(scram, linger_ms=5, acks="all", enable_idempotence=True) as producer, \
                Consumer(scram, auto_offset_reset="earliest", fetch_max_wait_ms=400) as consumer:
            consumer.assign([(topic, 0), (topic, 1)])
            sent, got, futures = _produce_while_polling(producer, consumer, topic, 4, 300)
            positions = [consumer.position((topic, p)) for p in (0, 1)]
    finally:
        fresh._sasl = real  # type: ignore[method-assign]
    assert cuts[1] >= 2, cuts
    assert all(f.exception(0) is None for f in futures)
    for p in (0, 1):
        assert got[p] == [v for k, v in enumerate(sent) if k % 2 == p]
    assert positions == [len(got[0]), len(got[1])]


def _produce_while_polling(producer, consumer, topic: str, seconds: float,  # noqa: ANN001
                           drain_poll_ms: int) -> tuple[list[bytes], dict[int, list[bytes]],
                                                        list]:
    """Send 20 numbered records to partitions 0/1 between 50 ms polls for ``seconds``,
    flush, then poll until every one is back (30 s at most): (sent, got per
    partition, the send futures)."""
    sent: list[bytes] = []
    futures = []
    got: dict[int, list[bytes]] = {0: [], 1: []}
    end, i = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for _ in range(20):
            value = f"{i}".encode()
            futures.append(producer.send(topic, value, partition=i % 2))
            sent.append(value)
            i += 1
        for r in consumer.poll(50):
            got[r.partition].append(r.value)
    producer.flush(30)
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < len(sent) and time.monotonic() < deadline:
        for r in consumer.poll(drain_poll_ms):
            got[r.partition].append(r.value)
    return sent, got, futures
