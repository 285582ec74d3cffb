"""kproto's exception hierarchy.

Every exception kproto raises derives from :class:`KprotoError`. Local errors
also inherit the natural builtin (``ValueError``, ``ConnectionError``,
``TimeoutError``, ``RuntimeError``), so callers may catch either.

Each Kafka error code has its own :class:`BrokerError` subclass (the generated
section at the bottom of this file, written by ``tools/gen_errors.py``), with
the class attributes ``code``, ``name``, ``retriable``, ``invalid_metadata`` and
``description``. :func:`error_for_code` maps a code to its class and
:func:`raise_for_code` raises it::

    raise_for_code(6, topic="t", partition=3)
    # NotLeaderOrFollowerError: NOT_LEADER_OR_FOLLOWER (6): For requests ... [topic=t, partition=3]

Code 35 (:class:`UnsupportedVersionError`) is also the local "no version both
sides support" error. Instances pickle (the context travels with them).
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar


class KprotoError(Exception):
    """Root of every exception raised by kproto."""

    #: The operation may succeed if retried (after a metadata refresh if ``invalid_metadata``).
    retriable: ClassVar[bool] = False
    #: The client's metadata (leaders, coordinators) is stale: refresh it before retrying.
    invalid_metadata: ClassVar[bool] = False


# --------------------------------------------------------------------------- local errors


class DecodeError(KprotoError, ValueError):
    """Bytes that cannot be decoded: truncated, malformed or out of range."""

    def __init__(self, message: str = "", *, offset: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: Byte offset at which decoding failed, when known.
        self.offset = offset

    def __str__(self) -> str:
        if self.offset is None:
            return self.message
        return f"{self.message} (at byte offset {self.offset})"


class ProtocolError(DecodeError):
    """A protocol message (request/response body or header) is malformed."""


class CorruptRecordError(DecodeError):
    """A record set (message set or record batch) is malformed."""


class ChecksumError(CorruptRecordError):
    """A checksum does not match the bytes it covers (``expected`` vs ``actual``)."""

    def __init__(
        self,
        message: str = "",
        *,
        expected: int | None = None,
        actual: int | None = None,
        offset: int | None = None,
    ) -> None:
        if not message and expected is not None and actual is not None:
            message = f"checksum mismatch: stored 0x{expected:08x}, computed 0x{actual:08x}"
        super().__init__(message, offset=offset)
        #: The checksum stored in the data.
        self.expected = expected
        #: The checksum computed over the bytes.
        self.actual = actual


class CrcError(ChecksumError):
    """A record batch CRC-32C (or legacy message CRC-32) does not match."""


class DecompressionLimitError(CorruptRecordError):
    """A compressed batch expands past the configured decompressed-size cap."""


class EncodeError(KprotoError, ValueError):
    """Values that cannot be encoded at the requested version."""


class FormatError(DecodeError):
    """A value (Avro, JSON, Protobuf payload or its Confluent framing) that cannot be
    decoded: ``row`` is its index in the column (None when not about one row),
    ``reason`` says what is wrong and ``format`` names the format::

        FormatError(row=17, reason="truncated datum: string length 40, 3 bytes left",
                    format="avro")
        # avro value at row 17: truncated datum: string length 40, 3 bytes left
    """

    def __init__(self, message: str = "", *, row: int | None = None, reason: str = "",
                 format: str = "", offset: int | None = None) -> None:
        if not message:
            where = f"{format} value" if format else "value"
            if row is not None:
                where += f" at row {row}"
            message = f"{where}: {reason}" if reason else where
        super().__init__(message, offset=offset)
        #: Index of the bad value in the column, when the error is about one row.
        self.row = row
        #: What is wrong with it.
        self.reason = reason or message
        #: The format being decoded ("avro", "json", "protobuf").
        self.format = format


class SchemaError(KprotoError, ValueError):
    """A schema (Avro, JSON Schema, Protobuf) that is invalid, or a writer/reader pair
    that cannot be resolved (Avro schema resolution)."""


class SchemaRegistryError(KprotoError):
    """A Schema Registry request that failed: the registry's answer (HTTP ``status``,
    its ``error_code`` and message, e.g. 40403 "Schema not found") or no answer at
    all (``status`` None). The message names the ``url`` and, where the request
    was about them, the ``subject``, ``version`` and schema id (``schema_id``).
    Retriable when the registry was unreachable, overloaded (429) or failing (5xx)."""

    def __init__(self, message: str = "", *, url: str | None = None,
                 subject: str | None = None, schema_id: int | None = None,
                 version: int | str | None = None, status: int | None = None,
                 error_code: int | None = None) -> None:
        context = [f"{k}={v}" for k, v in (("url", url), ("subject", subject),
                                           ("id", schema_id), ("version", version))
                   if v is not None]
        text = f"{message} [{', '.join(context)}]" if context else message
        super().__init__(text)
        #: The request's URL.
        self.url = url
        #: The subject the request was about, if any.
        self.subject = subject
        #: The schema id the request was about, if any.
        self.schema_id = schema_id
        #: The subject version the request was about, if any.
        self.version = version
        #: The HTTP status of the answer (None: no answer).
        self.status = status
        #: The registry's ``error_code`` (40401 subject, 40402 version, 40403 schema
        #: not found, 409 incompatible, 42201 invalid schema...), when it sent one.
        self.error_code = error_code
        self._message = message

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        return self.status is None or self.status == 429 or self.status >= 500

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_registry_error, (type(self), self._message, {
            "url": self.url, "subject": self.subject, "schema_id": self.schema_id,
            "version": self.version, "status": self.status, "error_code": self.error_code}))


def _rebuild_registry_error(cls: type[SchemaRegistryError], message: str,
                            context: dict[str, Any]) -> SchemaRegistryError:
    return cls(message, **context)


class KafkaConnectionError(KprotoError, ConnectionError):
    """A broker connection failed or closed; retry after refreshing metadata."""

    retriable = True
    invalid_metadata = True


class TlsCertificateError(KafkaConnectionError):
    """The broker's TLS certificate failed verification (unknown CA, expired, or a
    hostname mismatch). Not retried: asking again will not change the answer."""

    retriable = False
    invalid_metadata = False


class KafkaTimeoutError(KprotoError, TimeoutError):
    """A request or operation did not complete in time."""

    retriable = True


class ConfigError(KprotoError, ValueError):
    """An invalid or inconsistent configuration value."""


class IllegalStateError(KprotoError, RuntimeError):
    """An operation called in a state that does not allow it."""


class CommitFailedError(KprotoError):
    """An offset commit that cannot succeed because this consumer is no longer a
    member of the group's current generation (Java's ``CommitFailedException``):
    it left after ``max_poll_interval_ms`` without a poll, or the coordinator
    no longer knows it. Its partitions may already be someone else's; the next
    poll rejoins the group (and reports them lost to the listener)."""


class AbortableTransactionError(KprotoError):
    """A transactional producer's transaction hit an error it cannot commit past
    (a record batch that failed, a refused offset commit, a transaction the
    broker aborted after its timeout...): call ``abort_transaction()`` and
    begin a new one; nothing of this transaction becomes visible. ``error`` (also
    ``__cause__``) is what happened (Java's abortable errors)."""

    def __init__(self, message: str, error: BaseException | None = None) -> None:
        super().__init__(message if error is None else f"{message}: {error}")
        #: The error that made the transaction abortable.
        self.error = error
        self._message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._message, self.error))


