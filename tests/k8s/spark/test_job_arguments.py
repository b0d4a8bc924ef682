"""The jobs' arguments are defined once (spark-on-k8s/jobs/arguments.yaml) and every
launcher gives the same ones for the same values: submit.py's Kubernetes command,
its local-mode command and the chart's SparkApplication / ScheduledSparkApplication
(issue 14, acceptance 5: "the spark-submit script's arguments are the ones the
local-mode test runs"); the local-mode command parses with the jobs' own parsers; bad
values fail the same way in the chart and in submit.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import submit
import yaml

from tests.k8s.chart.tools import CHART, REPO
from tests.k8s.spark.tools import (
    EXAMPLE_VALUES,
    job_parser,
    render_spark,
    spark_application,
)

JOBS = ("mirror", "audit")
COPY = CHART / "files" / "spark-job-arguments.yaml"
K8S = submit.Kubernetes(master="k8s://https://kubernetes.example:6443")

# Value sets over the example values (spark-on-k8s/manifests/values.yaml): every
# argument type, set and left out.
VARIANTS: dict[str, dict[str, Any]] = {
    "example": {},
    "pattern-identity-no-limit": {"spark": {
        "mirror": {"topics": [], "topicsPattern": "^(orders|payments)-.*$", "naming": "identity",
                   "maxOffsetsPerTrigger": None, "triggerSeconds": 0},
        "audit": {"topics": [], "topicsPattern": "orders|payments", "bucketMinutes": 1}}},
    "big-numbers-custom-naming": {"spark": {
        "mirror": {"maxOffsetsPerTrigger": 5_000_000_000, "naming": "my_naming:Policy",
                   "checkpoint": {"path": "s3a://bucket/strand/mirror"}},
        "audit": {"naming": "my_naming:Policy", "topics": ["a", "b", "c"]}}},
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Path]]:
    """The values files of one variant (as helm -f and submit.py -f take them)."""
    path = tmp_path_factory.mktemp("values") / f"{request.param}.yaml"
    path.write_text(yaml.safe_dump(VARIANTS[request.param]))
    yield [EXAMPLE_VALUES, path]


def test_the_chart_reads_a_byte_for_byte_copy_of_the_definitions() -> None:
    assert COPY.read_bytes() == submit.ARGUMENTS.read_bytes(), (
        f"{COPY.relative_to(REPO)} differs from {submit.ARGUMENTS.relative_to(REPO)}: "
        f"cp {submit.ARGUMENTS.relative_to(REPO)} {COPY.relative_to(REPO)}")


@pytest.mark.parametrize("job", JOBS)
def test_the_definitions_are_the_jobs_own_options(job: str) -> None:
    """Every option of the job's parser is in the table (but --master, which the
    launcher chooses) and every flag of the table is an option of the job."""
    parser = job_parser(job)
    options = {option for action in parser._actions for option in action.option_strings
               if option.startswith("--")} - {"--help", "--master"}
    defined = {argument.flag for argument in submit.load_definitions()[job].arguments}
    assert defined == options


@pytest.mark.parametrize("job", JOBS)
def test_kubernetes_local_and_chart_give_the_same_arguments(job: str,
                                                            variant: list[Path]) -> None:
    definition = submit.load_definitions()[job]
    values = submit.load_values(variant)
    arguments = submit.application_arguments(definition, values["spark"][job])
    assert arguments and all(a.startswith("--") for a in arguments)

    kubernetes = submit.kubernetes_command(definition, values, K8S)
    job_file = kubernetes.index(f"local:///opt/strand/jobs/{job}.py")
    assert kubernetes[job_file + 1:] == arguments

    local = submit.local_command(definition, values)
    assert local[local.index(str(submit.JOBS_DIR / f"{job}.py")) + 1:] == arguments
    by_python = submit.local_command(definition, values, runner="python")
    assert by_python[2:] == [*arguments, "--master", "local[2]"]

    chart = spark_application(render_spark(variant), job)
    assert chart["mainApplicationFile"] == f"local:///opt/strand/jobs/{job}.py"
    assert chart["arguments"] == arguments


@pytest.mark.parametrize("job", JOBS)
def test_the_local_command_parses_with_the_jobs_parser(job: str, variant: list[Path]) -> None:
    values = submit.load_values(variant)
    settings = values["spark"][job]
    command = submit.local_command(submit.load_definitions()[job], values, runner="python")
    parsed = job_parser(job).parse_args(command[2:])
    assert parsed.source_bootstrap == settings["source"]["bootstrap"]
    assert parsed.target_cluster == settings["target"]["name"]
    assert parsed.master == "local[2]"


@pytest.mark.parametrize("job", JOBS)
def test_a_parser_refuses_what_the_table_cannot_give(job: str) -> None:
    """The parse above can fail: the jobs' parsers reject a command without the
    required source (exit status 2, argparse's)."""
    values = submit.load_values([EXAMPLE_VALUES])
    command = submit.local_command(submit.load_definitions()[job], values, runner="python")
    without_source = [a for a in command[2:] if not a.startswith("--source-bootstrap")]
    with pytest.raises(SystemExit) as exit_info:
        job_parser(job).parse_args(without_source)
    assert exit_info.value.code == 2


# -------------------------------------------------- bad values: the same error on both

def helm_error(overrides: dict[str, Any], tmp_path: Path) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(overrides))
    with pytest.raises(AssertionError) as failure:
        render_spark([EXAMPLE_VALUES, path])
    return str(failure.value)


