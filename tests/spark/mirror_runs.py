"""The mirror job as production runs it, for the tests: ``python jobs/mirror.py`` in a
process group of its own (the driver and its JVM), so that a test can SIGKILL the whole
driver as a crash would, or SIGTERM it as Kubernetes stops a pod."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from strand import Consumer, TopicPartition

ROOT = Path(__file__).resolve().parents[2]
MIRROR_JOB = ROOT / "spark-on-k8s" / "jobs" / "mirror.py"


def spark_env() -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


@dataclass
class MirrorRun:
    process: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """SIGKILL the driver and its JVM at once: a crash."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM to the driver (python), as Kubernetes stops a pod: it stops its query
        and its JVM. The exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(30)
        return self.process.returncode

    def check_running(self) -> None:
        if self.process.poll() is not None:
            raise AssertionError(f"the mirror exited ({self.process.returncode}); its log "
                                 f"ends with:\n{self.log.read_text(errors='replace')[-3000:]}")


def start_mirror(arguments: Sequence[str], log: Path) -> MirrorRun:
    out = log.open("ab")
    process = subprocess.Popen([sys.executable, str(MIRROR_JOB), *arguments], env=spark_env(),
                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    out.close()
    return MirrorRun(process, log)


def committed_count(bootstrap: str, topic: str, partitions: int) -> int:
    """Records a read_committed reader sees in ``topic`` (every partition, now)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    seen = 0
    with Consumer(bootstrap, isolation_level="read_committed", fetch_max_wait_ms=50,
                  max_poll_records=5000) as consumer:
        try:
            ends = consumer.end_offsets(tps)
        except Exception:
            return 0
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + 120
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic} to its end on {bootstrap}")
            seen += sum(len(r) for r in consumer.poll(timeout_ms=200).values())
    return seen
