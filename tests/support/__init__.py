"""What the tests share: clusters of real processes for the fixtures (``cluster``),
waiting on other processes and consumers (``waiting``), a fake clock (``clock``) and
a recording rebalance listener (``rebalance``). Processes themselves are
:mod:`strand.launcher`'s, the same the dev cluster, the chaos harness and the
benchmarks start."""
