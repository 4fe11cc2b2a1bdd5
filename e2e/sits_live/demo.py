"""`make demo`, live: two canaries on the real node, judged by SITS2026 on real traffic.

1. the local cluster with its real node (``sits-node-0``), the images imported;
2. the CRDs, the operator from its Helm chart (in the cluster, from its local image), the
   live copy of SITS2026 (``sits_live.stories``);
3. Prometheus, finding the pods through the apiserver; the model volume;
4. ``healthy`` and ``broken`` SitsDeployments (vLLM CPU pods with the cache sidecar, two
   gateway pods each, deployed by the operator), then session-flow traffic through each
   root Service while the live view prints weights, success rate and p95 per variant
   and the operator's events as they happen;
5. the ``kubectl get sitsd`` table, the events, and a PNG and JSON timeline per rollout.

A second run on the kept cluster reuses the Ready pods and restarts the analysis with
the ``sits.dev/retry`` annotation (as a user would), so it shows the rollouts again
without waiting for vLLM to start.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sits_localcluster.build import ensure_binaries
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.node import NODE_NAME

from . import stack, stories
from .monitoring import LiveMonitoring
from .scenario import Traffic, cluster_story, run_stories, save

NAMESPACE = "sits-demo"
OPERATOR_NS = "sits-system"
REPO = Path(__file__).resolve().parents[2]
#: The demo's own annotation: which spec made the object (kept objects must match).
SPEC_HASH = "demo.sits.dev/spec-hash"
ENDS = {"healthy": {"Succeeded"}, "broken": {"RolledBack"}}
ROLLOUT_TIMEOUT_S = 300.0
PODS_TIMEOUT_S = 600.0


def say(message: str) -> None:
    print(f"\n==> {message}", flush=True)


def install(cluster: LocalCluster) -> None:
    kubectl = cluster.kubectl
    kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=sits-demo",
        "-f",
        str(REPO / "crds"),
    )
    kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/sitsdeployments.sits.dev",
        "crd/sitspolicies.sits.dev",
    )
    kubectl("create", "namespace", NAMESPACE, check=False)
    stack.OperatorInstall(cluster, OPERATOR_NS, (NAMESPACE,)).install()


def _ready(cluster: LocalCluster, name: str) -> tuple[int, int]:
    """Ready pods on the real node, and all pods (a kwok node's pods only pretend)."""
    pods = stack.variant_pods(cluster, NAMESPACE, name)
    real = [p for p in pods if p["spec"].get("nodeName") == NODE_NAME]
    return sum(stack.pod_ready(p) for p in real), len(pods)


def wait_pods(cluster: LocalCluster, names: tuple[str, ...], expected: int) -> float:
    """Wait until every SitsDeployment has ``expected`` Ready pods; print progress."""
    start, last = time.monotonic(), ""
    while True:
        counts = {n: _ready(cluster, n) for n in names}
        line = "  ".join(f"{n}: {r}/{max(t, expected)} pods Ready" for n, (r, t) in counts.items())
        if line != last:
            print(f"  [{time.monotonic() - start:5.0f} s] {line}", flush=True)
            last = line
        if all(r >= expected for r, _ in counts.values()):
            return time.monotonic() - start
        if time.monotonic() - start > PODS_TIMEOUT_S:
            raise SystemExit(f"pods not Ready within {PODS_TIMEOUT_S:.0f} s: {line}")
        time.sleep(2)


def _spec_hash(manifest: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(manifest["spec"], sort_keys=True).encode()).hexdigest()[:16]


def apply_or_retry(cluster: LocalCluster, manifests: dict[str, dict[str, Any]]) -> None:
    """Create the SitsDeployments. One left by an earlier live run with the same spec keeps
    its Ready pods and gets ``sits.dev/retry`` (its analysis starts over from the first
    step); anything else in the namespace (the --kwok story's objects, an older spec) is
    deleted first, so the story starts from a known state."""
    existing = stack.get(cluster, "sitsd", "-n", NAMESPACE)["items"]
    for obj in existing:
        name = obj["metadata"]["name"]
        same = name in manifests and (obj["metadata"].get("annotations") or {}).get(
            SPEC_HASH
        ) == _spec_hash(manifests[name])
        if same:
            cluster.kubectl(
                "annotate",
                "sitsd",
                name,
                "-n",
                NAMESPACE,
                "--overwrite",
                f"sits.dev/retry={int(time.time())}",
            )
        else:
            cluster.kubectl(
                "delete", "sitsd", name, "-n", NAMESPACE, "--wait=true", "--timeout=120s"
            )
    for manifest in manifests.values():
        annotated = copy.deepcopy(manifest)
        annotated["metadata"].setdefault("annotations", {})[SPEC_HASH] = _spec_hash(manifest)
        cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(annotated))


