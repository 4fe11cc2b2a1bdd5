"""`make demo --kwok` story: the local cluster, the CRDs, the operator, Prometheus, and two
rollouts on fake GPU nodes (``python e2e/demo.py --kwok``; the live demo is sits_live.demo).

Idempotent: a second run reuses the running cluster and background processes. `--down`
stops everything it started. The demo applies the examples (placed on fake MIG nodes),
then runs two canaries judged by SITS2026's rules on short windows, fed by a synthetic
source of the gateway's metrics: a healthy candidate is promoted step by step, and a
candidate with 10 % errors is rolled back after two failing periods.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from sits_live.monitoring import Background as _Background
from sits_localcluster.build import ensure_binaries
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.helm import (
    apply_chart_parts,
    service_account_kubeconfig,
    service_account_of,
)
from sits_localcluster.nodes import GpuNodeSpec

# A second H200 in the all-1g.18gb MIG layout: room for the demo's two canaries.
DEMO_NODE = GpuNodeSpec(
    "gpu-h200-1",
    "NVIDIA-H200",
    143771,
    {"mig-1g.18gb": 7},
    {"nvidia.com/mig.config": "all-1g.18gb"},
)

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = ("chat-canary.yaml", "h200-ab-test.yaml", "lora-adapters.yaml")
PROMETHEUS_PORT, SYNTHETIC_PORT, OPERATOR_METRICS = 19090, 19100, 19464
DEMO_NS = "sits-demo"
CHART = REPO / "charts" / "sits-operator"
OPERATOR_NS = "sits-system"
# What the operator's chart would install besides its Deployment: kwok runs no
# containers, so the operator runs here as a process, with the chart's credentials.
CHART_PARTS = ("serviceaccount.yaml", "rbac.yaml", "policy.yaml")


def Background(cluster: LocalCluster, name: str) -> _Background:  # noqa: N802 - reads as the class
    """A background process of this story, kept in the cluster's state directory."""
    return _Background(cluster.state_dir, name)


def say(message: str) -> None:
    print(f"\n==> {message}", flush=True)


def wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"{url} did not answer within {timeout:.0f} s")


def start_metrics_stack(cluster: LocalCluster) -> None:
    """The synthetic gateway-metrics source and a real Prometheus scraping it."""
    Background(cluster, "sits-synthetic").start(
        [sys.executable, "-m", "sits_localcluster.synthetic", "--port", str(SYNTHETIC_PORT)]
    )
    config = cluster.state_dir / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: sits\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{SYNTHETIC_PORT}']}}]\n"
    )
    Background(cluster, "prometheus").start(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={cluster.state_dir / 'prometheus'}",
            f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}",
        ]
    )
    wait_http(f"http://127.0.0.1:{PROMETHEUS_PORT}/-/ready")
    wait_http(f"http://127.0.0.1:{SYNTHETIC_PORT}/metrics")


def set_traffic(deployment: str, variant: str, rps: float, error_ratio: float) -> None:
    body = json.dumps(
        {
            "namespace": DEMO_NS,
            "deployment": deployment,
            "variant": variant,
            "rps": rps,
            "error_ratio": error_ratio,
            "latency_ms": 80,
        }
    ).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{SYNTHETIC_PORT}/profile", data=body, method="POST"
    )
    urllib.request.urlopen(request, timeout=5).close()


def adapter_volume() -> list[dict[str, Any]]:
    """The claim the lora-adapters example reads its adapters from (pvc://sits-adapters/...).

    A statically provisioned, pre-bound PersistentVolume: the embedded cluster has no storage
    provisioner, and the fake nodes never mount it, but the scheduler and the PV binder
    treat it exactly as they would a real one.
    """
    claim = "sits-adapters"
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "sits-demo-adapters"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "",
            "hostPath": {"path": "/var/lib/sits-demo/adapters"},
            "claimRef": {"namespace": "default", "name": claim},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": "default"},
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "",
            "volumeName": "sits-demo-adapters",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    return [volume, pvc]


