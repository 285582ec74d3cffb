"""The registry client against answers that lie (tests/http_faults.py): too big, of
another shape than the endpoint's, about another id, subject or version than asked;
and against settings that are out of range. Each is a SchemaRegistryError or a
ConfigError naming what is wrong, never another exception, a hang or a wrong value."""

from __future__ import annotations

import gzip
import json
import time

import pytest

from kproto.errors import ConfigError, SchemaRegistryError
from kproto.schema_registry import MAX_ANSWER_BYTES, SchemaRegistryClient
from tests.http_faults import CLOSE, FOREVER, FaultServer, answer, chunk, head

MIB = 1 << 20


@pytest.fixture
def server():
    with FaultServer() as one:
        yield one


def _client(server: FaultServer, **kwargs: object) -> SchemaRegistryClient:
    return SchemaRegistryClient(server.url, max_retries=0, timeout=20, **kwargs)


# ---------------------------------------------------------------------- size

def _too_big(client: SchemaRegistryClient, url: str, cap: int = MAX_ANSWER_BYTES) -> None:
    started = time.monotonic()
    with pytest.raises(SchemaRegistryError) as info:
        client.get_schema(1)
    assert time.monotonic() - started < 15                      # not the 20 s deadline
    text = str(info.value)
    assert f"{cap} bytes" in text and f"{url}/schemas/ids/1" in text, text
    assert info.value.status == 200 and info.value.schema_id == 1


