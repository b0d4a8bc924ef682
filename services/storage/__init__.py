"""partition-storage: hosts partition replicas on local disk and serves produce, fetch and
list-offsets for the partitions this node leads (docs/architecture.md §1, §3, §4)."""
