"""TLS key material (kproto.net.stores): JKS, PKCS12, PEM stores and inline PEM.

Stores are made by the test with the JDK's keytool and with trustme /
cryptography (tests/tls_support.py's ``Pki``). Mutual TLS runs against a real
TLS terminator (Python ssl) that requires a client certificate, in front of
the in-test SASL gateway (not a broker) and a real Tansu: Producer, Consumer,
Admin and the CLI configured with Java's or librdkafka's option names only.
"""

from __future__ import annotations

import os
import pickle
import ssl
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kproto.errors import ConfigError, KafkaConnectionError
from kproto.net import BrokerConnection, stores
from kproto.net.security import sasl_from_config, ssl_context_from_config
from kproto.net.stores import ClientIdentity, tls_material
from kproto.protocol import ApiKey

from .tls_support import (
    JAAS,
    KEY_PASS,
    KS_PASS,
    PASSWORD,
    SECRETS,
    TS_PASS,
    Pki,
    SecureChain,
    java_settings,
    need_keytool,
    no_secret_in,
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    need_keytool()
    pytest.importorskip("trustme")
    return Pki(tmp_path_factory.mktemp("pki"))


def _ssl(**kw: Any) -> dict[str, Any]:
    return {"security.protocol": "SSL", **kw}


def _trusted(ctx: ssl.SSLContext) -> list[bytes]:
    return list(ctx.get_ca_certs(binary_form=True))


# --------------------------------------------------------------------------- trust


def test_every_kind_of_trust_gives_the_ca(pki: Pki) -> None:
    want = [ssl.PEM_cert_to_DER_cert(pki.ca_text)]
    one_line = pki.ca_text.replace("\n", " ")       # PEM as a one-line option: Kafka takes it
    for cfg in [
        _ssl(**{"ssl.truststore.location": pki.trust_jks, "ssl.truststore.password": TS_PASS}),
        _ssl(**{"ssl.truststore.location": pki.trust_jks}),     # JKS: no integrity check
        _ssl(**{"ssl.truststore.location": pki.trust_jks, "ssl.truststore.type": "jks"}),
        _ssl(**{"ssl.truststore.location": pki.trust_p12, "ssl.truststore.password": TS_PASS,
                "ssl.truststore.type": "PKCS12"}),
        _ssl(**{"ssl.truststore.location": pki.ca_pem, "ssl.truststore.type": "PEM"}),
        _ssl(**{"ssl.truststore.location": pki.ca_pem}),
        _ssl(**{"ssl.truststore.certificates": one_line, "ssl.truststore.type": "PEM"}),
        _ssl(**{"ssl.ca.pem": pki.ca_text}),
        _ssl(**{"ssl.ca.location": pki.ca_pem}),
    ]:
        ctx = ssl_context_from_config(cfg)
        assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
        assert _trusted(ctx) == want, cfg


def test_a_ca_directory_as_librdkafka_takes_it(pki: Pki, tmp_path: Path) -> None:
    subprocess.run(["openssl", "rehash", str(tmp_path)], check=False, capture_output=True)
    ctx = ssl_context_from_config(_ssl(**{"ssl.ca.location": str(tmp_path)}))
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED


# --------------------------------------------------------------------------- key stores


def _identity(cfg: dict[str, Any]) -> ClientIdentity:
    from kproto.net.security import _normalize

    found = tls_material(_normalize(cfg))
    assert found.identity is not None
    return found.identity


def test_every_kind_of_key_store_gives_the_client(pki: Pki) -> None:
    cases = [
        {"ssl.keystore.location": pki.key_jks, "ssl.keystore.password": KS_PASS,
         "ssl.key.password": KEY_PASS},                          # JKS, key password apart
        {"ssl.keystore.location": pki.key_jks_same, "ssl.keystore.password": KS_PASS},
        {"ssl.keystore.location": pki.key_p12, "ssl.keystore.password": KS_PASS,
         "ssl.keystore.type": "PKCS12"},
        {"ssl.keystore.location": pki.key_p12_legacy, "ssl.keystore.password": KS_PASS},
        {"ssl.keystore.location": pki.client_p12, "ssl.keystore.password": KS_PASS,
         "ssl.key.password": KS_PASS},
        {"ssl.keystore.location": pki.key_pem_file, "ssl.keystore.type": "PEM",
         "ssl.key.password": KEY_PASS},
        {"ssl.keystore.certificate.chain": pki.chain_pem_text,
         "ssl.keystore.key": pki.key_pem_text.replace("\n", " "), "ssl.key.password": KEY_PASS,
         "ssl.keystore.type": "PEM"},
        {"ssl.certificate.pem": pki.chain_pem_text, "ssl.key.pem": pki.key_pem_text,
         "ssl.key.password": KEY_PASS},
    ]
    for cfg in cases:
        ident = _identity(_ssl(**cfg))
        assert "kproto-client" in repr(ident) and len(ident.chain) == 2, cfg
        ctx = ssl_context_from_config(_ssl(**cfg))
        assert ctx is not None
    assert "native-client" in repr(_identity(_ssl(**{
        "ssl.keystore.location": pki.native_jks, "ssl.keystore.password": KS_PASS,
        "ssl.key.password": KEY_PASS})))


def _fails(cfg: dict[str, Any], *words: str) -> ConfigError:
    stores._CACHE.clear()
    with pytest.raises(ConfigError) as info:
        ssl_context_from_config(_ssl(**cfg))
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    no_secret_in(info.value)
    return info.value


def test_wrong_passwords_name_the_option(pki: Pki) -> None:
    _fails({"ssl.truststore.location": pki.trust_jks, "ssl.truststore.password": KS_PASS},
           "ssl.truststore.password", "is wrong")
    _fails({"ssl.truststore.location": pki.trust_p12, "ssl.truststore.password": KS_PASS},
           "ssl.truststore.password", "is wrong")
    _fails({"ssl.truststore.location": pki.trust_p12}, "needs its password",
           "ssl.truststore.password")
    _fails({"ssl.keystore.location": pki.key_jks, "ssl.keystore.password": TS_PASS,
            "ssl.key.password": KEY_PASS}, "ssl.keystore.password", "is wrong")
    _fails({"ssl.keystore.location": pki.key_p12, "ssl.keystore.password": TS_PASS},
           "ssl.keystore.password", "is wrong")
    # the key has a password of its own: wrong, or not given (the store's is tried)
    _fails({"ssl.keystore.location": pki.key_jks, "ssl.keystore.password": KS_PASS,
            "ssl.key.password": TS_PASS}, "ssl.key.password", "wrong or missing")
    _fails({"ssl.keystore.location": pki.key_jks, "ssl.keystore.password": KS_PASS},
           "ssl.key.password", "wrong or missing")
    _fails({"ssl.keystore.location": pki.key_pem_file, "ssl.key.password": TS_PASS},
           "ssl.key.password", "does not decrypt")
    _fails({"ssl.keystore.location": pki.key_pem_file}, "is encrypted", "ssl.key.password")
    _fails({"ssl.certificate.pem": pki.chain_pem_text, "ssl.key.pem": pki.key_pem_text,
            "ssl.key.password": KS_PASS}, "does not decrypt")
    _fails({"ssl.keystore.location": pki.key_p12, "ssl.keystore.password": KS_PASS,
            "ssl.key.password": KEY_PASS}, "ssl.key.password", "differs")
    _fails({"ssl.keystore.location": pki.key_p12}, "without ssl.keystore.password")


def test_wrong_types_and_wrong_stores_name_the_option(pki: Pki, tmp_path: Path) -> None:
    # (JKS <-> PKCS12, and JKS under JCEKS, are read as Java reads them: test_security_attack)
    _fails({"ssl.truststore.location": pki.trust_jks, "ssl.truststore.type": "PEM"},
           "ssl.truststore.type", "is PEM but", "is a JKS file")
    _fails({"ssl.keystore.location": pki.key_p12, "ssl.keystore.password": KS_PASS,
            "ssl.keystore.type": "JCEKS"}, "ssl.keystore.type", "is JCEKS but", "PKCS12 file")
    _fails({"ssl.truststore.location": pki.ca_pem, "ssl.truststore.type": "BKS"},
           "ssl.truststore.type", "must be one of JKS, PKCS12, PEM, JCEKS")
    _fails({"ssl.keystore.location": pki.trust_jks, "ssl.keystore.password": TS_PASS},
           "holds no private key")
    _fails({"ssl.keystore.location": pki.ca_pem}, "0 private keys")
    _fails({"ssl.truststore.location": pki.key_pem_file, "ssl.truststore.password": "x"},
           "not used with a PEM trust store")
    _fails({"ssl.keystore.location": pki.key_pem_file, "ssl.keystore.password": KS_PASS},
           "not used with a PEM key store", "ssl.key.password")
    garbage = tmp_path / "garbage.jks"
    garbage.write_bytes(b"\x00not a store at all")
    _fails({"ssl.truststore.location": str(garbage)}, "not a JKS, PKCS12, JCEKS or PEM")
    fake = tmp_path / "fake.jks"
    fake.write_bytes(b"\xfe\xed\xfe\xed" + os.urandom(64))
    _fails({"ssl.truststore.location": str(fake), "ssl.truststore.password": TS_PASS},
           "ssl.truststore.location")


@pytest.mark.parametrize("bad", ["pass\udcffword", "pa\x00ss", "line\nbreak"])
def test_passwords_that_no_store_can_hold(pki: Pki, bad: str) -> None:
    for cfg in ({"ssl.keystore.location": pki.key_jks, "ssl.keystore.password": KS_PASS,
                 "ssl.key.password": bad},
                {"ssl.truststore.location": pki.trust_p12, "ssl.truststore.password": bad}):
        stores._CACHE.clear()
        with pytest.raises(ConfigError) as info:
            ssl_context_from_config(_ssl(**cfg))
        text = "".join(__import__("traceback").format_exception(info.value))
        if "\n" not in bad:        # refused before anything read it: nothing behind the error
            assert info.value.__context__ is None
        assert bad not in text and repr(bad)[1:-1] not in text
        no_secret_in(info.value)


def test_files_that_are_not_stores(pki: Pki, tmp_path: Path) -> None:
    _fails({"ssl.truststore.location": str(tmp_path)}, "is a directory")
    _fails({"ssl.keystore.location": str(tmp_path / "missing.p12"),
            "ssl.keystore.password": KS_PASS}, "No such file")
    _fails({"ssl.truststore.location": "/dev/zero"}, "not a regular file")
    huge = tmp_path / "huge.p12"
    with open(huge, "wb") as f:
        f.truncate(stores.MAX_STORE_BYTES + 1)          # sparse: no disk used
    _fails({"ssl.truststore.location": str(huge)}, "more than a key store")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    start = time.monotonic()
    _fails({"ssl.keystore.location": str(fifo), "ssl.keystore.password": KS_PASS},
           "not a regular file")
    assert time.monotonic() - start < 5         # never opened: it would block
    for key in ("ssl.ca.location", "ssl.certificate.location"):
        _fails({key: str(fifo)}, key, "not a regular file")
    _fails({"ssl.certificate.location": pki.ca_pem, "ssl.key.location": str(fifo)},
           "ssl.key.location", "not a regular file")


def test_dates_of_the_client_certificate(pki: Pki, tmp_path: Path) -> None:
    _fails({"ssl.keystore.location": pki.expired_jks, "ssl.keystore.password": KS_PASS},
           "ssl.keystore.location", "expired on")
    _fails({"ssl.keystore.location": pki.future_jks, "ssl.keystore.password": KS_PASS},
           "ssl.keystore.location", "not valid before")
    # PEM files (ssl.certificate.location) are checked too
    import trustme

    ca = trustme.CA()
    import datetime

    old = ca.issue_cert("old.example", not_after=datetime.datetime(2020, 1, 1,
                                                                   tzinfo=datetime.timezone.utc),
                        not_before=datetime.datetime(2019, 1, 1, tzinfo=datetime.timezone.utc))
    cert, key = tmp_path / "old.pem", tmp_path / "old.key"
    old.cert_chain_pems[0].write_to_path(str(cert))
    old.private_key_pem.write_to_path(str(key))
    _fails({"ssl.certificate.location": str(cert), "ssl.key.location": str(key)},
           "ssl.certificate.location", "expired on 2020-01-01")


def test_conflicting_sources_are_refused(pki: Pki) -> None:
    _fails({"ssl.ca.location": pki.ca_pem, "ssl.truststore.location": pki.trust_jks},
           "ssl.ca.location", "ssl.truststore.location", "give one")
    _fails({"ssl.keystore.location": pki.key_p12, "ssl.keystore.password": KS_PASS,
            "ssl.certificate.pem": pki.chain_pem_text, "ssl.key.pem": pki.key_pem_text},
           "give one")
    _fails({"ssl.certificate.pem": pki.chain_pem_text}, "go together")
    _fails({"ssl.keystore.password": KS_PASS}, "without ssl.keystore.location")
    _fails({"ssl.truststore.certificates": pki.ca_text, "ssl.truststore.type": "JKS"},
           "is PEM but ssl.truststore.type")
    with pytest.raises(ConfigError, match="ssl_truststore_location given but security_protocol"):
        ssl_context_from_config({"security.protocol": "SASL_PLAINTEXT",
                                 "ssl.truststore.location": pki.trust_jks})


def test_missing_cryptography_names_the_extra(pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    stores._CACHE.clear()
    monkeypatch.setitem(sys.modules, "cryptography", None)
    for cfg in ({"ssl.truststore.location": pki.trust_p12, "ssl.truststore.password": TS_PASS},
                {"ssl.keystore.location": pki.key_p12, "ssl.keystore.password": KS_PASS}):
        with pytest.raises(ConfigError, match=r"pip install 'kproto\[security\]'"):
            ssl_context_from_config(_ssl(**cfg))
    # PEM trust needs no extra
    assert ssl_context_from_config(_ssl(**{"ssl.ca.pem": pki.ca_text})) is not None


def test_missing_keytool_says_what_to_do(pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    stores._CACHE.clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    _fails_env = pytest.raises(ConfigError, match="keytool, which is not installed")
    with _fails_env:
        ssl_context_from_config(_ssl(**{"ssl.truststore.location": pki.trust_jks}))


def test_no_key_file_is_left_on_disk(pki: Pki, monkeypatch: pytest.MonkeyPatch,
                                     tmp_path: Path) -> None:
    """keytool's PKCS12 lives in a private directory removed at once; a key reaches
    the context through memfd, or (without memfd) a 0600 file of an encrypted key
    in a 0700 directory, removed at once."""
    made: list[str] = []
    real = tempfile.mkdtemp

    def spy(*args: Any, **kw: Any) -> str:
        path = real(dir=str(tmp_path), prefix=kw.get("prefix", "x"))
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
        made.append(path)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", spy)
    stores._CACHE.clear()
    cfg = _ssl(**{"ssl.keystore.location": pki.key_jks, "ssl.keystore.password": KS_PASS,
                  "ssl.key.password": KEY_PASS})
    assert ssl_context_from_config(cfg) is not None
    assert made and not any(os.path.exists(p) for p in made)          # keytool's folder
    # the fallback without memfd: the file holds an encrypted key, and is gone after
    seen: list[bytes] = []
    real_load = ssl.SSLContext.load_cert_chain

    def load(self: ssl.SSLContext, certfile: str, keyfile: Any = None, password: Any = None
             ) -> None:
        assert stat.S_IMODE(os.stat(certfile).st_mode) == 0o600
        seen.append(Path(certfile).read_bytes())
        real_load(self, certfile, keyfile, password)

    monkeypatch.delattr(os, "memfd_create")
    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", load)
    made.clear()
    assert ssl_context_from_config(cfg) is not None
    assert made and not any(os.path.exists(p) for p in made)
    assert b"BEGIN ENCRYPTED PRIVATE KEY" in seen[0] and b"BEGIN PRIVATE KEY" not in seen[0]


def test_stores_are_read_once_per_process(pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    stores._CACHE.clear()
    runs = []
    real = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: runs.append(a) or real(*a, **k))
    cfg = _ssl(**{"ssl.truststore.location": pki.trust_jks, "ssl.truststore.password": TS_PASS})
    for _ in range(3):
        ssl_context_from_config(cfg)
    assert len(runs) == 1
    os.utime(pki.trust_jks)         # touched, the same content: the same store
    ssl_context_from_config(cfg)
    assert len(runs) == 1           # (a changed content is read again: test_security_attack)


def test_secrets_stay_out_of_reprs_and_pickles(pki: Pki) -> None:
    from kproto.net.security import _normalize

    found = tls_material(_normalize(_ssl(**{
        "ssl.keystore.location": pki.key_jks, "ssl.keystore.password": KS_PASS,
        "ssl.key.password": KEY_PASS, "ssl.truststore.location": pki.trust_p12,
        "ssl.truststore.password": TS_PASS})))
    for text in (repr(found), str(found.identity), repr(found.identity)):
        assert not any(s in text for s in SECRETS) and "PRIVATE" not in text
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(found.identity)


# --------------------------------------------------------------------------- real TLS


@pytest.fixture(scope="module")
def chain(pki: Pki) -> Iterator[SecureChain]:
    front = SecureChain(pki)
    yield front
    front.stop()


def _connect(chain: SecureChain, cfg: dict[str, Any]) -> None:
    with BrokerConnection(chain.bootstrap, ssl_context=ssl_context_from_config(cfg),
                          sasl=sasl_from_config(cfg), timeout=10) as conn:
        conn.request(ApiKey.METADATA, {"topics": None})


@pytest.mark.broker
@pytest.mark.parametrize("store", ["key_jks", "key_p12", "key_p12_legacy", "client_p12",
                                   "key_pem_file", "native_jks", "inline"])
def test_mutual_tls_with_each_store(chain: SecureChain, pki: Pki, store: str) -> None:
    cfg = java_settings(pki)
    del cfg["ssl.keystore.location"], cfg["ssl.keystore.password"], cfg["ssl.key.password"]
    if store == "inline":
        cfg.update({"ssl.keystore.certificate.chain": pki.chain_pem_text,
                    "ssl.keystore.key": pki.key_pem_text, "ssl.key.password": KEY_PASS})
    elif store == "key_pem_file":
        cfg.update({"ssl.keystore.location": pki.key_pem_file, "ssl.key.password": KEY_PASS})
    else:
        cfg.update({"ssl.keystore.location": getattr(pki, store),
                    "ssl.keystore.password": KS_PASS})
        if store in ("key_jks", "native_jks"):
            cfg["ssl.key.password"] = KEY_PASS
    _connect(chain, cfg)


@pytest.mark.broker
@pytest.mark.parametrize("client", ["none", "stranger"])
def test_mutual_tls_refuses_a_client_without_a_trusted_certificate(chain: SecureChain, pki: Pki,
                                                                   client: str) -> None:
    cfg = java_settings(pki)
    del cfg["ssl.keystore.location"], cfg["ssl.keystore.password"], cfg["ssl.key.password"]
    if client == "stranger":
        cfg.update({"ssl.keystore.location": pki.stranger_p12, "ssl.keystore.password": KS_PASS})
    start = time.monotonic()
    with pytest.raises(KafkaConnectionError) as info:
        _connect(chain, cfg)
    assert time.monotonic() - start < 15
    no_secret_in(info.value)


@pytest.mark.broker
def test_clients_with_java_names_only(chain: SecureChain, pki: Pki) -> None:
    from kproto import Admin, Consumer, Producer

    settings = {"bootstrap.servers": chain.bootstrap, **java_settings(pki)}
    topic = "stores-java-names"
    with Admin(settings) as admin:
        admin.create_topics({topic: 1}, exist_ok=True)
    with Producer(settings) as producer:
        producer.send(topic, b"through TLS and SASL", key=b"k").result(30)
    with Consumer({**settings, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(topic, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = consumer.poll(1000)
    assert [r.value for r in got] == [b"through TLS and SASL"]


@pytest.mark.broker
def test_short_polls_connect_through_tls_and_sasl(chain: SecureChain, pki: Pki) -> None:
    """Polls of 1 ms each still connect a consumer through TLS and SCRAM (a handshake
    of tens of ms): a poll's deadline bounds its connects, but a connect cut short
    starts again from nothing, so a bound cutting every one would never read."""
    from kproto import Admin, Consumer, Producer

    settings = {"bootstrap.servers": chain.bootstrap, **java_settings(pki)}
    topic = "stores-short-polls"
    with Admin(settings) as admin:
        admin.create_topics({topic: 1}, exist_ok=True)
    with Producer(settings) as producer:
        producer.send(topic, b"in 1 ms polls", partition=0).result(30)
    with Consumer({**settings, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(topic, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = consumer.poll(1)
    assert [r.value for r in got] == [b"in 1 ms polls"]


@pytest.mark.broker
def test_clients_with_librdkafka_names_only(chain: SecureChain, pki: Pki) -> None:
    from kproto import Admin

    settings = {"bootstrap.servers": chain.bootstrap, "security.protocol": "sasl_ssl",
                "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice512",
                "sasl.password": PASSWORD, "ssl.ca.pem": pki.ca_text,
                "ssl.certificate.pem": pki.chain_pem_text, "ssl.key.pem": pki.key_pem_text,
                "ssl.key.password": KEY_PASS}
    with Admin(settings) as admin:
        assert admin.list_topics() is not None
    # librdkafka's ssl.keystore.location is PKCS12
    settings = {k: v for k, v in settings.items() if not k.startswith(("ssl.cert", "ssl.key"))}
    settings.update({"ssl.keystore.location": pki.key_p12, "ssl.keystore.password": KS_PASS})
    with Admin(settings) as admin:
        assert admin.list_topics() is not None


@pytest.mark.broker
def test_cli_with_java_names(chain: SecureChain, pki: Pki, capsys: pytest.CaptureFixture[str]
                             ) -> None:
    from kproto.cli import main

    argv = ["-b", chain.bootstrap]
    for key, value in java_settings(pki).items():
        argv += ["-X", f"{key}={value}"]
    assert main([*argv, "metadata"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "127.0.0.1" in out
    bad = [a.replace(PASSWORD, "wrong-" + PASSWORD) for a in argv]
    bad = [a.replace(KS_PASS, KS_PASS + "x") for a in bad]
    assert main([*bad, "-X", "request.timeout.ms=5000", "metadata"]) == 1
    out, err = capsys.readouterr()
    assert "ssl.keystore.password" in err and len(err.strip().splitlines()) == 1
    assert not any(s in out + err for s in SECRETS)
    # a wrong password in the JAAS line: the broker's refusal, one line, nothing secret
    bad = [a.replace(PASSWORD, "wrong-" + PASSWORD) for a in argv]
    assert main([*bad, "-X", "request.timeout.ms=5000", "metadata"]) == 1
    out, err = capsys.readouterr()
    assert "Authentication failed" in err and not any(s in out + err for s in SECRETS)


def test_cli_masks_inline_keys_and_jaas(pki: Pki) -> None:
    from kproto.cli_args import secrets

    argv = ["-X", f"ssl.key.pem={pki.key_pem_text}", "-X", f"ssl.keystore.key={pki.key_pem_text}",
            "-X", f"ssl.key.password={KEY_PASS}", "-X", f"sasl.jaas.config={JAAS}",
            "-X", f"ssl.truststore.password={TS_PASS}", "-X", f"ssl.keystore.password={KS_PASS}",
            "-X", "ssl.key.location=/etc/k.pem", "metadata"]
    hidden = secrets(argv)
    assert hidden.count(pki.key_pem_text) == 2
    assert {KEY_PASS, JAAS, TS_PASS, KS_PASS} <= set(hidden) and "/etc/k.pem" not in hidden
