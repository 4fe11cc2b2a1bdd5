"""Dashboard checks that need what scripts/setup.sh builds: the project's promtool, the
vLLM venv (vLLM's own metric names) and helm.

Integration tests, not unit tests: on a fresh machine set-up is still running in the
background while the unit tests run (scripts/test.sh), and a unit test that skipped
without these would never check anything in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import yaml
from tests.integration.conftest import CHART
from tests.unit.test_dashboards import DOCS, QUERIES, metric_names

from sits_dashboards import dashboard_queries
from sits_dashboards.contract import vllm_series, vllm_site_packages
from sits_localcluster.helm import helm_binary
from sits_localcluster.prometheus import built_prometheus
from sits_vllm.venv import venv_dir


def test_queries_parse_as_promql() -> None:
    promtool = built_prometheus().with_name("promtool")
    assert os.access(promtool, os.X_OK), f"no promtool at {promtool} (scripts/setup.sh builds it)"
    failures = []
    for dashboard, what, expr in dashboard_queries("ns", "chat", source="sidecar"):
        result = subprocess.run(
            [str(promtool), "--experimental", "promql", "format", expr],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if result.returncode != 0:
            failures.append(f"{dashboard} / {what}: {result.stderr.strip()}\n  {expr}")
    assert not failures, "\n".join(failures)


def test_vllm_names_are_ones_the_vllm_build_exports() -> None:
    site = vllm_site_packages(venv_dir())
    assert site is not None, f"no vLLM venv at {venv_dir()} (scripts/setup.sh builds it)"
    exported = vllm_series(site)
    problems = [
        f"{dashboard} / {what}: vLLM exports no {name}"
        for dashboard, what, expr in QUERIES
        for name in sorted(metric_names(expr))
        if name.startswith("vllm:") and name not in exported
    ]
    assert not problems, "\n".join(problems)


def render(*args: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(helm_binary()), "template", "sits-operator", str(CHART), "-n", "sits-system", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def dashboard_maps(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        o
        for o in objects
        if o["kind"] == "ConfigMap" and "grafana_dashboard" in o["metadata"].get("labels", {})
    ]


def test_chart_renders_a_configmap_per_dashboard_for_the_sidecar() -> None:
    assert not dashboard_maps(render()), "dashboards.enabled defaults to false"
    maps = dashboard_maps(render("--set", "dashboards.enabled=true"))
    assert len(maps) == len(DOCS)
    for config_map in maps:
        meta = config_map["metadata"]
        assert meta["labels"]["grafana_dashboard"] == "1"
        assert meta["namespace"] == "sits-system"
        assert "annotations" not in meta
        ((key, text),) = config_map["data"].items()
        assert json.loads(text) == DOCS[key]


def test_chart_dashboard_label_folder_and_namespace_are_configurable() -> None:
    settings = {
        "dashboards.enabled": "true",
        "dashboards.label": "my_dashboards",
        "dashboards.folder": "SITS",
        "dashboards.namespace": "monitoring",
    }
    args = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    objects = render(*args, "--set-string", "dashboards.labelValue=yes")
    maps = [
        o
        for o in objects
        if o["kind"] == "ConfigMap" and "my_dashboards" in o["metadata"].get("labels", {})
    ]
    assert len(maps) == len(DOCS)
    for config_map in maps:
        meta = config_map["metadata"]
        assert meta["labels"]["my_dashboards"] == "yes"
        assert meta["annotations"] == {"grafana_folder": "SITS"}
        assert meta["namespace"] == "monitoring"
