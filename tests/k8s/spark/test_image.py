"""The Spark image (spark-on-k8s/Dockerfile), checked without a container engine:
checkov finds nothing it does not justify; the final stage runs as the numeric
non-root uid 185 the chart's SparkApplications name; the build copies every package
directory pyproject.toml builds from and installs the `spark` extra; Spark, Java and
Python are the versions the chart and the local mode use; the jobs land where the
driver looks for them. And the entry point, run as processes in this machine's Spark,
behaves as Spark on Kubernetes expects: `driver ...` runs spark-submit in client mode
bound to SPARK_DRIVER_BIND_ADDRESS (slow: a real PySpark job), `executor` starts
Spark's Kubernetes executor backend from the SPARK_* variables, anything else runs as
given (local mode)."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import submit
import yaml

from tests.k8s.chart.tools import CHART, CHECKOV, REPO, tool
from tests.unit.test_dockerfile import (
    Instruction,
    build_copies,
    dockerignore_patterns,
    final_stage,
    parse_dockerfile,
)

DOCKERFILE = REPO / "spark-on-k8s" / "Dockerfile"
ENTRYPOINT = REPO / "spark-on-k8s" / "entrypoint.sh"
UID = "185"
VENV = "/opt/strand/venv"
SPARK_HOME = Path(str(__import__("pyspark").__file__)).parent  # this machine's Spark


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text())


def env_of(instructions: list[Instruction]) -> dict[str, str]:
    """The final stage's ENV, as KEY=VALUE pairs."""
    found: dict[str, str] = {}
    for i in instructions:
        if i.keyword == "ENV":
            for pair in shlex.split(i.args):
                key, value = pair.split("=", 1)
                found[key] = value
    return found


def test_checkov_finds_nothing_the_dockerfile_does_not_justify() -> None:
    result = subprocess.run(
        [tool(CHECKOV), "--framework", "dockerfile", "-f", str(DOCKERFILE), "--output", "json",
         "--skip-download"], capture_output=True, text=True, timeout=120, check=False)
    report = json.loads(result.stdout)
    assert report["summary"]["parsing_errors"] == 0
    assert report["summary"]["passed"] > 0
    assert [c["check_id"] for c in report["results"]["failed_checks"]] == []
    for skipped in report["results"]["skipped_checks"]:
        assert len(skipped["check_result"]["suppress_comment"].strip()) > 20, skipped


def test_two_stages_on_bookworm_for_its_java_17(dockerfile: list[Instruction]) -> None:
    assert [i.args for i in dockerfile if i.keyword == "FROM"] == [
        "python:3.11-slim-bookworm AS build", "python:3.11-slim-bookworm"]
    run = " ".join(i.args for i in final_stage(dockerfile) if i.keyword == "RUN")
    assert "openjdk-17-jre-headless" in run and "tini" in run
    assert "rm -rf /var/lib/apt/lists/*" in run


def test_the_final_stage_runs_as_the_numeric_user_185(dockerfile: list[Instruction]) -> None:
    final = final_stage(dockerfile)
    users = [(n, i.args) for n, i in enumerate(final) if i.keyword == "USER"]
    assert [args for _, args in users] == [f"{UID}:{UID}"]
    assert {i.keyword for i in final[users[0][0]:]} <= {
        "USER", "WORKDIR", "ENTRYPOINT", "CMD", "ENV", "LABEL"}
    run = " ".join(i.args for i in final if i.keyword == "RUN")
    assert f"--uid {UID} --gid {UID}" in run
    # The chart's driver and executors run as this user (test_chart_spark.py).
    assert "runAsUser: 185" in (CHART / "templates" / "_spark.tpl").read_text()


def test_the_build_installs_the_spark_extra_from_every_package_directory(
        dockerfile: list[Instruction]) -> None:
    build_run = " ".join(i.args for i in dockerfile if i.keyword == "RUN" and i.stage == 0)
    assert f'{VENV}/bin/pip install ".[spark]"' in build_run
    copies = build_copies([i for i in dockerfile if i.stage == 0])
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    find = pyproject["tool"]["setuptools"]["packages"]["find"]
    assert "pyproject.toml" in copies and "README.md" in copies  # README: the package's readme
    for where in find["where"]:
        base = REPO / where
        packages = {p.name for p in base.iterdir() if (p / "__init__.py").exists()
                    and any(re.fullmatch(pattern.replace("*", ".*"), p.name)
                            for pattern in find["include"])}
        for package in packages:
            relative = str((base / package).relative_to(REPO))
            assert relative in copies or where in copies, \
                f"{relative} is a package pyproject.toml builds but the image does not copy"
    assert "spark-on-k8s/strand_spark" in copies


def test_the_final_stage_copies_the_venv_the_jobs_and_the_entry_point(
        dockerfile: list[Instruction]) -> None:
    final = final_stage(dockerfile)
    copies = [i.args for i in final if i.keyword == "COPY"]
    assert copies == [f"--from=build {VENV} {VENV}",
                      f"spark-on-k8s/jobs {submit.IMAGE_JOBS_DIR}",
                      "--chmod=0755 spark-on-k8s/entrypoint.sh /opt/strand/entrypoint.sh"]
    entrypoint = [json.loads(i.args) for i in final if i.keyword == "ENTRYPOINT"]
    assert entrypoint == [["/opt/strand/entrypoint.sh"]]
    # The driver runs the job from where the chart and submit.py point it.
    mirror = submit.load_definitions()["mirror"]
    assert mirror.image_file() == f"local://{submit.IMAGE_JOBS_DIR}/mirror.py"


