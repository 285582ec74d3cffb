"""Golden bytes, error paths and edge cases of the protocol engine.

Expected bytes are built field by field with struct.pack (one commented field
a line) from the wire rules in the protocol guide, or are public vectors
(PROTOCOL_NOTES §7): they do not come from kproto's own encoder.
"""

from __future__ import annotations

import random
import struct
import uuid

import pytest

from kproto import protocol
from kproto.errors import EncodeError, KprotoError, ProtocolError, UnsupportedVersionError
from kproto.protocol.engine import codec_for
from kproto.protocol.schema import message

# kafka-python test/protocol/metadata/test_api_versions.py: the v0-format answer a
# broker gives to an ApiVersions request at a version it does not support.
API_VERSIONS_V0_ERROR_FRAME = bytes.fromhex(
    "00000010" "00000001" "0023" "00000001" "0012" "0000" "0003")


@pytest.mark.parametrize("version", range(0, 5))
def test_unsupported_version_answer_decodes_for_every_requested_version(version: int) -> None:
    corr, body = protocol.decode_response(18, version, API_VERSIONS_V0_ERROR_FRAME, framed=True)
    assert corr == 1
    assert body["error_code"] == 35
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 3}]
    if version:
        assert protocol.api_versions_retry(body, version) == min(version - 1, 3)


def test_api_versions_v3_request_frame() -> None:
    expected = b"".join([
        struct.pack(">i", 31),              # size
        struct.pack(">h", 18),              # request_api_key: ApiVersions
        struct.pack(">h", 3),               # request_api_version
        struct.pack(">i", 7),               # correlation_id
        struct.pack(">h", 6), b"kproto",    # client_id: int16 length even in header v2
        b"\x00",                            # header tagged fields: none
        b"\x07", b"kproto",                 # client_software_name: compact string (len+1)
        b"\x06", b"0.1.0",                  # client_software_version
        b"\x00",                            # body tagged fields: none
    ])
    frame = protocol.encode_request(18, 3, 7, "kproto", {
        "client_software_name": "kproto", "client_software_version": "0.1.0"})
    assert frame == expected
    header, body = protocol.decode_request(frame[4:])
    assert header == {"request_api_key": 18, "request_api_version": 3, "correlation_id": 7,
                      "client_id": "kproto"}
    assert body == {"client_software_name": "kproto", "client_software_version": "0.1.0"}


def test_metadata_v0_request_frame_header_v1() -> None:
    expected = b"".join([
        struct.pack(">i", 2 + 2 + 4 + 2 + 1 + 4 + 2 + 1),
        struct.pack(">hhi", 3, 0, 1),       # Metadata v0, correlation 1
        struct.pack(">h", 1), b"c",         # client_id
        struct.pack(">i", 1),               # topics: 1
        struct.pack(">h", 1), b"t",         # name
    ])
    assert protocol.encode_request(3, 0, 1, "c", {"topics": [{"name": "t"}]}) == expected


def test_null_client_id() -> None:
    frame = protocol.encode_request(18, 0, 1, None, {})
    assert frame == struct.pack(">ihhih", 10, 18, 0, 1, -1)
    assert protocol.decode_request(frame[4:])[0]["client_id"] is None


@pytest.mark.parametrize(("topics", "wire"), [
    (None, b"\x00"),                        # compact null array: 0
    ([], b"\x01"),                          # compact empty array: N+1 = 1
])
def test_compact_null_and_empty_arrays(topics, wire) -> None:
    body = protocol.encode(3, 9, "request", {"topics": topics})
    # allow_auto_topic_creation, include_cluster_/topic_authorized_operations, tags
    assert body == wire + b"\x01" + b"\x00" + b"\x00" + b"\x00"
    assert protocol.decode(3, 9, "request", body)["topics"] == topics


@pytest.mark.parametrize(("value", "wire"), [
    (None, b"\x00"),                        # compact null string
    ("", b"\x01"),                          # compact empty string
    ("é", b"\x03\xc3\xa9"),                 # length counts UTF-8 bytes
])
def test_compact_nullable_strings(value, wire) -> None:
    # DescribeGroups v5 response: groups[].error_message is compact nullable in v6 only,
    # so use JoinGroup v6 request's group_instance_id (compact nullable string).
    body = protocol.encode(11, 6, "request", {"group_instance_id": value})
    # group_id "", session_timeout, rebalance_timeout, member_id "", then the field
    prefix = b"\x01" + struct.pack(">ii", 0, -1) + b"\x01"
    assert body.startswith(prefix + wire)
    assert protocol.decode(11, 6, "request", body)["group_instance_id"] == value


