"""Data a variant's pods read from PersistentVolumeClaims: models, vector indexes, adapters.

Why `pvc://<claim>/<path>` references: model weights, an index built by `sits-index
build`, or a set of adapters, are data the platform team produces once and many pods read.
A claim mounted read-only is the Kubernetes way to share it; users name the file, the
operator does the mounting and hands the containers the path. Adapters and the index are
mounted into both containers at the same path (vLLM loads adapters by path through its
runtime API, the sidecar hashes them and opens the index); the model only into vLLM, the
one container that reads it.
Plain absolute paths pass through untouched (data baked into the image or mounted by
other means); Hugging Face repository ids pass through for models and adapters (vLLM
fetches them).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from sits_operator.model.spec import Variant

PVC_SCHEME = "pvc://"
MOUNT_ROOT = "/var/lib/sits/volumes"
STATE_DIR = "/var/lib/sits/state"
STATE_VOLUME = "sits-cache-state"

_CLAIM_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_HF_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# Models may also carry a legacy Hub id without an organisation ("gpt2").
_HF_MODEL_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://")


@dataclass(frozen=True)
class ClaimRef:
    claim: str
    subpath: str


def parse_claim_ref(reference: str) -> ClaimRef | None:
    """`pvc://claim/sub/path` -> ClaimRef; None for anything else. Raises on a bad claim."""
    if not reference.startswith(PVC_SCHEME):
        return None
    claim, _, subpath = reference[len(PVC_SCHEME) :].partition("/")
    if not _CLAIM_NAME.match(claim):
        raise ValueError(f"{claim!r} is not a PersistentVolumeClaim name")
    if any(part == ".." for part in subpath.split("/")):
        raise ValueError("the path inside the claim must not contain '..'")
    return ClaimRef(claim, subpath.strip("/"))


def reference_problem(reference: str, *, allow_hub_id: bool) -> str | None:
    """Why a data reference cannot be served, or None when it can."""
    try:
        if parse_claim_ref(reference) is not None:
            return None
    except ValueError as error:
        return f"{reference!r}: {error}"
    if reference.startswith("/"):
        return None
    scheme = _SCHEME.match(reference)
    if scheme:
        return (
            f"{reference!r}: scheme {scheme.group(1)}:// is not supported; use "
            "pvc://<claim>/<path> or an absolute path in the pod"
        )
    if allow_hub_id and _HF_REPO_ID.match(reference):
        return None
    hint = ", or a Hugging Face repository id" if allow_hub_id else ""
    return f"{reference!r}: expected pvc://<claim>/<path>, an absolute path in the pod{hint}"


def _volume_name(claim: str) -> str:
    # Volume names are DNS-1123 labels (63 chars); claim names may be 253: hash them.
    return "pvc-" + hashlib.sha256(claim.encode()).hexdigest()[:12]


def resolve(reference: str) -> str:
    """The path both containers see for a reference (unchanged unless it is pvc://)."""
    try:
        ref = parse_claim_ref(reference)
    except ValueError:
        return reference
    if ref is None:
        return reference
    return f"{MOUNT_ROOT}/{ref.claim}/{ref.subpath}".rstrip("/")


def is_hub_model(model: str) -> bool:
    """A Hugging Face repository id (which a git ref, modelRevision, can pin)."""
    return _HF_MODEL_ID.match(model) is not None


def model_problem(model: str) -> str | None:
    """Why vLLM could not load `model`, or None: a pvc:// model names a path in its claim."""
    try:
        ref = parse_claim_ref(model)
    except ValueError as error:
        return f"{model!r}: {error}"
    if ref is not None:
        return None if ref.subpath else f"{model!r}: expected pvc://<claim>/<path>, with a path"
    if model.startswith("/") or is_hub_model(model):
        return None
    scheme = _SCHEME.match(model)
    if scheme:
        return (
            f"{model!r}: scheme {scheme.group(1)}:// is not supported; use a Hugging Face "
            "repository id, pvc://<claim>/<path> or an absolute path in the pod"
        )
    return (
        f"{model!r}: expected a Hugging Face repository id (org/name), "
        "pvc://<claim>/<path> or an absolute path in the pod"
    )


def _shared_references(variant: Variant) -> list[str]:
    """References both containers read: adapters and the vector index."""
    refs = [a.source for a in variant.lora.adapters] if variant.serves_adapters else []
    if variant.cache.vector_index.enabled and variant.cache.vector_index.index_ref:
        refs.append(variant.cache.vector_index.index_ref)
    return refs


def _claims_of(references: list[str]) -> list[str]:
    """Every claim the references name, sorted so manifests are stable."""
    found: set[str] = set()
    for reference in references:
        try:
            ref = parse_claim_ref(reference)
        except ValueError:
            continue  # validation reports it; rendering never runs for invalid specs
        if ref is not None:
            found.add(ref.claim)
    return sorted(found)


def claims(variant: Variant) -> list[str]:
    """Every claim the pod mounts: the model's and the shared ones."""
    return _claims_of([variant.model, *_shared_references(variant)])


def claim_volumes(variant: Variant) -> list[dict[str, Any]]:
    return [
        {
            "name": _volume_name(claim),
            "persistentVolumeClaim": {"claimName": claim, "readOnly": True},
        }
        for claim in claims(variant)
    ]


def _mounts(claim_names: list[str]) -> list[dict[str, Any]]:
    return [
        {"name": _volume_name(claim), "mountPath": f"{MOUNT_ROOT}/{claim}", "readOnly": True}
        for claim in claim_names
    ]


def vllm_claim_mounts(variant: Variant) -> list[dict[str, Any]]:
    """vLLM reads the model and the shared data (adapters by the paths the sidecar hands it)."""
    return _mounts(claims(variant))


def sidecar_claim_mounts(variant: Variant) -> list[dict[str, Any]]:
    """The sidecar reads adapters and the index, never the model's weights."""
    return _mounts(_claims_of(_shared_references(variant)))
