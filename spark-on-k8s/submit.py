"""Build (and run) the spark-submit command lines of the mirror and audit jobs.

The jobs' arguments come from one table, ``jobs/arguments.yaml``, applied to the job's
settings: the chart's ``spark.mirror`` / ``spark.audit`` values (the chart's defaults,
``helm/strand/values.yaml``, merged with the ``--values`` files as Helm merges them).
So one values file gives the same job arguments to

- ``submit.py kubernetes``: ``spark-submit --master k8s://... --deploy-mode cluster``
  with the image, namespace, service accounts, resources, volumes and conf the chart's
  SparkApplication would give the operator;
- ``submit.py local``: the same job file and arguments in local mode
  (``spark-submit --master local[2]``, or ``python jobs/x.py ... --master local[2]``);
- the chart's SparkApplication / ScheduledSparkApplication templates.

Usage::

    spark-on-k8s/submit.py kubernetes --job mirror --values my-values.yaml \\
        --master k8s://https://api.example:6443 --namespace strand [--run]
    spark-on-k8s/submit.py local --job audit --values my-values.yaml [--run]

Without ``--run`` the command is printed (shell-quoted); with it, it runs and its exit
status is this tool's. Bad settings exit with status 2 and say which value to set.
"""

from __future__ import annotations

import argparse
import copy
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

SPARK_DIR = Path(__file__).resolve().parent
JOBS_DIR = SPARK_DIR / "jobs"
ARGUMENTS = JOBS_DIR / "arguments.yaml"
CHART = SPARK_DIR.parent / "helm" / "strand"
IMAGE_JOBS_DIR = "/opt/strand/jobs"  # where spark-on-k8s/Dockerfile puts the jobs
CHART_NAME = "strand"
ArgumentType = Literal["string", "integer", "list", "switch"]
ARGUMENT_TYPES: tuple[ArgumentType, ...] = ("string", "integer", "list", "switch")


class DefinitionError(ValueError):
    """jobs/arguments.yaml is malformed."""


class SettingsError(ValueError):
    """A job's settings (the chart's spark.<job> values) cannot make its arguments."""


# ---------------------------------------------------------------- argument definitions

@dataclass(frozen=True)
class Argument:
    flag: str
    setting: str  # dotted path into the job's settings
    type: ArgumentType
    required: bool = False


@dataclass(frozen=True)
class JobDefinition:
    name: str
    file: str  # in jobs/, e.g. mirror.py
    arguments: tuple[Argument, ...]
    exclusive: tuple[tuple[str, ...], ...] = ()

    def image_file(self) -> str:
        """The job file as the driver sees it inside the image."""
        return f"local://{IMAGE_JOBS_DIR}/{self.file}"


def _argument(job: str, raw: Any) -> Argument:
    if not isinstance(raw, dict) or set(raw) - {"flag", "setting", "type", "required"}:
        raise DefinitionError(f"{ARGUMENTS}: job {job}: an argument must be a mapping of "
                              f"flag, setting, type and required; got {raw!r}")
    flag, setting, kind = raw.get("flag"), raw.get("setting"), raw.get("type")
    if not isinstance(flag, str) or not flag.startswith("--"):
        raise DefinitionError(f"{ARGUMENTS}: job {job}: flag {flag!r} must start with --")
    if not isinstance(setting, str) or not setting:
        raise DefinitionError(f"{ARGUMENTS}: job {job}: {flag} names no setting")
    if kind not in ARGUMENT_TYPES:
        raise DefinitionError(f"{ARGUMENTS}: job {job}: {flag} has type {kind!r}, "
                              f"not one of {', '.join(ARGUMENT_TYPES)}")
    required = raw.get("required", False)
    if not isinstance(required, bool):
        raise DefinitionError(f"{ARGUMENTS}: job {job}: {flag}: required must be true/false")
    return Argument(flag, setting, kind, required)


