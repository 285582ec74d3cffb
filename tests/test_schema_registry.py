"""kproto.schema_registry against the test registry (kproto.testing.SchemaRegistryServer),
against the JSON answers quoted in Confluent's API reference (replayed as canned
answers), and the test registry against confluent-kafka's own client."""

from __future__ import annotations

import pickle
import ssl

import pytest

from kproto.errors import ConfigError, SchemaRegistryError
from kproto.schema_registry import RegisteredSchema, SchemaRegistryClient, as_client
from kproto.testing import SchemaRegistryServer

USER = ('{"type":"record","name":"User","fields":[{"name":"name","type":"string"},'
        '{"name":"age","type":["null","int"],"default":null}]}')
USER_V2 = ('{"type":"record","name":"User","fields":[{"name":"name","type":"string"},'
           '{"name":"age","type":["null","int"],"default":null},'
           '{"name":"email","type":"string","default":""}]}')
NOT_BACKWARD = '{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}'


@pytest.fixture
def registry():
    with SchemaRegistryServer() as server:
        yield server


def test_register_get_versions_latest_lookup(registry):
    client = SchemaRegistryClient(registry.url)
    first = client.register("users-value", USER)
    assert client.register("users-value", USER) == first          # same schema, same id
    second = client.register("users-value", USER_V2)
    assert second != first
    assert client.register("other-value", USER) == first          # ids are global
    assert client.get_subjects() == ["other-value", "users-value"]
    assert client.get_versions("users-value") == [1, 2]
    latest = client.get_latest("users-value")
    assert (latest.schema_id, latest.version, latest.subject) == (second, 2, "users-value")
    assert client.get_version("users-value", 1).schema == USER
    assert client.get_schema(first).schema == USER
    assert client.get_schema(first).schema_type == "AVRO"
    found = client.lookup("users-value", USER_V2)
    assert (found.schema_id, found.version) == (second, 2)


def test_compatibility_and_config(registry):
    client = SchemaRegistryClient(registry.url)
    client.register("users-value", USER)
    assert client.get_compatibility() == "BACKWARD"
    assert client.test_compatibility("users-value", USER_V2) is True
    assert client.test_compatibility("users-value", NOT_BACKWARD) is False
    with pytest.raises(SchemaRegistryError) as info:
        client.register("users-value", NOT_BACKWARD)
    assert info.value.status == 409 and info.value.subject == "users-value"
    assert "incompatible" in str(info.value) and "subject=users-value" in str(info.value)
    assert client.set_compatibility("none", "users-value") == "NONE"
    assert client.get_compatibility("users-value") == "NONE"
    assert client.register("users-value", NOT_BACKWARD) > 0
    assert client.delete_subject("users-value") == [1, 2]
    assert client.get_subjects() == []


def test_errors_name_url_subject_id_and_registry_code(registry):
    client = SchemaRegistryClient(registry.url, max_retries=0)
    with pytest.raises(SchemaRegistryError) as info:
        client.get_schema(42)
    err = info.value
    assert (err.status, err.error_code, err.schema_id) == (404, 40403, 42)
    assert f"{registry.url}/schemas/ids/42" in str(err) and "Schema not found" in str(err)
    assert not err.retriable
    with pytest.raises(SchemaRegistryError) as info:
        client.get_latest("nope-value")
    assert info.value.error_code == 40401 and "subject=nope-value" in str(info.value)
    client.register("s", USER)
    with pytest.raises(SchemaRegistryError) as info:
        client.get_version("s", 7)
    assert info.value.error_code == 40402 and info.value.version == 7
    with pytest.raises(SchemaRegistryError) as info:
        client.register("s", "{not json")
    assert info.value.error_code == 42201
    back = pickle.loads(pickle.dumps(info.value))
    assert (back.error_code, back.subject, str(back)) == (42201, "s", str(info.value))


def test_cached_answers_travel_with_the_pickled_client(registry):
    client = SchemaRegistryClient(registry.url)
    schema_id = client.register("users-value", USER)
    asked = len(registry.requests)
    assert client.get_schema(schema_id).schema == USER          # known from registering
    assert len(registry.requests) == asked
    other = SchemaRegistryClient(registry.url)
    other.get_schema(schema_id)
    other.get_schema(schema_id)
    assert len(registry.requests) == asked + 1
    shipped = pickle.loads(pickle.dumps(other))                  # as to a Spark executor
    assert shipped.get_schema(schema_id).schema == USER
    assert len(registry.requests) == asked + 1
    shipped.get_latest("users-value")
    shipped.get_latest("users-value")                            # latest: asked each time
    assert len(registry.requests) == asked + 3


def test_retries_failing_answers_then_fails_over_to_the_next_url(registry):
    client = SchemaRegistryClient(registry.url, max_retries=2, retry_backoff=0.01)
    schema_id = client.register("s", USER)
    registry.fail_next[:] = [(503, 50001, "Error in the backend datastore")] * 2
    assert client.get_version("s", 1).schema_id == schema_id    # third try answers
    registry.fail_next[:] = [(503, 50001, "Error in the backend datastore")] * 3
    with pytest.raises(SchemaRegistryError) as info:
        client.get_version("s", "latest")
    assert info.value.retriable and info.value.error_code == 50001
    # a dead first URL (nothing listens on port 9 of loopback): the second answers
    both = SchemaRegistryClient(f"http://127.0.0.1:9,{registry.url}", max_retries=0)
    assert both.get_latest("s").schema == USER
    dead = SchemaRegistryClient("http://127.0.0.1:9", max_retries=0, timeout=2)
    with pytest.raises(SchemaRegistryError) as info:
        dead.get_schema(1)
    assert info.value.status is None and info.value.retriable
    assert "unreachable" in str(info.value) and "127.0.0.1:9" in str(info.value)


