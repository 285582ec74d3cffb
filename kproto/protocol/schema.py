"""The schema DSL: how kproto declares every Kafka message, as data.

A message is declared as indented text, one field a line::

    name            type        versions    [options...]

* ``type`` is a primitive (``int8 int16 int32 int64 uint16 uint32 float64 bool
  string bytes records uuid``), an array of a primitive (``[int32]``,
  ``[string]``), an array of structs (``[]``) or a struct (``{}``). The fields
  of a struct or struct array follow on the next lines, indented further.
* ``versions`` is ``N+``, ``N-M``, ``N`` or ``none``: the message versions in
  which the field is on the wire.
* options:

  ``null`` / ``null=RANGE``  nullable (in every version / in RANGE)
  ``tag=N``                  a tagged field (KIP-482) with tag N, in the
                             flexible versions where the field exists
  ``default=V``              ``-1``, ``0x7fffffff``, ``true``, ``null``, ``'text'``
  ``ignorable``              may be dropped silently when writing a version
                             that lacks it (otherwise a non-default value
                             raises :class:`~kproto.errors.EncodeError`)
  ``noflex``                 never compact, even in flexible versions (only
                             the request header's client_id)

Field names are the snake_case of the official Kafka field names, so the
protocol guide and the Kafka JSON definitions map one to one onto kproto.
Anything after ``#`` on a line is a comment.

Example::

    Api(3, "Metadata", "0-13", flexible="9+", request='''
        topics []                        0+    null=1+
          topic_id          uuid         10+
          name              string       0+    null=10+
        allow_auto_topic_creation bool   4+    default=true
    ''', response='''...''')
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

PRIMITIVES = frozenset(
    "int8 int16 int32 int64 uint16 uint32 float64 bool string bytes records uuid".split()
)
#: Largest version number kproto will ever consider (Kafka's "N+" upper bound).
MAX_VERSION = 0x7FFF

_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True)
class VersionRange:
    """An inclusive range of versions; ``lo > hi`` means empty (``none``)."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    def __bool__(self) -> bool:
        return self.lo <= self.hi

    def __str__(self) -> str:
        if not self:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return f"{self.lo}" if self.lo == self.hi else f"{self.lo}-{self.hi}"


NO_VERSIONS = VersionRange(0, -1)
ALL_VERSIONS = VersionRange(0, MAX_VERSION)


@dataclass(frozen=True)
class Field:
    """One field of a message or struct, for all versions."""

    name: str
    type: str  #: a primitive, "array" (of ``item``), "struct" or "struct_array"
    versions: VersionRange
    nullable: VersionRange = NO_VERSIONS
    tag: int | None = None
    default: Any = None  #: the literal default; use :meth:`default_value`
    has_default: bool = False
    ignorable: bool = False
    noflex: bool = False
    item: str | None = None  #: primitive item type of a primitive array
    fields: tuple[Field, ...] = ()

    def default_value(self) -> Any:
        """A fresh default value (Kafka's rules: 0, false, "", [], zero UUID)."""
        if self.has_default:
            if self.default is None:
                return None
            if self.type == "struct":
                return _struct_default(self.fields)
            return self.default
        if self.type == "struct":
            return _struct_default(self.fields)
        return _TYPE_DEFAULTS[self.type]() if self.type in _TYPE_DEFAULTS else None


def _struct_default(fields: tuple[Field, ...]) -> dict[str, Any]:
    return {f.name: f.default_value() for f in fields}


_TYPE_DEFAULTS: dict[str, Any] = {
    "int8": int, "int16": int, "int32": int, "int64": int, "uint16": int, "uint32": int,
    "float64": float, "bool": bool, "string": str, "bytes": bytes, "records": lambda: None,
    "uuid": lambda: _ZERO_UUID, "array": list, "struct_array": list,
}


@dataclass(frozen=True)
class Message:
    """A request, response or other top-level message declared in the DSL."""

    name: str
    versions: VersionRange
    flexible: VersionRange
    fields: tuple[Field, ...]

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


