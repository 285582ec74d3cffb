"""SASL GSSAPI (Kerberos V5), as Kafka's Java client and librdkafka speak it.

:class:`SaslGssapi` logs in to a broker with a Kerberos ticket for the service
principal ``<service name>/<broker host>`` (``kafka/broker1.example.com@REALM``):
the GSS-API token exchange (RFC 4121 through MIT Kerberos), then RFC 4752's
security-layer step that Kafka's server (Java's ``GssKrb5Server``) ends with:
the broker sends 4 wrapped bytes (the security layers it offers, its largest
message), the client answers wrapped with layer 1 (none: Kafka runs TLS for
privacy), size 0 and its principal as authorization id.

Credentials come from a keytab (``keytab`` + ``principal``; librdkafka's
``sasl.kerberos.keytab`` / ``sasl.kerberos.principal``, Java's
``Krb5LoginModule useKeyTab=true keyTab=... principal=...``) or from a ticket
cache filled by ``kinit`` (``KRB5CCNAME``, or ``ticket_cache``). A keytab login
keeps its tickets in a memory cache of its own, renewed from the keytab when
they near their end; the user's ticket cache is never written.

The binding is python-gssapi (``pip install 'kproto[kerberos]'``; it builds
against MIT Kerberos: Debian's ``libkrb5-dev``). The realm, KDCs and host name
rules come from ``krb5.conf`` (``KRB5_CONFIG``), as for every Kerberos program.
Failures are :class:`~kproto.errors.SaslAuthenticationFailedError` (during a
login) or :class:`~kproto.errors.ConfigError` (settings), naming the principal,
service principal, keytab path or ticket cache and carrying MIT's own message.
"""

from __future__ import annotations

import copy
import os
import re
import stat
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..config import OPTIONS
from ..errors import ConfigError, SaslAuthenticationFailedError

__all__ = ["SaslGssapi", "gssapi_from_config", "import_gssapi"]

Exchange = Callable[[bytes], bytes]
T = TypeVar("T")

#: RFC 4752 security layers (the bitmask's bits).
LAYER_NONE, LAYER_INTEGRITY, LAYER_CONFIDENTIALITY = 1, 2, 4
#: Most context-token round trips a login may take (Kerberos needs 1 or 2).
MAX_ROUND_TRIPS = 8

_EXTRA = "pip install 'kproto[kerberos]'"


def import_gssapi() -> Any:
    """The ``gssapi`` module, or a ConfigError saying how to install it."""
    try:
        import gssapi
    except ImportError as exc:
        raise ConfigError(
            f"sasl_mechanism GSSAPI needs the python-gssapi package: {_EXTRA} (it builds "
            f"against MIT Kerberos: apt-get install libkrb5-dev, or your system's krb5 "
            f"development package) [{exc}]") from None
    return gssapi


def _gss_text(exc: Exception) -> str:
    """MIT's own words for a GSSError: the minor (mechanism) message, then the major."""
    def statuses(code: Any, major: bool) -> list[str]:
        try:
            return [s.decode() if isinstance(s, bytes) else str(s)
                    for s in exc.get_all_statuses(code, major)]  # type: ignore[attr-defined]
        except Exception:          # noqa: BLE001 - a status that cannot be shown
            return []
    minor = [s for s in statuses(getattr(exc, "min_code", 0), False)
             if s and s != "Success" and not s.startswith("Unknown code 0")]
    major = [m for m in statuses(getattr(exc, "maj_code", 0), True) if "Minor code may" not in m]
    return "; ".join(minor or major or [str(exc)]).rstrip(".")


_RENEW = "kinit again, or log in from a keytab (sasl.kerberos.keytab)"
_REKEYED = ("the key in keytab {keytab} does not match the KDC's for {principal} (was the "
            "key changed after the keytab was made? export it again)")
