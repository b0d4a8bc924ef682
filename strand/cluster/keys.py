"""Where each metadata record lives in etcd: one prefix per cluster (docs/architecture.md §5)::

    <root>/<cluster>/brokers/<node id>
    <root>/<cluster>/controller
    <root>/<cluster>/topics/<name>
    <root>/<cluster>/partitions/<topic>/<partition>
    <root>/<cluster>/coordinators/<instance id>      group coordinator instances (lease)
    <root>/<cluster>/shards/groups/<shard>           the owner of a group shard (lease)
    <root>/<cluster>/txn-coordinators/<instance id>  transaction coordinator instances (lease)
    <root>/<cluster>/shards/txns/<shard>             the owner of a transaction shard (lease)
    <root>/<cluster>/shard-epochs/groups/<shard>     take-overs of a group shard so far
    <root>/<cluster>/shard-epochs/txns/<shard>       take-overs of a transaction shard so far
    <root>/<cluster>/pid-block                       the next block of producer ids
    <root>/<cluster>/security/users/<name>           a SCRAM credential (salted form)
    <root>/<cluster>/security/acls/<binding key>     an ACL binding
    <root>/<cluster>/security/quotas/<entity key>    the client quotas of a user/client id
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ParsedKey:
    # "broker", "controller", "topic", "partition", "coordinator", "group_shard",
    # "txn_coordinator", "txn_shard", "user", "acl", "quota"
    kind: str
    topic: str = ""
    partition: int = -1
    node_id: int = -1
    name: str = ""  # a coordinator instance id


class KeySpace:
    def __init__(self, cluster: str = "local", root: str = "/strand") -> None:
        if not cluster or "/" in cluster:
            raise ValueError(f"invalid cluster name {cluster!r}")
        self.prefix = f"{root.rstrip('/')}/{cluster}/"

    @property
    def brokers(self) -> str:
        return self.prefix + "brokers/"

    def broker(self, node_id: int) -> str:
        return f"{self.brokers}{node_id}"

    @property
    def controller(self) -> str:
        return self.prefix + "controller"

    @property
    def topics(self) -> str:
        return self.prefix + "topics/"

    def topic(self, name: str) -> str:
        return self.topics + name

    @property
    def partitions(self) -> str:
        return self.prefix + "partitions/"

    def topic_partitions(self, topic: str) -> str:
        return f"{self.partitions}{topic}/"

    def partition(self, topic: str, partition: int) -> str:
        return f"{self.partitions}{topic}/{partition}"

    @property
    def coordinators(self) -> str:
        return self.prefix + "coordinators/"

    def coordinator(self, instance_id: str) -> str:
        return self.coordinators + instance_id

    @property
    def group_shards(self) -> str:
        return self.prefix + "shards/groups/"

    def group_shard(self, shard: int) -> str:
        return f"{self.group_shards}{shard}"

    @property
    def txn_coordinators(self) -> str:
        """Transaction coordinators register apart from group coordinators: each kind
        hashes its shards over its own instances only."""
        return self.prefix + "txn-coordinators/"

    def txn_coordinator(self, instance_id: str) -> str:
        return self.txn_coordinators + instance_id

    @property
    def txn_shards(self) -> str:
        return self.prefix + "shards/txns/"

    def txn_shard(self, shard: int) -> str:
        return f"{self.txn_shards}{shard}"

    def group_shard_epoch(self, shard: int) -> str:
        """The shard's epoch counter: not a lease key, it outlives every owner (and is
        not part of the cache: only the instance taking the shard reads it)."""
        return f"{self.prefix}shard-epochs/groups/{shard}"

    def txn_shard_epoch(self, shard: int) -> str:
        return f"{self.prefix}shard-epochs/txns/{shard}"

    @property
    def pid_block(self) -> str:
        """Written only by the active controller (fenced); not part of the cache."""
        return self.prefix + "pid-block"

    @property
    def users(self) -> str:
        """SCRAM users, written only by the active controller (fenced)."""
        return self.prefix + "security/users/"

    def user(self, name: str) -> str:
        return self.users + name

    @property
    def acls(self) -> str:
        """ACL bindings, one key each (the binding's stable key), by the controller."""
        return self.prefix + "security/acls/"

    def acl(self, binding_key: str) -> str:
        return self.acls + binding_key

    @property
    def quotas(self) -> str:
        """Client quotas, one key per entity (its escaped key), by the controller."""
        return self.prefix + "security/quotas/"

    def quota(self, entity_key: str) -> str:
        return self.quotas + entity_key

    def parse(self, key: str) -> ParsedKey | None:
        """What a key under this cluster's prefix holds; None for anything else."""
        if not key.startswith(self.prefix):
            return None
        rest = key[len(self.prefix) :]
        kind, _, tail = rest.partition("/")
        try:
            if kind == "brokers" and tail:
                return ParsedKey("broker", node_id=int(tail))
            if kind == "controller" and not tail:
                return ParsedKey("controller")
            if kind == "topics" and tail:
                return ParsedKey("topic", topic=tail)
            if kind == "partitions" and tail:
                topic, _, partition = tail.rpartition("/")
                if topic:
                    return ParsedKey("partition", topic=topic, partition=int(partition))
            if kind == "coordinators" and tail and "/" not in tail:
                return ParsedKey("coordinator", name=tail)
            if kind == "txn-coordinators" and tail and "/" not in tail:
                return ParsedKey("txn_coordinator", name=tail)
            if kind == "shards" and tail.startswith("groups/"):
                return ParsedKey("group_shard", partition=int(tail[len("groups/"):]))
            if kind == "shards" and tail.startswith("txns/"):
                return ParsedKey("txn_shard", partition=int(tail[len("txns/"):]))
            if kind == "security" and tail.startswith("users/") and tail != "users/":
                return ParsedKey("user", name=tail[len("users/"):])
            if kind == "security" and tail.startswith("acls/") and tail != "acls/":
                return ParsedKey("acl", name=tail[len("acls/"):])
            if kind == "security" and tail.startswith("quotas/") and tail != "quotas/":
                return ParsedKey("quota", name=tail[len("quotas/"):])
        except ValueError:
            return None
        return None
