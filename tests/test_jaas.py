"""sasl.jaas.config strings: kproto.net.jaas against the JDK's own parsers.

The reference is tests/java/JaasReference.java, compiled once per session and
run as one process that answers line by line:

- ``K``: Kafka's grammar for ``sasl.jaas.config`` run on the real
  ``java.io.StreamTokenizer`` with the character classes Kafka's
  ``org.apache.kafka.common.security.JaasConfig`` gives it (every character
  from 33 to 128 a word character but ``; = / " '``, 160-255 too, ``//`` and
  ``/* */`` comments), each entry checked by ``AppConfigurationEntry``. This
  is what kproto follows.
- ``J``: the JDK's JAAS file parser (``sun.security.provider.ConfigFile``,
  through ``Configuration.getInstance("JavaLoginConfig", URIParameter)``), the
  text wrapped as ``KafkaClient { ... };``. Its tokenizer differs from Kafka's
  (numbers are parsed, ``@ : { } #`` are not word characters, single quotes are
  not strings, ``${...}`` is expanded), so it is compared on the texts both
  grammars share: class names, identifier keys, double-quoted values. Where the
  two differ, kproto follows Kafka (test_kafka_and_jdk_differ_kproto_follows_kafka).

kproto refuses three things Kafka takes (an open quote ended by a line end, an
option name that is not a word or string, an option given twice); the
reference reports them so the comparison expects a ConfigError there.
"""

from __future__ import annotations

import base64
import selectors
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto.errors import ConfigError
from kproto.net.jaas import JaasEntry, jaas_settings, merge_jaas, parse_jaas

from .java_support import compiled

SECRET = "Sekr1t-pa55"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


# --------------------------------------------------------------------------- the reference


class JavaReference:
    """The JaasReference process: ``ask("K" | "J", text)`` -> its answer line."""

    def __init__(self, classes: Path) -> None:
        self.proc = subprocess.Popen(["java", "-Xshare:auto", "-cp", str(classes),
                                      "JaasReference"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)

    def ask(self, mode: str, text: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        line = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()
        self.proc.stdin.write(f"{mode} {line}\n".encode())
        self.proc.stdin.flush()
        if not self.sel.select(60):
            raise AssertionError("the Java reference gave no answer within 60 s")
        return self.proc.stdout.readline().decode().rstrip("\n")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)
        self.sel.close()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture(scope="session")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaReference]:
    ref = JavaReference(compiled(tmp_path_factory, "JaasReference.java",
                                 "the Java reference parser"))
    yield ref
    ref.close()


def _b64(text: str) -> str:
    assert text.startswith("b"), text
    return base64.b64decode(text[1:]).decode("utf-8")


def decode(answer: str) -> tuple[str, list[tuple[str, str, list[tuple[str | None, str]]]], bool]:
    """("OK" | "ERR", [(module, flag, [(key, value)...])...], unclosed)."""
    words = answer.split(" ")
    if words[0] == "ERR":
        return "ERR", [], False
    entries = []
    i = 1
    while i < len(words) and words[i] == "E":
        module, flag, n = _b64(words[i + 1]), words[i + 2], int(words[i + 3])
        i += 4
        pairs: list[tuple[str | None, str]] = []
        for _ in range(n):
            key = None if words[i] == "-" else _b64(words[i])
            pairs.append((key, _b64(words[i + 1])))
            i += 2
        entries.append((module, flag, pairs))
    return "OK", entries, "UNCLOSED" in words[i:]


def kproto_view(text: str) -> list[tuple[str, str, dict[str, str]]] | None:
    try:
        return [(e.module, e.flag, e.options) for e in parse_jaas(text)]
    except ConfigError:
        return None


