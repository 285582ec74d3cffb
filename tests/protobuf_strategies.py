"""Hypothesis strategies for random Protobuf message types, built as FileDescriptorProtos
(proto2 and proto3: every scalar type, enums with aliases and negative numbers, nested
messages, repeated fields packed or not, maps of every key type, oneofs, proto3
optional, proto2 required, groups, well-known types), random messages of them filled
through the runtime, and :func:`expected`: a message as kproto's Arrow type holds it,
read field by field through the runtime's reflection (``ListFields``)."""

from __future__ import annotations

import math
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import strategies as st

F = descriptor_pb2.FieldDescriptorProto
SCALARS = [F.TYPE_DOUBLE, F.TYPE_FLOAT, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_INT32,
           F.TYPE_FIXED64, F.TYPE_FIXED32, F.TYPE_BOOL, F.TYPE_STRING, F.TYPE_BYTES,
           F.TYPE_UINT32, F.TYPE_SFIXED32, F.TYPE_SFIXED64, F.TYPE_SINT32, F.TYPE_SINT64]
KEYS = [F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64, F.TYPE_SINT32,
        F.TYPE_SINT64, F.TYPE_FIXED32, F.TYPE_FIXED64, F.TYPE_SFIXED32, F.TYPE_SFIXED64,
        F.TYPE_BOOL, F.TYPE_STRING]
NUMERIC = set(SCALARS) - {F.TYPE_STRING, F.TYPE_BYTES}
WELL_KNOWN = {"Timestamp": "timestamp", "Duration": "duration", "Int64Value": "wrappers",
              "UInt32Value": "wrappers", "StringValue": "wrappers", "BytesValue": "wrappers",
              "DoubleValue": "wrappers", "Any": "any", "FieldMask": "field_mask",
              "Empty": "empty"}
#: Field names: Python keywords and builtins, names of the runtime's message methods.
NAMES = ["a", "b", "x_y", "from", "class", "in", "lambda", "None", "True", "items", "keys",
         "values", "id", "type", "value", "key", "sum", "async", "is_", "z9"]
RANGES = {F.TYPE_INT32: (-(2**31), 2**31 - 1), F.TYPE_SINT32: (-(2**31), 2**31 - 1),
          F.TYPE_SFIXED32: (-(2**31), 2**31 - 1), F.TYPE_UINT32: (0, 2**32 - 1),
          F.TYPE_FIXED32: (0, 2**32 - 1), F.TYPE_INT64: (-(2**63), 2**63 - 1),
          F.TYPE_SINT64: (-(2**63), 2**63 - 1), F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
          F.TYPE_UINT64: (0, 2**64 - 1), F.TYPE_FIXED64: (0, 2**64 - 1)}


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


@st.composite
def files(draw: Any) -> tuple[descriptor_pb2.FileDescriptorProto, str]:
    """A file with a message type to read (and the full name of it): a decoy message
    first (so the message indexes are not 0), then ``M`` with random fields."""
    syntax = draw(st.sampled_from(["proto2", "proto3"]))
    proto = descriptor_pb2.FileDescriptorProto(name="gen/m.proto", package="gen",
                                               syntax=syntax)
    proto.message_type.add(name="Decoy").field.add(name="d", number=1, type=F.TYPE_INT32,
                                                   label=F.LABEL_OPTIONAL)
    top = proto.message_type.add(name="M")
    deps: set[str] = set()
    _message(draw, top, ".gen.M", syntax, 0, deps)
    proto.dependency.extend(sorted(deps))
    return proto, "gen.M"


