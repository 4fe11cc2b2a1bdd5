"""pvc:// data references: validation names the field, rendering mounts one path for both."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sits_operator.core.render import render_children
from sits_operator.core.validation import semantic_problems
from sits_operator.model.settings import OperatorSettings
from tests.unit.factories import OWNER, spec, variant

ADAPTERS = {
    "adapters": [
        {"name": "support", "source": "pvc://adapters/support/v2", "pinned": True},
        {"name": "sql", "source": "acme/sql-lora"},
        {"name": "local", "source": "/opt/adapters/local"},
    ]
}
INDEX = {"vectorIndex": {"enabled": True, "indexRef": "pvc://rag-indexes/docs-v3"}}


def _pod(first: dict[str, Any]) -> dict[str, Any]:
    manifests = render_children(OWNER, spec(first), OperatorSettings())
    deployment = next(m for m in manifests if m["kind"] == "Deployment")
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in pod["containers"] if c["name"] == name)
    return found


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        pytest.param(
            {"lora": {"adapters": [{"name": "a", "source": "s3://bucket/a"}]}},
            "spec.variants[0].lora.adapters[0].source: 's3://bucket/a': scheme s3:// is not",
            id="adapter-s3",
        ),
        pytest.param(
            {"lora": {"adapters": [{"name": "a", "source": "pvc://Bad_Claim/a"}]}},
            "spec.variants[0].lora.adapters[0].source: 'pvc://Bad_Claim/a': 'Bad_Claim' is not",
            id="adapter-bad-claim",
        ),
        pytest.param(
            {"lora": {"adapters": [{"name": "a", "source": "pvc://c/../etc"}]}},
            "must not contain '..'",
            id="adapter-parent-dir",
        ),
        pytest.param(
            {"lora": {"adapters": [{"name": "a", "source": "relative/dir/x"}]}},
            "spec.variants[0].lora.adapters[0].source: 'relative/dir/x': expected pvc://",
            id="adapter-relative-path",
        ),
        pytest.param(
            {"cache": {"vectorIndex": {"enabled": True, "indexRef": "acme/index"}}},
            "spec.variants[0].cache.vectorIndex.indexRef: 'acme/index': expected pvc://",
            id="index-hub-id-not-allowed",
        ),
        pytest.param(
            {"cache": {"vectorIndex": {"enabled": True, "indexRef": "https://x/y"}}},
            "spec.variants[0].cache.vectorIndex.indexRef: 'https://x/y': scheme https://",
            id="index-https",
        ),
    ],
)
def test_unservable_references_name_the_field(extra: dict[str, Any], fragment: str) -> None:
    problems = semantic_problems(spec(variant(**extra)), OperatorSettings())
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({"lora": ADAPTERS}, id="pvc-hub-and-path-adapters"),
        pytest.param({"cache": INDEX}, id="pvc-index"),
        pytest.param(
            {"cache": {"vectorIndex": {"enabled": True, "indexRef": "/data/index"}}},
            id="path-index",
        ),
    ],
)
def test_servable_references_pass(extra: dict[str, Any]) -> None:
    assert semantic_problems(spec(variant(**extra)), OperatorSettings()) == []


def test_claims_are_mounted_read_only_into_both_containers_at_the_same_path() -> None:
    pod = _pod(variant(lora=ADAPTERS, cache=INDEX))
    claims = {
        v["persistentVolumeClaim"]["claimName"]: v["name"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert sorted(claims) == ["adapters", "rag-indexes"]
    assert all(
        v["persistentVolumeClaim"]["readOnly"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    )
    for name in ("vllm", "sits-cache"):
        mounts = {m["name"]: m for m in _container(pod, name)["volumeMounts"]}
        for claim, volume in claims.items():
            assert mounts[volume]["mountPath"] == f"/var/lib/sits/volumes/{claim}"
            assert mounts[volume]["readOnly"] is True


def test_sidecar_sees_resolved_paths_and_a_writable_state_dir() -> None:
    pod = _pod(variant(lora=ADAPTERS, cache=INDEX))
    sidecar = _container(pod, "sits-cache")
    env = _env(sidecar)
    assert env["SITS_CACHE_VECTOR_INDEX"] == "/var/lib/sits/volumes/rag-indexes/docs-v3"
    sources = {a["name"]: a["source"] for a in json.loads(env["SITS_CACHE_LORA_ADAPTERS"])}
    assert sources == {
        "support": "/var/lib/sits/volumes/adapters/support/v2",
        "sql": "acme/sql-lora",
        "local": "/opt/adapters/local",
    }
    state = {m["name"]: m["mountPath"] for m in sidecar["volumeMounts"]}["sits-cache-state"]
    assert env["SITS_CACHE_STATE_DIR"] == state
    assert any(v["name"] == "sits-cache-state" and "emptyDir" in v for v in pod["volumes"])


def test_no_claims_no_claim_volumes() -> None:
    pod = _pod(variant())
    assert not [v for v in pod["volumes"] if "persistentVolumeClaim" in v]


def _mounted_claims(container: dict[str, Any]) -> dict[str, str]:
    return {
        m["mountPath"].rsplit("/", 1)[-1]: m["name"]
        for m in container["volumeMounts"]
        if m["mountPath"].startswith("/var/lib/sits/volumes/")
    }


@pytest.mark.parametrize(
    ("extra", "vllm_claims", "sidecar_claims"),
    [
        pytest.param({"model": "pvc://models/qwen3/v2"}, ["models"], [], id="model-only-in-vllm"),
        pytest.param(
            {"model": "pvc://adapters/base", "lora": ADAPTERS},
            ["adapters"],
            ["adapters"],
            id="model-and-adapters-share-a-claim",
        ),
        pytest.param(
            {"model": "pvc://models/base", "cache": INDEX},
            ["models", "rag-indexes"],
            ["rag-indexes"],
            id="model-claim-beside-the-index-claim",
        ),
        pytest.param({"model": "Qwen/Qwen3-1.7B"}, [], [], id="hub-model-mounts-nothing"),
    ],
)
def test_a_pvc_model_is_mounted_read_only_into_vllm(
    extra: dict[str, Any], vllm_claims: list[str], sidecar_claims: list[str]
) -> None:
    pod = _pod(variant(**extra))
    volumes = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert sorted(v["persistentVolumeClaim"]["claimName"] for v in volumes) == vllm_claims
    assert all(v["persistentVolumeClaim"]["readOnly"] for v in volumes)
    vllm = _container(pod, "vllm")
    assert sorted(_mounted_claims(vllm)) == vllm_claims
    assert all(m["readOnly"] for m in vllm["volumeMounts"] if m["name"].startswith("pvc-"))
    assert sorted(_mounted_claims(_container(pod, "sits-cache"))) == sidecar_claims


def test_vllm_loads_a_pvc_model_from_where_its_claim_is_mounted() -> None:
    vllm = _container(_pod(variant(model="pvc://models/qwen3/v2")), "vllm")
    args = vllm["args"]
    mount = next(m for m in vllm["volumeMounts"] if m["name"].startswith("pvc-"))
    assert args[args.index("--model") + 1] == f"{mount['mountPath']}/qwen3/v2"


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        pytest.param(
            {"model": "pvc://models"},
            "spec.variants[0].model: 'pvc://models': expected pvc://<claim>/<path>, with a path",
            id="pvc-model-without-path",
        ),
        pytest.param(
            {"model": "pvc://models/"},
            "spec.variants[0].model: 'pvc://models/': expected pvc://<claim>/<path>, with a path",
            id="pvc-model-empty-path",
        ),
        pytest.param(
            {"model": "pvc://Models/x"},
            "spec.variants[0].model: 'pvc://Models/x': 'Models' is not a PersistentVolumeClaim",
            id="pvc-model-bad-claim",
        ),
        pytest.param(
            {"model": "pvc://models/../etc"},
            "spec.variants[0].model: 'pvc://models/../etc': the path inside the claim must not",
            id="pvc-model-parent-dir",
        ),
        pytest.param(
            {"model": "s3://bucket/qwen"},
            "spec.variants[0].model: 's3://bucket/qwen': scheme s3:// is not supported",
            id="model-s3",
        ),
        pytest.param(
            {"model": "models/qwen/v2"},
            "spec.variants[0].model: 'models/qwen/v2': expected a Hugging Face repository id",
            id="model-relative-path",
        ),
        pytest.param(
            {"model": "pvc://models/qwen", "modelRevision": "main"},
            "spec.variants[0].modelRevision: 'main' is a Hugging Face git ref; model "
            "'pvc://models/qwen' is not a Hugging Face repository id",
            id="model-revision-with-pvc-model",
        ),
        pytest.param(
            {"model": "/models/qwen", "modelRevision": "main"},
            "spec.variants[0].modelRevision: 'main' is a Hugging Face git ref",
            id="model-revision-with-absolute-path",
        ),
    ],
)
def test_unloadable_models_name_the_field(extra: dict[str, Any], fragment: str) -> None:
    problems = semantic_problems(spec(variant(**extra)), OperatorSettings())
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({"model": "Qwen/Qwen3-1.7B"}, id="hub-id"),
        pytest.param({"model": "Qwen/Qwen3-1.7B", "modelRevision": "refs/pr/12"}, id="hub-ref"),
        pytest.param({"model": "gpt2", "modelRevision": "main"}, id="legacy-hub-id"),
        pytest.param({"model": "pvc://models/qwen3-1.7b"}, id="pvc-model"),
        pytest.param({"model": "/opt/models/qwen"}, id="path-in-the-image"),
    ],
)
def test_loadable_models_pass(extra: dict[str, Any]) -> None:
    assert semantic_problems(spec(variant(**extra)), OperatorSettings()) == []
