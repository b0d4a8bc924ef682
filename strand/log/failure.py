"""What a partition log knows about its own failures: a failed write, and a damaged
batch waiting to be cut away (docs/architecture.md §4, "Replicas out of service").

* A failed write (a full or failing disk: any OSError) leaves no partial batch, index
  entry or checkpoint behind (each step undoes its own partial writes), raises
  LogWriteError (KAFKA_STORAGE_ERROR) and marks the log failed: :class:`WriteGuard`
  then refuses every further change until the log's ``recover_from_failure``
  succeeds (Kafka takes the log directory offline). Reads go on meanwhile: nothing
  below the log end offset was touched.
* A damaged batch (found by verification, :mod:`strand.log.integrity`) is recorded
  in the partition directory (:data:`DAMAGE_MARK_FILE`, the first offset that cannot
  be trusted) before the replica leaves the ISR, and removed once the log has been
  cut there. A node restarted in between finds the mark and repairs the replica
  before it follows (or leads) again, instead of rejoining the ISR with the damage.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from strand.errors import LogWriteError
from strand.log.files import atomic_write, fsync_directory

log = logging.getLogger(__name__)

DAMAGE_MARK_FILE = "damaged-from"


class WriteGuard:
    """The failed-or-not state of one log's writes; every change of its files runs
    inside :meth:`writing` (with the log's lock held)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.failure: str | None = None  # why the log takes no writes, or None

    @contextlib.contextmanager
    def writing(self, what: str, end_offset: Callable[[], int]) -> Iterator[None]:
        """Refuse the change while the log is failed; turn an OSError into LogWriteError
        and mark the log failed (the failed step has already undone its partial writes)."""
        if self.failure is not None:
            raise LogWriteError(
                f"{self.directory.name}: the log takes no writes since {self.failure}; "
                "its leadership moves to an in-sync replica until the disk recovers")
        try:
            yield
        except OSError as exc:
            self.failure = f"{what} failed: {exc.strerror or exc}"
            log.error("log write failed; the log takes no writes until recovered", extra={
                "directory": str(self.directory), "what": what, "error": str(exc),
                "log_end_offset": end_offset()})
            raise LogWriteError(
                f"{self.directory.name}: {what} failed ({exc.strerror or exc}); nothing of "
                "it was kept, and the log takes no writes until its disk recovers") from exc

    @contextlib.contextmanager
    def recovering(self) -> Iterator[str]:
        """Around the recovery of a failed log (yields why it failed): writes are
        allowed inside; if the recovery raises, the log stays failed."""
        failure = self.failure
        assert failure is not None, "recovering a log that has not failed"
        self.failure = None
        try:
            yield failure
        except BaseException:
            self.failure = failure
            raise


def read_damage_mark(directory: Path) -> int | None:
    """The offset recorded by :func:`write_damage_mark`, or None (no mark, or one that
    cannot be read: the scrub and the verified reads find the damage again)."""
    path = directory / DAMAGE_MARK_FILE
    try:
        return int(path.read_text().strip())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("unreadable damage mark ignored", extra={"path": str(path),
                                                              "error": str(exc)})
        return None


def write_damage_mark(directory: Path, offset: int) -> None:
    """Record (durably) that the log cannot be trusted from ``offset`` on."""
    atomic_write(directory / DAMAGE_MARK_FILE, f"{offset}\n".encode())


def clear_damage_mark(directory: Path) -> None:
    path = directory / DAMAGE_MARK_FILE
    if path.exists():
        path.unlink()
        fsync_directory(directory)
