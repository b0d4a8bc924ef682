"""partition-storage: hosts partition replicas on local disk and serves produce, fetch and
list-offsets for the partitions this node leads (DESIGN §1, §3, §5)."""
