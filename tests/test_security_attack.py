"""What trying to break the security layer (issue 29) found, each kept as a test.

Settings a hostile or a confused user gives: a typo that would turn TLS host
name checks off, the same setting under two of its names with different
values, secrets printed with a client's settings; stores as Java takes them
(a trust store that is also a key store, a type that is not the file's).
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Any

import pytest

from kproto.admin import Admin
from kproto.config import resolve
from kproto.consumer import Consumer
from kproto.errors import ConfigError
from kproto.net import stores
from kproto.net.security import _normalize, sasl_from_config, ssl_context_from_config
from kproto.producer import Producer

from .tls_support import keytool, need_keytool

SECRETS = ("Sekr1t-one", "Sekr1t-two", "Sekr1t-three", "Sekr1t-four", "Sekr1t-five")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
        f'password="{SECRETS[0]}";')


# --------------------------------------------------------------------------- host name checks


@pytest.mark.parametrize("value", ["htps", "true", "ldap", "HTTP", "yes"])
def test_a_mistyped_endpoint_identification_is_refused_not_off(value: str) -> None:
    """Java fails the handshake on an algorithm it does not know, librdkafka refuses
    the setting: anything but https, none or empty must not turn the check off."""
    cfg = {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": value}
    with pytest.raises(ConfigError, match="ssl.endpoint.identification.algorithm"):
        resolve("admin", {"bootstrap.servers": "127.0.0.1:9", **cfg})
    with pytest.raises(ConfigError, match="ssl.endpoint.identification.algorithm"):
        ssl_context_from_config(cfg)


@pytest.mark.parametrize(("value", "check"), [("https", True), (" HTTPS ", True), ("", False),
                                              ("none", False), (None, True)])
def test_endpoint_identification_values_that_mean_something(value: Any, check: bool) -> None:
    cfg = {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": value}
    assert resolve("admin", {"bootstrap.servers": "127.0.0.1:9", **cfg})["ssl_check_hostname"] \
        is check          # None is unset, as for every other option: the default (on)
    ctx = ssl_context_from_config(cfg)
    assert ctx is not None and ctx.check_hostname is check


# --------------------------------------------------------------------------- one setting, two names


@pytest.mark.parametrize(("one", "other"), [
    ("sasl.username", "sasl_plain_username"),
    ("sasl.password", "sasl_plain_password"),
    ("sasl.password", "sasl.plain.password"),
    ("ssl.ca.location", "ssl_cafile"),
    ("ssl.key.password", "ssl_password"),
    ("ssl.keystore.key", "ssl.key.pem"),
    ("sasl.mechanism", "sasl.mechanisms"),
    ("sasl.oauthbearer.client.secret",
     "sasl.oauthbearer.client.credentials.client.secret"),
])
def test_one_setting_under_two_names_with_other_values_is_refused(one: str, other: str) -> None:
    """librdkafka's, Java's and kproto's names of one setting, mixed in one config with
    different values: kproto does not pick one silently (as for JAAS vs explicit)."""
    a, b = SECRETS[1], SECRETS[2]
    if "mechanism" in one:
        a, b = "PLAIN", "SCRAM-SHA-256"
    cfg = {"bootstrap.servers": "127.0.0.1:9", one: a, other: b}
    with pytest.raises(ConfigError) as info:
        resolve("consumer", cfg)
    text = str(info.value)
    assert one in text and other in text and a not in text and b not in text
    with pytest.raises(ConfigError) as info:
        sasl_from_config(cfg) if "ssl" not in one else ssl_context_from_config(
            {**cfg, "security.protocol": "SSL"})
    assert one in str(info.value) and a not in str(info.value) and b not in str(info.value)
    # the same value under both names is one setting given twice: fine
    same = resolve("consumer", {"bootstrap.servers": "127.0.0.1:9", one: a, other: a})
    assert a in same.values()
    # a keyword argument still overrides the config dict, as documented
    assert b in resolve("consumer", {"bootstrap.servers": "127.0.0.1:9", one: a},
                        **{other.replace(".", "_"): b}).values()


def test_endpoint_identification_against_ssl_check_hostname() -> None:
    with pytest.raises(ConfigError, match="ssl_check_hostname"):
        resolve("admin", {"bootstrap.servers": "127.0.0.1:9", "ssl_check_hostname": True,
                          "ssl.endpoint.identification.algorithm": ""})


# --------------------------------------------------------------------------- printed settings


def _secret_settings() -> dict[str, Any]:
    return {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS,
            "ssl.keystore.password": SECRETS[1], "ssl.truststore.password": SECRETS[2],
            "ssl.key.password": SECRETS[3], "ssl.keystore.key": SECRETS[4]}


@pytest.mark.parametrize("client", ["producer", "consumer", "admin"])
def test_resolved_settings_print_without_secrets(client: str) -> None:
    settings = resolve(client, _secret_settings())
    for text in (repr(settings), str(settings), f"{settings}"):
        for secret in SECRETS:
            assert secret not in text
    assert "'ssl_keystore_password': '***'" in repr(settings)
    assert settings["ssl_keystore_password"] == SECRETS[1]     # the values are all there
    assert settings["sasl_jaas_config"] == JAAS


def test_clients_config_attribute_prints_without_secrets() -> None:
    """``Producer(...).config`` (and the Consumer's, the Admin's) is what a user prints
    to see the settings: the secrets show as ***, as Java's client logs them."""
    cfg = {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_PLAINTEXT",
           "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u",
           "sasl.password": SECRETS[0]}
    for make in (Producer, Consumer, Admin):
        client = make(cfg)           # nothing connects before the first request
        try:
            for text in (repr(client.config), str(client.config), repr(client),
                         repr(client._cluster.settings)):
                assert SECRETS[0] not in text, (make, text)
            assert client.config["sasl_plain_password"] == SECRETS[0]
        finally:
            client.close()


