"""The exactly-once cost benchmark's parts; run it with ``bench/exactly_once_bench.py``.

- ``cluster``: the cluster it starts (strand.launcher: 3 storage nodes and a
  transaction coordinator), its topics, the services' warning counts;
- ``raw``: a transactional producer made of raw gateway calls (EndTxn timed alone);
- ``stats``: medians, percentiles, the spread of interleaved rounds;
- ``produce``: plain vs idempotent vs transactional produce throughput;
- ``endtxn``: EndTxn and commit_transaction() latency over 1, 10, 100 partitions;
- ``consume``: read_committed vs read_uncommitted consume throughput;
- ``cost``: CPU and requests of every process over a run, per record or operation;
- ``commit_cost``: what one commit adds to the records it carries, by process.

``bench/exactly_once_bench.py`` imports them as the top-level package ``eos``
(``bench/`` is its script folder, so on ``sys.path``), like ``groups``.
"""
