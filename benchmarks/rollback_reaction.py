"""Benchmark: rollback reaction time of the analysis loop, on the real stack.

From the first Prometheus scrape in which the breach is visible (the SLI query, evaluated
at each scrape timestamp, first crosses the threshold) to the moment the rollback's
weights are in the SitsDeployment's status, over N runs. The rule is SITS2026's
success-rate rule (< 0.95 for 2 consecutive periods), on a 2 s evaluation period.
Target (issue 3, as asked): one interval plus 2 s, 4 s here. The rule's second failing
period lies within that interval; an earlier docstring added one more period (6 s).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.results import commit, load_average, median_interval, write_section
from sits_localcluster.build import ensure_binaries
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.prometheus import LocalPrometheus
from sits_localcluster.synthetic import Profile, SyntheticServer
from sits_operator_testing.manifests import deployment, fast_policy
from sits_operator_testing.process import OperatorProcess

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "sits-bench-reaction"
INTERVAL = 2.0
HEALTHY = Profile(rps=50, error_ratio=0.0, latency_ms=60)
BROKEN = Profile(rps=50, error_ratio=0.5, latency_ms=60)
SLI = (  # the gateway's series (the synthetic source publishes the sidecars' too)
    'sum by (variant) (rate(sits_requests_total{{namespace="{ns}",sits_deployment="chat",'
    'source="gateway",variant="v2",outcome="success"}}[10s])) / sum by (variant) (rate('
    'sits_requests_total{{namespace="{ns}",sits_deployment="chat",source="gateway",'
    'variant="v2"}}[10s]))'
)


def status(cluster: LocalCluster) -> dict[str, Any]:
    out = cluster.kubectl("get", "sitsd", "chat", "-n", NAMESPACE, "-o", "json").stdout
    return dict(json.loads(out).get("status") or {})


def wait(cluster: LocalCluster, what: str, check: Any, timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check(status(cluster)):
            return time.time()
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def first_visible(prom: LocalPrometheus, since: float, until: float) -> float:
    """Timestamp of the first scrape at which the SLI is below 0.95."""
    query = urllib.parse.urlencode(
        {"query": SLI.format(ns=NAMESPACE), "start": since - 1, "end": until, "step": "1s"}
    )
    with urllib.request.urlopen(f"{prom.url}/api/v1/query_range?{query}", timeout=10) as resp:
        result = json.load(resp)["data"]["result"]
    for ts, value in result[0]["values"]:
        if float(value) < 0.95 and float(ts) >= since:
            return float(ts)
    raise SystemExit("breach never visible in Prometheus")


def one_run(cluster: LocalCluster, traffic: SyntheticServer, prom: LocalPrometheus) -> float:
    traffic.traffic.set(NAMESPACE, "chat", "v2", BROKEN)
    switched = time.time()
    rolled = wait(cluster, "rollback", lambda s: s.get("phase") == "RolledBack")
    visible = first_visible(prom, switched, rolled)
    traffic.traffic.set(NAMESPACE, "chat", "v2", HEALTHY)
    time.sleep(11)  # let the 10 s window forget the errors
    cluster.kubectl(
        "annotate", "sitsd", "chat", "-n", NAMESPACE, "--overwrite", f"sits.dev/retry={time.time()}"
    )
    wait(
        cluster,
        "restart",
        lambda s: s.get("phase") == "Progressing" and s.get("candidateWeight", 0) > 0,
    )
    time.sleep(INTERVAL)
    return rolled - visible


def run(runs: int) -> list[float]:
    ensure_binaries(progress=print)
    cluster = LocalCluster(progress=print)
    cluster.up()
    cluster.kubectl(
        "apply", "--server-side", "--field-manager=sits-bench", "-f", str(REPO / "crds")
    )
    workdir = Path(tempfile.mkdtemp(prefix="sits-reaction-"))
    traffic = SyntheticServer().start()
    prom = LocalPrometheus(workdir / "prom", [traffic.address]).start()
    operator = OperatorProcess(cluster.kubeconfig, workdir)
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    policy = fast_policy(
        "bench-reaction",
        prom.url,
        interval=f"{INTERVAL:.0f}s",
        promotion={"consecutivePasses": 1000},
    )
    cluster.kubectl("apply", "-f", "-", input=json.dumps(policy))
    traffic.traffic.set(NAMESPACE, "chat", "v1", HEALTHY)
    traffic.traffic.set(NAMESPACE, "chat", "v2", HEALTHY)
    operator.start()
    samples: list[float] = []
    try:
        manifest = deployment("chat", "bench-reaction", stepWeight=10, maxWeight=50)
        cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(manifest))
        wait(cluster, "analysis", lambda s: s.get("candidateWeight", 0) > 0, timeout=90)
        time.sleep(11)
        for i in range(runs):
            samples.append(one_run(cluster, traffic, prom))
            print(f"  run {i + 1}/{runs}: {samples[-1]:.2f} s", flush=True)
    finally:
        operator.stop()
        prom.stop()
        traffic.stop()
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
        cluster.kubectl("delete", "sitspolicy", "bench-reaction", check=False)
    return samples


def write_results(samples: list[float], load_start: str) -> None:
    ordered = sorted(samples)
    interval = median_interval(samples)
    spread = f"{interval[0]:.2f} to {interval[1]:.2f} s" if interval else "too few runs"
    target = INTERVAL + 2
    worst = max(samples)
    verdict = "met" if worst <= target else f"missed by {worst - target:.2f} s at the worst"
    section = (
        "## Rollback reaction time (SITS2026 success-rate rule)\n\n"
        "Command: `make bench` (`python -m benchmarks.rollback_reaction --runs 20`): real\n"
        "Prometheus (1 s scrapes) over the synthetic gateway metrics, real operator and\n"
        f"apiserver, {INTERVAL:.0f} s evaluation period, 10 s windows, rule `success_rate_5m <"
        " 0.95 for 2 periods`.\nMeasured from the first scrape in which the breach is visible"
        " (a `query_range` point, 1 s resolution) to the rollback's weights in status; the"
        " live benchmark below measures from the first failed request to the gateway instead."
        f"\nCommit `{commit()}`; load average (1 / 5 / 15 min) {load_start} at the start,"
        f" {load_average()} at the end; {len(samples)} runs, one rollout rolled back and"
        " retried in turn.\n\n"
        "| runs | median | 95 % interval of the median | p90 | max | target |\n"
        "|---|---|---|---|---|---|\n"
        f"| {len(samples)} | {statistics.median(samples):.2f} s | {spread} |"
        f" {ordered[int(0.9 * (len(ordered) - 1))]:.2f} s | {worst:.2f} s |"
        f" <= {target:.0f} s (1 period + 2 s): {verdict} |\n\n"
        "The rule needs two failing periods, so the reaction includes up to one period"
        " beyond the first failing one by design; the target (issue 3) is one period plus"
        " 2 s over the breach becoming visible (an earlier version of this section judged"
        " against 2 periods + 2 s).\n"
    )
    write_section(section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    load_start = load_average()
    write_results(run(parser.parse_args().runs), load_start)


if __name__ == "__main__":
    main()
