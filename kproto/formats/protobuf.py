"""Protobuf values into Arrow with the ``protobuf`` package's descriptors.

A message type maps to a struct (:func:`arrow_type`): scalars to their Arrow
types (unsigned ones to uint32/uint64), enums to their symbol names (string;
numbers the schema does not name stay as their decimal text), bytes to
binary, repeated fields to lists, maps to Arrow maps, nested messages to
structs (null when unset). Fields without presence (proto3 scalars, repeated)
read as protobuf reads them: the default when absent.

Each value is parsed by the ``protobuf`` runtime (upb) and its fields copied
into Python lists that ``pyarrow`` builds the columns from: per record, as no
well-kept columnar Protobuf decoder exists for Python. Framed values carry
Confluent's message indexes (which message of the schema's file) after the
schema id; schemas come from the registry as serialized FileDescriptorProtos
(``format=serialized``) with their references, well-known types from the
runtime's own pool.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import importlib
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import EncodeError, FormatError, SchemaError
from ..schema_registry import RegisteredSchema, SchemaReference, SchemaRegistryClient
from . import _references, _wire

__all__ = ["arrow_type", "decode", "encode", "message_descriptor"]


def _runtime() -> Any:
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:  # pragma: no cover - protobuf is an optional dependency
        raise ImportError("the protobuf format needs the protobuf package "
                          "(pip install protobuf)") from None
    return descriptor_pb2, descriptor_pool, message_factory


def message_descriptor(schema: Any) -> Any:
    """The message Descriptor of a generated message class, a message, or a Descriptor."""
    descriptor = getattr(schema, "DESCRIPTOR", schema)
    if not hasattr(descriptor, "fields") or not hasattr(descriptor, "full_name"):
        raise SchemaError(f"a protobuf schema is a message class or its Descriptor, not "
                          f"{type(schema).__name__}")
    return descriptor


def _is_map(field: Any) -> bool:
    return bool(field.message_type is not None and field.message_type.GetOptions().map_entry)


def _scalar_type(field: Any) -> pa.DataType:
    f = type(field)
    table = {
        f.TYPE_DOUBLE: pa.float64(), f.TYPE_FLOAT: pa.float32(), f.TYPE_INT64: pa.int64(),
        f.TYPE_SINT64: pa.int64(), f.TYPE_SFIXED64: pa.int64(), f.TYPE_UINT64: pa.uint64(),
        f.TYPE_FIXED64: pa.uint64(), f.TYPE_INT32: pa.int32(), f.TYPE_SINT32: pa.int32(),
        f.TYPE_SFIXED32: pa.int32(), f.TYPE_UINT32: pa.uint32(), f.TYPE_FIXED32: pa.uint32(),
        f.TYPE_BOOL: pa.bool_(), f.TYPE_STRING: pa.string(), f.TYPE_BYTES: pa.binary(),
        f.TYPE_ENUM: pa.string()}
    return table[field.type]


def _field_type(field: Any, depth: int) -> pa.DataType:
    if _is_map(field):
        key, value = field.message_type.fields_by_name["key"], \
            field.message_type.fields_by_name["value"]
        return pa.map_(_scalar_type(key), _value_type(value, depth))
    single = _value_type(field, depth)
    return pa.list_(single) if _repeated(field) else single


def _repeated(field: Any) -> bool:
    repeated = getattr(field, "is_repeated", None)      # protobuf >= 6 (label went in 7)
    if repeated is None:
        return bool(field.label == field.LABEL_REPEATED)
    return bool(repeated)


def _value_type(field: Any, depth: int) -> pa.DataType:
    if field.message_type is not None:
        return _struct(field.message_type, depth + 1)
    return _scalar_type(field)


def _struct(descriptor: Any, depth: int = 0) -> pa.DataType:
    if depth > 32:
        raise SchemaError(f"message {descriptor.full_name} is recursive: no Arrow type")
    return pa.struct([pa.field(f.name, _field_type(f, depth)) for f in descriptor.fields])


def arrow_type(descriptor: Any) -> pa.DataType:
    """The Arrow struct type of a message type's values."""
    return _struct(message_descriptor(descriptor))


# --------------------------------------------------------------------------- decode


