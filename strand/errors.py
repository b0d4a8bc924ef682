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
    NETWORK_EXCEPTION = 13
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
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INVALID_UPDATE_VERSION = 95
    INELIGIBLE_REPLICA = 107
    STALE_BROKER_EPOCH = 77
    UNKNOWN_TOPIC_ID = 100
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    GROUP_NOT_EMPTY = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    FENCED_INSTANCE_ID = 82
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    UNKNOWN_PRODUCER_ID = 59
    PRODUCER_FENCED = 90
    TRANSACTIONAL_ID_NOT_FOUND = 105
    UNSTABLE_OFFSET_COMMIT = 88
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    SASL_AUTHENTICATION_FAILED = 58
    RESOURCE_NOT_FOUND = 91


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
    retriable = True  # as Kafka's: the partition's leadership moves to a healthy replica


class LogWriteError(StorageError):
    """A write to a partition's log failed on disk (full, failing): nothing of it was
    kept, and the log takes no more writes until it is recovered (Kafka's
    KafkaStorageException for an offline log directory)."""


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


class StaleBrokerEpochError(StrandError):
    """A broker request with another registration's broker epoch (KIP-380): a stale
    incarnation of the broker, or someone who is not the broker."""

    code = ErrorCode.STALE_BROKER_EPOCH


# ---------------------------------------------------------------- one class per code

class UnknownServerError(StrandError):
    """The server failed in a way it did not classify (a bug, or an unknown code)."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class InvalidFetchSizeError(StrandError):
    code = ErrorCode.INVALID_FETCH_SIZE


class LeaderNotAvailableError(StrandError):
    """The partition has no live leader right now (an election is under way)."""

    code = ErrorCode.LEADER_NOT_AVAILABLE
    retriable = True


class NotLeaderOrFollowerError(StrandError):
    """The node asked does not lead the partition (the client's metadata is stale)."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    retriable = True


class RequestTimedOutError(StrandError):
    """The request (or a record's delivery) did not complete in time."""

    code = ErrorCode.REQUEST_TIMED_OUT
    retriable = True


class NetworkError(StrandError):
    """No answer came back: the gateway could not be reached, or the connection broke
    (Kafka's NetworkException; raised by the client, never sent by a server)."""

    code = ErrorCode.NETWORK_EXCEPTION
    retriable = True


class RecordListTooLargeError(StrandError):
    code = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(StrandError):
    """acks=all and the in-sync replica set is smaller than min.insync.replicas."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS
    retriable = True


class NotEnoughReplicasAfterAppendError(StrandError):
    """Appended by the leader, but the in-sync replica set shrank before acknowledging."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    retriable = True


class InvalidRequiredAcksError(StrandError):
    code = ErrorCode.INVALID_REQUIRED_ACKS


class FencedLeaderEpochError(StrandError):
    """The client's leader epoch is older than the partition's: its metadata is stale."""

    code = ErrorCode.FENCED_LEADER_EPOCH
    retriable = True


class UnknownLeaderEpochError(StrandError):
    """The client's leader epoch is newer than the node knows: the node lags behind."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH
    retriable = True


class InvalidUpdateVersionError(StrandError):
    """A partition change based on an outdated partition epoch: re-read and retry."""

    code = ErrorCode.INVALID_UPDATE_VERSION


class IneligibleReplicaError(StrandError):
    """An ISR change that adds a replica which is not alive or is shutting down."""

    code = ErrorCode.INELIGIBLE_REPLICA


class UnknownTopicIdError(StrandError):
    """The topic id is not the topic's current one: it was deleted (and maybe
    re-created); refresh the metadata."""

    code = ErrorCode.UNKNOWN_TOPIC_ID
    retriable = True


class OffsetMetadataTooLargeError(StrandError):
    """The metadata string of a committed offset is over offset.metadata.max.bytes."""

    code = ErrorCode.OFFSET_METADATA_TOO_LARGE


class CoordinatorLoadInProgressError(StrandError):
    """The group coordinator is still loading this group's state: retry shortly."""

    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    retriable = True


class CoordinatorNotAvailableError(StrandError):
    """No coordinator serves this group right now (its shard is moving): retry."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True


class NotCoordinatorError(StrandError):
    """This coordinator does not own the group's shard: look the coordinator up again."""

    code = ErrorCode.NOT_COORDINATOR
    retriable = True


class IllegalGenerationError(StrandError):
    """The member's generation is not the group's: it must rejoin (a zombie is fenced)."""

    code = ErrorCode.ILLEGAL_GENERATION


class InconsistentGroupProtocolError(StrandError):
    """The member supports no assignor every other member supports."""

    code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


class InvalidGroupIdError(StrandError):
    code = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(StrandError):
    """The group does not know this member (it was removed): rejoin without an id."""

    code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(StrandError):
    code = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(StrandError):
    """The group is rebalancing: rejoin."""

    code = ErrorCode.REBALANCE_IN_PROGRESS


