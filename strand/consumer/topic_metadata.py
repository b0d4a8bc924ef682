"""The consumer's Metadata calls: keeping the followed topics' leaders fresh for the
fetcher, a topic's partitions for ``partitions_for()`` and the group leader, and
every topic of the cluster for pattern subscriptions. Answers go into the shared
:class:`MetadataCache`; a gateway that cannot be reached raises TransportError
(``partitions_for()`` first tries again until its timeout; the periodic refresh
only records it and tries again after the backoff)."""

from __future__ import annotations

import grpc

from strand.client.channel import transport_error
from strand.client.metadata import MetadataCache
from strand.client.retries import until_deadline
from strand.errors import ErrorCode, StrandError, error_for
from strand.v1 import common_pb2 as pb
from strand.v1 import gateway_pb2_grpc

__all__ = ["TopicMetadata"]


class TopicMetadata:
    def __init__(self, channel: grpc.Channel, bootstrap: str,
                 cache: MetadataCache, request_timeout_ms: float) -> None:
        self.stub = gateway_pb2_grpc.GatewayStub(channel)
        self.bootstrap = bootstrap
        self.cache = cache
        self.request_timeout_ms = request_timeout_ms

    def _request(self, topics: list[str] | None, timeout_s: float | None = None
                 ) -> pb.MetadataResponse:
        """Ask for ``topics`` (None: every topic) once, within ``timeout_s`` (default:
        the request timeout), and update the cache."""
        timeout = self.request_timeout_ms / 1000 if timeout_s is None else timeout_s
        cache = self.cache
        cache.attempt_started()
        try:
            response: pb.MetadataResponse = self.stub.Metadata(
                pb.MetadataRequest(topics=topics or []), timeout=timeout)
        except grpc.RpcError as exc:
            error = transport_error(exc, self.bootstrap, "Metadata")
            cache.update_failed(error)
            raise error from None
        cache.update(response, topics)
        return response

    def refresh_if_due(self) -> None:
        """Refresh the followed topics when the cache is stale or a refresh was asked."""
        cache = self.cache
        if cache.wanted_topics() and cache.is_stale():
            try:
                self._request(cache.wanted_topics())
            except StrandError:  # recorded in the cache: retried after the backoff
                return

    def partition_ids(self, topic: str, timeout_ms: float | None = None) -> list[int]:
        """The topic's partition ids (asks the gateway when they are not known yet);
        UnknownTopicOrPartitionError if the topic does not exist."""
        cache = self.cache
        info = cache.topic(topic)
        if info is None or info.error != ErrorCode.NONE:
            cache.add_topics([topic])
            wanted = cache.wanted_topics()
            # As Kafka's partitionsFor: a gateway that cannot be reached is tried
            # again until the timeout.
            until_deadline(lambda seconds: self._request(wanted, seconds),
                           (self.request_timeout_ms if timeout_ms is None else timeout_ms)
                           / 1000)
            info = cache.topic(topic)
        if info is None or info.error != ErrorCode.NONE:
            code = info.error if info is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            raise error_for(code, info.error_message if info is not None and info.error_message
                            else f"topic {topic!r} does not exist")
        return [p.partition for p in info.partitions]

    def all_topic_partitions(self) -> dict[str, int]:
        """Every topic of the cluster but the internal ones, with its partition count
        (for pattern matching and the group leader's watch)."""
        response = self._request(None)
        return {t.name: len(t.partitions) for t in response.topics
                if t.error_code == pb.NONE and not t.is_internal}
