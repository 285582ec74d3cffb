"""Key material as Java and librdkafka users have it, and a TLS + SASL front.

``Pki(folder)`` makes, with the JDK's ``keytool`` and with ``trustme`` /
``cryptography``: a CA that signs the front's certificate, its trust stores
(JKS, PKCS12, PEM), a client CA (with an intermediate) and client key stores
(JKS with a key password of its own, JKS, PKCS12 by keytool in today's and in
Java 8's algorithms, PKCS12 by cryptography, PEM), a keytool-native
self-signed client, and expired and not-yet-valid clients.

``SecureChain(pki)``: a real TLS terminator (tests/test_security.py's
``TlsProxy``) that requires a client certificate, in front of the in-test SASL
gateway (``SaslGateway``: NOT a broker, see tests/test_security.py), in front of
a real Tansu that advertises the terminator's port, so Producer, Consumer and
Admin talk through TLS + SASL for every request.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .test_security import GATEWAY_USERS, PASSWORD, SaslGateway, TlsProxy

TS_PASS = "trust-Pa55-9q"        # trust store password
KS_PASS = "store-Pa55-7w"        # key store password
KEY_PASS = "key-Pa55-3z"         # a key password other than the store's
SECRETS = (TS_PASS, KS_PASS, KEY_PASS, PASSWORD)
SCRAM_USER = "alice512"          # GATEWAY_USERS: SCRAM-SHA-512 with PASSWORD
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="{SCRAM_USER}" password="{PASSWORD}";')


def need_keytool() -> str:
    tool = shutil.which("keytool")
    if tool is None:
        pytest.skip("the JDK's keytool is not installed: Java key stores cannot be made")
    return tool


def keytool(*args: str, stdin: str = "") -> None:
    done = subprocess.run([need_keytool(), "-J-Duser.language=en", *args], input=stdin.encode(),
                          capture_output=True, timeout=120)
    assert done.returncode == 0, (args, done.stdout, done.stderr)


class Pki:
    """Every kind of store, in ``folder``; attributes are paths (str)."""

    def __init__(self, folder: Path) -> None:
        import trustme
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        self.folder = folder
        f = lambda name: str(folder / name)  # noqa: E731
        self.ca = trustme.CA()
        self.server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.client_ca = trustme.CA()
        self.ca_pem = f("ca.pem")
        self.ca.cert_pem.write_to_path(self.ca_pem)
        self.ca_text = self.ca.cert_pem.bytes().decode()
        # trust stores
        self.trust_jks, self.trust_p12 = f("trust.jks"), f("trust.p12")
        for path, kind in ((self.trust_jks, "JKS"), (self.trust_p12, "PKCS12")):
            keytool("-importcert", "-noprompt", "-alias", "kafka-ca", "-file", self.ca_pem,
                    "-keystore", path, "-storetype", kind, "-storepass", TS_PASS)
        # a client issued by the client CA: PKCS12 by cryptography, then keytool's stores
        # (from an intermediate CA: the client must send its chain)
        leaf = self.client_ca.create_child_ca().issue_cert("client.example",
                                                           common_name="kproto-client")
        key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
        from cryptography import x509

        chain = [x509.load_pem_x509_certificate(b.bytes()) for b in leaf.cert_chain_pems]
        self.client_p12 = f("client-cryptography.p12")
        Path(self.client_p12).write_bytes(pkcs12.serialize_key_and_certificates(
            b"client", key, chain[0], chain[1:],
            serialization.BestAvailableEncryption(KS_PASS.encode())))
        self.key_jks, self.key_jks_same = f("keystore.jks"), f("keystore-same.jks")
        for path, keypass in ((self.key_jks, KEY_PASS), (self.key_jks_same, KS_PASS)):
            keytool("-importkeystore", "-noprompt", "-srckeystore", self.client_p12,
                    "-srcstoretype", "PKCS12", "-srcstorepass", KS_PASS, "-srcalias", "client",
                    "-destalias", "client", "-destkeystore", path, "-deststoretype", "JKS",
                    "-deststorepass", KS_PASS, "-destkeypass", keypass)
        self.key_p12, self.key_p12_legacy = f("keystore.p12"), f("keystore-java8.p12")
        for path, extra in ((self.key_p12, []), (self.key_p12_legacy,
                                                 ["-J-Dkeystore.pkcs12.legacy"])):
            keytool(*extra, "-importkeystore", "-noprompt", "-srckeystore", self.key_jks_same,
                    "-srcstoretype", "JKS", "-srcstorepass", KS_PASS, "-destkeystore", path,
                    "-deststoretype", "PKCS12", "-deststorepass", KS_PASS)
        # PEM: chain and encrypted key apart (KIP-651 / librdkafka), and in one file
        self.chain_pem_text = "".join(b.bytes().decode() for b in leaf.cert_chain_pems)
        self.key_pem_text = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(KEY_PASS.encode())).decode()
        self.key_pem_file = f("keystore.pem")
        Path(self.key_pem_file).write_text(self.key_pem_text + self.chain_pem_text)
        # keytool's own keys: self-signed, RSA, with a key password of its own
        self.native_jks = f("native.jks")
        keytool("-genkeypair", "-alias", "me", "-keyalg", "RSA", "-keysize", "2048",
                "-dname", "CN=native-client", "-validity", "30", "-keystore", self.native_jks,
                "-storetype", "JKS", "-storepass", KS_PASS, "-keypass", KEY_PASS)
        self.native_pem = f("native.pem")
        keytool("-exportcert", "-rfc", "-alias", "me", "-keystore", self.native_jks,
                "-storepass", KS_PASS, "-file", self.native_pem)
        self.expired_jks, self.future_jks = f("expired.jks"), f("future.jks")
        for path, start in ((self.expired_jks, "-30d"), (self.future_jks, "+30d")):
            keytool("-genkeypair", "-alias", "me", "-keyalg", "EC", "-groupname", "secp256r1",
                    "-dname", "CN=dated-client", "-startdate", start, "-validity", "2",
                    "-keystore", path, "-storetype", "PKCS12", "-storepass", KS_PASS)
        # a client the front does not trust
        self.stranger_p12 = f("stranger.p12")
        stranger = trustme.CA().issue_cert("stranger.example")
        skey = serialization.load_pem_private_key(stranger.private_key_pem.bytes(), None)
        Path(self.stranger_p12).write_bytes(pkcs12.serialize_key_and_certificates(
            b"s", skey, x509.load_pem_x509_certificate(stranger.cert_chain_pems[0].bytes()),
            None, serialization.BestAvailableEncryption(KS_PASS.encode())))

    def front_context(self, require_client_cert: bool = True) -> ssl.SSLContext:
        """The TLS terminator's context: the front's certificate, and (mutual TLS)
        the client CA and the keytool-native client as the clients it accepts."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.server.configure_cert(ctx)
        if require_client_cert:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cadata=self.client_ca.cert_pem.bytes().decode() +
                                      Path(self.native_pem).read_text())
        return ctx


