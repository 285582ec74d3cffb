"""Confluent schema references: the schemas a registered schema imports, resolved.

A registered schema may name others (``references``: an Avro full name, a JSON
Schema URL, a Protobuf file name, each with the subject and version it is
registered under), and those may name more. :func:`resolve` fetches them all
once, depth first, and returns them in dependency order (every schema after the
ones it references), which is the order Avro's parser, a JSON Schema resolver
and a Protobuf descriptor pool each want them in. A cycle or a tree deeper or
larger than a pipeline could mean (bounds below) is a :class:`SchemaError`
naming the path, never a recursion without end.
"""

from __future__ import annotations

from ..errors import SchemaError, SchemaRegistryError
from ..schema_registry import RegisteredSchema, SchemaRegistryClient

__all__ = ["MAX_DEPTH", "MAX_SCHEMAS", "resolve"]

#: The longest chain of references followed (Confluent sets no bound; real trees are shallow).
MAX_DEPTH = 32
#: The most distinct schemas one schema may pull in.
MAX_SCHEMAS = 1000


def resolve(client: SchemaRegistryClient, found: RegisteredSchema, *,
            format: str | None = None) -> tuple[tuple[str, RegisteredSchema], ...]:
    """``(name, schema)`` of every schema ``found`` references, directly or through
    others, each once, in dependency order. ``format`` is passed to the registry for
    each (``"serialized"`` for Protobuf). Each version is fetched once per client
    (numbered versions are cached by the client)."""
    order: list[tuple[str, RegisteredSchema]] = []
    done: set[tuple[str, str]] = set()
    top = _label(found)

    def visit(schema: RegisteredSchema, path: tuple[str, ...],
              visiting: frozenset[tuple[str, str]]) -> None:
        for ref in schema.references:
            key = (ref.subject, str(ref.version))
            where = (*path, f"{ref.name} ({ref.subject} v{ref.version})")
            if key in visiting:
                raise SchemaError("schema references form a cycle: " + " -> ".join(where))
            if key in done:
                continue
            if len(where) - 1 > MAX_DEPTH:
                raise SchemaError(f"schema references nest deeper than {MAX_DEPTH}: "
                                  + " -> ".join(where[:3]) + " -> ...")
            if len(done) >= MAX_SCHEMAS:
                raise SchemaError(f"{top} references more than {MAX_SCHEMAS} schemas")
            try:
                child = client.get_version(ref.subject, ref.version, format=format)
            except SchemaRegistryError as exc:
                if exc.status != 404:
                    raise           # the registry failed, not the schema
                raise SchemaError(f"{' -> '.join(where)} is not in the registry "
                                  f"({exc.error_code})") from None
            if child.schema_type != schema.schema_type:
                raise SchemaError(f"{' -> '.join(where)} is a {child.schema_type} schema, "
                                  f"referenced from a {schema.schema_type} one")
            visit(child, where, visiting | {key})
            done.add(key)
            order.append((ref.name, child))

    visit(found, (top,), frozenset())
    return tuple(order)


def _label(found: RegisteredSchema) -> str:
    if found.schema_id is not None:
        return f"schema id {found.schema_id}"
    if found.subject is not None:
        return f"{found.subject} v{found.version}"
    return "the schema"
