"""The Grafana dashboards the chart ships (e2e/sits_dashboards -> charts/.../dashboards).

Committed JSON must be what the generator writes now (``make dashboards``); every panel
reads the Prometheus data source variable and has queries; every query parses (promtool,
when the project's build is there; balanced brackets always) and names only series the
project's code exports (or vLLM's sources, when its venv exists) with labels those series
have; ``helm template`` with ``dashboards.enabled=true`` renders one ConfigMap per
dashboard with the sidecar's label.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sits_dashboards import (
    ANNOTATION,
    build_dashboards,
    dashboard_queries,
    render_json,
    write_dashboards,
)
from sits_dashboards.build import DASHBOARD_DIR
from sits_dashboards.contract import (
    TARGET_LABELS,
    Series,
    project_series,
)
from sits_dashboards.policy import load_policy
from sits_dashboards.queries import panels, raw_queries

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "sits-operator"
DOCS = build_dashboards()
QUERIES = [(doc["title"], what, expr) for doc in DOCS.values() for what, expr in raw_queries(doc)]

# PromQL words that are not metric names.
KEYWORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "offset",
        "bool",
        "inf",
        "nan",
    }
)
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
MATCHERS = re.compile(r"\{[^{}]*\}")
RANGE = re.compile(r"\[[^\]]*\]")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
IDENTIFIER = re.compile(r"(?<![\w:.$])([A-Za-z_:][\w:]*)(\s*\()?")
SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)\s*\{([^{}]*)\}")
LABEL_MATCHER = re.compile(r'(\w+)\s*(?:=~|!~|!=|=)\s*"')
BY_CLAUSE = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


def metric_names(expr: str) -> set[str]:
    """Metric names of a PromQL expression: identifiers left once strings, label
    matchers, ranges and grouping clauses are gone, that are neither functions nor
    keywords."""
    text = STRING.sub('""', expr)
    text = MATCHERS.sub("", text)
    text = RANGE.sub("", text)
    text = GROUPING.sub("", text)
    return {
        name for name, call in IDENTIFIER.findall(text) if not call and name.lower() not in KEYWORDS
    }


def balanced(expr: str) -> bool:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for char in STRING.sub('""', expr):
        if char in "([{":
            stack.append(char)
        elif char in pairs and (not stack or stack.pop() != pairs[char]):
            return False
    return not stack


@pytest.fixture(scope="module")
def series() -> Series:
    return project_series()


def test_committed_json_is_what_the_generator_writes(tmp_path: Path) -> None:
    written = {path.name: path.read_text() for path in write_dashboards(tmp_path)}
    committed = {path.name: path.read_text() for path in sorted(DASHBOARD_DIR.glob("*.json"))}
    assert sorted(committed) == sorted(written), "run `make dashboards`"
    stale = [name for name, text in written.items() if committed[name] != text]
    assert not stale, f"{stale} are stale: run `make dashboards`"


def test_three_dashboards_with_unique_uids_and_panel_ids() -> None:
    assert sorted(DOCS) == [
        "sits-cache-tiers.json",
        "sits-gateway-vllm.json",
        "sits-rollout-overview.json",
    ]
    uids = [doc["uid"] for doc in DOCS.values()]
    assert len(set(uids)) == len(uids)
    for doc in DOCS.values():
        ids = [panel["id"] for panel in doc["panels"]]
        assert len(set(ids)) == len(ids), doc["title"]
        assert json.loads(render_json(doc)) == doc


def test_every_panel_reads_the_datasource_variable_and_has_queries() -> None:
    for doc in DOCS.values():
        names = [v["name"] for v in doc["templating"]["list"]]
        assert {"datasource", "namespace"} <= set(names), doc["title"]
        found = list(panels(doc))
        assert found, doc["title"]
        for panel in found:
            where = f"{doc['title']} / {panel.get('title')}"
            assert panel.get("title"), where
            assert panel.get("description"), where
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
            assert panel.get("targets"), where
            for target in panel["targets"]:
                assert target["expr"].strip(), where
                assert target["refId"], where
                assert target["datasource"]["uid"] == "${datasource}", where
        for variable in doc["templating"]["list"]:
            if variable["type"] == "query":
                assert variable["datasource"]["uid"] == "${datasource}"


def test_queries_use_only_variables_the_dashboard_defines() -> None:
    built_in = {"__rate_interval", "__interval", "__range"}
    for doc in DOCS.values():
        defined = {v["name"] for v in doc["templating"]["list"]} | built_in
        for what, expr in raw_queries(doc):
            used = {a or b for a, b in re.findall(r"\$\{(\w+)\}|\$(\w+)", expr)}
            assert used <= defined, f"{doc['title']} / {what}: {used - defined}"


@pytest.mark.parametrize(("dashboard", "what", "expr"), QUERIES)
def test_query_is_balanced(dashboard: str, what: str, expr: str) -> None:
    assert balanced(expr), f"{dashboard} / {what}: {expr}"


def test_queries_name_only_exported_series_and_their_labels(series: Series) -> None:
    problems: list[str] = []
    for dashboard, what, expr in QUERIES:
        for name in sorted(metric_names(expr)):
            if name.startswith("vllm:"):
                continue  # tests/integration/test_dashboards_setup.py: vLLM's own names
            if name not in series:
                problems.append(f"{dashboard} / {what}: nothing exports {name}")
        for name, matchers in SELECTOR.findall(STRING.sub('""', expr)) + SELECTOR.findall(expr):
            if name not in series:
                continue
            allowed = series[name] | TARGET_LABELS
            for label in LABEL_MATCHER.findall(matchers):
                if label not in allowed:
                    problems.append(f"{dashboard} / {what}: {name} has no label {label}")
    assert not problems, "\n".join(problems)


def test_grouping_labels_exist_on_the_series_grouped(series: Series) -> None:
    """``sum by (x)`` over series without ``x`` yields one unlabelled series: a wrong label
    is not an error in PromQL, only an empty legend."""
    problems = []
    for dashboard, what, expr in QUERIES:
        names = [n for n in metric_names(expr) if n in series]
        if not names:
            continue
        allowed = frozenset().union(*(series[n] for n in names)) | TARGET_LABELS
        for clause in BY_CLAUSE.findall(expr):
            for label in (part.strip() for part in clause.split(",")):
                if label and label not in allowed:
                    problems.append(f"{dashboard} / {what}: no label {label} on {names}")
    assert not problems, "\n".join(problems)


def test_sli_panels_are_the_policy_rules_with_their_thresholds() -> None:
    policy = load_policy()
    rollout = DOCS["sits-rollout-overview.json"]
    by_title = {panel["title"]: panel for panel in panels(rollout)}
    for rule in policy.rules:
        (panel,) = [p for title, p in by_title.items() if f"({rule.sli})" in title]
        assert panel["targets"][0]["expr"] == rule.query
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert [step["value"] for step in steps] == [None, rule.threshold]
        assert panel["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "dashed"
        assert "{{" not in rule.query
        assert "$sits_deployment" in rule.query


def test_dashboard_queries_substitutes_every_variable() -> None:
    found = dashboard_queries("team-a", "chat", source="gateway", rate_interval="2m")
    assert len(found) == len(QUERIES)
    for dashboard, what, expr in found:
        assert "$" not in expr, f"{dashboard} / {what}: {expr}"
    rollout = [expr for dashboard, _, expr in found if dashboard == "SITS / Rollout overview"]
    assert any('sits_deployment="chat"' in expr and "[2m]" in expr for expr in rollout)
    cache = [expr for dashboard, _, expr in found if dashboard == "SITS / Cache tiers"]
    assert all('pod=~"chat-.+"' in expr for expr in cache if "pod=~" in expr)


def test_annotation_queries_are_named_so_a_test_can_run_them_over_a_range() -> None:
    """Grafana runs annotations over the dashboard's time range; the live test tells them
    apart by ``ANNOTATION`` to do the same, so every PromQL annotation must carry it (the
    others are Grafana's built-in ones, which query no Prometheus)."""
    docs = build_dashboards().values()
    expected = sum("expr" in a for doc in docs for a in doc.get("annotations", {}).get("list", []))
    named = [what for _, what, _ in dashboard_queries("a", "b") if what.startswith(ANNOTATION)]
    assert expected >= 2
    assert len(named) == expected, named
