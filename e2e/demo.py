"""`make demo`: the local cluster, the CRDs, the operator, and the examples, end to end.

Idempotent: a second run reuses the running cluster and operator. `--down` stops both.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sits_localcluster.build import ensure_binaries
from sits_localcluster.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = ("chat-canary.yaml", "h200-ab-test.yaml", "lora-adapters.yaml")


def say(message: str) -> None:
    print(f"\n==> {message}", flush=True)


def _operator_pid_file(cluster: LocalCluster) -> Path:
    return cluster.state_dir / "run" / "sits-operator.pid"


def _operator_alive(cluster: LocalCluster) -> int | None:
    pid_file = _operator_pid_file(cluster)
    if not pid_file.exists():
        return None
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def start_operator(cluster: LocalCluster) -> None:
    if (pid := _operator_alive(cluster)) is not None:
        print(f"operator already running (pid {pid})")
        return
    log = cluster.state_dir / "logs" / "sits-operator.log"
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sits_operator", "--metrics-address", "127.0.0.1:9464"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    _operator_pid_file(cluster).write_text(str(proc.pid))
    print(f"operator started (pid {proc.pid}); log: {log}; metrics: http://127.0.0.1:9464/metrics")


def stop_operator(cluster: LocalCluster) -> None:
    if (pid := _operator_alive(cluster)) is not None:
        os.killpg(pid, signal.SIGTERM)
        for _ in range(50):
            if _operator_alive(cluster) is None:
                break
            time.sleep(0.2)
        else:
            os.killpg(pid, signal.SIGKILL)
        print(f"operator (pid {pid}) stopped")
    _operator_pid_file(cluster).unlink(missing_ok=True)


def wait_all_ready(cluster: LocalCluster, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        out = cluster.kubectl("get", "sitsd", "-A", "-o", "json").stdout
        items = json.loads(out)["items"]
        phases = {i["metadata"]["name"]: (i.get("status") or {}).get("phase", "-") for i in items}
        line = ", ".join(f"{n}={p}" for n, p in sorted(phases.items()))
        if line != last:
            print(f"  {line}", flush=True)
            last = line
        if phases and all(p == "Ready" for p in phases.values()):
            return
        time.sleep(1)
    raise SystemExit(f"not all SitsDeployments became Ready within {timeout:.0f} s: {last}")


def demo() -> None:
    started = time.monotonic()
    say("building (once) and starting the local control plane on 127.0.0.1")
    ensure_binaries(progress=print)
    cluster = LocalCluster(progress=print)
    cluster.up()
    kubectl = cluster.kubectl
    say("installing the SITS CRDs and the default SITS2026 policy")
    kubectl("apply", "--server-side", "--field-manager=sits-demo", "-f", str(REPO / "crds"))
    kubectl("wait", "--for=condition=Established", "--timeout=60s",
            "crd/sitsdeployments.sits.dev", "crd/sitspolicies.sits.dev")  # fmt: skip
    time.sleep(1)  # let kubectl's discovery see the new kinds
    kubectl("apply", "--server-side", "--field-manager=sits-demo", "-f", str(REPO / "policies"))
    say("running the operator")
    start_operator(cluster)
    say("applying the examples")
    for name in EXAMPLES:
        print(kubectl("apply", "-n", "default", "-f", str(REPO / "examples" / name)).stdout.strip())
    say("waiting for every SitsDeployment to be Ready")
    wait_all_ready(cluster)
    say("kubectl get sitsd")
    print(kubectl("get", "sitsd", "-A").stdout)
    say("kubectl get pods -o wide   (vLLM pods placed on fake MIG nodes by the real scheduler)")
    print(kubectl("get", "pods", "-n", "default", "-o", "wide").stdout)
    say("MIG slices per node (allocatable)")
    print(kubectl("get", "nodes", "-o", "custom-columns=NODE:.metadata.name,"
                  "PRODUCT:.metadata.labels.nvidia\\.com/gpu\\.product,"
                  "1G10:.status.allocatable.nvidia\\.com/mig-1g\\.10gb,"
                  "3G40:.status.allocatable.nvidia\\.com/mig-3g\\.40gb,"
                  "1G18:.status.allocatable.nvidia\\.com/mig-1g\\.18gb,"
                  "2G35:.status.allocatable.nvidia\\.com/mig-2g\\.35gb").stdout)  # fmt: skip
    say(f"done in {time.monotonic() - started:.0f} s. Try:")
    print(f"  export KUBECONFIG={cluster.kubeconfig}")
    print("  kubectl describe sitsd chat          # conditions and events")
    print("  kubectl get sitsd -w                 # then edit a variant's revision")
    print("  make down                            # stop the operator and the cluster")


def down() -> None:
    cluster = LocalCluster(progress=print)
    stop_operator(cluster)
    cluster.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--down", action="store_true", help="stop the operator and the cluster")
    args = parser.parse_args()
    down() if args.down else demo()


if __name__ == "__main__":
    main()
