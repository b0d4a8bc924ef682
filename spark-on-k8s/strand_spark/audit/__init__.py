"""The mirror audit (``spark-on-k8s/jobs/audit.py``): did every source record reach the
target cluster once, intact, and how late?

Method, in the spirit of Uber's Chaperone and LinkedIn's Xinfra Monitor:

1. Both sides are read once through the ``strand`` data source (``read_committed``,
   headers included) and kept as a snapshot (:mod:`.records`): the source topics on
   the source cluster, their copies (named by the naming policy) on the target. Each
   copy is placed at the source topic, partition and offset its
   ``strand.mirror.source`` header names; target records whose
   ``strand.mirror.path`` does not end with the source cluster are not copies from it.
2. The comparison window (:mod:`.summaries`): per source partition, the lowest and
   highest source offsets copied. A source record within it must have a copy (the
   mirror copies a partition in order and commits transactionally, so a hole below
   the highest copied offset never closes); one beyond it is *pending* while younger
   than the grace period (default one bucket width) and *overdue* after that, never
   *missing*: the mirror has not reached it yet. Records the mirror must not copy
   (their path holds the target cluster: the active/active loop guard) are excluded.
3. Per source topic, partition and event-time bucket (record timestamp, default 10
   minutes), each side's count, checksum (sum modulo 2**64 of 64-bit xxhash64 hashes of
   key and value, computed by Spark: order-independent, and a duplicate changes it),
   and min/max offset.
4. Only buckets whose counts or checksums differ are drilled into, offset by offset
   (:mod:`.comparison`): *missing* (no copy), *duplicate* (a source offset copied more
   than once), *altered* (a copy's key or value differs), *unmatched* (a copy of an
   offset the source does not hold). Findings name topic, partition, bucket and
   offset ranges.
5. *Late* copies (written more than the late threshold, default one bucket width,
   after the record's timestamp) and the mirror latency per topic (p50, p99, max of
   ``strand.mirror.time`` minus the timestamp, :mod:`.latency`) come from the copies.

Missing, duplicate and altered records are loss or duplication: the job exits 1.
The report (:mod:`.reports`) is a Markdown table, a PNG plot and a JSON summary.

The core, :func:`strand_spark.audit.analysis.audit_frames`, takes two DataFrames with
the data source's read schema; the runner (:mod:`.runner`) takes their loading as a
function, so tests and the job share everything else.
"""