#: A pattern of MIT's message (lower case) -> what it means for a Kafka client.
_HINTS = (
    (r"cannot contact any kdc", "no KDC of the realm answers (is it running? the realm's "
     "kdc entries in {krb5conf})"),
    (r"cannot find kdc", "krb5.conf names no KDC for the realm ({krb5conf})"),
    (r"default realm", "{krb5conf} names no default_realm: set it, or give the principal "
     "with its realm (name@REALM)"),
    (r"clock skew", "this machine's clock and the KDC's or broker's differ by more than "
     "Kerberos allows (5 minutes by default): sync the clocks (NTP)"),
    (r"^server .*not found in kerberos database", "the KDC knows no service principal "
     "{service}: check sasl.kerberos.service.name ({service_name!r}) and that the broker "
     "is addressed by the host name in its principal ({host!r})"),
    (r"not found in kerberos database", "the KDC does not know principal {principal}"),
    (r"expired", "the Kerberos ticket has expired: " + _RENEW),
    (r"decrypt integrity check failed|preauthentication failed|password incorrect",
     _REKEYED),
    (r"no key table entry", "keytab {keytab} has no key for {principal}"),
    (r"key table format|nonexistent or empty", "{keytab} is not a Kerberos keytab, or holds "
     "no keys (make one with kadmin's ktadd or ktutil)"),
    (r"can't find client principal", "ticket cache {ccache} holds no ticket for "
     "{principal}"),
    (r"no credentials cache|no kerberos credentials", "no ticket in cache {ccache}: run "
     "kinit, or log in from a keytab (sasl.kerberos.keytab and sasl.kerberos.principal)"),
)


