"""Schema references on generated schemas, against confluent-kafka: a random Avro record
schema has its named types (records, enums, fixed, at any depth) moved out into subjects
of their own, each registered with references to the ones it uses; confluent-kafka's
AvroSerializer writes random values with the top schema, and kproto decodes them through
the registry (references resolved recursively) to what confluent's AvroDeserializer reads;
kproto encodes them back with the registered schema, and confluent reads that too."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto import formats
from kproto.schema_registry import SchemaReference, SchemaRegistryClient
from kproto.testing import SchemaRegistryServer

from .avro_support import arrow_values, plain
from .test_avro_hypothesis import schema_and_values

_subjects = itertools.count()


@pytest.fixture(scope="module")
def registry():
    with SchemaRegistryServer() as server:
        yield server


def externalize(schema: Any, prefix: str) -> tuple[Any, list[tuple[str, Any, list[str]]]]:
    """``schema`` with every named type below the top moved out: (the top schema, the
    moved ones as (full name, schema, names it references), in dependency order)."""
    moved: list[tuple[str, Any, list[str]]] = []

    def walk(node: Any, uses: list[str], top: bool = False) -> Any:
        if isinstance(node, list):
            return [walk(b, uses) for b in node]
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        if kind in ("record", "enum", "fixed") and not top:
            mine: list[str] = []
            inner = walk_fields(node, mine) if kind == "record" else dict(node)
            moved.append((node["name"], inner, mine))
            uses.append(node["name"])
            return node["name"]
        if kind == "record":
            return walk_fields(node, uses)
        if kind == "array":
            return {**node, "items": walk(node["items"], uses)}
        if kind == "map":
            return {**node, "values": walk(node["values"], uses)}
        return node

    def walk_fields(node: dict, uses: list[str]) -> dict:
        return {**node, "fields": [{**f, "type": walk(f["type"], uses)} for f in node["fields"]]}

    top: list[str] = []
    out = walk(schema, top, top=True)
    moved.append((f"{prefix}-top", out, top))
    return out, moved


@st.composite
def record_cases(draw: st.DrawFn) -> tuple[Any, list[Any]]:
    fields = draw(st.lists(schema_and_values(1), min_size=1, max_size=4))
    # a first long field: confluent's deserializer refuses a 0-byte datum (a record of
    # nulls), which it writes itself ("Expecting data framing of length 6 bytes")
    schema = {"type": "record", "name": f"Top{next(_subjects)}", "fields": [
        {"name": "id", "type": "long"},
        *({"name": f"f{i}", "type": s} for i, (s, _) in enumerate(fields))]}
    values = st.fixed_dictionaries({"id": st.integers(-(2**63), 2**63 - 1),
                                    **{f"f{i}": v for i, (_, v) in enumerate(fields)}})
    return schema, draw(st.lists(values, min_size=1, max_size=4))


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(case=record_cases())
def test_generated_references_decode_and_encode_as_confluent(registry, case):
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema, rows = case
    prefix = f"t{next(_subjects)}"
    _, moved = externalize(schema, prefix)
    client = SchemaRegistryClient(registry.url)
    for name, part, uses in moved:          # dependency order: the used ones first
        subject = f"{prefix}-value" if name == f"{prefix}-top" else f"{prefix}.{name}"
        refs = tuple(SchemaReference(u, f"{prefix}.{u}", 1) for u in uses)
        client.register(subject, json.dumps(part), references=refs)
    context = SerializationContext(prefix, MessageField.VALUE)
    with Confluent({"url": registry.url}) as confluent:
        serialize = AvroSerializer(confluent, None, conf={"auto.register.schemas": False,
                                                          "use.latest.version": True})
        deserialize = AvroDeserializer(confluent)
        values = [serialize(r, context) for r in rows]
        expected = [plain(deserialize(v, context)) for v in values]
        decoded = formats.decode(pa.array(values), "avro", registry=client)
        assert arrow_values(decoded) == expected
        latest = client.get_latest(f"{prefix}-value")
        encoded = formats.encode(decoded, "avro", schema=latest, registry=client)
        assert [plain(deserialize(v, context)) for v in encoded.to_pylist()] == expected
