"""What the coordinators (groups now, transactions next) share: which shard of an
internal topic holds a key, and which coordinator instance owns each shard (etcd
leases, rendezvous hashing, load on take-over)."""