class TransactionAbortedError(KprotoError):
    """The record was not written: its transaction was aborted before it was sent."""


# --------------------------------------------------------------------------- broker errors

_BY_CODE: dict[int, type[BrokerError]] = {}
_UNKNOWN_BY_CODE: dict[int, type[UnknownBrokerError]] = {}

#: Every known code -> its class (read-only view; filled by the generated section).
BROKER_ERRORS: Mapping[int, type[BrokerError]] = MappingProxyType(_BY_CODE)


class BrokerError(KprotoError):
    """An error code returned by a broker; one subclass per Kafka error code."""

    #: The Kafka error code (int16 on the wire).
    code: ClassVar[int]
    #: Kafka's UPPER_SNAKE name for the code, e.g. ``"NOT_LEADER_OR_FOLLOWER"``.
    name: ClassVar[str]
    #: Kafka's description of the code.
    description: ClassVar[str] = ""

    def __init_subclass__(cls, *, register: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not register or "code" not in cls.__dict__:
            return  # an intermediate class, or an unknown code made by error_for_code
        code = cls.code
        if type(code) is not int or code == 0 or not -(2**15) <= code < 2**15:
            raise TypeError(f"{cls.__name__}.code must be a non-zero int16, not {code!r}")
        if not isinstance(cls.__dict__.get("name"), str):
            raise TypeError(f"{cls.__name__} must define its Kafka name")
        if code in _BY_CODE:
            taken = _BY_CODE[code].__name__
            raise TypeError(f"{cls.__name__}: code {code} is already taken by {taken}")
        _BY_CODE[code] = cls

    def __init__(self, message: str | None = None, **context: Any) -> None:
        if not hasattr(self, "code"):
            raise TypeError(f"{type(self).__name__} has no code: use error_for_code(code)")
        super().__init__(*(() if message is None else (message,)))
        #: The broker's (or kproto's) error message, if any; else ``description`` is shown.
        self.message = message
        #: Where it happened: api, version, topic, partition, node, group... (None dropped).
        self.context = {k: v for k, v in context.items() if v is not None}

    def __str__(self) -> str:
        text = f"{self.name} ({self.code}): {self.message or self.description}"
        if self.context:
            text += " [" + ", ".join(f"{k}={v}" for k, v in self.context.items()) + "]"
        return text

    def __repr__(self) -> str:
        parts = [] if self.message is None else [repr(self.message)]
        parts += [f"{k}={v!r}" for k, v in self.context.items()]
        return f"{type(self).__name__}({', '.join(parts)})"


class UnknownBrokerError(BrokerError):
    """A code this version of kproto does not know (a newer broker); see error_for_code."""

    name = "UNKNOWN_CODE"
    description = "An error code this version of kproto does not know."

    def __reduce__(self) -> tuple[Any, ...]:
        # The per-code class is made at run time, so pickle re-creates it by code.
        return (_unknown_error, (self.code, self.args), self.__dict__)


def _unknown_error(code: int, args: tuple[Any, ...]) -> BrokerError:
    cls = error_for_code(code)
    assert cls is not None
    return cls(*args)


def error_for_code(code: int) -> type[BrokerError] | None:
    """The class of error ``code``: None for 0, an :class:`UnknownBrokerError`
    subclass (one per code, cached) for codes kproto does not know."""
    code = operator.index(code)
    if code == 0:
        return None
    known = _BY_CODE.get(code)
    if known is not None:
        return known
    unknown = _UNKNOWN_BY_CODE.get(code)
    if unknown is None:
        if not -(2**15) <= code < 2**15:
            raise ValueError(f"error codes are int16, not {code}")
        unknown = _UNKNOWN_BY_CODE.setdefault(code, _make_unknown(code))
    return unknown


def _make_unknown(n: int) -> type[UnknownBrokerError]:
    class Unknown(UnknownBrokerError, register=False):
        code = n
        name = f"UNKNOWN_CODE_{n}"
        description = f"Error code {n} is not known to this version of kproto."

    Unknown.__name__ = Unknown.__qualname__ = f"UnknownBrokerError_{n}".replace("-", "m")
    return Unknown


def raise_for_code(code: int, /, message: str | None = None, **context: Any) -> None:
    """Raise the error for ``code`` with ``message`` and ``context``; do nothing for 0."""
    cls = error_for_code(code)
    if cls is not None:
        raise cls(message, **context)


# ---- BEGIN GENERATED by tools/gen_errors.py — do not edit by hand ----
# One BrokerError subclass per Kafka error code, -1 to 136.
# Table, sources and flags: tools/gen_errors.py.


class UnknownServerError(BrokerError):
    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    retriable = False
    invalid_metadata = False
    description = "The server experienced an unexpected error when processing the request."


class OffsetOutOfRangeError(BrokerError):
    code = 1
    name = "OFFSET_OUT_OF_RANGE"
    retriable = False
    invalid_metadata = False
    description = (
        "The requested offset is not within the range of offsets maintained by the server."
    )


class CorruptMessageError(BrokerError):
    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True
    invalid_metadata = False
    description = (
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
        "compacted topic, or is otherwise corrupt."
    )


class UnknownTopicOrPartitionError(BrokerError):
    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True
    invalid_metadata = True
    description = "This server does not host this topic-partition."


class InvalidFetchSizeError(BrokerError):
    code = 4
    name = "INVALID_FETCH_SIZE"
    retriable = False
    invalid_metadata = False
    description = "The requested fetch size is invalid."


class LeaderNotAvailableError(BrokerError):
    code = 5
    name = "LEADER_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = (
        "There is no leader for this topic-partition as we are in the middle of a leadership "
        "election."
    )