@dataclass(frozen=True)
class SaslGssapi:
    """SASL GSSAPI (Kerberos) client for Kafka.

    ``service_name`` (default ``kafka``) and the broker's host name make the
    service principal ``service_name/host``: the host as connected to (the
    bootstrap address, or the broker address Metadata gave), as Java's client
    does; :class:`~kproto.net.BrokerConnection` binds it through
    :meth:`for_host`. ``krb5.conf`` rules apply to that name as for every
    GSS-API program (MIT's ``dns_canonicalize_hostname``, ``rdns``,
    ``[domain_realm]``).

    Credentials: with ``keytab``, a login as ``principal`` from that keytab
    (its first principal when none is given); otherwise, or first when
    ``use_ticket_cache`` is true, the tickets in ``ticket_cache`` (default:
    ``KRB5CCNAME`` or the system's default cache), for ``principal`` when given.
    Every :meth:`authenticate` runs a fresh security context, so a
    re-authentication (KIP-368) logs in again with current tickets.

    ``kdc_timeout`` (seconds) bounds each call into Kerberos that may wait on a
    KDC (MIT's own retries can take a minute when a KDC accepts connections
    and never answers). Keytab contents never appear in errors or ``repr()``.
    """

    service_name: str = "kafka"
    principal: str | None = None
    keytab: str | None = None
    use_ticket_cache: bool | None = None
    ticket_cache: str | None = None
    host: str | None = None
    kdc_timeout: float = 30.0
    #: The memory credential cache a keytab login keeps its tickets in (one per
    #: mechanism object and process; copies made by for_host() share it).
    _ccache: str = field(default_factory=lambda: f"MEMORY:kproto-{uuid.uuid4().hex}",
                         repr=False, compare=False)

    name = "GSSAPI"

    def __post_init__(self) -> None:
        for what in ("service_name", "principal", "keytab", "ticket_cache", "host"):
            value = getattr(self, what)
            if value is not None and (not isinstance(value, str) or not value.strip()
                                      or "\x00" in value):
                raise ConfigError(f"SASL GSSAPI {what} must be a non-empty string, not "
                                  f"{value!r}")
        if "/" in self.service_name or "@" in self.service_name:
            raise ConfigError(f"sasl.kerberos.service.name is the first part of the broker's "
                              f"principal (e.g. 'kafka'), not {self.service_name!r}")
        if not isinstance(self.kdc_timeout, (int, float)) or not self.kdc_timeout > 0:
            raise ConfigError(f"SASL GSSAPI kdc_timeout must be a positive number of "
                              f"seconds, not {self.kdc_timeout!r}")
        if self.keytab is None and self.use_ticket_cache is False:
            raise ConfigError("SASL GSSAPI has nothing to log in with: no keytab "
                              "(sasl.kerberos.keytab) and the ticket cache turned off "
                              "(useTicketCache=false)")
        gssapi = import_gssapi()
        name = self._name(gssapi)
        if name is not None:
            try:                                        # parses it: a malformed one fails here
                name.canonicalize(gssapi.MechType.kerberos)
            except gssapi.exceptions.GSSError as exc:
                raise self._explain(exc, f"sasl.kerberos.principal {self.principal!r}",
                                    ConfigError) from None
        if self.keytab is not None:
            self.check_keytab()

    def __getstate__(self) -> dict[str, Any]:
        # another process has its own memory caches: the copy gets a new name
        state = dict(self.__dict__)
        state.pop("_ccache", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        object.__setattr__(self, "_ccache", f"MEMORY:kproto-{uuid.uuid4().hex}")

    def for_host(self, host: str) -> SaslGssapi:
        """This mechanism for the broker at ``host`` (its service principal's host)."""
        if host == self.host:
            return self
        bound = copy.copy(self)          # no second check of the keytab per connection
        object.__setattr__(bound, "host", host)
        object.__setattr__(bound, "_ccache", self._ccache)   # (pickling draws a new one)
        return bound

    @property
    def service(self) -> str:
        """The broker's service principal (without realm), e.g. ``kafka/broker1``."""
        return f"{self.service_name}/{self.host or '<broker host>'}"

    # -- credentials

    def _where(self) -> dict[str, str]:
        return {
            "principal": self.principal or ("the keytab's first principal" if self.keytab
                                            else "the cache's principal"),
            "keytab": repr(self.keytab), "service": self.service,
            "service_name": self.service_name, "host": str(self.host),
            "ccache": repr(self.ticket_cache or os.environ.get("KRB5CCNAME") or "default"),
            "krb5conf": os.environ.get("KRB5_CONFIG") or "/etc/krb5.conf",
        }

    def _explain(self, exc: Exception, doing: str, error: type[Exception]) -> Exception:
        text = _gss_text(exc)
        low = text.lower()
        hint = next((h for pattern, h in _HINTS if re.search(pattern, low)), None)
        detail = f"{hint.format(**self._where())} [{text}]" if hint else text
        return error(f"SASL GSSAPI: {doing}: {detail}")

    def check_keytab(self) -> None:
        """ConfigError unless :attr:`keytab` is a readable keytab holding
        :attr:`principal` (any principal when None). Reads the keytab through
        Kerberos itself; no network."""
        path = self.keytab
        assert path is not None
        kind, sep, rest = path.partition(":")
        if not sep or kind == "FILE" or "/" in kind:       # a file (not MEMORY:, KEYRING:...)
            shown = rest if kind == "FILE" else path
            try:
                mode = os.stat(shown).st_mode
            except FileNotFoundError:
                raise ConfigError(f"sasl.kerberos.keytab {path!r} does not exist") from None
            except OSError as exc:
                raise ConfigError(f"sasl.kerberos.keytab {path!r}: {exc.strerror}") from None
            if stat.S_ISDIR(mode):
                raise ConfigError(f"sasl.kerberos.keytab {path!r} is a directory, not a keytab")
            if not stat.S_ISREG(mode):                     # a FIFO would block the read
                raise ConfigError(f"sasl.kerberos.keytab {path!r} is not a regular file")
            if not os.access(shown, os.R_OK):
                raise ConfigError(f"sasl.kerberos.keytab {path!r} is not readable by this "
                                  f"process (uid {os.getuid()})")
        gssapi = import_gssapi()
        try:
            # acceptor credentials read the keytab for the name and contact no KDC
            gssapi.Credentials(name=self._name(gssapi), usage="accept",
                               store={"keytab": path})
        except gssapi.exceptions.GSSError as exc:
            raise self._explain(exc, "sasl.kerberos.keytab", ConfigError) from None

    def _name(self, gssapi: Any) -> Any:
        if self.principal is None:
            return None
        try:
            return gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)
        except gssapi.exceptions.GSSError as exc:
            raise self._explain(exc, f"invalid principal {self.principal!r}",
                                ConfigError) from None

    def _credentials(self, gssapi: Any) -> Any:
        """Initiator credentials: the ticket cache (when asked for, or without a
        keytab), else a login from the keytab into this mechanism's memory cache."""
        name = self._name(gssapi)
        failure: Exception | None = None
        if self.keytab is None or self.use_ticket_cache:
            store = {"ccache": self.ticket_cache} if self.ticket_cache else None
            try:
                creds = gssapi.Credentials(name=name, usage="initiate", store=store)
                if creds.lifetime is not None and creds.lifetime <= 0:
                    raise SaslAuthenticationFailedError(
                        f"SASL GSSAPI: the ticket in cache {self._where()['ccache']} has "
                        f"expired: kinit again, or log in from a keytab")
                return creds
            except gssapi.exceptions.GSSError as exc:
                failure = self._explain(exc, "no usable ticket cache",
                                        SaslAuthenticationFailedError)
            except SaslAuthenticationFailedError as exc:
                failure = exc
            if self.keytab is None:
                raise failure
        try:
            return gssapi.Credentials(name=name, usage="initiate",
                                      store={"client_keytab": self.keytab,
                                             "ccache": self._ccache})
        except gssapi.exceptions.GSSError as exc:
            err = self._explain(exc, f"login as {self._where()['principal']} from keytab "
                                f"{self.keytab!r} failed", SaslAuthenticationFailedError)
            if "credentials cache" in str(err):        # MIT's word for a keytab it could
                try:                                   # not use: ask the keytab why
                    self.check_keytab()
                except ConfigError as why:
                    err = SaslAuthenticationFailedError(str(why))
            raise err from None

    def _bounded(self, call: Callable[[], T], doing: str) -> T:
        """``call()`` in a helper thread, given up after ``kdc_timeout`` seconds
        (Kerberos library calls cannot be interrupted; the thread ends when
        MIT's own retries do)."""
        box: list[Any] = []

        def run() -> None:
            try:
                box.append((True, call()))
            except BaseException as exc:    # noqa: BLE001 - handed to the caller
                box.append((False, exc))

        worker = threading.Thread(target=run, daemon=True, name="kproto-kerberos")
        worker.start()
        worker.join(self.kdc_timeout)
        if not box:
            raise SaslAuthenticationFailedError(
                f"SASL GSSAPI: {doing}: no answer from the KDC within {self.kdc_timeout:g} s "
                f"(the realm's kdc entries in {self._where()['krb5conf']}; a KDC that "
                f"accepts connections and does not answer?)")
        ok, value = box[0]
        if not ok:
            raise value
        result: T = value
        return result

    # -- the exchange

    def authenticate(self, exchange: Exchange) -> None:
        """Log in: the GSS-API context tokens, then RFC 4752's security layer."""
        if self.host is None:
            raise ConfigError("SASL GSSAPI needs the broker's host name for its service "
                              "principal: use SaslGssapi(...).for_host(host), or let "
                              "BrokerConnection do it")
        gssapi = import_gssapi()
        flags = gssapi.RequirementFlag

        def start() -> tuple[Any, bytes | None]:
            creds = self._credentials(gssapi)
            try:
                target = gssapi.Name(f"{self.service_name}@{self.host}",
                                     gssapi.NameType.hostbased_service)
                ctx = gssapi.SecurityContext(
                    name=target, creds=creds, usage="initiate",
                    flags=flags.mutual_authentication | flags.integrity
                    | flags.confidentiality | flags.out_of_sequence_detection)
                return ctx, ctx.step(b"")          # asks the KDC for a service ticket
            except gssapi.exceptions.GSSError as exc:
                raise self._explain(exc, f"no ticket for service {self.service} (broker "
                                    f"{self.host})", SaslAuthenticationFailedError) from None

        def send(token: bytes) -> bytes:
            try:
                return exchange(token)
            except SaslAuthenticationFailedError as exc:
                raise SaslAuthenticationFailedError(
                    f"{exc.message or exc.description} (the broker refused the Kerberos "
                    f"login to {self.service}: its log says why, e.g. a service keytab "
                    f"without the current key of {self.service}, or clocks more than "
                    f"5 minutes apart)") from None

        ctx, token = self._bounded(start, "login")
        answer = b""
        for _ in range(MAX_ROUND_TRIPS):
            answer = send(token or b"")
            if ctx.complete:
                break
            try:
                token = ctx.step(answer)
            except gssapi.exceptions.GSSError as exc:
                raise self._explain(exc, f"the broker's Kerberos answer did not verify "
                                    f"(service {self.service})",
                                    SaslAuthenticationFailedError) from None
        else:
            raise SaslAuthenticationFailedError(
                f"SASL GSSAPI: the broker's context was not established after "
                f"{MAX_ROUND_TRIPS} round trips")
        send(self.security_layer_reply(ctx, answer))

    def security_layer_reply(self, ctx: Any, challenge: bytes) -> bytes:
        """RFC 4752 3.1: unwrap the broker's 4 bytes (layers offered, its largest
        message) and wrap the answer: no security layer, size 0, and the
        authenticated principal as authorization id (as Java's client sends)."""
        gssapi = import_gssapi()
        try:
            message, _encrypted, _qop = ctx.unwrap(challenge)
        except gssapi.exceptions.GSSError as exc:
            raise self._explain(exc, f"the broker's security-layer message "
                                f"({len(challenge)} bytes) did not verify",
                                SaslAuthenticationFailedError) from None
        if len(message) != 4:
            raise SaslAuthenticationFailedError(
                f"SASL GSSAPI: the broker's security-layer message is {len(message)} bytes, "
                f"not 4 (RFC 4752)")
        if not message[0] & LAYER_NONE:
            raise SaslAuthenticationFailedError(
                f"SASL GSSAPI: the broker requires a security layer (offered bitmask "
                f"0x{message[0]:02x}); kproto supports only none (TLS protects the "
                f"connection), as Kafka's brokers offer by default")
        authzid = str(ctx.initiator_name).encode("utf-8")
        try:
            wrapped: bytes = ctx.wrap(bytes([LAYER_NONE, 0, 0, 0]) + authzid, False).message
        except gssapi.exceptions.GSSError as exc:
            raise self._explain(exc, "cannot wrap the security-layer answer",
                                SaslAuthenticationFailedError) from None
        return wrapped