def demo_policy() -> dict[str, Any]:
    """SITS2026's rules, thresholds and actions, on 5 s periods and 15 s windows, querying
    the demo's Prometheus."""
    policy = yaml.safe_load((REPO / "policies" / "sits2026.yaml").read_text())
    policy["metadata"] = {"name": "sits2026-demo"}
    policy["spec"].update(
        {
            "interval": "5s",
            "minRequests": 10,
            "promotion": {"consecutivePasses": 2},
            "prometheus": {"url": f"http://127.0.0.1:{PROMETHEUS_PORT}"},
        }
    )
    for rule in policy["spec"]["rules"]:
        rule["window"] = "15s"
    return dict(policy)


def demo_rollout(name: str) -> dict[str, Any]:
    manifest = yaml.safe_load((REPO / "examples" / "chat-canary.yaml").read_text())
    manifest = copy.deepcopy(manifest)
    manifest["metadata"] = {"name": name}
    manifest["spec"]["traffic"].pop("initialWeights", None)
    for variant in manifest["spec"]["variants"]:
        variant.pop("gpuProduct", None)
        variant["migProfile"] = "1g.18gb"
        variant["modelMemory"] = "4Gi"
    manifest["spec"]["rollout"] = {"strategy": "canary", "stepWeight": 20, "maxWeight": 60}
    manifest["spec"]["analysis"] = {"policyRef": {"name": "sits2026-demo"}}
    return dict(manifest)


def phases(cluster: LocalCluster, namespace: str) -> dict[str, tuple[str, int]]:
    items = json.loads(cluster.kubectl("get", "sitsd", "-n", namespace, "-o", "json").stdout)
    return {
        i["metadata"]["name"]: (
            (i.get("status") or {}).get("phase", "-"),
            (i.get("status") or {}).get("candidateWeight", 0),
        )
        for i in items["items"]
    }


def follow(cluster: LocalCluster, namespace: str, done: set[str], timeout: float = 240) -> None:
    """Print each change of phase or weight until every resource is in `done`."""
    deadline, last = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        state = phases(cluster, namespace)
        line = "  ".join(f"{n}: {p} (candidate {w}%)" for n, (p, w) in sorted(state.items()))
        if line != last:
            print(f"  [{time.strftime('%H:%M:%S')}] {line}", flush=True)
            last = line
        if state and all(p in done for p, _ in state.values()):
            return
        time.sleep(1)
    raise SystemExit(f"rollouts did not finish within {timeout:.0f} s: {last}")


def install(cluster: LocalCluster) -> Path:
    """The CRDs, then the chart's ServiceAccount, least-privilege RBAC and SITS2026 policy
    (`helm template | kubectl apply`); returns a kubeconfig of that ServiceAccount, so the
    demo's operator holds exactly what the chart grants it in a cluster."""
    kubectl = cluster.kubectl
    kubectl("apply", "--server-side", "--field-manager=sits-demo", "-f", str(REPO / "crds"))
    kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/sitsdeployments.sits.dev",
        "crd/sitspolicies.sits.dev",
    )
    time.sleep(1)  # let kubectl's discovery see the new kinds
    docs = apply_chart_parts(
        cluster, CHART, "sits-operator", OPERATOR_NS, CHART_PARTS, field_manager="sits-demo"
    )
    kubectl("apply", "-f", "-", input=json.dumps(demo_policy()))
    path = Path(cluster.state_dir) / "kubeconfig-sits-operator"
    return service_account_kubeconfig(cluster, OPERATOR_NS, service_account_of(docs), path)