def _schema_body(size: int) -> list[bytes | float | None]:
    """A valid answer of ``size`` bytes or so: ``{"schema": "xxx..."}`` in 1 MiB pieces."""
    piece = b"x" * MIB
    return [b'{"schema": "', *[piece] * (size // MIB), b'"}']


def test_an_answer_without_a_length_is_cut_at_the_cap(server):
    assert MAX_ANSWER_BYTES == 16 * MIB
    server.default = [head(200, {"Connection": "close"}),
                      *_schema_body(MAX_ANSWER_BYTES + 8 * MIB), CLOSE]
    _too_big(_client(server), server.url)


def test_a_chunked_answer_with_a_lying_length_is_cut_at_the_cap(server):
    """Content-Length says 20 bytes, but Transfer-Encoding: chunked wins (RFC 9112 6.3)."""
    pieces = _schema_body(2 * MIB)
    server.default = [head(200, {"Content-Length": "20", "Transfer-Encoding": "chunked"}),
                      *[chunk(p) for p in pieces], chunk(b"")]
    _too_big(_client(server, max_answer_bytes=MIB), server.url, MIB)
    # the same answer under the cap reads
    server.default = [head(200, {"Content-Length": "20", "Transfer-Encoding": "chunked"}),
                      *[chunk(p) for p in pieces], chunk(b"")]
    assert len(_client(server, max_answer_bytes=3 * MIB).get_schema(1).schema) == 2 * MIB


def test_a_length_over_the_cap_is_refused_without_reading(server):
    """The body never comes: the Content-Length alone refuses it, well before the deadline."""
    server.default = [head(200, {"Content-Length": str(1 << 40)}), b'{"schema": ', FOREVER]
    _too_big(_client(server), server.url)


def test_a_compressed_answer_is_capped_once_decompressed(server):
    """A few kB of gzip that would inflate past the cap (urllib3 decodes gzip)."""
    bomb = gzip.compress(b"".join(p for p in _schema_body(4 * MIB) if isinstance(p, bytes)))
    assert len(bomb) < 64 * 1024
    server.default = [answer(200, bomb, {"Content-Encoding": "gzip"})]
    _too_big(_client(server, max_answer_bytes=MIB), server.url, MIB)


# ---------------------------------------------------------------------- shapes

SCHEMA = '"string"'
REF = {"name": "B", "subject": "b", "version": 1}

SHAPES = [
    # (call, answer): answers that are JSON, but not what the endpoint answers
    ("get_schema", []),
    ("get_schema", "a string"),
    ("get_schema", None),
    ("get_schema", {"schema": 123}),
    ("get_schema", {"schema": {"type": "string"}}),
    ("get_schema", {"schema": None}),
    ("get_schema", {"schema": SCHEMA, "schemaType": 5}),
    ("get_schema", {"schema": SCHEMA, "id": "1"}),
    ("get_schema", {"schema": SCHEMA, "id": True}),
    ("get_schema", {"schema": SCHEMA, "references": "oops"}),
    ("get_schema", {"schema": SCHEMA, "references": {"name": "B"}}),
    ("get_schema", {"schema": SCHEMA, "references": ["B"]}),
    ("get_schema", {"schema": SCHEMA, "references": [{"name": "B"}]}),
    ("get_schema", {"schema": SCHEMA, "references": [{**REF, "version": "latest"}]}),
    ("get_schema", {"schema": SCHEMA, "references": [{**REF, "version": "1"}]}),
    ("get_schema", {"schema": SCHEMA, "references": [{**REF, "version": True}]}),
    ("get_schema", {"schema": SCHEMA, "references": [{**REF, "name": 1}]}),
    ("get_schema", {"schema": SCHEMA, "references": [{**REF, "subject": None}]}),
    ("get_version", {"schema": SCHEMA, "version": "1"}),
    ("get_version", {"schema": SCHEMA, "subject": ["s"]}),
    ("get_version", [SCHEMA]),
    ("lookup", {"schema": SCHEMA, "id": 1.5, "version": 1}),
    ("get_subjects", {"subjects": ["s"]}),
    ("get_subjects", ["s", 1]),
    ("get_subjects", ["s", None]),
    ("get_versions", [1, "2"]),
    ("get_versions", [1, 2.5]),
    ("get_versions", [True]),
    ("get_versions", "1,2"),
    ("delete_subject", [1, None]),
    ("delete_subject", {"versions": [1]}),
    ("register", {}),
    ("register", []),
    ("register", {"id": "7"}),
    ("register", {"id": True}),
    ("register", {"id": None}),
    ("test_compatibility", {}),
    ("test_compatibility", {"is_compatible": "maybe"}),
    ("test_compatibility", {"is_compatible": 1}),
    ("test_compatibility", [True]),
    ("get_compatibility", {}),
    ("get_compatibility", {"compatibilityLevel": 7}),
    ("get_compatibility", "BACKWARD"),
    ("set_compatibility", {}),
    ("set_compatibility", {"compatibility": ["FULL"]}),
]

CALLS = {
    "get_schema": lambda c: c.get_schema(1),
    "get_version": lambda c: c.get_version("s", 1),
    "lookup": lambda c: c.lookup("s", SCHEMA),
    "get_subjects": lambda c: c.get_subjects(),
    "get_versions": lambda c: c.get_versions("s"),
    "delete_subject": lambda c: c.delete_subject("s"),
    "register": lambda c: c.register("s", SCHEMA),
    "test_compatibility": lambda c: c.test_compatibility("s", SCHEMA),
    "get_compatibility": lambda c: c.get_compatibility("s"),
    "set_compatibility": lambda c: c.set_compatibility("FULL", "s"),
}


@pytest.mark.parametrize("call, body", SHAPES, ids=[f"{c}-{json.dumps(b)[:40]}" for c, b in SHAPES])
def test_an_answer_of_another_shape_is_a_registry_error(server, call, body):
    server.default = [answer(200, json.dumps(body).encode())]
    with pytest.raises(SchemaRegistryError) as info:
        CALLS[call](_client(server))
    assert "unexpected answer" in str(info.value) and server.url in str(info.value)
    assert not info.value.retriable


def test_the_shapes_the_registry_does_answer_are_taken(server):
    """The checks refuse no answer the documentation shows (see also
    test_schema_registry.py's replay of Confluent's API reference)."""
    client = _client(server)
    server.answers = [
        [answer(200, json.dumps({"schema": SCHEMA, "schemaType": "avro", "id": 1,
                                 "references": [REF]}).encode())],
        [answer(200, b'{"schema": "\\"int\\"", "references": null}')],
        [answer(200, b'{"is_compatible": false}')],
        [answer(200, b'{"is_compatible": "true"}')],
        [answer(200, b"[]")],
    ]
    found = client.get_schema(1)
    assert (found.schema_type, found.schema_id, found.references[0].version) == ("AVRO", 1, 1)
    assert client.get_schema(2).references == ()
    assert client.test_compatibility("s", SCHEMA) is False
    assert client.test_compatibility("s", SCHEMA) is True
    assert client.get_versions("s") == []


# ---------------------------------------------------------------------- another id

@pytest.mark.parametrize("call, body, asked, answered", [
    (lambda c: c.get_schema(9), {"schema": SCHEMA, "id": 99}, "id 9", "id 99"),
    (lambda c: c.get_version("s", 3), {"schema": SCHEMA, "subject": "s", "version": 4, "id": 1},
     "version 3", "version 4"),
    (lambda c: c.get_version("s", 3), {"schema": SCHEMA, "subject": "t", "version": 3, "id": 1},
     "subject 's'", "subject 't'"),
    (lambda c: c.get_latest("s"), {"schema": SCHEMA, "subject": "t", "version": 3, "id": 1},
     "subject 's'", "subject 't'"),
    (lambda c: c.lookup("s", SCHEMA), {"schema": SCHEMA, "subject": "t", "version": 1, "id": 1},
     "subject 's'", "subject 't'"),
])
def test_an_answer_about_something_else_than_asked_is_refused(server, call, body, asked,
                                                              answered):
    server.default = [answer(200, json.dumps(body).encode())]
    client = _client(server)
    with pytest.raises(SchemaRegistryError) as info:
        call(client)
    text = str(info.value)
    assert asked in text and answered in text, text
    assert not client._by_id.items and not client._versions.items        # nothing cached


def test_an_answer_in_the_urls_context_names_the_subject_qualified(server):
    """A URL ending in /contexts/.ctx answers ':.ctx:s' for subject 's'."""
    server.default = [answer(200, json.dumps({"schema": SCHEMA, "subject": ":.ctx:s",
                                              "version": 2, "id": 5}).encode())]
    client = SchemaRegistryClient(f"{server.url}/contexts/.ctx", max_retries=0)
    assert client.get_version("s", 2).schema_id == 5
    assert client.get_version(":.ctx:s", 2).schema_id == 5
    with pytest.raises(SchemaRegistryError):
        client.get_version(":.other:s", 2)


# ---------------------------------------------------------------------- settings

@pytest.mark.parametrize("name, value", [
    ("timeout", float("inf")), ("timeout", float("nan")), ("timeout", 0), ("timeout", -1),
    ("timeout", 1e300), ("timeout", "30"), ("timeout", True),
    ("max_retries", -1), ("max_retries", 10**6), ("max_retries", 2.5), ("max_retries", "2"),
    ("max_retries", True),
    ("retry_backoff", -1), ("retry_backoff", float("inf")), ("retry_backoff", float("nan")),
    ("retry_backoff", 1e300), ("retry_backoff", None),
    ("cache_capacity", -1), ("cache_capacity", 0), ("cache_capacity", 1.5),
    ("cache_capacity", None),
    ("latest_ttl", -1), ("latest_ttl", float("nan")), ("latest_ttl", float("inf")),
    ("max_answer_bytes", 0), ("max_answer_bytes", -5), ("max_answer_bytes", float("inf")),
])
def test_a_setting_out_of_range_is_a_config_error(name, value):
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient("http://127.0.0.1:9", **{name: value})
    assert name in str(info.value) and repr(value) in str(info.value), str(info.value)


@pytest.mark.parametrize("key, value", [
    ("timeout", "inf"), ("timeout", "nan"), ("timeout", "-1"), ("timeout", "1e300"),
    ("max.retries", "-1"), ("max.retries", "1e9"), ("max.retries", "2.5"),
    ("cache.capacity", "-1"), ("cache.capacity", "0"),
    ("cache.latest.ttl.sec", "nan"), ("cache.latest.ttl.sec", "-3"),
])
def test_a_confluent_setting_out_of_range_is_a_config_error(key, value):
    """As Spark's schema.registry.* options give them: strings."""
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient.from_config({"url": "http://127.0.0.1:9", key: value})
    assert key in str(info.value) and value in str(info.value), str(info.value)


def test_settings_in_range_are_taken(server):
    client = SchemaRegistryClient.from_config({
        "url": server.url, "timeout": "0.5", "max.retries": "0", "cache.capacity": "1",
        "cache.latest.ttl.sec": "0"})
    assert (client.timeout, client.max_retries) == (0.5, 0)
    assert client.get_subjects() == []
    client = SchemaRegistryClient(server.url, timeout=86400, max_retries=20, retry_backoff=0,
                                  cache_capacity=10**9, latest_ttl=3600.5,
                                  max_answer_bytes=1)
    with pytest.raises(SchemaRegistryError, match="1 bytes"):
        client.get_subjects()                                   # b"[]" is 2 bytes
