"""Group and transaction coordinators register in separate key spaces: the group
coordinator's rendezvous hashing must never count a transaction coordinator (and
the other way round), or shards would be assigned to instances that never take
them."""

from __future__ import annotations

from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import CoordinatorRecord
from strand.coordination.ownership import ShardSpace

KEYS = KeySpace("c")


def test_each_kind_sees_only_its_own_instances_and_shards() -> None:
    cache = MetadataCache(KEYS)
    group, txn = CoordinatorRecord("groups-0", "a:1"), CoordinatorRecord("txns-0", "b:2")
    cache.apply(KEYS.coordinator("groups-0"), group.to_json(), revision=1)
    cache.apply(KEYS.txn_coordinator("txns-0"), txn.to_json(), revision=2)
    cache.apply(KEYS.group_shard(3), group.to_json(), revision=3)
    cache.apply(KEYS.txn_shard(3), txn.to_json(), revision=4)
    groups, txns = ShardSpace.groups(KEYS, cache), ShardSpace.transactions(KEYS, cache)
    assert dict(groups.instances()) == {"groups-0": group}
    assert dict(txns.instances()) == {"txns-0": txn}
    assert dict(groups.owners()) == {3: group}
    assert dict(txns.owners()) == {3: txn}
    assert groups.registration("x") == "/strand/c/coordinators/x"
    assert txns.registration("x") == "/strand/c/txn-coordinators/x"
    assert txns.key(7) == "/strand/c/shards/txns/7"
    snapshot = cache.snapshot()
    assert snapshot.known_keys() == {KEYS.coordinator("groups-0"), KEYS.txn_coordinator("txns-0"),
                                     KEYS.group_shard(3), KEYS.txn_shard(3)}
    cache.apply(KEYS.txn_coordinator("txns-0"), None, revision=5)
    cache.apply(KEYS.txn_shard(3), None, revision=6)
    assert not cache.txn_coordinators and not cache.txn_shard_owners
    assert cache.coordinators == {"groups-0": group}
    assert snapshot.txn_coordinators == {"txns-0": txn}  # a snapshot does not follow
