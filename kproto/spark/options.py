"""The "kproto" source's options: client settings from ``kafka.``-prefixed
options, option values, and the starting/ending offsets checked as Spark's
Kafka source checks them (no pyspark here: it runs on the driver before any
reader exists)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import ALIASES, OPTIONS, resolve, setting_key
from ..errors import ConfigError
from ..structs import EARLIEST, LATEST

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, "
              "timestamp timestamp, timestampType int")
HEADERS_DDL = ", headers array<struct<key: string, value: binary>>"

_CONSUMER_KEYS = {"group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
                  "value.deserializer", "interceptor.classes"}


def client_settings(options: Mapping[str, str], client: str = "consumer") -> dict[str, Any]:
    """kproto ``client`` settings from the ``kafka.``-prefixed options (Kafka names);
    settings Spark's source refuses (group.id...) are refused here too."""
    raw: dict[str, Any] = {}
    for key, value in options.items():
        low = key.lower()
        if not low.startswith("kafka."):
            if "." in key and _is_client_setting(key):
                raise ConfigError(f"option {key!r} is a Kafka client setting: give it as "
                                  f"'kafka.{key}' (only kafka.-prefixed options reach the "
                                  "client, as in Spark's Kafka source, which would ignore it)")
            continue
        name = key[len("kafka."):]
        if _norm(name) in {_norm(k) for k in _CONSUMER_KEYS}:
            raise ConfigError(f"option {key!r} is not supported: the source manages offsets "
                              "itself and returns bytes")
        raw[name] = value
    given = {_norm(k) for k in raw}     # (kafka.client.id and kafka.client_id alike)
    if "bootstrap_servers" not in given:
        raise ConfigError("option 'kafka.bootstrap.servers' is required")
    defaults = {"client.id": "kproto-spark"}
    if client == "consumer":        # reading commits and creates nothing
        defaults.update({"enable.auto.commit": "false", "allow.auto.create.topics": "false"})
    raw.update({k: v for k, v in defaults.items() if _norm(k) not in given})
    return resolve(client, raw)


def _norm(name: str) -> str:
    """A setting's name as resolve() sees it (``client.id``, ``client_id``: one)."""
    return setting_key(name)


def _is_client_setting(key: str) -> bool:
    """Whether ``key`` (a source or sink option without the ``kafka.`` prefix) names a
    client setting (``security.protocol``, ``sasl.jaas.config``...): given so it would
    be dropped, and a job meant to use TLS and SASL would connect without them."""
    name = _norm(key)
    return ALIASES.get(name, name) in OPTIONS or name in (
        "ssl_endpoint_identification_algorithm", "enable_ssl_certificate_verification")


def settings_for(settings: Mapping[str, Any], client: str) -> dict[str, Any]:
    """The part of resolved client ``settings`` that ``client`` takes (connection,
    security...): an admin made from a producer's or a consumer's settings."""
    return {k: v for k, v in settings.items() if k in OPTIONS and client in OPTIONS[k].clients}


def _option(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    # Spark passes a case-insensitive mapping; plain dicts (tests) are matched by hand
    try:
        value = options.get(name)
    except Exception:  # noqa: BLE001 - any mapping
        value = None
    if value is None:
        lowered = {k.lower(): v for k, v in options.items()}
        value = lowered.get(name.lower())
    return default if value is None else str(value)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _option(options, name)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"option {name!r} must be true or false, not {value!r}")
    return value.strip().lower() == "true"


def _positive(options: Mapping[str, str], name: str) -> int:
    """An optional positive integer option (0 when absent), refused otherwise as Spark does."""
    value = _option(options, name)
    if value is None:
        return 0
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number <= 0:
        raise ConfigError(f"{name} must be positive, not {value!r}")
    return number


