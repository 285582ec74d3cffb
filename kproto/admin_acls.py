"""Access control lists in Java's model: an :class:`AclBinding` binds a
:class:`ResourcePattern` (resource type, name, pattern type) to an
:class:`AccessControlEntry` (principal, host, operation, permission); an
:class:`AclBindingFilter` matches bindings (``ANY`` / None fields match anything).

>>> binding = AclBinding(ResourcePattern("topic", "events"),
...                      AccessControlEntry("User:etl", "*", "read", "allow"))
>>> admin.create_acls([binding]).all()                              # doctest: +SKIP
>>> admin.describe_acls(AclBindingFilter.ANY)                       # doctest: +SKIP
>>> admin.delete_acls([binding.to_filter()])[binding.to_filter()]   # doctest: +SKIP
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from .admin_base import AdminBase, Results, error_of
from .errors import ConfigError, KprotoError, ProtocolError
from .protocol import ApiKey

__all__ = ["ResourceType", "PatternType", "AclOperation", "AclPermissionType",
           "ResourcePattern", "AccessControlEntry", "AclBinding", "ResourcePatternFilter",
           "AccessControlEntryFilter", "AclBindingFilter", "AclsAdmin"]


class ResourceType(enum.IntEnum):
    """Java's ``ResourceType`` (the codes on the wire)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Java's ``PatternType``: a literal name, a prefix, or (filters) any / match."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """Java's ``AclOperation``."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    """Java's ``AclPermissionType``."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


E = TypeVar("E", bound=enum.IntEnum)


def _enum(kind: type[E], value: Any, what: str, *, filters: bool) -> E:
    """``value`` (a member, its name in any case, its code) as a ``kind`` member."""
    try:
        if isinstance(value, str):
            member = kind[value.strip().upper().replace("-", "_")]
        else:
            member = kind(value)
    except (KeyError, ValueError):
        member = None
    allowed = [m for m in kind if m.name != "UNKNOWN" and
               (filters or m.name not in ("ANY", "MATCH"))]
    if member not in allowed:
        raise ConfigError(f"{what} {value!r} is not one of "
                          f"{', '.join(m.name.lower() for m in allowed)}")
    return member


def _text(value: Any, what: str) -> None:
    """A binding's name, principal or host: a string (None matches any only in a filter)."""
    if not isinstance(value, str):
        raise ConfigError(f"an ACL binding's {what} is a string, not {value!r} (None "
                          "matches any only in a filter)")


@dataclass(frozen=True)
class ResourcePattern:
    """A resource (``topic``, ``group``, ``cluster``, ``transactional_id``, ...) by
    name: the literal name, or every name with this prefix (``prefixed``)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_type", _enum(
            ResourceType, self.resource_type, "resource type", filters=False))
        object.__setattr__(self, "pattern_type", _enum(
            PatternType, self.pattern_type, "pattern type", filters=False))
        _text(self.name, "resource name")


@dataclass(frozen=True)
class AccessControlEntry:
    """Who (``User:alice``), from where (``*``: any host), may or may not
    (``allow`` / ``deny``) do what (``read``, ``write``, ``describe``, ``all``...)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        object.__setattr__(self, "operation", _enum(
            AclOperation, self.operation, "operation", filters=False))
        object.__setattr__(self, "permission_type", _enum(
            AclPermissionType, self.permission_type, "permission", filters=False))
        _text(self.principal, "principal")
        _text(self.host, "host")


@dataclass(frozen=True)
class AclBinding:
    """A :class:`ResourcePattern` bound to an :class:`AccessControlEntry`."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def to_filter(self) -> AclBindingFilter:
        """The filter that matches exactly this binding."""
        p, e = self.pattern, self.entry
        return AclBindingFilter(ResourcePatternFilter(p.resource_type, p.name, p.pattern_type),
                                AccessControlEntryFilter(e.principal, e.host, e.operation,
                                                         e.permission_type))


@dataclass(frozen=True)
class ResourcePatternFilter:
    """Matches resource patterns: ``any`` type, None name (any), pattern type
    ``any``, ``match`` (the literal name, ``*`` and the prefixes that match it),
    ``literal`` or ``prefixed``."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_type", _enum(
            ResourceType, self.resource_type, "resource type", filters=True))
        object.__setattr__(self, "pattern_type", _enum(
            PatternType, self.pattern_type, "pattern type", filters=True))


