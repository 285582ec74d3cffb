"""TLS trust and key material as Java and librdkafka users configure it.

:func:`tls_material` reads the ``ssl_*`` settings (underscored kproto names;
see docs/security.md for the Java and librdkafka names of each) and returns
what goes into the :class:`ssl.SSLContext`:

- trust: a PEM CA file or directory (``ssl_cafile``), inline PEM
  (``ssl_cadata``: librdkafka's ``ssl.ca.pem``, KIP-651's
  ``ssl.truststore.certificates``) or a trust store (``ssl_truststore_location``
  with ``ssl_truststore_type`` JKS, PKCS12, PEM or JCEKS and
  ``ssl_truststore_password``);
- the client's identity for mutual TLS: PEM files (``ssl_certfile``,
  ``ssl_keyfile``), inline PEM (``ssl_certdata`` and ``ssl_keydata``:
  librdkafka's ``ssl.certificate.pem``/``ssl.key.pem``, KIP-651's
  ``ssl.keystore.certificate.chain``/``ssl.keystore.key``) or a key store
  (``ssl_keystore_location``, ``_type``, ``_password``, and ``ssl_password``
  for the key: Java's ``ssl.key.password``).

Without a type, a store's type is read from its first bytes (librdkafka's
``ssl.keystore.location`` is PKCS12, Java's defaults to JKS: both work). PKCS12
and private keys are read with ``cryptography`` (``pip install
'kproto[security]'``); JKS and JCEKS through the JDK's ``keytool`` (every Spark
node has a JVM), which converts the store to PKCS12 under a random password in
a private temporary directory, removed at once. Keys reach the context through
an in-memory file (``memfd``) holding the key encrypted under a random
password, never as a plaintext file on disk.

Every mistake is a :class:`~kproto.errors.ConfigError` naming the option: a
wrong store or key password, a type that does not match the file, a key store
without a key, a client certificate that has expired or is not valid yet, a
location that is a directory or larger than a key store can be. Passwords are
never shown.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import os
import re
import secrets
import shutil
import ssl
import stat
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config import is_text
from ..errors import ConfigError
from . import keytool

__all__ = ["TLS_KEYS", "STORE_TYPES", "TlsMaterial", "ClientIdentity", "tls_material"]

STORE_TYPES = ("JKS", "PKCS12", "PEM", "JCEKS")
#: The settings that are TLS material (any of them with a plaintext protocol is an error).
TLS_KEYS = ("ssl_cafile", "ssl_cadata", "ssl_truststore_location", "ssl_certfile",
            "ssl_keyfile", "ssl_certdata", "ssl_keydata", "ssl_keystore_location")
#: Largest store or PEM file read (a trust store of every public CA is ~250 KiB).
MAX_STORE_BYTES = 16 << 20

# how users know each option (Java name first, then librdkafka's), for messages
_NAMES = {
    "ssl_cafile": "ssl.ca.location",
    "ssl_cadata": "ssl.truststore.certificates / ssl.ca.pem",
    "ssl_truststore_location": "ssl.truststore.location",
    "ssl_truststore_password": "ssl.truststore.password",
    "ssl_truststore_type": "ssl.truststore.type",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_certdata": "ssl.keystore.certificate.chain / ssl.certificate.pem",
    "ssl_keydata": "ssl.keystore.key / ssl.key.pem",
    "ssl_keystore_location": "ssl.keystore.location",
    "ssl_keystore_password": "ssl.keystore.password",
    "ssl_keystore_type": "ssl.keystore.type",
    "ssl_password": "ssl.key.password",
}


def _name(key: str) -> str:
    return f"{_NAMES[key]} ({key})" if key in _NAMES else key


def _crypto(what: str) -> Any:
    """The ``cryptography`` modules, or a ConfigError naming the extra."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError(f"{what} needs the 'cryptography' package: pip install "
                          "'kproto[security]'") from None
    return x509, serialization, pkcs12


# --------------------------------------------------------------------------- the result