class GroupNotEmptyError(StrandError):
    """The group still has members (delete or reset needs an empty group)."""

    code = ErrorCode.GROUP_NOT_EMPTY


class GroupIdNotFoundError(StrandError):
    code = ErrorCode.GROUP_ID_NOT_FOUND


class MemberIdRequiredError(StrandError):
    """Join again with the member id given in the answer (KIP-394)."""

    code = ErrorCode.MEMBER_ID_REQUIRED


class FencedInstanceIdError(StrandError):
    """Another member now uses this group.instance.id: this one is a zombie."""

    code = ErrorCode.FENCED_INSTANCE_ID


class OutOfOrderSequenceError(StrandError):
    """A producer's batch does not follow the last sequence the partition has from it
    (a batch in between was lost): the producer must bump its epoch (KIP-360)."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(StrandError):
    """A producer's batch repeats sequence numbers the partition already has."""

    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(StrandError):
    """A produce request carries an epoch older than the partition has seen from this
    producer id: a newer instance of the producer has fenced it."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(StrandError):
    """The request does not fit the producer's transaction state: a commit with no
    open transaction, an abort after a commit, a non-transactional write while its
    transaction is open."""

    code = ErrorCode.INVALID_TXN_STATE


class InvalidProducerIdMappingError(StrandError):
    """The producer id is not the one the coordinator holds for this transactional
    id (unknown id, or another instance took it over): call InitProducerId again."""

    code = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class InvalidTransactionTimeoutError(StrandError):
    """transaction.timeout.ms is not in 1..transaction.max.timeout.ms."""

    code = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class ConcurrentTransactionsError(StrandError):
    """The previous transaction of this id is still completing: retry shortly."""

    code = ErrorCode.CONCURRENT_TRANSACTIONS
    retriable = True


class TransactionCoordinatorFencedError(StrandError):
    """A transaction marker, or a shard owner's write, comes from an older transaction
    coordinator: a newer owner of the transaction's shard exists."""

    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class UnknownProducerIdError(StrandError):
    """The partition has no state for this producer id (expired or never known)."""

    code = ErrorCode.UNKNOWN_PRODUCER_ID


class ProducerFencedError(StrandError):
    """The transaction coordinator has given this producer's transactional id a newer
    epoch: this instance is a zombie and must close."""

    code = ErrorCode.PRODUCER_FENCED


class TransactionalIdNotFoundError(StrandError):
    """The coordinator has no state for this transactional id (never used, or expired
    after transactional.id.expiration.ms)."""

    code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


class UnstableOffsetCommitError(StrandError):
    """The group has offsets of an open transaction pending for this partition: an
    offset fetch asking for stable offsets waits until that transaction ends."""

    code = ErrorCode.UNSTABLE_OFFSET_COMMIT
    retriable = True  # as Kafka's UnstableOffsetCommitException


# ---------------------------------------------------------------- security

