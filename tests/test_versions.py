"""Version negotiation as a pure function of a broker's ApiVersions answer."""

from __future__ import annotations

import pytest

from kproto import protocol
from kproto.errors import UnsupportedVersionError
from kproto.protocol import API_VERSIONS, ApiKey

# What Apache Kafka 3.9 and 4.1 brokers advertise (PROTOCOL_NOTES §1).
KAFKA_3_9 = {0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 6),
             11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1),
             18: (0, 4), 19: (0, 7), 20: (0, 6), 22: (0, 5), 36: (0, 2)}
KAFKA_4_1 = {0: (0, 13), 1: (4, 18), 2: (1, 10), 3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 6),
             11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1),
             18: (0, 4), 19: (2, 7), 20: (1, 6), 22: (0, 5), 36: (0, 2), 68: (0, 1)}


def test_our_ranges_cover_current_kafka() -> None:
    assert API_VERSIONS[ApiKey.PRODUCE] == (0, 13)
    assert API_VERSIONS[ApiKey.FETCH] == (0, 18)
    assert API_VERSIONS[ApiKey.METADATA] == (0, 13)
    assert set(API_VERSIONS) == {int(k) for k in ApiKey}
    for key, (lo, hi) in KAFKA_4_1.items():
        if key in API_VERSIONS:
            assert API_VERSIONS[key][0] <= lo and API_VERSIONS[key][1] >= hi


def test_highest_common_version() -> None:
    assert protocol.negotiate(KAFKA_3_9) == {k: hi for k, (lo, hi) in KAFKA_3_9.items()}
    chosen = protocol.negotiate(KAFKA_4_1)
    assert chosen[ApiKey.FETCH] == 18 and chosen[ApiKey.PRODUCE] == 13
    assert 68 not in chosen  # an API kproto does not speak is left out


def test_lower_client_maximum_wins() -> None:
    ours = {**API_VERSIONS, ApiKey.FETCH: (0, 11)}
    assert protocol.negotiate(KAFKA_4_1, ours)[ApiKey.FETCH] == 11


def test_kafka_4_produce_floor_quirk() -> None:
    # 4.x advertises Produce min 0 but closes the connection on v0-2.
    assert protocol.common_ranges(KAFKA_4_1)[ApiKey.PRODUCE] == (3, 13)
    assert protocol.common_ranges(KAFKA_3_9)[ApiKey.PRODUCE] == (0, 11)
    ours = {**API_VERSIONS, ApiKey.PRODUCE: (0, 2)}
    assert ApiKey.PRODUCE not in protocol.negotiate(KAFKA_4_1, ours)
    assert protocol.negotiate(KAFKA_3_9, ours)[ApiKey.PRODUCE] == 2


def test_no_overlap_and_pick() -> None:
    chosen = protocol.negotiate({ApiKey.FETCH: (19, 20), ApiKey.METADATA: (0, 1)})
    assert chosen == {ApiKey.METADATA: 1}
    assert protocol.pick(chosen, ApiKey.METADATA) == 1
    with pytest.raises(UnsupportedVersionError, match="Fetch"):
        protocol.pick(chosen, ApiKey.FETCH)


def test_accepts_a_decoded_api_versions_body() -> None:
    body = protocol.decode(18, 3, "response", protocol.encode(18, 3, "response", {
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                     for k, (lo, hi) in KAFKA_4_1.items()]}))
    assert protocol.negotiate(body) == protocol.negotiate(KAFKA_4_1)


def test_api_versions_retry() -> None:
    error = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    assert protocol.api_versions_retry(error, 4) == 2
    assert protocol.api_versions_retry({"error_code": 35, "api_keys": []}, 4) == 0
    assert protocol.api_versions_retry({"error_code": 0, "api_keys": []}, 4) is None
    assert protocol.api_versions_retry(error, 0) is None
