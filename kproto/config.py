"""Client configuration: Kafka's own config keys, as keyword arguments or a dict.

Every client takes keyword arguments named after Kafka's config keys with
underscores (``bootstrap_servers``, ``linger_ms``, ``auto_offset_reset``), or
a dict with Kafka's dotted names, so configs move over from other clients::

    Consumer({"bootstrap.servers": "broker:9092", "group.id": "etl"})
    Consumer(bootstrap_servers="broker:9092", group_id="etl")

librdkafka's names for the same settings (``sasl.username``,
``ssl.ca.location``, ``queue.buffering.max.ms``...) are accepted too. Values
may be strings, as in a properties file (``"true"``, ``"500"``). An unknown
key, or a key that does not apply to the client, is a :class:`ConfigError`
that suggests the closest known key.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .config_providers import ConfigProviders
from .errors import ConfigError

__all__ = ["resolve", "expand_secrets", "setting_key", "is_text", "OPTIONS", "Option", "Settings",
           "SECRET_OPTIONS", "SASL_CREDENTIALS", "endpoint_identification", "SECRET_NAME",
           "is_secret_name"]

COMMON, PRODUCER, CONSUMER, ADMIN = "common", "producer", "consumer", "admin"
_ALL = frozenset({PRODUCER, CONSUMER, ADMIN})


def _bool(v: Any) -> bool:
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no", ""):
            return False
        raise ValueError(f"not a boolean: {v!r}")
    return bool(v)


def _int(v: Any) -> int:
    if isinstance(v, bool):
        raise ValueError(f"not an integer: {v!r}")
    return int(v)


def _servers(v: Any) -> list[str]:
    items = v.split(",") if isinstance(v, str) else list(v)
    out = [s.strip() for s in items if s and s.strip()]
    if not out:
        raise ValueError("no broker address given")
    return out


def _choice(*allowed: str) -> Callable[[Any], str]:
    def convert(v: Any) -> str:
        s = str(v).strip()
        for a in allowed:
            if s.lower() == a.lower():
                return a
        raise ValueError(f"{v!r} is not one of {', '.join(allowed)}")
    return convert


def _acks(v: Any) -> int:
    if isinstance(v, str) and v.strip().lower() == "all":
        return -1
    n = _int(v)
    if n not in (-1, 0, 1):
        raise ValueError(f"acks must be 0, 1 or 'all' (-1), not {v!r}")
    return n


def _compression(v: Any) -> str:
    s = "none" if v is None else str(v).strip().lower()
    if s not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise ValueError(f"{v!r} is not one of none, gzip, snappy, lz4, zstd")
    return s


def _strategies(v: Any) -> tuple[Any, ...]:
    if isinstance(v, str):
        return tuple(s.strip() for s in v.split(",") if s.strip())
    if isinstance(v, (list, tuple)):
        return tuple(v)
    return (v,)


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def _float(v: Any) -> float:
    if isinstance(v, bool):
        raise ValueError(f"not a number: {v!r}")
    return float(v)


def _any(v: Any) -> Any:
    return v


def _no_kinit_cmd(v: Any) -> None:
    if v is not None and str(v).strip():
        raise ValueError("kproto runs no command from its settings: it logs in from "
                         "sasl.kerberos.keytab itself and renews from it, or uses the "
                         "tickets kinit put in the ticket cache (KRB5CCNAME)")
    return None


@dataclass(frozen=True)
class Option:
    """One setting: its default, which clients take it, and how values convert."""

    name: str
    default: Any
    clients: frozenset[str]
    convert: Callable[[Any], Any]
    doc: str


def _opts(clients: frozenset[str], *rows: tuple[str, Any, Callable[[Any], Any], str]
          ) -> list[Option]:
    return [Option(name, default, clients, conv, doc) for name, default, conv, doc in rows]


_P, _C = frozenset({PRODUCER}), frozenset({CONSUMER})

OPTIONS: dict[str, Option] = {o.name: o for o in [
    *_opts(_ALL,
        ("bootstrap_servers", None, _servers, "host:port list (comma-separated or a list)"),
        ("client_id", "kproto", str, "sent with every request; shows in broker logs/quotas"),
        ("request_timeout_ms", 30000, _int, "how long to wait for any one answer"),
        ("socket_connection_setup_timeout_ms", 10000, _int, "TCP (+TLS) connect timeout"),
        ("retry_backoff_ms", 100, _int, "first backoff between retries (doubles, capped)"),
        ("retry_backoff_max_ms", 1000, _int, "cap of the retry backoff"),
        ("metadata_max_age_ms", 300000, _int, "refresh cluster metadata at least this often"),
        ("receive_message_max_bytes", 100 * 1024 * 1024, _int,
         "largest response accepted; larger closes the connection"),
        ("security_protocol", "PLAINTEXT",
         _choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), "transport security"),
        ("config_providers", None, _any,
         "config.providers and config.providers.<name>.class / .param.* (KIP-297): "
         "${env:NAME}, ${file:PATH:KEY}, ${dir:DIR:FILE} in settings (kproto.config_providers)"),
        ("ssl_context", None, _any, "a ready ssl.SSLContext (wins over the ssl_* files)"),
        ("ssl_cafile", None, _opt_str, "CA bundle (PEM file, or a directory of hashed CA "
         "files) that signs the brokers' certificates"),
        ("ssl_certfile", None, _opt_str, "client certificate (PEM), for mutual TLS"),
        ("ssl_keyfile", None, _opt_str, "client private key (PEM)"),
        ("ssl_password", None, _opt_str, "password of the client private key (Java's "
         "ssl.key.password: of the key in ssl_keystore_location or ssl_keydata too)"),
        ("ssl_cadata", None, _opt_str,
         "trusted CAs as PEM text (Java's ssl.truststore.certificates, librdkafka's ssl.ca.pem)"),
        ("ssl_truststore_location", None, _opt_str,
         "trust store file: JKS, PKCS12, PEM or JCEKS (type from ssl_truststore_type or the "
         "file); JKS needs the JDK's keytool, PKCS12 kproto[security]"),
        ("ssl_truststore_password", None, _opt_str, "trust store password (never logged)"),
        ("ssl_truststore_type", None, _opt_str, "JKS, PKCS12, PEM or JCEKS (unset: the file's)"),
        ("ssl_keystore_location", None, _opt_str,
         "key store file with the client's key and certificate, for mutual TLS: JKS, PKCS12, "
         "PEM or JCEKS"),
        ("ssl_keystore_password", None, _opt_str, "key store password (never logged)"),
        ("ssl_keystore_type", None, _opt_str, "JKS, PKCS12, PEM or JCEKS (unset: the file's)"),
        ("ssl_certdata", None, _opt_str, "client certificate chain as PEM text (Java's "
         "ssl.keystore.certificate.chain, librdkafka's ssl.certificate.pem)"),
        ("ssl_keydata", None, _opt_str, "client private key as PEM text (Java's "
         "ssl.keystore.key, librdkafka's ssl.key.pem; never logged)"),
        ("ssl_check_hostname", True, _bool, "check the broker's name against its certificate"),
        ("ssl_verify", True, _bool, "verify the broker's certificate chain (off: no checks)"),
        ("ssl_ciphers", None, _opt_str, "OpenSSL cipher string"),
        # a JAAS login module line (kproto/net/jaas.py), and what it can carry for Kerberos
        ("sasl_jaas_config", None, _opt_str,
         "Java's JAAS line, e.g. '...PlainLoginModule required username=\"u\" "
         "password=\"p\";': credentials for PLAIN, SCRAM, OAUTHBEARER (never logged)"),
        # GSSAPI (kproto/net/kerberos.py; the kerberos extra)
        ("sasl_kerberos_service_name", None, _opt_str,
         "first part of the brokers' Kerberos principal: <name>/<broker host> (default kafka)"),
        ("sasl_kerberos_principal", None, _opt_str,
         "Kerberos client principal (default: the keytab's first, or the ticket cache's)"),
        ("sasl_kerberos_keytab", None, _opt_str,
         "keytab to log in from (without it: the ticket cache, KRB5CCNAME)"),
        ("sasl_kerberos_kinit_cmd", None, _no_kinit_cmd,
         "librdkafka's: refused (kproto runs no command from settings)"),
        ("sasl_kerberos_min_time_before_relogin", 60000, _int,
         "librdkafka's: accepted, no effect (tickets are renewed from the keytab as they "
         "near their end)"),
        ("sasl_mechanism", None, _opt_str,
         "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI or AWS_MSK_IAM"),
        ("sasl_plain_username", None, _opt_str, "SASL user name"),
        ("sasl_plain_password", None, _opt_str, "SASL password (never logged)"),
        ("sasl_allow_plaintext_plain", False, _bool,
         "allow SASL PLAIN, OAUTHBEARER or AWS_MSK_IAM without TLS (the password, token or "
         "signed request crosses the network in clear)"),
        # OAUTHBEARER (kproto/net/oauth.py, oidc.py; docs/security.md)
        ("oauth_cb", None, _any, "OAUTHBEARER token function (confluent-kafka): returns "
         "(token, expiry seconds since the epoch[, principal[, extensions]])"),
        ("sasl_oauth_token_provider", None, _any,
         "OAUTHBEARER token provider object with token() (kafka-python)"),
        ("sasl_oauthbearer_method", None, _opt_str, "librdkafka: 'oidc' = the token endpoint"),
        ("sasl_oauthbearer_config", None, _opt_str, "librdkafka: the string oauth_cb is given"),
        ("sasl_oauthbearer_token_endpoint_url", None, _opt_str,
         "OIDC token endpoint (client credentials grant, KIP-768), or file:// of a token"),
        ("sasl_oauthbearer_client_id", None, _opt_str, "OIDC client id"),
        ("sasl_oauthbearer_client_secret", None, _opt_str, "OIDC client secret (never logged)"),
        ("sasl_oauthbearer_scope", None, _opt_str, "OIDC scope asked for"),
        ("sasl_oauthbearer_extensions", None, _any,
         "SASL extensions (KIP-255): a dict, or 'key=value,key2=value2'"),
        ("sasl_oauthbearer_ssl_cafile", None, _opt_str,
         "CAs (PEM) of the token endpoint's certificate (else the system's)"),
        ("sasl_oauthbearer_header_urlencode", False, _bool,
         "URL-encode client id and secret in the Basic header (KIP-1025)"),
        ("sasl_oauthbearer_scope_claim_name", "scope", str, "the token's scope claim"),
        ("sasl_oauthbearer_sub_claim_name", "sub", str, "the token's principal claim"),
        ("sasl_login_callback_handler_class", None, _opt_str,
         "Java's OAuthBearerLoginCallbackHandler (= the token endpoint) or AWS's "
         "IAMOAuthBearerLoginCallbackHandler (= AWS MSK IAM tokens) only"),
        # AWS MSK IAM (kproto/net/msk.py; the aws extra; docs/security.md)
        ("sasl_client_callback_handler_class", None, _opt_str,
         "Java's: AWS's IAMClientCallbackHandler (AWS_MSK_IAM) or "
         "IAMOAuthBearerLoginCallbackHandler (OAUTHBEARER) only"),
        ("sasl_aws_region", None, _opt_str,
         "AWS MSK IAM: the region to sign for (default: the broker host name's, "
         "...kafka.<region>.amazonaws.com, else AWS_REGION / AWS_DEFAULT_REGION)"),
        ("sasl_aws_profile_name", None, _opt_str,
         "AWS MSK IAM: credentials of this AWS profile (JAAS awsProfileName)"),
        ("sasl_aws_role_arn", None, _opt_str,
         "AWS MSK IAM: assume this IAM role through STS (JAAS awsRoleArn)"),
        ("sasl_aws_role_session_name", None, _opt_str,
         "AWS MSK IAM: the role's session name (JAAS awsRoleSessionName; aws-msk-iam-auth)"),
        ("sasl_aws_sts_region", None, _opt_str,
         "AWS MSK IAM: the STS region for the role (JAAS awsStsRegion; default global)"),
        ("sasl_login_connect_timeout_ms", 10000, _int,
         "token endpoint connect timeout (Java: unset)"),
        ("sasl_login_read_timeout_ms", 10000, _int, "token endpoint read timeout (Java: unset)"),
        ("sasl_login_retry_backoff_ms", 100, _int, "first wait between token requests"),
        ("sasl_login_retry_backoff_max_ms", 10000, _int, "how long token requests are retried"),
        ("sasl_login_refresh_window_factor", 0.8, _float,
         "fetch a new token at this part of its lifetime (0.5-1.0)"),
        ("sasl_login_refresh_window_jitter", 0.05, _float, "... plus up to this (0-0.25)"),
        ("sasl_login_refresh_min_period_seconds", 60, _int, "no refresh sooner after a fetch"),
        ("sasl_login_refresh_buffer_seconds", 300, _int, "refresh at least this long before "
         "the token expires"),
        # metrics (kproto/metrics.py; docs/client.md "Metrics")
        ("metrics_enabled", True, _bool,
         "record the client's metrics (off: metrics() is empty, nothing is recorded)"),
        ("metrics_sample_window_ms", 30000, _int, "window of one metrics sample (Java's)"),
        ("metrics_num_samples", 2, _int, "samples kept per windowed metric (Java's)"),
        ("statistics_interval_ms", 0, _int,
         "call stats_callback with a JSON snapshot this often (0: never; librdkafka's)"),
        ("stats_callback", None, _any, "stats_callback(json_str) (librdkafka's stats_cb)"),
        ("enable_metrics_push", True, _bool,
         "KIP-714: push the metrics a broker asks for (needs kproto[telemetry] and a "
         "broker with GetTelemetrySubscriptions/PushTelemetry)"),
    ),
    *_opts(_P,
        ("acks", -1, _acks, "0, 1 or 'all' (-1): replicas that must have a batch"),
        ("compression_type", "none", _compression, "none, gzip, snappy, lz4, zstd"),
        ("compression_level", None, lambda v: None if v is None else _int(v),
         "codec level (gzip -1 to 9, zstd -131072 to 22, lz4 any: negative is faster); "
         "unset: gzip 9, lz4 0, zstd 3"),
        ("batch_size", 1048576, _int,
         "bytes per partition batch before it is sent (librdkafka's default; Java's is "
         "16384, which costs a Python client ~40% of its per-record throughput)"),
        ("linger_ms", 5, _int, "wait this long for a batch to fill before sending it"),
        ("metadata_max_idle_ms", 300000, _int,
         "forget a topic produced to no longer for this long: its metadata stops being "
         "refreshed (so broker-side auto-creation does not bring a deleted topic back)"),
        ("max_request_size", 1048576, _int, "largest Produce request (and record batch)"),
        ("max_in_flight_requests_per_connection", 5, _int, "pipelined Produce requests"),
        ("retries", 2147483647, _int, "how often a failed batch is retried"),
        ("delivery_timeout_ms", 120000, _int, "give up on a record this long after send()"),
        ("enable_idempotence", False, _bool,
         "producer id + sequence numbers: retries never write duplicates"),
        ("transactional_id", None, _opt_str,
         "makes the producer transactional (implies enable_idempotence); a second "
         "producer with the same id fences this one"),
        ("transaction_timeout_ms", 60000, _int,
         "the broker aborts a transaction open longer (capped by the broker's "
         "transaction.max.timeout.ms)"),
        ("partitioner", "murmur2", _choice("murmur2", "murmur2_random", "random"),
         "keyed records: Java's murmur2; null keys: sticky per batch"),
        ("buffer_memory", 32 * 1024 * 1024, _int, "bytes of unsent records before send() blocks"),
        ("max_block_ms", 60000, _int, "how long send() blocks on a full buffer or metadata"),
    ),
    *_opts(_C,
        ("group_id", None, _opt_str, "consumer group (needed for subscribe() and commit())"),
        ("group_instance_id", None, _opt_str, "static membership id (KIP-345)"),
        ("auto_offset_reset", "latest", _choice("earliest", "latest", "none"),
         "where to start without a committed offset, or after OFFSET_OUT_OF_RANGE"),
        ("enable_auto_commit", True, _bool, "commit consumed positions in the background"),
        ("auto_commit_interval_ms", 5000, _int, "how often auto-commit runs"),
        ("fetch_min_bytes", 1, _int, "broker waits for this many bytes (long poll)"),
        ("fetch_max_wait_ms", 500, _int, "... or this long"),
        ("fetch_max_bytes", 52428800, _int, "bytes per Fetch response"),
        ("max_partition_fetch_bytes", 1048576, _int, "bytes per partition per Fetch"),
        ("max_poll_records", 500, _int, "records per poll() (the per-record API)"),
        ("isolation_level", "read_uncommitted", _choice("read_uncommitted", "read_committed"),
         "read_committed hides aborted transactions and stops at the LSO"),
        ("check_crcs", True, _bool, "verify record batch checksums"),
        ("max_decompressed_bytes", 268435456, _int,
         "cap on what one partition's record set in a Fetch answer may decompress to "
         "(decompression bombs); larger raises DecompressionLimitError"),
        ("session_timeout_ms", 45000, _int, "group session timeout"),
        ("heartbeat_interval_ms", 3000, _int, "group heartbeat interval"),
        ("max_poll_interval_ms", 300000, _int, "rebalance timeout (JoinGroup v1+)"),
        ("partition_assignment_strategy", ("range", "roundrobin"), _strategies,
         "assignors offered to the group, in order of preference"),
        ("group_protocol", "classic", _choice("classic", "consumer"),
         "classic (JoinGroup/SyncGroup) or consumer (KIP-848: the broker assigns)"),
        ("group_remote_assignor", None, _opt_str,
         "group_protocol=consumer: the broker-side assignor to ask for (uniform, range)"),
        ("client_rack", None, _opt_str, "rack of this consumer (Fetch v11+)"),
        ("exclude_internal_topics", True, _bool, "pattern subscriptions skip __ topics"),
        ("allow_auto_create_topics", True, _bool,
         "let the broker create a topic this consumer asks about (if the broker allows); "
         "read_range, iter_range, the CLI and the Spark source never do"),
    ),
]}

#: The share consumer (KIP-932) takes the common options, these consumer options
#: and its own; the others are the share group's (Java's ShareConsumerConfig
#: refuses auto.offset.reset, enable.auto.commit, isolation.level,
#: group.instance.id, session/heartbeat/assignor settings, group.protocol).
SHARE_CONSUMER = "share_consumer"
_SHARE_TAKES = ("group_id", "fetch_min_bytes", "fetch_max_wait_ms", "fetch_max_bytes",
                "max_partition_fetch_bytes", "max_poll_records", "check_crcs",
                "max_decompressed_bytes", "max_poll_interval_ms", "client_rack",
                "allow_auto_create_topics")
for _o in list(OPTIONS.values()):
    if _o.clients == _ALL or _o.name in _SHARE_TAKES:
        OPTIONS[_o.name] = Option(_o.name, _o.default, _o.clients | {SHARE_CONSUMER},
                                  _o.convert, _o.doc)
OPTIONS.update((o.name, o) for o in _opts(frozenset({SHARE_CONSUMER}),
    ("share_acknowledgement_mode", "implicit", _choice("implicit", "explicit"),
     "implicit: the next poll or commit accepts what the last poll returned; explicit: "
     "every record is acknowledged by the application"),
))

#: librdkafka / Java names that are not the dotted form of ours.
ALIASES = {
    "sasl_mechanisms": "sasl_mechanism",
    "sasl_username": "sasl_plain_username",
    "sasl_password": "sasl_plain_password",
    "sasl_oauthbearer_client_credentials_client_id": "sasl_oauthbearer_client_id",
    "sasl_oauthbearer_client_credentials_client_secret": "sasl_oauthbearer_client_secret",
    "https_ca_location": "sasl_oauthbearer_ssl_cafile",
    "ssl_ca_location": "ssl_cafile",
    "ssl_truststore_certificates": "ssl_cadata",
    "ssl_ca_pem": "ssl_cadata",
    "ssl_keystore_certificate_chain": "ssl_certdata",
    "ssl_certificate_pem": "ssl_certdata",
    "ssl_keystore_key": "ssl_keydata",
    "ssl_key_pem": "ssl_keydata",
    "ssl_certificate_location": "ssl_certfile",
    "ssl_key_location": "ssl_keyfile",
    "ssl_key_password": "ssl_password",
    "compression_codec": "compression_type",
    "queue_buffering_max_ms": "linger_ms",
    "fetch_wait_max_ms": "fetch_max_wait_ms",
    "metadata_broker_list": "bootstrap_servers",
    "socket_timeout_ms": "request_timeout_ms",
    "request_required_acks": "acks",
    "message_max_bytes": "max_request_size",
    "max_in_flight": "max_in_flight_requests_per_connection",
    "message_timeout_ms": "delivery_timeout_ms",
    "retry_backoff_max_ms": "retry_backoff_max_ms",
    "stats_cb": "stats_callback",
}


def endpoint_identification(v: Any) -> bool:
    """Java's and librdkafka's ``ssl.endpoint.identification.algorithm``: ``https``
    checks the broker's host name, empty or ``none`` does not; anything else is a
    ValueError (Java fails every handshake on an algorithm it does not know and
    librdkafka refuses the setting: a typo must not turn the check off)."""
    text = str(v).strip().lower()
    if text == "https":
        return True
    if text in ("", "none"):
        return False
    raise ValueError(f"ssl.endpoint.identification.algorithm must be 'https' (check the "
                     f"broker's host name against its certificate) or empty (do not), "
                     f"not {v!r}")


#: Keys whose value converts into another option.
_SPECIAL = {
    "ssl_endpoint_identification_algorithm": ("ssl_check_hostname", endpoint_identification),
    "enable_ssl_certificate_verification": ("ssl_verify", _bool),
}


#: Options whose values are secrets: ``***`` in a :class:`Settings`' repr.
SECRET_OPTIONS = frozenset({
    "sasl_plain_password", "sasl_jaas_config", "ssl_password", "ssl_truststore_password",
    "ssl_keystore_password", "ssl_keydata", "sasl_oauthbearer_client_secret",
    "sasl_oauthbearer_config"})


#: Names of settings and broker configs that hold secrets (-X sasl.password=...,
#: ssl.key.password, sasl.jaas.config, an inline key.pem): their values are never
#: printed (the CLI, a ConfigEntry's repr).
SECRET_NAME = re.compile(r"password|secret|token|jaas|credential|key[._]pem|keystore[._]key|"
                         r"keydata", re.IGNORECASE)


def check_poll_timeout(timeout_ms: Any) -> None:  # noqa: ANN401 - any value a caller passed
    """A poll's ``timeout_ms`` checked (every consumer's, blocking and asyncio): a
    number of milliseconds >= 0, not infinite; ConfigError otherwise."""
    if not isinstance(timeout_ms, (int, float)) or not 0 <= timeout_ms < math.inf:
        raise ConfigError(f"poll timeout_ms must be a number of milliseconds >= 0, "
                          f"not {timeout_ms!r}")


def is_secret_name(name: str) -> bool:
    """Whether a setting or config named ``name`` holds a secret (see SECRET_NAME)."""
    return bool(SECRET_NAME.search(name))


#: Settings that are credentials to log in with SASL: with a protocol without SASL they
#: would be dropped silently (a ConfigError instead: kproto.net.security).
SASL_CREDENTIALS = ("sasl_plain_username", "sasl_plain_password", "sasl_oauthbearer_client_id",
                    "sasl_oauthbearer_client_secret", "sasl_oauthbearer_token_endpoint_url",
                    "oauth_cb", "sasl_oauth_token_provider", "sasl_kerberos_keytab",
                    "sasl_kerberos_principal")

_MASKED = "'***'"

#: Settings a group protocol refuses when they are set explicitly with a group_id
#: (Java's ConsumerConfig CLASSIC_/CONSUMER_PROTOCOL_UNSUPPORTED_CONFIGS): the
#: consumer protocol's coordinator assigns and sets the session and heartbeat times.
PROTOCOL_REFUSES = {
    "classic": ("group_remote_assignor",),
    "consumer": ("partition_assignment_strategy", "session_timeout_ms", "heartbeat_interval_ms"),
}


def _refuse_for_group_protocol(settings: Settings) -> None:
    protocol = settings.get("group_protocol")
    if protocol is None or not settings.get("group_id"):
        return
    refused = [k for k in PROTOCOL_REFUSES[protocol] if k in settings.explicit]
    if refused:
        why = ("the coordinator assigns the partitions (group_remote_assignor names its "
               "assignor) and sets the session and heartbeat times") if protocol == "consumer" \
            else "group_remote_assignor is the consumer protocol's (group_protocol='consumer')"
        raise ConfigError(f"{', '.join(refused)} cannot be set with "
                          f"group_protocol={protocol!r}: {why}")


class Settings(dict[str, Any]):
    """Resolved client settings: a dict whose ``repr()`` and ``str()`` show the
    values of :data:`SECRET_OPTIONS` as ``***`` (what ``print(producer.config)``
    shows); the values themselves are unchanged. ``explicit``: the options the
    caller set (the others are defaults)."""

    explicit: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        shown = (f"{k!r}: {_MASKED if k in SECRET_OPTIONS and v is not None else repr(v)}"
                 for k, v in self.items())
        return "{" + ", ".join(shown) + "}"

    __str__ = __repr__


def _refuse_two_names(origin: dict[str, str], target: str, raw_key: Any,  # noqa: ANN401
                      given: Mapping[str, Any], value: Any) -> None:  # noqa: ANN401
    """One setting under two of its names (Java's, librdkafka's, kproto's) in one source
    with different values: a ConfigError naming both, never the values."""
    first = origin.setdefault(target, str(raw_key))
    if first != str(raw_key) and given.get(target) != value:
        raise ConfigError(f"config {first!r} and {str(raw_key)!r} are the same setting "
                          f"({target}) with different values: give it once (kproto does not "
                          "pick one)")


def is_text(value: str) -> bool:
    """Whether ``value`` encodes as UTF-8: a lone surrogate (undecodable bytes read with
    ``surrogateescape``) makes a UnicodeEncodeError whose repr holds all of it, so a
    secret is checked first and refused outside any handler."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def setting_key(raw: object) -> str:
    """A setting's name as written (``ssl.ca.location``, ``SSL-CA-Location``...) as
    settings are keyed here, before aliases: ``ssl_ca_location``."""
    return str(raw).strip().replace(".", "_").replace("-", "_").lower()


#: config.providers and its per-provider keys (underscored): config_providers_env_class...
_PROVIDER_KEY = re.compile(r"config_providers(?:_([a-z0-9]+)_(class|param_\w+))?")


def _provider_spec(*sources: Mapping[str, Any]) -> dict[str, str]:
    """The ``config.providers*`` settings of ``sources`` (later ones win), keyed as
    :class:`~kproto.config_providers.ConfigProviders` takes them."""
    spec: dict[str, str] = {}
    for source in sources:
        for raw_key, value in source.items():
            key = setting_key(raw_key)
            m = _PROVIDER_KEY.fullmatch(key)
            if m is None or value is None:
                continue
            name, rest = m.groups()
            if name is None and isinstance(value, Mapping):
                spec.update({str(k): str(v) for k, v in value.items()})   # resolved before
            elif name is None:
                spec["names"] = str(value)
            elif rest == "class":
                spec[f"{name}.class"] = str(value)
            else:                       # param_allowed_paths -> param.allowed.paths
                spec[f"{name}.param.{rest[len('param_'):].replace('_', '.')}"] = str(value)
    return spec


def expand_secrets(settings: Mapping[str, Any]) -> Mapping[str, Any]:
    """``settings`` with the config-provider placeholders of its secrets read (where
    a connection is made; :func:`resolve` leaves them as written so that settings
    shipped elsewhere - to Spark executors - carry no secret)."""
    spec = settings.get("config_providers")
    if not spec:
        return settings
    providers = ConfigProviders(spec)
    out = dict(settings)
    for key in SECRET_OPTIONS:
        if isinstance(out.get(key), str):
            out[key] = providers.expand(key, out[key])
    return out


def resolve(client: str, config: Mapping[str, Any] | None = None, **kwargs: Any
            ) -> Settings:
    """The full settings of a ``client`` ("producer", "consumer", "admin").

    ``config`` (dotted or underscored names) and ``kwargs`` are merged, kwargs
    winning; every option of the client is present in the result, at its
    default when not given. Raises :class:`ConfigError` for unknown keys, keys
    of another client, values that do not convert, and one setting given under
    two of its names (``sasl.username`` and ``sasl_plain_username``) with
    different values in one of the two. The result's repr hides secrets
    (:class:`Settings`).
    """
    given: dict[str, Any] = {}
    explicit: set[str] = set()
    spec = _provider_spec((config or {}), kwargs)
    providers = ConfigProviders(spec) if spec else None
    if spec:
        given["config_providers"] = spec
    for source in (config or {}), kwargs:
        origin: dict[str, str] = {}
        for raw_key, value in source.items():
            key = setting_key(raw_key)
            if _PROVIDER_KEY.fullmatch(key):
                continue                    # read above (_provider_spec)
            key = ALIASES.get(key, key)
            if providers and key not in SECRET_OPTIONS:
                value = providers.expand(str(raw_key), value)   # secrets: expand_secrets()
            if key in _SPECIAL:
                target, conv = _SPECIAL[key]
                if value is None:
                    continue                # unset: the default applies
                try:
                    flag = conv(value)
                except ValueError as exc:
                    raise ConfigError(f"config {raw_key!r}: {exc}") from None
                _refuse_two_names(origin, target, raw_key, given, flag)
                given[target] = flag
                continue
            opt = OPTIONS.get(key)
            if opt is None:
                hint = difflib.get_close_matches(key, list(OPTIONS) + list(ALIASES), n=1)
                more = f"; did you mean {hint[0]!r}?" if hint else ""
                raise ConfigError(f"unknown config {raw_key!r} for the {client}{more}")
            if client not in opt.clients:
                takers = " and ".join(sorted(opt.clients))
                raise ConfigError(f"config {raw_key!r} applies to the {takers}, "
                                  f"not the {client}")
            try:
                converted = value if value is None and opt.default is None \
                    else opt.convert(value)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"config {raw_key!r}: {exc}") from None
            _refuse_two_names(origin, key, raw_key, given, converted)
            given[key] = converted
            if converted is not None and str(converted).strip() and (
                    not isinstance(source, Settings) or key in source.explicit):
                explicit.add(key)           # a resolved Settings: only what its caller set
    settings = Settings((name, opt.default) for name, opt in OPTIONS.items()
                        if client in opt.clients)
    settings.update(given)
    settings.explicit = frozenset(explicit)
    _refuse_for_group_protocol(settings)
    if not settings.get("bootstrap_servers"):
        raise ConfigError(f"the {client} needs bootstrap_servers ('host:port,...')")
    return settings