class AuthenticationError(StrandError):
    """The caller could not be authenticated: wrong credentials, an unknown user, an
    expired or forged session. Not retriable with the same credentials."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class UnsupportedSaslMechanismError(AuthenticationError):
    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class AuthorizationError(StrandError):
    """The principal may not do this; the message names the principal, the operation
    and the resource. Base of the four Kafka authorization errors."""


class TopicAuthorizationFailedError(AuthorizationError):
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationFailedError(AuthorizationError):
    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationFailedError(AuthorizationError):
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class TransactionalIdAuthorizationFailedError(AuthorizationError):
    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class SecurityDisabledError(StrandError):
    """An ACL call to a cluster that runs no authorizer."""

    code = ErrorCode.SECURITY_DISABLED


class ResourceNotFoundError(StrandError):
    code = ErrorCode.RESOURCE_NOT_FOUND


_ERROR_CLASSES: dict[ErrorCode, type[StrandError]] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: UnknownServerError,
    ErrorCode.OFFSET_OUT_OF_RANGE: OffsetOutOfRangeError,
    ErrorCode.CORRUPT_MESSAGE: CorruptRecordError,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: UnknownTopicOrPartitionError,
    ErrorCode.INVALID_FETCH_SIZE: InvalidFetchSizeError,
    ErrorCode.LEADER_NOT_AVAILABLE: LeaderNotAvailableError,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: NotLeaderOrFollowerError,
    ErrorCode.REQUEST_TIMED_OUT: RequestTimedOutError,
    ErrorCode.NETWORK_EXCEPTION: NetworkError,
    ErrorCode.MESSAGE_TOO_LARGE: RecordTooLargeError,
    ErrorCode.INVALID_TOPIC_EXCEPTION: InvalidTopicError,
    ErrorCode.KAFKA_STORAGE_ERROR: StorageError,
    ErrorCode.RECORD_LIST_TOO_LARGE: RecordListTooLargeError,
    ErrorCode.INVALID_TIMESTAMP: InvalidTimestampError,
    ErrorCode.INVALID_PARTITIONS: InvalidPartitionsError,
    ErrorCode.INVALID_REPLICATION_FACTOR: InvalidReplicationFactorError,
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: InvalidReplicaAssignmentError,
    ErrorCode.TOPIC_ALREADY_EXISTS: TopicAlreadyExistsError,
    ErrorCode.NOT_CONTROLLER: NotControllerError,
    ErrorCode.INVALID_REQUEST: InvalidRequestError,
    ErrorCode.STALE_BROKER_EPOCH: StaleBrokerEpochError,
    ErrorCode.INVALID_CONFIG: InvalidConfigError,
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: UnsupportedCompressionError,
    ErrorCode.INVALID_RECORD: InvalidRecordError,
    ErrorCode.NOT_ENOUGH_REPLICAS: NotEnoughReplicasError,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: NotEnoughReplicasAfterAppendError,
    ErrorCode.INVALID_REQUIRED_ACKS: InvalidRequiredAcksError,
    ErrorCode.FENCED_LEADER_EPOCH: FencedLeaderEpochError,
    ErrorCode.UNKNOWN_LEADER_EPOCH: UnknownLeaderEpochError,
    ErrorCode.INVALID_UPDATE_VERSION: InvalidUpdateVersionError,
    ErrorCode.INELIGIBLE_REPLICA: IneligibleReplicaError,
    ErrorCode.UNKNOWN_TOPIC_ID: UnknownTopicIdError,
    ErrorCode.OFFSET_METADATA_TOO_LARGE: OffsetMetadataTooLargeError,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: CoordinatorLoadInProgressError,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: CoordinatorNotAvailableError,
    ErrorCode.NOT_COORDINATOR: NotCoordinatorError,
    ErrorCode.ILLEGAL_GENERATION: IllegalGenerationError,
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: InconsistentGroupProtocolError,
    ErrorCode.INVALID_GROUP_ID: InvalidGroupIdError,
    ErrorCode.UNKNOWN_MEMBER_ID: UnknownMemberIdError,
    ErrorCode.INVALID_SESSION_TIMEOUT: InvalidSessionTimeoutError,
    ErrorCode.REBALANCE_IN_PROGRESS: RebalanceInProgressError,
    ErrorCode.GROUP_NOT_EMPTY: GroupNotEmptyError,
    ErrorCode.GROUP_ID_NOT_FOUND: GroupIdNotFoundError,
    ErrorCode.MEMBER_ID_REQUIRED: MemberIdRequiredError,
    ErrorCode.FENCED_INSTANCE_ID: FencedInstanceIdError,
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: OutOfOrderSequenceError,
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER: DuplicateSequenceError,
    ErrorCode.INVALID_PRODUCER_EPOCH: InvalidProducerEpochError,
    ErrorCode.INVALID_TXN_STATE: InvalidTxnStateError,
    ErrorCode.TRANSACTION_COORDINATOR_FENCED: TransactionCoordinatorFencedError,
    ErrorCode.UNKNOWN_PRODUCER_ID: UnknownProducerIdError,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: InvalidProducerIdMappingError,
    ErrorCode.INVALID_TRANSACTION_TIMEOUT: InvalidTransactionTimeoutError,
    ErrorCode.CONCURRENT_TRANSACTIONS: ConcurrentTransactionsError,
    ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: TransactionalIdNotFoundError,
    ErrorCode.PRODUCER_FENCED: ProducerFencedError,
    ErrorCode.UNSTABLE_OFFSET_COMMIT: UnstableOffsetCommitError,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: TopicAuthorizationFailedError,
    ErrorCode.GROUP_AUTHORIZATION_FAILED: GroupAuthorizationFailedError,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: ClusterAuthorizationFailedError,
    ErrorCode.UNSUPPORTED_SASL_MECHANISM: UnsupportedSaslMechanismError,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: TransactionalIdAuthorizationFailedError,
    ErrorCode.SECURITY_DISABLED: SecurityDisabledError,
    ErrorCode.SASL_AUTHENTICATION_FAILED: AuthenticationError,
    ErrorCode.RESOURCE_NOT_FOUND: ResourceNotFoundError,
}


def error_for(code: int, message: str = "") -> StrandError:
    """The typed error for a response's error code (Kafka's ``Errors.forCode``).

    A code this version does not know becomes an UnknownServerError naming the
    number. ``NONE`` is not an error: asking for it is a caller's bug (ValueError).
    """
    try:
        known = ErrorCode(code)
    except ValueError:
        return UnknownServerError(f"unknown error code {code}: {message}" if message
                                  else f"unknown error code {code}")
    if known is ErrorCode.NONE:
        raise ValueError("error code NONE is not an error")
    return _ERROR_CLASSES[known](message or known.name)