def _converter(descriptor: Any) -> Any:
    """A function message -> dict of Python values in the order of arrow_type."""
    steps = []
    for field in descriptor.fields:
        name = field.name
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            inner = _single(value_field)
            steps.append((name, 2, inner, False))
        elif _repeated(field):
            steps.append((name, 1, _single(field), False))
        else:
            presence = field.message_type is not None or bool(
                getattr(field, "has_presence", False))
            steps.append((name, 0, _single(field), presence))

    def convert(message: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, kind, single, presence in steps:
            value = getattr(message, name)
            if kind == 1:
                out[name] = [single(v) for v in value]
            elif kind == 2:
                out[name] = [(k, single(value[k])) for k in value]
            elif presence and not message.HasField(name):
                out[name] = None
            else:
                out[name] = single(value)
        return out

    return convert


def _single(field: Any) -> Any:
    if field.message_type is not None:
        return _converter(field.message_type)
    if field.type == field.TYPE_ENUM:
        names = _enum_names(field)
        return lambda number: names.get(number, str(number))
    return lambda value: value


def _enum_names(field: Any) -> dict[int, str]:
    """Number -> name of an enum field's values; of aliases (``allow_alias``), the first
    declared, as the runtime's ``values_by_number[n]`` and its JSON printer have it
    (``values_by_number.items()`` gives the last: upb)."""
    names: dict[int, str] = {}
    for value in field.enum_type.values:
        names.setdefault(value.number, value.name)
    return names


def _build(messages: list[Any], descriptor: Any) -> pa.StructArray:
    """Messages (None for a null row) -> a struct array of ``arrow_type(descriptor)``,
    column by column: one list comprehension per field, no dict per record."""
    target = _struct(descriptor)
    missing = [m is None for m in messages]
    if any(missing):
        blank = _runtime()[2].GetMessageClass(descriptor)()
        messages = [blank if m is None else m for m in messages]
    children = []
    for field, slot in zip(descriptor.fields, target, strict=True):
        name = field.name
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            maps = [getattr(m, name) for m in messages]
            keys = [k for mp in maps for k in mp]
            items = [mp[k] for mp in maps for k in mp]
            offsets = pa.array(np.cumsum([0] + [len(mp) for mp in maps]), pa.int32())
            children.append(pa.MapArray.from_arrays(
                offsets, pa.array(keys, slot.type.key_type),
                _column(items, value_field, slot.type.item_type), type=slot.type))
        elif _repeated(field):
            lists = [getattr(m, name) for m in messages]
            flat = [v for values in lists for v in values]
            offsets = pa.array(np.cumsum([0] + [len(v) for v in lists]), pa.int32())
            children.append(pa.ListArray.from_arrays(
                offsets, _column(flat, field, slot.type.value_type), type=slot.type))
        elif field.message_type is not None or getattr(field, "has_presence", False):
            children.append(_column([getattr(m, name) if m.HasField(name) else None
                                     for m in messages], field, slot.type))
        else:
            children.append(_column([getattr(m, name) for m in messages], field, slot.type))
    if not children:        # a message without fields (google.protobuf.Empty): no child
        return pa.array([None if m else {} for m in missing], target)     # to count rows
    mask = pa.array(missing) if any(missing) else None
    return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)


def _column(values: list[Any], field: Any, type: pa.DataType) -> pa.Array:
    if field.message_type is not None:
        return _build(values, field.message_type)
    if field.type == field.TYPE_ENUM:
        names = _enum_names(field)
        values = [None if v is None else names.get(v) or str(v) for v in values]
    return pa.array(values, type)


def _parse(payloads: list[tuple[int, bytes | None]], descriptor: Any, bad: dict[int, str]
           ) -> list[Any]:
    """Each (row, payload) parsed by the runtime: the message, or None (a null row, or a
    bad one, recorded in ``bad``)."""
    cls = _runtime()[2].GetMessageClass(descriptor)
    out: list[Any] = []
    for row, payload in payloads:
        if payload is None:
            out.append(None)
            continue
        try:
            out.append(cls.FromString(payload))
        except Exception as exc:  # noqa: BLE001 - the runtime's DecodeError, by any name
            bad[row] = f"not a {descriptor.full_name}: {exc}"
            out.append(None)
    return out