def load_definitions(path: Path = ARGUMENTS) -> dict[str, JobDefinition]:
    """The jobs' argument tables, by job name."""
    document = yaml.safe_load(path.read_text())
    if not isinstance(document, dict) or document.get("version") != 1 \
            or not isinstance(document.get("jobs"), dict):
        raise DefinitionError(f"{path}: expected `version: 1` and a `jobs` mapping")
    jobs: dict[str, JobDefinition] = {}
    for name, raw in document["jobs"].items():
        if not isinstance(raw, dict) or not isinstance(raw.get("file"), str) \
                or not isinstance(raw.get("arguments"), list):
            raise DefinitionError(f"{path}: job {name} needs a `file` and an `arguments` list")
        arguments = tuple(_argument(name, a) for a in raw["arguments"])
        settings = {a.setting for a in arguments}
        exclusive = tuple(tuple(group) for group in raw.get("exclusive", []))
        for group in exclusive:
            if not set(group) <= settings:
                raise DefinitionError(f"{path}: job {name}: exclusive group {list(group)} "
                                      f"names settings no argument has")
        jobs[name] = JobDefinition(name, raw["file"], arguments, exclusive)
    return jobs


# ------------------------------------------------------------------ settings -> argv

def lookup(settings: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path, None where any step is missing."""
    value: Any = settings
    for key in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _is_set(argument: Argument, value: Any) -> bool:
    if argument.type == "switch":
        return value is True
    return value is not None and value != "" and value != []


def _render(argument: Argument, value: Any, where: str) -> str:
    """One argument as the chart's template writes it (--flag=value)."""
    what = f"{where}.{argument.setting} ({argument.flag})"
    if argument.type == "string":
        if not isinstance(value, str):
            raise SettingsError(f"{what} must be a string, not {value!r}")
        return f"{argument.flag}={value}"
    if argument.type == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"{what} must be an integer, not {value!r}")
        return f"{argument.flag}={value}"
    if argument.type == "list":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise SettingsError(f"{what} must be a list of non-empty strings, not {value!r}")
        if any("," in v for v in value):
            raise SettingsError(f"{what}: {value!r}: a name cannot contain a comma")
        return f"{argument.flag}={','.join(value)}"
    if not isinstance(value, bool):  # switch
        raise SettingsError(f"{what} must be true or false, not {value!r}")
    return argument.flag


def application_arguments(job: JobDefinition, settings: Mapping[str, Any],
                          where: str | None = None) -> list[str]:
    """The job's command-line arguments from its settings (the chart's spark.<job>
    values); ``where`` names the settings in errors (default ``spark.<job>``)."""
    where = where or f"spark.{job.name}"
    args: list[str] = []
    for argument in job.arguments:
        value = lookup(settings, argument.setting)
        if not _is_set(argument, value):
            if argument.required:
                raise SettingsError(f"{where}.{argument.setting} is required by the "
                                    f"{job.name} job ({argument.flag}): set it in your values")
            if argument.type == "switch" and value not in (None, False):
                _render(argument, value, where)  # a wrong type, not false: say so
            continue
        args.append(_render(argument, value, where))
    for group in job.exclusive:
        chosen = [s for s in group if _is_set(_by_setting(job, s), lookup(settings, s))]
        if len(chosen) != 1:
            names = " or ".join(f"{where}.{s}" for s in group)
            raise SettingsError(f"the {job.name} job needs exactly one of {names}; "
                                f"set: {', '.join(chosen) or 'none'}")
    return args


def _by_setting(job: JobDefinition, setting: str) -> Argument:
    return next(a for a in job.arguments if a.setting == setting)


# ------------------------------------------------------------------------ the values

