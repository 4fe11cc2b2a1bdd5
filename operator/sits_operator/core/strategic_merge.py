"""A pragmatic strategic merge patch for pod templates, pure and without the API server.

Why not a JSON merge patch: a user's `podTemplate` patch names the vLLM container to add
a volume mount to it, and a JSON merge patch would replace the whole `containers` list
(dropping the sidecar and every field the operator set). Kubernetes' strategic merge merges
such lists by a key instead; this module does the same for the lists of a pod template that
users patch, following the `patchMergeKey`s of the Kubernetes API:

- maps merge key by key, recursively; a `null` value removes the key;
- the lists in MERGE_KEYS merge item by item on their key (patch items with a new key are
  appended, in the patch's order);
- every other list, and every scalar, is replaced by the patch's value.

Patch directives (`$patch`, `$retainKeys`, `$setElementOrder/...`, `$deleteFromPrimitiveList`)
are not supported: core/pod_validation.py rejects them, so they never get here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

# Field name -> the key its list items merge on (the Kubernetes API's patchMergeKey).
MERGE_KEYS: Mapping[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "hostAliases": "ip",
}


def strategic_merge(base: Any, patch: Any, field: str | None = None) -> Any:
    """`base` with `patch` merged in; neither argument is modified."""
    if isinstance(base, dict) and isinstance(patch, dict):
        return _merge_maps(base, patch)
    key = MERGE_KEYS.get(field or "")
    if key is not None and _keyed_list(base, key) and _keyed_list(patch, key):
        return _merge_lists(base, patch, key)
    return copy.deepcopy(patch)


def _merge_maps(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif key in merged:
            merged[key] = strategic_merge(merged[key], value, key)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _keyed_list(value: Any, key: str) -> bool:
    """A list whose every item is a map carrying the merge key (an empty list is one)."""
    return isinstance(value, list) and all(isinstance(i, dict) and key in i for i in value)


def _merge_lists(
    base: list[dict[str, Any]], patch: list[dict[str, Any]], key: str
) -> list[dict[str, Any]]:
    """Items of `base` in their order, each merged with the patch's item of the same key,
    then the patch's items with new keys."""
    patches = {item[key]: item for item in patch}
    merged = [
        _merge_maps(item, patches[item[key]]) if item[key] in patches else copy.deepcopy(item)
        for item in base
    ]
    known = {item[key] for item in base}
    merged += [copy.deepcopy(item) for item in patch if item[key] not in known]
    return merged