def _raise_first(bad: dict[int, str], errors: str) -> None:
    if errors == "raise" and bad:
        row = min(bad)
        raise FormatError(row=row, reason=bad[row], format="protobuf")


def decode(column: pa.Array, descriptor: Any, *, errors: str = "raise"
           ) -> tuple[pa.Array, np.ndarray]:
    """Plain protobuf payloads of one message type -> a struct array."""
    bad: dict[int, str] = {}
    messages = _parse(list(enumerate(column.to_pylist())), descriptor, bad)
    array = _built(messages, list(range(len(messages))), descriptor, bad)
    _raise_first(bad, errors)
    return array, np.array(sorted(bad), np.int64)


_UNBUILDABLE = (pa.ArrowException, TypeError, ValueError, OverflowError)


def _built(messages: list[Any], rows: list[int], descriptor: Any, bad: dict[int, str]
           ) -> pa.StructArray:
    """:func:`_build`; when some message has no Arrow value (a proto2 string that is not
    UTF-8: the runtime parses it and hands over its bytes), those found by bisection
    are bad rows (``rows``: the row of each message) and null."""
    try:
        return _build(messages, descriptor)
    except _UNBUILDABLE:
        pass
    messages = list(messages)
    stack = [(0, len(messages))]
    while stack:
        lo, hi = stack.pop()
        if all(m is None for m in messages[lo:hi]):
            continue
        try:
            _build(messages[lo:hi], descriptor)
            continue
        except _UNBUILDABLE as exc:
            if hi - lo == 1:
                where = _not_utf8(messages[lo])
                bad[rows[lo]] = (f"field {where} is not UTF-8 (a proto2 string)" if where
                                 else f"not a {descriptor.full_name} Arrow holds: {exc}")
                messages[lo] = None
                continue
        middle = (lo + hi) // 2
        stack += [(middle, hi), (lo, middle)]
    return _build(messages, descriptor)


def _not_utf8(message: Any, path: str = "") -> str | None:
    """The path of the first string field of ``message`` holding bytes, if any."""
    for field, value in message.ListFields():
        name = path + field.name
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            keys = list(value)
            if any(isinstance(k, bytes) for k in keys) and \
                    field.message_type.fields_by_name["key"].type == field.TYPE_STRING:
                return f"{name} (a key)"        # (the runtime cannot look it up either)
            values = [(f"{name}[{k!r}]", value[k]) for k in keys]
        else:
            values = [(f"{name}[{i}]", v) for i, v in enumerate(value)] \
                if _repeated(field) else [(name, value)]
            value_field = field
        for where, one in values:
            if value_field.message_type is not None:
                found = _not_utf8(one, where + ".")
                if found:
                    return found
            elif value_field.type == field.TYPE_STRING and isinstance(one, bytes):
                return where
    return None


def _message_at(file: Any, indexes: tuple[int, ...]) -> Any:
    messages = list(file.message_types_by_name.values())
    found = None
    for index in indexes:
        if index >= len(messages):
            raise ValueError(f"message indexes {list(indexes)} point past the schema's messages")
        found = messages[index]
        messages = list(found.nested_types)
    return found


def message_in(file: Any, name: str | None = None) -> Any:
    """The message type ``name`` (its full name, or a top-level message's own name) of a
    registered schema's file; without a name, the file's only top-level message."""
    top = list(file.message_types_by_name.values())
    if name is None:
        if len(top) == 1:
            return top[0]
        raise SchemaError(f"protobuf schema {file.name} holds several messages "
                          f"({', '.join(m.full_name for m in top)}): name the one to read")
    stack = list(top)
    while stack:
        message = stack.pop()
        if name in (message.full_name, message.name if message in top else None):
            return message
        stack += list(message.nested_types)
    raise SchemaError(f"protobuf schema {file.name} has no message {name!r} (its messages: "
                      f"{', '.join(m.full_name for m in top)})")


def indexes_of(descriptor: Any) -> tuple[int, ...]:
    """Confluent's message indexes of a message type within its file."""
    path = []
    while descriptor.containing_type is not None:
        parent = descriptor.containing_type
        path.append(list(parent.nested_types).index(descriptor))
        descriptor = parent
    path.append(list(descriptor.file.message_types_by_name.values()).index(descriptor))
    return tuple(reversed(path))