def check_against_kafka(java: JavaReference, text: str) -> str:
    """kproto accepts exactly what Kafka's grammar accepts (but for the three
    refusals above) with the same entries. Returns Java's verdict."""
    verdict, entries, unclosed = decode(java.ask("K", text))
    mine = kproto_view(text)
    if verdict == "ERR":
        assert mine is None, f"Java refuses {text!r}, kproto accepts {mine}"
        return verdict
    keys = [k for _, _, pairs in entries for k, _ in pairs]
    null_key = None in keys
    twice = any(len({k for k, _ in pairs}) != len(pairs) for _, _, pairs in entries)
    if unclosed or null_key or twice:
        assert mine is None, f"kproto should refuse {text!r} (Java: unclosed={unclosed}, " \
                             f"null key={null_key}, a key twice={twice})"
        return "DEVIATION"
    want = [(m, f, dict(pairs)) for m, f, pairs in entries]
    assert mine == want, f"{text!r}: Java {want}, kproto {mine}"
    return verdict


# --------------------------------------------------------------------------- generated texts

_WORD_CHARS = st.characters(codec="utf-8", exclude_characters=" \t\r\n;=/\"'",
                            exclude_categories=("Cs", "Cc"))
_ANY = st.characters(codec="utf-8", exclude_categories=("Cs",))


def _quoted(quote: str) -> st.SearchStrategy[str]:
    plain = st.characters(codec="utf-8", exclude_characters=quote + "\\\r\n",
                          exclude_categories=("Cs",))
    escape = st.sampled_from(["\\\\", f"\\{quote}", "\\n", "\\t", "\\r", "\\a", "\\b", "\\f",
                              "\\v", "\\0", "\\12", "\\377", "\\477", "\\8", "\\x", "\\;",
                              "\\=", "\\/"])
    part = st.one_of(plain, escape, st.sampled_from([";", "=", "/", "//", "/*", " ", "$"]))
    return st.lists(part, max_size=12).map(lambda ps: quote + "".join(ps) + quote)


_VALUE = st.one_of(st.text(_WORD_CHARS, min_size=1, max_size=12), _quoted('"'), _quoted("'"))
_KEY = st.one_of(st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,10}", fullmatch=True),
                 st.sampled_from(["username", "password", "clientSecret", "extension_x"]),
                 st.text(_WORD_CHARS, min_size=1, max_size=6), _quoted('"'))
_MODULE = st.one_of(st.sampled_from([PLAIN, SCRAM, OAUTH, KRB5, "kafkashaded." + PLAIN]),
                    st.from_regex(r"[a-z]{1,5}(\.[A-Za-z$_][A-Za-z0-9$_]{0,6}){0,3}",
                                  fullmatch=True),
                    _quoted('"'))
_FLAG = st.one_of(st.sampled_from(["required", "REQUIRED", "Optional", "requisite",
                                   "sufficient", "'required'", '"optional"', "require",
                                   "", ";"]),
                  st.text(_WORD_CHARS, min_size=1, max_size=4))
_GAP = st.lists(st.sampled_from([" ", "  ", "\t", "\n", "\r\n", "\r", "/* c */",
                                 "/* a\n*/", "// c\n", "/ c\n", "\x00", "\x85"]),
                min_size=1, max_size=3).map("".join)


@st.composite
def jaas_texts(draw: st.DrawFn) -> str:
    """A JAAS text: mostly well formed entries with gaps, quoting and escapes; then
    sometimes cut, or with characters inserted or dropped."""
    parts = []
    for _ in range(draw(st.integers(1, 2))):
        gap = lambda: draw(_GAP)  # noqa: E731
        entry = draw(_MODULE) + gap() + draw(_FLAG)
        for _ in range(draw(st.integers(0, 4))):
            entry += gap() + draw(_KEY) + draw(st.sampled_from(["", " ", "\n"])) + "=" + \
                draw(st.sampled_from(["", " ", "\t"])) + draw(_VALUE)
        entry += draw(st.sampled_from([";", " ;", "\n;", "", ";;"]))
        parts.append(entry)
    text = draw(st.sampled_from(["", " ", "\n", "// lead\n"])).join([""] * 1) + \
        draw(st.sampled_from(["", "\n", " "])).join(parts)
    change = draw(st.integers(0, 3))
    if change == 1 and text:
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + draw(st.text(_ANY, min_size=1, max_size=3)) + text[i:]
    elif change == 2 and text:
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + text[i + draw(st.integers(1, 3)):]
    return text


