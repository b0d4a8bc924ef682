"""The storage node's flags for a StatefulSet pod: ``--node-id-from-hostname`` (the
broker id is the pod's ordinal) and ``--rack-file`` (the rack the init step wrote)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from services.storage.__main__ import node_id_from_hostname, parse_args


def storage_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["--data-dir", str(tmp_path / "data"), *extra]


@pytest.mark.parametrize(("hostname", "ordinal"), [
    ("strand-storage-0", 0), ("strand-storage-12", 12), ("a-7", 7)])
def test_the_ordinal_is_the_trailing_number(hostname: str, ordinal: int) -> None:
    assert node_id_from_hostname(hostname) == ordinal


@pytest.mark.parametrize("hostname", [
    "strand-storage", "storage-", "-3", "storage3", "storage-x1", "storage-\u0663"])
def test_a_hostname_without_an_ordinal_is_refused(hostname: str) -> None:
    with pytest.raises(ValueError, match="does not end in -N"):
        node_id_from_hostname(hostname)


def test_node_id_from_the_hostname_variable(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTNAME", "strand-storage-4")
    monkeypatch.setenv("STRAND_NODE_ID", "9")  # the explicit flag wins over the variable
    assert parse_args(storage_args(tmp_path, "--node-id-from-hostname")).node_id == 4


def test_node_id_from_the_systems_hostname_without_the_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOSTNAME", raising=False)
    argv = storage_args(tmp_path, "--node-id-from-hostname")
    try:
        expected = node_id_from_hostname(socket.gethostname())
    except ValueError:
        with pytest.raises(SystemExit):
            parse_args(argv)
    else:
        assert parse_args(argv).node_id == expected


def test_a_hostname_without_ordinal_is_a_usage_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOSTNAME", "storage")
    with pytest.raises(SystemExit) as exit_:
        parse_args(storage_args(tmp_path, "--node-id-from-hostname"))
    assert exit_.value.code == 2
    assert "--node-id-from-hostname: host name 'storage' does not end in -N" in (
        capsys.readouterr().err)


def test_node_id_and_node_id_from_hostname_exclude_each_other(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(storage_args(tmp_path, "--node-id", "1", "--node-id-from-hostname"))
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(("content", "rack"), [
    ("eu-west-1a", "eu-west-1a"), ("  zone-b\n", "zone-b"), ("", None), ("\n", None)])
def test_the_rack_is_the_files_stripped_content(tmp_path: Path, content: str,
                                                rack: str | None) -> None:
    rack_file = tmp_path / "rack"
    rack_file.write_text(content)
    settings = parse_args(storage_args(tmp_path, "--node-id", "1", "--rack-file",
                                       str(rack_file)))
    assert settings.rack == rack


def test_a_missing_rack_file_is_a_usage_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-file"
    with pytest.raises(SystemExit) as exit_:
        parse_args(storage_args(tmp_path, "--node-id", "1", "--rack-file", str(missing)))
    assert exit_.value.code == 2
    assert f"--rack-file: cannot read {missing}: No such file or directory" in (
        capsys.readouterr().err)


def test_rack_and_rack_file_exclude_each_other(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    rack_file = tmp_path / "rack"
    rack_file.write_text("a")
    with pytest.raises(SystemExit) as exit_:
        parse_args(storage_args(tmp_path, "--node-id", "1", "--rack", "b", "--rack-file",
                                str(rack_file)))
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_without_the_new_flags_nothing_changes(tmp_path: Path) -> None:
    settings = parse_args(storage_args(tmp_path, "--node-id", "3", "--rack", "r3"))
    assert (settings.node_id, settings.rack) == (3, "r3")
