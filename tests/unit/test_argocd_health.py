"""The Argo CD health check (charts/sits-operator/argocd/health.lua), run by a real Lua
interpreter over SitsDeployments the operator's own code wrote (tests/unit/health_cases.py),
and the kstatus reading of the same objects (Flux, kpt).

Argo CD hands the check the object as a Lua table converted from JSON (gopher-lua: every
number a float, JSON null an absent key); the tables here are built the same way.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.unit.health_cases import CASES, FIXTURE, ROOT, recorded

HEALTH_LUA = ROOT / "charts" / "sits-operator" / "argocd" / "health.lua"
GITOPS_DOC = ROOT / "docs" / "gitops.md"


def lua_interpreter() -> str:
    found = shutil.which("lua5.4") or shutil.which("lua")
    assert found, "no Lua interpreter: scripts/setup.sh installs Debian's lua5.4"
    return found


def lua_literal(value: Any) -> str:
    """A JSON value as a Lua constructor, numbers as floats like Argo CD's gopher-lua."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value))
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return '"' + escaped.replace("\r", "\\r") + '"'
    if isinstance(value, list):
        return "{" + ", ".join(lua_literal(v) for v in value) + "}"
    assert isinstance(value, dict), value
    fields = (f"[{lua_literal(k)}] = {lua_literal(v)}" for k, v in value.items() if v is not None)
    return "{" + ", ".join(fields) + "}"


def argocd_health(obj: dict[str, Any], tmp_path: Path) -> tuple[str, str]:
    """(hs.status, hs.message) of the check for `obj`, as Argo CD would compute them."""
    script = tmp_path / "run.lua"
    script.write_text(
        f"obj = {lua_literal(obj)}\n"
        f"local hs = dofile({lua_literal(str(HEALTH_LUA))})\n"
        'io.write(hs.status, "\\0", hs.message or "")\n'
    )
    done = subprocess.run(
        [lua_interpreter(), str(script)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    status, message = done.stdout.split("\0")
    return status, message


def kstatus(obj: dict[str, Any]) -> str:
    """sigs.k8s.io/cli-utils kstatus for a custom resource (checkGenericProperties):
    observedGeneration behind -> InProgress; Reconciling True -> InProgress; Stalled True
    -> Failed; otherwise Current."""
    status = obj.get("status") or {}
    observed = status.get("observedGeneration")
    if observed is not None and observed != obj["metadata"].get("generation"):
        return "InProgress"
    for cond in status.get("conditions") or []:
        if cond["type"] == "Reconciling" and cond["status"] == "True":
            return "InProgress"
        if cond["type"] == "Stalled" and cond["status"] == "True":
            return "Failed"
    return "Current"


@pytest.mark.parametrize("name", list(CASES))
def test_argocd_health_of_what_the_operator_writes(name: str, tmp_path: Path) -> None:
    build, expected, _ = CASES[name]
    obj = build()
    status, message = argocd_health(obj, tmp_path)
    assert status == expected, (name, message)
    seen = obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    if seen and obj["status"].get("message"):
        assert message == obj["status"]["message"], "the operator's words, untouched"
    else:
        assert message, "a message even before the operator wrote one"


def test_generation_behind_says_which_generation_is_awaited(tmp_path: Path) -> None:
    obj = CASES["spec-edited-not-yet-observed"][0]()
    assert argocd_health(obj, tmp_path)[1] == (
        "waiting for the SITS operator to observe generation 4 (status is of generation 3)"
    )


@pytest.mark.parametrize("name", list(CASES))
def test_kstatus_reading(name: str) -> None:
    """What Flux's and kpt's kstatus make of the same object, and Ready agrees with it."""
    build, _, expected = CASES[name]
    obj = build()
    assert kstatus(obj) == expected
    conditions = {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}
    if conditions and obj["metadata"]["generation"] == obj["status"]["observedGeneration"]:
        assert (conditions["Ready"] == "True") == (expected == "Current"), conditions
        true = [t for t in ("Ready", "Reconciling", "Stalled") if conditions[t] == "True"]
        assert len(true) == 1, conditions


def projection(obj: dict[str, Any]) -> dict[str, Any]:
    """What a health reader looks at; the rest of the status may grow freely."""
    status = obj.get("status") or {}
    return {
        "generation": obj["metadata"].get("generation"),
        "observedGeneration": status.get("observedGeneration"),
        "phase": status.get("phase"),
        "conditions": sorted(
            (c["type"], c["status"], c["reason"]) for c in status.get("conditions") or []
        ),
    }


def test_recorded_fixture_matches_what_the_operator_writes_today(tmp_path: Path) -> None:
    """The JSON fixture (for trying the check by hand) may not drift from the operator:
    regenerate it with `.venv/bin/python -m tests.unit.health_cases` when this fails."""
    fixture = json.loads(FIXTURE.read_text())
    fresh = recorded()
    assert [c["name"] for c in fixture] == [c["name"] for c in fresh]
    for old, new in zip(fixture, fresh, strict=True):
        assert projection(old["object"]) == projection(new["object"]), old["name"]
        assert (old["argocd"], old["kstatus"]) == (new["argocd"], new["kstatus"])
        assert argocd_health(old["object"], tmp_path)[0] == old["argocd"], old["name"]


def test_check_stays_within_argo_cds_lua_5_1() -> None:
    """Argo CD runs gopher-lua (Lua 5.1): none of 5.2+'s syntax, which lua5.4 would accept."""
    code = "\n".join(line.split("--", 1)[0] for line in HEALTH_LUA.read_text().splitlines())
    for pattern in (r"\bgoto\b", r"//", r"<const>", r"<close>", r"[&|~]|<<|>>", r"::\w+::"):
        assert not re.search(pattern, code.replace("~=", "")), pattern


def test_docs_show_the_check_exactly() -> None:
    """docs/gitops.md's argocd-cm snippet is the shipped file, line for line."""
    doc = GITOPS_DOC.read_text()
    block = re.search(
        r"resource\.customizations\.health\.sits\.dev_SitsDeployment: \|\n(.*?)```", doc, re.S
    )
    assert block, "the argocd-cm snippet"
    lines = [line[4:] if line.strip() else "" for line in block.group(1).rstrip().splitlines()]
    assert lines == HEALTH_LUA.read_text().rstrip().splitlines()