def test_spark_python_and_java_are_the_versions_the_chart_and_local_mode_use(
        dockerfile: list[Instruction]) -> None:
    final = final_stage(dockerfile)
    env = env_of(final)
    assert env["SPARK_HOME"] == f"{VENV}/lib/python3.11/site-packages/pyspark"
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == f"{VENV}/bin/python"
    assert env["PATH"].startswith(f"{VENV}/bin:")
    args = dict(i.args.split("=", 1) for i in final if i.keyword == "ARG")
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert args["SPARK_VERSION"] == values["spark"]["sparkVersion"]
    import pyspark
    assert pyspark.__version__ == args["SPARK_VERSION"]  # local mode runs the same Spark
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["spark"]
    major_minor = ".".join(args["SPARK_VERSION"].split(".")[:2])
    assert any(d.startswith(f"pyspark>={major_minor},") for d in extra), extra
    assert args["STRAND_VERSION"] == tomllib.loads(
        (REPO / "pyproject.toml").read_text())["project"]["version"]


def test_the_build_context_keeps_what_the_build_copies(dockerfile: list[Instruction]) -> None:
    """The build's context is the repository root, with its .dockerignore."""
    patterns = dockerignore_patterns()
    for source in build_copies(dockerfile):
        source = source.removeprefix("--chmod=0755 ").strip()
        if source.startswith("--"):
            continue
        assert (REPO / source).exists(), source
        parts = Path(source).parts
        excluded = [p for p in patterns for n in range(1, len(parts) + 1)
                    if Path(*parts[:n]).match(p) or "/".join(parts[:n]) == p]
        assert excluded == [], f"{source} is copied by the build but excluded by {excluded}"


# ------------------------------------------------------------ the entry point, run

def entrypoint_env(**extra: str) -> dict[str, str]:
    """What the image's ENV gives the entry point, on this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    env.update(SPARK_HOME=str(SPARK_HOME), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    env.update(extra)
    return env


def run_entrypoint(*args: str, env: dict[str, str], cwd: Path,
                   timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ENTRYPOINT), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_without_a_command_it_says_what_to_give(tmp_path: Path) -> None:
    result = run_entrypoint(env=entrypoint_env(), cwd=tmp_path)
    assert result.returncode == 2
    assert "give a command: driver, executor" in result.stderr


def test_any_other_command_runs_as_given_the_local_mode(tmp_path: Path) -> None:
    code = "import sys, strand_spark, pyspark; print(pyspark.__version__, sys.argv[1:])"
    result = run_entrypoint("python", "-c", code, "--master", "local[2]",
                            env=entrypoint_env(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "4.3.0 ['--master', 'local[2]']"


def test_an_executor_without_spark_variables_is_refused(tmp_path: Path) -> None:
    result = run_entrypoint("executor", env=entrypoint_env(), cwd=tmp_path)
    assert result.returncode == 2
    assert "the executor needs SPARK_DRIVER_URL" in result.stderr


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: connecting is refused


def test_an_executor_starts_sparks_kubernetes_backend_for_its_driver(tmp_path: Path) -> None:
    """With the variables Spark sets on an executor pod, the JVM runs Spark's
    Kubernetes executor backend with Spark's jars, which calls the driver at
    SPARK_DRIVER_URL (none listens here: refused)."""
    port = closed_port()
    env = entrypoint_env(
        SPARK_DRIVER_URL=f"spark://CoarseGrainedScheduler@127.0.0.1:{port}",
        SPARK_EXECUTOR_ID="1", SPARK_EXECUTOR_CORES="1", SPARK_EXECUTOR_MEMORY="256m",
        SPARK_APPLICATION_ID="spark-application-1", SPARK_EXECUTOR_POD_IP="127.0.0.1",
        SPARK_EXECUTOR_POD_NAME="strand-mirror-exec-1", SPARK_RESOURCE_PROFILE_ID="0",
        SPARK_JAVA_OPT_0=f"-Dspark.driver.port={port}")
    result = run_entrypoint("executor", env=env, cwd=tmp_path)
    assert result.returncode != 0
    assert "KubernetesExecutorBackend: Started daemon" in result.stderr, result.stderr[-3000:]
    assert f"Failed to connect to /127.0.0.1:{port}" in result.stderr, result.stderr[-3000:]


JOB = """\
import json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
result = {"argv": sys.argv[1:], "master": spark.conf.get("spark.master"),
          "bind": spark.conf.get("spark.driver.bindAddress"),
          "deploy_mode": spark.conf.get("spark.submit.deployMode"),
          "count": spark.range(10).count()}
spark.stop()
print("RESULT " + json.dumps(result))
"""


@pytest.mark.slow
def test_a_driver_runs_the_job_file_as_spark_on_kubernetes_starts_it(tmp_path: Path) -> None:
    """The driver pod's container arguments (as spark-submit gives them: the
    properties file Spark mounts, PythonRunner, a local:// job file and its
    arguments), with a local master in the properties instead of the cluster's."""
    job = tmp_path / "job.py"
    job.write_text(JOB)
    properties = tmp_path / "spark.properties"
    properties.write_text("spark.master=local[1]\nspark.app.name=entrypoint-test\n"
                          "spark.ui.enabled=false\nspark.driver.memory=512m\n")
    arguments = ["--source-bootstrap=a:9090", "--topics=orders,payments"]
    result = run_entrypoint(
        "driver", "--properties-file", str(properties),
        "--class", "org.apache.spark.deploy.PythonRunner", f"local://{job}", *arguments,
        env=entrypoint_env(SPARK_DRIVER_BIND_ADDRESS="127.0.0.1"), cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("RESULT ")]
    assert json.loads(line.removeprefix("RESULT ")) == {
        "argv": arguments, "master": "local[1]", "bind": "127.0.0.1",
        "deploy_mode": "client", "count": 10}