def merge_values(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's merge of a values file over the defaults: maps merge key by key, any
    other value replaces, null deletes the key."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_values(files: Sequence[Path], chart: Path = CHART) -> dict[str, Any]:
    """The chart's values.yaml with the files merged over it, in order (helm -f ...)."""
    values: dict[str, Any] = yaml.safe_load((chart / "values.yaml").read_text())
    for path in files:
        document = yaml.safe_load(path.read_text()) or {}
        if not isinstance(document, dict):
            raise SettingsError(f"{path}: a values file must be a mapping")
        values = merge_values(values, document)
    return values


def fullname(release: str, values: Mapping[str, Any]) -> str:
    """The chart's "strand.fullname" (helm/strand/templates/_helpers.tpl)."""
    if values.get("fullnameOverride"):
        return str(values["fullnameOverride"])[:40].rstrip("-")
    name = values.get("nameOverride") or CHART_NAME
    full = release if name in release else f"{release}-{name}"
    return full[:40].rstrip("-")


def image(values: Mapping[str, Any], chart: Path = CHART) -> str:
    """The chart's "strand.sparkImage": repository:tag, the tag defaulting to the
    chart's appVersion."""
    spark_image = values["spark"]["image"]
    tag = spark_image.get("tag") or yaml.safe_load((chart / "Chart.yaml").read_text())[
        "appVersion"]
    return f"{spark_image['repository']}:{tag}"


# ---------------------------------------------------------------------- the commands

@dataclass(frozen=True)
class Kubernetes:
    """Where and as whom the job runs on Kubernetes: the chart release's names."""
    master: str  # k8s://https://host:port
    namespace: str = "strand"
    release: str = "strand"


def kubernetes_conf(job: JobDefinition, values: Mapping[str, Any],
                    target: Kubernetes) -> dict[str, str]:
    """spark-submit's conf for the job on Kubernetes: what the chart's SparkApplication
    gives the operator (image, accounts, resources, the job's volume), then the job's
    own sparkConf."""
    settings = values["spark"][job.name]
    check_job_path(job.name, settings)
    base = fullname(target.release, values)
    conf = {
        "spark.kubernetes.namespace": target.namespace,
        "spark.kubernetes.container.image": image(values),
        "spark.kubernetes.container.image.pullPolicy": values["spark"]["image"]["pullPolicy"],
        "spark.kubernetes.authenticate.driver.serviceAccountName": f"{base}-spark",
        "spark.kubernetes.authenticate.executor.serviceAccountName": f"{base}-spark-executor",
        "spark.kubernetes.submission.waitAppCompletion": "false",
        "spark.driver.cores": str(settings["driver"]["cores"]),
        "spark.driver.memory": str(settings["driver"]["memory"]),
        "spark.executor.instances": str(settings["executor"]["instances"]),
        "spark.executor.cores": str(settings["executor"]["cores"]),
        "spark.executor.memory": str(settings["executor"]["memory"]),
    }
    volume = job_volume(job.name)
    if volume is not None and settings[volume.setting]["volume"]["enabled"]:
        prefix = f"spark.kubernetes.driver.volumes.persistentVolumeClaim.{volume.name}"
        conf[f"{prefix}.options.claimName"] = claim_name(base, job.name, settings)
        conf[f"{prefix}.mount.path"] = str(settings[volume.setting]["volume"]["mountPath"])
    conf.update(spark_conf(job, settings))
    return conf


def spark_conf(job: JobDefinition, settings: Mapping[str, Any]) -> dict[str, str]:
    """The job's own Spark properties (sparkConf): strings, as the operator's
    SparkApplication takes them."""
    conf = settings.get("sparkConf") or {}
    wrong = sorted(str(k) for k, v in conf.items() if not isinstance(v, str))
    if wrong:
        raise SettingsError(f"spark.{job.name}.sparkConf: give {', '.join(wrong)} as strings "
                            f"(quote them in YAML), as the operator's sparkConf takes them")
    return {str(k): v for k, v in conf.items()}


@dataclass(frozen=True)
class JobVolume:
    name: str  # the volume's name in the pod
    setting: str  # the settings key holding `path` and `volume`


def job_volume(job: str) -> JobVolume | None:
    """The driver's persistent volume of a job: the mirror's checkpoint, the audit's
    reports (as the chart mounts them)."""
    return {"mirror": JobVolume("checkpoint", "checkpoint"),
            "audit": JobVolume("reports", "reportDir")}.get(job)


def check_job_path(job: str, settings: Mapping[str, Any]) -> None:
    """The job's path (checkpoint, reports) must be on its volume, or an object store
    URI when there is none (the chart's driver has a read-only root filesystem; here
    a path off the volume would be lost with the pod). The chart's rule and words."""
    volume = job_volume(job)
    if volume is None:
        return
    path = str(settings[volume.setting]["path"])
    mount = settings[volume.setting]["volume"]
    where = f"spark.{job}.{volume.setting}"
    if not path.startswith("/"):
        return
    if not mount["enabled"]:
        raise SettingsError(f"{where}.path {path} is a local path but {where}.volume.enabled "
                            f"is false: the driver's root filesystem is read-only; give an "
                            f"object store URI or enable the volume")
    if not path.startswith(str(mount["mountPath"]).rstrip("/") + "/"):
        raise SettingsError(f"{where}.path {path} is not under {where}.volume.mountPath "
                            f"{mount['mountPath']}: the driver would write it outside its "
                            f"volume")


def claim_name(base: str, job: str, settings: Mapping[str, Any]) -> str:
    volume = job_volume(job)
    assert volume is not None
    existing = settings[volume.setting]["volume"].get("existingClaim")
    return str(existing) if existing else f"{base}-spark-{job}-{volume.name}"


def kubernetes_command(job: JobDefinition, values: Mapping[str, Any], target: Kubernetes,
                       spark_submit: str = "spark-submit") -> list[str]:
    """spark-submit in cluster mode: the driver runs the job file from the image."""
    if not target.master.startswith("k8s://"):
        raise SettingsError(f"--master {target.master!r}: a Kubernetes master is "
                            f"k8s://https://HOST:PORT (kubectl cluster-info shows it)")
    args = application_arguments(job, values["spark"][job.name])
    command = [spark_submit, "--master", target.master, "--deploy-mode", "cluster",
               "--name", f"{fullname(target.release, values)}-{job.name}"]
    for key, value in kubernetes_conf(job, values, target).items():
        command += ["--conf", f"{key}={value}"]
    return [*command, job.image_file(), *args]


def local_command(job: JobDefinition, values: Mapping[str, Any], master: str = "local[2]",
                  runner: Literal["spark-submit", "python"] = "spark-submit",
                  spark_submit: str = "spark-submit", python: str = sys.executable,
                  jobs_dir: Path = JOBS_DIR) -> list[str]:
    """The same job file and arguments in local mode: through spark-submit, or run by
    Python with the job's own --master."""
    settings = values["spark"][job.name]
    args = application_arguments(job, settings)
    path = str(jobs_dir / job.file)
    if runner == "python":
        return [python, path, *args, "--master", master]
    command = [spark_submit, "--master", master, "--name", f"strand-{job.name}"]
    for key, value in spark_conf(job, settings).items():
        command += ["--conf", f"{key}={value}"]
    return [*command, path, *args]


# ----------------------------------------------------------------------------- CLI

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="submit.py", description="The mirror and audit jobs' spark-submit command "
        "lines, from the chart's spark values (printed, or run with --run).")
    modes = parser.add_subparsers(dest="mode", required=True)
    for mode, help_text in (("kubernetes", "cluster mode on Kubernetes (k8s:// master)"),
                            ("local", "local mode (local[N] master)")):
        sub = modes.add_parser(mode, help=help_text)
        sub.add_argument("--job", required=True, choices=sorted(load_definitions()))
        sub.add_argument("--values", "-f", type=Path, action="append", default=[],
                         help="values files merged over the chart's defaults, as helm -f")
        sub.add_argument("--run", action="store_true", help="run the command, not print it")
        sub.add_argument("--spark-submit", default="spark-submit",
                         help="the spark-submit to use (default: the one on PATH)")
        if mode == "kubernetes":
            sub.add_argument("--master", required=True, help="k8s://https://HOST:PORT")
            sub.add_argument("--namespace", default="strand")
            sub.add_argument("--release", default="strand",
                             help="the chart release whose Spark accounts and volumes to use")
        else:
            sub.add_argument("--master", default="local[2]")
            sub.add_argument("--runner", choices=("spark-submit", "python"),
                             default="spark-submit")
    return parser


def command_from(options: argparse.Namespace) -> list[str]:
    job = load_definitions()[options.job]
    values = load_values(options.values)
    if options.mode == "kubernetes":
        return kubernetes_command(job, values, Kubernetes(options.master, options.namespace,
                                                          options.release),
                                  spark_submit=options.spark_submit)
    runner: Literal["spark-submit", "python"] = options.runner
    return local_command(job, values, options.master, runner, options.spark_submit)


def main(argv: Sequence[str] | None = None) -> int:
    options = build_parser().parse_args(argv)
    try:
        command = command_from(options)
    except (SettingsError, DefinitionError, OSError, yaml.YAMLError) as exc:
        print(f"submit.py: {exc}", file=sys.stderr)
        return 2
    if not options.run:
        print(shlex.join(command))
        return 0
    return subprocess.run(command, check=False, env=os.environ.copy()).returncode


if __name__ == "__main__":
    sys.exit(main())