def decode_framed(column: pa.Array, ids: np.ndarray, writers: dict[int, Any], reader: Any,
                  bad: dict[int, str], errors: str) -> tuple[pa.Array, np.ndarray]:
    """Framed values: per row its schema's file, its message indexes, its payload;
    all rows built into the reader's message type (fields matched by name)."""
    values = column.to_pylist()
    groups: dict[tuple[int, tuple[int, ...]], list[tuple[int, bytes]]] = {}
    for row in np.flatnonzero(ids >= 0).tolist():
        value = values[row]
        try:
            indexes, start = _wire.message_indexes(value, _wire.HEADER)
            _message_at(writers[int(ids[row])], indexes)
        except ValueError as exc:
            bad[row] = f"message indexes: {exc}"
            continue
        groups.setdefault((int(ids[row]), indexes), []).append((row, value[start:]))
    # no reader message: the newest id's message its rows name (the first of them, by
    # indexes: a file's first message before the others)
    newest = max(groups)[0] if groups else max(writers, default=0)
    indexes = min((k[1] for k in groups if k[0] == newest), default=(0,))
    if reader is None:
        reader = _message_at(writers[newest], indexes)
    elif hasattr(reader, "message_types_by_name"):      # a file: the same message in it
        try:
            reader = _message_at(reader, indexes)
        except ValueError as exc:
            raise SchemaError(f"the reader schema {reader.name}: {exc}") from None
    else:
        reader = message_descriptor(reader)
    target = arrow_type(reader)
    pieces = []
    for (schema_id, indexes), rows in sorted(groups.items()):
        descriptor = _message_at(writers[schema_id], indexes)
        messages = _parse(list(rows), descriptor, bad)
        if _struct(descriptor) == target:
            array = _built(messages, [row for row, _ in rows], descriptor, bad)
        else:                   # another message type: its fields matched to the reader's
            array = _converted(messages, [row for row, _ in rows], descriptor, reader, bad)
        pieces.append((np.array([row for row, _ in rows], np.int64), array))
    _raise_first(bad, errors)
    return _wire.assemble(len(values), pieces, target), np.array(sorted(bad), np.int64)


def _converted(messages: list[Any], rows: list[int], descriptor: Any, reader: Any,
               bad: dict[int, str]) -> pa.Array:
    """Messages of another type than ``reader`` built into the reader's struct, fields
    matched by name; a message whose fields do not fit (a string where the reader has
    an int64...) is a bad row."""
    target = arrow_type(reader)
    convert = _converter(descriptor)
    dicts = [None if m is None else convert(m) for m in messages]
    try:
        return pa.array(dicts, target)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        pass
    for i, (row, one) in enumerate(zip(rows, dicts, strict=True)):
        if one is None:
            continue
        try:
            pa.array([one], target)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            bad[row] = (f"a {descriptor.full_name}, whose fields do not fit "
                        f"{reader.full_name}'s: {exc}")
            dicts[i] = None
    return pa.array(dicts, target)


def from_registry(found: RegisteredSchema, client: SchemaRegistryClient) -> Any:
    """The FileDescriptor of a registered Protobuf schema (serialized format), its
    references registered first in a pool of its own."""
    descriptor_pb2, descriptor_pool, _ = _runtime()
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(schema: RegisteredSchema) -> Any:
        proto = _file_proto(schema.schema, descriptor_pb2)
        for dependency in proto.dependency:
            if dependency not in added:
                known = _well_known(dependency, descriptor_pool)
                known_proto = descriptor_pb2.FileDescriptorProto()
                known.CopyToProto(known_proto)
                pool.Add(known_proto)
                added.add(dependency)
        if proto.name not in added:         # (two subjects may hold one file)
            pool.Add(proto)
            added.add(proto.name)
        return pool.FindFileByName(proto.name)

    try:
        for _, referenced in _references.resolve(client, found, format="serialized"):
            add(referenced)
        return add(found)
    except KeyError as exc:
        raise SchemaError(f"protobuf schema {found.schema_id}: unresolved import {exc}") \
            from None