def _message(draw: Any, message: Any, full: str, syntax: str, depth: int,
             deps: set[str]) -> None:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True))
    numbers = draw(st.lists(st.integers(1, 18999) | st.sampled_from([2**29 - 1, 20000]),
                            min_size=len(names), max_size=len(names), unique=True))
    oneof: list[Any] = []
    synthetic: list[Any] = []
    for name, number in zip(names, numbers, strict=True):
        field = message.field.add(name=name, number=number, label=F.LABEL_OPTIONAL)
        kind = draw(st.sampled_from(["scalar"] * 4 + ["enum", "map", "wkt"] +
                                    (["message", "message"] if depth < 2 else []) +
                                    (["group"] if syntax == "proto2" and depth < 2 else [])))
        if kind == "scalar":
            field.type = draw(st.sampled_from(SCALARS))
        elif kind == "enum":
            field.type = F.TYPE_ENUM
            field.type_name = f"{full}.{_enum(draw, message, name, syntax)}"
        elif kind == "wkt":
            wkt = draw(st.sampled_from(sorted(WELL_KNOWN)))
            field.type, field.type_name = F.TYPE_MESSAGE, f".google.protobuf.{wkt}"
            deps.add(f"google/protobuf/{WELL_KNOWN[wkt]}.proto")
        elif kind in ("message", "group"):
            nested = message.nested_type.add(name=_camel(name) + "Msg" if kind == "message"
                                             else "G" + _camel(name).lower())
            if kind == "group":
                field.name = nested.name.lower()
            field.type = F.TYPE_MESSAGE if kind == "message" else F.TYPE_GROUP
            field.type_name = f"{full}.{nested.name}"
            _message(draw, nested, field.type_name, syntax, depth + 1, deps)
        else:
            _map(draw, message, field, full, syntax, depth, deps)
            continue
        label = draw(st.sampled_from(["optional", "optional", "repeated", "oneof"] +
                                     (["required"] if syntax == "proto2" else
                                      ["proto3_optional"])))
        if label == "repeated":
            field.label = F.LABEL_REPEATED
            if field.type in NUMERIC and draw(st.booleans()):
                field.options.packed = syntax == "proto2"       # proto3: packed already
        elif label == "required":
            field.label = F.LABEL_REQUIRED
        elif label == "oneof":
            oneof.append(field)
        elif label == "proto3_optional":
            synthetic.append(field)
    if oneof:           # the real oneof first: synthetic ones go last, as protoc has them
        message.oneof_decl.add(name="choice")
        for field in oneof:
            field.oneof_index = 0
    for field in synthetic:
        field.proto3_optional = True
        field.oneof_index = len(message.oneof_decl)
        message.oneof_decl.add(name="_" + field.name)


def _enum(draw: Any, message: Any, name: str, syntax: str, zero: bool = False) -> str:
    """An enum type in ``message``; its first value 0 in proto3 (and with ``zero``: a
    map's values, which the runtime wants so)."""
    enum = message.enum_type.add(name=_camel(name) + "Enum")
    numbers = draw(st.lists(st.integers(-5, 5) | st.sampled_from([2**31 - 1, -(2**31)]),
                            min_size=1, max_size=4))
    if syntax == "proto3" or zero:
        numbers = [0, *numbers]
    if len(set(numbers)) < len(numbers):
        enum.options.allow_alias = True
    for i, number in enumerate(numbers):
        enum.value.add(name=f"{enum.name.upper()}_{i}", number=number)
    return str(enum.name)


def _map(draw: Any, message: Any, field: Any, full: str, syntax: str, depth: int,
         deps: set[str]) -> None:
    entry = message.nested_type.add(name=_camel(field.name) + "Entry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=draw(st.sampled_from(KEYS)),
                    label=F.LABEL_OPTIONAL)
    value = entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL)
    kind = draw(st.sampled_from(["scalar", "scalar", "enum", "message"]))
    if kind == "scalar":
        value.type = draw(st.sampled_from(SCALARS))
    elif kind == "enum":
        value.type = F.TYPE_ENUM
        value.type_name = f"{full}.{_enum(draw, message, field.name + '_v', syntax, True)}"
    else:
        nested = message.nested_type.add(name=_camel(field.name) + "Val")
        value.type, value.type_name = F.TYPE_MESSAGE, f"{full}.{nested.name}"
        _message(draw, nested, value.type_name, syntax, depth + 1, deps)
    field.type, field.type_name = F.TYPE_MESSAGE, f"{full}.{entry.name}"
    field.label = F.LABEL_REPEATED


