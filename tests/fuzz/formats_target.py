"""The typed-values fuzz targets (``formats_cython``, ``formats_pure``): see targets.py.

An input is a case byte (which path of ``CASES``), a flags byte and the values, each
after a one-byte length (255: a null value; the last one takes what is left)::

    json           plain JSON objects, typed by a JSON Schema (``formats.decode``)
    json-inferred  plain JSON objects, no schema (pyarrow infers the types)
    json-framed    Confluent-framed JSON: ids 1, 2 are JSON Schemas, 5 one with no Arrow
                   type, 6 an Avro schema, any other id unknown (40403)
    avro-framed    Confluent-framed Avro: ids 6, 8 two versions of a record (int a; long a
                   and a string with a default), 1 a JSON Schema, any other id unknown
    proto-framed   Confluent-framed Protobuf: ids 3, 4 two versions of fz.proto, 7 a schema
                   that is not a serialized file, any other id unknown
    proto          plain Protobuf payloads of fz.Event
    kernels        the framing and JSON-lines passes alone on the column
    offsets        the passes on offsets taken from the input (any, in or out of the data)

Flags: bit 0 the column is binary_view, bit 1 large_binary, bit 2 the column is a slice
(an Arrow offset: the first value dropped), bit 3 a reader schema is given (framed) or
every other row left out (kernels); bits 4-6 the bytes cut from each value (kernels) or
the header length asked of ``frame_ids`` (offsets: under 5 must be refused).

The target's twin (``kproto._avro``'s ``frame_ids``/``json_lines`` or ``kproto._pure.wire``)
is the one ``kproto.formats`` decodes with first; every input then goes through the
other as well. The oracle: the two passes agree exactly, or raise the same ValueError;
``decode_with_bad_rows(errors="null")`` returns one row a value, valid Arrow, null
exactly where the value was null or is reported bad; ``errors="raise"`` raises a
FormatError naming the first bad row (or nothing when none is bad, and then the same
array); both twins decode to the same array and bad rows. The registry client answers
from its cache: no HTTP in the loop. Nothing imports kproto at module level.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

CASES = ["json", "json-inferred", "json-framed", "proto-framed", "proto", "kernels",
         "offsets", "avro-framed"]
NULL = 255
MAX_VALUES = 16

JSON_A = {"type": "object", "properties": {
    "id": {"type": "integer"}, "name": {"type": ["string", "null"]},
    "tags": {"type": "array", "items": {"type": "string"}},
    "inner": {"type": "object", "properties": {"x": {"type": "number"},
                                               "ok": {"type": "boolean"}}},
    "kind": {"enum": ["a", "b"]}}, "required": ["id"]}
_MAP = {"name": "m", "type": ["null", {"type": "map", "values": "string"}]}
AVRO_A = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, _MAP]}
AVRO_B = {"type": "record", "name": "R", "fields": [
    {"name": "a", "type": "long"}, _MAP, {"name": "s", "type": "string", "default": ""}]}
JSON_B = {**JSON_A, "properties": {**JSON_A["properties"], "extra": {"type": "string"},
                                   "items": {"type": "array", "items": {"$ref": "#/$defs/p"}}},
          "$defs": {"p": {"type": "object", "properties": {"v": {"type": "integer"}}}}}
#: id -> (schema type, text); the Protobuf texts are filled in by _registry()
REGISTERED: dict[int, tuple[str, Any]] = {
    1: ("JSON", JSON_A), 2: ("JSON", JSON_B), 5: ("JSON", {"type": "object"}),
    6: ("AVRO", AVRO_A), 7: ("PROTOBUF", "not base64 !"), 8: ("AVRO", AVRO_B)}


def formats_input(data: bytes) -> tuple[int, int, list[bytes | None]]:
    """(case index, flags, values) of an input."""
    case = data[0] % len(CASES) if data else 0
    flags = data[1] if len(data) > 1 else 0
    values: list[bytes | None] = []
    pos = 2
    while pos < len(data) and len(values) < MAX_VALUES:
        n = data[pos]
        if n == NULL:
            values.append(None)
            pos += 1
            continue
        values.append(data[pos + 1:pos + 1 + n])
        pos += 1 + n
    return case, flags, values


# --------------------------------------------------------------------------- schemas


def proto_files() -> tuple[Any, Any]:
    """fz.proto's two versions as FileDescriptorProtos: Event (every kind of field, a
    nested Inner, an enum, a map), Other (fields named like Event's, other types); the
    second version's Event drops most fields and adds one."""
    from google.protobuf import descriptor_pb2

    f = descriptor_pb2.FieldDescriptorProto
    rep = {"label": f.LABEL_REPEATED}
    v1 = descriptor_pb2.FileDescriptorProto(name="fz.proto", package="fz", syntax="proto3")
    event = v1.message_type.add(name="Event")
    inner = event.nested_type.add(name="Inner")
    inner.field.add(name="x", number=1, type=f.TYPE_INT32)
    inner.field.add(name="ys", number=2, type=f.TYPE_SINT64, **rep)
    entry = event.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=f.TYPE_STRING)
    entry.field.add(name="value", number=2, type=f.TYPE_INT32)
    kind = event.enum_type.add(name="Kind")
    for i, name in enumerate("ABC"):
        kind.value.add(name=name, number=i)
    event.oneof_decl.add(name="_score")
    for name, number, kind_, extra in [
            ("id", 1, f.TYPE_INT64, {}), ("name", 2, f.TYPE_STRING, {}),
            ("tags", 3, f.TYPE_STRING, rep),
            ("counts", 4, f.TYPE_MESSAGE, {**rep, "type_name": ".fz.Event.CountsEntry"}),
            ("inner", 5, f.TYPE_MESSAGE, {"type_name": ".fz.Event.Inner"}),
            ("kind", 6, f.TYPE_ENUM, {"type_name": ".fz.Event.Kind"}),
            ("score", 7, f.TYPE_DOUBLE, {"oneof_index": 0, "proto3_optional": True}),
            ("blob", 8, f.TYPE_BYTES, {}), ("big", 9, f.TYPE_UINT64, {}),
            ("small", 10, f.TYPE_SINT32, {}), ("f32", 11, f.TYPE_FIXED32, {}),
            ("ok", 12, f.TYPE_BOOL, {}),
            ("items", 13, f.TYPE_MESSAGE, {**rep, "type_name": ".fz.Event.Inner"})]:
        event.field.add(name=name, number=number, type=kind_, **extra)
    other = v1.message_type.add(name="Other")
    other.field.add(name="id", number=1, type=f.TYPE_STRING)
    other.field.add(name="score", number=2, type=f.TYPE_FLOAT)
    v2 = descriptor_pb2.FileDescriptorProto(name="fz.proto", package="fz", syntax="proto3")
    event2 = v2.message_type.add(name="Event")
    event2.field.add(name="id", number=1, type=f.TYPE_INT64)
    event2.field.add(name="name", number=2, type=f.TYPE_STRING)
    event2.field.add(name="added", number=14, type=f.TYPE_STRING)
    return v1, v2


