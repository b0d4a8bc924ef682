"""Hand-encoded protobuf for the one message where encoding costs: ProduceRequest.

A produce call carries up to ``max_request_size`` bytes of record batches. Built as
``strand.v1`` message objects and serialized by gRPC, those bytes would be copied
three times over (into the message, into its parent, into the wire buffer), which
takes about a millisecond per MiB here (docs/architecture.md §8: the producer is CPU-bound). This
module writes the same wire bytes directly, copying the batches once; the call is
made with an identity serializer. ``tests/integration/test_sdk_wire.py`` checks the
output against the generated code's encoding byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from strand.records.varint import encode_unsigned

__all__ = ["encode_produce_request"]

_UINT64 = (1 << 64) - 1
# Field keys: (field number << 3) | wire type (0 varint, 2 length-delimited).
_ACKS = b"\x08"  # ProduceRequest.acks = 1
_TIMEOUT = b"\x10"  # ProduceRequest.timeout_ms = 2
_TOPICS = b"\x1a"  # ProduceRequest.topics = 3
_TRANSACTIONAL_ID = b"\x22"  # ProduceRequest.transactional_id = 4
_TOPIC = b"\x0a"  # TopicProduceData.topic = 1
_PARTITIONS = b"\x12"  # TopicProduceData.partitions = 2
_PARTITION = b"\x08"  # PartitionProduceData.partition = 1
_RECORDS = b"\x12"  # PartitionProduceData.records = 2


def _varint(value: int) -> bytes:
    """Protobuf base-128 varint; negative int32/int64 as their 64-bit two's complement."""
    return encode_unsigned(value & _UINT64)


def encode_produce_request(
    acks: int,
    timeout_ms: int,
    topics: Mapping[str, Sequence[tuple[int, Sequence[bytes]]]],
    transactional_id: str = "",
) -> bytes:
    """The wire bytes of ``ProduceRequest(acks, timeout_ms, topics=[TopicProduceData(
    topic, partitions=[PartitionProduceData(partition, records=b"".join(batches))])])``.

    ``topics``: topic → [(partition, [batch bytes, ...])], in request order.
    """
    parts: list[bytes] = []
    if acks:
        parts += (_ACKS, _varint(acks))
    if timeout_ms:
        parts += (_TIMEOUT, _varint(timeout_ms))
    for topic, partitions in topics.items():
        name = topic.encode()
        topic_parts: list[bytes] = []
        if name:
            topic_parts += (_TOPIC, _varint(len(name)), name)
        topic_size = sum(len(p) for p in topic_parts)
        for partition, batches in partitions:
            records_size = sum(len(b) for b in batches)
            head: list[bytes] = []
            if partition:
                head += (_PARTITION, _varint(partition))
            if records_size:
                head += (_RECORDS, _varint(records_size))
            size = sum(len(h) for h in head) + records_size
            prefix = _varint(size)
            topic_parts += (_PARTITIONS, prefix, *head, *batches)
            topic_size += 1 + len(prefix) + size
        parts += (_TOPICS, _varint(topic_size), *topic_parts)
    if transactional_id:
        encoded = transactional_id.encode()
        parts += (_TRANSACTIONAL_ID, _varint(len(encoded)), encoded)
    return b"".join(parts)
