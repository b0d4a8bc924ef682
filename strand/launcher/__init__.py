"""Start Strand clusters of real processes: the one launcher behind ``strand dev``,
the integration and chaos tests and the benchmarks.

- ``system``: pids, ports and /proc; ``wait_until`` (polling another process's state);
- ``signals``: children that die with their parent, signals that unwind the launcher;
- ``probes``: the gRPC health check and the gateway's count of registered nodes;
- ``process``: one process (etcd or a service): spawn, wait until it serves, signal,
  pause, kill, stop, start again on the same ports;
- ``cluster``: a ``ClusterSpec`` (how many of each, racks, lease TTL, flags, boot
  order, how processes are launched) and the ``Cluster`` that starts and stops it.

The dev cluster (``strand.devcluster``) adds ``cluster.json`` and the detached
processes that outlive ``strand dev up``.
"""

from strand.launcher.cluster import Boot, Cluster, ClusterSpec
from strand.launcher.process import (
    REPO,
    EtcdServer,
    Launch,
    LaunchError,
    Process,
    ServiceProcess,
    etcd_binary,
    pinned_env,
    stop_in_order,
)
from strand.launcher.signals import (
    deferred_signals,
    die_with_parent,
    interrupt_on_signals,
    with_death_signal,
)
from strand.launcher.system import (
    alive,
    command_line,
    cpu_seconds,
    free_port,
    port_open,
    process_state,
    wait_until,
)

__all__ = [
    "REPO",
    "Boot",
    "Cluster",
    "ClusterSpec",
    "EtcdServer",
    "Launch",
    "LaunchError",
    "Process",
    "ServiceProcess",
    "alive",
    "command_line",
    "cpu_seconds",
    "deferred_signals",
    "die_with_parent",
    "etcd_binary",
    "free_port",
    "interrupt_on_signals",
    "pinned_env",
    "port_open",
    "process_state",
    "stop_in_order",
    "wait_until",
    "with_death_signal",
]
