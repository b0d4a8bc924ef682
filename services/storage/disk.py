"""Blocking log work off the event loop, on a bounded pool of threads.

Each job is accounted to the replicas whose logs it touches from submission until
the thread is done with it, even when the awaiting coroutine was cancelled
meanwhile (a client went away): a log is closed or deleted only once its replica is
idle, so no thread ever reads a closed (and possibly reused) file descriptor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable, Sequence
from typing import TypeVar

from services.storage.replica import Replica

T = TypeVar("T")


class DiskExecutor:
    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError("the disk pool needs at least one thread")
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="disk")

    async def run(self, fn: Callable[[], T], replicas: Sequence[Replica] = ()) -> T:
        """Run ``fn`` in a disk thread; ``replicas`` are busy until it has finished.

        Raises StorageError (before running anything) if one of them is closing.
        """
        loop = asyncio.get_running_loop()
        started: list[Replica] = []
        try:
            for replica in replicas:
                replica.job_started()
                started.append(replica)
            future = self._pool.submit(fn)
        except BaseException:
            for replica in started:
                replica.job_finished()
            raise

        def release() -> None:
            for replica in started:
                replica.job_finished()

        def on_done(_: concurrent.futures.Future[T]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody to tell
                loop.call_soon_threadsafe(release)

        future.add_done_callback(on_done)
        return await asyncio.wrap_future(future, loop=loop)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
