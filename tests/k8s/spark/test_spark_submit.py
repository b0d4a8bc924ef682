"""submit.py's Kubernetes command, run for real: Spark's own spark-submit (this
machine's PySpark 4.3) submits the mirror and the audit in cluster mode to an
emulated API server (kmock) and creates their driver pods. Each driver pod runs the
image with `driver` and the job file from the image, with exactly the arguments of
the local-mode command for the same values (issue 14, acceptance 5), as the image's
user would need them: the service account, the job's volume, the executors'
resources in the Spark conf it mounts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import submit

from tests.k8s.spark.api_server import SparkSubmitApiServer
from tests.k8s.spark.tools import EXAMPLE_VALUES, SPARK_DIR

pytestmark = pytest.mark.slow

SPARK_HOME = Path(str(__import__("pyspark").__file__)).parent
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
NAMESPACE = "spark-jobs"


def spark_properties(text: str) -> dict[str, str]:
    """A Java properties file as spark-submit writes it (escaped ':' and '=')."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.split("=", 1)
            found[key] = value.replace("\\:", ":").replace("\\=", "=")
    return found


@pytest.fixture(scope="module")
def api() -> Iterator[SparkSubmitApiServer]:
    with SparkSubmitApiServer() as server:
        yield server


@pytest.mark.parametrize("job", ["mirror", "audit"])
def test_spark_submit_creates_the_driver_the_local_mode_runs_alike(
        api: SparkSubmitApiServer, job: str, tmp_path: Path) -> None:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "KUBECONFIG": str(tmp_path / "no-kubeconfig")}  # anonymous, to the emulator
    result = subprocess.run(
        [sys.executable, str(SPARK_DIR / "submit.py"), "kubernetes", "--job", job,
         "-f", str(EXAMPLE_VALUES), "--master", f"k8s://{api.url}", "--namespace", NAMESPACE,
         "--spark-submit", str(SPARK_SUBMIT), "--run"],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-4000:]

    (driver,) = [p for p in api.objects("pods", NAMESPACE)
                 if p["metadata"]["name"].startswith(f"strand-{job}-")]
    pod = driver["spec"]
    (container,) = pod["containers"]
    values = submit.load_values([EXAMPLE_VALUES])
    definition = submit.load_definitions()[job]
    local = submit.local_command(definition, values)
    local_arguments = local[local.index(str(submit.JOBS_DIR / definition.file)) + 1:]
    assert container["args"][0] == "driver"
    main = container["args"].index(f"local:///opt/strand/jobs/{job}.py")
    assert container["args"][main - 2:main] == ["--class", "org.apache.spark.deploy.PythonRunner"]
    assert container["args"][main + 1:] == local_arguments
    assert container["image"] == submit.image(values)
    assert pod["serviceAccountName"] == "strand-spark"

    volume = submit.job_volume(job)
    assert volume is not None
    (claim,) = [v for v in pod["volumes"] if v["name"] == volume.name]
    assert claim["persistentVolumeClaim"]["claimName"] == f"strand-spark-{job}-{volume.name}"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[volume.name] == "/var/lib/strand-spark"

    (config,) = [c for c in api.objects("configmaps", NAMESPACE)
                 if c["metadata"]["ownerReferences"][0]["name"] == driver["metadata"]["name"]]
    properties = spark_properties(config["data"]["spark.properties"])
    settings = values["spark"][job]
    assert properties["spark.executor.instances"] == str(settings["executor"]["instances"])
    assert properties["spark.kubernetes.authenticate.executor.serviceAccountName"] == \
        "strand-spark-executor"
    assert properties["spark.kubernetes.namespace"] == NAMESPACE
    assert properties["spark.master"] == f"k8s://{api.url}"