@settings(max_examples=400, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=jaas_texts())
def test_kproto_parses_as_kafkas_grammar(java: JavaReference, text: str) -> None:
    check_against_kafka(java, text)


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=st.text(st.sampled_from(list("ab=;\"'\\/*\n\r \t.$-1{}#\x85\u00e9\u20ac")),
                    max_size=30))
def test_kproto_parses_noise_as_kafkas_grammar(java: JavaReference, text: str) -> None:
    check_against_kafka(java, text)


@pytest.mark.parametrize("text", [
    f'{PLAIN} required a="x\\',                  # a backslash at the very end
    f'{PLAIN} required a="x\\\n";',              # backslash, line end: a line end in it
    f"{PLAIN} required a=/\nb=c;",                 # a lone '/' eats the next line too
    f"{PLAIN} required a=x/\n;",                  # ... so this entry has no ';'
    f"{PLAIN} required a=b/* c\n*/;",
    f"{PLAIN} required a=b/* c *\r\n/ */;",
    f"{PLAIN} required a=b\r\n\r;",
    f"{PLAIN} required a=\x85;",                 # U+0085 is an ordinary character
    f"{PLAIN} required a=b\x85c;",
    f"{PLAIN} required a=\u00a0;",                # U+00A0 is a word character
    f"{PLAIN} required a=\U0001F600 b='\U0001F600';",
    f'{PLAIN} required a="\\477\\400\\0123\\9";',
    f"{PLAIN} required\x00a=b\x1f;",
    f"{PLAIN} required a='';",
    f'{PLAIN} required ""="x";',                 # an empty option name, as Kafka takes it
    '"" required a=b;',
    f"{PLAIN} required a=b;;",
    f"{PLAIN} required;{PLAIN} optional;",
    f"{PLAIN} required " + "/**/" * 2000 + "a=b // c\n" * 2000 + ";",  # no recursion
])
def test_edge_cases_match_kafka(java: JavaReference, text: str) -> None:
    check_against_kafka(java, text)


def test_the_generator_reaches_both_verdicts_and_the_deviations(java: JavaReference) -> None:
    """The differential tests mean something only if the texts reach every branch."""
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(text=jaas_texts())
    def probe(text: str) -> None:
        seen.add(check_against_kafka(java, text))

    probe()
    assert seen == {"OK", "ERR", "DEVIATION"}, seen


_COMMON_VALUE = st.lists(st.one_of(
    st.characters(codec="utf-8", exclude_characters='"\\\r\n$', exclude_categories=("Cs",)),
    st.sampled_from(['\\"', "\\\\", "\\n", "\\t", ";", "=", " "])), max_size=10)


@st.composite
def common_texts(draw: st.DrawFn) -> str:
    """Texts in the part of the grammar Kafka's parser and the JDK's share."""
    entries = []
    for _ in range(draw(st.integers(1, 2))):
        module = draw(st.from_regex(r"[a-z][a-z0-9]{0,4}(\.[A-Za-z][A-Za-z0-9_]{0,6}){1,3}",
                                    fullmatch=True))
        entry = [module, draw(st.sampled_from(["required", "optional", "Sufficient",
                                               "REQUISITE"]))]
        keys = draw(st.lists(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
                             max_size=4, unique=True))
        for key in keys:
            entry.append(f'{key}="{"".join(draw(_COMMON_VALUE))}"')
        gap = draw(st.sampled_from([" ", "\n  ", "\t", " /* c */ ", " // c\n"]))
        entries.append(gap.join(entry) + ";")
    return "\n".join(entries)


