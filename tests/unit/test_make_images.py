"""`make images` (scripts/build-images.sh) against stub builders: which builder it picks,
what it builds under which references, and that those are the references the chart and
the operator pull by default. No Docker engine or buildah runs here: the stubs record
their arguments, and the script's refusals are checked on copies of the files it reads."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from sits_operator.model.settings import OperatorSettings

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build-images.sh"
CHART = ROOT / "charts" / "sits-operator"
BASH = shutil.which("bash") or "/bin/bash"
# The stub builder: one line per call (working directory, then the arguments), exit 0.
STUB = f"""#!{BASH}
printf '%s\\t%s\\n' "$PWD" "$*" >>"$STUB_LOG"
"""


def project_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


def chart_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return values


def stub_bin(tmp_path: Path, *names: str) -> Path:
    """A directory holding only the stub builders named: the script's whole PATH."""
    directory = tmp_path / "bin"
    directory.mkdir(exist_ok=True)
    for name in names:
        stub = directory / name
        stub.write_text(STUB)
        stub.chmod(0o755)
    return directory


def run_script(
    tmp_path: Path, path: Path, script: Path = SCRIPT, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[tuple[str, list[str]]]]:
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    result = subprocess.run(
        [BASH, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": str(path), "STUB_LOG": str(log), **env},
    )
    lines = log.read_text().splitlines() if log.exists() else []
    calls = [(cwd, args.split()) for cwd, _, args in (line.partition("\t") for line in lines)]
    return result, calls


def expected_builds(verb: list[str], operator: str, inference: str) -> list[list[str]]:
    return [
        [*verb, "-f", "operator/Dockerfile", "-t", operator, "."],
        [*verb, "-f", "inference_image/Dockerfile", "-t", inference, "."],
    ]


# -- the chart's references are the project's version -----------------------------------------


def test_the_chart_pulls_the_projects_version_and_the_operator_defaults_to_the_chart() -> None:
    version = project_version()
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = chart_values()
    assert str(chart["appVersion"]) == version
    assert not values["image"]["tag"], "the operator's tag is the appVersion"
    repository, _, tag = values["inferenceImage"].rpartition(":")
    assert tag == version
    assert repository.rsplit("/", 1)[1] == "sits-inference"
    # Without the chart (sits-operator run by hand), the operator renders the same image.
    defaults = OperatorSettings()
    assert defaults.cache_sidecar_image == defaults.gateway_image == values["inferenceImage"]


def test_the_chart_passes_the_data_plane_image_to_the_sidecar_and_the_gateway() -> None:
    template = (CHART / "templates" / "deployment.yaml").read_text()
    expected = {
        "SITS_CACHE_SIDECAR_IMAGE": "value: {{ .Values.inferenceImage | quote }}",
        # gatewayImage (empty by default) only when the gateway comes from elsewhere
        "SITS_GATEWAY_IMAGE": (
            "value: {{ .Values.gatewayImage | default .Values.inferenceImage | quote }}"
        ),
    }
    for variable, value in expected.items():
        after = template.split(f"- name: {variable}", 1)[1].splitlines()[1]
        assert after.strip() == value, variable
    assert not chart_values()["gatewayImage"]


# -- the script ---------------------------------------------------------------------------------


def test_with_docker_it_builds_both_images_as_the_chart_names_them(tmp_path: Path) -> None:
    result, calls = run_script(tmp_path, stub_bin(tmp_path, "docker", "buildah"))
    assert result.returncode == 0, result.stderr
    values, version = chart_values(), project_version()
    operator = f"{values['image']['repository']}:{version}"
    assert calls[0][1] == ["info"], "docker counts only with a daemon that answers"
    builds = [args for _, args in calls[1:]]
    assert builds == expected_builds(["build"], operator, values["inferenceImage"])
    assert {cwd for cwd, _ in calls[1:]} == {str(ROOT)}, "built from the repository root"
    assert f"built: {operator} {values['inferenceImage']}" in result.stdout


def test_without_docker_it_uses_buildah_bud(tmp_path: Path) -> None:
    result, calls = run_script(tmp_path, stub_bin(tmp_path, "buildah"))
    assert result.returncode == 0, result.stderr
    values, version = chart_values(), project_version()
    operator = f"{values['image']['repository']}:{version}"
    assert [a for _, a in calls] == expected_builds(["bud"], operator, values["inferenceImage"])


def test_a_docker_without_a_daemon_falls_back_to_buildah(tmp_path: Path) -> None:
    directory = stub_bin(tmp_path, "buildah")
    (directory / "docker").write_text(f"#!{BASH}\nexit 1\n")  # `docker info` fails
    (directory / "docker").chmod(0o755)
    result, calls = run_script(tmp_path, directory)
    assert result.returncode == 0, result.stderr
    assert [args[0] for _, args in calls] == ["bud", "bud"]


@pytest.mark.parametrize("names", [(), ("docker-broken",)], ids=["nothing", "docker-no-daemon"])
def test_without_a_builder_it_says_so_and_fails(tmp_path: Path, names: tuple[str, ...]) -> None:
    directory = stub_bin(tmp_path)
    if names:
        (directory / "docker").write_text(f"#!{BASH}\nexit 1\n")
        (directory / "docker").chmod(0o755)
    result, calls = run_script(tmp_path, directory)
    assert result.returncode == 1
    assert "buildah" in result.stderr
    assert "docker" in result.stderr
    assert ("daemon does not answer" in result.stderr) == bool(names)
    assert "sits_localcluster.images build" in result.stderr, "points to what needs neither"
    assert calls == []


def test_another_registry_keeps_the_names_and_the_tag(tmp_path: Path) -> None:
    result, calls = run_script(
        tmp_path, stub_bin(tmp_path, "buildah"), SITS_IMAGE_REGISTRY="registry.example:5000/ml/"
    )
    assert result.returncode == 0, result.stderr
    version = project_version()
    assert [a[4] for _, a in calls] == [
        f"registry.example:5000/ml/sits-operator:{version}",
        f"registry.example:5000/ml/sits-inference:{version}",
    ]


def test_extra_build_arguments_reach_both_builds(tmp_path: Path) -> None:
    result, calls = run_script(
        tmp_path,
        stub_bin(tmp_path, "buildah"),
        SITS_IMAGE_BUILD_ARGS="--build-arg PIP_EXTRA_INDEX_URL=http://127.0.0.1:1/simple",
    )
    assert result.returncode == 0, result.stderr
    for _, args in calls:
        assert args[5:7] == ["--build-arg", "PIP_EXTRA_INDEX_URL=http://127.0.0.1:1/simple"]
        assert args[-1] == "."


def _copy_of_the_repository(tmp_path: Path) -> Path:
    """The files the script reads, in a tree of their own (so they can be made to disagree)."""
    copy = tmp_path / "repo"
    for relative in (
        "scripts/build-images.sh",
        "pyproject.toml",
        "charts/sits-operator/Chart.yaml",
        "charts/sits-operator/values.yaml",
    ):
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, copy / relative)
    return copy