def message_class(proto: descriptor_pb2.FileDescriptorProto, name: str) -> Any:
    """The runtime's class of message ``name`` of ``proto``, in a pool of its own."""
    from google.protobuf import (  # noqa: F401 - imported for their files
        any_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    pool = descriptor_pool.DescriptorPool()
    for dependency in proto.dependency:
        known = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(dependency).CopyToProto(known)
        pool.Add(known)
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


# --------------------------------------------------------------------------- messages


def fill(draw: Any, message: Any, depth: int = 0) -> Any:
    """``message`` with random fields set (each oneof's members: at most one)."""
    chosen: dict[str, str] = {}
    for oneof in message.DESCRIPTOR.oneofs:
        members = [f.name for f in oneof.fields]
        chosen[oneof.name] = draw(st.sampled_from([*members, ""]))
    for field in message.DESCRIPTOR.fields:
        if field.containing_oneof is not None and \
                chosen[field.containing_oneof.name] != field.name:
            continue
        if field.containing_oneof is None and not _required(field) and \
                draw(st.integers(0, 3)) == 0:
            continue                                    # left unset
        target = getattr(message, field.name)
        if _is_map(field):
            key, value = field.message_type.fields_by_name["key"], \
                field.message_type.fields_by_name["value"]
            for k in draw(st.lists(_scalar(key), max_size=3, unique=True)):
                if value.message_type is not None:
                    fill(draw, target[k], depth + 1)
                else:
                    target[k] = draw(_scalar(value))
        elif _repeated(field):
            for _ in range(draw(st.integers(0, 3))):
                if field.message_type is not None:
                    fill(draw, target.add(), depth + 1)
                else:
                    target.append(draw(_scalar(field)))
        elif field.message_type is not None:
            target.SetInParent()
            fill(draw, target, depth + 1)
        else:
            setattr(message, field.name, draw(_scalar(field)))
    return message


def _scalar(field: Any) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind in RANGES:
        return st.integers(*RANGES[kind])
    if kind == F.TYPE_DOUBLE:
        return st.floats() | st.sampled_from([-0.0, math.inf, 5e-324])
    if kind == F.TYPE_FLOAT:
        return st.floats(width=32)
    if kind == F.TYPE_BOOL:
        return st.booleans()
    if kind == F.TYPE_STRING:
        return st.text(max_size=4)
    if kind == F.TYPE_BYTES:
        return st.binary(max_size=4)
    assert kind == F.TYPE_ENUM
    known = [v.number for v in field.enum_type.values]
    if field.enum_type.is_closed:
        return st.sampled_from(known)
    return st.sampled_from(known) | st.integers(-(2**31), 2**31 - 1)      # open: any


def _is_map(field: Any) -> bool:
    return bool(field.message_type is not None and field.message_type.GetOptions().map_entry)


def _repeated(field: Any) -> bool:
    if hasattr(field, "is_repeated"):                   # protobuf >= 6 (label went in 7)
        return bool(field.is_repeated)
    return bool(field.label == field.LABEL_REPEATED)


def _required(field: Any) -> bool:
    if hasattr(field, "is_required"):
        return bool(field.is_required)
    return bool(field.label == field.LABEL_REQUIRED)


# --------------------------------------------------------------------------- the oracle


class NotUtf8(Exception):
    """A proto2 string field holding bytes that are not UTF-8 (the runtime lets them
    through as bytes; no Arrow string holds them)."""


def expected(message: Any) -> dict[str, Any]:
    """``message`` as kproto's struct holds it, read through ``ListFields``: fields with
    presence None when unset, others their default; enums by the runtime's name of
    their number (else the number's text); maps as sorted (key, value) pairs; NaN as
    the string "NaN" (so that rows compare)."""
    listed = {f.name: v for f, v in message.ListFields()}
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        name = field.name
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            pairs = listed.get(name, {})
            out[name] = sorted((_one(field.message_type.fields_by_name["key"], k),
                                _one(value_field, pairs[k])) for k in pairs)
        elif _repeated(field):
            out[name] = [_one(field, v) for v in listed.get(name, [])]
        elif name in listed:
            out[name] = _one(field, listed[name])
        elif field.has_presence:
            out[name] = None
        else:
            out[name] = _one(field, field.default_value)
    return out


def _one(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return expected(value)
    if field.type == F.TYPE_ENUM:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known is not None else str(value)
    if field.type == F.TYPE_STRING and isinstance(value, bytes):
        raise NotUtf8(field.full_name)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def comparable(row: Any, message_type: Any) -> Any:
    """A decoded row (Arrow's Python value) in :func:`expected`'s terms."""
    if row is None:
        return None
    out = {}
    for field in message_type.fields:
        value = row[field.name]
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            value = sorted((k, _plain(value_field, v)) for k, v in value)
        elif _repeated(field):
            value = [_plain(field, v) for v in value]
        else:
            value = _plain(field, value)
        out[field.name] = value
    return out


def _plain(field: Any, value: Any) -> Any:
    if value is None:
        return None
    if field.message_type is not None:
        return comparable(value, field.message_type)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value