# --------------------------------------------------------------------------- offset options


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends, as one option gave it (Spark's
    ``KafkaOffsetRangeLimit``). ``kind``: ``earliest``, ``latest``, ``offsets``
    (``table``: offset per partition, -2 earliest, -1 latest), ``timestamps``
    (``table``: milliseconds per partition) or ``timestamp`` (``ms`` for every
    partition); ``option`` is the option it came from."""

    kind: str
    option: str
    table: Mapping[tuple[str, int], int] = field(default_factory=dict)
    ms: int = 0


def _tp_name(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"          # Kafka's TopicPartition.toString, as Spark prints it


def _tp_names(tps: Iterable[tuple[str, int]]) -> str:
    return "[" + ", ".join(_tp_name(tp) for tp in sorted(tps)) + "]"


def _offset_spec(options: Mapping[str, str], which: str, default: str) -> OffsetSpec:
    """The ``which`` (starting/ending) position, in Spark's order of preference:
    ``{which}Timestamp``, then ``{which}OffsetsByTimestamp``, then ``{which}Offsets``."""
    name = f"{which}Timestamp"
    text = _option(options, name)
    if text is not None:
        try:
            ms = int(text.strip())
        except ValueError:
            raise ConfigError(f"option {name!r}: expected a single long value, got {text!r}") \
                from None
        if ms < 0:
            raise ConfigError(f"option {name!r}: {ms} is not a time (milliseconds since the "
                              "epoch, >= 0)")
        return OffsetSpec("timestamp", name, ms=ms)
    name = f"{which}OffsetsByTimestamp"
    text = _option(options, name)
    if text is not None:
        table = _json_offsets(text, name)
        for tp, ms in sorted(table.items()):
            if ms < 0:      # -1/-2 would silently mean latest/earliest in ListOffsets
                raise ConfigError(f"option {name!r}: the time for {_tp_name(tp)} is {ms}, not "
                                  "milliseconds since the epoch (>= 0)")
        return OffsetSpec("timestamps", name, table)
    name = f"{which}Offsets"
    text = _option(options, name)
    if text is None or text.strip().lower() in ("earliest", "latest"):
        return OffsetSpec((text or default).strip().lower(), name)
    table = _json_offsets(text, name)
    for tp, offset in sorted(table.items()):
        if offset < EARLIEST:
            raise ConfigError(f"option {name!r}: {offset} for {_tp_name(tp)} is not an offset "
                              "(>= 0, -2 for earliest, -1 for latest)")
    return OffsetSpec("offsets", name, table)


def offset_options(options: Mapping[str, str], streaming: bool
                   ) -> tuple[OffsetSpec, OffsetSpec | None]:
    """Parse and check the starting/ending options as Spark's Kafka source does
    (``validateBatchOptions``, ``validateStreamOptions``,
    ``checkOffsetLimitValidity``): the one check both readers make.

    Returns ``(start, end)``; ``end`` is None for a stream, which has no end.
    Whether a JSON names exactly the partitions read is checked when they are
    known (:meth:`_Planner.resolve`)."""
    if streaming:
        if _option(options, "endingOffsets") is not None:
            raise ConfigError("ending offset not valid in streaming queries "
                              "(option 'endingOffsets')")
        for name in ("endingOffsetsByTimestamp", "endingTimestamp"):
            if _option(options, name) is not None:
                raise ConfigError(f"ending timestamp not valid in streaming queries "
                                  f"(option {name!r})")
        return _offset_spec(options, "starting", "latest"), None
    start = _offset_spec(options, "starting", "earliest")
    end = _offset_spec(options, "ending", "latest")
    if start.kind == "latest":
        raise ConfigError(f"starting offset can't be latest for batch queries on Kafka "
                          f"(option {start.option!r})")
    if end.kind == "earliest":
        raise ConfigError(f"ending offset can't be earliest for batch queries on Kafka "
                          f"(option {end.option!r})")
    if start.kind == "offsets":
        for tp, offset in sorted(start.table.items()):
            if offset == LATEST:
                raise ConfigError(f"startingOffsets for {_tp_name(tp)} can't be latest for "
                                  "batch queries on Kafka")
    if end.kind == "offsets":
        for tp, offset in sorted(end.table.items()):
            if offset == EARLIEST:
                raise ConfigError(f"ending offset for {_tp_name(tp)} can't be earliest for "
                                  "batch queries on Kafka")
    if start.kind == end.kind and start.kind in ("offsets", "timestamps"):
        if set(start.table) != set(end.table):
            raise ConfigError(
                f"The specified start offset and end offset should have the same "
                f"topic-partitions. Topic-partitions for start offset ({start.option}): "
                f"{_tp_names(start.table)}, topic-partitions for end offset ({end.option}): "
                f"{_tp_names(end.table)}.")
        what = "offset" if start.kind == "offsets" else "timestamp"
        for tp in sorted(start.table):
            first, last = start.table[tp], end.table[tp]
            if first > last >= 0:       # -1/-2 are resolved later, not compared
                raise ConfigError(f"The specified start {what} {first} is greater than the end "
                                  f"{what} {last} for topic {tp[0]} partition {tp[1]} "
                                  f"(options {start.option!r}, {end.option!r}).")
    return start, end


def _check_names_every_partition(spec: OffsetSpec, tps: Iterable[tuple[str, int]]) -> None:
    """A JSON of offsets or times must name exactly the partitions read (Spark's
    ``KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED``): a partition left out would
    otherwise be read from some default the user did not choose."""
    given, assigned = set(spec.table), set(tps)
    if given == assigned:
        return
    parts = []
    if assigned - given:
        parts.append(f"missing {_tp_names(assigned - given)}")
    if given - assigned:
        parts.append(f"not read by this query {_tp_names(given - assigned)}")
    hint = " Use -1 for latest, -2 for earliest." if spec.kind == "offsets" else ""
    raise ConfigError(f"If {spec.option} contains specific offsets, you must specify all "
                      f"TopicPartitions ({'; '.join(parts)}).{hint} Specified: "
                      f"{_tp_names(given)} Assigned: {_tp_names(assigned)}")


def _json_offsets(text: str, what: str) -> dict[tuple[str, int], int]:
    try:
        table = json.loads(text)
        return {(str(t), int(p)): int(o) for t, parts in table.items()
                for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        shape = "'earliest', 'latest' or JSON" if what.endswith("Offsets") else "JSON"
        raise ConfigError(f"option {what!r} must be {shape} like "
                          f'{{"topic": {{"0": 23}}}}, not {text!r}') from exc
