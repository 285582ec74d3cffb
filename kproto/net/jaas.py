"""``sasl.jaas.config`` strings, read as Kafka's Java clients read them.

Spark and Java users give their SASL credentials as a JAAS login module line::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="alice" password="s3cret";

:func:`parse_jaas` reads such a text with the grammar of Kafka's
``org.apache.kafka.common.security.JaasConfig``, which runs
``java.io.StreamTokenizer`` with its own character classes (the tokenizer is
ported here, quirks included, and tests/test_jaas.py compares it with the real
one on generated texts):

- an entry is ``<login module class> <flag> (<key>=<value>)* ;`` and the flag
  is ``required``, ``requisite``, ``sufficient`` or ``optional`` (any case);
- a value (or key, or class name) is a word (any characters but blanks, ``;``,
  ``=``, ``/``, quotes and U+0081..U+009F) or a string in double or single
  quotes, where a backslash escapes (``\\"``, ``\\\\``, ``\\n``, ``\\t``, octal
  ``\\123``...) and a quoted string ends on its line;
- ``//``, ``/* */`` and a lone ``/`` start comments (so a path such as
  ``keyTab=/etc/kafka.keytab`` must be quoted, as in Java).

kproto is stricter than Kafka in three places, where Kafka accepts what is
almost certainly a slip: a quoted string left open at the end of a line (Java
ends it there), an option name that is not a word or a quoted string (``= = x``
gives Java an option named null), and an option given twice (Java keeps the
last one silently). Each is a ConfigError.

:func:`jaas_settings` maps the one login module Kafka allows to kproto
settings, and :func:`merge_jaas` merges them into client settings, refusing a
setting given both ways with different values. Errors say where (line and
column) and what was expected; they never show an option's value.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import is_text
from ..errors import ConfigError

__all__ = ["JaasEntry", "parse_jaas", "jaas_settings", "merge_jaas", "LOGIN_MODULES"]

FLAGS = ("required", "requisite", "sufficient", "optional")

#: Option names whose values are secrets (masked in reprs, never in errors).
_SECRET_KEY = re.compile(r"pass|secret|token|credential|pwd", re.IGNORECASE)

# -- the tokenizer: java.io.StreamTokenizer as Kafka's JaasConfig sets it up
# (resetSyntax; wordChars(32, 128); wordChars(160, 255); ordinaryChar ';' '=';
# whitespaceChars(0, ' '); commentChar '/'; quoteChar '"' and '\''; // and /* */
# comments). Characters from 256 up are word characters, 129..159 ordinary.

_WS, _WORD, _QUOTE, _COMMENT, _ORDINARY = 1, 2, 4, 8, 0
EOF, WORD = -1, -3
_NEED = -4


def _ctype(c: int) -> int:
    if c <= 32:
        return _WS
    if c >= 256:
        return _WORD
    if c in (0x22, 0x27):
        return _QUOTE
    if c == 0x2F:
        return _COMMENT
    if c in (0x3B, 0x3D) or 129 <= c <= 159:
        return _ORDINARY
    return _WORD


_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("f"): 12, ord("n"): 10, ord("r"): 13,
            ord("t"): 9, ord("v"): 11}


class _Tokenizer:
    """``nextToken()`` of java.io.StreamTokenizer, ported step by step.

    ``ttype`` is EOF, WORD, a quote character's code (a quoted string) or the
    code of an ordinary character; ``sval`` the text of a word or quoted string
    (None otherwise); ``start`` where the token began (index into the text)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.peekc = _NEED
        self.peek_at = 0
        self.ttype = EOF
        self.sval: str | None = None
        self.start = 0
        self.closed = True      # the last quoted string ended with its quote

    def _read(self) -> int:
        if self.i < len(self.text):
            self.i += 1
            return ord(self.text[self.i - 1])
        self.i = len(self.text) + 1
        return -1

    def _hold(self, c: int) -> None:
        """Keep ``c`` (just read) for the next token, as Java's ``peekc = c``."""
        self.peekc, self.peek_at = c, self.i - 1

    def next(self) -> int:
        """The next token. A comment is skipped by going round (Java recurses,
        which a text of many comments would turn into a RecursionError here)."""
        while True:
            ttype = self._token()
            if ttype is not None:
                return ttype

    def _token(self) -> int | None:
        self.sval = None
        c = self.peekc
        at = self.peek_at
        if c == _NEED:
            c = self._read()
            at = self.i - 1
            if c < 0:
                self.start = len(self.text)
                return self._set(EOF)
        self.peekc = _NEED
        ct = _ctype(c)
        while ct & _WS:
            if c == 13:
                c = self._read()
                if c == 10:
                    c = self._read()
            else:
                c = self._read()
            at = self.i - 1
            if c < 0:
                self.start = len(self.text)
                return self._set(EOF)
            ct = _ctype(c)
        self.start = at
        if ct & _WORD:
            chars = [c]
            while True:
                c = self._read()
                if c < 0 or not _ctype(c) & _WORD:
                    break
                chars.append(c)
            self._hold(c)
            self.sval = "".join(map(chr, chars))
            return self._set(WORD)
        if ct & _QUOTE:
            return self._quoted(c)
        if c == 0x2F:      # '/': slashSlashComments and slashStarComments are on
            c = self._read()
            if c == 0x2A:  # /* ... */, with Java's handling of line ends inside
                prevc = 0
                while True:
                    c = self._read()
                    if c == 0x2F and prevc == 0x2A:
                        return None
                    if c == 13:
                        c = self._read()
                        if c == 10:
                            c = self._read()
                    elif c == 10:
                        c = self._read()
                    if c < 0:
                        self.start = len(self.text)
                        return self._set(EOF)
                    prevc = c
            # '//' or a lone '/' (a comment character): to the end of the line; the
            # character after a lone '/' is skipped unseen, as in Java
            while True:
                c = self._read()
                if c in (10, 13) or c < 0:
                    break
            self._hold(c)
            return None
        return self._set(c)         # an ordinary character

    def _quoted(self, quote: int) -> int:
        chars: list[int] = []
        d = self._read()
        while d >= 0 and d != quote and d not in (10, 13):
            if d == 0x5C:           # backslash
                c = self._read()
                first = c
                if 0x30 <= c <= 0x37:
                    c -= 0x30
                    c2 = self._read()
                    if 0x30 <= c2 <= 0x37:
                        c = (c << 3) + (c2 - 0x30)
                        c2 = self._read()
                        if 0x30 <= c2 <= 0x37 and first <= 0x33:
                            c = (c << 3) + (c2 - 0x30)
                            d = self._read()
                        else:
                            d = c2
                    else:
                        d = c2
                elif c < 0:         # a backslash at the very end: the string is open
                    d = -1
                    break
                else:
                    c = _ESCAPES.get(c, c)
                    d = self._read()
            else:
                c = d
                d = self._read()
            chars.append(c)
        self.closed = d == quote
        if d == quote:
            self.peekc = _NEED
        else:
            self._hold(d)
        self.sval = "".join(map(chr, chars))
        return self._set(quote)

    def _set(self, ttype: int) -> int:
        self.ttype = ttype
        return ttype


