"""What trying to break the security layer (issue 29) found, each kept as a test.

Settings a hostile or a confused user gives: a typo that would turn TLS host
name checks off, the same setting under two of its names with different
values, secrets printed with a client's settings; stores as Java takes them
(a trust store that is also a key store, a type that is not the file's).
"""

from __future__ import annotations

from typing import Any

import pytest

from kproto.admin import Admin
from kproto.config import resolve
from kproto.consumer import Consumer
from kproto.errors import ConfigError
from kproto.net.security import sasl_from_config, ssl_context_from_config
from kproto.producer import Producer

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