def test_classic_nullable_string_and_bytes() -> None:
    body = protocol.encode(36, 0, "response", {"error_message": None, "auth_bytes": b"ab"})
    assert body == struct.pack(">hh", 0, -1) + struct.pack(">i", 2) + b"ab"


def fetch_v12_partition_with_leader_tag() -> bytes:
    return b"".join([
        struct.pack(">i", 0),               # throttle_time_ms
        struct.pack(">h", 0),               # error_code
        struct.pack(">i", 0),               # session_id
        b"\x02",                            # responses: 1 (compact)
        b"\x02t",                           # topic "t"
        b"\x02",                            # partitions: 1
        struct.pack(">ihqqq", 0, 0, 10, 10, 0),  # index, error, hwm, lso, log start
        b"\x01",                            # aborted_transactions: empty
        struct.pack(">i", -1),              # preferred_read_replica
        b"\x01",                            # records: empty
        b"\x01",                            # partition tagged fields: 1
        b"\x01", b"\x08",                   #   tag 1 (current_leader), 8 bytes
        struct.pack(">ii", 3, 7),           #   leader_id 3, leader_epoch 7
        b"\x00",                            #   current_leader's own tagged fields
        b"\x00",                            # topic tagged fields
        b"\x00",                            # top-level tagged fields
    ])


def test_tagged_struct_layout() -> None:
    wire = fetch_v12_partition_with_leader_tag()
    wire = wire[:-1]  # current_leader carries its own tag section: size 9, not 8
    wire = wire.replace(b"\x01\x01\x08", b"\x01\x01\x09") + b"\x00"
    body = protocol.decode(1, 12, "response", wire)
    part = body["responses"][0]["partitions"][0]
    assert part["current_leader"] == {"leader_id": 3, "leader_epoch": 7}
    assert part["diverging_epoch"] == {"epoch": -1, "end_offset": -1}  # absent: default
    assert part["records"] == b""
    assert protocol.encode(1, 12, "response", body) == wire


def test_tagged_field_with_wrong_size_is_an_error() -> None:
    with pytest.raises(ProtocolError, match=r"FetchResponse v12: .*current_leader"):
        protocol.decode(1, 12, "response", fetch_v12_partition_with_leader_tag())


def test_unknown_tags_are_preserved() -> None:
    body = b"".join([
        b"\x07kproto", b"\x06" b"0.1.0",    # ApiVersions v3 request fields
        b"\x02",                            # two tagged fields, ascending
        b"\x05\x02\xaa\xbb",                # tag 5, 2 bytes
        b"\x40\x00",                        # tag 64 (uvarint 40), 0 bytes
    ])
    decoded = protocol.decode(18, 3, "request", body)
    assert decoded[protocol.UNKNOWN_TAGS] == {5: b"\xaa\xbb", 64: b""}
    assert protocol.encode(18, 3, "request", decoded) == body


def test_out_of_order_tags_rejected() -> None:
    body = b"\x07kproto\x060.1.0" + b"\x02" + b"\x05\x00" + b"\x04\x00"
    with pytest.raises(ProtocolError, match="out of order"):
        protocol.decode(18, 3, "request", body)


def test_unknown_tag_colliding_with_known_field_refused() -> None:
    with pytest.raises(EncodeError, match="tag 0"):
        protocol.encode(3, 12, "response", {protocol.UNKNOWN_TAGS: {}, "topics": [],
                                             "brokers": [], "cluster_id": None})  # no tags: ok
        protocol.encode(1, 12, "request", {protocol.UNKNOWN_TAGS: {0: b"x"}})


def test_ignorable_rule() -> None:
    # allow_auto_topic_creation (v4+) is not ignorable: false cannot be written at v3 ...
    with pytest.raises(EncodeError, match=r"MetadataRequest v3: .*allow_auto_topic_creation"):
        protocol.encode(3, 3, "request", {"topics": None, "allow_auto_topic_creation": False})
    # ... its default (true) can, and ignorable fields are dropped silently.
    protocol.encode(3, 3, "request", {"topics": None, "allow_auto_topic_creation": True})
    assert protocol.encode(0, 3, "response", {"responses": [{
        "name": "t", "topic_id": uuid.uuid4(), "partition_responses": []}]}) == \
        protocol.encode(0, 3, "response", {"responses": [{"name": "t", "partition_responses": []}]})


