"""The sans-I/O connection state machine, byte by byte (no sockets)."""

from __future__ import annotations

import pytest

from kproto import protocol
from kproto.errors import KafkaConnectionError, ProtocolError
from kproto.net import Connection
from kproto.protocol import ApiKey

VERSIONS = {ApiKey.METADATA: 12, ApiKey.HEARTBEAT: 4, ApiKey.PRODUCE: 9,
            ApiKey.API_VERSIONS: 3, ApiKey.FETCH: 12}


def answer(req, fields: dict) -> bytes:
    return protocol.encode_response(req.api_key, req.version, req.correlation_id, fields)


def metadata_body(n: int) -> dict:
    return {"throttle_time_ms": 0, "brokers": [{"node_id": n, "host": "h", "port": 9}],
            "cluster_id": "c", "controller_id": 1, "topics": []}


def test_pipelined_requests_answered_in_order_whatever_the_chunking() -> None:
    conn = Connection(versions=VERSIONS)
    reqs = [conn.send(ApiKey.METADATA, {"topics": None}) for _ in range(3)]
    sent = conn.data_to_send()
    assert conn.data_to_send() == b"" and conn.in_flight == 3
    # the bytes on the wire are exactly three framed requests with ids 1, 2, 3
    pos = 0
    for r in reqs:
        size = int.from_bytes(sent[pos:pos + 4], "big")
        header, _ = protocol.decode_request(sent[pos + 4:pos + 4 + size])
        assert header["correlation_id"] == r.correlation_id
        pos += 4 + size
    assert pos == len(sent)
    wire = b"".join(answer(r, metadata_body(i)) for i, r in enumerate(reqs))
    for step in (1, 3, 7, len(wire)):
        conn2 = Connection(versions=VERSIONS)
        reqs2 = [conn2.send(ApiKey.METADATA, {"topics": None}) for _ in range(3)]
        got = []
        for i in range(0, len(wire), step):
            got += conn2.receive_data(wire[i:i + step])
        assert [g.request for g in got] == reqs2
        assert [g.body["brokers"][0]["node_id"] for g in got] == [0, 1, 2]
        assert conn2.in_flight == 0


def test_acks_0_produce_expects_no_answer() -> None:
    conn = Connection(versions=VERSIONS)
    conn.send(ApiKey.PRODUCE, {"acks": 0, "timeout_ms": 1, "topic_data": []},
              expect_response=False)
    hb = conn.send(ApiKey.HEARTBEAT, {"group_id": "g"})
    assert conn.in_flight == 1
    [resp] = conn.receive_data(answer(hb, {"error_code": 0}))
    assert resp.request is hb and resp.body["error_code"] == 0


def test_raw_responses_and_decode_errors_keep_the_stream_in_step() -> None:
    conn = Connection(versions=VERSIONS)
    raw_req = conn.send(ApiKey.METADATA, {"topics": None}, raw=True)
    bad_req = conn.send(ApiKey.HEARTBEAT, {"group_id": "g"})
    good = conn.send(ApiKey.HEARTBEAT, {"group_id": "g"})
    raw = answer(raw_req, metadata_body(5))
    # a heartbeat answer whose body is cut short: decodable frame, undecodable body
    bad = bytearray(answer(bad_req, {"error_code": 0}))
    bad[3] -= 1
    del bad[-1]
    out = conn.receive_data(raw + bytes(bad) + answer(good, {"error_code": 7}))
    assert isinstance(out[0].body, memoryview)
    assert protocol.decode(3, 12, "response", out[0].body)["brokers"][0]["node_id"] == 5
    assert isinstance(out[1].error, ProtocolError) and out[1].body is None
    assert out[2].body["error_code"] == 7