def forget_previous_run(cluster: LocalCluster) -> None:
    """Delete what an earlier `make demo` left on a kept cluster, so that this run shows
    rollouts happening, not their finished state (the operator is running: it releases its
    finalizers and the garbage collector takes the children)."""
    kubectl = cluster.kubectl
    left = kubectl("get", "sitsd", "-A", "-o", "name", check=False).stdout.split()
    if not left:
        return
    say(f"removing {len(left)} SitsDeployments left by an earlier demo run")
    for namespace in ("default", DEMO_NS):
        kubectl(
            "delete",
            "sitsd",
            "--all",
            "-n",
            namespace,
            "--wait=true",
            "--timeout=60s",
            check=False,
        )


def demo() -> None:
    started = time.monotonic()
    say("building (once) and starting the local control plane on 127.0.0.1")
    ensure_binaries(progress=print)
    # The demo's rollouts are judged on kwok's fake GPU nodes; the real node (sits-node-0,
    # real vLLM pods) is what the tests exercise until the demo runs live on it.
    cluster = LocalCluster(progress=print, node=False)
    cluster.up()
    kubectl = cluster.kubectl
    say(
        "installing the SITS CRDs, the chart's RBAC and SITS2026 policy, and a fast demo "
        "copy of the policy"
    )
    operator_kubeconfig = install(cluster)
    say("starting Prometheus (real) and a synthetic source of the gateway's metrics")
    start_metrics_stack(cluster)
    say(f"running the operator as the chart's ServiceAccount ({OPERATOR_NS}/sits-operator)")
    Background(cluster, "sits-operator").start(
        [
            sys.executable,
            "-m",
            "sits_operator",
            "--metrics-address",
            f"127.0.0.1:{OPERATOR_METRICS}",
        ],
        env={**os.environ, "KUBECONFIG": str(operator_kubeconfig)},
    )
    forget_previous_run(cluster)
    say("applying the examples (vLLM + sidecar pods placed on fake MIG nodes)")
    for manifest in adapter_volume():
        kubectl("apply", "-f", "-", input=json.dumps(manifest))
    for name in EXAMPLES:
        print(kubectl("apply", "-n", "default", "-f", str(REPO / "examples" / name)).stdout.strip())
    follow(cluster, "default", {"Ready", "Progressing"}, timeout=120)
    print(kubectl("get", "pods", "-n", "default", "-o", "wide").stdout)
    say(
        "two canaries on the H200 node, judged by SITS2026 on 5 s periods:\n"
        "    'healthy' v2 serves 100 % successes, 'flaky' v2 fails 10 % of requests"
    )
    kubectl("create", "namespace", DEMO_NS, check=False)
    kubectl("apply", "-f", "-", input=json.dumps(DEMO_NODE.manifest()))
    for name, errors in (("healthy", 0.0), ("flaky", 0.10)):
        set_traffic(name, "v1", 40, 0.0)
        set_traffic(name, "v2", 40, errors)
        kubectl("apply", "-n", DEMO_NS, "-f", "-", input=json.dumps(demo_rollout(name)))
    follow(cluster, DEMO_NS, {"Succeeded", "RolledBack"})
    say("kubectl get sitsd -A")
    print(kubectl("get", "sitsd", "-A").stdout)
    say("kubectl describe sitsd flaky -n sits-demo   (events)")
    print(kubectl("describe", "sitsd", "flaky", "-n", DEMO_NS).stdout.split("Events:")[-1])
    say(f"done in {time.monotonic() - started:.0f} s. Try:")
    print(f"  export KUBECONFIG={cluster.kubeconfig}")
    print("  kubectl get sitsd -A -w")
    print(f"  kubectl annotate sitsd flaky -n {DEMO_NS} sits.dev/retry=1   # start over")
    print(
        f"  Prometheus: http://127.0.0.1:{PROMETHEUS_PORT}  operator metrics: "
        f"http://127.0.0.1:{OPERATOR_METRICS}/metrics"
    )
    print("  make down                            # stop everything")


def stop_background() -> None:
    """Stop the processes this story started (the cluster itself is stopped by the caller)."""
    cluster = LocalCluster(progress=print)
    for name in ("sits-operator", "prometheus", "sits-synthetic"):
        Background(cluster, name).stop()
