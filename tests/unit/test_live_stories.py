"""The live stories' policy is SITS2026 with shorter periods and the CPU's latency ceiling,
and nothing else changed; the broken story is broken by its artifact only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sits_live import stack, stories
from sits_live.monitoring import LiveMonitoring
from sits_localcluster.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[2]
URL = "http://prometheus-live.sits-monitoring.svc:9090"


def _sits2026() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO / "policies" / "sits2026.yaml").read_text())
    return loaded


def test_live_policy_keeps_sits2026_rules_and_actions() -> None:
    live, base = stories.live_policy(URL), _sits2026()
    assert live["metadata"]["name"] == stories.POLICY_NAME
    assert live["spec"]["interval"] == "5s"
    assert live["spec"]["prometheus"] == {"url": URL}, "the scenario's Prometheus, by the policy"
    for mine, theirs in zip(live["spec"]["rules"], base["spec"]["rules"], strict=True):
        assert mine["window"] == stories.WINDOW
        changed = {k for k in theirs if mine.get(k) != theirs[k]}
        if theirs["sli"] == "latency_p95_ms":
            assert changed == {"window", "threshold"}
            assert mine["threshold"] == stories.LATENCY_CEILING_MS
        else:
            assert changed == {"window"}
    assert base["spec"]["interval"] != "5s", "the base policy itself must stay untouched"


def test_broken_differs_from_healthy_only_in_the_candidates_adapter_and_revision() -> None:
    healthy = stories.healthy("x")["spec"]
    broken = stories.broken("x")["spec"]
    assert healthy["variants"][0] == broken["variants"][0]
    good, bad = healthy["variants"][1], broken["variants"][1]
    assert {k for k in good if good[k] != bad[k]} == {"revision", "lora"}
    (adapter,) = bad["lora"]["adapters"]
    assert adapter["source"] == f"pvc://{stack.CLAIM}/broken/{stack.ADAPTER}"
    assert healthy["traffic"] == {
        "router": "builtin",
        "gateway": {"replicas": 2, "pod": stack.ON_REAL_NODE},
    }


def test_truncated_adapter_keeps_its_config_and_halves_its_weights(tmp_path: Path) -> None:
    source = tmp_path / "a"
    source.mkdir()
    (source / "adapter_config.json").write_text('{"r": 8}')
    (source / "adapter_model.safetensors").write_bytes(b"x" * 1000)
    out = stack.truncated_copy(source, tmp_path / "b")
    assert (out / "adapter_config.json").read_text() == '{"r": 8}'
    assert (out / "adapter_model.safetensors").stat().st_size == 500
    assert (source / "adapter_model.safetensors").stat().st_size == 1000


def test_prometheus_is_published_as_a_selectorless_service_on_the_node_ip(tmp_path: Path) -> None:
    monitoring = LiveMonitoring(LocalCluster(tmp_path), namespaces=("ns",), port=19999)
    ns, service, endpoints = monitoring.manifests()["items"]
    assert "selector" not in service["spec"]
    assert service["spec"]["ports"][0]["targetPort"] == 19999
    assert endpoints["endpoints"][0]["addresses"] == ["10.244.1.1"]
    assert (
        endpoints["metadata"]["labels"]["kubernetes.io/service-name"] == service["metadata"]["name"]
    )
    assert monitoring.in_cluster_url == (
        f"http://{service['metadata']['name']}.{ns['metadata']['name']}.svc:9090"
    )
