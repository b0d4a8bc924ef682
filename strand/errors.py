"""Typed errors shared by the library, the services and the SDK.

Codes and names follow Kafka's protocol error codes so that clients and operators
can rely on the same vocabulary (and a Kafka wire front end stays possible).
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    INVALID_TOPIC_EXCEPTION = 17
    KAFKA_STORAGE_ERROR = 56
    RECORD_LIST_TOO_LARGE = 18
    INVALID_TIMESTAMP = 32
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    TOPIC_ALREADY_EXISTS = 36
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    INVALID_CONFIG = 40
    UNSUPPORTED_COMPRESSION_TYPE = 76
    INVALID_RECORD = 87


class StrandError(Exception):
    """Base of every error Strand raises on purpose; carries a typed code."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: bool = False


class CorruptRecordError(StrandError):
    """Bytes that do not form a valid record batch (bad length, magic or CRC)."""

    code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(StrandError):
    """A well-formed batch that breaks a rule of the log (offsets, counts, keys)."""

    code = ErrorCode.INVALID_RECORD


class RecordTooLargeError(StrandError):
    code = ErrorCode.MESSAGE_TOO_LARGE


class UnsupportedCompressionError(StrandError):
    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class InvalidTimestampError(StrandError):
    code = ErrorCode.INVALID_TIMESTAMP


class OffsetOutOfRangeError(StrandError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class InvalidConfigError(StrandError):
    code = ErrorCode.INVALID_CONFIG


class StorageError(StrandError):
    """The log cannot serve: a closed log, a failed disk operation."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class InvalidTopicError(StrandError):
    """A topic name that breaks Kafka's naming rules (characters, length, reserved names)."""

    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class InvalidPartitionsError(StrandError):
    """A partition count that is out of range (or would shrink an existing topic)."""

    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(StrandError):
    """A replication factor the cluster cannot honour (< 1 or more than the brokers)."""

    code = ErrorCode.INVALID_REPLICATION_FACTOR


class UnknownTopicOrPartitionError(StrandError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    retriable = True  # metadata may not have reached this node yet


class TopicAlreadyExistsError(StrandError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidReplicaAssignmentError(StrandError):
    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class NotControllerError(StrandError):
    """This controller is a standby (or was deposed); ask the active one."""

    code = ErrorCode.NOT_CONTROLLER
    retriable = True


class InvalidRequestError(StrandError):
    code = ErrorCode.INVALID_REQUEST
