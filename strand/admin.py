"""The SDK's admin client: topics, partitions, configs and the cluster's brokers.

::

    from strand import Admin, NewTopic

    with Admin("127.0.0.1:7070") as admin:
        admin.create_topics([NewTopic("events", num_partitions=6, replication_factor=3,
                                      config={"retention.ms": "86400000"})])
        admin.alter_configs("events", set={"cleanup.policy": "compact"})
        print(admin.describe_topics(["events"])[0].partitions[0].leader)

Failures raise the typed StrandError of the error code (``error_for``):
TopicAlreadyExistsError, InvalidTopicError, InvalidConfigError,
UnknownTopicOrPartitionError, InvalidPartitionsError, ... Calls about several
topics wait for every topic's result, then raise the error of the first topic that
failed (in the order given), its message naming every other failure as well; the
topics that succeeded are done. Call per topic to handle failures one by one. A
gateway that cannot be reached raises TransportError (RequestTimedOutError for a
deadline): reads (list, describe) after trying again until their timeout (a gateway
restarting; at once with ``retry_reads=False``, as the CLI does), changes at once
(whether a change that got no answer was applied is unknown).

Changes are made by the active controller; gateways learn them through their etcd
watch a moment later. So that a change is usable as soon as the call returns,
``create_topics``, ``delete_topics``, ``create_partitions`` and ``alter_configs``
wait (up to ``timeout_ms``) until the gateway's metadata shows it. (With several
gateways behind one address, another gateway may still lag for a moment.)
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import grpc

from strand.admin_acls import AclAdmin
from strand.client.bootstrap import resolve_bootstrap
from strand.client.channel import open_channel, transport_error
from strand.client.metadata import BrokerInfo
from strand.client.retries import until_deadline
from strand.client.sasl import SaslCredentials
from strand.client.structs import PreparedTransaction, TopicPartition
from strand.client.transactions import ProducerState, TransactionDescription, TransactionListing
from strand.consumer.protocol import ProtocolError, decode_assignment
from strand.errors import ErrorCode, InvalidRequestError, RequestTimedOutError, error_for
from strand.security.tls import ClientTls
from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc
from strand.v1 import groups_pb2 as pb_groups
from strand.v1 import storage_pb2 as pb_storage
from strand.v1 import transactions_pb2 as pb_txn

__all__ = [
    "Admin",
    "ClusterDescription",
    "ConfigValue",
    "GroupDescription",
    "GroupListing",
    "GroupMemberDescription",
    "NewTopic",
    "PartitionDescription",
    "PartitionReassignment",
    "ProducerState",
    "TopicDescription",
    "TransactionDescription",
    "TransactionListing",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
_ids = itertools.count(1)
# EndTxn answers these while the coordinator loads, moves, or finishes the id's
# previous transaction: asked again after a short pause.
_RETRIED_TXN_ERRORS = frozenset({
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.CONCURRENT_TRANSACTIONS})
_TXN_RETRY_S = 0.05
_VISIBILITY_POLL_S = 0.02
# The calls that change nothing: tried again while the gateway cannot be reached
# (strand.client.retries), as Kafka's admin client does within its API timeout. A
# change is not: whether a call that got no answer was applied is unknown.
_RETRIED_READS = frozenset({
    "Metadata", "DescribeConfigs", "ListPartitionReassignments", "ListGroups",
    "DescribeGroup", "OffsetFetch", "ListTransactions", "DescribeTransactions",
    "DescribeProducers", "DescribeAcls", "DescribeUserScramCredentials",
    "DescribeClientQuotas"})


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create. ``replica_assignment`` (partition → ordered broker ids)
    places the replicas explicitly and then fixes the partition count and the
    replication factor; otherwise rack-aware placement decides."""

    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    config: Mapping[str, str] = field(default_factory=dict)
    replica_assignment: Mapping[int, Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int | None  # node id; None while the partition has no live leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: str
    is_internal: bool
    partitions: tuple[PartitionDescription, ...]


@dataclass(frozen=True, slots=True)
class ConfigValue:
    name: str
    value: str
    is_default: bool


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """An ongoing reassignment: ``replicas`` is the target followed by the replicas
    being removed; ``adding`` still copy the data."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str
    protocol_type: str


@dataclass(frozen=True, slots=True)
class GroupMemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    partitions: tuple[TopicPartition, ...]
    client_host: str = ""  # the member's address as the gateway saw its join


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol: str
    generation: int
    leader_id: str
    members: tuple[GroupMemberDescription, ...]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int | None  # Kafka's integer id: Strand's controllers have names
    brokers: tuple[BrokerInfo, ...]
    controller: str | None = None  # the active controller's id; None: none now


def _check_name(name: object) -> str:
    if type(name) is not str:
        raise TypeError(f"topic names are str, not {type(name).__name__}")
    return name


def _raise_failures(results: Iterable[Any], what: str) -> None:
    """Raise the first failed result's typed error (see the module docstring)."""
    failed = [r for r in results if r.error_code != ErrorCode.NONE]
    if not failed:
        return
    first = failed[0]
    message = f"{what} {first.name!r}: {first.error_message or ErrorCode(first.error_code).name}"
    if len(failed) > 1:
        others = ", ".join(f"{r.name!r} ({_code_name(r.error_code)}: {r.error_message})"
                           for r in failed[1:])
        message += f" [also failed: {others}]"
    raise error_for(first.error_code, message)


def _raise_partition_failures(results: Iterable[tuple[str, Any]], what: str) -> None:
    """Raise the first failed partition's typed error, naming the others that failed;
    ``results`` are (topic, a partition's answer) pairs."""
    failed = [(t, r) for t, r in results if r.error_code != ErrorCode.NONE]
    if not failed:
        return
    (topic, first), *others = failed
    message = (f"{what} {topic}-{first.partition}: "
               f"{first.error_message or _code_name(first.error_code)}")
    if others:
        message += " [also failed: " + ", ".join(
            f"{t}-{r.partition} ({_code_name(r.error_code)}: {r.error_message})"
            for t, r in others) + "]"
    raise error_for(first.error_code, message)


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class Admin(AclAdmin):
    """Administers topics through a gateway; see the module docstring."""

    def __init__(self, bootstrap: str | None = None, *, request_timeout_ms: float = 30_000,
                 client_id: str | None = None, security_protocol: str = "PLAINTEXT",
                 ssl_cafile: str | None = None, ssl_certfile: str | None = None,
                 ssl_keyfile: str | None = None, sasl_mechanism: str | None = None,
                 sasl_plain_username: str | None = None,
                 sasl_plain_password: str | None = None, retry_reads: bool = True) -> None:
        if request_timeout_ms <= 0:
            raise ValueError(f"request_timeout_ms must be positive, got {request_timeout_ms}")
        self.client_id = client_id or f"strand-admin-{next(_ids)}"
        self.bootstrap = resolve_bootstrap(bootstrap)
        self.request_timeout_ms = request_timeout_ms
        self.retry_reads = retry_reads
        tls = ClientTls.from_settings(security_protocol, ssl_cafile, ssl_certfile, ssl_keyfile)
        sasl = SaslCredentials.from_settings(security_protocol, sasl_mechanism,
                                             sasl_plain_username, sasl_plain_password)
        self._channel = open_channel(self.bootstrap, self.client_id, tls, sasl)
        self._stub = gateway_pb2_grpc.GatewayStub(self._channel)
        self._closed = False

    # ---------------------------------------------------------------- plumbing

    def _call(self, method: Callable[..., T], request: Any, what: str,
              timeout_ms: float | None = None) -> T:
        """One call (``what``: its RPC's name first), within ``timeout_ms`` (default: the
        request timeout). A read (_RETRIED_READS) is tried again while the gateway
        cannot be reached, until that time is up, unless ``retry_reads`` is off."""
        if self._closed:
            raise RuntimeError("the admin client is closed")
        timeout = (self.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000

        def attempt(seconds: float) -> T:
            try:
                return method(request, timeout=seconds)
            except grpc.RpcError as exc:
                raise transport_error(exc, self.bootstrap, what) from None

        if not self.retry_reads or what.partition(" ")[0] not in _RETRIED_READS:
            return attempt(timeout)
        return until_deadline(attempt, timeout)

    def _metadata(self, names: Sequence[str] = ()) -> pb.MetadataResponse:
        response: pb.MetadataResponse = self._call(
            self._stub.Metadata, pb.MetadataRequest(topics=list(names)), "Metadata")
        return response

    def _await_visible(self, check: Callable[[], bool], timeout_ms: float | None,
                       what: str) -> None:
        deadline = time.monotonic() + (self.request_timeout_ms if timeout_ms is None
                                       else timeout_ms) / 1000
        while not check():
            if time.monotonic() >= deadline:
                log.warning("%s: done, but the gateway's metadata does not show it yet", what)
                return
            time.sleep(_VISIBILITY_POLL_S)

    def _topics_state(self, names: Sequence[str]) -> dict[str, pb.TopicMetadata]:
        return {t.name: t for t in self._metadata(names).topics}

    # ------------------------------------------------------------------ topics

    def create_topics(self, new_topics: Sequence[NewTopic], validate_only: bool = False,
                      timeout_ms: float | None = None) -> None:
        """Create the topics (``validate_only``: only check that they could be)."""
        topics = []
        for topic in new_topics:
            if not isinstance(topic, NewTopic):
                raise TypeError(f"create_topics takes NewTopic objects, not {topic!r}")
            assignments = [pb.ReplicaAssignment(partition=p, replicas=list(r))
                           for p, r in sorted((topic.replica_assignment or {}).items())]
            topics.append(pb.CreatableTopic(
                name=_check_name(topic.name), num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                configs={str(k): str(v) for k, v in topic.config.items()},
                assignments=assignments))
        if not topics:
            return
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        response = self._call(self._stub.CreateTopics, pb.CreateTopicsRequest(
            topics=topics, timeout_ms=int(timeout), validate_only=validate_only),
            "CreateTopics", timeout + 5000)
        created = [r.name for r in response.topics if r.error_code == ErrorCode.NONE]
        if created and not validate_only:
            def visible() -> bool:
                state = self._topics_state(created)
                return all(name in state and int(state[name].error_code) == ErrorCode.NONE
                           and len(state[name].partitions) > 0 for name in created)

            self._await_visible(visible, timeout_ms, f"create_topics({created})")
        _raise_failures(response.topics, "cannot create topic")

    def delete_topics(self, names: Sequence[str], timeout_ms: float | None = None) -> None:
        """Delete the topics and their data."""
        names = [_check_name(n) for n in names]
        if not names:
            return
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        response = self._call(self._stub.DeleteTopics, pb.DeleteTopicsRequest(
            topics=names, timeout_ms=int(timeout)), "DeleteTopics", timeout + 5000)
        deleted = [r.name for r in response.topics if r.error_code == ErrorCode.NONE]
        if deleted:
            def gone() -> bool:
                state = self._topics_state(deleted)
                return all(name not in state or int(state[name].error_code)
                           == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for name in deleted)

            self._await_visible(gone, timeout_ms, f"delete_topics({deleted})")
        _raise_failures(response.topics, "cannot delete topic")

    def list_topics(self, include_internal: bool = False) -> list[str]:
        """Every topic's name, sorted (internal topics such as ``__consumer_offsets``
        only with ``include_internal``)."""
        return sorted(t.name for t in self._metadata().topics
                      if int(t.error_code) == ErrorCode.NONE and (include_internal
                                                             or not t.is_internal))

    def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        """Partitions with their leader, replicas and in-sync replicas, in the order given."""
        names = [_check_name(n) for n in names]
        if not names:
            return []
        response = self._metadata(names)
        _raise_failures(response.topics, "cannot describe topic")
        found = {t.name: t for t in response.topics}
        out = []
        for name in names:
            topic = found[name]
            partitions = tuple(sorted((PartitionDescription(
                p.partition, p.leader if p.leader >= 0 else None, p.leader_epoch,
                tuple(p.replicas), tuple(p.isr)) for p in topic.partitions),
                key=lambda p: p.partition))
            out.append(TopicDescription(topic.name, topic.topic_id, topic.is_internal,
                                        partitions))
        return out

    def create_partitions(self, topic: str, new_total: int, validate_only: bool = False,
                          timeout_ms: float | None = None,
                          assignments: Sequence[Sequence[int]] | None = None) -> None:
        """Grow ``topic`` to ``new_total`` partitions (never fewer: InvalidPartitionsError).
        Keyed records map to partitions by count, so some keys move to new partitions.

        ``assignments`` places the new partitions explicitly (Kafka's
        ``NewPartitions.increaseTo(total, assignments)``): one ordered replica list per
        new partition, preferred leader first, each as long as the topic's replication
        factor, on distinct live brokers (else InvalidReplicaAssignmentError); without
        it rack-aware placement decides."""
        _check_name(topic)
        if type(new_total) is not int:
            raise TypeError(f"new_total must be an int, not {new_total!r}")
        placed = []
        for replicas in assignments or ():
            if isinstance(replicas, str | bytes) or not all(type(r) is int for r in replicas):
                raise TypeError(f"each assignment is a list of broker ids, not {replicas!r}")
            placed.append(pb.CreatePartitionsRequest.Assignment(replicas=list(replicas)))
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        response = self._call(self._stub.CreatePartitions, pb.CreatePartitionsRequest(
            topics=[pb.CreatePartitionsRequest.Topic(name=topic, count=new_total,
                                                     assignments=placed)],
            timeout_ms=int(timeout), validate_only=validate_only),
            "CreatePartitions", timeout + 5000)
        _raise_failures(response.topics, "cannot create partitions of topic")
        if not validate_only:
            def grown() -> bool:
                state = self._topics_state([topic]).get(topic)
                return state is not None and len(state.partitions) >= new_total

            self._await_visible(grown, timeout_ms, f"create_partitions({topic!r})")

    # ----------------------------------------------------------------- configs

    def describe_configs(self, topic: str) -> dict[str, ConfigValue]:
        """Every config of the topic, set or default, by name."""
        response = self._call(self._stub.DescribeConfigs,
                              pb.DescribeConfigsRequest(topics=[_check_name(topic)]),
                              "DescribeConfigs")
        _raise_failures(response.topics, "cannot describe the configs of topic")
        entries = response.topics[0].configs if response.topics else []
        return {e.key: ConfigValue(e.key, e.value, e.is_default) for e in entries}

    def alter_configs(self, topic: str, set: Mapping[str, str] | None = None,
                      delete: Iterable[str] | None = None, validate_only: bool = False,
                      timeout_ms: float | None = None) -> None:
        """Set some configs of ``topic`` and return others to their defaults (Kafka's
        incremental alter); the other configs keep their values."""
        _check_name(topic)
        to_set = {str(k): str(v) for k, v in (set or {}).items()}
        to_delete = [str(k) for k in (delete or ())]
        both = sorted(to_set.keys() & frozenset(to_delete))
        if both:
            raise ValueError(f"configs both set and deleted: {both}")
        Op = pb.AlterConfigsRequest.Op
        ops = [Op(key=k, value=v, kind=Op.SET) for k, v in to_set.items()]
        ops += [Op(key=k, kind=Op.DELETE) for k in to_delete]
        if not ops:
            return
        response = self._call(self._stub.AlterConfigs, pb.AlterConfigsRequest(
            topics=[pb.AlterConfigsRequest.Topic(name=topic, ops=ops)],
            validate_only=validate_only), "AlterConfigs", timeout_ms)
        _raise_failures(response.topics, "cannot alter the configs of topic")
        if not validate_only:
            def applied() -> bool:
                current = self.describe_configs(topic)
                return (all(k in current and current[k].value == v and not current[k].is_default
                            for k, v in to_set.items())
                        and all(k not in current or current[k].is_default for k in to_delete))

            self._await_visible(applied, timeout_ms, f"alter_configs({topic!r})")

    # ----------------------------------------------------------- reassignment

    def alter_partition_reassignments(
            self, reassignments: Mapping[tuple[str, int], Sequence[int] | None]) -> None:
        """Move partitions to new replicas, or change their replication factor (KIP-455):
        ``{(topic, partition): [target brokers, preferred leader first]}``; None cancels
        an ongoing reassignment. Returns once started: the new replicas copy the data
        (throttled), then the replica list switches (see list_partition_reassignments)."""
        request = pb.AlterPartitionReassignmentsRequest()
        for (topic, partition), target in reassignments.items():
            _check_name(topic)
            request.partitions.add(topic=topic, partition=int(partition),
                                   replicas=[int(r) for r in target or ()],
                                   cancel=target is None)
        response = self._call(self._stub.AlterPartitionReassignments, request,
                              "AlterPartitionReassignments")
        failed = [r for r in response.partitions if r.error_code != ErrorCode.NONE]
        if failed:
            first = failed[0]
            raise error_for(first.error_code, f"cannot reassign {first.topic}-{first.partition}: "
                            f"{first.error_message}" + (f" [and {len(failed) - 1} more]"
                                                        if len(failed) > 1 else ""))

    def list_partition_reassignments(self, topics: Sequence[str] = ()
                                     ) -> list[PartitionReassignment]:
        response = self._call(self._stub.ListPartitionReassignments,
                              pb.ListPartitionReassignmentsRequest(topics=list(topics)),
                              "ListPartitionReassignments")
        return [PartitionReassignment(r.topic, r.partition, tuple(r.replicas), tuple(r.adding),
                                      tuple(r.removing), tuple(r.isr))
                for r in response.reassignments]

    # ----------------------------------------------------------- consumer groups

    def _group_call(self, method: Callable[..., T], request: Any, what: str,
                    timeout_ms: float | None = None) -> T:
        response = self._call(method, request, what, timeout_ms)
        code = getattr(response, "error_code", 0)
        if code != ErrorCode.NONE:
            raise error_for(code, f"{what}: {getattr(response, 'error_message', '')}")
        return response

    def list_groups(self, timeout_ms: int | None = None) -> list[GroupListing]:
        """Every consumer group. Shards of ``__consumer_offsets`` that are loading or
        moving (a coordinator died or joined) are waited for up to ``timeout_ms`` (the
        gateway's default, 15 s, when None); if some still do not answer, this raises
        CoordinatorLoadInProgressError or CoordinatorNotAvailableError naming them,
        never a list that looks complete and is not."""
        if timeout_ms is not None and timeout_ms < 0:
            raise ValueError(f"timeout_ms must not be negative, got {timeout_ms}")
        request = pb_groups.ListGroupsRequest(timeout_ms=timeout_ms or 0)
        call_timeout = None if timeout_ms is None else max(
            self.request_timeout_ms, timeout_ms + 10_000)
        response = self._group_call(self._stub.ListGroups, request, "ListGroups",
                                    call_timeout)
        return sorted((GroupListing(g.group_id, g.state, g.protocol_type)
                       for g in response.groups), key=lambda g: g.group_id)

    def describe_group(self, group_id: str) -> GroupDescription:
        response = self._group_call(self._stub.DescribeGroup,
                                    pb_groups.DescribeGroupRequest(group_id=group_id),
                                    f"DescribeGroup {group_id!r}")
        members = []
        for m in response.members:
            try:
                partitions = decode_assignment(m.assignment).partitions
            except ProtocolError:
                partitions = ()
            members.append(GroupMemberDescription(m.member_id, m.group_instance_id or None,
                                                  m.client_id, partitions, m.client_host))
        return GroupDescription(group_id, response.state, response.protocol,
                                response.generation_id, response.leader_id, tuple(members))

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        response = self._group_call(self._stub.OffsetFetch,
                                    pb_groups.OffsetFetchRequest(group_id=group_id),
                                    f"OffsetFetch {group_id!r}")
        return {TopicPartition(p.topic, p.partition): p.offset for p in response.partitions
                if p.offset >= 0}

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Set committed offsets of a group that has no members (Kafka's
        ``--reset-offsets``): GroupNotEmptyError while it has members,
        UnknownTopicOrPartitionError for a topic or partition that does not exist."""
        self._group_call(self._stub.OffsetCommit, pb_groups.OffsetCommitRequest(
            group_id=group_id, member_id="", generation_id=-1, partitions=[
                pb_groups.OffsetCommitPartition(topic=tp[0], partition=tp[1], offset=o)
                for tp, o in sorted(offsets.items())]), f"OffsetCommit {group_id!r}")

    def delete_group(self, group_id: str) -> None:
        self._group_call(self._stub.DeleteGroup, pb_groups.DeleteGroupRequest(group_id=group_id),
                         f"DeleteGroup {group_id!r}")

    # ------------------------------------------------------------- transactions

    def list_transactions(self, states: Iterable[str] | None = None,
                          producer_ids: Iterable[int] | None = None,
                          duration_ms: int | None = None,
                          timeout_ms: int | None = None) -> list[TransactionListing]:
        """Every transactional id the transaction coordinators know, by id; only those
        in ``states`` (Kafka's names: Ongoing, PrepareCommit, ...), of ``producer_ids``,
        or open for at least ``duration_ms`` (KIP-994) when given. Shards that are
        loading or moving are waited for as in :meth:`list_groups`."""
        if duration_ms is not None and duration_ms < 0:
            raise ValueError(f"duration_ms must not be negative, got {duration_ms}")
        request = pb_txn.ListTransactionsRequest(
            state_filters=list(states or ()), producer_id_filters=list(producer_ids or ()),
            duration_filter_ms=duration_ms, timeout_ms=timeout_ms or 0)
        response = self._group_call(self._stub.ListTransactions, request, "ListTransactions",
                                    None if timeout_ms is None
                                    else max(self.request_timeout_ms, timeout_ms + 10_000))
        if response.unknown_state_filters:
            raise InvalidRequestError(
                f"ListTransactions: unknown transaction state(s) "
                f"{', '.join(response.unknown_state_filters)}; the states are Empty, Ongoing, "
                "PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead and "
                "PrepareEpochFence")
        return sorted((TransactionListing(t.transactional_id, t.producer_id,
                                          t.transaction_state)
                       for t in response.transactions), key=lambda t: t.transactional_id)

    def describe_transactions(self, transactional_ids: Sequence[str]
                              ) -> list[TransactionDescription]:
        """The transaction of each id, in the order given; an unknown id raises
        TransactionalIdNotFoundError."""
        out = []
        for tid in transactional_ids:
            r = self._group_call(self._stub.DescribeTransactions,
                                 pb_txn.DescribeTransactionsRequest(transactional_id=tid),
                                 f"DescribeTransactions {tid!r}")
            out.append(TransactionDescription(
                tid, r.transaction_state, r.transaction_timeout_ms,
                r.transaction_start_time_ms if r.transaction_start_time_ms >= 0 else None,
                r.producer_id, r.producer_epoch,
                tuple(TopicPartition(t.topic, p) for t in r.topics for p in t.partitions)))
        return out

    def describe_producers(self, partitions: Iterable[tuple[str, int]]
                           ) -> dict[TopicPartition, list[ProducerState]]:
        """The producers each partition's leader knows (KIP-664), by producer id. A
        partition that failed (unknown, no leader, ...) raises its typed error, naming
        the others that failed too."""
        asked = [TopicPartition(_check_name(t), int(p)) for t, p in partitions]
        topics: dict[str, list[int]] = {}
        for tp in asked:
            topics.setdefault(tp.topic, []).append(tp.partition)
        response = self._call(self._stub.DescribeProducers, pb_storage.DescribeProducersRequest(
            topics=[pb_storage.WritableTxnMarkerTopic(topic=t, partitions=p)
                    for t, p in topics.items()]), "DescribeProducers")
        _raise_partition_failures([(r.topic, r) for r in response.partitions],
                                  "cannot describe the producers of")
        return {TopicPartition(r.topic, r.partition): [ProducerState(
            p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp,
            p.coordinator_epoch if p.coordinator_epoch >= 0 else None,
            p.current_txn_start_offset if p.current_txn_start_offset >= 0 else None)
            for p in r.producers] for r in response.partitions}

    def complete_transaction(self, prepared: PreparedTransaction, commit: bool = True,
                             timeout_ms: float | None = None) -> None:
        """End a transaction another process prepared (``Producer.prepare_transaction()``):
        commit it (its records become visible to read_committed readers) or abort it.
        Safe to repeat: ending it again the same way succeeds. Raises
        InvalidTxnStateError when it already ended the other way (e.g. the coordinator
        aborted it when its timeout passed: its records are gone), ProducerFencedError
        when its transactional id has moved on to a newer producer or epoch. A busy or
        moving coordinator is retried for up to ``timeout_ms`` (default: the request
        timeout), then RequestTimedOutError (the call may be repeated)."""
        if not isinstance(prepared, PreparedTransaction):
            raise TypeError("complete_transaction() takes the PreparedTransaction that "
                            f"prepare_transaction() returned, not {prepared!r}")
        request = pb_txn.EndTxnRequest(
            transactional_id=prepared.transactional_id, producer_id=prepared.producer_id,
            producer_epoch=prepared.producer_epoch, committed=commit)
        budget_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + budget_ms / 1000
        what = (f"{'commit' if commit else 'abort'} of the prepared transaction of "
                f"{prepared.transactional_id!r} (producer {prepared.producer_id}, epoch "
                f"{prepared.producer_epoch})")
        while True:
            remaining_ms = (deadline - time.monotonic()) * 1000
            response = self._call(self._stub.EndTxn, request, "EndTxn", max(1.0, remaining_ms))
            code = response.error_code
            if code == ErrorCode.NONE:
                return
            error = error_for(code, f"{what}: {response.error_message}")
            if not (error.retriable or code in _RETRIED_TXN_ERRORS):
                raise error
            if time.monotonic() + _TXN_RETRY_S >= deadline:
                raise RequestTimedOutError(f"{what} did not succeed in time (last answer: "
                                           f"{error}): the call may be repeated")
            time.sleep(_TXN_RETRY_S)

    def abort_transaction(self, topic: str, partition: int, producer_id: int,
                          producer_epoch: int, coordinator_epoch: int) -> None:
        """End a hanging transaction on one partition with an ABORT marker (KIP-664's
        ``AbortTransactionSpec``): its records are never shown to read_committed
        readers and the last stable offset moves on. The producer's epoch and the
        coordinator epoch come from :meth:`describe_producers` (a coordinator epoch
        it does not know: 0); the leader refuses an older one
        (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED)."""
        for name, value, top in (("partition", partition, 1 << 31),
                                 ("producer_id", producer_id, 1 << 63),
                                 ("producer_epoch", producer_epoch, 1 << 15),
                                 ("coordinator_epoch", coordinator_epoch, 1 << 31)):
            if type(value) is not int or not 0 <= value < top:
                raise ValueError(f"{name} must be an int in [0, {top}), got {value!r}")
        response = self._call(self._stub.WriteTxnMarkers, pb_storage.WriteTxnMarkersRequest(
            timeout_ms=int(self.request_timeout_ms), markers=[pb_storage.WritableTxnMarker(
                producer_id=producer_id, producer_epoch=producer_epoch, committed=False,
                coordinator_epoch=coordinator_epoch, topics=[pb_storage.WritableTxnMarkerTopic(
                    topic=_check_name(topic), partitions=[partition])])]),
            "WriteTxnMarkers", self.request_timeout_ms + 5000)
        _raise_partition_failures(
            [(t.topic, p) for m in response.markers for t in m.topics for p in t.partitions],
            f"cannot abort the transaction of producer {producer_id} on")

    # ----------------------------------------------------------------- cluster

    def describe_cluster(self) -> ClusterDescription:
        """The cluster's id, its active controller (``controller``: its id, None when
        there is none) and its live storage nodes (brokers), by node id."""
        response = self._metadata()
        brokers = tuple(sorted((BrokerInfo(b.node_id, b.host, b.port, b.rack or None)
                                for b in response.brokers), key=lambda b: b.node_id))
        controller_id = response.controller_id if response.controller_id >= 0 else None
        return ClusterDescription(response.cluster_id, controller_id, brokers,
                                  response.controller or None)

    # ------------------------------------------------------------------- close

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._channel.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Admin(client_id={self.client_id!r}, bootstrap={self.bootstrap!r})"