class NotLeaderOrFollowerError(BrokerError):
    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True
    invalid_metadata = True
    description = (
        "For requests intended only for the leader, this error indicates that the broker is not "
        "the current leader. For requests intended for any replica, this error indicates that the "
        "broker is not a replica of the topic partition."
    )


class RequestTimedOutError(BrokerError):
    code = 7
    name = "REQUEST_TIMED_OUT"
    retriable = True
    invalid_metadata = False
    description = "The request timed out."


class BrokerNotAvailableError(BrokerError):
    code = 8
    name = "BROKER_NOT_AVAILABLE"
    retriable = False
    invalid_metadata = False
    description = "The broker is not available."


class ReplicaNotAvailableError(BrokerError):
    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = (
        "The replica is not available for the requested topic-partition. Produce/Fetch requests "
        "and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER "
        "if the broker is not a replica of the topic-partition."
    )


class MessageTooLargeError(BrokerError):
    code = 10
    name = "MESSAGE_TOO_LARGE"
    retriable = False
    invalid_metadata = False
    description = (
        "The request included a message larger than the max message size the server will accept."
    )


class StaleControllerEpochError(BrokerError):
    code = 11
    name = "STALE_CONTROLLER_EPOCH"
    retriable = False
    invalid_metadata = False
    description = "The controller moved to another broker."


class OffsetMetadataTooLargeError(BrokerError):
    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"
    retriable = False
    invalid_metadata = False
    description = "The metadata field of the offset request was too large."


class NetworkExceptionError(BrokerError):
    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True
    invalid_metadata = True
    description = "The server disconnected before a response was received."


class CoordinatorLoadInProgressError(BrokerError):
    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True
    invalid_metadata = False
    description = "The coordinator is loading and hence can't process requests."


class CoordinatorNotAvailableError(BrokerError):
    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = False
    description = "The coordinator is not available."


class NotCoordinatorError(BrokerError):
    code = 16
    name = "NOT_COORDINATOR"
    retriable = True
    invalid_metadata = False
    description = "This is not the correct coordinator."


class InvalidTopicExceptionError(BrokerError):
    code = 17
    name = "INVALID_TOPIC_EXCEPTION"
    retriable = False
    invalid_metadata = False
    description = "The request attempted to perform an operation on an invalid topic."


class RecordListTooLargeError(BrokerError):
    code = 18
    name = "RECORD_LIST_TOO_LARGE"
    retriable = False
    invalid_metadata = False
    description = (
        "The request included message batch larger than the configured segment size on the server."
    )


class NotEnoughReplicasError(BrokerError):
    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    retriable = True
    invalid_metadata = False
    description = "Messages are rejected since there are fewer in-sync replicas than required."


class NotEnoughReplicasAfterAppendError(BrokerError):
    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True
    invalid_metadata = False
    description = "Messages are written to the log, but to fewer in-sync replicas than required."


class InvalidRequiredAcksError(BrokerError):
    code = 21
    name = "INVALID_REQUIRED_ACKS"
    retriable = False
    invalid_metadata = False
    description = "Produce request specified an invalid value for required acks."


class IllegalGenerationError(BrokerError):
    code = 22
    name = "ILLEGAL_GENERATION"
    retriable = False
    invalid_metadata = False
    description = "Specified group generation id is not valid."


class InconsistentGroupProtocolError(BrokerError):
    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"
    retriable = False
    invalid_metadata = False
    description = (
        "The group member's supported protocols are incompatible with those of existing members or "
        "first group member tried to join with empty protocol type or empty protocol list."
    )


class InvalidGroupIdError(BrokerError):
    code = 24
    name = "INVALID_GROUP_ID"
    retriable = False
    invalid_metadata = False
    description = "The group id is invalid."


