"""TLS contexts and SASL mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).

:class:`~kproto.net.BrokerConnection` takes ``ssl_context=`` (an
:class:`ssl.SSLContext`, wrapped around the socket right after connect) and
``sasl=`` (one of the mechanism objects below, run after ApiVersions through
SaslHandshake v1 and SaslAuthenticate)::

    ctx = make_ssl_context(cafile="ca.pem")                       # verifies by default
    sasl = SaslScram("alice", "s3cret", "sha512")                 # SCRAM-SHA-512
    with BrokerConnection("broker:9093", ssl_context=ctx, sasl=sasl) as conn:
        conn.request(ApiKey.METADATA, {"topics": None})

:func:`ssl_context_from_config` and :func:`sasl_from_config` build both from
client settings (``security_protocol``, ``ssl_*``, ``sasl_*``; Kafka's and
librdkafka's dotted names are accepted too).

Passwords never appear in ``repr()``, ``str()``, exceptions or logs.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import ssl
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..config import SASL_CREDENTIALS, endpoint_identification, is_text, setting_key
from ..errors import ConfigError, SaslAuthenticationFailedError
from .jaas import merge_jaas
from .msk import check_client_handler
from .stores import TLS_KEYS, tls_material

if TYPE_CHECKING:
    from .kerberos import SaslGssapi
    from .msk import SaslAwsMskIam
    from .oauth import SaslOauthBearer

__all__ = [
    "SECURITY_PROTOCOLS",
    "SASL_MECHANISMS",
    "SaslPlain",
    "SaslScram",
    "make_ssl_context",
    "ssl_context_from_config",
    "sasl_from_config",
]

#: The values of ``security_protocol``.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The SASL mechanisms kproto implements (OAUTHBEARER: kproto.net.oauth; AWS_MSK_IAM:
#: kproto.net.msk, with the aws extra; GSSAPI:
#: kproto.net.kerberos, with the kerberos extra).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI",
                   "AWS_MSK_IAM")

Exchange = Callable[[bytes], bytes]

_MASK = "'***'"


# --------------------------------------------------------------------------- TLS


def make_ssl_context(
    *,
    cafile: str | None = None,
    cadata: str | bytes | None = None,
    capath: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | bytes | None = None,
    check_hostname: bool = True,
    verify: bool = True,
    ciphers: str | None = None,
) -> ssl.SSLContext:
    """A client :class:`ssl.SSLContext` for broker connections.

    Verification is on by default: the broker's certificate must chain to
    ``cafile``/``cadata`` (PEM), or to the system's default CAs when neither
    is given (``capath``: a directory of hashed CA files, as OpenSSL's ``-CApath``),
    and must name the host connected to (``check_hostname``; Kafka's
    ``ssl.endpoint.identification.algorithm=https``). ``verify=False`` turns
    off both checks (anyone on the path can then read and change the traffic).
    ``certfile``/``keyfile``/``password`` give a client certificate for mutual
    TLS; ``ciphers`` is an OpenSSL cipher string. TLS 1.2 is the minimum.

    Raises :class:`~kproto.errors.ConfigError` for files that cannot be read
    or parsed, a wrong key password, or a bad cipher string.
    """
    if cadata is not None and not cadata:
        raise ConfigError("cadata is empty: no CA to trust (without it the system's CAs are "
                          "trusted; give None for that)")
    try:
        if verify:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile,
                                             capath=capath, cadata=cadata)
            ctx.check_hostname = bool(check_hostname)
            ctx.verify_mode = ssl.CERT_REQUIRED
        else:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    except (OSError, ssl.SSLError, ValueError) as exc:
        where = cafile if cafile is not None else capath if capath is not None else "cadata"
        raise ConfigError(f"cannot load the CA certificates from {where}: {exc}") from None
    if certfile is not None:
        try:
            ctx.load_cert_chain(certfile, keyfile, password)
        except (OSError, ssl.SSLError, ValueError, TypeError) as exc:
            # exc never contains the password; it is not chained, to be sure.
            raise ConfigError(f"cannot load the client certificate {certfile!r} / key "
                              f"{keyfile or certfile!r}: {exc.__class__.__name__}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
    elif keyfile is not None:
        raise ConfigError("ssl keyfile given without a certfile")
    if ciphers:
        try:
            ctx.set_ciphers(ciphers)
        except ssl.SSLError as exc:
            raise ConfigError(f"invalid ssl ciphers {ciphers!r}: {exc}") from None
    return ctx


#: Kafka / librdkafka / kafka-python names -> the names used here.
_ALIASES = {
    "ssl_ca_location": "ssl_cafile",
    "ssl_truststore_certificates": "ssl_cadata",       # KIP-651
    "ssl_ca_pem": "ssl_cadata",                         # librdkafka
    "ssl_keystore_certificate_chain": "ssl_certdata",   # KIP-651
    "ssl_certificate_pem": "ssl_certdata",              # librdkafka
    "ssl_keystore_key": "ssl_keydata",                  # KIP-651
    "ssl_key_pem": "ssl_keydata",                       # librdkafka
    "ssl_certificate_location": "ssl_certfile",
    "ssl_key_location": "ssl_keyfile",
    "ssl_key_password": "ssl_password",
    "ssl_cipher_suites": "ssl_ciphers",
    "sasl_mechanisms": "sasl_mechanism",
    "sasl_username": "sasl_plain_username",
    "sasl_password": "sasl_plain_password",
    "sasl_oauthbearer_client_credentials_client_id": "sasl_oauthbearer_client_id",
    "sasl_oauthbearer_client_credentials_client_secret": "sasl_oauthbearer_client_secret",
    "https_ca_location": "sasl_oauthbearer_ssl_cafile",
}


def _truthy(value: Any, key: str) -> bool:
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off", ""):
            return False
        raise ConfigError(f"{key} must be true or false, not {value!r}")
    return bool(value)


def _normalize(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Underscored lower-case keys, Kafka's aliases resolved; one setting under two of
    its names with different values is a ConfigError (as in :func:`kproto.config.resolve`)."""
    out: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for raw, value in cfg.items():
        key = setting_key(raw)
        if value is None:
            continue        # unset: the default applies
        if key == "ssl_endpoint_identification_algorithm":
            try:
                key, value = "ssl_check_hostname", endpoint_identification(value)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        elif key == "enable_ssl_certificate_verification":
            key = "ssl_verify"
        key = _ALIASES.get(key, key)
        first = origin.setdefault(key, str(raw))
        if first != str(raw) and out[key] != value:
            raise ConfigError(f"{first!r} and {str(raw)!r} are the same setting ({key}) with "
                              "different values: give it once (kproto does not pick one)")
        out[key] = value
    return out


def _protocol(cfg: Mapping[str, Any]) -> str:
    proto = str(cfg.get("security_protocol") or "PLAINTEXT").strip().upper()
    if proto not in SECURITY_PROTOCOLS:
        raise ConfigError(f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                          f"not {proto!r}")
    return proto


def ssl_context_from_config(cfg: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The TLS context for client settings ``cfg``, or None for a plaintext protocol.

    Keys: ``security_protocol`` (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``,
    ``SASL_SSL``), ``ssl_context`` (a ready :class:`ssl.SSLContext`, which wins
    over the rest), ``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``,
    ``ssl_password``, ``ssl_check_hostname`` (default True), ``ssl_verify``
    (default True) and ``ssl_ciphers``; trust and key stores (JKS, PKCS12,
    PEM) and inline PEM as :func:`kproto.net.stores.tls_material` reads them.
    Kafka's and librdkafka's dotted names (``ssl.ca.location``,
    ``ssl.truststore.location``, ``ssl.keystore.password``, ``ssl.key.pem``,
    ``ssl.endpoint.identification.algorithm``...) are accepted too.

    A ``ssl_context`` or ``ssl_*`` file with a plaintext ``security_protocol``
    is a :class:`~kproto.errors.ConfigError`, not silently ignored.
    """
    c = _normalize(cfg)
    proto = _protocol(c)
    ready = c.get("ssl_context")
    files = [k for k in TLS_KEYS if c.get(k)]
    if proto in ("PLAINTEXT", "SASL_PLAINTEXT"):
        if ready is not None or files:
            given = "ssl_context" if ready is not None else ", ".join(files)
            raise ConfigError(f"{given} given but security_protocol is {proto}: use "
                              f"{'SASL_SSL' if proto.startswith('SASL') else 'SSL'} for TLS")
        return None
    if ready is not None:
        if not isinstance(ready, ssl.SSLContext):
            raise ConfigError(f"ssl_context must be an ssl.SSLContext, not "
                              f"{type(ready).__name__}")
        return ready
    check = c.get("ssl_check_hostname")
    verify = c.get("ssl_verify")
    found = tls_material(c)         # stores and inline PEM: kproto/net/stores.py
    ctx = make_ssl_context(
        cafile=found.cafile, capath=found.capath, cadata=found.cadata,
        certfile=found.certfile, keyfile=found.keyfile, password=found.password or None,
        check_hostname=True if check is None else _truthy(check, "ssl_check_hostname"),
        verify=True if verify is None else _truthy(verify, "ssl_verify"),
        ciphers=c.get("ssl_ciphers") or None,
    )
    if found.identity is not None:
        found.identity.load_into(ctx)
    return ctx


def sasl_from_config(cfg: Mapping[str, Any]
                     ) -> SaslPlain | SaslScram | SaslOauthBearer | SaslGssapi | \
        SaslAwsMskIam | None:
    """The SASL mechanism for client settings ``cfg``, or None without SASL.

    Keys: ``security_protocol``, ``sasl_mechanism`` (``PLAIN``,
    ``SCRAM-SHA-256``, ``SCRAM-SHA-512``), ``sasl_plain_username``,
    ``sasl_plain_password`` (librdkafka's ``sasl.username`` /
    ``sasl.password`` too) and ``sasl_allow_plaintext_plain`` (default False):
    PLAIN sends the password as it is, so over ``SASL_PLAINTEXT`` it is a
    :class:`~kproto.errors.ConfigError` unless that flag is set. A mechanism
    with a non-SASL protocol, or a SASL protocol without a mechanism, is a
    ConfigError too. ``OAUTHBEARER`` (which sends a bearer token as it is, so
    the same flag applies) takes its settings from
    :func:`kproto.net.oidc.oauthbearer_from_config`, ``GSSAPI`` (Kerberos) from
    :func:`kproto.net.kerberos.gssapi_from_config`, ``AWS_MSK_IAM`` (a signed
    request that serves 15 minutes: the same flag) from
    :func:`kproto.net.msk.aws_msk_iam_from_config`.
    """
    c = _normalize(cfg)
    proto = _protocol(c)
    c = merge_jaas(c)           # what sasl_jaas_config gives (kproto/net/jaas.py)
    raw = c.get("sasl_mechanism")
    mechanism = str(raw).strip().upper() if raw else None
    if not proto.startswith("SASL_"):
        if mechanism:
            raise ConfigError(f"sasl_mechanism {mechanism} given but security_protocol is "
                              f"{proto}: use SASL_SSL (or SASL_PLAINTEXT)")
        given = [k for k in SASL_CREDENTIALS if c.get(k) not in (None, "")]
        if given:           # (a forgotten security.protocol: they would be dropped silently)
            raise ConfigError(f"{', '.join(given)} given but security_protocol is {proto}: "
                              "use SASL_SSL (or SASL_PLAINTEXT) and a sasl_mechanism to log "
                              "in with them")
        return None
    if not mechanism:
        raise ConfigError(f"security_protocol {proto} needs sasl_mechanism "
                          f"({', '.join(SASL_MECHANISMS)})")
    check_client_handler(mechanism, c.get("sasl_client_callback_handler_class"))
    if mechanism == "GSSAPI":
        from .kerberos import gssapi_from_config

        return gssapi_from_config(c)
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError(f"unsupported sasl_mechanism {mechanism!r}; kproto supports "
                          f"{', '.join(SASL_MECHANISMS)}")
    if mechanism in ("OAUTHBEARER", "AWS_MSK_IAM"):
        if proto == "SASL_PLAINTEXT" and not _truthy(c.get("sasl_allow_plaintext_plain"),
                                                    "sasl_allow_plaintext_plain"):
            what = "bearer token" if mechanism == "OAUTHBEARER" else \
                "signed request (anyone who reads it logs in with it for 15 minutes)"
            raise ConfigError(f"SASL {mechanism} over SASL_PLAINTEXT would send the {what} in "
                              "clear: use SASL_SSL, or set sasl_allow_plaintext_plain=True")
    if mechanism == "AWS_MSK_IAM":
        from .msk import aws_msk_iam_from_config

        return aws_msk_iam_from_config(c)
    if mechanism == "OAUTHBEARER":
        from .oidc import oauthbearer_from_config

        return oauthbearer_from_config(c)
    username = c.get("sasl_plain_username")
    password = c.get("sasl_plain_password")
    if username is None or password is None:
        raise ConfigError(f"sasl_mechanism {mechanism} needs sasl_plain_username and "
                          f"sasl_plain_password")
    if mechanism == "PLAIN":
        if proto == "SASL_PLAINTEXT" and not _truthy(c.get("sasl_allow_plaintext_plain"),
                                                    "sasl_allow_plaintext_plain"):
            raise ConfigError("SASL PLAIN over SASL_PLAINTEXT would send the password in "
                              "clear: use SASL_SSL, a SCRAM mechanism, or set "
                              "sasl_allow_plaintext_plain=True")
        return SaslPlain(str(username), str(password))
    return SaslScram(str(username), str(password),
                     "sha256" if mechanism == "SCRAM-SHA-256" else "sha512")


# --------------------------------------------------------------------------- SASL


def _check_text(what: str, value: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"SASL {what} must be a str, not {type(value).__name__}")
    if "\x00" in value:
        raise ConfigError(f"SASL {what} must not contain NUL characters")
    if not is_text(value):
        raise ConfigError(f"SASL {what} is not valid text (it has a lone surrogate: bytes "
                          "that were not UTF-8?)")
    return value


class SaslPlain:
    """SASL PLAIN (RFC 4616): the user name and password, sent as they are.

    Use it over TLS (``SASL_SSL``) only: without TLS anyone on the path reads
    the password. ``authzid`` (rarely used) asks to act as another identity.
    """

    name = "PLAIN"

    def __init__(self, username: str, password: str, *, authzid: str = "") -> None:
        self.username = _check_text("username", username)
        self._password = _check_text("password", password)
        self.authzid = _check_text("authzid", authzid)

    def __repr__(self) -> str:
        return f"SaslPlain(username={self.username!r}, password={_MASK})"

    __str__ = __repr__

    def authenticate(self, exchange: Exchange) -> None:
        """Send ``authzid NUL username NUL password``; the broker's error code
        (raised by ``exchange``) says whether it was accepted."""
        token = b"\x00".join(s.encode("utf-8")
                             for s in (self.authzid, self.username, self._password))
        exchange(token)


def _saslname(name: str) -> str:
    """RFC 5802 saslname: ``=`` -> ``=3D``, ``,`` -> ``=2C``."""
    return name.replace("=", "=3D").replace(",", "=2C")


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise SaslAuthenticationFailedError(f"SCRAM server sent an invalid base64 {what}") \
            from None


def _parse(message: bytes, what: str) -> dict[str, str]:
    """``a=x,b=y`` -> {"a": "x", "b": "y"} (the first value of each attribute)."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationFailedError(f"SCRAM {what} is not UTF-8") from None
    attrs: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslAuthenticationFailedError(f"malformed SCRAM {what}: "
                                                f"attribute {part[:20]!r}")
        attrs.setdefault(key, value)
    return attrs


class SaslScram:
    """SASL SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka speaks it.

    The client checks the server: its nonce must extend ours, the salt must
    decode, the iteration count must be at least ``min_iterations`` (4096,
    RFC 7677's minimum, also Kafka's) and at most ``max_iterations``, and its
    final message must carry the right server signature (proof that it knows
    the credential). Every failure raises
    :class:`~kproto.errors.SaslAuthenticationFailedError`.

    As in Kafka's clients, user name and password are used as UTF-8 without
    SASLprep normalization. ``nonce`` fixes the client nonce, for tests only;
    by default each exchange draws 32 random bytes from :mod:`secrets`.
    """

    _HASHES = {"sha256": "SCRAM-SHA-256", "sha512": "SCRAM-SHA-512"}

    def __init__(self, username: str, password: str, hash_name: str = "sha256", *,
                 nonce: str | None = None, min_iterations: int = 4096,
                 max_iterations: int = 1_000_000) -> None:
        hash_name = hash_name.lower().replace("-", "")
        if hash_name not in self._HASHES:
            raise ConfigError(f"SCRAM hash must be 'sha256' or 'sha512', not {hash_name!r}")
        self.hash_name = hash_name
        self.name = self._HASHES[hash_name]
        self.username = _check_text("username", username)
        self._password = _check_text("password", password)
        if nonce is not None and (not nonce or "," in nonce or not nonce.isprintable()):
            raise ConfigError("a SCRAM nonce is printable text without ','")
        self._fixed_nonce = nonce
        self.min_iterations = min_iterations
        self.max_iterations = max_iterations

    def __repr__(self) -> str:
        return f"SaslScram({self.name}, username={self.username!r}, password={_MASK})"

    __str__ = __repr__

    # -- the exchange

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.hash_name).digest()

    def _h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def client_first(self, nonce: str) -> bytes:
        """The client-first-message ``n,,n=<user>,r=<nonce>``."""
        return f"n,,n={_saslname(self.username)},r={nonce}".encode()

    def authenticate(self, exchange: Exchange) -> None:
        """Run the two SCRAM round trips through ``exchange``."""
        nonce = self._fixed_nonce
        if nonce is None:
            nonce = base64.b64encode(secrets.token_bytes(32)).decode("ascii")
        first = self.client_first(nonce)
        server_first = exchange(first)
        final, server_signature = self.client_final(first, server_first)
        server_final = exchange(final)
        self.verify_server_final(server_final, server_signature)

    def client_final(self, client_first: bytes, server_first: bytes) -> tuple[bytes, bytes]:
        """Check server-first-message; return (client-final-message, expected
        server signature)."""
        attrs = _parse(server_first, "server-first-message")
        if "e" in attrs:
            raise SaslAuthenticationFailedError(f"{self.name} authentication of "
                                                f"{self.username!r} failed: {attrs['e']}")
        if "m" in attrs:
            raise SaslAuthenticationFailedError("SCRAM server requires an unsupported "
                                                "extension (m=)")
        missing = [k for k in "rsi" if k not in attrs]
        if missing:
            raise SaslAuthenticationFailedError(f"SCRAM server-first-message lacks "
                                                f"{', '.join(missing)}=")
        client_nonce = client_first.decode().rpartition(",r=")[2]
        server_nonce = attrs["r"]
        if not server_nonce.startswith(client_nonce) or len(server_nonce) <= len(client_nonce):
            raise SaslAuthenticationFailedError("SCRAM server nonce does not extend the "
                                                "client nonce (a replayed or forged exchange)")
        salt = _b64decode(attrs["s"], "salt")
        if not salt:
            raise SaslAuthenticationFailedError("SCRAM server sent an empty salt")
        try:
            iterations = int(attrs["i"])
        except ValueError:
            raise SaslAuthenticationFailedError(f"SCRAM iteration count {attrs['i'][:20]!r} "
                                                f"is not a number") from None
        if iterations < self.min_iterations:
            raise SaslAuthenticationFailedError(
                f"SCRAM server asks for {iterations} iterations; at least "
                f"{self.min_iterations} are required (RFC 7677)")
        if iterations > self.max_iterations:
            raise SaslAuthenticationFailedError(
                f"SCRAM server asks for {iterations} iterations, more than max_iterations "
                f"({self.max_iterations})")
        salted = hashlib.pbkdf2_hmac(self.hash_name, self._password.encode("utf-8"), salt,
                                     iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = self._h(client_key)
        without_proof = b"c=biws,r=" + server_nonce.encode("utf-8")
        auth_message = client_first[3:] + b"," + server_first + b"," + without_proof
        client_signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
        server_key = self._hmac(salted, b"Server Key")
        server_signature = self._hmac(server_key, auth_message)
        return without_proof + b",p=" + base64.b64encode(proof), server_signature

    def verify_server_final(self, server_final: bytes, server_signature: bytes) -> None:
        """Check server-final-message: an ``e=`` error, or ``v=`` matching
        ``server_signature``."""
        attrs = _parse(server_final, "server-final-message")
        if "e" in attrs:
            raise SaslAuthenticationFailedError(f"{self.name} authentication of "
                                                f"{self.username!r} failed: {attrs['e']}")
        if "v" not in attrs:
            raise SaslAuthenticationFailedError("SCRAM server-final-message has no "
                                                "server signature (v=)")
        got = _b64decode(attrs["v"], "server signature")
        if not hmac.compare_digest(got, server_signature):
            raise SaslAuthenticationFailedError(
                "SCRAM server signature is wrong: the server does not know the credential "
                "(an impostor?)")