# ------------------------------------------------------------------ stores as Java reads them


def _keytool_pki(folder: Path) -> dict[str, str]:
    """A CA (trusted certificate entry) and a client key whose password is not the
    store's, in one JKS: a key store that is also the trust store, as Java takes it."""
    f = lambda name: str(folder / name)  # noqa: E731
    keytool("-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-dname",
            "CN=attack-ca", "-ext", "bc:c", "-validity", "30", "-keystore", f("ca.p12"),
            "-storetype", "PKCS12", "-storepass", SECRETS[1])
    keytool("-exportcert", "-rfc", "-alias", "ca", "-keystore", f("ca.p12"), "-storepass",
            SECRETS[1], "-file", f("ca.pem"))
    both = f("both.jks")
    keytool("-importcert", "-noprompt", "-alias", "kafka-ca", "-file", f("ca.pem"),
            "-keystore", both, "-storetype", "JKS", "-storepass", SECRETS[1])
    keytool("-genkeypair", "-alias", "me", "-keyalg", "EC", "-groupname", "secp256r1", "-dname",
            "CN=attack-client", "-validity", "30", "-keystore", both, "-storetype", "JKS",
            "-storepass", SECRETS[1], "-keypass", SECRETS[2])
    keytool("-exportcert", "-rfc", "-alias", "me", "-keystore", both, "-storepass", SECRETS[1],
            "-file", f("me.pem"))
    return {"ca": f("ca.pem"), "me": f("me.pem"), "both": both, "ca_p12": f("ca.p12")}


@pytest.fixture(scope="module")
def jks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    need_keytool()
    pytest.importorskip("cryptography")
    return _keytool_pki(tmp_path_factory.mktemp("attack-pki"))


