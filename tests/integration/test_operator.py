"""The operator against the real local control plane: apiserver, scheduler, GC, kwok nodes.

One operator process serves the module; each test works in its own namespace.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.integration.analysis_env import crash_looping_status

from sits_operator.core.render import render_children
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import ObjectRef, parse_spec
from sits_operator_testing.process import OperatorProcess, running_operator

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = yaml.safe_load((REPO / "examples" / "chat-canary.yaml").read_text())
# These tests are about reconciling objects, not analysis: point at a policy that does not
# exist (whatever policies an earlier demo left in the cluster), so no analysis runs.
EXAMPLE["spec"]["analysis"]["policyRef"]["name"] = "no-such-policy-for-reconcile-tests"
# These tests count the variants' objects: router none renders no gateway. The gateway's
# own objects (router builtin, the CRD's default) are tested at the end of this module.
BUILTIN = json.loads(json.dumps(EXAMPLE))
EXAMPLE["spec"]["traffic"]["router"] = "none"


@pytest.fixture(scope="module")
def operator(operator_kubeconfig: Path, tmp_path_factory: Any) -> Iterator[OperatorProcess]:
    with running_operator(operator_kubeconfig, tmp_path_factory.mktemp("operator")) as proc:
        yield proc


class Kube:
    """Small kubectl helpers bound to one namespace."""

    def __init__(self, cluster: Any, namespace: str, operator: OperatorProcess) -> None:
        self.cluster, self.ns, self.operator = cluster, namespace, operator

    def apply(self, manifest: dict[str, Any]) -> None:
        self.cluster.kubectl("apply", "-n", self.ns, "-f", "-", input=json.dumps(manifest))

    def get(self, kind: str, name: str = "", *selector: str) -> Any:
        args = ["get", kind, *([name] if name else []), "-n", self.ns, "-o", "json", *selector]
        args.append("--show-managed-fields")
        result = self.cluster.kubectl(*args, check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def items(self, kind: str, deployment: str = "chat") -> list[dict[str, Any]]:
        found = self.get(kind, "", "-l", f"sits.dev/deployment={deployment}")
        return list(found["items"]) if found else []

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            time.sleep(0.5)
        pytest.fail(f"timed out waiting for {what}\n--- operator log ---\n{self.operator.tail()}")

    def status(self, name: str = "chat") -> dict[str, Any]:
        obj = self.get("sitsdeployment", name)
        return dict(obj.get("status") or {}) if obj else {}

    def wait_phase(self, phase: str, name: str = "chat", timeout: float = 60) -> dict[str, Any]:
        return dict(
            self.wait(
                f"phase {phase}",
                lambda: (s := self.status(name)).get("phase") == phase and s,
                timeout,
            )
        )

    def events(self) -> list[dict[str, Any]]:
        found = self.get("events", "", "--field-selector", "involvedObject.kind=SitsDeployment")
        return list(found["items"]) if found else []


@pytest.fixture
def kube(local_cluster: Any, namespace: str, operator: OperatorProcess) -> Kube:
    return Kube(local_cluster, namespace, operator)


def with_variants(
    *changes: dict[str, Any], extra: list[dict[str, Any]] | None = None, weights: bool = True
) -> dict[str, Any]:
    manifest = json.loads(json.dumps(EXAMPLE))
    for variant, change in zip(manifest["spec"]["variants"], changes, strict=False):
        variant.update(change)
    manifest["spec"]["variants"] += extra or []
    if not weights:
        manifest["spec"]["traffic"].pop("initialWeights")
    return dict(manifest)


def test_example_becomes_running_pods_on_fake_mig_nodes(kube: Kube) -> None:
    kube.apply(EXAMPLE)
    status = kube.wait_phase("Ready")
    assert (status["stableVariant"], status["candidateVariant"], status["candidateWeight"]) == (
        "v1",
        "v2",
        10,
    )
    assert {
        (v["name"], v["readyReplicas"], v["weight"], v["restarts"]) for v in status["variants"]
    } == {("v1", 1, 90, 0), ("v2", 1, 10, 0)}
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    # The pods are ready (phase Ready), but the rollout waits for its (missing) policy:
    # converging, not at rest (core/kstatus.py).
    assert conditions == {
        "Ready": "False",
        "Reconciling": "True",
        "Stalled": "False",
        "Progressing": "False",
        "Invalid": "False",
        "Unschedulable": "False",
        "ContainersFailing": "False",
        "Analysis": "False",
    }
    analysis = next(c for c in status["conditions"] if c["type"] == "Analysis")
    assert analysis["reason"] == "PolicyNotFound"
    reconciling = next(c for c in status["conditions"] if c["type"] == "Reconciling")
    assert reconciling["reason"] == "PolicyNotFound"
    assert status["message"].startswith("waiting for SitsPolicy 'no-such-policy-for-reconcile")

    deployments = {d["metadata"]["name"]: d for d in kube.items("deployments")}
    assert set(deployments) == {"chat-v1", "chat-v2"}
    pod_spec = deployments["chat-v2"]["spec"]["template"]["spec"]
    vllm = pod_spec["containers"][0]
    assert vllm["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "1"
    assert vllm["args"][:4] == ["--model", "Qwen/Qwen3-1.7B", "--served-model-name", "chat"]
    # vLLM's --revision is the model's git ref (modelRevision), never the rollout's label.
    revision = vllm["args"][vllm["args"].index("--revision") + 1]
    assert revision == EXAMPLE["spec"]["variants"][1]["modelRevision"] == "main"
    assert "qwen3-1.7b" not in vllm["args"]
    assert vllm["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert vllm["startupProbe"]["periodSeconds"] * vllm["startupProbe"]["failureThreshold"] >= (
        15 * 60
    )
    assert [c["name"] for c in pod_spec["containers"]] == ["vllm", "sits-cache"]
    owner = deployments["chat-v1"]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("SitsDeployment", "chat", True)
    managers = {m["manager"] for m in deployments["chat-v1"]["metadata"]["managedFields"]}
    assert "sits-operator" in managers

    services = {s["metadata"]["name"] for s in kube.items("services")}
    assert services == {"chat", "chat-v1", "chat-v2"}
    pods = kube.items("pods")
    assert len(pods) == 2
    for pod in pods:
        assert pod["status"]["phase"] == "Running"
        assert pod["spec"]["nodeName"].startswith("gpu-a100-")

    table = kube.cluster.kubectl("get", "sitsd", "-n", kube.ns).stdout
    header, row = table.splitlines()[:2]
    assert header.split() == [
        "NAME",
        "PHASE",
        "STABLE",
        "CANDIDATE",
        "WEIGHT",
        "SUCCESS",
        "P95MS",
        "AGE",
    ]
    assert row.split()[:5] == ["chat", "Ready", "v1", "v2", "10"]
    reasons = [e["reason"] for e in kube.events()]
    applied = " ".join(e["message"] for e in kube.events() if e["reason"] == "Applied")
    for child in ("Deployment chat-v1", "Deployment chat-v2", "Service chat-v1", "Service chat "):
        assert child in applied + " "
    assert "PhaseChanged" in reasons


def test_unsatisfiable_profile_stays_pending_and_status_says_why(kube: Kube) -> None:
    kube.apply(with_variants({}, {"migProfile": "7g.80gb", "modelMemory": "4Gi"}))
    status = kube.wait_phase("Degraded")
    unsched = next(c for c in status["conditions"] if c["type"] == "Unschedulable")
    assert unsched["status"] == "True"
    assert "variant v2 (7g.80gb)" in unsched["message"]
    assert "Insufficient nvidia.com/mig-7g.80gb" in unsched["message"]
    assert {v["name"]: v["weight"] for v in status["variants"]} == {"v1": 100, "v2": 0}
    pending = [p for p in kube.items("pods") if p["metadata"]["labels"]["sits.dev/variant"] == "v2"]
    assert pending
    assert all(p["status"]["phase"] == "Pending" for p in pending)
    warnings = [e for e in kube.events() if e["type"] == "Warning"]
    assert any(e["reason"] == "UnschedulableTrue" for e in warnings)


def test_revision_change_rolls_only_that_variant(kube: Kube) -> None:
    kube.apply(EXAMPLE)
    kube.wait_phase("Ready")
    before = {d["metadata"]["name"]: d for d in kube.items("deployments")}
    kube.apply(with_variants({}, {"revision": "qwen3-1.7b-fix1"}))
    kube.wait(
        "v2 rolled to the new revision",
        lambda: (
            all(
                p["metadata"]["labels"]["sits.dev/revision"] == "qwen3-1.7b-fix1"
                for p in kube.items("pods")
                if p["metadata"]["labels"]["sits.dev/variant"] == "v2"
                and p["status"]["phase"] == "Running"
            )
            and kube.status().get("phase") == "Ready"
        ),
    )
    after = {d["metadata"]["name"]: d for d in kube.items("deployments")}
    assert after["chat-v1"]["metadata"]["generation"] == before["chat-v1"]["metadata"]["generation"]
    assert after["chat-v2"]["metadata"]["generation"] > before["chat-v2"]["metadata"]["generation"]
    v1_pods = {
        p["metadata"]["name"]
        for p in kube.items("pods")
        if p["metadata"]["labels"]["sits.dev/variant"] == "v1"
    }
    assert len(v1_pods) == 1


def test_removed_variant_loses_its_objects(kube: Kube) -> None:
    v3 = {**EXAMPLE["spec"]["variants"][1], "name": "v3", "revision": "third"}
    kube.apply(with_variants(extra=[v3], weights=False))
    kube.wait(
        "v3 objects", lambda: kube.get("deployment", "chat-v3") and kube.get("service", "chat-v3")
    )
    kube.apply(with_variants(weights=False))
    kube.wait(
        "v3 objects gone",
        lambda: (
            kube.get("deployment", "chat-v3") is None and kube.get("service", "chat-v3") is None
        ),
    )
    assert kube.get("deployment", "chat-v1") is not None
    assert any(e["reason"] == "Deleted" for e in kube.events())


def test_deleting_the_resource_collects_its_children(kube: Kube) -> None:
    kube.apply(EXAMPLE)
    kube.wait_phase("Ready")
    kube.cluster.kubectl("delete", "sitsd", "chat", "-n", kube.ns, "--wait=true", "--timeout=60s")
    kube.wait(
        "children garbage-collected",
        lambda: (
            not kube.items("deployments") and not kube.items("services") and not kube.items("pods")
        ),
        timeout=90,
    )


def test_semantically_wrong_spec_sets_invalid_and_deletes_nothing(kube: Kube) -> None:
    kube.apply(EXAMPLE)
    kube.wait_phase("Ready")
    adapters = {"lora": {"enabled": False, "adapters": [{"name": "support", "source": "/a"}]}}
    kube.apply(with_variants({}, adapters))
    status = kube.wait_phase("Invalid")
    invalid = next(c for c in status["conditions"] if c["type"] == "Invalid")
    assert "spec.variants[1].lora" in invalid["message"]
    assert len(kube.items("deployments")) == 2
    assert len(kube.items("pods")) == 2
    assert any(e["type"] == "Warning" and e["reason"] == "InvalidTrue" for e in kube.events())
    kube.apply(EXAMPLE)
    kube.wait_phase("Ready")


def _versions(kube: Kube) -> dict[str, str]:
    objects = [
        kube.get("sitsdeployment", "chat"),
        *kube.items("deployments"),
        *kube.items("services"),
    ]
    return {
        f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in objects
    }


def test_operator_restart_rewrites_nothing(kube: Kube) -> None:
    kube.apply(EXAMPLE)
    kube.wait_phase("Ready")
    time.sleep(2)  # let the last status write and child status updates settle
    before = _versions(kube)
    kube.operator.restart()
    kube.operator.wait_for_log("resume", f"reconcile loop started for {kube.ns}/chat", timeout=30)
    time.sleep(5)  # several reconcile passes' worth of time
    assert _versions(kube) == before
    assert len(kube.items("deployments")) == 2
    assert len(kube.items("services")) == 3


def test_two_deployments_in_one_namespace_keep_their_own_children(kube: Kube) -> None:
    second = json.loads(json.dumps(EXAMPLE))
    second["metadata"] = {"name": "summarize"}
    for variant in second["spec"]["variants"]:
        variant.pop("gpuProduct")
        variant["migProfile"] = "1g.18gb"
    kube.apply(EXAMPLE)
    kube.apply(second)
    kube.wait_phase("Ready")
    kube.wait_phase("Ready", name="summarize")
    time.sleep(3)  # several more passes of both loops
    names = {d["metadata"]["name"] for d in kube.items("deployments", "chat")}
    names |= {d["metadata"]["name"] for d in kube.items("deployments", "summarize")}
    assert names == {"chat-v1", "chat-v2", "summarize-v1", "summarize-v2"}
    assert not [e for e in kube.events() if e["reason"] == "Deleted"]


def test_crash_looping_candidate_shows_why_and_stable_is_left_alone(kube: Kube) -> None:
    kube.apply(EXAMPLE)
    kube.wait_phase("Ready")
    stable = kube.get("deployment", "chat-v1")
    by_variant = {p["metadata"]["labels"]["sits.dev/variant"]: p for p in kube.items("pods")}
    candidate = by_variant["v2"]["metadata"]["name"]
    last_words = (
        "usage: api_server.py [-h] [--model MODEL] ...\n"
        "api_server.py: error: unrecognized arguments: --max-model-lenght=8192\n"
    )
    patch = crash_looping_status(by_variant["v2"], restarts=3, last_words=last_words)
    kube.cluster.kubectl(
        "patch",
        "pod",
        candidate,
        "-n",
        kube.ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(patch),
    )

    status = kube.wait(
        "the candidate's weight to drop to 0 with the crash in the status",
        lambda: (
            (s := kube.status()).get("phase") == "Degraded" and s.get("candidateWeight") == 0 and s
        ),
    )
    failing = next(c for c in status["conditions"] if c["type"] == "ContainersFailing")
    assert (failing["status"], failing["reason"]) == ("True", "CrashLoopBackOff")
    assert failing["message"].startswith(
        f"variant v2 pod {candidate} container vllm: CrashLoopBackOff after 3 restart(s), "
        "exit code 1 (Error) at 2026-12-02T10:00:04Z: "
    )
    assert "unrecognized arguments: --max-model-lenght=8192" in failing["message"]
    assert status["message"] == failing["message"]
    rows = {v["name"]: v for v in status["variants"]}
    assert (rows["v2"]["restarts"], rows["v2"]["readyReplicas"], rows["v2"]["weight"]) == (3, 0, 0)
    assert (rows["v1"]["restarts"], rows["v1"]["readyReplicas"], rows["v1"]["weight"]) == (
        0,
        1,
        100,
    )
    warnings = [e for e in kube.events() if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == ["ContainersFailingTrue"]
    assert candidate in warnings[0]["message"]
    after = kube.get("deployment", "chat-v1")
    assert after["metadata"]["generation"] == stable["metadata"]["generation"]
    assert after["metadata"]["annotations"] == stable["metadata"]["annotations"]
    v1_pods = [p for p in kube.items("pods") if p["metadata"]["labels"]["sits.dev/variant"] == "v1"]
    assert [p["metadata"]["name"] for p in v1_pods] == [by_variant["v1"]["metadata"]["name"]]
    row = kube.cluster.kubectl("get", "sitsd", "chat", "-n", kube.ns).stdout.splitlines()[1]
    assert row.split()[:5] == ["chat", "Degraded", "v1", "v2", "0"]


POD_DEFAULTS: dict[str, Any] = {
    "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
    "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    ],
    "imagePullSecrets": [{"name": "registry"}],
    "labels": {"team": "ml"},
    "annotations": {"owner": "ml-platform"},
    "podTemplate": {
        "spec": {
            "volumes": [{"name": "dshm", "emptyDir": {"sizeLimit": "8Gi"}}],
            "containers": [{"name": "sits-cache", "resources": {"requests": {"cpu": "500m"}}}],
        }
    },
}


def test_pod_settings_reach_the_pods(kube: Kube) -> None:
    manifest = with_variants({}, {"pod": {"labels": {"team": "search"}, "tolerations": []}})
    manifest["spec"]["podDefaults"] = POD_DEFAULTS
    kube.apply(manifest)
    kube.wait_phase("Ready")
    pods = {p["metadata"]["labels"]["sits.dev/variant"]: p for p in kube.items("pods")}
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    v1, v2 = pods["v1"], pods["v2"]
    assert v1["spec"]["tolerations"][:2] == [gpu, POD_DEFAULTS["tolerations"][0]]
    assert gpu in v2["spec"]["tolerations"]
    assert POD_DEFAULTS["tolerations"][0] not in v2["spec"]["tolerations"], "cleared by v2"
    assert (v1["metadata"]["labels"]["team"], v2["metadata"]["labels"]["team"]) == ("ml", "search")
    for pod in (v1, v2):
        containers = {c["name"]: c for c in pod["spec"]["containers"]}
        assert POD_DEFAULTS["env"][0] in containers["vllm"]["env"]
        assert "HF_TOKEN" not in {e["name"] for e in containers["sits-cache"]["env"]}
        assert containers["sits-cache"]["resources"]["requests"]["cpu"] == "500m"
        assert pod["spec"]["imagePullSecrets"] == [{"name": "registry"}]
        dshm = next(v for v in pod["spec"]["volumes"] if v["name"] == "dshm")
        assert dshm["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
        assert pod["metadata"]["annotations"]["owner"] == "ml-platform"
        assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"

    # What the CRD's rules cannot see (a patch directive) is the operator's to refuse.
    manifest["spec"]["podDefaults"] = {"podTemplate": {"spec": {"$patch": "replace"}}}
    kube.apply(manifest)
    status = kube.wait_phase("Invalid")
    assert "spec.podDefaults.podTemplate.spec.$patch: patch directives" in status["message"]
    assert len(kube.items("pods")) == 2, "an invalid spec changes nothing"


def _old_release_children(kube: Kube) -> list[dict[str, Any]]:
    """The children as an operator release before this one applied them: labelled
    app.kubernetes.io/instance=<name>, without app.kubernetes.io/part-of."""
    owner_obj = kube.get("sitsdeployment", "chat")
    meta = owner_obj["metadata"]
    owner = ObjectRef(name="chat", namespace=kube.ns, uid=meta["uid"])
    children = render_children(owner, parse_spec(owner_obj["spec"]), OperatorSettings())
    for child in children:
        label_sets = [child["metadata"]["labels"]]
        if child["kind"] == "Deployment":
            label_sets.append(child["spec"]["template"]["metadata"]["labels"])
        for labels in label_sets:
            labels.pop("app.kubernetes.io/part-of")
            labels["app.kubernetes.io/instance"] = "chat"
        child["metadata"]["annotations"]["sits.dev/template-hash"] = "old-release"
    return children


def test_upgrade_from_instance_labels_keeps_selectors_and_drops_the_label(kube: Kube) -> None:
    """An operator upgrade relabels the children in place: the Deployments' selectors
    (immutable) stay as they are, server-side apply removes the label it no longer sets,
    and each variant's pods roll once to the new labels."""
    kube.apply(EXAMPLE)
    kube.wait_phase("Ready")
    kube.operator.stop()
    try:
        for child in _old_release_children(kube):
            kube.cluster.kubectl(
                "apply",
                "--server-side",
                "--field-manager=sits-operator",
                "--force-conflicts",
                "-n",
                kube.ns,
                "-f",
                "-",
                input=json.dumps(child),
            )
        old = {d["metadata"]["name"]: d for d in kube.items("deployments")}
        assert old["chat-v1"]["metadata"]["labels"]["app.kubernetes.io/instance"] == "chat"
    finally:
        kube.operator.start()

    def relabelled() -> bool:
        objects = kube.items("deployments") + kube.items("services") + kube.items("pods")
        labels = [o["metadata"]["labels"] for o in objects]
        labels += [d["spec"]["template"]["metadata"]["labels"] for d in kube.items("deployments")]
        return len(objects) == 7 and all(
            "app.kubernetes.io/instance" not in ls and ls.get("app.kubernetes.io/part-of") == "chat"
            for ls in labels
        )

    kube.wait("children and pods relabelled", relabelled, timeout=90)
    kube.wait_phase("Ready")
    for deployment in kube.items("deployments"):
        variant = deployment["metadata"]["labels"]["sits.dev/variant"]
        assert deployment["spec"]["selector"] == {
            "matchLabels": {"sits.dev/deployment": "chat", "sits.dev/variant": variant}
        }
        assert (
            deployment["metadata"]["uid"] == old[deployment["metadata"]["name"]]["metadata"]["uid"]
        )


