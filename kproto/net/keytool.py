"""The JDK's keytool, which reads Java's JKS and JCEKS stores for kproto.net.stores.

kproto reads no JKS itself: keytool, maintained with the JDK (every Spark node
has a JVM), runs on a private copy of the bytes read, in a private (0700)
directory removed at once, with the passwords in its environment (never on its
command line), and its output is scrubbed of them. :func:`to_pkcs12` converts a
key store to PKCS12 under a one-time password; :func:`trusted_certs` lists a
trust store (``-list -rfc``, no key read) as Java's trust manager takes it.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import ssl
import subprocess
import tempfile
from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["KEYTOOL_TIMEOUT", "Where", "to_pkcs12", "trusted_certs"]

#: How long keytool may take to read a store.
KEYTOOL_TIMEOUT = 120.0


@dataclass(frozen=True)
class Where:
    """A store, for messages: its path, type, and how users know its location,
    password and key password settings (``ssl.keystore.location (...)``...)."""

    path: str
    kind: str
    location: str
    password: str
    key_password: str


def _keytool() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "keytool"), os.X_OK):
        return os.path.join(home, "bin", "keytool")
    return shutil.which("keytool")


def _run(data: bytes, where: Where, store_password: str | None, key_password: str | None,
         args: list[str], dest_password: str | None = None) -> tuple[str, bytes]:
    """Run keytool on a private copy of a store's bytes ``data``: ``args`` with
    ``{src}`` (the copy) and ``{dest}`` (a file beside it), the store password as
    ``$KPROTO_SRC_PASS`` and ``dest_password`` as ``$KPROTO_DEST_PASS``. Returns its
    output (scrubbed of the passwords) and what it wrote to ``{dest}``. keytool
    never reads the store's path itself, so what it reads is what was read."""
    tool = _keytool()
    if tool is None:
        raise ConfigError(f"{where.location} {where.path!r} is a {where.kind} store: kproto "
                          f"reads {where.kind} through the JDK's keytool, which is not installed "
                          "($JAVA_HOME/bin or PATH); install a JRE, or convert the store once "
                          "to PKCS12 (keytool -importkeystore -deststoretype PKCS12)")
    folder = tempfile.mkdtemp(prefix="kproto-keytool-")
    src, dest = os.path.join(folder, "source.store"), os.path.join(folder, "store.out")
    env = {**os.environ, "KPROTO_DEST_PASS": dest_password or "",
           "KPROTO_SRC_PASS": store_password or ""}
    cmd = [tool, "-J-Duser.language=en", "-J-Duser.country=US",
           *(a.format(src=src, dest=dest) for a in args)]
    answers = ""
    if store_password is not None:
        cmd += ["-storepass:env" if args[0] == "-list" else "-srcstorepass:env",
                "KPROTO_SRC_PASS"]
    else:
        answers = "\n"      # no password: read without the integrity check, as Java does
    # keytool asks for a key's password when it is not the store's
    answers += ((key_password or store_password or "") + "\n") * 3
    secrets_in = [s for s in (store_password, key_password, dest_password) if s]
    try:
        fd = os.open(src, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            done = subprocess.run(cmd, input=answers.encode(), env=env, capture_output=True,
                                  timeout=KEYTOOL_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise ConfigError(f"keytool did not read {where.location} within "
                              f"{KEYTOOL_TIMEOUT:.0f} s") from None
        except OSError as exc:
            raise ConfigError(f"keytool could not run: {exc}") from None
        output = (done.stdout + done.stderr).decode("utf-8", "replace")
        for secret in secrets_in:
            output = output.replace(secret, "***")
        written = b""
        if done.returncode == 0 and os.path.exists(dest):
            with open(dest, "rb") as f:
                written = f.read()
        if done.returncode != 0 or (dest_password is not None and not written):
            raise _error(output, where)
        return output, written
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def to_pkcs12(data: bytes, where: Where, store_password: str | None,
              key_password: str | None) -> tuple[bytes, bytes]:
    """A JKS/JCEKS key store converted by keytool: (PKCS12 bytes, the random one-time
    password they are under)."""
    once = secrets.token_urlsafe(24)
    _, written = _run(data, where, store_password, key_password,
                      ["-importkeystore", "-noprompt", "-srckeystore", "{src}",
                       "-srcstoretype", where.kind, "-destkeystore", "{dest}",
                       "-deststoretype", "PKCS12", "-deststorepass:env", "KPROTO_DEST_PASS"],
                      dest_password=once)
    return written, once.encode()


#: keytool -list -rfc: one entry's alias, type and certificates (-J-Duser.language=en)
_ENTRY = re.compile(r"^Alias name: .*?(?=^Alias name: |\Z)", re.MULTILINE | re.DOTALL)
_CERT = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.DOTALL)


def trusted_certs(data: bytes, where: Where, store_password: str | None) -> bytes:
    """The certificates a JKS/JCEKS trust store gives Java's trust manager, as DER:
    every trusted certificate entry and the first certificate of every key entry
    (``TrustStoreUtil.getTrustedCerts``), listed by ``keytool -list -rfc``: no key
    is read, so a key's own password is never needed (a key store that is also
    the trust store, as Java takes it)."""
    output, _ = _run(data, where, store_password, None,
                     ["-list", "-rfc", "-keystore", "{src}", "-storetype", where.kind])
    out = []
    for entry in _ENTRY.findall(output):
        if "Entry type: trustedCertEntry" in entry or "Entry type: PrivateKeyEntry" in entry:
            first = _CERT.search(entry)             # (a JCEKS secret key has none)
            if first:
                out.append(ssl.PEM_cert_to_DER_cert(first.group()))
    return b"".join(out)


def _error(output: str, where: Where) -> ConfigError:
    at = f"{where.location} {where.path!r}"
    if "password was incorrect" in output or "tampered" in output:
        return ConfigError(f"{where.password} is wrong for {at} (keytool: the store's "
                           "integrity check failed)")
    if any(s in output for s in ("Cannot recover key", "Too many failures", "Get Key failed",
                                 "final block not properly padded")):
        return ConfigError(f"{where.key_password} is wrong or missing for the key in {at} "
                           "(its password is not the store password)")
    if "Invalid keystore format" in output or "Unrecognized keystore format" in output:
        return ConfigError(f"{at} is not a {where.kind} store")
    line = next((ln for ln in output.splitlines() if "keytool error" in ln), output.strip())
    return ConfigError(f"keytool could not read {at}: {line[:300]}")
