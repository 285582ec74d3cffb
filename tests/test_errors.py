"""The error hierarchy: the broker error table against independent oracles
(kafka-python's and librdkafka's code tables, Java's retriable list), lookup of
known and unknown codes, rendering, pickling, and builtin inheritance."""

from __future__ import annotations

import importlib.util
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kproto import errors
from kproto.errors import (
    BROKER_ERRORS,
    MAX_KNOWN_CODE,
    BrokerError,
    ChecksumError,
    ConfigError,
    CorruptMessageError,
    CorruptRecordError,
    CrcError,
    DecodeError,
    EncodeError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    KprotoError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    ProtocolError,
    UnknownBrokerError,
    UnknownServerError,
    UnsupportedVersionError,
    error_for_code,
    raise_for_code,
)

ROOT = Path(__file__).resolve().parent.parent

# PROTOCOL_NOTES.md section 8.1, the Java 4.0 row (RetriableException subclasses;
# `*` = InvalidMetadataException subclasses), with "122/123 share-session errors"
# spelled out.
JAVA_4_0_RETRIABLE = """
2 CORRUPT_MESSAGE, 3* UNKNOWN_TOPIC_OR_PARTITION, 5* LEADER_NOT_AVAILABLE,
6* NOT_LEADER_OR_FOLLOWER, 7 REQUEST_TIMED_OUT, 9* REPLICA_NOT_AVAILABLE, 13* NETWORK_EXCEPTION,
14 COORDINATOR_LOAD_IN_PROGRESS, 15 COORDINATOR_NOT_AVAILABLE, 16 NOT_COORDINATOR,
19 NOT_ENOUGH_REPLICAS, 20 NOT_ENOUGH_REPLICAS_AFTER_APPEND, 41 NOT_CONTROLLER,
51 CONCURRENT_TRANSACTIONS, 56* KAFKA_STORAGE_ERROR, 70 FETCH_SESSION_ID_NOT_FOUND,
71 INVALID_FETCH_SESSION_EPOCH, 72* LISTENER_NOT_FOUND, 74* FENCED_LEADER_EPOCH,
75 UNKNOWN_LEADER_EPOCH, 78 OFFSET_NOT_AVAILABLE, 80* PREFERRED_LEADER_NOT_AVAILABLE,
83* ELIGIBLE_LEADERS_NOT_AVAILABLE, 84* ELECTION_NOT_NEEDED, 88 UNSTABLE_OFFSET_COMMIT,
89 THROTTLING_QUOTA_EXCEEDED, 100* UNKNOWN_TOPIC_ID, 103* INCONSISTENT_TOPIC_ID,
106 FETCH_SESSION_TOPIC_ID_ERROR, 122 SHARE_SESSION_NOT_FOUND, 123 INVALID_SHARE_SESSION_EPOCH
"""
# Codes added after 4.0 whose Java exception is a RetriableException (4.1+, master).
JAVA_RETRIABLE_SINCE_4_1 = {133: "SHARE_SESSION_LIMIT_REACHED"}
JAVA_ENTRIES = re.findall(r"(\d+)(\*?) ([A-Z_]+)", JAVA_4_0_RETRIABLE)

# kafka-python still uses these older names; Kafka renamed them.
KAFKA_PYTHON_OLD_NAMES = {
    -1: "UNKNOWN",  # UNKNOWN_SERVER_ERROR
    6: "NOT_LEADER_FOR_PARTITION",  # NOT_LEADER_OR_FOLLOWER (KIP-392)
    10: "MESSAGE_SIZE_TOO_LARGE",  # MESSAGE_TOO_LARGE
    17: "INVALID_TOPIC",  # INVALID_TOPIC_EXCEPTION
    39: "INVALID_REPLICATION_ASSIGNMENT",  # INVALID_REPLICA_ASSIGNMENT
}
# Where kafka-python's flags differ from Java's: it treats 2 CORRUPT_MESSAGE as
# fatal and 75 UNKNOWN_LEADER_EPOCH as a metadata error.
KAFKA_PYTHON_FLAG_DIFFS = {2, 75}

LOCAL_ERRORS = [
    DecodeError, ProtocolError, CorruptRecordError, ChecksumError, CrcError, EncodeError,
    KafkaConnectionError, KafkaTimeoutError, ConfigError, IllegalStateError,
]


def kafka_python_errors() -> dict[int, Any]:
    kafka_errors = pytest.importorskip("kafka.errors")
    # (its table also holds intermediate classes under the key None)
    return {c: cls for c, cls in kafka_errors.kafka_errors.items() if isinstance(c, int) and c}


# --------------------------------------------------------------------------- the table


