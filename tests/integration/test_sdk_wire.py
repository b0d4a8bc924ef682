"""The SDK's pieces that need no cluster: the hand-encoded produce request, finding the
gateway (bootstrap), the typed error of every code, the client's metadata cache."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strand.client import BootstrapError, MetadataCache, resolve_bootstrap
from strand.client.wire import encode_produce_request
from strand.errors import (
    ErrorCode,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    StrandError,
    TopicAlreadyExistsError,
    UnknownServerError,
    error_for,
)
from strand.v1 import common_pb2 as pb

partitions = st.lists(st.tuples(st.integers(0, 100_000),
                                st.lists(st.binary(max_size=300), max_size=3)), max_size=3)


@settings(max_examples=200, deadline=None)
@given(acks=st.sampled_from([0, 1, -1]), timeout=st.integers(0, 2**31 - 1),
       topics=st.dictionaries(st.text(max_size=20), partitions, max_size=3),
       transactional_id=st.text(max_size=5))
def test_produce_request_encoding_matches_protobuf(
        acks: int, timeout: int, topics: dict[str, list[tuple[int, list[bytes]]]],
        transactional_id: str) -> None:
    expected = pb.ProduceRequest(
        acks=acks, timeout_ms=timeout, transactional_id=transactional_id,
        topics=[pb.TopicProduceData(topic=t, partitions=[
            pb.PartitionProduceData(partition=p, records=b"".join(batches))
            for p, batches in parts]) for t, parts in topics.items()])
    encoded = encode_produce_request(acks, timeout, topics, transactional_id)
    assert encoded == expected.SerializeToString(deterministic=True)
    assert pb.ProduceRequest.FromString(encoded) == expected


def test_bootstrap_order_and_errors(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    env = {"STRAND_DEV_DIR": str(dev)}
    with pytest.raises(BootstrapError, match="strand dev up"):
        resolve_bootstrap(None, env)
    dev.mkdir()
    (dev / "cluster.json").write_text(json.dumps({"gateway": "127.0.0.1:7070", "etcd": "x"}))
    assert resolve_bootstrap(None, env) == "127.0.0.1:7070"
    assert resolve_bootstrap(None, {**env, "STRAND_BOOTSTRAP": "h:1,h:2"}) == "h:1"
    assert resolve_bootstrap("[::1]:9000", {**env, "STRAND_BOOTSTRAP": "h:1"}) == "[::1]:9000"
    for bad in ("nohost", "h:0", "h:port", ":80", ""):
        with pytest.raises(BootstrapError):
            resolve_bootstrap(bad, env)
    (dev / "cluster.json").write_text("{not json")
    with pytest.raises(BootstrapError, match="not valid JSON"):
        resolve_bootstrap(None, env)
    (dev / "cluster.json").write_text(json.dumps({"etcd": "x"}))
    with pytest.raises(BootstrapError, match="gateway"):
        resolve_bootstrap(None, env)


def test_every_error_code_has_its_class() -> None:
    for code in ErrorCode:
        if code == ErrorCode.NONE:
            with pytest.raises(ValueError):
                error_for(code, "")
            continue
        error = error_for(int(code), "why")
        assert isinstance(error, StrandError)
        assert error.code == code, code
        assert str(error) == "why"
        assert type(error) is not StrandError, code
        assert error_for(pb.ErrorCode.Value(code.name), "").code == code
    assert isinstance(error_for(3, ""), StrandError)
    assert isinstance(error_for(36, "x"), TopicAlreadyExistsError)
    assert isinstance(error_for(1, "x"), OffsetOutOfRangeError)
    assert error_for(6, "x").retriable and isinstance(error_for(6, "x"), NotLeaderOrFollowerError)
    assert error_for(5, "x").retriable and isinstance(error_for(5, "x"), LeaderNotAvailableError)
    unknown = error_for(12345, "odd")
    assert isinstance(unknown, UnknownServerError) and "12345" in str(unknown)


def test_metadata_cache() -> None:
    now = [0.0]
    cache = MetadataCache(max_age_ms=1000, refresh_backoff_ms=100, clock=lambda: now[0])
    assert cache.time_to_next_update() == 0
    assert cache.add_topics(["a", "b"]) and not cache.add_topics(["a"])
    response = pb.MetadataResponse(cluster_id="c", brokers=[
        pb.BrokerMetadata(node_id=1, host="h", port=1, rack="r")], topics=[
        pb.TopicMetadata(name="a", partitions=[
            pb.PartitionMetadata(partition=1, leader=-1, leader_epoch=3),
            pb.PartitionMetadata(partition=0, leader=1, leader_epoch=2)]),
        pb.TopicMetadata(name="b", error_code=pb.UNKNOWN_TOPIC_OR_PARTITION)])
    version = cache.version
    waiter = threading.Thread(target=cache.wait_for_update, args=(version, 5))
    waiter.start()
    cache.update(response, ["a", "b"])
    waiter.join(5)
    assert not waiter.is_alive()
    assert cache.partition_count("a") == 2 and cache.partition_count("b") is None
    info = cache.topic("a")
    assert info is not None and info.available == (0,)
    assert cache.leader_of(("a", 0)) == 1 and cache.leader_of(("a", 1)) is None
    assert cache.leader_epoch(("a", 1)) == 3 and cache.leader_epoch(("x", 0)) == -1
    assert cache.brokers[1].address == "h:1" and cache.brokers[1].rack == "r"
    assert cache.time_to_next_update() == 1000  # fresh: next refresh at max age
    cache.request_update()
    now[0] = 50
    assert cache.time_to_next_update() == 50  # backoff since the last attempt
    cache.update_failed(RuntimeError("down"))
    assert cache.partition_count("a") == 2  # the old picture stays
    assert isinstance(cache.last_error, RuntimeError)
    assert cache.time_to_next_update() == 100