class UnknownMemberIdError(BrokerError):
    code = 25
    name = "UNKNOWN_MEMBER_ID"
    retriable = False
    invalid_metadata = False
    description = "The coordinator is not aware of this member."


class InvalidSessionTimeoutError(BrokerError):
    code = 26
    name = "INVALID_SESSION_TIMEOUT"
    retriable = False
    invalid_metadata = False
    description = (
        "The session timeout is not within the range allowed by the broker (as configured by "
        "group.min.session.timeout.ms and group.max.session.timeout.ms)."
    )


class RebalanceInProgressError(BrokerError):
    code = 27
    name = "REBALANCE_IN_PROGRESS"
    retriable = False
    invalid_metadata = False
    description = "The group is rebalancing, so a rejoin is needed."


class InvalidCommitOffsetSizeError(BrokerError):
    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"
    retriable = False
    invalid_metadata = False
    description = "The committing offset data size is not valid."


class TopicAuthorizationFailedError(BrokerError):
    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"
    retriable = False
    invalid_metadata = False
    description = "Topic authorization failed."


class GroupAuthorizationFailedError(BrokerError):
    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"
    retriable = False
    invalid_metadata = False
    description = "Group authorization failed."


class ClusterAuthorizationFailedError(BrokerError):
    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"
    retriable = False
    invalid_metadata = False
    description = "Cluster authorization failed."


class InvalidTimestampError(BrokerError):
    code = 32
    name = "INVALID_TIMESTAMP"
    retriable = False
    invalid_metadata = False
    description = "The timestamp of the message is out of acceptable range."


class UnsupportedSaslMechanismError(BrokerError):
    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"
    retriable = False
    invalid_metadata = False
    description = "The broker does not support the requested SASL mechanism."


class IllegalSaslStateError(BrokerError):
    code = 34
    name = "ILLEGAL_SASL_STATE"
    retriable = False
    invalid_metadata = False
    description = "Request is not valid given the current SASL state."


class UnsupportedVersionError(BrokerError):
    code = 35
    name = "UNSUPPORTED_VERSION"
    retriable = False
    invalid_metadata = False
    description = "The version of API is not supported."


class TopicAlreadyExistsError(BrokerError):
    code = 36
    name = "TOPIC_ALREADY_EXISTS"
    retriable = False
    invalid_metadata = False
    description = "Topic with this name already exists."


class InvalidPartitionsError(BrokerError):
    code = 37
    name = "INVALID_PARTITIONS"
    retriable = False
    invalid_metadata = False
    description = "Number of partitions is below 1."


class InvalidReplicationFactorError(BrokerError):
    code = 38
    name = "INVALID_REPLICATION_FACTOR"
    retriable = False
    invalid_metadata = False
    description = "Replication factor is below 1 or larger than the number of available brokers."


class InvalidReplicaAssignmentError(BrokerError):
    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"
    retriable = False
    invalid_metadata = False
    description = "Replica assignment is invalid."


class InvalidConfigError(BrokerError):
    code = 40
    name = "INVALID_CONFIG"
    retriable = False
    invalid_metadata = False
    description = "Configuration is invalid."


class NotControllerError(BrokerError):
    code = 41
    name = "NOT_CONTROLLER"
    retriable = True
    invalid_metadata = False
    description = "This is not the correct controller for this cluster."


class InvalidRequestError(BrokerError):
    code = 42
    name = "INVALID_REQUEST"
    retriable = False
    invalid_metadata = False
    description = (
        "This most likely occurs because of a request being malformed by the client library or the "
        "message was sent to an incompatible broker. See the broker logs for more details."
    )


class UnsupportedForMessageFormatError(BrokerError):
    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    retriable = False
    invalid_metadata = False
    description = "The message format version on the broker does not support the request."


class PolicyViolationError(BrokerError):
    code = 44
    name = "POLICY_VIOLATION"
    retriable = False
    invalid_metadata = False
    description = "Request parameters do not satisfy the configured policy."


class OutOfOrderSequenceNumberError(BrokerError):
    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    retriable = False
    invalid_metadata = False
    description = "The broker received an out of order sequence number."


class DuplicateSequenceNumberError(BrokerError):
    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"
    retriable = False
    invalid_metadata = False
    description = "The broker received a duplicate sequence number."


class InvalidProducerEpochError(BrokerError):
    code = 47
    name = "INVALID_PRODUCER_EPOCH"
    retriable = False
    invalid_metadata = False
    description = "Producer attempted to produce with an old epoch."


class InvalidTxnStateError(BrokerError):
    code = 48
    name = "INVALID_TXN_STATE"
    retriable = False
    invalid_metadata = False
    description = "The producer attempted a transactional operation in an invalid state."


class InvalidProducerIdMappingError(BrokerError):
    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"
    retriable = False
    invalid_metadata = False
    description = (
        "The producer attempted to use a producer id which is not currently assigned to its "
        "transactional id."
    )


class InvalidTransactionTimeoutError(BrokerError):
    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"
    retriable = False
    invalid_metadata = False
    description = (
        "The transaction timeout is larger than the maximum value allowed by the broker (as "
        "configured by transaction.max.timeout.ms)."
    )


class ConcurrentTransactionsError(BrokerError):
    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    retriable = True
    invalid_metadata = False
    description = (
        "The producer attempted to update a transaction while another concurrent operation on the "
        "same transaction was ongoing."
    )


class TransactionCoordinatorFencedError(BrokerError):
    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"
    retriable = False
    invalid_metadata = False
    description = (
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the "
        "current coordinator for a given producer."
    )


