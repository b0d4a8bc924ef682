"""Our structural check of the Kubeflow Spark operator's objects
(``sparkoperator.k8s.io/v1beta2`` SparkApplication and ScheduledSparkApplication),
which kubernetes-validate has no schema for: a JSON schema, written here from the
fields the operator's API types define (kubeflow/spark-operator,
api/v1beta2/sparkapplication_types.go and scheduledsparkapplication_types.go): their
JSON names, which are required (no ``omitempty``, not ``+optional``), their types and
the enums of the ``+kubebuilder:validation`` markers; unknown fields are refused
everywhere. The Kubernetes types the spec embeds (volumes, mounts, env, security
contexts, affinity, containers ...) are checked against kubernetes-validate's strict
definitions of the newest Kubernetes it knows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

from jsonschema import Draft202012Validator
from kubernetes_validate.utils import latest_version
from referencing import Registry, Resource

GROUP_VERSION = "sparkoperator.k8s.io/v1beta2"
K8S_DEFINITIONS = "https://kubernetes.io/api/_definitions.json"
Schema = dict[str, Any]

INT32 = {"type": "integer", "minimum": -(2 ** 31), "maximum": 2 ** 31 - 1}
INT64 = {"type": "integer"}
STRING: Schema = {"type": "string"}
BOOLEAN: Schema = {"type": "boolean"}
STRINGS: Schema = {"type": "array", "items": STRING}
STRING_MAP: Schema = {"type": "object", "additionalProperties": STRING}


def k8s(name: str) -> Schema:
    """A Kubernetes type, e.g. ``core.v1.Volume``."""
    return {"$ref": f"{K8S_DEFINITIONS}#/$defs/io.k8s.api.{name}"}


def array_of(item: Schema) -> Schema:
    return {"type": "array", "items": item}


def struct(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    """A Go struct: these JSON fields and no other."""
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def enum(*values: str) -> Schema:
    return {"type": "string", "enum": list(values)}


NAME_PATH = struct({"name": STRING, "path": STRING}, ("name", "path"))
SECRET_INFO = struct({"name": STRING, "path": STRING, "secretType": STRING},
                     ("name", "path", "secretType"))
NAME_KEY = struct({"name": STRING, "key": STRING}, ("name", "key"))
PORT = struct({"name": STRING, "protocol": STRING, "containerPort": INT32},
              ("name", "protocol", "containerPort"))
GPU = struct({"name": STRING, "quantity": INT64}, ("name", "quantity"))

# SparkPodSpec: what the driver and the executors share.
SPARK_POD_SPEC: dict[str, Schema] = {
    # PodTemplateSpec, declared schemaless (PreserveUnknownFields) in the CRD.
    "template": {"type": "object"},
    "cores": {**INT32, "minimum": 1},
    "coreLimit": STRING,
    "memory": STRING,
    "memoryOverhead": STRING,
    "gpu": GPU,
    "image": STRING,
    "configMaps": array_of(NAME_PATH),
    "secrets": array_of(SECRET_INFO),
    "env": array_of(k8s("core.v1.EnvVar")),
    "envVars": STRING_MAP,
    "envFrom": array_of(k8s("core.v1.EnvFromSource")),
    "envSecretKeyRefs": {"type": "object", "additionalProperties": NAME_KEY},
    "labels": STRING_MAP,
    "annotations": STRING_MAP,
    "volumeMounts": array_of(k8s("core.v1.VolumeMount")),
    "affinity": k8s("core.v1.Affinity"),
    "tolerations": array_of(k8s("core.v1.Toleration")),
    "podSecurityContext": k8s("core.v1.PodSecurityContext"),
    "securityContext": k8s("core.v1.SecurityContext"),
    "schedulerName": STRING,
    "sidecars": array_of(k8s("core.v1.Container")),
    "initContainers": array_of(k8s("core.v1.Container")),
    "hostNetwork": BOOLEAN,
    "nodeSelector": STRING_MAP,
    "dnsConfig": k8s("core.v1.PodDNSConfig"),
    "terminationGracePeriodSeconds": INT64,
    "serviceAccount": STRING,
    "hostAliases": array_of(k8s("core.v1.HostAlias")),
    "shareProcessNamespace": BOOLEAN,
    "runtimeClassName": STRING,
}
DRIVER_SPEC = struct({
    **SPARK_POD_SPEC,
    "podName": {"type": "string",
                "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"},
    "coreRequest": STRING,
    "javaOptions": STRING,
    "lifecycle": k8s("core.v1.Lifecycle"),
    "kubernetesMaster": STRING,
    "serviceAnnotations": STRING_MAP,
    "serviceLabels": STRING_MAP,
    "ports": array_of(PORT),
    "priorityClassName": STRING,
})
EXECUTOR_SPEC = struct({
    **SPARK_POD_SPEC,
    "instances": {**INT32, "minimum": 1},
    "coreRequest": STRING,
    "javaOptions": STRING,
    "lifecycle": k8s("core.v1.Lifecycle"),
    "deleteOnTermination": BOOLEAN,
    "ports": array_of(PORT),
    "priorityClassName": STRING,
})
DEPENDENCIES = struct({name: STRINGS for name in (
    "jars", "files", "pyFiles", "packages", "excludePackages", "repositories", "archives")})
RESTART_POLICY = struct({
    "type": enum("Never", "Always", "OnFailure"),
    "onSubmissionFailureRetries": {**INT32, "minimum": 0},
    "onFailureRetries": {**INT32, "minimum": 0},
    "onSubmissionFailureRetryInterval": {**INT64, "minimum": 1},
    "onFailureRetryInterval": {**INT64, "minimum": 1},
})
PROMETHEUS = struct({
    "jmxExporterJar": STRING,
    "port": {**INT32, "minimum": 1024, "maximum": 49151},
    "portName": STRING,
    "configFile": STRING,
    "configuration": STRING,
}, ("jmxExporterJar",))
MONITORING = struct({
    "exposeDriverMetrics": BOOLEAN,
    "exposeExecutorMetrics": BOOLEAN,
    "metricsProperties": STRING,
    "metricsPropertiesFile": STRING,
    "prometheus": PROMETHEUS,
}, ("exposeDriverMetrics", "exposeExecutorMetrics"))
SERVICE_TYPE = enum("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
SPARK_UI = struct({
    "servicePort": INT32,
    "servicePortName": STRING,
    "serviceType": SERVICE_TYPE,
    "serviceAnnotations": STRING_MAP,
    "serviceLabels": STRING_MAP,
    "ingressAnnotations": STRING_MAP,
    "ingressTLS": array_of(k8s("networking.v1.IngressTLS")),
})
DRIVER_INGRESS = struct({
    "servicePort": INT32,
    "servicePortName": STRING,
    "serviceType": SERVICE_TYPE,
    "serviceAnnotations": STRING_MAP,
    "serviceLabels": STRING_MAP,
    "ingressURLFormat": STRING,
    "ingressAnnotations": STRING_MAP,
    "ingressTLS": array_of(k8s("networking.v1.IngressTLS")),
}, ("servicePort", "servicePortName"))
BATCH_SCHEDULER = struct({
    "queue": STRING,
    "priorityClassName": STRING,
    "resources": {"type": "object", "additionalProperties": {"type": ["string", "number"]}},
})
DYNAMIC_ALLOCATION = struct({
    "enabled": BOOLEAN,
    "initialExecutors": INT32,
    "minExecutors": INT32,
    "maxExecutors": INT32,
    "shuffleTrackingTimeout": INT64,
})
SPARK_APPLICATION_SPEC = struct({
    "type": enum("Java", "Python", "Scala", "R"),
    "sparkVersion": STRING,
    "mode": enum("cluster", "client"),
    "proxyUser": STRING,
    "image": STRING,
    "imagePullPolicy": STRING,
    "imagePullSecrets": STRINGS,
    "mainClass": STRING,
    "mainApplicationFile": STRING,
    "arguments": STRINGS,
    "sparkConf": STRING_MAP,
    "hadoopConf": STRING_MAP,
    "sparkConfigMap": STRING,
    "hadoopConfigMap": STRING,
    "volumes": array_of(k8s("core.v1.Volume")),
    "driver": DRIVER_SPEC,
    "executor": EXECUTOR_SPEC,
    "deps": DEPENDENCIES,
    "restartPolicy": RESTART_POLICY,
    "nodeSelector": STRING_MAP,
    "failureRetries": INT32,
    "retryInterval": INT64,
    "pythonVersion": enum("2", "3"),
    "memoryOverheadFactor": STRING,
    "monitoring": MONITORING,
    "batchScheduler": STRING,
    "timeToLiveSeconds": INT64,
    "batchSchedulerOptions": BATCH_SCHEDULER,
    "sparkUIOptions": SPARK_UI,
    "driverIngressOptions": array_of(DRIVER_INGRESS),
    "dynamicAllocation": DYNAMIC_ALLOCATION,
}, ("type", "sparkVersion", "mainApplicationFile", "driver", "executor"))
SCHEDULED_SPARK_APPLICATION_SPEC = struct({
    "schedule": {"type": "string", "minLength": 1},
    "template": SPARK_APPLICATION_SPEC,
    "suspend": BOOLEAN,
    "concurrencyPolicy": enum("Allow", "Forbid", "Replace"),
    "successfulRunHistoryLimit": INT32,
    "failedRunHistoryLimit": INT32,
}, ("schedule", "template"))


def object_schema(kind: str, spec: Schema) -> Schema:
    """A top-level object: no status in a manifest (the operator writes it)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **struct({"apiVersion": {"const": GROUP_VERSION}, "kind": {"const": kind},
                  "metadata": {"$ref": f"{K8S_DEFINITIONS}#/$defs/"
                               "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                  "spec": spec},
                 ("apiVersion", "kind", "metadata", "spec")),
    }


SCHEMAS = {"SparkApplication": object_schema("SparkApplication", SPARK_APPLICATION_SPEC),
           "ScheduledSparkApplication": object_schema("ScheduledSparkApplication",
                                                      SCHEDULED_SPARK_APPLICATION_SPEC)}


class OperatorApiError(AssertionError):
    """An object does not have the structure the operator's API defines."""


@dataclass(frozen=True)
class Problem:
    path: str
    message: str


@cache
def _registry() -> Registry[Any]:
    """kubernetes-validate's strict definitions of the newest Kubernetes it knows."""
    directory = files("kubernetes_validate") / "kubernetes-json-schema" / \
        f"v{latest_version()}-local-strict"
    definitions: dict[str, Any] = json.loads((directory / "_definitions.json").read_text())
    registry: Registry[Any] = Registry().with_resource(definitions["$id"],
                                                       Resource.from_contents(definitions))
    return registry


def problems(manifest: dict[str, Any]) -> list[Problem]:
    """What is wrong with a SparkApplication or ScheduledSparkApplication, by path."""
    kind = manifest.get("kind")
    if manifest.get("apiVersion") != GROUP_VERSION or kind not in SCHEMAS:
        return [Problem("", f"not a {GROUP_VERSION} SparkApplication or "
                            f"ScheduledSparkApplication: {manifest.get('apiVersion')} {kind}")]
    validator = Draft202012Validator(SCHEMAS[str(kind)], registry=_registry())
    found = [Problem(".".join(str(p) for p in error.absolute_path), error.message)
             for error in validator.iter_errors(manifest)]
    return sorted(found, key=lambda p: (p.path, p.message))


def check(manifest: dict[str, Any]) -> None:
    """Raise OperatorApiError naming the object and each problem."""
    found = problems(manifest)
    if found:
        name = manifest.get("metadata", {}).get("name")
        raise OperatorApiError(f"{manifest.get('kind')} {name} does not match the operator's "
                               f"API: " + "; ".join(f"{p.path or '(top)'}: {p.message}"
                                                   for p in found))
