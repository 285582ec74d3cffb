"""Config providers (KIP-297/887/993): ``${env:NAME}``, ``${file:PATH:KEY}``, ``${dir:DIR:FILE}``.

The properties files are read as ``java.util.Properties.load`` reads them: a
differential test against the JDK itself on generated texts. Then the settings:
non-secret values are read when settings are resolved, secrets only where a
connection is made (so that what Spark ships holds the placeholder), and every
mistake is a ConfigError naming the placeholder, never a value.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto.config import expand_secrets, resolve
from kproto.config_providers import parse_properties
from kproto.errors import ConfigError

from .java_support import compiled

PROVIDERS = {"config.providers": "env,file,dir",
             "config.providers.env.class":
                 "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
             "config.providers.file.class":
                 "org.apache.kafka.common.config.provider.FileConfigProvider",
             "config.providers.dir.class": "DirectoryConfigProvider"}
SECRET = "s3cr=t \"pw\" \\ ;"


class JavaProperties:
    """One JVM answering Properties.load for every text of the session."""

    def __init__(self, classes: Path) -> None:
        self.proc = subprocess.Popen(["java", "-cp", str(classes), "PropertiesReference"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def load(self, text: str) -> dict[str, str] | None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(base64.b64encode(text.encode()).decode() + "\n")
        self.proc.stdin.flush()
        words = self.proc.stdout.readline().split()
        if words[0] == "ERR":
            return None
        pairs = [base64.b64decode(w).decode()[1:] for w in words[1:]]
        return dict(zip(pairs[::2], pairs[1::2], strict=True))

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(30)
        self.proc.stdout.close()


@pytest.fixture(scope="session")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaProperties]:
    ref = JavaProperties(compiled(tmp_path_factory, "PropertiesReference.java",
                                  "the JDK's Properties"))
    yield ref
    ref.close()


_PIECES = ["a", "b", "key", "x.y", "=", ":", " ", "\t", "\\", "\\\n", "\n", "\r\n", "#", "!",
           "\\u0041", "\\u00e9", "\\t", "\\n", "\\=", "\\:", "\\ ", "é", "€", "\\\\", "\\\r\n",
           "  ", "${env:X}"]


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.sampled_from(_PIECES), max_size=25).map("".join))
def test_properties_are_read_as_java_reads_them(java: JavaProperties, text: str) -> None:
    expected = java.load(text)
    if expected is None:            # Java refuses a malformed \\uXXXX; kproto keeps it as text
        return
    assert parse_properties(text) == expected, repr(text)


def test_known_properties_shapes(java: JavaProperties) -> None:
    for text in ["a=1\nb : 2\nc 3\n", "# c\n! c\n\n  k = v  \n", "k=line1\\\n    line2\n",
                 "k=a\\\\\nb=c\n", "empty=\nonly\n", "k=\\u0041\\u00e9\n", "a\\=b=c\n",
                 "k=v\\\n# not a comment\n", "k=v\\"]:
        assert parse_properties(text) == java.load(text), repr(text)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "secrets.properties").write_text(
        "kafka.password=" + SECRET.replace("\\", "\\\\") + "\nuser=etl\n")
    (tmp_path / "mounted").mkdir()
    (tmp_path / "mounted" / "truststore.password").write_text("trust-me")
    monkeypatch.setenv("KPROTO_TEST_BOOTSTRAP", "127.0.0.1:9092")
    monkeypatch.setenv("KPROTO_TEST_PASSWORD", SECRET)
    return tmp_path


def test_settings_read_values_and_keep_secrets_as_placeholders(files: Path) -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="${{file:{files}/secrets.properties:user}}" '
            'password="${env:KPROTO_TEST_PASSWORD}";')
    s = resolve("consumer", {**PROVIDERS, "bootstrap.servers": "${env:KPROTO_TEST_BOOTSTRAP}",
                             "client.id": f"${{dir:{files}/mounted:truststore.password}}",
                             "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                             "sasl.jaas.config": jaas,
                             "ssl.truststore.password":
                                 f"${{file:{files}/secrets.properties:kafka.password}}"})
    assert s["bootstrap_servers"] == ["127.0.0.1:9092"]      # read now
    assert s["client_id"] == "trust-me"
    assert s["sasl_jaas_config"] == jaas                       # a secret: as written
    assert SECRET not in repr(s) and SECRET not in str(dict(s))
    read = expand_secrets(s)                                   # where a connection is made
    assert f'password="{SECRET}"' in read["sasl_jaas_config"]
    assert 'username="etl"' in read["sasl_jaas_config"]
    assert read["ssl_truststore_password"] == SECRET
    assert s["sasl_jaas_config"] == jaas                       # the settings are unchanged


def test_a_placeholder_of_a_provider_not_configured_stays_as_written() -> None:
    s = resolve("consumer", {"bootstrap.servers": "b:9092", "client.id": "${vault:a:b}"})
    assert s["client_id"] == "${vault:a:b}"
    s = resolve("consumer", {**PROVIDERS, "bootstrap.servers": "b:9092",
                             "client.id": "x-${vault:a:b}-y"})
    assert s["client_id"] == "x-${vault:a:b}-y"


@pytest.mark.parametrize("extra, words", [
    ({"client.id": "${env:KPROTO_NO_SUCH_VAR}"}, "no environment variable KPROTO_NO_SUCH_VAR"),
    ({"client.id": "${file:/nonexistent/x.properties:k}"}, "is not a file"),
    ({"client.id": "${file:FILES/secrets.properties:nokey}"}, "has no key 'nokey'"),
    ({"client.id": "${file:nokey}"}, "the file provider takes"),
    ({"client.id": "${env:A:B}"}, "the env provider takes"),
    ({"client.id": "${file:FILES/secrets.properties:user}",
      "config.providers.file.param.allowed.paths": "/etc/kafka"}, "outside"),
    ({"client.id": "${env:KPROTO_TEST_PASSWORD}",
      "config.providers.env.param.allowlist.pattern": "KAFKA_.*"}, "not allowed"),
    ({"config.providers.vault.class": "x"}, "does not name that provider"),
    ({"config.providers": "env,vault"}, "config.providers.vault.class is not set"),
    ({"config.providers.env.class": "com.example.Mine"}, "not a provider kproto has"),
])
def test_mistakes_are_config_errors_naming_the_placeholder(files: Path, extra: dict,
                                                           words: str) -> None:
    extra = {k: v.replace("FILES", str(files)) for k, v in extra.items()}
    with pytest.raises(ConfigError, match=words) as info:
        resolve("consumer", {**PROVIDERS, "bootstrap.servers": "b:9092", **extra})
    assert SECRET not in str(info.value) and info.value.__cause__ is None


def test_a_missing_secret_is_found_where_the_connection_is_made(files: Path) -> None:
    """resolve() does not read secrets; the client that connects does, and says which."""
    from kproto import Consumer

    cfg = {**PROVIDERS, "bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_SSL",
           "sasl.mechanism": "PLAIN", "sasl.username": "u",
           "sasl.password": "${env:KPROTO_NO_SUCH_SECRET}"}
    with pytest.raises(ConfigError, match="sasl_plain_password's .*no environment variable"):
        Consumer(cfg)
    cfg["sasl.password"] = "${env:KPROTO_TEST_PASSWORD}"
    with Consumer(cfg) as consumer:               # builds its SASL login from the secret
        assert consumer._cluster.sasl is not None
        assert SECRET not in repr(consumer.config)
