"""The examples as a user would apply them to a real cluster, through the operator's own
parser, validation and rendering (the CRD's acceptance of them is an integration test,
tests/integration/test_crd_validation.py).

What a real cluster needs and each example must show: a Hugging Face model pinned by
`modelRevision`, the token from a Secret, and a model cache on a claim, with the Secret and
claim manifests in the header and the pod settings in the commented `podDefaults` block
that the header tells users to uncomment. These tests read both comments, so a manifest
that does not match the settings (a renamed Secret, key or claim, a mount vLLM does not
download into) fails here rather than in a user's pod.
"""

from __future__ import annotations

import itertools
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from sits_operator.core import volumes
from sits_operator.core.render import render_variant_deployment
from sits_operator.core.validation import semantic_problems
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import ObjectRef, SitsDeploymentSpec, parse_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
SETTINGS = OperatorSettings()
Obj = dict[str, Any]


def commented_pod_defaults(text: str) -> Obj:
    """The `# podDefaults:` block under spec, uncommented (the integration test reads it the
    same way)."""
    lines = text.splitlines()
    start = lines.index("  # podDefaults:")
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  #   "):
            break
        block.append(line)
    found: Obj = yaml.safe_load(textwrap.dedent("\n".join(x[:2] + x[4:] for x in block)))
    return dict(found["podDefaults"])


def header_manifests(text: str) -> list[Obj]:
    """The documents of the header's `kubectl apply -f - <<'EOF'` ... `EOF` block."""
    match = re.search(r"^#   kubectl apply -f - <<'EOF'\n(.*?)^#   EOF$", text, re.M | re.S)
    assert match, "the header shows the Secret and claim to create first"
    body = "\n".join(line[4:] for line in match[1].splitlines())
    return [doc for doc in yaml.safe_load_all(body) if doc]


def parsed(text: str, **spec_extra: Any) -> tuple[ObjectRef, SitsDeploymentSpec]:
    document = yaml.safe_load(text)
    raw = {**document["spec"], **spec_extra}
    owner = ObjectRef(name=document["metadata"]["name"], namespace="prod", uid="u", generation=1)
    return owner, parse_spec(raw)


def containers(deployment: Obj) -> dict[str, Obj]:
    return {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}


@pytest.fixture(params=EXAMPLES, ids=lambda p: p.name)
def example(request: pytest.FixtureRequest) -> str:
    path: Path = request.param
    return path.read_text()


def test_every_example_is_a_valid_spec_as_it_stands(example: str) -> None:
    _, spec = parsed(example)
    assert semantic_problems(spec, SETTINGS) == []


def test_hugging_face_models_are_pinned_by_a_git_ref(example: str) -> None:
    owner, spec = parsed(example)
    for variant in spec.variants:
        assert volumes.is_hub_model(variant.model), "the examples download from the Hub"
        assert variant.model_revision, f"{variant.name}: modelRevision pins the weights"
        assert variant.model_revision != variant.revision, "a git ref, not the rollout label"
        args = containers(render_variant_deployment(owner, spec, variant, SETTINGS))["vllm"]["args"]
        assert ("--revision", variant.model_revision) in itertools.pairwise(args)


def test_the_real_cluster_settings_are_valid_and_reach_vllm(example: str) -> None:
    pod_defaults = commented_pod_defaults(example)
    owner, spec = parsed(example, podDefaults=pod_defaults)
    assert semantic_problems(spec, SETTINGS) == []
    env = {e["name"]: e for e in pod_defaults["env"]}
    cache_dir = env["HF_HOME"]["value"]
    for variant in spec.variants:
        deployment = render_variant_deployment(owner, spec, variant, SETTINGS)
        pod = deployment["spec"]["template"]["spec"]
        vllm, sidecar = containers(deployment)["vllm"], containers(deployment)["sits-cache"]
        rendered_env = {e["name"]: e for e in vllm["env"]}
        assert rendered_env["HF_TOKEN"] == env["HF_TOKEN"]
        assert rendered_env["HF_HOME"]["value"] == cache_dir
        mounts = {m["mountPath"]: m["name"] for m in vllm["volumeMounts"]}
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in pod["volumes"]
            if "persistentVolumeClaim" in v
        }
        assert claims[mounts[cache_dir]] == "hf-cache", "vLLM downloads into the cache claim"
        assert cache_dir not in {m["mountPath"] for m in sidecar["volumeMounts"]}
        assert "HF_TOKEN" not in {e["name"] for e in sidecar["env"]}, "the token stays in vLLM"
        # The operator's own parts survive the patch.
        assert vllm["image"] == variant.image
        assert {"dshm", volumes.STATE_VOLUME} <= {v["name"] for v in pod["volumes"]}


def header_mismatches(text: str) -> list[str]:
    """Where the header's manifests and the podDefaults block do not fit together."""
    manifests = {doc["kind"]: doc for doc in header_manifests(text)}
    if set(manifests) != {"Secret", "PersistentVolumeClaim"}:
        return [f"the header creates {sorted(manifests)}, not a Secret and a claim"]
    pod_defaults = commented_pod_defaults(text)
    found = []
    secret_ref = pod_defaults["env"][0]["valueFrom"]["secretKeyRef"]
    secret = manifests["Secret"]
    if secret["metadata"]["name"] != secret_ref["name"]:
        found.append(f"Secret {secret['metadata']['name']} vs secretKeyRef {secret_ref['name']}")
    if set(secret.get("stringData", {})) != {secret_ref["key"]}:
        found.append(f"the Secret's keys are not {secret_ref['key']!r}")
    (volume,) = pod_defaults["podTemplate"]["spec"]["volumes"]
    claim = manifests["PersistentVolumeClaim"]
    if claim["metadata"]["name"] != volume["persistentVolumeClaim"]["claimName"]:
        found.append(f"claim {claim['metadata']['name']} vs claimName of the volume")
    # Every variant's pods mount it, on whichever GPU node each lands.
    if claim["spec"]["accessModes"] != ["ReadWriteMany"]:
        found.append(f"accessModes {claim['spec']['accessModes']}")
    if not claim["spec"]["resources"]["requests"].get("storage"):
        found.append("the claim requests no storage")
    return found


def test_the_header_creates_what_the_settings_use(example: str) -> None:
    assert header_mismatches(example) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("claimName: hf-cache}", "claimName: models}"),
        ("secretKeyRef: {name: hf-token, key: token}", "secretKeyRef: {name: hf, key: token}"),
        ("stringData: {token: hf_your_token}", "stringData: {hf_token: hf_your_token}"),
        ("accessModes: [ReadWriteMany]", "accessModes: [ReadWriteOnce]"),
    ],
)
def test_the_check_finds_a_header_that_does_not_fit(old: str, new: str) -> None:
    text = EXAMPLES[0].read_text()
    assert old in text, "the example changed: update this sample"
    assert header_mismatches(text.replace(old, new)) != []