# --------------------------------------------------------------------------- entries


def _mask_options(options: Mapping[str, str]) -> dict[str, str]:
    return {k: "***" if _SECRET_KEY.search(k) else v for k, v in options.items()}


@dataclass(frozen=True)
class JaasEntry:
    """One login module line: its class name, control flag (lower case) and
    options. ``repr()`` masks the values of password- and secret-like options."""

    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"JaasEntry({self.module!r}, {self.flag!r}, "
                f"{_mask_options(self.options)!r})")

    __str__ = __repr__


def _where(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + text.count("\r", 0, index) \
        - text.count("\r\n", 0, index) + 1
    column = index - max(text.rfind("\n", 0, index), text.rfind("\r", 0, index))
    return f"line {line}, column {column}"


def _describe(tok: _Tokenizer) -> str:
    """What the current token is, without its text (it may be a secret)."""
    if tok.ttype == EOF:
        return "the end of the text"
    if tok.ttype == WORD:
        return "a word"
    if tok.ttype in (0x22, 0x27):
        return "a quoted string"
    return f"{chr(tok.ttype)!r}"


def parse_jaas(text: str, what: str = "sasl.jaas.config") -> list[JaasEntry]:
    """The entries of a JAAS text in Kafka's grammar (``<class> <flag>
    (<key>=<value>)* ;``, one or more). Raises
    :class:`~kproto.errors.ConfigError` naming ``what``, the line and column,
    and what was expected; option values are never shown."""
    if not isinstance(text, str):
        raise ConfigError(f"{what} must be a string, not {type(text).__name__}")
    tok = _Tokenizer(text)
    entries: list[JaasEntry] = []

    def fail(message: str, at: int | None = None) -> ConfigError:
        return ConfigError(f"{what}: {message} at {_where(text, tok.start if at is None else at)}"
                           " (the form is: <login module class> required key=\"value\" ... ;)")

    def check_closed() -> None:
        if tok.ttype in (0x22, 0x27) and not tok.closed:
            raise fail("a quoted string is not closed on the line it starts")

    while tok.next() != EOF:
        check_closed()
        if tok.sval is None or tok.sval == "":
            raise fail(f"expected a login module class name, found {_describe(tok)}")
        module = tok.sval
        tok.next()
        check_closed()
        if tok.sval is None:
            raise fail(f"expected a control flag ({', '.join(FLAGS)}) after the login module "
                       f"class, found {_describe(tok)}")
        flag = tok.sval.lower()
        if flag not in FLAGS:
            near = difflib.get_close_matches(flag, FLAGS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise fail(f"the control flag must be one of {', '.join(FLAGS)}{hint}")
        options: dict[str, str] = {}
        while tok.next() != EOF and tok.ttype != 0x3B:
            check_closed()
            if tok.sval is None:
                raise fail(f"expected an option name or ';', found {_describe(tok)}")
            key, key_at = tok.sval, tok.start
            shown = _show_key(key)
            if tok.next() != 0x3D:
                raise fail(f"expected '=' after the option name{shown}, found {_describe(tok)}")
            tok.next()
            check_closed()
            if tok.sval is None:
                raise fail(f"expected a value (a word or a quoted string) for the option"
                           f"{shown}, found {_describe(tok)}")
            if key in options:
                raise fail(f"the option{shown} is given twice (Java would keep the last one "
                           "silently)", key_at)
            options[key] = tok.sval
        if tok.ttype != 0x3B:
            raise fail("the login module entry does not end with ';'")
        entries.append(JaasEntry(module, flag, options))
    if not entries:
        raise ConfigError(f"{what} names no login module (the form is: <login module class> "
                          "required key=\"value\" ... ;)")
    return entries


_NAME = re.compile(r"[A-Za-z_$][\w$.\-]{0,63}")


def _show_key(key: str) -> str:
    """`` 'key'`` when ``key`` is one of the option names kproto knows (or close to
    one: a typo), else nothing: a bare word where a name should be may be a secret."""
    if key in _KNOWN_KEYS or (_NAME.fullmatch(key) and
                              difflib.get_close_matches(key, _KNOWN_KEYS, n=1, cutoff=0.8)):
        return f" {key!r}"
    return ""


# --------------------------------------------------------------------------- modules

_KAFKA = "org.apache.kafka.common.security."
#: Login module class -> kind. Databricks' shaded Kafka ("kafkashaded.org.apache...")
#: names the same classes.
LOGIN_MODULES = {
    _KAFKA + "plain.PlainLoginModule": "plain",
    _KAFKA + "scram.ScramLoginModule": "scram",
    _KAFKA + "oauthbearer.OAuthBearerLoginModule": "oauthbearer",
    "com.sun.security.auth.module.Krb5LoginModule": "kerberos",
    "software.amazon.msk.auth.iam.IAMLoginModule": "aws_msk_iam",
}
#: The SASL mechanisms each kind of login module goes with. As in Java, the
#: PLAIN and SCRAM modules only hold a user name and password, so either serves
#: PLAIN and SCRAM alike.
_MECHANISMS = {
    "plain": ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    "scram": ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"),
    "oauthbearer": ("OAUTHBEARER",),
    "kerberos": ("GSSAPI",),
    "aws_msk_iam": ("AWS_MSK_IAM",),
}
_HINTS: dict[str, str] = {}
#: Class name prefixes of shaded copies (Databricks' Kafka, AWS's library on Databricks).
_SHADED = ("kafkashaded.", "shadedmskiam.")

_PLAIN_KEYS = {"username": "sasl_plain_username", "password": "sasl_plain_password"}
_OAUTH_KEYS = {"clientId": "sasl_oauthbearer_client_id",
               "clientSecret": "sasl_oauthbearer_client_secret",
               "scope": "sasl_oauthbearer_scope"}
_KRB5_KEYS = {"principal": "sasl_kerberos_principal",
              "serviceName": "sasl_kerberos_service_name",
              "ticketCache": "sasl_kerberos_ticket_cache"}
#: Krb5LoginModule switches that change nothing kproto does.
_KRB5_IGNORED = ("storeKey", "debug", "doNotPrompt", "refreshKrb5Config", "renewTGT",
                 "isInitiator", "clearPass", "tryFirstPass", "useFirstPass", "storePass")
#: AWS's IAMLoginModule (and OAuthBearerLoginModule with its IAM handler): Java's
#: MSKCredentialProvider options (kproto/net/msk.py reads the settings).
_AWS_KEYS = {"awsProfileName": "sasl_aws_profile_name", "awsRoleArn": "sasl_aws_role_arn",
             "awsRoleSessionName": "sasl_aws_role_session_name",
             "awsStsRegion": "sasl_aws_sts_region",
             "awsRoleExternalId": "sasl_aws_role_external_id",
             "awsRoleAccessKeyId": "sasl_aws_role_access_key_id",
             "awsRoleSecretAccessKey": "sasl_aws_role_secret_access_key",
             "awsRoleSessionToken": "sasl_aws_role_session_token",
             "awsDebugCreds": "sasl_aws_debug_creds",
             "awsAddDefaultProviders": "sasl_aws_add_default_providers",
             "awsMaxRetries": "sasl_aws_max_retries",
             "awsMaxBackOffTimeMs": "sasl_aws_max_back_off_time_ms",
             "awsShouldUseFips": "sasl_aws_should_use_fips",
             "awsMskRegionProvider": "sasl_aws_region_provider"}
_KNOWN_KEYS = sorted({*_PLAIN_KEYS, *_OAUTH_KEYS, *_KRB5_KEYS, *_KRB5_IGNORED, *_AWS_KEYS,
                      "useKeyTab", "keyTab", "useTicketCache", "tokenauth"})


def _kind(module: str, what: str) -> str:
    name = next((module[len(p):] for p in _SHADED if module.startswith(p)), module)
    kind = LOGIN_MODULES.get(name)
    if kind is not None:
        return kind
    shown = repr(module) if _NAME.fullmatch(module) and "." in module else \
        "(a name that is not a Java class name)"
    hint = _HINTS.get(name)
    if hint is None:
        near = [m for m in LOGIN_MODULES if m.rpartition(".")[2].lower() ==
                name.rpartition(".")[2].lower()]
        hint = f"did you mean {near[0]!r}?" if near else \
            "kproto knows " + ", ".join(m.rpartition(".")[2] for m in LOGIN_MODULES)
    raise ConfigError(f"{what}: unknown login module class {shown}: {hint}")


def _flag(options: Mapping[str, str], key: str, module: str, what: str) -> bool | None:
    value = options.get(key)
    if value is None:
        return None
    if value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"{what}: {module} option {key!r} must be true or false")
    return value.strip().lower() == "true"


def _unknown(key: str, module: str, known: list[str], what: str) -> ConfigError:
    if key.startswith("user_"):
        return ConfigError(f"{what}: {module} options user_NAME=... are broker-side "
                           "credentials, not a client's (give username and password)")
    near = difflib.get_close_matches(key, known, n=1)
    if near:
        return ConfigError(f"{what}: unknown {module} option {key!r}; did you mean {near[0]!r}?")
    # not named: an unknown word where a name should be may be a misplaced secret
    return ConfigError(f"{what}: {module} has an option kproto does not know (it knows "
                       f"{', '.join(known)}; the option's name is not shown, it may be a "
                       "misplaced secret)")


def jaas_settings(text: str, what: str = "sasl.jaas.config") -> tuple[str, dict[str, Any]]:
    """``(kind, settings)`` for a ``sasl.jaas.config`` text: the kind of login
    module (``plain``, ``scram``, ``oauthbearer``, ``kerberos``, ``aws_msk_iam``) and
    the kproto settings its options give (``sasl_plain_username``...). Kafka takes exactly
    one login module here; several, an unknown class or an unknown option are a
    :class:`~kproto.errors.ConfigError`."""
    entries = parse_jaas(text, what)
    if len(entries) != 1:
        raise ConfigError(f"{what} has {len(entries)} login modules; Kafka takes exactly one "
                          "(\"JAAS config property contains N login modules, should be 1\")")
    entry = entries[0]
    kind = _kind(entry.module, what)
    for key, value in entry.options.items():
        if not is_text(value):     # (raised here, not in an except: no exception behind it)
            raise ConfigError(f"{what}: the value of {key if key in _KNOWN_KEYS else 'an option'}"
                              " is not valid text (it has a lone surrogate)")
    short = entry.module.rpartition(".")[2]
    out: dict[str, Any] = {}
    opts = entry.options
    if kind in ("plain", "scram"):
        for key, value in opts.items():
            if key in _PLAIN_KEYS:
                out[_PLAIN_KEYS[key]] = value
            elif kind == "scram" and key == "tokenauth":
                if _flag(opts, key, short, what):
                    raise ConfigError(f"{what}: ScramLoginModule tokenauth=true (delegation "
                                      "tokens) is not supported by kproto")
            else:
                raise _unknown(key, short, [*_PLAIN_KEYS, *(["tokenauth"] if kind == "scram"
                                                          else [])], what)
    elif kind == "oauthbearer":
        extensions = {}
        for key, value in opts.items():
            if key in _OAUTH_KEYS:
                out[_OAUTH_KEYS[key]] = value
            elif key in _AWS_KEYS:              # for AWS's IAMOAuthBearerLoginCallbackHandler
                out[_AWS_KEYS[key]] = value
            elif key.startswith("extension_") and len(key) > len("extension_"):
                extensions[key[len("extension_"):]] = value
            elif key.startswith("unsecuredLogin"):
                raise ConfigError(f"{what}: OAuthBearerLoginModule {key} (Kafka's unsecured "
                                  "test tokens) is not supported by kproto: give clientId, "
                                  "clientSecret and a token endpoint")
            else:
                raise _unknown(key, short, [*_OAUTH_KEYS, "extension_NAME", *_AWS_KEYS], what)
        if extensions:
            out["sasl_oauthbearer_extensions"] = extensions
    elif kind == "aws_msk_iam":
        for key, value in opts.items():
            if key not in _AWS_KEYS:
                raise _unknown(key, short, list(_AWS_KEYS), what)
            out[_AWS_KEYS[key]] = value
    else:
        known = [*_KRB5_KEYS, "useKeyTab", "keyTab", "useTicketCache", *_KRB5_IGNORED]
        for key, value in opts.items():
            if key in _KRB5_KEYS:
                out[_KRB5_KEYS[key]] = value
            elif key in _KRB5_IGNORED:
                _flag(opts, key, short, what)          # checked, changes nothing here
            elif key not in ("useKeyTab", "keyTab", "useTicketCache"):
                raise _unknown(key, short, known, what)
        use_keytab = _flag(opts, "useKeyTab", short, what)
        if "keyTab" in opts:
            if not use_keytab:
                raise ConfigError(f"{what}: Krb5LoginModule reads keyTab only with "
                                  "useKeyTab=true")
            out["sasl_kerberos_keytab"] = opts["keyTab"]
        cache = _flag(opts, "useTicketCache", short, what)
        if cache is not None:
            out["sasl_kerberos_use_ticket_cache"] = cache
    return kind, out


# --------------------------------------------------------------------------- merging

#: kproto setting -> how users know it (Java / librdkafka names), for messages.
_SHOWN = {
    "sasl_plain_username": "sasl_plain_username (sasl.username)",
    "sasl_plain_password": "sasl_plain_password (sasl.password)",
    "sasl_oauthbearer_client_id": "sasl_oauthbearer_client_id (sasl.oauthbearer.client.id)",
    "sasl_oauthbearer_client_secret":
        "sasl_oauthbearer_client_secret (sasl.oauthbearer.client.secret)",
    "sasl_oauthbearer_scope": "sasl_oauthbearer_scope (sasl.oauthbearer.scope)",
    "sasl_oauthbearer_extensions": "sasl_oauthbearer_extensions (sasl.oauthbearer.extensions)",
    "sasl_kerberos_service_name": "sasl_kerberos_service_name (sasl.kerberos.service.name)",
    "sasl_kerberos_principal": "sasl_kerberos_principal (sasl.kerberos.principal)",
    "sasl_kerberos_keytab": "sasl_kerberos_keytab (sasl.kerberos.keytab)",
}
_JAAS_NAME = {v: k for k, v in {**_PLAIN_KEYS, **_OAUTH_KEYS, **_KRB5_KEYS, **_AWS_KEYS}.items()}
_JAAS_NAME.update(sasl_kerberos_keytab="keyTab", sasl_kerberos_use_ticket_cache="useTicketCache",
                  sasl_oauthbearer_extensions="extension_*")


def _extensions(value: Any) -> dict[str, str]:
    """librdkafka's ``k=v,k2=v2`` or a mapping, as a dict (for comparing)."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    out = {}
    for part in str(value).split(","):
        if part.strip():
            k, _, v = part.partition("=")
            out[k.strip()] = v.strip()
    return out


def _same(key: str, given: Any, derived: Any) -> bool:
    if key == "sasl_oauthbearer_extensions":
        return _extensions(given) == _extensions(derived)
    if isinstance(derived, bool):
        text = str(given).strip().lower()
        return (given is derived) or text == str(derived).lower()
    return str(given) == str(derived)


def merge_jaas(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` (underscored kproto names) with what ``sasl_jaas_config``
    gives merged in. A setting given both ways with different values is a
    :class:`~kproto.errors.ConfigError` naming both (the values of secrets are
    not shown); so is a JAAS text with a protocol that has no SASL, or a login
    module that does not go with ``sasl_mechanism``."""
    out = dict(settings)
    text = out.get("sasl_jaas_config")
    if text is None or (isinstance(text, str) and not text.strip()):
        return out
    proto = str(out.get("security_protocol") or "PLAINTEXT").strip().upper()
    if not proto.startswith("SASL_"):
        raise ConfigError(f"sasl_jaas_config (sasl.jaas.config) given but security_protocol "
                          f"is {proto}: use SASL_SSL (or SASL_PLAINTEXT)")
    kind, derived = jaas_settings(text)
    module = next(m for m, k in LOGIN_MODULES.items() if k == kind).rpartition(".")[2]
    raw = out.get("sasl_mechanism")
    mechanism = str(raw).strip().upper() if raw else None
    if mechanism is None:
        raise ConfigError(f"sasl.jaas.config has a {module} but no sasl_mechanism "
                          f"(sasl.mechanism) is set: set it to "
                          f"{' or '.join(_MECHANISMS[kind][:2 if kind == 'scram' else 1])} "
                          "(Java's default, GSSAPI, does not go with it)")
    if mechanism not in _MECHANISMS[kind]:
        raise ConfigError(f"sasl.jaas.config has a {module}, which does not go with "
                          f"sasl_mechanism {mechanism} (it serves "
                          f"{', '.join(_MECHANISMS[kind])})")
    for key, value in derived.items():
        given = out.get(key)
        if given is None:
            out[key] = value
        elif not _same(key, given, value):
            shown = _SHOWN.get(key, key)
            if _SECRET_KEY.search(key):
                detail = ""
            else:
                detail = f": {given!r} and {value!r}" if not isinstance(value, dict) else ""
            raise ConfigError(f"{shown} and {_JAAS_NAME.get(key, key)} in sasl.jaas.config "
                              f"disagree{detail}; give it once (kproto does not pick one)")
    return out