def test_codes_are_unique_and_contiguous() -> None:
    assert MAX_KNOWN_CODE == 136
    assert sorted(BROKER_ERRORS) == [-1, *range(1, MAX_KNOWN_CODE + 1)]
    assert all(cls.code == code for code, cls in BROKER_ERRORS.items())
    names = [cls.name for cls in BROKER_ERRORS.values()]
    assert len(set(names)) == len(names)
    assert len({cls.__name__ for cls in BROKER_ERRORS.values()}) == len(BROKER_ERRORS)


@pytest.mark.parametrize("cls", list(BROKER_ERRORS.values()), ids=lambda c: c.__name__)
def test_class_shape(cls: type[BrokerError]) -> None:
    assert issubclass(cls, BrokerError) and not issubclass(cls, UnknownBrokerError)
    assert re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*", cls.name)
    camel = "".join(part.capitalize() for part in cls.name.split("_"))
    assert cls.__name__ == (camel if camel.endswith("Error") else camel + "Error")
    assert getattr(errors, cls.__name__) is cls and cls.__name__ in errors.__all__
    assert isinstance(cls.description, str) and cls.description.strip() == cls.description
    assert cls.description.endswith(".")
    assert type(cls.retriable) is bool and type(cls.invalid_metadata) is bool


def test_named_examples() -> None:
    assert (NotLeaderOrFollowerError.code, NotLeaderOrFollowerError.name) == (
        6, "NOT_LEADER_OR_FOLLOWER")
    assert (OffsetOutOfRangeError.code, OffsetOutOfRangeError.name) == (1, "OFFSET_OUT_OF_RANGE")
    assert (UnknownServerError.code, UnknownServerError.name) == (-1, "UNKNOWN_SERVER_ERROR")
    assert (UnsupportedVersionError.code, UnsupportedVersionError.name) == (
        35, "UNSUPPORTED_VERSION")
    assert errors.KafkaStorageError.code == 56  # no doubled "Error" suffix
    assert errors.ControllerIdNotRegisteredError.code == MAX_KNOWN_CODE


def test_all_lists_every_public_name_once() -> None:
    assert len(set(errors.__all__)) == len(errors.__all__)
    for name in errors.__all__:
        assert hasattr(errors, name), name
    for name in ("KprotoError", "BrokerError", "error_for_code", "raise_for_code", "CrcError"):
        assert name in errors.__all__


def test_every_kafka_python_code_maps_to_the_same_name_and_code() -> None:
    theirs = kafka_python_errors()
    assert len(theirs) > 100
    for code, kp_cls in theirs.items():
        ours = error_for_code(code)
        assert ours is not None and ours is BROKER_ERRORS.get(code), code
        assert ours.code == kp_cls.errno == code
        assert kp_cls.message in (ours.name, KAFKA_PYTHON_OLD_NAMES.get(code)), (code, ours.name)


def test_kafka_python_flags_agree_except_where_it_departs_from_java() -> None:
    for code, kp_cls in kafka_python_errors().items():
        ours = BROKER_ERRORS[code]
        same = (ours.retriable, ours.invalid_metadata) == (
            kp_cls.retriable, kp_cls.invalid_metadata)
        assert same or code in KAFKA_PYTHON_FLAG_DIFFS, code


def test_every_librdkafka_broker_code_is_known() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    kafka_error = confluent_kafka.KafkaError
    # librdkafka's own (local) errors are -100..-199 and above 1000.
    broker_codes = {
        value for name in dir(kafka_error)
        if name.isupper() and isinstance(value := getattr(kafka_error, name), int)
        and -1 <= value < 1000 and value != 0
    }
    assert len(broker_codes) > 100
    assert broker_codes <= set(BROKER_ERRORS)


def test_retriable_flags_follow_java() -> None:
    assert len(JAVA_ENTRIES) == 31
    for code, _, name in JAVA_ENTRIES:
        assert BROKER_ERRORS[int(code)].name == name
    for code, name in JAVA_RETRIABLE_SINCE_4_1.items():
        assert BROKER_ERRORS[code].name == name
    retriable = {int(code) for code, _, _ in JAVA_ENTRIES} | set(JAVA_RETRIABLE_SINCE_4_1)
    invalid_metadata = {int(code) for code, star, _ in JAVA_ENTRIES if star}
    assert {c for c, cls in BROKER_ERRORS.items() if cls.retriable} == retriable
    assert {c for c, cls in BROKER_ERRORS.items() if cls.invalid_metadata} == invalid_metadata


