"""The image (Dockerfile, .dockerignore), checked without a container engine: checkov
finds nothing it does not justify, the final stage runs as uid 10001 with
``strand-service`` as entry point and no build tools, the build context keeps what
the build copies; and (slow) what the build stage copies, pip-installed with the
``operator`` extra into a fresh virtualenv as the build stage does, gives a
``strand-service`` that runs every service from the installed package alone."""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from strand.launcher import REPO, EtcdServer, Launch, ServiceProcess
from strand.service.by_name import MODULES

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
CHECKOV = REPO / ".tools" / "checkov" / "bin" / "checkov"
UID = "10001"


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY ...
    args: str
    stage: int  # which FROM it belongs to (0: the first)


def parse_dockerfile(text: str) -> list[Instruction]:
    """The Dockerfile's instructions, read by dockerfile-parse (continued lines
    joined, comments dropped), each with the stage its FROM began."""
    instructions: list[Instruction] = []
    stage = -1
    for item in DockerfileParser(fileobj=io.BytesIO(text.encode())).structure:
        keyword = str(item["instruction"]).upper()
        if keyword == "COMMENT":
            continue
        if keyword == "FROM":
            stage += 1
        instructions.append(Instruction(keyword, " ".join(str(item["value"]).split()), stage))
    return instructions


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text())


def final_stage(dockerfile: list[Instruction]) -> list[Instruction]:
    last = dockerfile[-1].stage
    return [i for i in dockerfile if i.stage == last]


def build_copies(dockerfile: list[Instruction]) -> list[str]:
    """The paths the build copies from the build context (not from another stage)."""
    sources: list[str] = []
    for i in dockerfile:
        if i.keyword == "COPY" and not i.args.startswith("--from="):
            sources.extend(shlex.split(i.args)[:-1])
    return sources


def test_checkov_finds_nothing_the_dockerfile_does_not_justify() -> None:
    assert CHECKOV.exists(), f"checkov is not installed at {CHECKOV}: run `make k8s-tools`"
    result = subprocess.run(
        [str(CHECKOV), "--framework", "dockerfile", "-f", str(DOCKERFILE), "--output", "json",
         "--skip-download"],  # no network: no calls to checkov's cloud for guidelines
        capture_output=True, text=True, timeout=120, check=False)
    report = json.loads(result.stdout)
    assert report["summary"]["parsing_errors"] == 0
    assert report["summary"]["passed"] > 0
    failed = [(c["check_id"], c["check_name"]) for c in report["results"]["failed_checks"]]
    assert failed == []
    for skipped in report["results"]["skipped_checks"]:  # each with its reason
        assert len(skipped["check_result"]["suppress_comment"].strip()) > 20, skipped


def test_two_stages_on_the_slim_python_base(dockerfile: list[Instruction]) -> None:
    assert [i.args for i in dockerfile if i.keyword == "FROM"] == [
        "python:3.11-slim AS build", "python:3.11-slim"]


def test_the_final_stage_runs_as_the_non_root_user_10001(
        dockerfile: list[Instruction]) -> None:
    final = final_stage(dockerfile)
    users = [(n, i.args) for n, i in enumerate(final) if i.keyword == "USER"]
    assert [args for _, args in users] == [f"{UID}:{UID}"]  # numeric: runAsNonRoot checks it
    # Nothing after USER would need root.
    assert {i.keyword for i in final[users[0][0]:]} <= {
        "USER", "WORKDIR", "EXPOSE", "ENTRYPOINT", "CMD", "ENV", "LABEL"}
    run = " ".join(i.args for i in final if i.keyword == "RUN")
    assert f"--uid {UID} --gid {UID}" in run
    assert f"chown {UID}:{UID} /var/lib/strand" in run  # the writable data directory
    assert [i.args for i in final if i.keyword == "WORKDIR"] == ["/var/lib/strand"]


def test_the_entry_point_is_strand_service(dockerfile: list[Instruction]) -> None:
    entrypoint = [i.args for i in final_stage(dockerfile) if i.keyword == "ENTRYPOINT"]
    assert [json.loads(e) for e in entrypoint] == [["strand-service"]]


def test_no_build_tools_in_the_final_stage(dockerfile: list[Instruction]) -> None:
    final = final_stage(dockerfile)
    run = " ".join(i.args for i in final if i.keyword == "RUN")
    for tool in ("pip install", "apt-get", "gcc", "build-essential"):
        assert tool not in run
    assert "pip uninstall --yes pip setuptools wheel" in run  # the base image's own
    copies = [i.args for i in final if i.keyword == "COPY"]
    assert copies == ["--from=build /opt/strand /opt/strand"]  # the virtualenv only
    build_run = " ".join(i.args for i in dockerfile if i.keyword == "RUN" and i.stage == 0)
    assert '/opt/strand/bin/pip install ".[operator]"' in build_run
    assert "/opt/strand/bin/pip uninstall --yes pip setuptools" in build_run