def test_basic_auth_from_option_url_or_confluent_settings():
    with SchemaRegistryServer(users={"alice": "s3cret:x"}) as server:
        with pytest.raises(SchemaRegistryError) as info:
            SchemaRegistryClient(server.url).get_subjects()
        assert info.value.status == 401
        assert SchemaRegistryClient(server.url, basic_auth="alice:s3cret:x").get_subjects() == []
        host = server.url.split("//")[1]
        assert SchemaRegistryClient(f"http://alice:s3cret%3Ax@{host}").get_subjects() == []
        client = as_client({"url": server.url, "basic.auth.user.info": "alice:s3cret:x",
                            "basic.auth.credentials.source": "USER_INFO"})
        assert client.get_subjects() == []
    with pytest.raises(ConfigError):
        SchemaRegistryClient.from_config({"url": "http://x", "sasl.mechanism": "PLAIN"})
    with pytest.raises(ConfigError):
        SchemaRegistryClient("ftp://registry")


def test_tls_with_the_ca_given(tmp_path):
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with SchemaRegistryServer(ssl_context=server_context) as server:
        assert server.url.startswith("https://")
        client = SchemaRegistryClient(server.url, ssl_ca_location=str(ca_file))
        assert client.register("s", USER) == 1
        with pytest.raises(SchemaRegistryError) as info:        # not trusted without the CA
            SchemaRegistryClient(server.url, max_retries=0).get_subjects()
        assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
        loose = SchemaRegistryClient(server.url, ssl_verify=False)
        assert loose.get_subjects() == ["s"]


# The example answers of Confluent's API reference (docs/develop/api.rst), as quoted there.
DOCS_ANSWERS = {
    ("GET", "/schemas/ids/1"): (200, {"schema": "{\"type\": \"string\"}"}),
    ("GET", "/subjects"): (200, ["subject1", "subject2"]),
    ("GET", "/subjects/test/versions"): (200, [1, 2, 3, 4]),
    ("GET", "/subjects/test/versions/1"): (200, {"name": "test", "version": 1,
                                                 "schema": "{\"type\": \"string\"}"}),
    ("POST", "/subjects/test/versions"): (200, {"id": 1}),
    ("POST", "/subjects/test"): (200, {"subject": "test", "id": 1, "version": 3,
                                       "schema": "{\"type\": \"string\"}"}),
    ("POST", "/compatibility/subjects/test/versions/latest"): (200, {"is_compatible": True}),
    ("POST", "/compatibility/subjects/old/versions/latest"): (200, {"is_compatible": "true"}),
    ("GET", "/config"): (200, {"compatibilityLevel": "FULL"}),
    ("PUT", "/config"): (200, {"compatibility": "FULL"}),
    ("GET", "/schemas/ids/7"): (422, {"error_code": 422, "message": "schema may not be empty"}),
}


def test_the_answers_quoted_in_confluents_api_reference():
    with SchemaRegistryServer(canned=DOCS_ANSWERS) as server:
        client = SchemaRegistryClient(server.url, max_retries=0)
        assert client.get_schema(1) == RegisteredSchema('{"type": "string"}', "AVRO", 1)
        assert client.get_subjects() == ["subject1", "subject2"]
        assert client.get_versions("test") == [1, 2, 3, 4]
        old = client.get_version("test", 1)       # the old answer names no id
        assert (old.schema, old.version, old.subject, old.schema_id) == (
            '{"type": "string"}', 1, "test", None)
        assert client.register("test", '{"type": "string"}') == 1
        found = client.lookup("test", '{"type": "string"}')
        assert (found.schema_id, found.version, found.subject) == (1, 3, "test")
        assert client.test_compatibility("test", '{"type": "string"}') is True
        assert client.test_compatibility("old", '{"type": "string"}') is True
        assert client.get_compatibility() == "FULL"
        assert client.set_compatibility("full") == "FULL"
        with pytest.raises(SchemaRegistryError) as info:
            client.get_schema(7)
        assert (info.value.status, info.value.error_code) == (422, 422)
        assert "schema may not be empty" in str(info.value)
        methods = [m for m, _ in server.requests]
        assert methods.count("POST") == 4 and methods.count("PUT") == 1


def test_confluent_kafkas_client_works_against_the_test_registry(registry):
    """The fixture serves what confluent-kafka's own client expects."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry import SchemaRegistryClient as Confluent

    with Confluent({"url": registry.url}) as theirs:
        schema_id = theirs.register_schema("users-value", Schema(USER, "AVRO"))
        ours = SchemaRegistryClient(registry.url)
        assert ours.get_schema(schema_id).schema == USER
        assert theirs.get_latest_version("users-value").schema_id == schema_id
        assert theirs.get_schema(schema_id).schema_str == USER
        json_id = ours.register("j-value", '{"type": "object"}', "JSON")
        assert theirs.get_schema(json_id).schema_type == "JSON"
        assert theirs.test_compatibility("users-value", Schema(USER_V2, "AVRO")) is True
