"""What every child manifest shares: owner reference, metadata, content hash.

Its own module so that the variants' rendering (core/render.py) and the gateway's
(core/gateway.py) use one definition without importing each other in a circle.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sits_operator.core import naming
from sits_operator.model.spec import API_GROUP, API_VERSION, KIND, ObjectRef

Manifest = dict[str, Any]

# The kubelet copies the last log lines into a failed container's termination message,
# which the operator shows in the ContainersFailing condition (core/containers.py).
TERMINATION_MESSAGE_POLICY = "FallbackToLogsOnError"


def owner_reference(owner: ObjectRef) -> dict[str, Any]:
    """Controller reference: the garbage collector deletes children with their owner."""
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": KIND,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def template_hash(manifest: Manifest) -> str:
    """Stable digest of a manifest's content (key order does not matter)."""
    canonical = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def with_hash(manifest: Manifest) -> Manifest:
    """The manifest with its content hash annotated: the plan skips unchanged applies."""
    digest = template_hash(manifest)
    manifest["metadata"].setdefault("annotations", {})[naming.ANNOTATION_TEMPLATE_HASH] = digest
    return manifest


def metadata(owner: ObjectRef, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": owner.namespace,
        "labels": labels,
        "ownerReferences": [owner_reference(owner)],
    }