def proto_classes() -> dict[str, Any]:
    """The message classes of fz.proto version 1 (Event, Event.Inner, Other) and v2's
    Event (as "Event2"), each file in a pool of its own."""
    from google.protobuf import descriptor_pool, message_factory

    out = {}
    for version, proto in enumerate(proto_files(), 1):
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        names = ["fz.Event", "fz.Event.Inner", "fz.Other"] if version == 1 else ["fz.Event"]
        for name in names:
            key = name.split(".")[-1] + ("2" if version == 2 else "")
            out[key] = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    return out


def offline_registry() -> Any:
    """A SchemaRegistryClient that knows ``REGISTERED`` (and the two fz.proto files as
    ids 3, 4) from its cache, and answers every other id as the registry does an unknown
    one (40403), without a request."""
    import base64

    from kproto.errors import SchemaRegistryError
    from kproto.schema_registry import RegisteredSchema, SchemaRegistryClient

    class Offline(SchemaRegistryClient):
        def _request(self, method: str, path: str, **kwargs: Any) -> Any:
            raise SchemaRegistryError(f"{method} failed: HTTP 404, error 40403: Schema not "
                                      "found", url=f"{self.urls[0]}/{path}", status=404,
                                      error_code=40403, schema_id=kwargs.get("schema_id"))

    client = Offline("http://127.0.0.1:9", max_retries=0)
    known = dict(REGISTERED)
    for schema_id, proto in zip((3, 4), proto_files(), strict=True):
        known[schema_id] = ("PROTOBUF", base64.b64encode(proto.SerializeToString()).decode())
    for schema_id, (kind, schema) in known.items():
        text = schema if isinstance(schema, str) and kind != "AVRO" else json.dumps(schema)
        for fmt in (None, "serialized"):
            client._by_id.put((schema_id, fmt), RegisteredSchema(text, kind, schema_id))
    return client