def test_encode_errors_name_the_field() -> None:
    with pytest.raises(EncodeError, match=r"field topics\[1\]\.name: expected str"):
        protocol.encode(3, 4, "request", {"topics": [{"name": "a"}, {"name": 1}]})
    with pytest.raises(EncodeError, match="null is not allowed"):
        protocol.encode(3, 0, "request", {"topics": None})  # v0 cannot say "all topics" as null
    with pytest.raises(EncodeError, match="out of range for int16"):
        protocol.encode(12, 0, "response", {"error_code": 40000})
    with pytest.raises(EncodeError, match="unknown field"):
        protocol.encode(12, 0, "request", {"group_id": "g", "generation": 1})
    with pytest.raises(EncodeError, match="out of range for int32"):
        protocol.encode(12, 0, "request", {"generation_id": 2**31})
    with pytest.raises(UnsupportedVersionError):
        protocol.encode(3, 14, "request", {})
    with pytest.raises(UnsupportedVersionError):
        protocol.encode(99, 0, "request", {})


def test_decode_error_names_api_version_field_and_offset() -> None:
    body = protocol.encode(3, 1, "response", {"brokers": [{"node_id": 1, "host": "h", "port": 9}],
                                              "topics": []})
    with pytest.raises(ProtocolError) as info:
        protocol.decode(3, 1, "response", body[:9])
    msg = str(info.value)
    assert "MetadataResponse v1" in msg and "field brokers[0].host" in msg
    assert info.value.offset == 8 and msg.endswith("(at byte offset 8)")
    assert isinstance(info.value, ValueError)


def test_trailing_bytes() -> None:
    # Ignored in responses, like Kafka's clients; an error when strict and in requests.
    assert protocol.decode(12, 0, "response", b"\x00\x00\x00")["error_code"] == 0
    with pytest.raises(ProtocolError, match="unexpected bytes"):
        protocol.decode(12, 0, "response", b"\x00\x00\x00", strict=True)
    frame = protocol.encode_request(12, 0, 1, "c", {"group_id": "g"})
    with pytest.raises(ProtocolError, match="unexpected bytes"):
        protocol.decode_request(frame[4:] + b"\x00")


def test_bogus_array_count_rejected_without_allocation() -> None:
    with pytest.raises(ProtocolError, match="claims 2147483647 elements"):
        protocol.decode(3, 1, "response", struct.pack(">i", 2**31 - 1))


@pytest.mark.parametrize("version", [0, 4, 9, 12])
def test_every_truncation_and_mutation_raises_protocol_error(version: int) -> None:
    rng = random.Random(version)
    body = protocol.encode(3, version, "response", {
        "brokers": [{"node_id": 1, "host": "hôst", "port": 9092, "rack": None}],
        "cluster_id": "c" if version >= 2 else None,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "leader_id": 1,
                                                 "replica_nodes": [1], "isr_nodes": [1]}]}],
    })
    for n in range(len(body)):
        with pytest.raises(ProtocolError):
            protocol.decode(3, version, "response", body[:n])
    for _ in range(500):
        mutated = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        try:
            protocol.decode(3, version, "response", bytes(mutated))
        except ProtocolError:
            pass  # the only acceptable failure


NULLABLE_STRUCT = message("Probe", "0-1", "1+", """
    leader            {}        0+    null
      id              int32     0+    default=-1
    after             int8      0+
""")


@pytest.mark.parametrize("version", [0, 1])
def test_nullable_struct_marker(version: int) -> None:
    c = codec_for(NULLABLE_STRUCT, version)
    tail = b"\x00" if version else b""
    assert c.encode({"leader": None, "after": 5}) == b"\xff\x05" + tail
    present = c.encode({"leader": {"id": 3}, "after": 5})
    assert present == b"\x01" + struct.pack(">i", 3) + tail + b"\x05" + tail
    assert c.decode(present)[0] == {"leader": {"id": 3}, "after": 5}
    assert c.decode(b"\xff\x05" + tail)[0] == {"leader": None, "after": 5}
    with pytest.raises(ProtocolError, match="marker 7"):
        c.decode(b"\x07\x05" + tail)


def test_consumer_protocol_lenient_decode() -> None:
    # A version-1 subscription without owned_partitions, as bsm/sarama-cluster sent it.
    short = struct.pack(">hih", 1, 1, 1) + b"t" + struct.pack(">i", -1)
    got = protocol.decode_subscription(short)
    assert got["version"] == 1 and got["topics"] == ["t"] and got["owned_partitions"] == []
    # A future version 9 with extra trailing fields reads as v3.
    v3 = protocol.encode_subscription({"topics": ["t"], "rack_id": "r1"}, 3)
    got = protocol.decode_subscription(b"\x00\x09" + v3[2:] + b"future")
    assert got["version"] == 9 and got["rack_id"] == "r1"
    with pytest.raises(ProtocolError):
        protocol.decode_subscription(b"\x00")
    assert issubclass(ProtocolError, KprotoError)
