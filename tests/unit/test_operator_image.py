"""The operator image's Dockerfile: its contract with the chart and the project (hadolint
runs over it in test_cache_sidecar_image.py). No Docker engine runs here."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.unit.test_cache_sidecar_image import instructions, pyproject

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "operator" / "Dockerfile"
STEPS = instructions(DOCKERFILE.read_text())


def args_of(word: str) -> list[str]:
    return [args for name, args in STEPS if name == word]


def test_the_base_image_is_python_pinned_by_version() -> None:
    (image,) = (args.split()[0] for args in args_of("FROM"))
    match = re.fullmatch(r"python:(\d+)\.(\d+)\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", image)
    assert match, f"base image not pinned to a release: {image}"
    assert (int(match[1]), int(match[2])) >= (3, 11)  # requires-python


def test_it_runs_as_a_numeric_non_root_user() -> None:
    uid = args_of("USER")[-1].split(":")[0]
    assert uid.isdigit()
    assert int(uid) != 0


def test_the_entrypoint_is_the_operators_console_script_with_the_charts_ports() -> None:
    scripts = pyproject()["project"]["scripts"]  # type: ignore[index]
    (entrypoint,) = json.loads(args_of("ENTRYPOINT")[-1])
    assert scripts[entrypoint] == "sits_operator.__main__:main"
    command = json.loads(args_of("CMD")[-1])
    ports = {int(p) for p in " ".join(args_of("EXPOSE")).split()}
    listening = {int(a.rsplit(":", 1)[1].split("/")[0]) for a in command if "0.0.0.0:" in a}
    assert listening == ports == {9464, 9465, 8081}


def test_only_runtime_dependencies_are_installed() -> None:
    installs = " ".join(args_of("RUN"))
    assert "pip install --no-cache-dir ." in installs
    assert "[" not in installs.split("pip install", 1)[1].split("&&")[0], "no extras"
