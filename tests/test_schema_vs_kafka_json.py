"""kproto's declarations checked against the official Kafka JSON message definitions.

The JSON files are read at test time from the installed kafka-python package
(which ships Apache Kafka's ``common/message/*.json``), except where
``tests/kafka_json/`` holds a newer official file (APIs kafka-python does not
ship yet, such as KIP-848 and share groups: see tests/kafka_json/README.md for
where each came from). Every API and the embedded consumer protocol must agree
on versions, flexible versions and, field by field, name, type, versions,
nullability, tag, default and ignorability.

The sticky assignor's user data has no JSON file in Apache Kafka (only Java
``Schema`` objects in ``StickyAssignor.java``): its declaration is checked
against that Java field list, and against the JSON kafka-python ships for it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kproto.protocol.apis import (
    APIS,
    CONSUMER_ASSIGNMENT,
    CONSUMER_SUBSCRIPTION,
    REQUEST_HEADER,
    RESPONSE_HEADER,
    STICKY_ASSIGNOR_USER_DATA,
)
from kproto.protocol.schema import ALL_VERSIONS, NO_VERSIONS, Field, Message, VersionRange

load_json = pytest.importorskip("kafka.protocol.schemas.load_json").load_json

_PRIMS = {"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "string",
          "bytes", "records", "uuid"}


KAFKA_PYTHON = "kafka.protocol.schemas.resources"
VENDORED = Path(__file__).parent / "kafka_json"

#: Vendored definitions that go past kproto's newest version: compared up to that
#: version (what a newer version adds is left out). See tests/kafka_json/README.md.
VENDORED_PAST_KPROTO = {"ConsumerGroupDescribeResponse": 1}

#: Share-group APIs: v0 was Kafka 4.0's early-access format, removed in 4.1; kproto
#: starts where Kafka does. (Other APIs keep versions Kafka 4.0 dropped, from 0.)
FROM_KAFKAS_OLDEST = {76, 77, 78, 79}


def official(name: str, package: str | None = None) -> dict[str, Any]:
    """Kafka's definition of ``name``: the vendored file if there is one, else kafka-python's."""
    if package is None:
        package = "tests.kafka_json" if (VENDORED / f"{name}.json").exists() else KAFKA_PYTHON
    data = load_json(name, package)
    if name in VENDORED_PAST_KPROTO and package == "tests.kafka_json":
        data = up_to(data, VENDORED_PAST_KPROTO[name])
    return data


def up_to(data: dict[str, Any], newest: int) -> dict[str, Any]:
    """``data`` as it was at version ``newest``: later versions and their fields dropped."""
    def keep(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [dict(f, fields=keep(f["fields"])) if "fields" in f else f for f in fields
                if VersionRange.parse(f["versions"]).lo <= newest]

    lo = VersionRange.parse(data["validVersions"]).lo
    return dict(data, validVersions=f"{lo}-{newest}", fields=keep(data["fields"]))


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def expected_type(t: str) -> tuple[str, str | None]:
    if t.startswith("[]"):
        return ("array", t[2:]) if t[2:] in _PRIMS else ("struct_array", None)
    return (t, None) if t in _PRIMS else ("struct", None)


def parse_default(text: Any, typ: str) -> Any:
    if isinstance(text, (bool, int)):
        return text
    if text == "null":
        return None
    if text in ("true", "false"):
        return text == "true"
    if typ == "string":
        return text
    return int(text, 0)


def compare_fields(ours: tuple[Field, ...], theirs: list[dict[str, Any]], where: str) -> None:
    assert [f.name for f in ours] == [snake(t["name"]) for t in theirs], where
    for f, t in zip(ours, theirs, strict=True):
        here = f"{where}.{f.name}"
        assert (f.type, f.item) == expected_type(t["type"]), here
        assert f.versions == VersionRange.parse(t["versions"]), here
        nv = t.get("nullableVersions")
        assert f.nullable == (VersionRange.parse(nv) if nv else NO_VERSIONS) or \
            (nv == "0+" and f.nullable == ALL_VERSIONS), here
        assert f.tag == t.get("tag"), here
        if "tag" in t:
            assert VersionRange.parse(t.get("taggedVersions", t["versions"])) == f.versions, here
        assert f.ignorable == bool(t.get("ignorable")), here
        assert f.noflex == (t.get("flexibleVersions") == "none"), here
        if "default" in t:
            assert f.default_value() == parse_default(t["default"], f.type) or \
                f.type == "struct", here
        compare_fields(f.fields, t.get("fields", []), here)


def compare_message(ours: Message, name: str, *, min_from_zero: bool,
                    package: str | None = None) -> None:
    theirs = official(name, package)
    valid = VersionRange.parse(theirs["validVersions"])
    assert ours.versions.hi == valid.hi, f"{name}: newest version"
    # Kafka 4.0 dropped old versions from its definitions (KIP-896); kproto keeps
    # speaking them to older brokers, so its range may start lower.
    assert ours.versions.lo == (0 if min_from_zero else valid.lo), name
    assert ours.flexible == VersionRange.parse(theirs["flexibleVersions"]), name
    compare_fields(ours.fields, theirs["fields"], name)


@pytest.mark.parametrize("api_key", sorted(APIS), ids=lambda k: APIS[k].name)
def test_api_matches_kafka_json(api_key: int) -> None:
    api = APIS[api_key]
    req, resp = official(api.name + "Request"), official(api.name + "Response")
    assert req["apiKey"] == resp["apiKey"] == api_key
    from_zero = api_key not in FROM_KAFKAS_OLDEST
    compare_message(api.request, api.name + "Request", min_from_zero=from_zero)
    compare_message(api.response, api.name + "Response", min_from_zero=from_zero)


@pytest.mark.parametrize("path", sorted(VENDORED.glob("*.json")), ids=lambda p: p.stem)
def test_vendored_json_is_newer_and_used(path: Path) -> None:
    """Each vendored file is Apache-licensed, declares an API kproto has, and is
    newer than kafka-python's copy (else kafka-python's would do)."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("// Licensed to the Apache Software Foundation (ASF)"), path.name
    mine = official(path.stem)
    assert mine["apiKey"] in APIS and mine["name"] == path.stem
    assert APIS[mine["apiKey"]].name + mine["type"].title() == path.stem
    try:
        theirs = load_json(path.stem, KAFKA_PYTHON)
    except FileNotFoundError:
        return
    assert VersionRange.parse(mine["validVersions"]).hi > \
        VersionRange.parse(theirs["validVersions"]).hi, f"{path.name}: kafka-python's is as new"