def test_correlation_mismatch_and_oversize_close_the_connection() -> None:
    conn = Connection(versions=VERSIONS)
    req = conn.send(ApiKey.HEARTBEAT, {"group_id": "g"})
    wrong = protocol.encode_response(12, req.version, req.correlation_id + 5, {})
    with pytest.raises(ProtocolError, match="correlation id"):
        conn.receive_data(wrong)
    assert conn.closed
    with pytest.raises(KafkaConnectionError):
        conn.send(ApiKey.HEARTBEAT, {"group_id": "g"})

    small = Connection(versions=VERSIONS, max_response_bytes=100)
    small.send(ApiKey.HEARTBEAT, {"group_id": "g"})
    with pytest.raises(ProtocolError, match="outside 4..100"):
        small.receive_data((10_000).to_bytes(4, "big"))
    unsolicited = Connection(versions=VERSIONS)
    with pytest.raises(ProtocolError, match="nothing is in flight"):
        unsolicited.receive_data(protocol.encode_response(12, 0, 1, {}))


def test_client_side_throttle_from_kip_219_versions() -> None:
    conn = Connection(versions=VERSIONS)
    req = conn.send(ApiKey.METADATA, {"topics": None})               # v12: client throttles
    body = dict(metadata_body(1), throttle_time_ms=250)
    [resp] = conn.receive_data(answer(req, body), now=100.0)
    assert resp.throttle_ms == 250 and conn.throttled_until == pytest.approx(100.25)
    old = Connection(versions={ApiKey.METADATA: 5})                 # v5: broker throttled
    req = old.send(ApiKey.METADATA, {"topics": None})
    old.receive_data(protocol.encode_response(3, 5, req.correlation_id, body), now=100.0)
    assert old.throttled_until == 0.0


def test_close_returns_unanswered_requests() -> None:
    conn = Connection(versions=VERSIONS)
    reqs = [conn.send(ApiKey.HEARTBEAT, {"group_id": "g"}) for _ in range(2)]
    assert conn.close("broker went away") == reqs
    with pytest.raises(KafkaConnectionError, match="broker went away"):
        conn.receive_data(b"")


def test_api_versions_error_answers_do_not_throttle() -> None:
    # librdkafka's mock answers ApiVersions v3+ with error 35 in a body whose bytes after
    # the error code, read at v3, look like a throttle of ~20 minutes.
    conn = Connection(versions=VERSIONS)
    req = conn.send(ApiKey.API_VERSIONS, {}, version=3)
    body = bytes.fromhex("0023" "01" "0012" "0000" "0002" "00000000")
    frame = (4 + len(body)).to_bytes(4, "big") + req.correlation_id.to_bytes(4, "big") + body
    [resp] = conn.receive_data(frame, now=5.0)
    assert resp.body["error_code"] == 35
    assert conn.throttled_until == 0.0


def test_whole_answers_in_a_read_are_not_copied() -> None:
    """A raw body is a view of the bytes read (a 1 MB Fetch or ShareFetch answer
    copied twice more cost as much as decoding it); answers split across reads, and
    a caller's mutable buffer, are copied once; the bodies stay right either way."""
    conn = Connection(versions=VERSIONS)
    reqs = [conn.send(ApiKey.HEARTBEAT, {"group_id": "g"}, raw=True) for _ in range(3)]
    bodies = [protocol.encode(ApiKey.HEARTBEAT, 4, "response", {"error_code": 25 + i})
              for i in range(3)]
    wire = [answer(r, {"error_code": 25 + i}) for i, r in enumerate(reqs)]
    chunk = wire[0] + wire[1] + wire[2][:10]
    first, second = conn.receive_data(chunk)
    assert first.body.obj is chunk and second.body.obj is chunk      # views, no copy
    assert bytes(first.body) == bodies[0] and bytes(second.body) == bodies[1]
    mutable = bytearray(wire[2][10:])
    [third] = conn.receive_data(mutable)
    mutable[:] = b"\xff" * len(mutable)                               # the caller reuses it
    assert bytes(third.body) == bodies[2] and conn.in_flight == 0
