"""The consumer-group benchmark's parts; run it with ``bench/group_bench.py``.

- ``cluster``: the cluster it starts (BenchCluster, on strand.launcher), the services'
  and the SDK's defaults, the progress console;
- ``join``: the join-latency rounds;
- ``throughput``: producing, the consumer workers and the throughput computation.

The modules import each other relatively; ``bench/group_bench.py`` imports them as
the top-level package ``groups`` (``bench/`` is its script folder, so on ``sys.path``;
so it is for the spawned consumer processes, which get the parent's ``sys.path``).
"""