def _der(pem_path: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert(Path(pem_path).read_text())


def test_a_key_store_used_as_trust_store_needs_no_key_password(jks: dict[str, str]) -> None:
    """Java's trust manager takes a JKS's trusted certificates and its key entries'
    certificates, reading no key: neither the key's password nor (JKS) the store's is
    needed. kproto converted the whole store with keytool, which asked for the key's
    password: a ConfigError naming ssl.key.password for a trust store."""
    for password in (SECRETS[1], None):
        stores._CACHE.clear()
        cfg = {"security.protocol": "SSL", "ssl.truststore.location": jks["both"],
               "ssl.truststore.password": password}
        ctx = ssl_context_from_config(cfg)
        assert ctx is not None and _der(jks["ca"]) in ctx.get_ca_certs(binary_form=True)
        found = stores.tls_material(_normalize(cfg)).cadata     # (no CA: not listed above)
        assert found is not None and _der(jks["me"]) in found
    # a wrong store password is still the store password's error
    stores._CACHE.clear()
    with pytest.raises(ConfigError, match="ssl.truststore.password .*is wrong") as info:
        ssl_context_from_config({"security.protocol": "SSL",
                                 "ssl.truststore.location": jks["both"],
                                 "ssl.truststore.password": SECRETS[3]})
    assert SECRETS[3] not in str(info.value)


@pytest.mark.parametrize(("given", "file"), [("JKS", "ca_p12"), ("PKCS12", "both"),
                                             ("JCEKS", "both")])
def test_a_store_type_is_read_as_java_reads_it(jks: dict[str, str], given: str,
                                               file: str) -> None:
    """Java's KeyStore of type JKS loads PKCS12 files and PKCS12 loads JKS (JDK 8u60+,
    keystore.type.compat), JCEKS loads JKS: stores made PKCS12 by JDK 9+ often keep
    ssl.truststore.type=JKS. kproto refused them."""
    stores._CACHE.clear()
    ctx = ssl_context_from_config({"security.protocol": "SSL",
                                   "ssl.truststore.location": jks[file],
                                   "ssl.truststore.password": SECRETS[1],
                                   "ssl.truststore.type": given})
    assert ctx is not None and _der(jks["ca"]) in ctx.get_ca_certs(binary_form=True)
    if file == "both":          # and as a key store (the key's own password)
        stores._CACHE.clear()
        ctx = ssl_context_from_config({"security.protocol": "SSL",
                                       "ssl.keystore.location": jks[file],
                                       "ssl.keystore.password": SECRETS[1],
                                       "ssl.key.password": SECRETS[2],
                                       "ssl.keystore.type": given})
        assert ctx is not None


def test_a_store_rewritten_in_place_is_read_again(jks: dict[str, str], tmp_path: Path) -> None:
    """The per-process store cache was keyed on the file's inode, size and mtime: a
    store rewritten in place with the same size and time (cp -p, rsync -t, a coarse
    file system clock) kept serving the old CAs to every new client. Java reads the
    file for every new client; so does kproto now (a client keeps what it read)."""
    first, second = tmp_path / "a.jks", tmp_path / "b.jks"
    for attempt in range(30):    # keytool's random serial numbers vary the size by a byte
        for path, name in ((first, "one"), (second, f"tw{attempt % 10}")):
            if path.exists() and path is first:
                continue
            path.unlink(missing_ok=True)
            keytool("-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048",
                    "-dname", f"CN=rotate-{name}", "-ext", "bc:c", "-validity", "30", "-keystore",
                    str(path) + ".p12", "-storetype", "PKCS12", "-storepass", SECRETS[1])
            keytool("-exportcert", "-rfc", "-alias", "ca", "-keystore", str(path) + ".p12",
                    "-storepass", SECRETS[1], "-file", str(path) + ".pem")
            Path(str(path) + ".p12").unlink()
            keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(path) + ".pem",
                    "-keystore", str(path), "-storetype", "JKS", "-storepass", SECRETS[1])
        if first.stat().st_size == second.stat().st_size:
            break
    else:
        pytest.fail("no two stores of one size in 30 tries")
    live = tmp_path / "truststore.jks"
    live.write_bytes(first.read_bytes())
    cfg = {"security.protocol": "SSL", "ssl.truststore.location": str(live),
           "ssl.truststore.password": SECRETS[1]}
    stores._CACHE.clear()
    old = ssl_context_from_config(cfg)
    assert old is not None and _der(str(first) + ".pem") in old.get_ca_certs(binary_form=True)
    was = live.stat()
    with open(live, "r+b") as f:            # in place: the same inode
        f.write(second.read_bytes())
    os.utime(live, ns=(was.st_atime_ns, was.st_mtime_ns))
    assert (live.stat().st_ino, live.stat().st_size) == (was.st_ino, was.st_size)
    new = ssl_context_from_config(cfg)
    assert new is not None
    assert _der(str(second) + ".pem") in new.get_ca_certs(binary_form=True)
    assert _der(str(first) + ".pem") not in new.get_ca_certs(binary_form=True)
    # the client made before keeps what it read, as Java's does
    assert _der(str(first) + ".pem") in old.get_ca_certs(binary_form=True)


# --------------------------------------------------------------------------- broken inline PEM