def submit_error(overrides: dict[str, Any], job: str, tmp_path: Path) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(overrides))
    values = submit.load_values([EXAMPLE_VALUES, path])
    with pytest.raises(submit.SettingsError) as failure:
        submit.application_arguments(submit.load_definitions()[job], values["spark"][job])
    return str(failure.value)


@pytest.mark.parametrize(("overrides", "job", "message"), [
    ({"spark": {"mirror": {"source": {"bootstrap": ""}}}}, "mirror",
     "spark.mirror.source.bootstrap is required by the mirror job (--source-bootstrap): "
     "set it in your values"),
    ({"spark": {"audit": {"reportDir": {"path": ""}}}}, "audit",
     "spark.audit.reportDir.path is required by the audit job (--report-dir)"),
    ({"spark": {"mirror": {"topicsPattern": "orders.*"}}}, "mirror",
     "the mirror job needs exactly one of spark.mirror.topics or spark.mirror.topicsPattern; "
     "set: topics, topicsPattern"),
    ({"spark": {"audit": {"topics": []}}}, "audit",
     "the audit job needs exactly one of spark.audit.topics or spark.audit.topicsPattern"),
], ids=["required", "required-nested", "both-exclusive", "neither-exclusive"])
def test_bad_values_fail_alike_in_the_chart_and_in_submit(overrides: dict[str, Any], job: str,
                                                          message: str, tmp_path: Path) -> None:
    assert message in helm_error(overrides, tmp_path)
    assert message in submit_error(overrides, job, tmp_path)


@pytest.mark.parametrize(("overrides", "job", "message"), [
    ({"spark": {"mirror": {"checkpoint": {"volume": {"enabled": False}}}}}, "mirror",
     "spark.mirror.checkpoint.path /var/lib/strand-spark/checkpoint is a local path but "
     "spark.mirror.checkpoint.volume.enabled is false"),
    ({"spark": {"audit": {"reportDir": {"path": "/reports"}}}}, "audit",
     "spark.audit.reportDir.path /reports is not under spark.audit.reportDir.volume.mountPath "
     "/var/lib/strand-spark"),
], ids=["local-path-without-volume", "path-off-the-volume"])
def test_a_path_off_the_jobs_volume_fails_alike(overrides: dict[str, Any], job: str,
                                                message: str, tmp_path: Path) -> None:
    assert message in helm_error(overrides, tmp_path)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(overrides))
    with pytest.raises(submit.SettingsError) as failure:
        submit.kubernetes_command(submit.load_definitions()[job],
                                  submit.load_values([EXAMPLE_VALUES, path]), K8S)
    assert message in str(failure.value)