@settings(max_examples=120, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=common_texts())
def test_kafka_grammar_and_jdk_parser_agree_on_common_texts(java: JavaReference,
                                                            text: str) -> None:
    assert check_against_kafka(java, text) == "OK"
    verdict, entries, _ = decode(java.ask("J", text))
    assert verdict == "OK", text
    jdk = [(m, f, dict(pairs)) for m, f, pairs in entries]
    assert kproto_view(text) == jdk


@pytest.mark.parametrize("text, kafka_options", [
    # unquoted values: Kafka's words take @ : { } # digits; the JDK parses a number or
    # stops at an ordinary character
    (f"{PLAIN} required username=u@example.com password=p{{1}}#x;",
     {"username": "u@example.com", "password": "p{1}#x"}),
    (f"{PLAIN} required username=42 password=x;", {"username": "42", "password": "x"}),
    # single quotes: strings for Kafka, an error for the JDK
    (f"{PLAIN} required username='alice' password='p;w';",
     {"username": "alice", "password": "p;w"}),
])
def test_kafka_and_jdk_differ_kproto_follows_kafka(java: JavaReference, text: str,
                                                  kafka_options: dict[str, str]) -> None:
    assert decode(java.ask("J", text))[0] == "ERR"
    assert check_against_kafka(java, text) == "OK"
    assert parse_jaas(text)[0].options == kafka_options


# --------------------------------------------------------------------------- examples