class TransactionalIdAuthorizationFailedError(BrokerError):
    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    retriable = False
    invalid_metadata = False
    description = "Transactional Id authorization failed."


class SecurityDisabledError(BrokerError):
    code = 54
    name = "SECURITY_DISABLED"
    retriable = False
    invalid_metadata = False
    description = "Security features are disabled."


class OperationNotAttemptedError(BrokerError):
    code = 55
    name = "OPERATION_NOT_ATTEMPTED"
    retriable = False
    invalid_metadata = False
    description = (
        "The broker did not attempt to execute this operation. This may happen for batched RPCs "
        "where some operations in the batch failed, causing the broker to respond without trying "
        "the rest."
    )


class KafkaStorageError(BrokerError):
    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True
    invalid_metadata = True
    description = "Disk error when trying to access log file on the disk."


class LogDirNotFoundError(BrokerError):
    code = 57
    name = "LOG_DIR_NOT_FOUND"
    retriable = False
    invalid_metadata = False
    description = "The user-specified log directory is not found in the broker config."


class SaslAuthenticationFailedError(BrokerError):
    code = 58
    name = "SASL_AUTHENTICATION_FAILED"
    retriable = False
    invalid_metadata = False
    description = "SASL Authentication failed."


class UnknownProducerIdError(BrokerError):
    code = 59
    name = "UNKNOWN_PRODUCER_ID"
    retriable = False
    invalid_metadata = False
    description = (
        "This exception is raised by the broker if it could not locate the producer metadata "
        "associated with the producerId in question. This could happen if, for instance, the "
        "producer's records were deleted because their retention time had elapsed. Once the last "
        "records of the producerId are removed, the producer's metadata is removed from the "
        "broker, and future appends by the producer will return this exception."
    )


class ReassignmentInProgressError(BrokerError):
    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"
    retriable = False
    invalid_metadata = False
    description = "A partition reassignment is in progress."


class DelegationTokenAuthDisabledError(BrokerError):
    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"
    retriable = False
    invalid_metadata = False
    description = "Delegation Token feature is not enabled."


class DelegationTokenNotFoundError(BrokerError):
    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"
    retriable = False
    invalid_metadata = False
    description = "Delegation Token is not found on server."


class DelegationTokenOwnerMismatchError(BrokerError):
    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"
    retriable = False
    invalid_metadata = False
    description = "Specified Principal is not valid Owner/Renewer."


class DelegationTokenRequestNotAllowedError(BrokerError):
    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    retriable = False
    invalid_metadata = False
    description = (
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on "
        "delegation token authenticated channels."
    )


class DelegationTokenAuthorizationFailedError(BrokerError):
    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
    retriable = False
    invalid_metadata = False
    description = "Delegation Token authorization failed."


class DelegationTokenExpiredError(BrokerError):
    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"
    retriable = False
    invalid_metadata = False
    description = "Delegation Token is expired."


class InvalidPrincipalTypeError(BrokerError):
    code = 67
    name = "INVALID_PRINCIPAL_TYPE"
    retriable = False
    invalid_metadata = False
    description = "Supplied principalType is not supported."


class NonEmptyGroupError(BrokerError):
    code = 68
    name = "NON_EMPTY_GROUP"
    retriable = False
    invalid_metadata = False
    description = "The group is not empty."


class GroupIdNotFoundError(BrokerError):
    code = 69
    name = "GROUP_ID_NOT_FOUND"
    retriable = False
    invalid_metadata = False
    description = "The group id does not exist."


class FetchSessionIdNotFoundError(BrokerError):
    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True
    invalid_metadata = False
    description = "The fetch session ID was not found."


class InvalidFetchSessionEpochError(BrokerError):
    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"
    retriable = True
    invalid_metadata = False
    description = "The fetch session epoch is invalid."


class ListenerNotFoundError(BrokerError):
    code = 72
    name = "LISTENER_NOT_FOUND"
    retriable = True
    invalid_metadata = True
    description = (
        "There is no listener on the leader broker that matches the listener on which metadata "
        "request was processed."
    )


class TopicDeletionDisabledError(BrokerError):
    code = 73
    name = "TOPIC_DELETION_DISABLED"
    retriable = False
    invalid_metadata = False
    description = "Topic deletion is disabled."


class FencedLeaderEpochError(BrokerError):
    code = 74
    name = "FENCED_LEADER_EPOCH"
    retriable = True
    invalid_metadata = True
    description = "The leader epoch in the request is older than the epoch on the broker."


class UnknownLeaderEpochError(BrokerError):
    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    retriable = True
    invalid_metadata = False
    description = "The leader epoch in the request is newer than the epoch on the broker."


class UnsupportedCompressionTypeError(BrokerError):
    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
    retriable = False
    invalid_metadata = False
    description = "The requesting client does not support the compression type of given partition."


class StaleBrokerEpochError(BrokerError):
    code = 77
    name = "STALE_BROKER_EPOCH"
    retriable = False
    invalid_metadata = False
    description = "Broker epoch has changed."


class OffsetNotAvailableError(BrokerError):
    code = 78
    name = "OFFSET_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = False
    description = (
        "The leader high watermark has not caught up from a recent leader election so the offsets "
        "cannot be guaranteed to be monotonically increasing."
    )


class MemberIdRequiredError(BrokerError):
    code = 79
    name = "MEMBER_ID_REQUIRED"
    retriable = False
    invalid_metadata = False
    description = (
        "The group member needs to have a valid member id before actually entering a consumer "
        "group."
    )


class PreferredLeaderNotAvailableError(BrokerError):
    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = "The preferred leader was not available."