def root_url(cluster: LocalCluster, name: str) -> str:
    service = stack.get(cluster, "service", name, "-n", NAMESPACE)
    return f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}/v1"


def run_demo_stories(cluster: LocalCluster, monitoring: LiveMonitoring, out: Path) -> list[Path]:
    """Both rollouts under load at once, shown live; their timelines saved as JSON + PNG."""
    stories_ = [
        cluster_story(
            cluster,
            monitoring.query,
            NAMESPACE,
            name,
            ends=frozenset(ends),
            traffic=Traffic(root_url(cluster, name), stories.RATES, ROLLOUT_TIMEOUT_S, seed=i),
            window=stories.WINDOW,
            thresholds=stories.THRESHOLDS,
            out=print,
        )
        for i, (name, ends) in enumerate(ENDS.items())
    ]
    results = run_stories(stories_, timeout_s=ROLLOUT_TIMEOUT_S)
    paths: list[Path] = []
    for result in results:
        paths += save(result.timeline, result.load, out)
    missing = [r.timeline.name for r in results if not r.finished]
    if missing:
        raise SystemExit(f"rollouts not finished within {ROLLOUT_TIMEOUT_S:.0f} s: {missing}")
    return paths


def demo(progress: Callable[[str], object] = print) -> None:
    started = time.monotonic()
    say("building (once) and starting the local cluster with its real node")
    ensure_binaries(progress=progress)
    cluster = LocalCluster(progress=progress, node=True)
    cluster.up(persist=True)
    say("images for the real node (built once, cached in ~/.cache/sits/images)")
    cluster.ensure_images(stack.IMAGES)
    say("CRDs, the operator from its Helm chart")
    install(cluster)
    say("Prometheus (kubernetes_sd on the apiserver), the live copy of SITS2026, the model volume")
    monitoring = LiveMonitoring(cluster, (NAMESPACE,))
    monitoring.start(progress)
    live_policy = stories.live_policy(monitoring.in_cluster_url)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(live_policy))
    stack.ModelVolume(cluster, NAMESPACE).create()
    manifests = {
        "healthy": stories.healthy("healthy"),
        "broken": stories.broken("broken"),
    }
    apply_or_retry(cluster, manifests)
    say("waiting for the vLLM, sidecar and gateway pods (minutes on a first run)")
    took = wait_pods(cluster, tuple(manifests), expected=4)
    print(f"  all pods Ready after {took:.0f} s")
    say("real traffic through each root Service (the gateway); live view:")
    out = cluster.state_dir / "demo"
    paths = run_demo_stories(cluster, monitoring, out)
    say("kubectl get sitsd -n sits-demo")
    print(cluster.kubectl("get", "sitsd", "-n", NAMESPACE).stdout)
    say("kubectl describe sitsd broken -n sits-demo   (events)")
    print(
        cluster.kubectl("describe", "sitsd", "broken", "-n", NAMESPACE).stdout.split("Events:")[-1]
    )
    say(f"done in {time.monotonic() - started:.0f} s. Timelines (JSON) and plots (PNG):")
    for path in paths:
        print(f"  {path}")
    print(f"  export KUBECONFIG={cluster.kubeconfig}")
    print(f"  kubectl get sitsd -n {NAMESPACE} -w")
    print(f"  Prometheus: {monitoring.url}")
    print("  make down                            # stop everything")


def down() -> None:
    cluster = LocalCluster(progress=print, node=True)
    if cluster.is_running():
        LiveMonitoring(cluster, (NAMESPACE,)).stop()
    cluster.down()