def _leaf() -> tuple[str, str, str]:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    leaf = ca.issue_cert("client.example")
    return (ca.cert_pem.bytes().decode(), leaf.cert_chain_pems[0].bytes().decode(),
            leaf.private_key_pem.bytes().decode())


def test_a_trusted_certificate_whose_base64_is_garbage_is_refused() -> None:
    """ssl's PEM decoder skips what is not base64: a certificate of garbage became no
    bytes at all, and no CA data means the system's CAs: the private CA the user meant
    was replaced by every public one, silently."""
    cfg = {"security.protocol": "SSL",
           "ssl.truststore.certificates": "-----BEGIN CERTIFICATE----- !!!! "
                                          "-----END CERTIFICATE-----"}
    with pytest.raises(ConfigError, match="ssl.truststore.certificates .*not valid PEM"):
        ssl_context_from_config(cfg)
    from kproto.net.security import make_ssl_context

    with pytest.raises(ConfigError, match="cadata is empty"):
        make_ssl_context(cadata=b"")


@pytest.mark.parametrize("damage", ["line", "short"])
def test_a_broken_inline_client_certificate_is_a_config_error(damage: str) -> None:
    """A client certificate chain (KIP-651 / librdkafka inline PEM) that does not parse
    raised cryptography's ValueError (its ASN.1 parser's words), not a ConfigError."""
    _ca, chain, key = _leaf()
    lines = chain.splitlines()
    broken = "\n".join(lines[:5] + ["A" * 64] + lines[6:]) if damage == "line" else \
        "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n"
    with pytest.raises(ConfigError, match="ssl.keystore.certificate.chain.*not a valid") as info:
        ssl_context_from_config({"security.protocol": "SSL",
                                 "ssl.keystore.certificate.chain": broken,
                                 "ssl.keystore.key": key})
    assert info.value.__context__ is None and info.value.__cause__ is None


# ------------------------------------------------------------------------ secrets that are no text


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"])
def test_a_secret_that_is_not_text_is_refused_before_it_can_be_quoted(mechanism: str) -> None:
    """A password read from bytes that were not UTF-8 (surrogateescape: sys.argv, the
    environment) has a lone surrogate; encoding it at login raised a UnicodeEncodeError
    whose repr holds the whole password (PLAIN's, the OAuth client secret in its Basic
    header), escaped so that the CLI's masking did not find it."""
    secret = SECRETS[0] + "\udcff"
    cfg: dict[str, Any] = {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                           "sasl.username": "u", "sasl.password": secret}
    if mechanism == "OAUTHBEARER":
        cfg = {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
               "sasl.oauthbearer.token.endpoint.url": "https://127.0.0.1:9/token",
               "sasl.oauthbearer.client.id": "app", "sasl.oauthbearer.client.secret": secret}
    with pytest.raises(ConfigError, match="not valid text") as info:
        mech = sasl_from_config(cfg)
        mech.authenticate(lambda token: b"")        # (before the fix: raised here)
    seen: BaseException | None = info.value
    while seen is not None:
        assert SECRETS[0] not in repr(seen) and SECRETS[0] not in str(seen)
        seen = seen.__cause__ or seen.__context__


# --------------------------------------------------------------------------- Spark options


@pytest.mark.parametrize("client", ["consumer", "producer"])
@pytest.mark.parametrize("key", ["security.protocol", "sasl.jaas.config", "sasl.mechanism",
                                 "ssl.truststore.location", "SSL.Truststore.Password",
                                 "ssl.endpoint.identification.algorithm", "sasl.username"])
def test_a_spark_option_without_its_kafka_prefix_is_refused(client: str, key: str) -> None:
    """.option("security.protocol", "SASL_SSL") without "kafka.": Spark's Kafka source
    ignores it, and so did kproto's, so a job meant to use TLS and SASL connected in
    plaintext without its credentials (or failed on a confusing handshake error)."""
    from kproto.spark.options import client_settings

    options = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", "topic": "t",
               key: SECRETS[0]}
    with pytest.raises(ConfigError, match=f"'kafka.{key}'") as info:
        client_settings(options, client)
    assert SECRETS[0] not in str(info.value)
    # the source's own options (some with a dot) are no client settings
    fine = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
            "fetchOffset.numRetries": "3", "fetchOffset.retryIntervalMs": "10",
            "startingOffsets": "earliest", "failOnDataLoss": "false"}
    assert client_settings(fine, client)["bootstrap_servers"] == ["127.0.0.1:9"]