class ClientIdentity:
    """A client certificate chain and its private key, in memory, for mutual
    TLS. ``repr()`` shows the certificate's subject, never the key; it cannot
    be pickled (a key is not sent anywhere)."""

    def __init__(self, chain: list[Any], key: Any, source: str) -> None:
        self.chain = chain
        self._key = key
        self.source = source

    def __repr__(self) -> str:
        subject = self.chain[0].subject.rfc4514_string() if self.chain else "?"
        return f"ClientIdentity({subject!r}, from {self.source}, key=***)"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a ClientIdentity holds a private key and is not pickled")

    def load_into(self, ctx: ssl.SSLContext) -> None:
        """Give ``ctx`` this certificate chain and key (``load_cert_chain``)."""
        _, serialization, _ = _crypto(self.source)
        once = secrets.token_urlsafe(32).encode()
        pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in self.chain)
        pem += self._key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.BestAvailableEncryption(once))
        try:
            _load_chain_from_memory(ctx, pem, once)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ConfigError(f"{self.source}: the key and certificate were refused: "
                              f"{exc.__class__.__name__}: {exc}") from None


def _load_chain_from_memory(ctx: ssl.SSLContext, pem: bytes, password: bytes) -> None:
    """``ctx.load_cert_chain`` from bytes: an anonymous in-memory file where the
    system has one (Linux memfd), else a 0600 file in a private 0700 directory,
    removed at once. ``pem``'s key is encrypted under ``password`` either way."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("kproto-client-key", getattr(os, "MFD_CLOEXEC", 1))
        try:
            os.write(fd, pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}", password=password)
        finally:
            os.close(fd)
        return
    folder = tempfile.mkdtemp(prefix="kproto-tls-")
    path = os.path.join(folder, "chain.pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=password)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class TlsMaterial:
    """What :func:`tls_material` found: trust (``cafile``, ``capath``, or
    ``cadata`` as DER certificates) and the client's identity (``certfile``/
    ``keyfile``/``password`` for PEM files, else ``identity``)."""

    cafile: str | None = None
    capath: str | None = None
    cadata: bytes | None = None
    certfile: str | None = None
    keyfile: str | None = None
    password: str | None = None
    identity: ClientIdentity | None = None

    def __repr__(self) -> str:
        shown = {k: v for k, v in (("cafile", self.cafile), ("capath", self.capath),
                                   ("certfile", self.certfile), ("keyfile", self.keyfile))
                 if v is not None}
        if self.cadata is not None:
            shown["cadata"] = f"<{len(self.cadata)} bytes>"
        if self.password is not None:
            shown["password"] = "***"
        return f"TlsMaterial({shown}, identity={self.identity!r})"


# --------------------------------------------------------------------------- reading


def _regular(path: Any, key: str) -> None:
    """``path`` (setting ``key``) is a regular file of at most MAX_STORE_BYTES, or a
    ConfigError says what it is instead (a FIFO or a device would block the read)."""
    where = f"{_name(key)} {str(path)!r}"
    try:
        info = os.stat(path)
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: {getattr(exc, 'strerror', None) or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{where} is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{where} is not a regular file")
    if info.st_size > MAX_STORE_BYTES:
        raise ConfigError(f"{where} is {info.st_size} bytes, more than a key store or PEM "
                          f"file can be ({MAX_STORE_BYTES} bytes)")


def _read(path: Any, key: str) -> bytes:
    """The bytes of the file ``path`` names (setting ``key``), checked by :func:`_regular`."""
    where = f"{_name(key)} {str(path)!r}"
    _regular(path, key)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_STORE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None
    if len(data) > MAX_STORE_BYTES:
        raise ConfigError(f"{where} is larger than a key store or PEM file can be")
    return data


def _sniff(data: bytes) -> str | None:
    """The store type ``data`` is, from its first bytes."""
    if data[:4] == b"\xfe\xed\xfe\xed":
        return "JKS"
    if data[:4] == b"\xce\xce\xce\xce":
        return "JCEKS"
    if b"-----BEGIN " in data[:65536]:
        return "PEM"
    if data[:1] == b"\x30":
        return "PKCS12"
    return None


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def _pem_blocks(text: str | bytes, key: str) -> list[tuple[str, str]]:
    """``(label, PEM text)`` of each block, re-wrapped: Kafka takes PEM whose
    line breaks became spaces (a one-line option), OpenSSL does not."""
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    blocks = []
    for label, body in _PEM_BLOCK.findall(str(text)):
        if ":" in body:         # RFC 1421 headers (an encrypted traditional key): as given
            lines = body.strip().splitlines()
        else:
            flat = "".join(body.split())
            lines = [flat[i:i + 64] for i in range(0, len(flat), 64)]
        blocks.append((label, f"-----BEGIN {label}-----\n" + "\n".join(lines) +
                       f"\n-----END {label}-----\n"))
    if not blocks:
        raise ConfigError(f"{_name(key)} holds no PEM block (-----BEGIN ...-----)")
    return blocks


def _pem_der(block: str) -> bytes:
    """The bytes of one PEM block (strict base64), b"" when they are not base64."""
    body = "".join(block.strip().splitlines()[1:-1])
    try:
        return base64.b64decode(body, validate=True)
    except ValueError:
        return b""


def _pem_certs_der(text: str | bytes, key: str) -> bytes:
    """The certificates of PEM ``text`` as concatenated DER (``cadata`` takes it)."""
    out = []
    for label, block in _pem_blocks(text, key):
        if label not in ("CERTIFICATE", "TRUSTED CERTIFICATE", "X509 CERTIFICATE"):
            continue
        der = _pem_der(block)
        if not der:     # (ssl's decoder skips what is not base64: b"" would trust the system's)
            raise ConfigError(f"{_name(key)}: a certificate is not valid PEM (its base64 is "
                              "empty or broken)")
        out.append(der)
    if not out:
        raise ConfigError(f"{_name(key)} holds no certificate (-----BEGIN CERTIFICATE-----)")
    return b"".join(out)


def _pem_identity(text: str | bytes, key_text: str | bytes | None, password: str | None,
                  key: str) -> tuple[list[Any], Any]:
    """Certificates and private key from PEM (one text, or chain and key apart)."""
    x509, serialization, _ = _crypto(_name(key))
    certs, keys = [], []
    for label, block in _pem_blocks(text, key) + \
            (_pem_blocks(key_text, "ssl_keydata") if key_text is not None else []):
        if label.endswith("CERTIFICATE"):
            try:
                certs.append(x509.load_der_x509_certificate(_pem_der(block)))
            except ValueError:
                certs.append(None)      # (raised below, outside the handler)
        elif label.endswith("PRIVATE KEY"):
            keys.append(block)
    where = _name("ssl_keydata" if key_text is not None else key)
    if None in certs:
        raise ConfigError(f"{_name(key)}: certificate {certs.index(None) + 1} is not a valid "
                          "certificate (broken PEM or DER)")
    if len(keys) != 1:
        raise ConfigError(f"{where} holds {len(keys)} private keys; one is needed")
    encrypted = "ENCRYPTED" in keys[0]
    if encrypted and password is None:
        raise ConfigError(f"the key in {where} is encrypted: give its password as "
                          f"{_name('ssl_password')}")
    try:
        private = serialization.load_pem_private_key(
            keys[0].encode(), password.encode() if encrypted and password is not None else None)
    except (ValueError, TypeError) as exc:
        if encrypted:
            raise ConfigError(f"{_name('ssl_password')} does not decrypt the key in "
                              f"{where}") from None
        raise ConfigError(f"{where}: the private key cannot be read: {exc}") from None
    return certs, private


# --------------------------------------------------------------------------- stores

_CACHE: dict[tuple[Any, ...], Any] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_KEY = secrets.token_bytes(32)     # passwords reach the cache key only through HMAC


def _cache_key(data: bytes, *parts: Any) -> tuple[Any, ...]:
    """The cache key of a store read as ``data``: its content (a store rewritten in
    place with the same size and time, as ``cp -p`` or a coarse clock leaves it, is
    a new store) and an HMAC of the passwords and the rest (``parts``)."""
    secret = hmac.new(_CACHE_KEY, repr(parts).encode("utf-8", "surrogatepass"),
                      hashlib.sha256).digest()
    return (hashlib.sha256(data).digest(), secret)


def _cached(key: tuple[Any, ...], load: Any) -> Any:
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    value = load()
    with _CACHE_LOCK:
        if len(_CACHE) >= 32:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = value
    return value


#: The other formats Java reads under a store type: a "JKS" KeyStore loads PKCS12 files
#: and a "PKCS12" one JKS files (JDK 8u60+, keystore.type.compat=true), a "JCEKS" one
#: JKS files. Many stores made PKCS12 (the JDK's default since 9) keep type=JKS.
_JAVA_READS = {"JKS": ("PKCS12",), "PKCS12": ("JKS",), "JCEKS": ("JKS",)}


def _store_type(key: str, given: Any, data: bytes, path: str, location: str) -> str:
    """The type the store ``data`` is read as: the file's own where Java would read it
    under the type given; a type it cannot be is a ConfigError."""
    found = _sniff(data)
    if given is not None and str(given).strip():
        kind = str(given).strip().upper()
        if kind not in STORE_TYPES:
            raise ConfigError(f"{_name(key)} must be one of {', '.join(STORE_TYPES)}, not "
                              f"{str(given)!r}")
        if found is not None and found != kind:
            if found in _JAVA_READS.get(kind, ()):
                return found        # as Java reads it (keystore.type.compat)
            raise ConfigError(f"{_name(key)} is {kind} but {_name(location)} {path!r} is a "
                              f"{found} file: set {_NAMES[key]}={found}")
        return kind
    if found is None:
        raise ConfigError(f"{_name(location)} {path!r} is not a JKS, PKCS12, JCEKS or PEM "
                          "store")
    return found


def _pkcs12(data: bytes, password: bytes | None, what: str, password_key: str) -> Any:
    _, _, pkcs12 = _crypto(what)
    try:
        return pkcs12.load_pkcs12(data, password)
    except ValueError:
        if password is None:
            raise ConfigError(f"{what} is a PKCS12 store that needs its password: give "
                              f"{_name(password_key)}") from None
        raise ConfigError(f"{_name(password_key)} is wrong for {what} (or the file is not "
                          "PKCS12)") from None


def _where(path: str, kind: str, prefix: str) -> keytool.Where:
    return keytool.Where(path, kind, _name(f"{prefix}_location"), _name(f"{prefix}_password"),
                         _name("ssl_password"))


def _jks_key_password(c: Mapping[str, Any]) -> str | None:
    key_password = c.get("ssl_password")
    if key_password is not None and ("\n" in str(key_password) or "\r" in str(key_password)):
        raise ConfigError(f"{_name('ssl_password')} has a line break: keytool takes a JKS key's "
                          "password on a line, so it cannot be given (convert the store to PKCS12)")
    return None if key_password is None else str(key_password)


def _truststore(c: Mapping[str, Any]) -> bytes:
    """DER certificates of the trust store ``ssl_truststore_location``: what Java's
    trust manager takes from it (trusted certificate entries and key entries'
    certificates; a PKCS12 store's certificates)."""
    path = str(c["ssl_truststore_location"])
    data = _read(path, "ssl_truststore_location")
    kind = _store_type("ssl_truststore_type", c.get("ssl_truststore_type"), data, path,
                       "ssl_truststore_location")
    what = f"{_name('ssl_truststore_location')} {path!r}"
    password = c.get("ssl_truststore_password")
    password = None if password is None else str(password)
    if kind == "PEM":
        if password is not None:
            raise ConfigError(f"{_name('ssl_truststore_password')} is not used with a PEM "
                              "trust store (Kafka refuses it too): remove it")
        return _pem_certs_der(data, "ssl_truststore_location")

    def load() -> bytes:
        if kind != "PKCS12":
            der = keytool.trusted_certs(data, _where(path, kind, "ssl_truststore"), password)
        else:
            p12 = _pkcs12(data, None if password is None else password.encode(), what,
                          "ssl_truststore_password")
            _, serialization, _ = _crypto(what)
            certs = ([p12.cert] if p12.cert else []) + list(p12.additional_certs)
            der = b"".join(cert.certificate.public_bytes(serialization.Encoding.DER)
                           for cert in certs)
        if not der:
            raise ConfigError(f"{what} holds no certificate to trust")
        return der

    return _cached(_cache_key(data, "trust", kind, password), load)


def _keystore(c: Mapping[str, Any]) -> ClientIdentity:
    path = str(c["ssl_keystore_location"])
    data = _read(path, "ssl_keystore_location")
    kind = _store_type("ssl_keystore_type", c.get("ssl_keystore_type"), data, path,
                       "ssl_keystore_location")
    what = f"{_name('ssl_keystore_location')} {path!r}"
    store_password, key_password = c.get("ssl_keystore_password"), c.get("ssl_password")
    if kind == "PEM":
        if store_password is not None:
            raise ConfigError(f"{_name('ssl_keystore_password')} is not used with a PEM key "
                              f"store: the key's password is {_name('ssl_password')}")
        chain, key = _pem_identity(data, None, None if key_password is None
                                   else str(key_password), "ssl_keystore_location")
        return _identity(chain, key, what)
    if store_password is None:
        raise ConfigError(f"{what} is given without {_name('ssl_keystore_password')}")
    store_password = str(store_password)
    if kind == "PKCS12" and key_password is not None and str(key_password) != store_password:
        raise ConfigError(f"{_name('ssl_password')} differs from "
                          f"{_name('ssl_keystore_password')}: a PKCS12 key store keeps its "
                          "key under the store password (keytool makes them equal)")

    def load() -> ClientIdentity:
        store, password = data, store_password.encode()
        if kind != "PKCS12":         # JKS, JCEKS: converted by keytool
            store, password = keytool.to_pkcs12(data, _where(path, kind, "ssl_keystore"),
                                                store_password, _jks_key_password(c))
        p12 = _pkcs12(store, password, what, "ssl_keystore_password")
        if p12.key is None or p12.cert is None:
            raise ConfigError(f"{what} holds no private key with its certificate (a trust "
                              "store?): mutual TLS needs a key entry")
        chain = [p12.cert.certificate] + [c.certificate for c in p12.additional_certs]
        return _identity(chain, p12.key, what)

    return _cached(_cache_key(data, "key", kind, store_password, key_password), load)


def _identity(chain: list[Any], key: Any, what: str) -> ClientIdentity:
    """Check the chain's first certificate against ``key`` and today's date."""
    if not chain:
        raise ConfigError(f"{what} holds a private key but no certificate")
    _, serialization, _ = _crypto(what)
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    leaf = chain[0]
    if key.public_key().public_bytes(der, pub) != leaf.public_key().public_bytes(der, pub):
        raise ConfigError(f"{what}: the private key does not belong to the certificate "
                          f"{leaf.subject.rfc4514_string()!r}")
    _check_dates(leaf, what)
    return ClientIdentity(chain, key, what)


def _check_dates(cert: Any, what: str) -> None:
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = cert.subject.rfc4514_string()
    if now < cert.not_valid_before_utc:
        raise ConfigError(f"{what}: the client certificate {subject!r} is not valid before "
                          f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC")
    if now > cert.not_valid_after_utc:
        raise ConfigError(f"{what}: the client certificate {subject!r} expired on "
                          f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC")


def _check_pem_certfile(path: str) -> None:
    """The dates of the first certificate in ``ssl_certfile`` (when cryptography
    is installed: without it the broker's handshake says so instead)."""
    try:
        from cryptography import x509
    except ImportError:
        return
    data = _read(path, "ssl_certfile")
    blocks = [b for label, b in _pem_blocks(data, "ssl_certfile") if label == "CERTIFICATE"]
    if blocks:
        try:
            cert = x509.load_pem_x509_certificate(blocks[0].encode())
        except ValueError:
            return          # ssl's load_cert_chain names the problem
        _check_dates(cert, f"{_name('ssl_certfile')} {path!r}")


# --------------------------------------------------------------------------- settings


def _given(c: Mapping[str, Any], key: str) -> bool:
    value = c.get(key)
    return value is not None and not (isinstance(value, str) and not value.strip())


def _one_of(c: Mapping[str, Any], keys: tuple[str, ...], what: str) -> None:
    given = [k for k in keys if _given(c, k)]
    if len(given) > 1:
        raise ConfigError(f"{' and '.join(_name(k) for k in given)} all give {what}: give one "
                          "(kproto does not pick one)")


def _check_password(c: Mapping[str, Any], key: str) -> None:
    """A password must be text a file format can hold: no NUL, no lone surrogate
    (which would reach an exception's repr whole, the password with it)."""
    value = c.get(key)
    if value is None:
        return
    text = str(value)
    if "\x00" in text:
        raise ConfigError(f"{_name(key)} contains a NUL character")
    if not is_text(text):      # (raised outside the except: no exception behind it)
        raise ConfigError(f"{_name(key)} is not valid text (it has a lone surrogate)")


def tls_material(c: Mapping[str, Any]) -> TlsMaterial:
    """Trust and client identity from settings ``c`` (underscored kproto names).
    Raises :class:`~kproto.errors.ConfigError` naming the option at fault."""
    for key in ("ssl_truststore_password", "ssl_keystore_password", "ssl_password"):
        _check_password(c, key)
    _one_of(c, ("ssl_cafile", "ssl_cadata", "ssl_truststore_location"), "the trusted CAs")
    _one_of(c, ("ssl_certfile", "ssl_certdata", "ssl_keystore_location"),
            "the client certificate")
    for key, needs in (("ssl_truststore_password", "ssl_truststore_location"),
                       ("ssl_keystore_password", "ssl_keystore_location")):
        if _given(c, key) and not _given(c, needs):
            raise ConfigError(f"{_name(key)} is given without {_name(needs)}")
    out: dict[str, Any] = {}
    tstype = c.get("ssl_truststore_type")
    if _given(c, "ssl_cadata"):
        if tstype is not None and str(tstype).strip().upper() not in ("", "PEM"):
            raise ConfigError(f"{_name('ssl_cadata')} is PEM but {_name('ssl_truststore_type')}"
                              f" is {tstype!r}")
        out["cadata"] = _pem_certs_der(str(c["ssl_cadata"]), "ssl_cadata")
    elif _given(c, "ssl_truststore_location"):
        out["cadata"] = _truststore(c)
    elif _given(c, "ssl_cafile"):
        path = str(c["ssl_cafile"])
        if os.path.exists(path) and not os.path.isdir(path):   # librdkafka: a CA directory
            _regular(path, "ssl_cafile")        # (a missing file: ssl's own error)
        out["capath" if os.path.isdir(path) else "cafile"] = path
    password = c.get("ssl_password")
    password = None if password is None else str(password)
    if _given(c, "ssl_certdata") or _given(c, "ssl_keydata"):
        if not (_given(c, "ssl_certdata") and _given(c, "ssl_keydata")):
            raise ConfigError(f"{_name('ssl_certdata')} and {_name('ssl_keydata')} go together")
        kstype = c.get("ssl_keystore_type")
        if kstype is not None and str(kstype).strip().upper() not in ("", "PEM"):
            raise ConfigError(f"{_name('ssl_keydata')} is PEM but {_name('ssl_keystore_type')} "
                              f"is {kstype!r}")
        chain, key = _pem_identity(str(c["ssl_certdata"]), str(c["ssl_keydata"]), password,
                                   "ssl_certdata")
        out["identity"] = _identity(chain, key, _name("ssl_certdata"))
    elif _given(c, "ssl_keystore_location"):
        out["identity"] = _keystore(c)
    elif _given(c, "ssl_certfile"):
        for key in ("ssl_certfile", "ssl_keyfile"):
            if _given(c, key) and os.path.exists(str(c[key])):
                _regular(str(c[key]), key)
        _check_pem_certfile(str(c["ssl_certfile"]))
        out.update(certfile=str(c["ssl_certfile"]), password=password,
                   keyfile=str(c["ssl_keyfile"]) if _given(c, "ssl_keyfile") else None)
    elif _given(c, "ssl_keyfile"):
        raise ConfigError(f"{_name('ssl_keyfile')} is given without "
                          f"{_name('ssl_certfile')}")
    return TlsMaterial(**out)