class SecureChain:
    """TLS (client certificate required) -> SASL gateway -> Tansu advertising the front."""

    def __init__(self, pki: Pki) -> None:
        from kproto.testing import TansuBroker

        self.gateway = SaslGateway(("127.0.0.1", 9), GATEWAY_USERS)
        self.front = TlsProxy(pki.front_context(), ("127.0.0.1", self.gateway.port))
        self.tansu = TansuBroker(advertised_port=self.front.port)
        try:
            self.tansu.start()
        except RuntimeError as exc:
            self.stop()
            pytest.fail(f"could not start the Tansu broker: {exc}", pytrace=False)
        self.gateway.upstream = (self.tansu.host, self.tansu.port)
        self.bootstrap = f"127.0.0.1:{self.front.port}"

    def stop(self) -> None:
        self.front.stop()
        self.gateway.stop()
        self.tansu.stop()


def java_settings(pki: Pki, **extra: Any) -> dict[str, Any]:
    """A Java client's settings for the chain: JKS stores and a JAAS line."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": JAAS,
            "ssl.truststore.location": pki.trust_jks, "ssl.truststore.password": TS_PASS,
            "ssl.keystore.location": pki.key_jks, "ssl.keystore.password": KS_PASS,
            "ssl.key.password": KEY_PASS, **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def no_secret_in(exc: BaseException) -> None:
    """No password in the exception, its repr, its traceback or the chain behind it."""
    import traceback

    seen: BaseException | None = exc
    texts = ["".join(traceback.format_exception(exc))]
    while seen is not None:
        texts += [str(seen), repr(seen)]
        seen = seen.__cause__ or seen.__context__
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} shown in {text!r}"


__all__ = ["Pki", "SecureChain", "java_settings", "keytool", "need_keytool", "no_secret_in",
           "free_port", "JAAS", "TS_PASS", "KS_PASS", "KEY_PASS", "SECRETS", "SCRAM_USER",
           "PASSWORD"]