def test_real_world_strings() -> None:
    # Azure Event Hubs: the password is a connection string full of ';' and '='
    conn = ("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
            "SharedAccessKey=" + SECRET)
    text = f'{PLAIN} required username="$ConnectionString" password="{conn}";'
    assert jaas_settings(text) == ("plain", {"sasl_plain_username": "$ConnectionString",
                                             "sasl_plain_password": conn})
    # Databricks' shaded Kafka, several lines, comments, escapes
    text = (f"kafkashaded.{SCRAM} REQUIRED\n  // the service account\n"
            f'  username="svc" /* rotated monthly */\n  password="a\\"b\\\\c\\tq";\n')
    kind, got = jaas_settings(text)
    assert kind == "scram" and got["sasl_plain_password"] == 'a"b\\c\tq'
    # Confluent Cloud OAuth with KIP-768 options and extensions
    text = (f"{OAUTH} required clientId='cid' clientSecret='{SECRET}' scope='kafka read' "
            "extension_logicalCluster='lkc-1' extension_identityPoolId='pool-2';")
    assert jaas_settings(text) == ("oauthbearer", {
        "sasl_oauthbearer_client_id": "cid", "sasl_oauthbearer_client_secret": SECRET,
        "sasl_oauthbearer_scope": "kafka read",
        "sasl_oauthbearer_extensions": {"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}})
    # Kerberos with a keytab
    text = (f'{KRB5} required useKeyTab=true storeKey=true keyTab="/etc/security/k.keytab" '
            'principal="kafka-client@EXAMPLE.COM" serviceName="kafka" useTicketCache=false;')
    assert jaas_settings(text) == ("kerberos", {
        "sasl_kerberos_keytab": "/etc/security/k.keytab",
        "sasl_kerberos_principal": "kafka-client@EXAMPLE.COM",
        "sasl_kerberos_service_name": "kafka", "sasl_kerberos_use_ticket_cache": False})


def test_entry_repr_masks_secrets() -> None:
    entry = parse_jaas(f'{OAUTH} required clientId=c clientSecret="{SECRET}" '
                       f'password="{SECRET}";')[0]
    assert isinstance(entry, JaasEntry) and entry.options["clientSecret"] == SECRET
    for text in (repr(entry), str(entry), repr([entry])):
        assert SECRET not in text and "clientId" in text


@pytest.mark.parametrize("text, words", [
    ("", "names no login module"),
    ("  // only a comment\n", "names no login module"),
    (f"{PLAIN}", "expected a control flag .* line 1, column 56"),
    (f"{PLAIN} requird username=u;", "control flag must be one of .*did you mean 'required'"),
    (f'{PLAIN} required username="u" password "{SECRET}";',
     "expected '=' after the option name 'password', found a quoted string at line 1"),
    (f'{PLAIN} required username="u"\n password=;', "expected a value .* 'password'.* "
                                                     "line 2, column 11"),
    (f'{PLAIN} required username="u" password="{SECRET}"', "does not end with ';'"),
    (f'{PLAIN} required username="u" password="{SECRET}\n";', "not closed on the line"),
    (f'{PLAIN} required username="u" username="v";', "'username' is given twice"),
    (f"{PLAIN} required = = x;", "expected an option name or ';', found '='"),
    (f'{PLAIN} required username="u";\n{SCRAM} required username="u";',
     "has 2 login modules; Kafka takes exactly one"),
    ('PlainLoginModule required username="u";',
     "unknown login module class.*did you mean '" + PLAIN),
    ('com.example.MyLoginModule required username="u";',
     "unknown login module class 'com.example.MyLoginModule'"),
    ('software.amazon.msk.auth.iam.IAMLoginModule required awsProfilName="p";',
     "unknown IAMLoginModule option 'awsProfilName'; did you mean 'awsProfileName'"),
    (f'{PLAIN} required usrname="u" password="p";', "unknown PlainLoginModule option "
                                                    "'usrname'; did you mean 'username'"),
    (f'{PLAIN} required user_admin="{SECRET}";', "broker-side"),
    (f"{SCRAM} required username=u password=p tokenauth=true;", "delegation tokens"),
    (f"{OAUTH} required unsecuredLoginStringClaim_sub=x;", "unsecured"),
    (f'{KRB5} required keyTab="/k";', "only with useKeyTab=true"),
    (f"{KRB5} required useKeyTab=yes;", "must be true or false"),
])
def test_errors_say_where_and_what(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        jaas_settings(text)
    assert SECRET not in str(info.value) and info.value.__cause__ is None


@pytest.mark.parametrize("text", [
    # a password where an option name should be, or left bare: never echoed
    f'{PLAIN} required username="u" {SECRET};',
    f'{PLAIN} required username="u" {SECRET}',
    f'{PLAIN} required username="u" "{SECRET}"="x";',
    f'{PLAIN} required username=u password={SECRET} {SECRET};',
    f'{PLAIN} required username=u password=a;{SECRET} x;',
    f'{SECRET} required;',
    f'{PLAIN} {SECRET} username=u;',
    f'{PLAIN} required username=u password="{SECRET}\udcff";',
])
def test_errors_never_show_a_secret(text: str) -> None:
    import traceback

    with pytest.raises(ConfigError) as info:
        jaas_settings(text)
    shown = "".join(traceback.format_exception(info.value)) + repr(info.value.__context__)
    assert SECRET not in shown, str(info.value)


# --------------------------------------------------------------------------- merging


def _cfg(**kw: Any) -> dict[str, Any]:
    return {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
            "sasl_jaas_config": f'{PLAIN} required username="alice" password="{SECRET}";',
            **kw}


def test_merge_fills_and_agrees() -> None:
    merged = merge_jaas(_cfg())
    assert merged["sasl_plain_username"] == "alice" and merged["sasl_plain_password"] == SECRET
    # the same values given both ways: fine
    assert merge_jaas(_cfg(sasl_plain_username="alice"))["sasl_plain_password"] == SECRET
    # no JAAS: nothing changes
    assert merge_jaas({"security_protocol": "SSL"}) == {"security_protocol": "SSL"}


def test_merge_refuses_disagreement_naming_both() -> None:
    with pytest.raises(ConfigError, match=r"sasl_plain_username \(sasl.username\) and "
                                          r"username in sasl.jaas.config disagree: 'bob' and "
                                          r"'alice'"):
        merge_jaas(_cfg(sasl_plain_username="bob"))
    with pytest.raises(ConfigError, match="sasl_plain_password .* and password in "
                                          "sasl.jaas.config disagree") as info:
        merge_jaas(_cfg(sasl_plain_password="other-" + SECRET))
    assert SECRET not in str(info.value)
    oauth = {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
             "sasl_jaas_config": f"{OAUTH} required clientId=c clientSecret={SECRET} "
                                 "extension_a=1;"}
    assert merge_jaas({**oauth, "sasl_oauthbearer_extensions": "a=1"})[
        "sasl_oauthbearer_extensions"] == "a=1"
    with pytest.raises(ConfigError, match="extension_"):
        merge_jaas({**oauth, "sasl_oauthbearer_extensions": "a=2"})
    with pytest.raises(ConfigError, match="client_secret") as info:
        merge_jaas({**oauth, "sasl_oauthbearer_client_secret": "x"})
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("cfg, words", [
    (_cfg(security_protocol="SSL"), "security_protocol is SSL"),
    (_cfg(sasl_mechanism=None), "set it to PLAIN .*GSSAPI"),
    (_cfg(sasl_mechanism="OAUTHBEARER"), "PlainLoginModule, which does not go with "
                                         "sasl_mechanism OAUTHBEARER"),
    (_cfg(sasl_jaas_config=f"{KRB5} required;", sasl_mechanism="PLAIN"), "GSSAPI"),
])
def test_merge_checks_protocol_and_mechanism(cfg: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        merge_jaas(cfg)


def test_scram_module_serves_plain_as_in_java() -> None:
    # Java's PLAIN and SCRAM callback handlers read the same Subject credentials
    cfg = _cfg(sasl_mechanism="SCRAM-SHA-512",
               sasl_jaas_config=f'{PLAIN} required username="a" password="b";')
    assert merge_jaas(cfg)["sasl_plain_username"] == "a"


# --------------------------------------------------------------------------- wiring


@pytest.mark.parametrize("client", ["producer", "consumer", "admin"])
def test_every_client_takes_sasl_jaas_config(client: str) -> None:
    from kproto.config import resolve
    from kproto.net.security import SaslScram, sasl_from_config

    settings = resolve(client, {
        "bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="alice" password="{SECRET}";'})
    mech = sasl_from_config(settings)
    assert isinstance(mech, SaslScram) and mech.username == "alice"
    assert mech._password == SECRET and SECRET not in repr(mech)
    same = resolve(client, {"bootstrap_servers": "b:9093", "security_protocol": "SASL_SSL",
                            "sasl_mechanism": "SCRAM-SHA-512",
                            "sasl_jaas_config": settings["sasl_jaas_config"]})
    assert sasl_from_config(same).username == "alice"  # type: ignore[union-attr]


def test_a_kerberos_jaas_line_reaches_the_gssapi_settings() -> None:
    from kproto.net.security import sasl_from_config

    cfg = {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
           "sasl.kerberos.service.name": "kafka",
           "sasl.jaas.config": f'{KRB5} required useKeyTab=true keyTab="/nonexistent.keytab" '
                               'principal="c@EXAMPLE.COM";'}
    # GSSAPI says what it lacks (the keytab, or the mechanism itself where it is not built)
    with pytest.raises(ConfigError, match="(?i)gssapi|kerberos"):
        sasl_from_config(cfg)
    # the Kerberos options are known settings, not typos
    from kproto.config import resolve

    resolve("consumer", {"bootstrap.servers": "b:1", **cfg})


def test_cluster_checks_a_jaas_line_with_a_plaintext_protocol() -> None:
    from kproto.net.cluster import Cluster

    with pytest.raises(ConfigError, match="security_protocol is PLAINTEXT"):
        Cluster({"bootstrap_servers": ["b:1"], "security_protocol": "PLAINTEXT",
                 "sasl_jaas_config": f'{PLAIN} required username="u" password="p";'})