@dataclass(frozen=True)
class Api:
    """An API key with its request and response messages."""

    key: int
    name: str
    request: Message
    response: Message
    versions: VersionRange = field(init=False)
    flexible: VersionRange = field(init=False)

    def __init__(
        self, key: int, name: str, versions: str, *, flexible: str = "none",
        request: str, response: str,
    ) -> None:
        vr, fl = VersionRange.parse(versions), VersionRange.parse(flexible)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "versions", vr)
        object.__setattr__(self, "flexible", fl)
        for kind, text in (("request", request), ("response", response)):
            object.__setattr__(self, kind, message(name + kind.title(), versions, flexible, text))


def message(name: str, versions: str, flexible: str, text: str) -> Message:
    """Parse DSL text into a :class:`Message`."""
    return Message(name, VersionRange.parse(versions), VersionRange.parse(flexible),
                   parse_fields(text, name))


def parse_fields(text: str, where: str = "<schema>") -> tuple[Field, ...]:
    """Parse the indented field lines of the DSL (see the module docstring)."""
    lines: list[tuple[int, int, list[str]]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        body = raw.split("#", 1)[0].rstrip()
        if body.strip():
            lines.append((lineno, len(body) - len(body.lstrip()), body.split()))
    fields, rest = _parse_block(lines, 0, where)
    if rest != len(lines):
        raise ValueError(f"{where}: line {lines[rest][0]}: bad indentation")
    return fields


def _parse_block(lines: list[tuple[int, int, list[str]]], i: int, where: str
                 ) -> tuple[tuple[Field, ...], int]:
    out: list[Field] = []
    if i >= len(lines):
        return (), i
    indent = lines[i][1]
    while i < len(lines) and lines[i][1] == indent:
        lineno, _, tokens = lines[i]
        i += 1
        children: tuple[Field, ...] = ()
        if i < len(lines) and lines[i][1] > indent:
            children, i = _parse_block(lines, i, where)
        try:
            out.append(_parse_field(tokens, children))
        except (ValueError, IndexError) as exc:
            raise ValueError(f"{where}: line {lineno}: {exc}: {' '.join(tokens)!r}") from None
    if i < len(lines) and lines[i][1] > indent:
        raise ValueError(f"{where}: line {lines[i][0]}: unexpected indentation")
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: duplicate field names in {names}")
    return tuple(out), i


def _parse_field(tokens: list[str], children: tuple[Field, ...]) -> Field:
    name, typ, vers, *opts = tokens
    kw: dict[str, Any] = {}
    item = None
    if typ == "[]":
        kind = "struct_array"
    elif typ == "{}":
        kind = "struct"
    elif typ.startswith("[") and typ.endswith("]"):
        kind, item = "array", typ[1:-1]
        if item not in PRIMITIVES:
            raise ValueError(f"unknown array item type {item!r}")
    elif typ in PRIMITIVES:
        kind = typ
    else:
        raise ValueError(f"unknown type {typ!r}")
    if (kind in ("struct", "struct_array")) != bool(children):
        raise ValueError("structs need indented fields; other types must not have any")
    for opt in opts:
        key, _, value = opt.partition("=")
        if key == "null":
            kw["nullable"] = VersionRange.parse(value) if value else ALL_VERSIONS
        elif key == "tag":
            kw["tag"] = int(value)
        elif key == "default":
            kw["default"], kw["has_default"] = _literal(value, kind), True
        elif key in ("ignorable", "noflex") and not value:
            kw[key] = True
        else:
            raise ValueError(f"unknown option {opt!r}")
    return Field(name, kind, VersionRange.parse(vers), item=item, fields=children, **kw)


def _literal(text: str, kind: str) -> Any:
    if text == "null":
        return None
    if text in ("true", "false"):
        return text == "true"
    if text[:1] in "'\"":
        return text[1:-1]
    if kind == "float64":
        return float(text)
    return int(text, 0)