@dataclass(frozen=True)
class AccessControlEntryFilter:
    """Matches entries: None principal or host matches any; operation and
    permission ``any``."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def __post_init__(self) -> None:
        object.__setattr__(self, "operation", _enum(
            AclOperation, self.operation, "operation", filters=True))
        object.__setattr__(self, "permission_type", _enum(
            AclPermissionType, self.permission_type, "permission", filters=True))


@dataclass(frozen=True)
class AclBindingFilter:
    """Matches bindings; ``AclBindingFilter.ANY`` matches every one."""

    pattern_filter: ResourcePatternFilter = field(default_factory=ResourcePatternFilter)
    entry_filter: AccessControlEntryFilter = field(default_factory=AccessControlEntryFilter)

    ANY: ClassVar[AclBindingFilter]

    def fields(self) -> dict[str, Any]:
        """The filter as DescribeAcls / DeleteAcls carry it."""
        p, e = self.pattern_filter, self.entry_filter
        return {"resource_type_filter": int(p.resource_type), "resource_name_filter": p.name,
                "pattern_type_filter": int(p.pattern_type), "principal_filter": e.principal,
                "host_filter": e.host, "operation": int(e.operation),
                "permission_type": int(e.permission_type)}


AclBindingFilter.ANY = AclBindingFilter()


def _binding(resource_type: int, name: str, pattern_type: int, a: Mapping[str, Any]
             ) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType(resource_type), name, PatternType(pattern_type)),
        AccessControlEntry(a["principal"], a["host"], AclOperation(a["operation"]),
                           AclPermissionType(a["permission_type"])))


class AclsAdmin(AdminBase):
    """The ACL calls of :class:`~kproto.admin.Admin` (any broker answers them)."""

    def describe_acls(self, acl_filter: AclBindingFilter = AclBindingFilter.ANY
                      ) -> list[AclBinding]:
        """The bindings ``acl_filter`` matches (Java's ``describeAcls``); a broker
        without an authorizer raises SecurityDisabledError."""
        body = self._controller_request(ApiKey.DESCRIBE_ACLS, acl_filter.fields())
        err = error_of(body["error_code"], body["error_message"], api="DescribeAcls")
        if err is not None:
            raise err
        return [_binding(r["resource_type"], r["resource_name"], r.get("pattern_type", 3), a)
                for r in body["resources"] for a in r["acls"]]

    def create_acls(self, bindings: Iterable[AclBinding]) -> Results[AclBinding, None]:
        """Create each binding (Java's ``createAcls``); each succeeds or fails on its own."""
        wanted = list(dict.fromkeys(bindings))
        if not wanted:
            return Results({})
        body = self._controller_request(ApiKey.CREATE_ACLS, {"creations": [
            {"resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
             "resource_pattern_type": int(b.pattern.pattern_type),
             "principal": b.entry.principal, "host": b.entry.host,
             "operation": int(b.entry.operation),
             "permission_type": int(b.entry.permission_type)} for b in wanted]})
        return Results(*_in_order(wanted, body["results"], "CreateAcls", lambda r: None))

    def delete_acls(self, filters: Iterable[AclBindingFilter]
                    ) -> Results[AclBindingFilter, list[AclBinding]]:
        """Delete the bindings each filter matches (Java's ``deleteAcls``): per
        filter, the bindings it deleted, or its error."""
        wanted = list(dict.fromkeys(filters))
        if not wanted:
            return Results({})
        body = self._controller_request(ApiKey.DELETE_ACLS,
                                        {"filters": [f.fields() for f in wanted]})

        def deleted(r: Mapping[str, Any]) -> list[AclBinding]:
            for m in r["matching_acls"]:
                err = error_of(m["error_code"], m["error_message"], api="DeleteAcls")
                if err is not None:
                    raise err
            return [_binding(m["resource_type"], m["resource_name"], m.get("pattern_type", 3),
                             m) for m in r["matching_acls"]]

        return Results(*_in_order(wanted, body["filter_results"], "DeleteAcls", deleted))


K = TypeVar("K")
V = TypeVar("V")


def _in_order(wanted: list[K], results: list[dict[str, Any]], api: str, value: Any
              ) -> tuple[dict[K, V], dict[K, Exception]]:
    """The answers of a request with one result per item, in the request's order."""
    if len(results) != len(wanted):
        raise ProtocolError(f"{api}: {len(results)} results for {len(wanted)} items")
    values: dict[K, V] = {}
    errors: dict[K, Exception] = {}
    for item, r in zip(wanted, results, strict=True):
        err = error_of(r["error_code"], r["error_message"], api=api)
        try:
            if err is not None:
                raise err
            values[item] = value(r)
        except KprotoError as exc:        # the item's error, kept for it
            errors[item] = exc
    return values, errors