def test_the_version_label_is_the_packages(dockerfile: list[Instruction]) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    args = [i.args for i in final_stage(dockerfile) if i.keyword == "ARG"]
    assert f"STRAND_VERSION={version}" in args
    labels = " ".join(i.args for i in final_stage(dockerfile) if i.keyword == "LABEL")
    assert 'org.opencontainers.image.version="${STRAND_VERSION}"' in labels
    assert 'org.opencontainers.image.title="strand"' in labels


def dockerignore_patterns() -> list[str]:
    lines = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_the_build_context_keeps_what_the_build_copies(dockerfile: list[Instruction]) -> None:
    sources = build_copies(dockerfile)
    assert sorted(sources) == ["README.md", "operator", "pyproject.toml", "services", "strand"]
    patterns = dockerignore_patterns()
    assert not any(p.startswith("!") for p in patterns)  # none re-included: plain matching
    for source in sources:
        assert (REPO / source).exists()
        excluded = [p for p in patterns if fnmatch(source, p) or fnmatch(source, p + "/*")]
        assert excluded == [], f"{source} is copied by the build but excluded by {excluded}"


def test_the_build_context_leaves_out_virtualenvs_tools_caches_and_outputs() -> None:
    patterns = set(dockerignore_patterns())
    assert {".git", ".venv", ".tools", "**/__pycache__", ".mypy_cache", ".pytest_cache",
            ".ruff_cache", ".hypothesis", "bench/results", ".strand-dev", "tests"} <= patterns


# ------------------------------------------ slow: install what the build stage copies

@dataclass(frozen=True)
class Installed:
    venv: Path
    cwd: Path  # outside the repository: nothing imports from the checkout

    @property
    def strand_service(self) -> Path:
        return self.venv / "bin" / "strand-service"

    def env(self) -> dict[str, str]:
        # PYTHONPATH="" so that nothing imports from the checkout
        return {**os.environ, "PYTHONPATH": "", "VIRTUAL_ENV": str(self.venv)}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory,
              dockerfile: list[Instruction]) -> Iterator[Installed]:
    """The build context as the build stage copies it, built into a wheel and
    installed with the ``operator`` extra into a fresh virtualenv (~25 s)."""
    root = tmp_path_factory.mktemp("image")
    context = root / "src"
    context.mkdir()
    for source in build_copies(dockerfile):
        path = REPO / source
        if path.is_dir():  # less what .dockerignore leaves out of them
            shutil.copytree(path, context / source,
                            ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]",
                                                          "*.egg-info"))
        else:
            (context / source).write_bytes(path.read_bytes())
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
           "--disable-pip-version-check"]
    subprocess.run([*pip, f"{context}[operator]"], check=True, timeout=600, cwd=root,
                   capture_output=True)
    yield Installed(venv, root)


@pytest.mark.slow
def test_the_installed_package_imports_from_the_virtualenv(installed: Installed) -> None:
    code = ("import strand, services, strand_operator, kopf, json; "
            "print(json.dumps([m.__file__ for m in (strand, services, strand_operator)]))")
    result = subprocess.run([str(installed.venv / "bin" / "python"), "-c", code],
                            capture_output=True, text=True, cwd=installed.cwd,
                            env=installed.env(), check=True, timeout=60)
    for path in json.loads(result.stdout):
        assert Path(path).is_relative_to(installed.venv), path


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODULES))
def test_the_installed_entry_point_runs_every_name(installed: Installed, name: str) -> None:
    result = subprocess.run([str(installed.strand_service), name, "--help"],
                            capture_output=True, text=True, cwd=installed.cwd,
                            env=installed.env(), check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


class InstalledController(ServiceProcess):
    def __init__(self, installed: Installed, etcd: EtcdServer, log_path: Path) -> None:
        super().__init__("controller", ["--etcd", etcd.endpoint, "--cluster", "image"],
                         log_path, launch=Launch(env={"PYTHONPATH": ""}))
        self.installed = installed

    def command(self) -> list[str]:
        return [str(self.installed.strand_service), "controller", "--listen", self.address,
                *self.args]


@pytest.mark.slow
def test_the_installed_controller_serves_and_stops_on_sigterm(installed: Installed,
                                                              tmp_path: Path) -> None:
    etcd = EtcdServer(tmp_path / "etcd", unsafe_no_fsync=True)
    etcd.start()
    controller = InstalledController(installed, etcd, tmp_path / "controller.log")
    try:
        controller.start(timeout=30)  # its gRPC health check answers SERVING
    finally:
        controller.stop()
        etcd.stop()
    assert controller.returncode == 0, controller.log_path.read_text()[-2000:]