# --------------------------------------------------------------------------- the target


def make_formats(impl: str, finding: type[AssertionError]) -> Callable[[bytes], None]:
    import numpy as np
    import pyarrow as pa

    import kproto._pure.wire
    from kproto import formats
    from kproto.errors import FormatError
    from kproto.formats import _wire

    try:
        import kproto._avro as compiled
    except ImportError:      # pragma: no cover - only without a built extension
        compiled = None
    twins = [("cython", compiled), ("pure", kproto._pure.wire)]
    if impl == "pure":
        twins.reverse()
    twins = [t for t in twins if t[1] is not None]
    client = offline_registry()
    classes = proto_classes()
    event = classes["Event"]

    def column_of(values: list[bytes | None], flags: int) -> pa.Array:
        column = pa.array(values, pa.large_binary() if flags & 2 else pa.binary())
        if flags & 4 and len(column):
            column = column.slice(1)
        if flags & 1:
            column = column.cast(pa.binary_view())
        return column

    def kernel_outcome(kernels: Any, fn: str, *args: Any) -> Any:
        try:
            out = getattr(kernels, fn)(*args)
        except ValueError as exc:
            return ("ValueError", str(exc))
        return tuple(bytes(x) if isinstance(x, (bytes, pa.Buffer)) else x.tolist()
                     for x in out)

    def same_kernels(calls: list[tuple[str, tuple[Any, ...]]]) -> None:
        for fn, args in calls:
            got = [kernel_outcome(k, fn, *args) for _, k in twins]
            if len(got) == 2 and got[0] != got[1]:
                raise finding(f"{fn}: {twins[0][0]} {got[0]!r} != {twins[1][0]} {got[1]!r}")

    def kernels_case(values: list[bytes | None], flags: int) -> None:
        column = _wire.as_binary(column_of(values, flags))
        offsets, data, valid = _wire.buffers(column)
        offsets = offsets.astype(np.int64)
        rows = valid.view(np.uint8).copy()
        if flags & 8:
            rows[::2] = 0
        skip = (flags >> 4) & 7
        same_kernels([("frame_ids", (offsets, data, valid.view(np.uint8), 5, 0)),
                      ("frame_ids", (offsets, data, valid.view(np.uint8), 5 + skip, skip)),
                      ("json_lines", (offsets, data, rows, skip))])

    def offsets_case(raw: bytes, flags: int) -> None:
        count = raw[0] % 9 if raw else 0
        offsets = np.frombuffer(raw[1:1 + count], np.int8).astype(np.int64)
        data = np.frombuffer(raw[1 + count:], np.uint8)
        n = max(len(offsets) - 1, 0)
        ones = np.ones(n + (1 if flags & 8 else 0), np.uint8)     # bit 3: one entry too many
        header = (flags >> 4) & 7
        same_kernels([("frame_ids", (offsets, data, ones, header, 0)),
                      ("json_lines", (offsets, data, ones, header))])

    def decode_args(case: str, flags: int) -> tuple[str, dict[str, Any]]:
        reader = bool(flags & 8)
        if case == "json":
            return "json", {"schema": JSON_A}
        if case == "json-inferred":
            return "json", {}
        if case == "json-framed":
            return "json", {"registry": client, **({"schema": JSON_B} if reader else {})}
        if case == "avro-framed":
            return "avro", {"registry": client, **({"schema": AVRO_B} if reader else {})}
        if case == "proto-framed":
            return "protobuf", {"registry": client, **({"schema": event} if reader else {})}
        return "protobuf", {"schema": event}

    def decode_case(case: str, values: list[bytes | None], flags: int) -> None:
        column = column_of(values, flags)
        if flags & 4 and values:
            values = values[1:]
        nulls = {i for i, v in enumerate(values) if v is None}
        fmt, kwargs = decode_args(case, flags)
        seen = []
        for i, (_, kernels) in enumerate(twins):
            saved, _wire._kernels = _wire._kernels, kernels
            try:
                seen.append(one_twin(column, fmt, kwargs, len(values), nulls, validate=i == 0))
            finally:
                _wire._kernels = saved
        if len(seen) == 2 and seen[0] != seen[1]:
            raise finding(f"{twins[0][0]} and {twins[1][0]} differ:\n{seen[0]}\n{seen[1]}")
        binary = _wire.as_binary(column)
        offsets, data, valid = _wire.buffers(binary)
        offsets = offsets.astype(np.int64)
        same_kernels([("frame_ids", (offsets, data, valid.view(np.uint8), 5, 0)),
                      ("json_lines", (offsets, data, valid.view(np.uint8), 5 if "framed" in case
                                      else 0))])

    def one_twin(column: pa.Array, fmt: str, kwargs: dict[str, Any], n: int, nulls: set[int],
                 validate: bool) -> tuple[Any, ...]:
        try:
            array, bad_rows = formats.decode_with_bad_rows(column, fmt, errors="null", **kwargs)
        except Exception as exc:
            raise finding(f"errors='null' raised {type(exc).__name__}: {exc}") from exc
        bad = bad_rows.tolist()
        if validate:
            array.validate(full=True)
        if len(array) != n:
            raise finding(f"{len(array)} rows for {n} values")
        null_out = {i for i in range(n) if not array[i].is_valid}
        if set(bad) & nulls or null_out != nulls | set(bad) or bad != sorted(set(bad)):
            raise finding(f"null values {sorted(nulls)}, bad rows {bad}, null rows "
                          f"{sorted(null_out)}")
        raised = None
        try:
            again = formats.decode(column, fmt, errors="raise", **kwargs)
        except FormatError as exc:
            if exc.row is None or f"row {exc.row}" not in str(exc):
                raise finding(f"FormatError does not name its row: {exc}") from exc
            raised = (exc.row, exc.reason)
        except Exception as exc:
            raise finding(f"errors='raise' raised {type(exc).__name__}: {exc}") from exc
        else:
            if not again.equals(array) and text(again) != text(array):
                raise finding(f"errors='raise' decoded differently:\n{text(again)}\n"
                              f"{text(array)}")
        if (raised is None) != (not bad) or (raised and raised[0] != bad[0]):
            raise finding(f"errors='raise' gave {raised}, errors='null' bad rows {bad}")
        return str(array.type), text(array), bad, raised

    def text(array: pa.Array) -> str:
        return array.to_string(window=1 << 20, container_window=1 << 20)

    def one_input(data: bytes) -> None:
        case, flags, values = formats_input(data)
        name = CASES[case]
        if name == "kernels":
            kernels_case(values, flags)
        elif name == "offsets":
            offsets_case(data[2:], flags)
        else:
            decode_case(name, values, flags)

    # warm up: the first decode of each path loads pyarrow's JSON reader and the protobuf
    # runtime (tens of MB), which the RSS check would blame on the first input
    for seed in formats_seeds():
        one_input(seed)
    return one_input


