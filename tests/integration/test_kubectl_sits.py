"""`kubectl sits` against the real apiserver, as users run it: through kubectl's plugin
dispatch, with the admin's kubeconfig, a ServiceAccount's token, or `--as`.

A real rollout moves under it: the operator (with the chart's RBAC), Prometheus scraping a
synthetic exporter of the gateway's metrics, SITS2026's rules on 4 s periods
(sits_operator_testing.manifests). `get --watch` runs once in a real terminal: tmux,
whose screen is captured while the rollout steps and promotes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.analysis_env import Watcher

from sits_localcluster.cluster import KUBECTL
from sits_localcluster.helm import service_account_kubeconfig
from sits_localcluster.nodes import GpuNodeSpec
from sits_localcluster.prometheus import LocalPrometheus
from sits_localcluster.synthetic import Profile, SyntheticServer
from sits_operator.model.analysis import Command, command_annotation
from sits_operator.model.spec import API_GROUP, PLURAL
from sits_operator.model.status import Phase
from sits_operator_testing.manifests import deployment, fast_policy
from sits_operator_testing.process import OperatorProcess, running_operator

pytestmark = pytest.mark.cluster
VENV_BIN = Path(sys.executable).parent  # where pip put the kubectl-sits executable
HEALTHY = Profile(rps=40, error_ratio=0.0, latency_ms=60)
RESOURCE = f"{PLURAL}.{API_GROUP}"
CAPACITY_NODE = GpuNodeSpec(
    "kubectl-sits-a100", "NVIDIA-A100-SXM4-80GB", 81920, {"mig-1g.10gb": 16}
).manifest()


def plugin_env(kubeconfig: Path | None = None) -> dict[str, str]:
    """A user's shell: the venv's bin on PATH (where kubectl finds kubectl-sits), UTF-8."""
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["LANG"] = env["LC_ALL"] = "C.UTF-8"
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return env


def kubectl_sits(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl sits ARGS` through kubectl's plugin dispatch."""
    return subprocess.run(
        [KUBECTL, "sits", *args],
        env=plugin_env(kubeconfig),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def operator(
    local_cluster: Any, operator_kubeconfig: Path, tmp_path_factory: Any
) -> Iterator[OperatorProcess]:
    local_cluster.kubectl("apply", "-f", "-", input=json.dumps(CAPACITY_NODE))
    try:
        with running_operator(operator_kubeconfig, tmp_path_factory.mktemp("operator")) as proc:
            yield proc
    finally:
        local_cluster.kubectl("delete", "node", "kubectl-sits-a100", "--wait=false", check=False)


class Rollout:
    """One SitsDeployment `chat` under the operator, with its own fast policy."""

    def __init__(self, cluster: Any, namespace: str, traffic: SyntheticServer, url: str) -> None:
        self.cluster, self.ns, self.traffic, self.url = cluster, namespace, traffic, url
        self.policy = f"kubectl-sits-{uuid.uuid4().hex[:6]}"
        self.watch = Watcher(cluster, namespace, "chat")
        self.kubeconfig = Path(cluster.kubeconfig)

    def start(self, candidate: Profile = HEALTHY) -> None:
        self.traffic.traffic.set(self.ns, "chat", "v1", HEALTHY)
        self.traffic.traffic.set(self.ns, "chat", "v2", candidate)
        self.cluster.kubectl(
            "apply", "-f", "-", input=json.dumps(fast_policy(self.policy, self.url))
        )
        manifest = deployment("chat", self.policy)
        self.cluster.kubectl("apply", "-n", self.ns, "-f", "-", input=json.dumps(manifest))

    def sits(self, *args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
        return kubectl_sits(kubeconfig or self.kubeconfig, *args, "-n", self.ns)

    def annotations(self) -> dict[str, str]:
        out = self.cluster.kubectl("get", "sitsd", "chat", "-n", self.ns, "-o", "json").stdout
        return dict(json.loads(out)["metadata"].get("annotations") or {})

    def cleanup(self) -> None:
        self.cluster.kubectl("delete", "sitspolicy", self.policy, "--wait=false", check=False)


@pytest.fixture
def rollout(
    local_cluster: Any,
    namespace: str,
    traffic: SyntheticServer,
    prometheus: LocalPrometheus,
    operator: OperatorProcess,
) -> Iterator[Rollout]:
    r = Rollout(local_cluster, namespace, traffic, prometheus.url)
    yield r
    r.cleanup()


def test_kubectl_plugin_list_finds_it() -> None:
    listed = subprocess.run(
        [KUBECTL, "plugin", "list"],
        env=plugin_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert str(VENV_BIN / "kubectl-sits") in listed.stdout, listed.stdout + listed.stderr


def test_help_through_kubectl() -> None:
    helped = subprocess.run(
        [KUBECTL, "sits", "abort", "--help"],
        env=plugin_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "usage: kubectl sits abort" in helped.stdout
    assert command_annotation(Command.ABORT) in helped.stdout


def test_get_json_is_the_object_and_the_tree_shows_the_rollout(rollout: Rollout) -> None:
    rollout.start()
    status = rollout.watch.until(
        "the first judged period", lambda s: s.get("candidateWeight") == 25 and s.get("slis")
    )
    got = rollout.sits("get", "chat", "-o", "json")
    assert got.returncode == 0, got.stderr
    shown = json.loads(got.stdout)
    assert (shown["kind"], shown["metadata"]["name"]) == ("SitsDeployment", "chat")
    assert "managedFields" not in shown["metadata"]
    assert shown["spec"]["analysis"]["policyRef"]["name"] == rollout.policy
    assert shown["status"]["phase"] in {Phase.PROGRESSING, Phase.PROMOTING, Phase.SUCCEEDED}
    assert rollout.sits("get", "chat", "-o", "yaml").stdout.startswith("apiVersion: sits.dev/")

    tree = rollout.sits("get", "chat")
    assert tree.returncode == 0, tree.stderr
    pods = rollout.cluster.kubectl(
        "get", "pods", "-n", rollout.ns, "-l", "sits.dev/deployment=chat", "-o", "name"
    ).stdout.split()
    for pod in pods:
        assert pod.removeprefix("pod/") in tree.stdout, tree.stdout
    for text in (
        "● v1  stable",
        "● v2  candidate",
        "MIG 1g.10gb x1",
        "breach < 0.95",
        "success_rate_5m",
        "Decisions (newest first)",
        status["stableVariant"],
    ):
        assert text in tree.stdout, tree.stdout


def test_abort_sets_the_annotation_the_operator_acts_on(rollout: Rollout) -> None:
    rollout.start()
    rollout.watch.until("the first step", lambda s: s.get("candidateWeight") == 25)
    aborted = rollout.sits("abort", "chat")
    assert aborted.returncode == 0, aborted.stderr
    key = command_annotation(Command.ABORT)
    value = rollout.annotations()[key]
    assert f"set {key}={value}" in aborted.stdout
    status = rollout.watch.phase(Phase.ROLLED_BACK, timeout=30)
    assert status["analysis"]["acknowledged"][Command.ABORT.value] == value
    explained = rollout.sits("explain", "chat")
    assert explained.returncode == 0, explained.stderr
    followed = " ".join(explained.stdout.split())
    assert f"Followed: the annotation {key}={value}" in followed, explained.stdout
    assert f"kubectl sits retry chat -n {rollout.ns}" in explained.stdout

    retried = rollout.sits("retry", "chat")
    assert retried.returncode == 0, retried.stderr
    rollout.watch.phase(Phase.PROGRESSING, timeout=30)
    retry = command_annotation(Command.RETRY)
    reasons = [h["reason"] for h in rollout.watch.status()["analysis"]["history"]]
    assert any(f"{retry}=" in reason for reason in reasons), reasons


def viewer(rollout: Rollout) -> str:
    """A ServiceAccount that may read SitsDeployments in the namespace, nothing else."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "sits-viewer"},
        "rules": [
            {"apiGroups": [API_GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch"]}
        ],
    }
    rollout.cluster.kubectl("create", "serviceaccount", "viewer", "-n", rollout.ns)
    rollout.cluster.kubectl("apply", "-n", rollout.ns, "-f", "-", input=json.dumps(role))
    rollout.cluster.kubectl(
        "create",
        "rolebinding",
        "sits-viewer",
        "-n",
        rollout.ns,
        "--role=sits-viewer",
        f"--serviceaccount={rollout.ns}:viewer",
    )
    return f"system:serviceaccount:{rollout.ns}:viewer"


def test_a_user_without_patch_is_refused_clearly(rollout: Rollout, tmp_path: Path) -> None:
    rollout.start()
    rollout.watch.until("a status", lambda s: bool(s.get("phase")))
    user = viewer(rollout)
    key = command_annotation(Command.ABORT)

    impersonated = rollout.sits("abort", "chat", "--as", user)
    assert impersonated.returncode == 1
    assert (
        f'Forbidden: you (as {user}) may not patch {RESOURCE} "chat" in namespace '
        f'"{rollout.ns}"' in " ".join(impersonated.stderr.split())
    ), impersonated.stderr
    assert "cannot patch resource" in impersonated.stderr

    token = service_account_kubeconfig(rollout.cluster, rollout.ns, "viewer", tmp_path / "kc")
    with_token = kubectl_sits(token, "abort", "chat", "-n", rollout.ns)
    assert with_token.returncode == 1
    assert f'User "{user}" cannot patch resource' in " ".join(with_token.stderr.split())
    assert key not in rollout.annotations()

    # Reading is allowed: the rollout shows, the pods and the policy say why they do not.
    seen = rollout.sits("get", "chat", "--as", user)
    assert seen.returncode == 0, seen.stderr
    screen = " ".join(seen.stdout.split())
    assert "● v2 candidate" in screen
    assert f"pods not shown: Forbidden: you (as {user}) may not list pods" in screen
    assert f"SitsPolicy {rollout.policy} not shown: Forbidden" in screen


class Tmux:
    """A terminal: a tmux server of its own (-L), a 160x60 pane running bash."""

    def __init__(self, env: dict[str, str]) -> None:
        self.socket, self.env = f"sits-test-{uuid.uuid4().hex[:8]}", env
        self("new-session", "-d", "-s", "t", "-x", "160", "-y", "60", "bash --norc --noprofile")
        self.path = Path(self("display-message", "-p", "#{socket_path}").strip())

    def __call__(self, *args: str) -> str:
        tmux = shutil.which("tmux")
        assert tmux, "tmux is missing: scripts/setup.sh installs it"
        return subprocess.run(
            [tmux, "-u", "-f", "/dev/null", "-L", self.socket, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout

    def type(self, line: str) -> None:
        self("send-keys", "-t", "t", line, "Enter")

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "t")

    def until(self, what: str, check: Callable[[str], bool], timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if check(screen):
                return screen
            time.sleep(0.3)
        pytest.fail(f"the terminal never showed {what}; it shows:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], check=False, timeout=30)
        self.path.unlink(missing_ok=True)


def test_get_watch_redraws_in_a_real_terminal(rollout: Rollout) -> None:
    rollout.start()
    term = Tmux(plugin_env(rollout.kubeconfig))
    try:
        term.type(f"kubectl sits get chat -n {rollout.ns} --watch")
        first = term.until("the rollout at 25 %", lambda s: "weight 25 %" in s)
        assert "Progressing" in first
        assert "watching sitsdeployment/chat" in first
        last = term.until("Succeeded", lambda s: "Succeeded" in s and "promote" in s)
        assert last != first
        assert "weight 100 %" in last
        assert last.count("Name:") == 1, "a watch redraws its screen, it does not append"
        term("send-keys", "-t", "t", "C-c")
        term.type("echo exit=$?")
        term.until("the watch ended by Ctrl-C", lambda s: "exit=130" in s, timeout=15)
    finally:
        term.close()
