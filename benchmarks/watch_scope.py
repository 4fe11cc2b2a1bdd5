"""Benchmark: the operator's memory and traffic with 5,000 unrelated pods in the cluster,
its watches scoped on the server (label selectors, the default) and not (Kopf's
client-side filters alone, SITS_SERVER_SIDE_SELECTORS=0: what the operator did before).

For each mode, one cluster-wide operator serving one SitsDeployment (the chat example,
router none, its pods on kwok's GPU nodes) is measured three times: idle (no unrelated
pods), after N unrelated pods were created while it watched (kwok runs them: an ADDED and
a status MODIFIED each), and restarted with the N pods present (the initial list). What it
received is its own counter (`sits_operator_watch_events_total{resource, selected}`);
memory from /proc (VmRSS, VmHWM) and CPU time since it started; traffic is the events
received (rchar would count file reads only: Python's sockets use recv, which it does not).
With the selectors on, one unrelated object received fails the run.

Writes a section of docs/benchmarks.md. Run with `make bench`, or alone (no real node):
`SITS_REAL_NODE=0 .venv/bin/python -m benchmarks.watch_scope --pods 5000`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.operator_scale import cluster_with_crds
from benchmarks.results import RESULTS, commit, write_section
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.health import wait_until
from sits_localcluster.prometheus import free_port
from sits_operator.handlers.watching import ENV_SWITCH
from sits_operator_testing.manifests import EXAMPLE
from sits_operator_testing.process import OperatorProcess
from sits_operator_testing.watch_scope import (
    NODE,
    Received,
    cpu_seconds,
    create_pods,
    delete_pods,
    memory_mib,
    scrape,
    unrelated_node,
    unrelated_pod,
)

NAMESPACE = f"sits-watch-{os.getpid()}"
UNRELATED_NAMESPACE = f"sits-unrelated-{os.getpid()}"
MODES = {"server": "label selectors sent (default)", "client": "client-side filters only"}


@dataclass(frozen=True)
class Row:
    mode: str
    moment: str
    unrelated_pods: int
    seen: Received
    rss_mib: float
    peak_mib: float
    cpu_s: float
    # From the process start to the chat SitsDeployment's loop running (Kopf fills its
    # indexes, i.e. lists every watched kind, first); None where it was not started.
    start_s: float | None = None


class BenchOperator:
    """`python -m sits_operator`, cluster-wide, admin credentials, /metrics on, the
    selectors on (mode server) or off (mode client)."""

    def __init__(self, cluster: LocalCluster, mode: str) -> None:
        self.mode = mode
        self.port = free_port()
        log_dir = Path(cluster.state_dir) / "logs" / f"bench-watch-{mode}"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.process = OperatorProcess(
            Path(cluster.kubeconfig),
            log_dir,
            extra_args=("--metrics-address", f"127.0.0.1:{self.port}"),
            extra_env={ENV_SWITCH: "1" if mode == "server" else "0"},
            namespaces=(),
        )

    def start(self, timeout: float = 120) -> float:
        """Seconds until the chat loop runs."""
        started = time.monotonic()
        self.process.start()
        needle = f"reconcile loop started for {NAMESPACE}/chat"
        self.process.wait_for_log("the chat loop", needle, timeout=timeout)
        return time.monotonic() - started

    def stop(self) -> None:
        self.process.stop()

    def seen(self) -> Received:
        return scrape(f"http://127.0.0.1:{self.port}/metrics")

    def caught_up(self, cluster: LocalCluster, pods: int, tag: str) -> None:
        """Until the operator has taken in everything so far: a change to the chat pods
        made now reaches it after all that came before on the pods watch (the control,
        which receives the unrelated pods, also until it has counted all of them)."""
        before = self.seen().selected["pods"]
        cluster.kubectl(
            "annotate",
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            "sits.dev/deployment=chat",
            f"example.com/bench-barrier={tag}",
            "--overwrite",
        )
        wait("the barrier", lambda: self.seen().selected["pods"] > before, 300)
        if self.mode == "client":
            wait(f"{pods} pods counted", lambda: self.seen().unrelated["pods"] >= pods, 600)

    def measure(self, moment: str, unrelated_pods: int, start_s: float | None = None) -> Row:
        pid = self.process.pid
        rss, peak = memory_mib(pid)
        seen = self.seen()
        row = Row(
            self.mode,
            moment,
            unrelated_pods,
            seen,
            rss,
            peak,
            cpu_seconds(pid),
            start_s,
        )
        print(f"  {row}", flush=True)
        if self.mode == "server" and seen.unrelated_total:
            raise SystemExit(f"the apiserver sent the operator unrelated objects: {seen.unrelated}")
        return row


def count_running(cluster: LocalCluster) -> int:
    out = cluster.kubectl(
        "get",
        "pods",
        "-n",
        UNRELATED_NAMESPACE,
        "--field-selector=status.phase=Running",
        "-o",
        "name",
    ).stdout
    return len(out.split())


def count_pods(cluster: LocalCluster) -> int:
    out = cluster.kubectl("get", "pods", "-n", UNRELATED_NAMESPACE, "-o", "name").stdout
    return len(out.split())


def wait(what: str, check: Callable[[], bool], timeout: float) -> None:
    ok, _ = wait_until(lambda: (check(), ""), timeout, interval=1)
    if not ok:
        raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


def chat() -> dict[str, object]:
    manifest = json.loads(json.dumps(EXAMPLE))
    manifest["metadata"]["namespace"] = NAMESPACE
    manifest["spec"]["analysis"]["policyRef"]["name"] = "none-benchmark"
    manifest["spec"]["traffic"]["router"] = "none"
    return dict(manifest)


def phase(cluster: LocalCluster) -> str:
    path = "jsonpath={.status.phase}"
    return cluster.kubectl("get", "sitsd", "chat", "-n", NAMESPACE, "-o", path).stdout


def run_mode(
    cluster: LocalCluster, mode: str, pods: int, settle: float, *, last: bool
) -> list[Row]:
    print(f"mode {mode}: {MODES[mode]}", flush=True)
    operator = BenchOperator(cluster, mode)
    rows = []
    try:
        first_start = operator.start()
        wait("chat Ready", lambda: phase(cluster) == "Ready", 180)
        time.sleep(settle)
        rows.append(operator.measure("idle", 0, first_start))
        started = time.monotonic()
        create_pods(
            cluster.kubeconfig, (unrelated_pod(i, UNRELATED_NAMESPACE) for i in range(pods))
        )
        print(f"  {pods} pods created in {time.monotonic() - started:.1f} s", flush=True)
        wait(f"{pods} pods Running", lambda: count_running(cluster) >= pods, 600)
        operator.caught_up(cluster, pods, "created")
        time.sleep(settle)
        rows.append(operator.measure(f"after creating {pods} pods while watching", pods))
        operator.stop()
        # Lists everything again; without the selectors that is every pod, which Kopf
        # takes in before the loop starts (minutes at 5,000 on 2 cores).
        restart = operator.start(timeout=900)
        operator.caught_up(cluster, pods, "restarted")
        time.sleep(settle)
        rows.append(operator.measure(f"restarted with {pods} pods present", pods, restart))
        if last:  # its finalizer goes while an operator runs
            cluster.kubectl("delete", "sitsd", "chat", "-n", NAMESPACE, "--timeout=60s")
    finally:
        operator.stop()
        delete_pods(cluster.kubeconfig, UNRELATED_NAMESPACE)
        wait("the unrelated pods gone", lambda: count_pods(cluster) == 0, 600)
    if mode == "client" and rows[1].seen.unrelated["pods"] < pods:
        raise SystemExit(f"the control saw {rows[1].seen.unrelated['pods']:.0f} < {pods} pods")
    return rows


def run(pods: int, settle: float) -> list[Row]:
    cluster = cluster_with_crds()
    cluster.kubectl("apply", "-f", "-", input=json.dumps(unrelated_node(pods=pods + 100)))
    for namespace in (NAMESPACE, UNRELATED_NAMESPACE):
        cluster.kubectl("create", "namespace", namespace, check=False)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(chat()))
    rows: list[Row] = []
    try:
        # The selectors (the default) first: their figures stand even if the control's
        # minutes-long restart runs out of time.
        rows += run_mode(cluster, "server", pods, settle, last=False)
        rows += run_mode(cluster, "client", pods, settle, last=True)
    finally:
        for namespace in (NAMESPACE, UNRELATED_NAMESPACE):
            cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        cluster.kubectl("delete", "node", NODE, "--wait=false", check=False)
    return rows


def write_results(rows: list[Row], pods: int, load: float, results: Path = RESULTS) -> None:
    lines = [
        f"## Operator watch scope: {pods:,} unrelated pods (issue 15)",
        "",
        f"Command: `make bench` (`python -m benchmarks.watch_scope --pods {pods}`), on the"
        " local cluster (real kube-apiserver, kwok nodes; `SITS_REAL_NODE=0` is enough), 2 cores.",
        "One cluster-wide operator serving one SitsDeployment (chat example, router none);"
        f" {pods:,} pods of another workload (kwok runs them on a node of their own, labels close"
        " to the operator's but not its own) created while it watches, then the operator"
        " restarted with them present. Received: its counter"
        " `sits_operator_watch_events_total` (pods of its SitsDeployments / anything else, all"
        " child kinds); CPU time since the operator"
        " started.",
        f"Commit `{commit()}`, one run, 1-minute load average {load:.1f} at the end.",
        "",
        "| watches | moment | pod events received (its own / unrelated) | unrelated objects"
        " received | RSS | peak RSS | CPU | (re)start to loop running |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {MODES[row.mode]} | {row.moment} | {row.seen.selected['pods']:.0f} /"
            f" {row.seen.unrelated['pods']:.0f} | {row.seen.unrelated_total:.0f} |"
            f" {row.rss_mib:.0f} MiB | {row.peak_mib:.0f} MiB | {row.cpu_s:.1f} s |"
            f" {'' if row.start_s is None else f'{row.start_s:.1f} s'} |"
        )
    lines += [
        "",
        "With the selectors on, the apiserver sends the operator nothing of the unrelated pods:"
        " the run fails if the counter shows one. A namespaced install sends the same selectors"
        " with its per-namespace requests (`tests/integration/test_watch_scope.py` under"
        " `SITS_TEST_RBAC=namespaced`).",
        "",
    ]
    write_section("\n".join(lines), results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before measuring")
    args = parser.parse_args()
    rows = run(args.pods, args.settle)
    write_results(rows, args.pods, os.getloadavg()[0])


if __name__ == "__main__":
    main()
