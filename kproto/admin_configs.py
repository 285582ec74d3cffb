"""Configs of topics and brokers, as Java's Admin has them: ``describe_configs``,
``alter_configs`` (a resource's whole set of dynamic configs replaced) and
``incremental_alter_configs`` (KIP-339: one key at a time).

A topic's configs are asked of any broker, a broker's of that broker (Java's
routing); each resource succeeds or fails on its own (:class:`~kproto.admin_base.Results`).

>>> admin.describe_configs([("topic", "events")])[("topic", "events")]["retention.ms"].value
...                                                                  # doctest: +SKIP
>>> admin.incremental_alter_configs({("topic", "events"): [AlterConfigOp("retention.ms",
...     "3600000")]}).all()                                          # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .admin_base import AdminBase, Results, error_of, ids
from .config import is_secret_name
from .errors import ConfigError, ProtocolError
from .protocol import ApiKey

__all__ = ["ConfigResource", "ConfigEntry", "ConfigSynonym", "AlterConfigOp", "ConfigsAdmin",
           "RESOURCE_TYPES", "CONFIG_SOURCES"]

#: Java's ConfigResource.Type codes, by kproto's (lower-case) name.
RESOURCE_TYPES = {"topic": 2, "broker": 4, "broker_logger": 8, "client_metrics": 16,
                  "group": 32}
_TYPE_NAMES = {v: k for k, v in RESOURCE_TYPES.items()}
#: Java's ConfigEntry.ConfigSource names, by code.
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                  5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                  7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG"}
#: Java's ConfigEntry.ConfigType names, by code.
CONFIG_TYPES = {0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG",
                6: "DOUBLE", 7: "LIST", 8: "CLASS", 9: "PASSWORD"}
_OPS = {"set": 0, "delete": 1, "append": 2, "subtract": 3}


class ConfigResource(NamedTuple):
    """A topic (``("topic", "events")``), a broker (``("broker", "1")``; ``""`` the
    cluster-wide default), a broker's loggers, client metrics or a group. Plain
    ``(type, name)`` tuples are accepted, and equal, wherever one is."""

    type: str
    name: str

    @classmethod
    def of(cls, value: Any) -> ConfigResource:
        """``value`` (a ConfigResource or a ``(type, name)`` pair), checked."""
        try:
            kind, name = value
        except (TypeError, ValueError):
            raise ConfigError(f"a config resource is (type, name), not {value!r}") from None
        kind = str(kind).lower()
        if kind not in RESOURCE_TYPES:
            raise ConfigError(f"unknown config resource type {kind!r}: use one of "
                              f"{', '.join(RESOURCE_TYPES)}")
        if kind in ("broker", "broker_logger") and str(name) and not str(name).isdigit():
            raise ConfigError(f"a {kind} resource is named by the broker's id, not {name!r}")
        return cls(kind, str(name))


@dataclass(frozen=True)
class ConfigSynonym:
    """A value a config overrides (or is overridden by), and where it comes from."""

    name: str
    value: str | None
    source: str


@dataclass(frozen=True)
class ConfigEntry:
    """One config of a resource (Java's ``ConfigEntry``). A sensitive value
    (a password) is never sent by the broker: ``value`` is None."""

    name: str
    value: str | None
    #: Where the value comes from: DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG,
    #: DEFAULT_CONFIG, ... (Java's ConfigSource names).
    source: str = "UNKNOWN"
    is_sensitive: bool = False
    is_read_only: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    #: BOOLEAN, STRING, INT, LONG, LIST, PASSWORD... (DescribeConfigs v3+; else UNKNOWN).
    type: str = "UNKNOWN"
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source == "DEFAULT_CONFIG"

    def __repr__(self) -> str:
        # a secret's value never in a repr, also when the broker did not flag it
        # sensitive (Tansu); .value still holds what the broker answered
        hidden = self.is_sensitive or is_secret_name(self.name)
        return (f"ConfigEntry(name={self.name!r}, value="
                f"{'***' if hidden and self.value is not None else repr(self.value)}, "
                f"source={self.source!r}, is_sensitive={self.is_sensitive}, "
                f"is_read_only={self.is_read_only}, type={self.type!r})")


@dataclass(frozen=True)
class AlterConfigOp:
    """One change of :meth:`ConfigsAdmin.incremental_alter_configs`: ``set`` a
    value, ``delete`` it (back to the default), ``append`` to or ``subtract`` from
    a list (Java's ``AlterConfigOp.OpType``)."""

    name: str
    value: str | None = None
    op: str = "set"

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ConfigError(f"unknown config operation {self.op!r} for {self.name!r}: use "
                              f"one of {', '.join(_OPS)}")
        if self.op != "delete" and self.value is None:
            raise ConfigError(f"config operation {self.op} of {self.name!r} needs a value")
        _config_pair(self.name, self.value)


def _entry(c: Mapping[str, Any], version: int) -> ConfigEntry:
    if version == 0:        # v0: is_default instead of a source
        source = "DEFAULT_CONFIG" if c.get("is_default") else "UNKNOWN"
    else:
        source = CONFIG_SOURCES.get(c["config_source"], "UNKNOWN")
    return ConfigEntry(
        c["name"], None if c["is_sensitive"] else c["value"], source, c["is_sensitive"],
        c["read_only"], tuple(ConfigSynonym(s["name"], None if c["is_sensitive"] else s["value"],
                                            CONFIG_SOURCES.get(s["source"], "UNKNOWN"))
                              for s in c.get("synonyms") or ()),
        CONFIG_TYPES.get(c.get("config_type", 0), "UNKNOWN"), c.get("documentation"))


def _config_pair(name: Any, value: Any) -> None:
    """A config's name (a non-empty string) and value (a string, or None)."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a config name is a non-empty string, not {name!r}")
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"config {name!r}: values are strings as Kafka has them "
                          f"(str({value!r})), not {type(value).__name__}")


def _ops(ops: Any) -> list[AlterConfigOp]:
    """A resource's changes: AlterConfigOps (one alone too), nothing else."""
    found = [ops] if isinstance(ops, AlterConfigOp) else list(ops)
    for op in found:
        if not isinstance(op, AlterConfigOp):
            raise ConfigError(f"incremental_alter_configs takes AlterConfigOp(name, value, op) "
                              f"changes, not {op!r}")
    return found


def _answered(res: Mapping[str, Any]) -> tuple[ConfigResource, Exception | None]:
    """The resource of one result of a configs answer, and its error (None: none)."""
    r = ConfigResource(_TYPE_NAMES.get(res["resource_type"], "unknown"), res["resource_name"])
    return r, error_of(res["error_code"], res["error_message"], resource=f"{r.type} {r.name!r}")


def _missing(wanted: list[ConfigResource], answered: Any,
             errors: dict[ConfigResource, Exception]) -> dict[ConfigResource, Exception]:
    """``errors``, and an error for each resource the broker's answer left out."""
    for r in wanted:
        if r not in answered and r not in errors:
            errors[r] = ProtocolError(f"the broker's answer says nothing of {r.type} {r.name!r}")
    return errors


class ConfigsAdmin(AdminBase):
    """The config calls of :class:`~kproto.admin.Admin`."""

    def describe_configs(self, resources: Iterable[Any], *,
                         keys: Iterable[str] | None = None, include_synonyms: bool = False,
                         include_documentation: bool = False
                         ) -> Results[ConfigResource, dict[str, ConfigEntry]]:
        """Each resource's configs (name -> :class:`ConfigEntry`), or only ``keys``;
        with ``include_synonyms``, the values each one overrides. A resource that
        does not exist, or that the broker refuses, raises its error on access."""
        wanted = [ConfigResource.of(r) for r in resources]
        names = None if keys is None else ids(keys)

        def fields(rs: list[ConfigResource]) -> dict[str, Any]:
            return {"resources": [{"resource_type": RESOURCE_TYPES[r.type],
                                   "resource_name": r.name, "configuration_keys": names}
                                  for r in rs],
                    "include_synonyms": include_synonyms,
                    "include_documentation": include_documentation}

        values: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        errors: dict[ConfigResource, Exception] = {}
        for body, version in self._per_broker(ApiKey.DESCRIBE_CONFIGS, wanted, fields, errors):
            for res in body["results"]:
                r, err = _answered(res)
                if err is not None:
                    errors[r] = err
                else:
                    values[r] = {c["name"]: _entry(c, version) for c in res["configs"]}
        return Results(values, _missing(wanted, values, errors))

    def alter_configs(self, configs: Mapping[Any, Mapping[str, str | None]], *,
                      validate_only: bool = False) -> Results[ConfigResource, None]:
        """Replace each resource's dynamic configs with ``{name: value}`` (a config
        left out goes back to its default: Java's deprecated ``alterConfigs``;
        :meth:`incremental_alter_configs` changes one key at a time)."""
        given = {ConfigResource.of(r): dict(c) for r, c in configs.items()}
        for c in given.values():
            for k, v in c.items():
                _config_pair(k, v)

        def fields(rs: list[ConfigResource]) -> dict[str, Any]:
            return {"resources": [{"resource_type": RESOURCE_TYPES[r.type],
                                   "resource_name": r.name,
                                   "configs": [{"name": k, "value": v}
                                               for k, v in given[r].items()]} for r in rs],
                    "validate_only": validate_only}

        return self._altered(ApiKey.ALTER_CONFIGS, list(given), fields)

    def incremental_alter_configs(self, changes: Mapping[Any, Iterable[AlterConfigOp]], *,
                                  validate_only: bool = False
                                  ) -> Results[ConfigResource, None]:
        """Apply each resource's :class:`AlterConfigOp` s (set, delete, append,
        subtract: KIP-339; other configs keep their values)."""
        given = {ConfigResource.of(r): _ops(ops) for r, ops in changes.items()}

        def fields(rs: list[ConfigResource]) -> dict[str, Any]:
            return {"resources": [{"resource_type": RESOURCE_TYPES[r.type],
                                   "resource_name": r.name,
                                   "configs": [{"name": o.name, "config_operation": _OPS[o.op],
                                                "value": o.value} for o in given[r]]}
                                  for r in rs],
                    "validate_only": validate_only}

        return self._altered(ApiKey.INCREMENTAL_ALTER_CONFIGS, list(given), fields)

    # -- plumbing

    def _altered(self, api_key: int, wanted: list[ConfigResource], fields: Any
                 ) -> Results[ConfigResource, None]:
        errors: dict[ConfigResource, Exception] = {}
        done: set[ConfigResource] = set()
        for body, _ in self._per_broker(api_key, wanted, fields, errors):
            for res in body["responses"]:
                r, err = _answered(res)
                if err is not None:
                    errors[r] = err
                else:
                    done.add(r)
        return Results(dict.fromkeys(done), _missing(wanted, done, errors))

    def _per_broker(self, api_key: int, wanted: list[ConfigResource], fields: Any,
                    errors: dict[ConfigResource, Exception]
                    ) -> list[tuple[dict[str, Any], int]]:
        """One request per broker: a broker's (and its loggers') resources to it,
        the others to the controller (any broker); a broker that fails fails its
        resources (in ``errors``)."""
        meta = self._cluster.maybe_refresh()
        anyone = meta.controller_id if meta.controller_id in meta.brokers else min(meta.brokers)
        by_node: dict[int, list[ConfigResource]] = {}
        for r in wanted:
            if r.type in ("broker", "broker_logger") and r.name:
                if int(r.name) not in meta.brokers:
                    errors[r] = ConfigError(f"{r.type} {r.name}: no such broker in the cluster "
                                            f"(brokers: {sorted(meta.brokers)})")
                    continue
                by_node.setdefault(int(r.name), []).append(r)
            else:
                by_node.setdefault(anyone, []).append(r)
        answers = self._cluster.send_many({n: [(api_key, fields(rs))]
                                           for n, rs in by_node.items()})
        out = []
        for node, result in sorted(answers.items()):
            if isinstance(result, Exception):
                errors.update(dict.fromkeys(by_node[node], result))
                continue
            out.append((result[0].body, result[0].request.version))
        return out