# --------------------------------------------------------------------------- a forgotten protocol


@pytest.mark.parametrize("protocol", [None, "PLAINTEXT", "SSL"])
@pytest.mark.parametrize("creds", [
    {"sasl.username": "u", "sasl.password": SECRETS[0]},
    {"sasl.oauthbearer.token.endpoint.url": "https://idp.invalid/token",
     "sasl.oauthbearer.client.id": "app", "sasl.oauthbearer.client.secret": SECRETS[0]},
    {"oauth_cb": lambda config: ("t", 0)},
    {"sasl.kerberos.keytab": "/etc/security/etl.keytab"},
])
def test_sasl_credentials_without_a_sasl_protocol_are_refused(protocol: str | None,
                                                              creds: dict[str, Any]) -> None:
    """Credentials with security.protocol forgotten (or SSL): they were dropped
    silently and the client connected without logging in (as a JAAS line or a TLS
    file with the wrong protocol, it is a ConfigError at construction)."""
    cfg = {"bootstrap.servers": "127.0.0.1:9", **creds}
    if protocol:
        cfg["security.protocol"] = protocol
    for make in (Producer, Consumer, Admin):
        with pytest.raises(ConfigError, match="given but security_protocol is") as info:
            make(cfg).close()
        assert SECRETS[0] not in str(info.value)


@pytest.mark.parametrize("handler", [
    "kafkashaded.org.apache.kafka.common.security.oauthbearer.secured."
    "OAuthBearerLoginCallbackHandler",
    "kafkashaded.org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"])
def test_databricks_shaded_oauth_handler_is_javas(handler: str) -> None:
    """Databricks' Kafka is shaded (kafkashaded.org.apache.kafka...): its JAAS module was
    taken, its OAuthBearerLoginCallbackHandler was refused as an unknown Java class."""
    mech = sasl_from_config({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class": handler,
        "sasl.oauthbearer.token.endpoint.url": "https://idp.invalid/token",
        "sasl.jaas.config": "kafkashaded.org.apache.kafka.common.security.oauthbearer."
                            f'OAuthBearerLoginModule required clientId="app" '
                            f'clientSecret="{SECRETS[0]}";'})
    assert "OidcTokenProvider(https://idp.invalid/token" in repr(mech)
    with pytest.raises(ConfigError, match="is a Java class"):
        sasl_from_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                          "sasl.login.callback.handler.class": "kafkashaded.com.acme.Handler",
                          "sasl.oauthbearer.token.endpoint.url": "https://idp.invalid/t"})


def test_spark_options_under_kprotos_underscored_names() -> None:
    """kafka.client_id (kproto's name) met the source's default kafka client.id: the
    default won silently (now it is the user's), kafka.group_id passed the refusal of
    group.id, kafka.bootstrap_servers was 'required'."""
    from kproto.spark.options import client_settings

    base = {"subscribe": "t"}
    got = client_settings({**base, "kafka.bootstrap_servers": "127.0.0.1:9",
                           "kafka.client_id": "mine", "kafka.allow_auto_create_topics": "true"})
    assert got["client_id"] == "mine" and got["allow_auto_create_topics"] is True
    assert got["bootstrap_servers"] == ["127.0.0.1:9"]
    for key in ("kafka.group_id", "kafka.enable_auto_commit", "kafka.Group.Id"):
        with pytest.raises(ConfigError, match="is not supported"):
            client_settings({**base, "kafka.bootstrap.servers": "127.0.0.1:9", key: "x"})


def test_cli_x_settings_under_kprotos_names_override_the_cli_defaults(
        capsys: pytest.CaptureFixture[str]) -> None:
    """-X client_id=... met the CLI's own client.id: with one setting under two names
    refused, the CLI refused its own default; -X wins, under any of the names."""
    from kproto.cli import main

    code = main(["-b", "127.0.0.1:1", "-X", "client_id=mine", "-X", "request.timeout.ms=300",
                 "-X", "bootstrap_servers=127.0.0.1:2", "metadata"])
    err = capsys.readouterr().err
    assert code == 1 and "ConfigError" not in err and "127.0.0.1:2" in err, err