# --------------------------------------------------------------------------- seeds


def _body(values: list[bytes | None]) -> bytes:
    return b"".join(bytes([NULL]) if v is None else bytes([len(v)]) + v
                    for v in values if v is None or len(v) < NULL)


def _avro_framed() -> list[bytes | None]:
    """Avro values framed with ids 6 and 8 (datums written by fastavro), and bad ones."""
    import io

    import fastavro

    out: list[bytes | None] = []
    for schema_id, schema, datum in [(6, AVRO_A, {"a": 3, "m": None}),
                                     (6, AVRO_A, {"a": -1, "m": {"k": "v"}}),
                                     (8, AVRO_B, {"a": 2**40, "m": None, "s": "é"})]:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
        out.append(b"\x00" + schema_id.to_bytes(4, "big") + buf.getvalue())
    assert out[1] is not None
    return out + [None, out[1][:-1], out[1] + b"\x00", b"\x00\x00\x00\x00\x63\x02",
                  b"\x00\x00\x00\x00\x01{}", b"\x00\x00\x00\x00\x08\x02"]


def formats_seeds() -> list[bytes]:
    """Good and bad values of every case: JSON written by the json module, Protobuf
    payloads by the protobuf runtime, headers and message indexes by hand."""
    classes = proto_classes()
    event, inner, other, event2 = (classes[k] for k in ("Event", "Inner", "Other", "Event2"))
    docs = [json.dumps(d).encode() for d in (
        {"id": 1, "name": "a", "tags": ["x", "y"], "inner": {"x": 1.5, "ok": True},
         "kind": "a"},
        {"id": -(2**40), "name": None, "tags": [], "kind": "b", "extra": "e",
         "items": [{"v": 3}]},
        {"id": 7})] + [b'{"id": 2,\n "name": "\\u00e9"}\r\n', b" {} ", b"[1]", b"{\"id\": }",
                       b'{"id": "x"}', b'{"a": 1}{"b": 2}']
    m = event(id=5, name="é", tags=["t"], kind=2, score=0.5, blob=b"\x00\xff", big=2**64 - 1,
              small=-3, f32=7, ok=True)
    m.counts["k"] = 4
    m.inner.x = 9
    m.inner.ys.extend([-1, 2**40])
    m.items.add(x=1)
    protos = [(b"\x00", m.SerializeToString()), (b"\x00", event().SerializeToString()),
              (b"\x04\x00\x00", inner(x=3, ys=[4]).SerializeToString()),
              (b"\x02\x02", other(id="o", score=1.5).SerializeToString()),
              (b"\x02\x08", b""), (b"\x04\x00\x02", b"\x0a\x01k")]
    avro_values = _avro_framed()
    out = []

    def add(case: str, flags: int, values: list[bytes | None]) -> None:
        out.append(bytes([CASES.index(case), flags]) + _body(values))

    for flags in (0, 1, 6):
        add("json", flags, docs + [None])
        add("json-inferred", flags, docs[:3] + [None, docs[4]])
        add("proto", flags, [m.SerializeToString(), None, b"\x08", b"\x0a\x05ab"])
        add("kernels", flags | 0x58, docs + [None])
    framed = [b"\x00\x00\x00\x00" + bytes([i % 2 + 1]) + d for i, d in enumerate(docs)]
    for flags in (0, 8, 1):
        add("json-framed", flags, framed + [None, b"\x00\x00\x00\x00\x05{}", b"\x01{}",
                                            b"\x00\x00", b"\x00\x00\x00\x00\x06{}",
                                            b"\x00\x00\x00\x00\x63{}"])
        proto_values: list[bytes | None] = [b"\x00\x00\x00\x00\x03" + i + p for i, p in protos]
        proto_values += [b"\x00\x00\x00\x00\x04\x00" + event2(id=1, added="n").SerializeToString(),
                         b"\x00\x00\x00\x00\x07\x00", b"\x00\x00\x00\x00\x03\x00\x0a\xff",
                         None, b"\x00\x00\x00\x00\x08\x00"]
        add("proto-framed", flags, proto_values)
        add("avro-framed", flags, avro_values)
    offsets = bytes([4, 0, 5, 5, 12]) + b'{"a": 1}\x00\x00\x00\x00\x01{}'
    out += [bytes([CASES.index("offsets"), flags]) + offsets for flags in (0x50, 0x08, 0x30)]
    out.append(bytes([CASES.index("offsets"), 0x50, 3, 0, 0xFF, 4]) + b"abc")
    return out