@pytest.mark.parametrize(
    ("relative", "key", "message"),
    [
        ("charts/sits-operator/Chart.yaml", "appVersion:", "appVersion"),
        ("charts/sits-operator/values.yaml", "inferenceImage:", "inferenceImage"),
    ],
)
def test_a_chart_out_of_step_with_the_version_is_refused(
    tmp_path: Path, relative: str, key: str, message: str
) -> None:
    copy = _copy_of_the_repository(tmp_path)
    path = copy / relative
    lines = path.read_text().splitlines()
    (index,) = [i for i, line in enumerate(lines) if line.startswith(key)]
    lines[index] = lines[index].replace(project_version(), "9.9.9")
    assert project_version() not in lines[index]
    path.write_text("\n".join(lines) + "\n")
    script = copy / "scripts" / "build-images.sh"
    result, calls = run_script(tmp_path, stub_bin(tmp_path, "buildah"), script=script)
    assert result.returncode == 1
    assert message in result.stderr
    assert "9.9.9" in result.stderr
    assert calls == []
    # The same copy, put back in step, builds: the refusal was about the version only.
    path.write_text((ROOT / relative).read_text())
    result, calls = run_script(tmp_path, stub_bin(tmp_path, "buildah"), script=script)
    assert result.returncode == 0, result.stderr
    assert {cwd for cwd, _ in calls} == {str(copy)}


def test_the_make_target_runs_the_script() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nimages:\n", 1)[1].splitlines()[0]
    assert recipe.strip() == "@scripts/build-images.sh"
    assert os.access(SCRIPT, os.X_OK)
