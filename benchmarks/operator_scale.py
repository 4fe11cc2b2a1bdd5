"""Benchmark: N SitsDeployments of 2 variants applied at once on the local cluster.

Measures the time until every one reports Ready, and the operator's peak RSS (VmHWM).
Targets (issue 2): at most 60 s and 300 MiB for N = 200. Writes a section of
docs/benchmarks.md. Run with `make bench` (not part of the test suite).

The fake cluster gets enough fake GPU capacity for N*2 pods: extra kwok nodes are added
to a dedicated namespace's node pool for the run and removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config, utils

from benchmarks.results import commit, load_average, median_interval, write_section
from sits_localcluster.build import ensure_binaries
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.nodes import GpuNodeSpec
from sits_operator.core.render import render_children
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import ObjectRef, parse_spec

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = f"sits-bench-{os.getpid()}"
BASELINE_NAMESPACE = f"sits-baseline-{os.getpid()}"
SLICES_PER_NODE = 8


def bench_node(index: int) -> dict[str, object]:
    """A kwok A100-80GB node with SLICES_PER_NODE 1g.10gb slices (mixed strategy)."""
    spec = GpuNodeSpec(
        f"bench-a100-{index}",
        "NVIDIA-A100-SXM4-80GB",
        81920,
        {"mig-1g.10gb": SLICES_PER_NODE},
        {"sits.dev/bench": "true"},
    )
    return spec.manifest()


def sitsd(index: int) -> dict[str, object]:
    variants = [
        {
            "name": name,
            "role": role,
            "image": "vllm/vllm-openai:v0.11.0",
            "model": "m",
            "revision": f"r{index}",
            "migProfile": "1g.10gb",
            "replicas": 1,
        }
        for name, role in (("v1", "stable"), ("v2", "candidate"))
    ]
    return {
        "apiVersion": "sits.dev/v1alpha1",
        "kind": "SitsDeployment",
        "metadata": {"name": f"bench-{index:03d}", "namespace": NAMESPACE},
        # Reconciling is measured here, not analysis: name a policy that does not exist, so
        # a cluster that has sits2026 installed (the demo's) gives the same numbers.
        "spec": {"variants": variants, "analysis": {"policyRef": {"name": "none-benchmark"}}},
    }


async def create_all(kubeconfig: Path, manifests: list[dict[str, object]]) -> None:
    """Create every object concurrently, as a GitOps sync of many resources does."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        custom = client.CustomObjectsApi(api)
        limit = asyncio.Semaphore(20)

        async def create(manifest: dict[str, object]) -> None:
            async with limit:
                await custom.create_namespaced_custom_object(
                    "sits.dev", "v1alpha1", NAMESPACE, "sitsdeployments", manifest
                )

        await asyncio.gather(*(create(m) for m in manifests))


def add_capacity(cluster: LocalCluster, count: int) -> None:
    nodes = (count * 2 + SLICES_PER_NODE - 1) // SLICES_PER_NODE
    for i in range(nodes):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(bench_node(i)))


def baseline_children(count: int) -> list[dict[str, Any]]:
    """The objects the operator would create, without owner references (no operator)."""
    children = []
    for i in range(count):
        raw = sitsd(i)
        owner = ObjectRef(name=f"bench-{i:03d}", namespace=BASELINE_NAMESPACE, uid="baseline")
        spec = parse_spec(dict(raw["spec"]))  # type: ignore[call-overload]
        for manifest in render_children(owner, spec, OperatorSettings()):
            manifest["metadata"].pop("ownerReferences")
            children.append(manifest)
    return children


