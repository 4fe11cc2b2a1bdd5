"""Debian root file systems made with mmdebstrap, and commands run inside them (chroot).

Why mount namespaces rather than mounts in the host's namespace with a ``finally`` that
unmounts: a build may be killed (Ctrl-C twice, OOM, a CI timeout) at any point, and a bind
mount of /dev or of the pip cache left under a tree is then deleted *through* by the next
``rm -rf`` of that tree. Each command here runs as ``unshare --mount --propagation private
sh -c 'mount ...; exec chroot ...'``: its mounts exist only in its own namespace and vanish
with its last process, whatever happens to us. :func:`mounts_under` checks afterwards that
nothing is mounted under the tree in our namespace, and :func:`remove_tree` refuses to
delete a tree that has anything mounted below it.

What is mounted for a command: a fresh /proc, a tmpfs /dev holding only null, zero,
full, random, urandom and tty (bound from the host's: a build never sees the host's disks)
and a private /dev/shm, /sys read-only, a tmpfs on /tmp (whatever a command leaves in /tmp
never reaches a layer), and inside that tmpfs the host's staging directory
(``/tmp/.sits-host``), the host's pip cache (``/tmp/.sits-pip-cache``, so that wheels
downloaded for the host's venvs or an earlier image are not downloaded again; pip caches
only responses that carry cache headers, and the PyPI proxy of the project's machines
strips them, so there it saves only locally built wheels) and the host's /etc/resolv.conf
over the tree's (for pip).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

Progress = Callable[[str], object]

HOST_DIR_IN_ROOT = "/tmp/.sits-host"
PIP_CACHE_IN_ROOT = "/tmp/.sits-pip-cache"
HOME_IN_ROOT = "/tmp/.sits-home"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
# Host apt settings a chroot build needs to reach the same mirror the same way.
APT_PASSTHROUGH = (
    "Acquire::Check-Valid-Until",
    "Acquire::Check-Date",
    "Acquire::http::Proxy",
    "Acquire::https::Proxy",
    "Acquire::Retries",
)
# pip settings of the host that matter inside the root (an index mirror, timeouts).
PIP_PASSTHROUGH = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_DEFAULT_TIMEOUT",
)
# pip lines not worth relaying (a failure still shows the full tail); kept: downloads of
# 10 MB and more (the slow part), "Successfully installed", warnings and errors.
NOISE = (
    "Requirement already satisfied",
    "Collecting ",
    "Using cached",
    "Attempting uninstall",
    "Found existing installation",
    "Uninstalling ",
    "Successfully uninstalled",
    "Looking in links",
    "Processing ",
    "Installing collected packages",
)
_SMALL_DOWNLOAD = re.compile(r"Downloading .*\((\d+(\.\d+)? kB|\d\.\d+ MB)\)$")
_OCTAL = re.compile(r"\\([0-7]{3})")  # mountinfo escapes space, tab, newline, backslash


class RootfsError(RuntimeError):
    """A root file system could not be made or a command in it failed."""


# -- host apt configuration ----------------------------------------------------------------


@dataclass(frozen=True)
class AptSource:
    uri: str
    suite: str
    components: tuple[str, ...]
    signed_by: str = ""

    def line(self) -> str:
        options = f"[signed-by={self.signed_by}] " if self.signed_by else ""
        return f"deb {options}{self.uri} {self.suite} {' '.join(self.components)}"


def parse_one_line_sources(text: str) -> list[AptSource]:
    """``deb [opts] URI SUITE COMPONENTS...`` lines (sources.list format)."""
    sources = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        words = line[4:].strip()
        signed_by = ""
        if words.startswith("["):
            options, _, words = words[1:].partition("]")
            for option in options.split():
                key, _, value = option.partition("=")
                if key == "signed-by":
                    signed_by = value
        uri, suite, *components = words.split()
        sources.append(AptSource(uri, suite, tuple(components), signed_by))
    return sources


def parse_deb822_sources(text: str) -> list[AptSource]:
    """Stanzas of ``Types: / URIs: / Suites: / Components: / Signed-By:`` (.sources)."""
    sources = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled") == "no":
            continue
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                components = tuple(fields.get("components", "").split())
                sources.append(AptSource(uri, suite, components, fields.get("signed-by", "")))
    return sources


def host_apt_sources(suite: str, etc_apt: Path = Path("/etc/apt")) -> list[AptSource]:
    """The host's enabled Debian sources for ``suite`` (and suite-updates/-security).

    Third-party repositories (their suites are not ``suite`` or ``suite-*``) are left out.
    """
    found: list[AptSource] = []
    one_line = [etc_apt / "sources.list", *sorted((etc_apt / "sources.list.d").glob("*.list"))]
    for path in one_line:
        if path.is_file():
            found += parse_one_line_sources(path.read_text())
    for path in sorted((etc_apt / "sources.list.d").glob("*.sources")):
        found += parse_deb822_sources(path.read_text())
    wanted = [s for s in found if s.suite == suite or s.suite.startswith(f"{suite}-")]
    if not wanted:
        raise RootfsError(f"no Debian '{suite}' apt source is configured under {etc_apt}")
    return list(dict.fromkeys(wanted))


def host_apt_options() -> list[str]:
    """``Key "value";`` lines of the host's apt settings listed in APT_PASSTHROUGH."""
    dump = subprocess.run(
        ["apt-config", "dump"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    return [line for line in dump.splitlines() if line.split(" ", 1)[0] in APT_PASSTHROUGH]


# -- running things ------------------------------------------------------------------------


def relay(
    argv: Sequence[str],
    progress: Progress,
    *,
    env: Mapping[str, str] | None = None,
    what: str,
    echo: bool = True,
) -> list[str]:
    """Run ``argv``, relay its output lines (indented, pip's noise dropped), return them.

    Raises :class:`RootfsError` with the last lines when it fails: a multi-minute step
    that fails silently is the worst kind.
    """
    lines: list[str] = []
    with subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(env) if env is not None else None,
    ) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            lines.append(line)
            if echo and _worth_relaying(line):
                progress(f"    {line}")
        rc = proc.wait()
    if rc != 0:
        tail = "\n".join(lines[-40:])
        raise RootfsError(f"{what} failed with exit code {rc}; last output:\n{tail}")
    return lines


def _worth_relaying(line: str) -> bool:
    text = line.strip()
    return bool(text) and not text.startswith(NOISE) and not _SMALL_DOWNLOAD.match(text)


@contextmanager
def timed(progress: Progress, what: str) -> Iterator[None]:
    """Say what a long step does before it starts and how long it took after."""
    progress(f"[images] {what} ...")
    start = time.monotonic()
    yield
    progress(f"[images] {what}: done in {time.monotonic() - start:.0f} s")


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise RootfsError(f"{what} needs root (mmdebstrap, chroot, mount namespaces)")


def mmdebstrap(target: Path, suite: str, packages: Sequence[str], progress: Progress) -> None:
    """A minbase Debian tree at ``target`` from the host's own apt sources and settings.

    Manual pages, info pages, translations and docs (copyright files kept) are left out:
    nothing in a container reads them.
    """
    require_root("mmdebstrap")
    argv = [
        "mmdebstrap",
        "--mode=root",
        "--variant=minbase",
        f"--include={','.join(packages)}",
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/info/*",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        *(f"--aptopt={option}" for option in host_apt_options()),
        suite,
        str(target),
        *(source.line() for source in host_apt_sources(suite)),
    ]
    relay(argv, progress, what="mmdebstrap")


def mounts_under(root: Path, mountinfo: str | None = None) -> list[str]:
    """Mount points at or below ``root`` in this process's mount namespace."""
    prefix = os.path.realpath(root)
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    found = []
    for line in mountinfo.splitlines():
        point = _OCTAL.sub(lambda m: chr(int(m[1], 8)), line.split()[4])
        if point == prefix or point.startswith(prefix + "/"):
            found.append(point)
    return found


def remove_tree(tree: Path) -> None:
    """``rm -rf`` that refuses to walk into anything mounted below ``tree``."""
    if tree.is_symlink() or tree.is_file():
        tree.unlink()
        return
    if not tree.exists():
        return
    mounted = mounts_under(tree)
    if mounted:
        raise RootfsError(f"refusing to delete {tree}: mounted below it: {', '.join(mounted)}")
    shutil.rmtree(tree)


def _require_mount_points(root: Path, resolv: bool) -> None:
    """A symlink in the tree must never redirect a mount onto a host path."""
    for name in ("proc", "dev", "sys", "tmp"):
        path = root / name
        if path.is_symlink() or not path.is_dir():
            raise RootfsError(f"{path} must be a real directory to mount on")
    conf = root / "etc" / "resolv.conf"
    if resolv and (conf.is_symlink() or not conf.is_file()):
        raise RootfsError(f"{conf} must be a regular file to bind the host's over it")


def _mount_script(
    root: Path, host_dir: Path | None, pip_cache: Path | None, resolv: bool, argv: Sequence[str]
) -> str:
    r = shlex.quote(str(root))
    lines = [
        "set -eu",
        f"mount -t proc proc {r}/proc",
        # A /dev of its own with the harmless nodes bound in: never the host's disks.
        f"mount -t tmpfs -o mode=755 dev {r}/dev",
        f"for n in {' '.join(DEV_NODES)}; do",
        f"  touch {r}/dev/$n",
        f"  mount --bind /dev/$n {r}/dev/$n",
        "done",
        f"mkdir {r}/dev/shm {r}/dev/pts && mount -t tmpfs -o mode=1777 shm {r}/dev/shm",
        f"ln -s /proc/self/fd {r}/dev/fd",
        f"mount -t sysfs -o ro sysfs {r}/sys",
        f"mount -t tmpfs -o mode=1777 tmp {r}/tmp",
        f"mkdir -p {r}{HOME_IN_ROOT}",
    ]
    for source, inside in ((host_dir, HOST_DIR_IN_ROOT), (pip_cache, PIP_CACHE_IN_ROOT)):
        if source is not None:
            host = shlex.quote(str(source))
            lines += [f"mkdir -p {r}{inside}", f"mount --bind {host} {r}{inside}"]
    if resolv:
        lines.append(f"mount --bind /etc/resolv.conf {r}/etc/resolv.conf")
    lines.append(f"exec chroot {r} {shlex.join(argv)}")
    return "\n".join(lines)


def run_in_root(
    root: Path,
    argv: Sequence[str],
    progress: Progress,
    *,
    env: Mapping[str, str],
    host_dir: Path | None = None,
    pip_cache: Path | None = None,
    what: str = "",
    echo: bool = True,
) -> list[str]:
    """Run ``argv`` chrooted in ``root`` in a private mount namespace; return its output.

    ``env`` is the command's whole environment (nothing of ours leaks in). Afterwards
    nothing may be mounted under ``root`` here: that would be a bug, and it raises.
    """
    require_root("running commands in a root file system")
    resolv = (root / "etc" / "resolv.conf").exists() and Path("/etc/resolv.conf").exists()
    _require_mount_points(root, resolv)
    script = _mount_script(root, host_dir, pip_cache, resolv, argv)
    unshare = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
    full_env = {"PATH": SYSTEM_PATH, **env}
    try:
        return relay(unshare, progress, env=full_env, what=what or shlex.join(argv), echo=echo)
    finally:
        leftover = mounts_under(root)
        if leftover:
            raise RootfsError(f"mounts left under {root}: {', '.join(leftover)}")


def host_ca_bundle() -> Path | None:
    """The CA bundle the host's pip trusts (it may hold a site CA the tree lacks)."""
    for candidate in (
        os.environ.get("PIP_CERT"),
        os.environ.get("SSL_CERT_FILE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


@dataclass
class Root:
    """A tree being built, with the host-side pieces its commands need."""

    tree: Path
    host_dir: Path  # appears as /tmp/.sits-host inside
    pip_cache: Path | None
    progress: Progress

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": f"/opt/venv/bin:{SYSTEM_PATH}",
            "HOME": HOME_IN_ROOT,
            "LANG": "C.UTF-8",
            # Byte code is compiled once per layer as unchecked-hash .pyc (compile_python).
            "PYTHONDONTWRITEBYTECODE": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "PIP_PROGRESS_BAR": "off",
            "PIP_ROOT_USER_ACTION": "ignore",
        }
        if self.pip_cache is not None:
            env["PIP_CACHE_DIR"] = PIP_CACHE_IN_ROOT
        env |= {key: os.environ[key] for key in PIP_PASSTHROUGH if key in os.environ}
        ca = host_ca_bundle()
        if ca is not None:
            shutil.copyfile(ca, self.host_dir / "ca.crt")
            env["PIP_CERT"] = f"{HOST_DIR_IN_ROOT}/ca.crt"
        if Path("/etc/pip.conf").is_file():
            shutil.copyfile("/etc/pip.conf", self.host_dir / "pip.conf")
            env["PIP_CONFIG_FILE"] = f"{HOST_DIR_IN_ROOT}/pip.conf"
        return env | dict(extra or {})

    def run(
        self, *argv: str, env: Mapping[str, str] | None = None, what: str = "", echo: bool = True
    ) -> list[str]:
        return run_in_root(
            self.tree,
            argv,
            self.progress,
            env=self.env(env),
            host_dir=self.host_dir,
            pip_cache=self.pip_cache,
            what=what,
            echo=echo,
        )

    def pip(self, *args: str, python: str = "/opt/venv/bin/python") -> list[str]:
        """``pip install --no-compile ...`` with the venv's interpreter."""
        return self.run(
            python,
            "-m",
            "pip",
            "install",
            "--no-compile",
            *args,
            what=f"pip install {' '.join(args)}",
        )

    def stage(self, source: Path, name: str | None = None) -> str:
        """Copy a host file where commands in the root can read it; return its path there."""
        name = name or source.name
        shutil.copyfile(source, self.host_dir / name)
        return f"{HOST_DIR_IN_ROOT}/{name}"

    def write(self, name: str, text: str) -> str:
        (self.host_dir / name).write_text(text)
        return f"{HOST_DIR_IN_ROOT}/{name}"


def compile_python(root: Root, rel_paths: Sequence[str], python: str, workers: int = 0) -> None:
    """Compile these .py files (paths relative to the tree) as unchecked-hash .pyc.

    Why unchecked-hash: layers clamp file times, and a timestamp .pyc whose source mtime
    was clamped would be stale forever; a non-root container cannot rewrite it, so every
    start would recompile torch and vLLM in memory. Only this layer's files are compiled,
    so the byte code of lower layers is not rewritten into this one.
    """
    if not rel_paths:
        return
    workers = workers or os.cpu_count() or 1
    chunks = [rel_paths[i::workers] for i in range(workers)]
    commands = []
    for number, chunk in enumerate(chunks):
        listing = root.write(f"py-files-{number}.txt", "".join(f"/{rel}\n" for rel in chunk))
        commands.append(
            f"{python} -m compileall -q --invalidation-mode unchecked-hash -i {listing} "
            f">{HOST_DIR_IN_ROOT}/compile-{number}.log 2>&1 &"
        )
    root.run("/bin/sh", "-c", " ".join(commands) + " wait", what="compileall")
    errors = sum(
        (root.host_dir / f"compile-{n}.log").read_text().count("*** Error compiling")
        for n in range(len(chunks))
    )
    root.progress(f"    compiled {len(rel_paths)} .py files ({errors} not compilable, skipped)")
