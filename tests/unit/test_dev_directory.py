"""Which dev cluster a command finds (issue 11, point 15): $STRAND_DEV_DIR, else the
directory the last ``strand dev up`` remembered, else ~/.strand/dev; and a recorded
pid that now belongs to another program is not the cluster's process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from strand import devcluster
from strand.client.bootstrap import (
    BootstrapError,
    dev_cluster_file,
    dev_directory,
    dev_pointer_file,
    resolve_bootstrap,
)
from strand.launcher import command_line


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user of their own: HOME in tmp_path, no XDG_STATE_HOME, no STRAND_* variables."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_STATE_HOME", "STRAND_DEV_DIR", "STRAND_BOOTSTRAP"):
        monkeypatch.delenv(name, raising=False)
    return home


def test_default_without_anything_remembered(home: Path) -> None:
    assert dev_directory() == home / ".strand" / "dev"
    assert dev_cluster_file() == home / ".strand" / "dev" / "cluster.json"


def test_remembered_directory_is_found_until_forgotten(home: Path, tmp_path: Path) -> None:
    chosen = tmp_path / "elsewhere"
    devcluster.remember(chosen)
    assert dev_pointer_file() == home / ".local" / "state" / "strand" / "current"
    assert dev_directory() == chosen.resolve()
    assert devcluster.default_directory() == chosen.resolve()  # the CLI's lookup is the same
    devcluster.forget(tmp_path / "another")  # not the remembered one: kept
    assert dev_directory() == chosen.resolve()
    devcluster.forget(chosen)
    assert not dev_pointer_file().exists()
    assert dev_directory() == home / ".strand" / "dev"


def test_strand_dev_dir_wins(home: Path, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    devcluster.remember(tmp_path / "remembered")
    monkeypatch.setenv("STRAND_DEV_DIR", str(tmp_path / "from-env"))
    assert dev_directory() == tmp_path / "from-env"


def test_xdg_state_home_when_absolute(home: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert dev_pointer_file() == tmp_path / "state" / "strand" / "current"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")  # the spec says: ignore it
    assert dev_pointer_file() == home / ".local" / "state" / "strand" / "current"


def test_the_sdk_finds_the_remembered_cluster(home: Path, tmp_path: Path) -> None:
    chosen = tmp_path / "dev-d"
    chosen.mkdir()
    (chosen / "cluster.json").write_text(json.dumps({"gateway": "127.0.0.1:7171"}))
    with pytest.raises(BootstrapError, match=r"\.strand/dev/cluster\.json"):
        resolve_bootstrap()
    devcluster.remember(chosen)
    assert resolve_bootstrap() == "127.0.0.1:7171"


def test_a_recycled_pid_is_not_the_recorded_process(tmp_path: Path) -> None:
    mine = command_line(os.getpid())
    info = devcluster.ProcessInfo("storage", "storage-1", os.getpid(), "127.0.0.1:1",
                                  str(tmp_path / "log"), tuple(mine))
    assert devcluster.RecordedProcess(info).running()
    stranger = devcluster.ProcessInfo("storage", "storage-1", os.getpid(), "127.0.0.1:1",
                                      str(tmp_path / "log"), ("python", "-m", "services.storage"))
    assert not devcluster.RecordedProcess(stranger).running()