class GroupMaxSizeReachedError(BrokerError):
    code = 81
    name = "GROUP_MAX_SIZE_REACHED"
    retriable = False
    invalid_metadata = False
    description = "The group has reached its maximum size."


class FencedInstanceIdError(BrokerError):
    code = 82
    name = "FENCED_INSTANCE_ID"
    retriable = False
    invalid_metadata = False
    description = (
        "The broker rejected this static consumer since another consumer with the same "
        "group.instance.id has registered with a different member.id."
    )


class EligibleLeadersNotAvailableError(BrokerError):
    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = "Eligible topic partition leaders are not available."


class ElectionNotNeededError(BrokerError):
    code = 84
    name = "ELECTION_NOT_NEEDED"
    retriable = True
    invalid_metadata = True
    description = "Leader election not needed for topic partition."


class NoReassignmentInProgressError(BrokerError):
    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"
    retriable = False
    invalid_metadata = False
    description = "No partition reassignment is in progress."


class GroupSubscribedToTopicError(BrokerError):
    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"
    retriable = False
    invalid_metadata = False
    description = (
        "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed "
        "to it."
    )


class InvalidRecordError(BrokerError):
    code = 87
    name = "INVALID_RECORD"
    retriable = False
    invalid_metadata = False
    description = "This record has failed the validation on broker and hence will be rejected."


class UnstableOffsetCommitError(BrokerError):
    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True
    invalid_metadata = False
    description = "There are unstable offsets that need to be cleared."


class ThrottlingQuotaExceededError(BrokerError):
    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"
    retriable = True
    invalid_metadata = False
    description = "The throttling quota has been exceeded."


class ProducerFencedError(BrokerError):
    code = 90
    name = "PRODUCER_FENCED"
    retriable = False
    invalid_metadata = False
    description = (
        "There is a newer producer with the same transactionalId which fences the current one."
    )


class ResourceNotFoundError(BrokerError):
    code = 91
    name = "RESOURCE_NOT_FOUND"
    retriable = False
    invalid_metadata = False
    description = "A request illegally referred to a resource that does not exist."


class DuplicateResourceError(BrokerError):
    code = 92
    name = "DUPLICATE_RESOURCE"
    retriable = False
    invalid_metadata = False
    description = "A request illegally referred to the same resource twice."


class UnacceptableCredentialError(BrokerError):
    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"
    retriable = False
    invalid_metadata = False
    description = "Requested credential would not meet criteria for acceptability."


class InconsistentVoterSetError(BrokerError):
    code = 94
    name = "INCONSISTENT_VOTER_SET"
    retriable = False
    invalid_metadata = False
    description = (
        "Indicates that the either the sender or recipient of a voter-only request is not one of "
        "the expected voters."
    )


class InvalidUpdateVersionError(BrokerError):
    code = 95
    name = "INVALID_UPDATE_VERSION"
    retriable = False
    invalid_metadata = False
    description = "The given update version was invalid."


class FeatureUpdateFailedError(BrokerError):
    code = 96
    name = "FEATURE_UPDATE_FAILED"
    retriable = False
    invalid_metadata = False
    description = "Unable to update finalized features due to an unexpected server error."


class PrincipalDeserializationFailureError(BrokerError):
    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"
    retriable = False
    invalid_metadata = False
    description = (
        "Request principal deserialization failed during forwarding. This indicates an internal "
        "error on the broker cluster security setup."
    )


class SnapshotNotFoundError(BrokerError):
    code = 98
    name = "SNAPSHOT_NOT_FOUND"
    retriable = False
    invalid_metadata = False
    description = "Requested snapshot was not found."


class PositionOutOfRangeError(BrokerError):
    code = 99
    name = "POSITION_OUT_OF_RANGE"
    retriable = False
    invalid_metadata = False
    description = (
        "Requested position is not greater than or equal to zero, and less than the size of the "
        "snapshot."
    )


class UnknownTopicIdError(BrokerError):
    code = 100
    name = "UNKNOWN_TOPIC_ID"
    retriable = True
    invalid_metadata = True
    description = "This server does not host this topic ID."


class DuplicateBrokerRegistrationError(BrokerError):
    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"
    retriable = False
    invalid_metadata = False
    description = "This broker ID is already in use."


class BrokerIdNotRegisteredError(BrokerError):
    code = 102
    name = "BROKER_ID_NOT_REGISTERED"
    retriable = False
    invalid_metadata = False
    description = "The given broker ID was not registered."


class InconsistentTopicIdError(BrokerError):
    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    retriable = True
    invalid_metadata = True
    description = "The log's topic ID did not match the topic ID in the request."


class InconsistentClusterIdError(BrokerError):
    code = 104
    name = "INCONSISTENT_CLUSTER_ID"
    retriable = False
    invalid_metadata = False
    description = "The clusterId in the request does not match that found on the server."


class TransactionalIdNotFoundError(BrokerError):
    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"
    retriable = False
    invalid_metadata = False
    description = "The transactionalId could not be found."


class FetchSessionTopicIdError(BrokerError):
    code = 106
    name = "FETCH_SESSION_TOPIC_ID_ERROR"
    retriable = True
    invalid_metadata = False
    description = "The fetch session encountered inconsistent topic ID usage."


class IneligibleReplicaError(BrokerError):
    code = 107
    name = "INELIGIBLE_REPLICA"
    retriable = False
    invalid_metadata = False
    description = "The new ISR contains at least one ineligible replica."


class NewLeaderElectedError(BrokerError):
    code = 108
    name = "NEW_LEADER_ELECTED"
    retriable = False
    invalid_metadata = False
    description = (
        "The AlterPartition request successfully updated the partition state but the leader has "
        "changed."
    )