async def create_children(kubeconfig: Path, manifests: list[dict[str, Any]]) -> None:
    """Create every manifest, whatever its kind (the rendering grows: the gateway brought a
    ServiceAccount, a Role, a RoleBinding and a PodDisruptionBudget), 20 at a time."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        limit = asyncio.Semaphore(20)

        async def create(manifest: dict[str, Any]) -> None:
            async with limit:
                await utils.create_from_dict(api, manifest, namespace=BASELINE_NAMESPACE)

        await asyncio.gather(*(create(m) for m in manifests))


def count_available(cluster: LocalCluster) -> int:
    """Deployments with every replica available (the gateway's have two)."""
    path = "{range .items[*]}{.spec.replicas} {.status.availableReplicas}{'\\n'}{end}"
    out = cluster.kubectl(
        "get", "deployments", "-n", BASELINE_NAMESPACE, "-o", f"jsonpath={path}"
    ).stdout
    rows = [line.split() for line in out.splitlines()]
    return sum(len(row) == 2 and int(row[1]) >= int(row[0]) for row in rows)


@dataclass(frozen=True)
class Baseline:
    """The control-plane floor: the same children, created without the operator."""

    seconds: float
    kinds: dict[str, int]


def run_baseline(count: int, timeout: float) -> Baseline:
    """Seconds until the same Deployments are available with no operator at all: the floor
    the control plane itself sets on this machine."""
    cluster = LocalCluster(progress=print)
    cluster.up()
    cluster.kubectl(
        "wait", "--for=delete", f"namespace/{BASELINE_NAMESPACE}", "--timeout=300s", check=False
    )
    add_capacity(cluster, count)
    cluster.kubectl("create", "namespace", BASELINE_NAMESPACE, check=False)
    children = baseline_children(count)
    kinds = dict(Counter(str(m["kind"]) for m in children))
    deployments = kinds.get("Deployment", 0)
    try:
        start = time.monotonic()
        asyncio.run(create_children(cluster.kubeconfig, children))
        available = 0
        while available < deployments and time.monotonic() - start < timeout:
            time.sleep(1)
            available = count_available(cluster)
            print(f"  {time.monotonic() - start:5.1f} s: {available}/{deployments} available")
        return Baseline(time.monotonic() - start, kinds)
    finally:
        cluster.kubectl("delete", "namespace", BASELINE_NAMESPACE, "--wait=false", check=False)
        cluster.kubectl("delete", "nodes", "-l", "sits.dev/bench=true", "--wait=false", check=False)


def kubectl_json(cluster: LocalCluster, *args: str) -> dict[str, object]:
    return dict(json.loads(cluster.kubectl(*args, "-o", "json").stdout))


def _status_mib(pid: int, field: str) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"{field}:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else float("nan")


def peak_rss_mib(pid: int) -> float:
    """The process's high-water mark (VmHWM)."""
    return _status_mib(pid, "VmHWM")


def current_rss_mib(pid: int) -> float:
    """The process's resident set now (VmRSS)."""
    return _status_mib(pid, "VmRSS")


def count_ready(cluster: LocalCluster) -> int:
    """Ready=True conditions, read with a jsonpath so polling stays cheap."""
    path = '{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}'
    out = cluster.kubectl("get", "sitsd", "-n", NAMESPACE, "-o", f"jsonpath={path}").stdout
    return sum(line.strip() == "True" for line in out.splitlines())


def cluster_with_crds() -> LocalCluster:
    """The local cluster up, serving this checkout's CRDs (benchmarks/watch_scope.py too)."""
    ensure_binaries(progress=print)
    cluster = LocalCluster(progress=print)
    cluster.up()
    crds = str(REPO / "crds")
    cluster.kubectl("apply", "--server-side", "--field-manager=sits-bench", "-f", crds)
    cluster.kubectl("wait", "--for=condition=Established", "crd/sitsdeployments.sits.dev")
    return cluster


def run(count: int, timeout: float) -> dict[str, float]:
    cluster = cluster_with_crds()
    # A previous run's namespace may still be terminating: creating into it would fail.
    cluster.kubectl("wait", "--for=delete", f"namespace/{NAMESPACE}", "--timeout=300s", check=False)
    cluster.kubectl("wait", "--for=delete", "nodes", "-l", "sits.dev/bench=true", check=False)
    add_capacity(cluster, count)
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    log = open(cluster.state_dir / "logs" / "bench-operator.log", "wb")  # noqa: SIM115
    operator = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sits_operator",
            "--metrics-address",
            "",
            "--alert-webhook-address",
            "",
            "--namespace",
            NAMESPACE,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        time.sleep(3)
        start = time.monotonic()
        asyncio.run(create_all(cluster.kubeconfig, [sitsd(i) for i in range(count)]))
        applied = time.monotonic() - start
        ready = 0
        while ready < count and time.monotonic() - start < timeout:
            time.sleep(1)
            ready = count_ready(cluster)
            print(f"  {time.monotonic() - start:5.1f} s: {ready}/{count} Ready", flush=True)
        elapsed = time.monotonic() - start
        rss = peak_rss_mib(operator.pid)
    finally:
        # Delete while the operator runs: it removes its finalizers from what it owns.
        cluster.kubectl("delete", "sitsd", "--all", "-n", NAMESPACE, "--timeout=120s", check=False)
        operator.terminate()
        operator.wait(timeout=30)
        log.close()
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
        cluster.kubectl("delete", "nodes", "-l", "sits.dev/bench=true", "--wait=false", check=False)
    return {
        "load_average": os.getloadavg()[0],
        "count": count,
        "ready": ready,
        "seconds": elapsed,
        "apply_seconds": applied,
        "peak_rss_mib": rss,
    }


def write_results(results: list[dict[str, float]], baseline: Baseline | None, load: str) -> None:
    def spread(key: str, unit: str, digits: int = 1) -> str:
        values = [r[key] for r in results]
        interval = median_interval(values)
        around = f" ({interval[0]:.{digits}f} to {interval[1]:.{digits}f})" if interval else ""
        return f"{statistics.median(values):.{digits}f}{unit}{around}"

    count = results[0]["count"]
    section = (
        "## Operator scale: 200 SitsDeployments of 2 variants applied at once\n\n"
        "Command: `make bench` (`python -m benchmarks.operator_scale --count 200`), on the local\n"
        "cluster (real kube-apiserver, scheduler, controller-manager, kwok nodes), 2 cores.\n"
        f"Commit `{commit()}`; load average (1 / 5 / 15 min) {load} at the start,"
        f" {load_average()} at the end. {len(results)} runs in turn, each a fresh operator"
        " process and namespace; medians with the 95 % interval of the median in brackets.\n\n"
        "| SitsDeployments | runs | all Ready in | time to all Ready | creation (20 at a time)"
        " | peak RSS | target |\n|---|---|---|---|---|---|---|\n"
        f"| {count:.0f} | {len(results)} | {sum(r['ready'] == count for r in results)} of"
        f" {len(results)} | {spread('seconds', ' s')} | {spread('apply_seconds', ' s')} |"
        f" {spread('peak_rss_mib', ' MiB', 0)}, max {max(r['peak_rss_mib'] for r in results):.0f}"
        " MiB | <= 60 s, <= 300 MiB |\n\n"
        "Runs (time to all Ready): "
        + ", ".join(f"{r['seconds']:.1f} s" for r in results)
        + ". The control plane, kwok and the operator share the 2 cores.\n"
    )
    if baseline is not None:
        objects = ", ".join(f"{n} {kind}s" for kind, n in sorted(baseline.kinds.items()))
        section += (
            f"\nControl-plane floor (`--baseline`, one run): the same objects ({objects})"
            " created directly, no operator: every Deployment available after"
            f" {baseline.seconds:.1f} s. The operator's own share is the difference.\n"
        )
    write_section(section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument(
        "--runs", type=int, default=6, help="repetitions (6: the fewest with a 95 %% interval)"
    )
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="also time the same children created without the operator",
    )
    args = parser.parse_args()
    load = load_average()
    baseline = run_baseline(args.count, args.timeout) if args.baseline else None
    results = []
    for index in range(args.runs):
        if baseline is not None or index:
            time.sleep(20)  # let the previous run's pods go before the next
        print(f"run {index + 1}/{args.runs}", flush=True)
        results.append(run(args.count, args.timeout))
    write_results(results, baseline, load)


if __name__ == "__main__":
    main()
