"""Locate the cached ``helm`` binary that ``scripts/setup-helm.sh`` builds.

Helm is compiled from the Go module proxy (no release download is reachable from the
machines this project runs on), once per version, into the same cache as the control-plane
binaries. The path is derived here from the same inputs the script uses (``SITS_CACHE_DIR``
and ``HELM_VERSION`` in ``versions.env``) so that tests find the binary without starting a
shell, and so that bumping the pinned version can never silently pick up a stale build.
Building is deliberately left to the script: it takes minutes, and belongs in set-up, not
in a test's fixture.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sits_localcluster.build import cache_root, read_versions

if TYPE_CHECKING:
    from sits_localcluster.cluster import LocalCluster

SETUP_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "setup-helm.sh"


def helm_binary(versions: dict[str, str] | None = None) -> Path:
    """Return the cached helm for the pinned ``HELM_VERSION``; never builds it.

    Raises ``FileNotFoundError`` naming the script to run when the binary is missing, so a
    test fails with the fix rather than with a bare "No such file" from ``subprocess``.
    """
    v = versions or read_versions()
    version = v.get("HELM_VERSION")
    if not version:
        raise KeyError("HELM_VERSION is not pinned in e2e/cluster/versions.env")
    path = cache_root() / f"helm-{version}" / "bin" / "helm"
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(
            f"helm {version} is not built at {path}; run {SETUP_SCRIPT} (a few minutes, once)"
        )
    return path


def render_chart(chart: Path, release: str, namespace: str, *args: str) -> list[dict[str, Any]]:
    """`helm template RELEASE CHART -n NAMESPACE ARGS`, parsed into objects."""
    result = subprocess.run(
        [str(helm_binary()), "template", release, str(chart), "-n", namespace, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"helm template {chart} failed:\n{result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def apply_chart_parts(
    cluster: LocalCluster,
    chart: Path,
    release: str,
    namespace: str,
    templates: tuple[str, ...],
    *,
    field_manager: str,
    values: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """Render only `templates` (names under the chart's templates/) with `values` (helm
    arguments such as `--set-json`) and apply them server-side into `namespace` (created
    when missing); returns what was applied.

    Why parts: kwok runs no containers, so the demo and the tests run the operator as a
    process and install only what it needs from its chart (ServiceAccount, RBAC, policy).
    """
    cluster.kubectl("create", "namespace", namespace, check=False)
    shown = [arg for name in templates for arg in ("--show-only", f"templates/{name}")]
    docs = render_chart(chart, release, namespace, *shown, *values)
    apply_objects(cluster, docs, field_manager=field_manager)
    return docs


def apply_objects(cluster: LocalCluster, docs: list[dict[str, Any]], *, field_manager: str) -> None:
    """`kubectl apply --server-side` of rendered objects, as one stream."""
    stream = "\n---\n".join(yaml.safe_dump(doc) for doc in docs)
    cluster.kubectl(
        "apply", "--server-side", f"--field-manager={field_manager}", "-f", "-", input=stream
    )


def service_account_of(docs: list[dict[str, Any]]) -> str:
    """The name of the one ServiceAccount among rendered objects."""
    (account,) = (d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount")
    return str(account)


def service_account_kubeconfig(
    cluster: LocalCluster, namespace: str, account: str, path: Path, *, duration: str = "24h"
) -> Path:
    """A kubeconfig at `path` that authenticates as ServiceAccount `namespace/account`.

    Why: the operator runs outside the cluster here (kwok runs no containers), yet it
    should hold exactly the permissions its chart grants in a cluster, not the admin's.
    The token comes from the API server's TokenRequest, as a pod's projected token does.
    """
    token = cluster.kubectl(
        "create", "token", account, "-n", namespace, f"--duration={duration}"
    ).stdout.strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    server = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [server],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": server["name"], "user": account}}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


CHART = Path(__file__).resolve().parents[2] / "charts" / "sits-operator"
#: The local images the project builds (``sits_localcluster.images``) for the real node.
LOCAL_OPERATOR_IMAGE = "sits.local/sits-operator"
LOCAL_INFERENCE_IMAGE = "sits.local/sits-inference"


def local_install_values(version: str, watch: tuple[str, ...] = ()) -> dict[str, Any]:
    """Chart values for the operator on the local cluster's real node.

    The images are imported into the node's containerd (never pulled), and the pod selects
    and tolerates the real node: the kwok nodes would only pretend to run it.
    """
    from sits_localcluster.node import REAL_NODE_LABEL, REAL_NODE_TOLERATION

    return {
        "image": {"repository": LOCAL_OPERATOR_IMAGE, "tag": version, "pullPolicy": "Never"},
        "inferenceImage": f"{LOCAL_INFERENCE_IMAGE}:{version}",
        "operator": {"watchNamespaces": list(watch)},
        "nodeSelector": dict(REAL_NODE_LABEL),
        "tolerations": [dict(REAL_NODE_TOLERATION)],
    }


def helm_install(
    cluster: LocalCluster,
    release: str,
    namespace: str,
    values: dict[str, Any],
    *,
    chart: Path = CHART,
    timeout: str = "180s",
) -> subprocess.CompletedProcess[str]:
    """`helm upgrade --install --wait` with `values` (as a file), as a user installs it."""
    values_file = cluster.state_dir / f"values-{namespace}-{release}.yaml"
    values_file.write_text(yaml.safe_dump(values))
    argv = [
        str(helm_binary()),
        "upgrade",
        "--install",
        release,
        str(chart),
        "-n",
        namespace,
        "--create-namespace",
        "-f",
        str(values_file),
        "--wait",
        f"--timeout={timeout}",
        f"--kubeconfig={cluster.kubeconfig}",
    ]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"helm upgrade --install {release} failed:\n{result.stderr}")
    return result


def helm_uninstall(cluster: LocalCluster, release: str, namespace: str) -> None:
    argv = [
        str(helm_binary()),
        "uninstall",
        release,
        "-n",
        namespace,
        "--wait",
        f"--kubeconfig={cluster.kubeconfig}",
    ]
    subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