# -- router builtin: the operator deploys the gateway ----------------------------------

GATEWAY_KINDS = ("serviceaccount", "role", "rolebinding", "deployment", "poddisruptionbudget")


def gateway_objects(kube: Kube) -> dict[str, Any]:
    found = {kind: kube.get(kind, "chat-gateway") for kind in GATEWAY_KINDS}
    return {kind: obj for kind, obj in found.items() if obj is not None}


def all_gateway_objects(kube: Kube) -> dict[str, Any] | None:
    found = gateway_objects(kube)
    return found if len(found) == len(GATEWAY_KINDS) else None


def status_if(kube: Kube, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    status = kube.status()
    return status if check(status) else None


def gateway_behind(status: dict[str, Any]) -> bool:
    return any(
        c["type"] == "TrafficApplied" and c["reason"] in ("GatewayBehind", "GatewayUnavailable")
        for c in status.get("conditions", [])
    )


def can_i(kube: Kube, verb: str, what: str, namespace: str | None = None) -> bool:
    account = f"system:serviceaccount:{kube.ns}:chat-gateway"
    result = kube.cluster.kubectl(
        "auth", "can-i", verb, what, f"--as={account}", "-n", namespace or kube.ns, check=False
    )
    return bool(result.stdout.strip() == "yes")


def test_builtin_router_deploys_the_gateway_with_a_least_privilege_role(kube: Kube) -> None:
    kube.apply(BUILTIN)
    objects = kube.wait("the gateway's objects", lambda: all_gateway_objects(kube))
    deployment = objects["deployment"]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["metadata"]["ownerReferences"][0]["name"] == "chat"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "chat-gateway"
    assert objects["poddisruptionbudget"]["spec"]["minAvailable"] == 1
    root = kube.get("service", "chat")
    assert root["spec"]["selector"] == {
        "sits.dev/deployment": "chat",
        "sits.dev/component": "gateway",
    }
    # What the gateway's Kubernetes source does, and nothing more.
    assert can_i(kube, "get", "sitsdeployments.sits.dev/chat")
    assert can_i(kube, "watch", "sitsdeployments.sits.dev/chat")
    assert not can_i(kube, "get", "sitsdeployments.sits.dev/another")
    assert not can_i(kube, "list", "sitsdeployments.sits.dev")  # only with its name selected
    assert not can_i(kube, "patch", "sitsdeployments.sits.dev/chat")
    for verb in ("get", "list", "watch"):
        assert can_i(kube, verb, "endpointslices.discovery.k8s.io")
    assert not can_i(kube, "list", "endpointslices.discovery.k8s.io", "default")
    assert not can_i(kube, "create", "endpointslices.discovery.k8s.io")
    assert not can_i(kube, "list", "pods")
    assert not can_i(kube, "get", "secrets")
    # The gateway's own list call: its SitsDeployment, selected by name, as that account.
    listed = kube.cluster.kubectl(
        "get",
        "sitsdeployments.sits.dev",
        "-n",
        kube.ns,
        "-o",
        "name",
        "--field-selector=metadata.name=chat",
        f"--as=system:serviceaccount:{kube.ns}:chat-gateway",
    )
    assert listed.stdout.strip() == "sitsdeployment.sits.dev/chat"
    # kwok's pods run no process: nobody answers on /sits/v1/routing, and the status says
    # so instead of showing the decision as traffic's truth.
    status = kube.wait("TrafficApplied False", lambda: status_if(kube, gateway_behind))
    applied = next(c for c in status["conditions"] if c["type"] == "TrafficApplied")
    assert applied["status"] == "False"
    assert status["traffic"]["router"] == "builtin"
    assert status["traffic"]["weights"] == [
        {"variant": "v1", "weight": 90},
        {"variant": "v2", "weight": 10},
    ]
    assert status["traffic"]["gatewayPodsApplied"] == 0
    warnings = [e for e in kube.events() if e["reason"] == "TrafficAppliedFalse"]
    assert warnings, "a gateway behind the decision is a Warning event"
    assert warnings[0]["type"] == "Warning"


def test_switching_the_router_away_from_builtin_prunes_the_gateway(kube: Kube) -> None:
    kube.apply(BUILTIN)
    kube.wait("the gateway's objects", lambda: len(gateway_objects(kube)) == len(GATEWAY_KINDS))
    kube.apply(EXAMPLE)  # router none
    kube.wait("the gateway's objects gone", lambda: not gateway_objects(kube))
    root = kube.get("service", "chat")
    assert root["spec"]["selector"] == {"sits.dev/deployment": "chat"}
    status = kube.wait(
        "status for router none",
        lambda: status_if(kube, lambda s: s.get("traffic", {}).get("router") == "none"),
    )
    assert "TrafficApplied" not in {c["type"] for c in status["conditions"]}
    assert {d["metadata"]["name"] for d in kube.items("deployments")} == {"chat-v1", "chat-v2"}
    deleted = [e["message"] for e in kube.events() if e["reason"] == "Deleted"]
    assert any("Role chat-gateway" in m for m in deleted), deleted