def _well_known(name: str, descriptor_pool: Any) -> Any:
    """A file of the runtime's own pool (google/protobuf/timestamp.proto...), its module
    imported first if nothing has yet (a fresh process, a Spark executor); KeyError when
    it is not one of the runtime's."""
    pool = descriptor_pool.Default()
    try:
        return pool.FindFileByName(name)
    except KeyError:
        if not (name.startswith("google/protobuf/") and name.endswith(".proto")):
            raise
    module = "google.protobuf." + name[16:-6].replace("/", ".") + "_pb2"
    try:
        importlib.import_module(module)
    except ImportError:
        raise KeyError(name) from None
    return pool.FindFileByName(name)


def _file_proto(text: str, descriptor_pb2: Any) -> Any:
    try:
        raw = base64.b64decode(text, validate=True)
        return descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, Exception) as exc:  # noqa: BLE001
        raise SchemaError("protobuf schema is not a serialized FileDescriptorProto (base64): "
                          f"ask the registry with format=serialized ({exc})") from None


# --------------------------------------------------------------------------- encode


def register(client: SchemaRegistryClient, subject: str, descriptor: Any,
             auto_register: bool = True) -> int:
    """Register (or look up) a message type's file, and the files it imports under
    their own names as subjects (well-known google/protobuf types are left out)."""
    descriptor_pb2, _, _ = _runtime()

    def file_text(file: Any) -> str:
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        return base64.b64encode(proto.SerializeToString()).decode()

    def references(file: Any) -> tuple[SchemaReference, ...]:
        refs = []
        for dep in file.dependencies:
            if dep.name.startswith("google/protobuf/"):
                continue
            client.register(dep.name, file_text(dep), "PROTOBUF", references=references(dep))
            version = client.get_latest(dep.name).version or 1
            refs.append(SchemaReference(dep.name, dep.name, version))
        return tuple(refs)

    file = descriptor.file
    refs = references(file)
    text = file_text(file)
    if auto_register:
        return client.register(subject, text, "PROTOBUF", references=refs)
    found = client.lookup(subject, text, "PROTOBUF", references=refs)
    assert found.schema_id is not None
    return found.schema_id


def _fill(message: Any, descriptor: Any, row: dict[str, Any]) -> None:
    for oneof in descriptor.oneofs:     # the runtime keeps the last member set: refuse
        given = [f.name for f in oneof.fields if row.get(f.name) is not None]
        if len(given) > 1:
            raise ValueError(f"fields {' and '.join(given)} are members of one oneof "
                             f"({oneof.name}): one at most may be set")
    for field in descriptor.fields:
        value = row.get(field.name)
        if value is None:
            continue
        target = getattr(message, field.name)
        if _is_map(field):
            inner = field.message_type.fields_by_name["value"]
            for k, v in (value.items() if isinstance(value, dict) else value):
                if inner.message_type is not None:
                    _fill(target[k], inner.message_type, v)
                else:
                    target[k] = _scalar_in(inner, v)
        elif _repeated(field):
            for v in value:
                if field.message_type is not None:
                    _fill(target.add(), field.message_type, v)
                else:
                    target.append(_scalar_in(field, v))
        elif field.message_type is not None:
            target.SetInParent()
            _fill(target, field.message_type, value)
        else:
            setattr(message, field.name, _scalar_in(field, value))


def _scalar_in(field: Any, value: Any) -> Any:
    if field.type == field.TYPE_ENUM and isinstance(value, str):
        known = field.enum_type.values_by_name.get(value)
        return known.number if known is not None else int(value)
    if isinstance(value, decimal.Decimal) and value == value.to_integral_value():
        return int(value)       # uint64 as Spark holds it (decimal(20,0))
    return value


def encode(array: pa.Array, descriptor: Any, *, prefix: bytes = b"") -> pa.BinaryArray:
    """One serialized message per row (null rows stay null), each after ``prefix``."""
    cls = _runtime()[2].GetMessageClass(descriptor)
    out: list[bytes | None] = []
    for i, row in enumerate(array.to_pylist()):
        if row is None:
            out.append(None)
            continue
        message = cls()
        try:
            _fill(message, descriptor, row)
            payload = message.SerializeToString()
        except (TypeError, ValueError) as exc:
            raise EncodeError(f"row {i}: does not fit {descriptor.full_name}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - the runtime's EncodeError: a required field
            raise EncodeError(f"row {i}: {exc}") from None
        out.append(prefix + payload)
    return pa.array(out, pa.binary())