class OffsetMovedToTieredStorageError(BrokerError):
    code = 109
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"
    retriable = False
    invalid_metadata = False
    description = "The requested offset is moved to tiered storage."


class FencedMemberEpochError(BrokerError):
    code = 110
    name = "FENCED_MEMBER_EPOCH"
    retriable = False
    invalid_metadata = False
    description = (
        "The member epoch is fenced by the group coordinator. The member must abandon all its "
        "partitions and rejoin."
    )


class UnreleasedInstanceIdError(BrokerError):
    code = 111
    name = "UNRELEASED_INSTANCE_ID"
    retriable = False
    invalid_metadata = False
    description = (
        "The instance ID is still used by another member in the consumer group. That member must "
        "leave first."
    )


class UnsupportedAssignorError(BrokerError):
    code = 112
    name = "UNSUPPORTED_ASSIGNOR"
    retriable = False
    invalid_metadata = False
    description = "The assignor or its version range is not supported by the consumer group."


class StaleMemberEpochError(BrokerError):
    code = 113
    name = "STALE_MEMBER_EPOCH"
    retriable = False
    invalid_metadata = False
    description = (
        "The member epoch is stale. The member must retry after receiving its updated member epoch "
        "via the ConsumerGroupHeartbeat API."
    )


class MismatchedEndpointTypeError(BrokerError):
    code = 114
    name = "MISMATCHED_ENDPOINT_TYPE"
    retriable = False
    invalid_metadata = False
    description = "The request was sent to an endpoint of the wrong type."


class UnsupportedEndpointTypeError(BrokerError):
    code = 115
    name = "UNSUPPORTED_ENDPOINT_TYPE"
    retriable = False
    invalid_metadata = False
    description = "This endpoint type is not supported yet."


class UnknownControllerIdError(BrokerError):
    code = 116
    name = "UNKNOWN_CONTROLLER_ID"
    retriable = False
    invalid_metadata = False
    description = "This controller ID is not known."


class UnknownSubscriptionIdError(BrokerError):
    code = 117
    name = "UNKNOWN_SUBSCRIPTION_ID"
    retriable = False
    invalid_metadata = False
    description = (
        "Client sent a push telemetry request with an invalid or outdated subscription ID."
    )


class TelemetryTooLargeError(BrokerError):
    code = 118
    name = "TELEMETRY_TOO_LARGE"
    retriable = False
    invalid_metadata = False
    description = (
        "Client sent a push telemetry request larger than the maximum size the broker will accept."
    )


class InvalidRegistrationError(BrokerError):
    code = 119
    name = "INVALID_REGISTRATION"
    retriable = False
    invalid_metadata = False
    description = "The controller has considered the broker registration to be invalid."


class TransactionAbortableError(BrokerError):
    code = 120
    name = "TRANSACTION_ABORTABLE"
    retriable = False
    invalid_metadata = False
    description = (
        "The server encountered an error with the transaction. The client can abort the "
        "transaction to continue using this transactional ID."
    )


class InvalidRecordStateError(BrokerError):
    code = 121
    name = "INVALID_RECORD_STATE"
    retriable = False
    invalid_metadata = False
    description = (
        "The record state is invalid. The acknowledgement of delivery could not be completed."
    )


class ShareSessionNotFoundError(BrokerError):
    code = 122
    name = "SHARE_SESSION_NOT_FOUND"
    retriable = True
    invalid_metadata = False
    description = "The share session was not found."


class InvalidShareSessionEpochError(BrokerError):
    code = 123
    name = "INVALID_SHARE_SESSION_EPOCH"
    retriable = True
    invalid_metadata = False
    description = "The share session epoch is invalid."


class FencedStateEpochError(BrokerError):
    code = 124
    name = "FENCED_STATE_EPOCH"
    retriable = False
    invalid_metadata = False
    description = "The coordinator rejected the request because the state epoch did not match."


class InvalidVoterKeyError(BrokerError):
    code = 125
    name = "INVALID_VOTER_KEY"
    retriable = False
    invalid_metadata = False
    description = "The voter key doesn't match the receiving replica's key."


class DuplicateVoterError(BrokerError):
    code = 126
    name = "DUPLICATE_VOTER"
    retriable = False
    invalid_metadata = False
    description = "The voter is already part of the set of voters."


class VoterNotFoundError(BrokerError):
    code = 127
    name = "VOTER_NOT_FOUND"
    retriable = False
    invalid_metadata = False
    description = "The voter is not part of the set of voters."


class InvalidRegularExpressionError(BrokerError):
    code = 128
    name = "INVALID_REGULAR_EXPRESSION"
    retriable = False
    invalid_metadata = False
    description = "The regular expression is not valid."


class RebootstrapRequiredError(BrokerError):
    code = 129
    name = "REBOOTSTRAP_REQUIRED"
    retriable = False
    invalid_metadata = False
    description = "Client metadata is stale. The client should rebootstrap to obtain new metadata."


class StreamsInvalidTopologyError(BrokerError):
    code = 130
    name = "STREAMS_INVALID_TOPOLOGY"
    retriable = False
    invalid_metadata = False
    description = "The supplied topology is invalid."


class StreamsInvalidTopologyEpochError(BrokerError):
    code = 131
    name = "STREAMS_INVALID_TOPOLOGY_EPOCH"
    retriable = False
    invalid_metadata = False
    description = "The supplied topology epoch is invalid."


class StreamsTopologyFencedError(BrokerError):
    code = 132
    name = "STREAMS_TOPOLOGY_FENCED"
    retriable = False
    invalid_metadata = False
    description = "The supplied topology epoch is outdated."