def test_generated_section_is_fresh() -> None:
    spec = importlib.util.spec_from_file_location("gen_errors", ROOT / "tools" / "gen_errors.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    current = (ROOT / "kproto" / "errors.py").read_text(encoding="utf-8")
    assert "GENERATED by tools/gen_errors.py — do not edit by hand" in current
    assert gen.generate(current) == current, "run: python tools/gen_errors.py"


# --------------------------------------------------------------------------- lookup


def test_code_zero_is_no_error() -> None:
    assert error_for_code(0) is None
    raise_for_code(0, "ignored", topic="t")  # does not raise


def test_known_codes_and_int_like_codes() -> None:
    assert error_for_code(6) is NotLeaderOrFollowerError
    assert error_for_code(35) is UnsupportedVersionError
    np = pytest.importorskip("numpy")
    assert error_for_code(np.int16(6)) is NotLeaderOrFollowerError
    with pytest.raises(TypeError):
        error_for_code(6.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("code", [MAX_KNOWN_CODE + 1, 999, 32767, -2, -32768])
def test_unknown_code(code: int) -> None:
    cls = error_for_code(code)
    assert cls is not None and issubclass(cls, UnknownBrokerError)
    assert issubclass(cls, BrokerError) and issubclass(cls, KprotoError)
    assert error_for_code(code) is cls  # cached per code
    assert (cls.code, cls.name) == (code, f"UNKNOWN_CODE_{code}")
    assert not cls.retriable and not cls.invalid_metadata
    assert code not in BROKER_ERRORS
    with pytest.raises(UnknownBrokerError) as info:
        raise_for_code(code, "from a newer broker", api="Fetch")
    assert type(info.value) is cls
    assert str(info.value) == f"UNKNOWN_CODE_{code} ({code}): from a newer broker [api=Fetch]"


@pytest.mark.parametrize("code", [32768, -32769, 2**40])
def test_codes_outside_int16_are_refused(code: int) -> None:
    with pytest.raises(ValueError):
        error_for_code(code)


@given(st.integers(-(2**15), 2**15 - 1))
def test_any_int16_code_maps(code: int) -> None:
    cls = error_for_code(code)
    if code == 0:
        assert cls is None
        return
    assert cls is not None and cls.code == code
    assert (code in BROKER_ERRORS) != issubclass(cls, UnknownBrokerError)
    assert str(cls()).startswith(f"{cls.name} ({code}): ")


# --------------------------------------------------------------------------- registry


def test_registry_refuses_duplicate_and_bad_codes() -> None:
    before = dict(BROKER_ERRORS)
    with pytest.raises(TypeError, match="already taken by NotLeaderOrFollowerError"):
        class Again(BrokerError):
            code = 6
            name = "AGAIN"
    with pytest.raises(TypeError, match="non-zero int16"):
        class Zero(BrokerError):
            code = 0
            name = "NONE"
    with pytest.raises(TypeError, match="Kafka name"):
        class Nameless(BrokerError):
            code = 30000
    assert dict(BROKER_ERRORS) == before


def test_subclass_without_a_code_is_not_registered() -> None:
    class MyNotLeader(NotLeaderOrFollowerError):
        pass

    assert MyNotLeader.code == 6 and error_for_code(6) is NotLeaderOrFollowerError


# --------------------------------------------------------------------------- instances


def test_rendering_with_context() -> None:
    err = NotLeaderOrFollowerError(topic="t", partition=3)
    assert str(err) == f"NOT_LEADER_OR_FOLLOWER (6): {err.description} [topic=t, partition=3]"
    assert str(err).startswith(
        "NOT_LEADER_OR_FOLLOWER (6): For requests intended only for the leader, this error "
        "indicates that the broker is not the current leader.")
    assert err.message is None and err.context == {"topic": "t", "partition": 3}
    assert repr(err) == "NotLeaderOrFollowerError(topic='t', partition=3)"


def test_message_replaces_description_and_none_context_is_dropped() -> None:
    with pytest.raises(OffsetOutOfRangeError) as info:
        raise_for_code(1, "offset 42 < log start 50", topic="t", partition=None, api="Fetch")
    err = info.value
    assert str(err) == "OFFSET_OUT_OF_RANGE (1): offset 42 < log start 50 [topic=t, api=Fetch]"
    assert err.args == ("offset 42 < log start 50",)
    assert err.context == {"topic": "t", "api": "Fetch"}
    # context may use any key except "message", including "code"
    with pytest.raises(UnknownServerError) as info2:
        raise_for_code(-1, code="unused")
    assert info2.value.context == {"code": "unused"}


def test_unsupported_version_is_also_the_local_error() -> None:
    assert issubclass(UnsupportedVersionError, BrokerError)
    err = UnsupportedVersionError("kproto does not speak API key 99")
    assert str(err) == "UNSUPPORTED_VERSION (35): kproto does not speak API key 99"
    assert isinstance(err, KprotoError)


def _roundtrip(err: BaseException) -> BaseException:
    for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(err, protocol=proto))
        assert type(back) is type(err)
        assert back.args == err.args and str(back) == str(err)
        assert back.__dict__ == err.__dict__
    return back


def test_every_broker_error_pickles_with_its_context() -> None:
    for cls in BROKER_ERRORS.values():
        back = _roundtrip(cls("msg", api="Fetch", topic="t", partition=3))
        assert isinstance(back, BrokerError) and back.context["partition"] == 3
        _roundtrip(cls())


def test_unknown_code_error_pickles() -> None:
    cls = error_for_code(4242)
    assert cls is not None
    back = _roundtrip(cls("m", node=1))
    assert isinstance(back, UnknownBrokerError) and back.code == 4242


@pytest.mark.parametrize("cls", [BrokerError, UnknownBrokerError])
def test_classes_without_a_code_cannot_be_raised(cls: type[BrokerError]) -> None:
    with pytest.raises(TypeError, match="error_for_code"):
        cls("no code")


def test_errors_unpickle_in_a_fresh_process() -> None:
    """As on Spark: raised on an executor, re-raised on the driver."""
    unknown = error_for_code(31000)
    assert unknown is not None
    payload = pickle.dumps([
        NotLeaderOrFollowerError(topic="t", partition=3),
        unknown("new", api="Fetch"),
        CrcError(expected=1, actual=2, offset=61),
    ])
    code = (
        "import pickle, sys\n"
        "for e in pickle.loads(sys.stdin.buffer.read()):\n"
        "    print(type(e).__name__, e.code if hasattr(e, 'code') else '-', e, sep='|')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=payload, capture_output=True, check=True,
        env={"PYTHONPATH": str(ROOT)}, cwd=ROOT,
    ).stdout.decode().splitlines()
    assert out[0].startswith("NotLeaderOrFollowerError|6|NOT_LEADER_OR_FOLLOWER (6): ")
    assert out[0].endswith("[topic=t, partition=3]")
    assert out[1] == "UnknownBrokerError_31000|31000|UNKNOWN_CODE_31000 (31000): new [api=Fetch]"
    assert out[2] == "CrcError|-|checksum mismatch: stored 0x00000001, computed 0x00000002 " \
        "(at byte offset 61)"


@pytest.mark.parametrize("cls", LOCAL_ERRORS, ids=lambda c: c.__name__)
def test_local_errors_pickle(cls: type[KprotoError]) -> None:
    _roundtrip(cls("something broke"))


def test_decode_errors_carry_offset_and_checksums() -> None:
    err = ProtocolError("FetchResponse v12: truncated", offset=17)
    assert str(err) == "FetchResponse v12: truncated (at byte offset 17)"
    assert _roundtrip(err).offset == 17  # type: ignore[attr-defined]
    assert str(ProtocolError("plain")) == "plain" and ProtocolError("plain").offset is None
    crc = CrcError(expected=0xDEADBEEF, actual=0x12345678, offset=0)
    assert (crc.expected, crc.actual) == (0xDEADBEEF, 0x12345678)
    assert str(crc) == "checksum mismatch: stored 0xdeadbeef, computed 0x12345678 " \
        "(at byte offset 0)"
    back = _roundtrip(crc)
    assert (back.expected, back.actual) == (crc.expected, crc.actual)  # type: ignore[attr-defined]
    assert str(ChecksumError("LZ4 header checksum", expected=1, actual=2)) == "LZ4 header checksum"


# --------------------------------------------------------------------------- hierarchy


def test_builtin_inheritance() -> None:
    assert isinstance(ProtocolError("x"), ValueError)
    assert isinstance(ProtocolError("x"), DecodeError)
    assert isinstance(CrcError(), ChecksumError)
    assert isinstance(CrcError(), CorruptRecordError) and isinstance(CrcError(), ValueError)
    assert isinstance(EncodeError("x"), ValueError)
    assert isinstance(KafkaConnectionError("x"), ConnectionError)
    assert isinstance(KafkaConnectionError("x"), OSError)
    assert isinstance(KafkaTimeoutError("x"), TimeoutError)
    assert isinstance(ConfigError("x"), ValueError)
    assert isinstance(IllegalStateError("x"), RuntimeError)
    for cls in [*LOCAL_ERRORS, BrokerError, *BROKER_ERRORS.values()]:
        assert issubclass(cls, KprotoError)
    assert not issubclass(BrokerError, ValueError)
    # the broker's CORRUPT_MESSAGE is not the local record parser error
    assert not issubclass(CorruptMessageError, CorruptRecordError)


def test_local_retriable_flags() -> None:
    assert not KprotoError.retriable and not DecodeError.retriable
    assert KafkaConnectionError.retriable and KafkaConnectionError.invalid_metadata
    assert KafkaTimeoutError.retriable and not KafkaTimeoutError.invalid_metadata
    assert not ConfigError.retriable and not IllegalStateError.retriable
