"""No SitsDeployment field is accepted and ignored.

Walks `spec` of the CRD's schema (crds/sitsdeployment.yaml): every property must be parsed
by a field of the typed spec (model/spec.py, matched by its camelCase alias), and every
such field must be read by the operator's code outside the model, as an attribute access
(`spec.rollout.interval` once was accepted, documented and read by nothing). Kubernetes
objects passed through as the user wrote them (env, tolerations, affinity, a pod
template patch) are leaves: the API server validates their inside.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel

from sits_operator.model.spec import LoraAdapter, SitsDeploymentSpec

ROOT = Path(__file__).resolve().parents[2]
CRD = yaml.safe_load((ROOT / "crds" / "sitsdeployment.yaml").read_text())
SPEC_SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
OPERATOR = ROOT / "operator" / "sits_operator"
MODEL_FILE = OPERATOR / "model" / "spec.py"
# Models the operator hands on whole (model_dump) rather than field by field, and where.
DUMPED_WHOLE: dict[type[BaseModel], str] = {
    LoraAdapter: "core/render.py dumps each adapter into SITS_CACHE_LORA_ADAPTERS",
}
# Fields another component reads from the SitsDeployment itself, by their camelCase keys:
# the built-in gateway's session policy (it watches its SitsDeployment).
KUBE_SOURCE = ROOT / "inference_image" / "sits_inference" / "gateway" / "sources" / "kube_model.py"
READ_ELSEWHERE = {"spec.traffic.stickySession": KUBE_SOURCE}


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The model inside X, X | None, tuple[X, ...]; None for plain values and dicts."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType, tuple):
        for arg in get_args(annotation):
            found = nested_model(arg)
            if found is not None:
                return found
    return None


def properties(schema: dict[str, Any]) -> dict[str, Any]:
    """An object's properties, or those of an array's items."""
    return dict(schema.get("properties") or (schema.get("items") or {}).get("properties") or {})


def field_for(model: type[BaseModel], key: str) -> str | None:
    for name, info in model.model_fields.items():
        if key in (info.alias, name):
            return name
    return None


def refused(schema: dict[str, Any], key: str) -> bool:
    """The property is in the schema only to be rejected by name: a CEL rule on its
    parent refuses any object that has it (spec.analysis.prometheus)."""
    rules = [v.get("rule", "") for v in schema.get("x-kubernetes-validations") or ()]
    return f"!has(self.{key})" in rules


def walk(
    schema: dict[str, Any], model: type[BaseModel], path: str
) -> Iterator[tuple[str, type[BaseModel], str | None]]:
    """(path, model, field name or None when no field parses it) for every property
    but those the CRD refuses by name."""
    for key, child in properties(schema).items():
        if refused(schema, key):
            continue
        name = field_for(model, key)
        yield f"{path}.{key}", model, name
        nested = nested_model(model.model_fields[name].annotation) if name else None
        if nested is not None:
            yield from walk(child, nested, f"{path}.{key}")


def keys_read(source: Path) -> set[str]:
    """Every string literal in a module that reads the raw object (its dictionary keys)."""
    tree = ast.parse(source.read_text())
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def read_elsewhere(path: str) -> bool:
    """The path (and every key on the way below the reader's prefix) is read by its reader."""
    for prefix, reader in READ_ELSEWHERE.items():
        if path == prefix or path.startswith(prefix + "."):
            keys = keys_read(reader)
            return all(key in keys for key in path.split(".")[prefix.count(".") :])
    return False


def attributes_read(root: Path, skip: Path) -> set[str]:
    """Every attribute name accessed (x.name) in the operator's code, but the model's own."""
    names: set[str] = set()
    for source in root.rglob("*.py"):
        if source != skip:
            tree = ast.parse(source.read_text())
            names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    return names


FIELDS = list(walk(SPEC_SCHEMA, SitsDeploymentSpec, "spec"))
READ = attributes_read(OPERATOR, MODEL_FILE)


def test_only_these_fields_are_refused_by_name() -> None:
    """A SitsDeployment may not choose where SLIs come from (SitsPolicy spec.prometheus);
    tolerations go in the pod settings, not in the pod template patch."""

    def found(schema: dict[str, Any], path: str) -> Iterator[str]:
        for key, child in properties(schema).items():
            if refused(schema, key):
                yield f"{path}.{key}"
            yield from found(child, f"{path}.{key}")

    assert set(found(SPEC_SCHEMA, "spec")) == {
        "spec.analysis.prometheus",
        "spec.podDefaults.podTemplate.spec.tolerations",
        "spec.variants.pod.podTemplate.spec.tolerations",
    }


def test_the_walk_covers_the_schema() -> None:
    paths = {path for path, _, _ in FIELDS}
    assert {"spec.rollout.interval", "spec.variants.cache.lora.maxResident"} <= paths
    assert len(paths) > 100


@pytest.mark.parametrize(("path", "model", "name"), FIELDS, ids=[p for p, _, _ in FIELDS])
def test_every_field_is_parsed_and_read(
    path: str, model: type[BaseModel], name: str | None
) -> None:
    assert name is not None, f"{path}: the CRD accepts it, {model.__name__} does not parse it"
    if model in DUMPED_WHOLE or read_elsewhere(path):
        return
    assert name in READ, f"{path}: parsed as {model.__name__}.{name}, read by no code"


def test_the_check_fails_for_a_field_nobody_reads() -> None:
    """The same walk over a schema with a field the model lacks, and one no code reads."""

    class Probe(BaseModel):
        read_me: int = 0
        never_read_anywhere_xyz: int = 0

    schema: dict[str, Any] = {
        "properties": {"readMe": {}, "never_read_anywhere_xyz": {}, "extra": {}}
    }
    found = {path: name for path, _, name in walk(schema, Probe, "spec")}
    assert found == {
        "spec.readMe": None,  # no alias: the camelCase name matches no field
        "spec.never_read_anywhere_xyz": "never_read_anywhere_xyz",
        "spec.extra": None,
    }
    assert "never_read_anywhere_xyz" not in READ
    assert read_elsewhere("spec.traffic.stickySession.header")
    assert not read_elsewhere("spec.traffic.stickySession.neverReadAnywhereXyz")
    assert not read_elsewhere("spec.traffic.router")
