"""``sits-cluster``: bring the local control plane up or down, or ask how it is doing.

Exit codes are meant for scripts: ``status`` is 0 only when every process is alive and the
apiserver is ready, so ``sits-cluster status || sits-cluster up`` does the right thing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from .build import BuildError
from .cluster import ClusterError, LocalCluster


def _progress(line: str) -> object:
    """Progress to stderr, so that stdout carries only what a script may ``eval``."""
    print(line, file=sys.stderr, flush=True)
    return None


def cmd_up(cluster: LocalCluster) -> int:
    start = time.monotonic()
    started = cluster.up(persist=True)
    verb = "started" if started else "reused"
    _progress(f"cluster {verb} in {time.monotonic() - start:.1f} s")
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


def cmd_down(cluster: LocalCluster, purge: bool) -> int:
    cluster.down(purge=purge)
    _progress("cluster stopped" + (" and state removed" if purge else ""))
    return 0


def cmd_status(cluster: LocalCluster) -> int:
    statuses = cluster.status()
    width = max(len(s.name) for s in statuses)
    for s in statuses:
        pid = str(s.pid) if s.pid is not None else "-"
        state = "alive" if s.alive else "DEAD"
        print(f"{s.name:<{width}}  pid={pid:<8} {state:<5}  {s.endpoint}  log={s.log}")
    ready, detail = cluster.readyz()
    print(f"apiserver /readyz: {'ok' if ready else 'NOT READY (' + detail + ')'}")
    print(f"kubeconfig: {cluster.kubeconfig}")
    return 0 if ready and all(s.alive for s in statuses) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sits-cluster",
        description="Local Kubernetes control plane on 127.0.0.1 with fake MIG GPU nodes "
        "(state: $SITS_CLUSTER_DIR or ~/.local/state/sits/cluster).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start (or reuse) the cluster; prints `export KUBECONFIG=...`")
    up.add_argument(
        "--no-node",
        action="store_true",
        help="control plane and kwok GPU nodes only, without the real node sits-node-0 "
        "(fast; same as SITS_REAL_NODE=0)",
    )
    down = sub.add_parser("down", help="stop every component")
    down.add_argument("--purge", action="store_true", help="also delete PKI, etcd data, logs")
    sub.add_parser("status", help="pid/liveness/endpoint per component; exit 1 if not running")
    sub.add_parser("kubeconfig", help="print the admin kubeconfig path")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    no_node = getattr(args, "no_node", False)
    cluster = LocalCluster(progress=_progress, node=False if no_node else None)
    try:
        if args.command == "up":
            return cmd_up(cluster)
        if args.command == "down":
            return cmd_down(cluster, args.purge)
        if args.command == "status":
            return cmd_status(cluster)
        print(cluster.kubeconfig)
        return 0
    except (ClusterError, BuildError) as err:
        print(f"sits-cluster {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