class ShareSessionLimitReachedError(BrokerError):
    code = 133
    name = "SHARE_SESSION_LIMIT_REACHED"
    retriable = True
    invalid_metadata = False
    description = "The limit of share sessions has been reached."


class GroupDeletionFailedError(BrokerError):
    code = 134
    name = "GROUP_DELETION_FAILED"
    retriable = False
    invalid_metadata = False
    description = (
        "DeleteGroups could not complete; see the error message on the per-group result for "
        "details."
    )


class StreamsTopologyDescriptionUpdateFailedError(BrokerError):
    code = 135
    name = "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED"
    retriable = False
    invalid_metadata = False
    description = (
        "The broker could not process the topology description update; see the error message for "
        "details."
    )


class ControllerIdNotRegisteredError(BrokerError):
    code = 136
    name = "CONTROLLER_ID_NOT_REGISTERED"
    retriable = False
    invalid_metadata = False
    description = "The given controller ID was not registered."


#: The highest error code this version of kproto knows by name.
MAX_KNOWN_CODE = 136


class ErrorCode(enum.IntEnum):
    """Every Kafka error code by its protocol name: compare answers with these,
    never with bare numbers (``p["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE``)."""

    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133
    GROUP_DELETION_FAILED = 134
    STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED = 135
    CONTROLLER_ID_NOT_REGISTERED = 136


__all__ = [
    "BROKER_ERRORS",
    "MAX_KNOWN_CODE",
    "AbortableTransactionError",
    "BrokerError",
    "BrokerIdNotRegisteredError",
    "BrokerNotAvailableError",
    "ChecksumError",
    "ClusterAuthorizationFailedError",
    "CommitFailedError",
    "ConcurrentTransactionsError",
    "ConfigError",
    "ControllerIdNotRegisteredError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptMessageError",
    "CorruptRecordError",
    "CrcError",
    "DecodeError",
    "DecompressionLimitError",
    "DelegationTokenAuthDisabledError",
    "DelegationTokenAuthorizationFailedError",
    "DelegationTokenExpiredError",
    "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError",
    "DelegationTokenRequestNotAllowedError",
    "DuplicateBrokerRegistrationError",
    "DuplicateResourceError",
    "DuplicateSequenceNumberError",
    "DuplicateVoterError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "EncodeError",
    "ErrorCode",
    "FeatureUpdateFailedError",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "FencedStateEpochError",
    "FetchSessionIdNotFoundError",
    "FetchSessionTopicIdError",
    "FormatError",
    "GroupAuthorizationFailedError",
    "GroupDeletionFailedError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "GroupSubscribedToTopicError",
    "IllegalGenerationError",
    "IllegalSaslStateError",
    "IllegalStateError",
    "InconsistentClusterIdError",
    "InconsistentGroupProtocolError",
    "InconsistentTopicIdError",
    "InconsistentVoterSetError",
    "IneligibleReplicaError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigError",
    "InvalidFetchSessionEpochError",
    "InvalidFetchSizeError",
    "InvalidGroupIdError",
    "InvalidPartitionsError",
    "InvalidPrincipalTypeError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidRecordStateError",
    "InvalidRegistrationError",
    "InvalidRegularExpressionError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidShareSessionEpochError",
    "InvalidTimestampError",
    "InvalidTopicExceptionError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "InvalidUpdateVersionError",
    "InvalidVoterKeyError",
    "KafkaConnectionError",
    "KafkaStorageError",
    "KafkaTimeoutError",
    "KprotoError",
    "LeaderNotAvailableError",
    "ListenerNotFoundError",
    "LogDirNotFoundError",
    "MemberIdRequiredError",
    "MessageTooLargeError",
    "MismatchedEndpointTypeError",
    "NetworkExceptionError",
    "NewLeaderElectedError",
    "NoReassignmentInProgressError",
    "NonEmptyGroupError",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetMetadataTooLargeError",
    "OffsetMovedToTieredStorageError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceNumberError",
    "PolicyViolationError",
    "PositionOutOfRangeError",
    "PreferredLeaderNotAvailableError",
    "PrincipalDeserializationFailureError",
    "ProducerFencedError",
    "ProtocolError",
    "ReassignmentInProgressError",
    "RebalanceInProgressError",
    "RebootstrapRequiredError",
    "RecordListTooLargeError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "ResourceNotFoundError",
    "SaslAuthenticationFailedError",
    "SchemaError",
    "SchemaRegistryError",
    "SecurityDisabledError",
    "ShareSessionLimitReachedError",
    "ShareSessionNotFoundError",
    "SnapshotNotFoundError",
    "StaleBrokerEpochError",
    "StaleControllerEpochError",
    "StaleMemberEpochError",
    "StreamsInvalidTopologyEpochError",
    "StreamsInvalidTopologyError",
    "StreamsTopologyDescriptionUpdateFailedError",
    "StreamsTopologyFencedError",
    "TelemetryTooLargeError",
    "ThrottlingQuotaExceededError",
    "TlsCertificateError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TopicDeletionDisabledError",
    "TransactionAbortableError",
    "TransactionAbortedError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError",
    "TransactionalIdNotFoundError",
    "UnacceptableCredentialError",
    "UnknownBrokerError",
    "UnknownControllerIdError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownSubscriptionIdError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnreleasedInstanceIdError",
    "UnstableOffsetCommitError",
    "UnsupportedAssignorError",
    "UnsupportedCompressionTypeError",
    "UnsupportedEndpointTypeError",
    "UnsupportedForMessageFormatError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "VoterNotFoundError",
    "error_for_code",
    "raise_for_code",
]
# ---- END GENERATED ----