def gssapi_from_config(c: Mapping[str, Any]) -> SaslGssapi:
    """The :class:`SaslGssapi` for normalized client settings ``c``:
    ``sasl_kerberos_service_name`` (default ``kafka``), ``sasl_kerberos_principal``,
    ``sasl_kerberos_keytab``, ``sasl_kerberos_use_ticket_cache``,
    ``sasl_kerberos_ticket_cache`` (JAAS ``ticketCache``); ``request_timeout_ms``
    bounds the waits on a KDC. librdkafka's ``sasl.kerberos.kinit.cmd`` is a
    ConfigError: kproto logs in from the keytab itself and runs no command
    from settings."""
    try:
        OPTIONS["sasl_kerberos_kinit_cmd"].convert(c.get("sasl_kerberos_kinit_cmd"))
    except ValueError as exc:
        raise ConfigError(f"sasl.kerberos.kinit.cmd is not supported: {exc}") from None
    cache = c.get("sasl_kerberos_use_ticket_cache")
    if isinstance(cache, str):
        low = cache.strip().lower()
        if low not in ("true", "false"):
            raise ConfigError(f"sasl_kerberos_use_ticket_cache must be true or false, not "
                              f"{cache!r}")
        cache = low == "true"
    timeout = c.get("request_timeout_ms")
    try:
        kdc_timeout = float(timeout) / 1000 if timeout not in (None, "") else 30.0
    except (TypeError, ValueError):
        kdc_timeout = -1.0
    if not kdc_timeout > 0:
        raise ConfigError(f"request_timeout_ms must be a positive number, not {timeout!r}")

    def text(key: str) -> str | None:
        value = c.get(key)
        return None if value in (None, "") else str(value)

    return SaslGssapi(
        service_name=text("sasl_kerberos_service_name") or "kafka",
        principal=text("sasl_kerberos_principal"),
        keytab=text("sasl_kerberos_keytab"),
        use_ticket_cache=None if cache is None else bool(cache),
        ticket_cache=text("sasl_kerberos_ticket_cache"),
        kdc_timeout=kdc_timeout,
    )