def test_an_object_store_path_needs_no_volume(tmp_path: Path) -> None:
    path = tmp_path / "s3.yaml"
    path.write_text(yaml.safe_dump({"spark": {"mirror": {"checkpoint": {
        "path": "s3a://bucket/mirror", "volume": {"enabled": False}}}}}))
    spec = spark_application(render_spark([EXAMPLE_VALUES, path]), "mirror")
    assert "--checkpoint=s3a://bucket/mirror" in spec["arguments"]
    assert [v["name"] for v in spec["volumes"]] == ["tmp"]
    command = submit.kubernetes_command(submit.load_definitions()["mirror"],
                                        submit.load_values([EXAMPLE_VALUES, path]), K8S)
    assert not any("persistentVolumeClaim" in part for part in command)


def test_the_schema_refuses_a_mistyped_value_before_any_template(tmp_path: Path) -> None:
    error = helm_error({"spark": {"mirror": {"triggerSeconds": "five"}}}, tmp_path)
    assert "spark/mirror/triggerSeconds" in error
    assert "must be an integer" in submit_error(
        {"spark": {"mirror": {"triggerSeconds": "five"}}}, "mirror", tmp_path)


def test_spark_properties_are_strings_on_both_sides(tmp_path: Path) -> None:
    """The operator's sparkConf is map[string]string: a number would be written one
    way by Helm (1e+06) and another by Python, so both refuse it."""
    overrides = {"spark": {"mirror": {"sparkConf": {"spark.sql.shuffle.partitions": 1000000}}}}
    assert "spark/mirror/sparkConf/spark.sql.shuffle.partitions" in helm_error(overrides,
                                                                                tmp_path)
    path = tmp_path / "conf.yaml"
    path.write_text(yaml.safe_dump(overrides))
    with pytest.raises(submit.SettingsError, match="as strings"):
        submit.kubernetes_command(submit.load_definitions()["mirror"],
                                  submit.load_values([EXAMPLE_VALUES, path]), K8S)


def test_a_comma_in_a_topic_is_refused(tmp_path: Path) -> None:
    assert "spark/mirror/topics/0" in helm_error(
        {"spark": {"mirror": {"topics": ["a,b"]}}}, tmp_path)
    assert "cannot contain a comma" in submit_error(
        {"spark": {"mirror": {"topics": ["a,b"]}}}, "mirror", tmp_path)


# --------------------------------------------------- the tool, as a user runs it

def test_submit_prints_the_command_and_refuses_bad_values(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert submit.main(["local", "--job", "mirror", "-f", str(EXAMPLE_VALUES)]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("spark-submit --master 'local[2]' --name strand-mirror ")
    assert "--max-offsets-per-trigger=100000 " in printed
    bad = tmp_path / "bad.yaml"
    bad.write_text("spark: {audit: {source: {name: ''}}}\n")
    assert submit.main(["kubernetes", "--job", "audit", "-f", str(EXAMPLE_VALUES), "-f",
                        str(bad), "--master", "k8s://https://k:6443"]) == 2
    assert "spark.audit.source.name is required" in capsys.readouterr().err
    assert submit.main(["kubernetes", "--job", "audit", "-f", str(EXAMPLE_VALUES),
                        "--master", "https://k:6443"]) == 2
    assert "k8s://https://HOST:PORT" in capsys.readouterr().err


def test_a_malformed_definition_is_refused_with_its_place(tmp_path: Path) -> None:
    table = yaml.safe_load(submit.ARGUMENTS.read_text())
    table["jobs"]["mirror"]["arguments"][0]["type"] = "number"
    path = tmp_path / "arguments.yaml"
    path.write_text(yaml.safe_dump(table))
    with pytest.raises(submit.DefinitionError, match="--source-bootstrap has type 'number'"):
        submit.load_definitions(path)


def test_values_merge_as_helm_merges_them() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    assert submit.merge_values(base, {"a": {"c": [3]}, "d": None, "e": {}}) == {
        "a": {"b": 1, "c": [3]}, "e": {}}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": "x"}  # not changed in place

