"""The pure parts of the watch-scope test and benchmark (sits_operator_testing.watch_scope,
benchmarks/watch_scope.py): the unrelated objects are really unrelated, the operator's
counter is read back right, the published table says what was measured (no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.watch_scope import MODES, Row, write_results
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from sits_operator.handlers.watching import CHILD_RESOURCES, OWNED, SELECTED, matches
from sits_operator_testing.watch_scope import (
    CHILD_PLURALS,
    NODE,
    TAINT,
    Received,
    parse_received,
    unrelated_node,
    unrelated_others,
    unrelated_pod,
)


def test_the_tooling_knows_every_child_kind() -> None:
    assert set(CHILD_PLURALS) == {plural for _, _, plural in CHILD_RESOURCES}


@pytest.mark.parametrize("index", [0, 1, 4999])
def test_unrelated_pods_match_neither_selector(index: int) -> None:
    pod = unrelated_pod(index, "batch")
    labels = pod["metadata"]["labels"]
    assert not matches(SELECTED, labels)
    assert not matches(OWNED, labels)
    assert "app.kubernetes.io/managed-by" in labels  # a near miss, not an absent label
    assert pod["spec"]["nodeName"] == NODE  # bound: no scheduler work
    assert pod["metadata"]["name"] == f"unrelated-{index:05d}"


def test_unrelated_objects_of_the_other_kinds_match_no_selector() -> None:
    others = unrelated_others("batch")
    kinds = {o["kind"] for o in others}
    assert kinds == {
        "Deployment",
        "Service",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "PodDisruptionBudget",
    }
    for manifest in others:
        assert not matches(OWNED, manifest["metadata"]["labels"]), manifest["kind"]
        assert manifest["metadata"]["namespace"] == "batch"


def test_the_unrelated_node_is_kwoks_and_keeps_the_operators_pods_away() -> None:
    node = unrelated_node(pods=6000)
    assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    assert node["spec"]["taints"] == [TAINT]
    assert node["status"]["allocatable"]["pods"] == "6000"
    assert "type" not in node["metadata"]["labels"]  # not one of the GPU test nodes


def exposition(counts: dict[tuple[str, str], float], rss: float | None) -> str:
    registry = CollectorRegistry()
    counter = Counter(
        "sits_operator_watch_events_total", "x", ["resource", "selected"], registry=registry
    )
    for (resource, selected), value in counts.items():
        counter.labels(resource, selected).inc(value)
    if rss is not None:
        Gauge("process_resident_memory_bytes", "x", registry=registry).set(rss)
    return generate_latest(registry).decode()


def test_the_counter_is_read_back_by_resource_and_selection() -> None:
    text = exposition({("pods", "true"): 2, ("pods", "false"): 5000, ("services", "false"): 3}, 2e8)
    seen = parse_received(text)
    assert seen.selected["pods"] == 2
    assert seen.unrelated["pods"] == 5000
    assert seen.unrelated["services"] == 3
    assert seen.selected["roles"] == 0  # every kind present, counted or not
    assert seen.unrelated_total == 5003
    assert seen.rss_bytes == 2e8


def test_nothing_counted_reads_as_zeros() -> None:
    seen = parse_received(exposition({}, None))
    assert seen.unrelated_total == 0
    assert set(seen.selected) == set(CHILD_PLURALS)


def test_the_published_table_has_a_row_per_measurement(tmp_path: Path) -> None:
    results = tmp_path / "benchmarks.md"
    results.write_text("# Benchmarks\n\n## Other\n\nkept\n")
    seen = Received(
        dict.fromkeys(CHILD_PLURALS, 2.0),
        {**dict.fromkeys(CHILD_PLURALS, 0.0), "pods": 10000.0},
        0,
    )
    rows = [
        Row("client", "after creating 5000 pods while watching", 5000, seen, 300, 350, 40),
        Row(
            "server",
            "idle",
            0,
            Received(seen.selected, dict.fromkeys(CHILD_PLURALS, 0.0), 0),
            90,
            95,
            3,
            1.4,
        ),
    ]
    write_results(rows, 5000, 1.5, results)
    text = results.read_text()
    assert "## Other\n\nkept" in text
    assert "## Operator watch scope: 5,000 unrelated pods (issue 15)" in text
    assert "python -m benchmarks.watch_scope --pods 5000" in text
    assert (
        f"| {MODES['client']} | after creating 5000 pods while watching | 2 / 10000 | 10000 |"
        in text
    )
    assert f"| {MODES['server']} | idle | 2 / 0 | 0 | 90 MiB | 95 MiB | 3.0 s | 1.4 s |" in text
    assert "| 40.0 s |  |" in text, "no start time where the operator was not started"
    assert "1-minute load average 1.5 at the end" in text