def test_up_to_drops_later_versions() -> None:
    data = {"validVersions": "0-2", "fields": [
        {"name": "A", "versions": "0+"},
        {"name": "S", "versions": "0+", "fields": [{"name": "B", "versions": "1+"},
                                                  {"name": "C", "versions": "2+"}]},
        {"name": "D", "versions": "2+"}]}
    assert up_to(data, 1) == {"validVersions": "0-1", "fields": [
        {"name": "A", "versions": "0+"},
        {"name": "S", "versions": "0+", "fields": [{"name": "B", "versions": "1+"}]}]}


@pytest.mark.parametrize("message", [CONSUMER_SUBSCRIPTION, CONSUMER_ASSIGNMENT],
                         ids=lambda m: m.name)
def test_consumer_protocol_matches_kafka_json(message: Message) -> None:
    compare_message(message, message.name, min_from_zero=False)


def test_headers_match_kafka_json() -> None:
    # RequestHeader v0 (no client_id) was removed in Kafka 4.0; kproto never sends it.
    compare_message(REQUEST_HEADER, "RequestHeader", min_from_zero=True)
    compare_message(RESPONSE_HEADER, "ResponseHeader", min_from_zero=False)


# Apache Kafka declares the sticky assignor's user data only in Java, in
# clients/src/main/java/org/apache/kafka/clients/consumer/StickyAssignor.java
# (apache/kafka trunk 1eb7644349):
#     TOPIC_ASSIGNMENT = new Schema(new Field("topic", Type.STRING),
#                                   new Field("partitions", new ArrayOf(Type.INT32)));
#     STICKY_ASSIGNOR_USER_DATA_V0 = new Schema(
#         new Field("previous_assignment", new ArrayOf(TOPIC_ASSIGNMENT)));
#     STICKY_ASSIGNOR_USER_DATA_V1 = new Schema(
#         new Field("previous_assignment", new ArrayOf(TOPIC_ASSIGNMENT)),
#         new Field("generation", Type.INT32));
# Type.STRING and ArrayOf are the classic, non-nullable types; no version prefix.
_JAVA_TOPIC_ASSIGNMENT = [("topic", "STRING"), ("partitions", "ARRAY(INT32)")]
JAVA_STICKY_USER_DATA = {
    0: [("previous_assignment", ("ARRAY", _JAVA_TOPIC_ASSIGNMENT))],
    1: [("previous_assignment", ("ARRAY", _JAVA_TOPIC_ASSIGNMENT)), ("generation", "INT32")],
}


def java_schema(fields: tuple[Field, ...], version: int) -> list[tuple[str, Any]]:
    """Our fields on the wire at ``version``, written as Java ``Schema`` fields."""
    out: list[tuple[str, Any]] = []
    for f in fields:
        if version not in f.versions:
            continue
        assert f.tag is None and not f.nullable, f.name
        if f.type == "struct_array":
            out.append((f.name, ("ARRAY", java_schema(f.fields, version))))
        elif f.type == "array":
            out.append((f.name, f"ARRAY({str(f.item).upper()})"))
        else:
            out.append((f.name, f.type.upper()))
    return out


def test_sticky_user_data_matches_java_schema() -> None:
    ours = STICKY_ASSIGNOR_USER_DATA
    assert ours.versions == VersionRange(0, 1) and not ours.flexible
    for version, fields in JAVA_STICKY_USER_DATA.items():
        assert java_schema(ours.fields, version) == fields, f"v{version}"


def test_sticky_user_data_matches_kafka_python_json() -> None:
    # kafka-python's StickyAssignorUserData.json restates the Java schema as a
    # message definition (names, versions, generation default -1).
    compare_message(STICKY_ASSIGNOR_USER_DATA, "StickyAssignorUserData", min_from_zero=True,
                    package="kafka.coordinator.assignors.sticky")
