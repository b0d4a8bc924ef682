"""The chart's alert rules and dashboard (templates/monitoring.yaml): off by default,
and when on, exactly the files in files/monitoring/ (which
tests/integration/test_monitoring.py checks against a live cluster's scrape)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.k8s.chart.tools import of_kind, render

MONITORING = Path(__file__).resolve().parents[3] / "helm" / "strand" / "files" / "monitoring"
ON = ("metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true",
      "metrics.prometheusRule.labels.release=kube-prometheus")


def test_alerts_and_dashboard_are_off_by_default() -> None:
    manifests = render()
    assert not of_kind(manifests, "PrometheusRule")
    assert not [m for m in of_kind(manifests, "ConfigMap")
                if m["metadata"]["name"].endswith("-dashboard")]


def test_the_rules_and_the_dashboard_are_the_files_unchanged() -> None:
    manifests = render(settings=ON)
    (rule,) = of_kind(manifests, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus"
    assert rule["spec"] == yaml.safe_load((MONITORING / "strand-alerts.yaml").read_text())
    # Prometheus's own templating in the annotations reaches it untouched by Helm.
    summaries = [r["annotations"]["summary"] for group in rule["spec"]["groups"]
                 for r in group["rules"]]
    assert any("{{ $value }}" in summary for summary in summaries)
    (dashboard,) = [m for m in of_kind(manifests, "ConfigMap")
                    if m["metadata"]["name"].endswith("-dashboard")]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["strand-dashboard.json"]) == json.loads(
        (MONITORING / "strand-dashboard.json").read_text())


def test_every_alert_says_how_bad_and_what_to_do() -> None:
    rules = yaml.safe_load((MONITORING / "strand-alerts.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]
            assert rule["alert"].startswith("Strand"), rule["alert"]
