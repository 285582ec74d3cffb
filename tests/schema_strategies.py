"""Hypothesis strategies that build random instances of any declared message version."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from kproto.protocol.schema import Field, Message

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
}
# Non-ASCII on purpose: lengths are in UTF-8 bytes, not characters.
_TEXT = st.text(alphabet=st.sampled_from("abcXYZ-._é漢🙂 0"), max_size=8)


def primitive(typ: str) -> st.SearchStrategy[Any]:
    if typ in _INT_RANGES:
        lo, hi = _INT_RANGES[typ]
        return st.integers(lo, hi)
    if typ == "bool":
        return st.booleans()
    if typ == "float64":
        return st.floats(allow_nan=False)
    if typ == "string":
        return _TEXT
    if typ in ("bytes", "records"):
        return st.binary(max_size=12)
    if typ == "uuid":
        return st.builds(lambda i: uuid.UUID(int=i), st.integers(0, 2**128 - 1))
    raise AssertionError(typ)


def field_value(f: Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if f.type == "struct_array":
        base: st.SearchStrategy[Any] = st.lists(struct(f.fields, version, flexible), max_size=2)
    elif f.type == "array":
        assert f.item is not None
        base = st.lists(primitive(f.item), max_size=3)
    elif f.type == "struct":
        base = struct(f.fields, version, flexible)
    else:
        base = primitive(f.type)
    if version in f.nullable:
        return st.one_of(st.none(), base)
    return base


def on_wire(f: Field, version: int, flexible: bool) -> bool:
    return version in f.versions and (f.tag is None or flexible)


def struct(fields: tuple[Field, ...], version: int, flexible: bool) -> st.SearchStrategy[dict]:
    required = {f.name: field_value(f, version, flexible) for f in fields
                if on_wire(f, version, flexible) and f.tag is None}
    optional = {f.name: field_value(f, version, flexible) for f in fields
                if on_wire(f, version, flexible) and f.tag is not None}
    return st.fixed_dictionaries(required, optional=optional)


def instance(message: Message, version: int) -> st.SearchStrategy[dict]:
    """Random field values for ``message`` at ``version`` (only fields on the wire)."""
    return struct(message.fields, version, version in message.flexible)


def with_defaults(fields: tuple[Field, ...], value: dict, version: int, flexible: bool) -> dict:
    """What decoding should give back for ``value``: every field, defaults filled in."""
    out = {}
    for f in fields:
        if f.name not in value or not on_wire(f, version, flexible):
            out[f.name] = f.default_value()
            continue
        v = value[f.name]
        if f.type == "struct" and v is not None:
            v = with_defaults(f.fields, v, version, flexible)
        elif f.type == "struct_array" and v is not None:
            v = [with_defaults(f.fields, x, version, flexible) for x in v]
        out[f.name] = v
    return out
