"""The local images against a real containerd (Debian's 1.6, started here as a plain process
in a temp dir, CRI off): our OCI layout tars import, their whiteouts apply, the pause image
runs as the sandbox must, CoreDNS binds port 53 as a non-root user, and commands run in a
root file system leave nothing mounted. Only cheap images are built here; the multi-GB
ones are built by the node tests (``python -m sits_localcluster.images build``)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from sits_localcluster.build import ensure_binaries
from sits_localcluster.images import (
    containerd_images,
    ensure_images,
    import_images,
    layers,
    oci,
    rootfs,
    specs,
)
from sits_localcluster.images.build import BuiltImage
from sits_localcluster.node import NodePorts
from sits_localcluster.preimport import preimport
from sits_localcluster.prometheus import free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="containerd and mounts need root")
TOOLS = ("containerd", "ctr", "runc", "containerd-shim-runc-v2", "unshare", "gcc")
# A static helper for the root file system test: prints its mount table, exits with argv[1].
MOUNTS_C = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  FILE *f = fopen("/proc/self/mountinfo", "r");
  int c;
  while (f && (c = fgetc(f)) != EOF) putchar(c);
  return argc > 1 ? atoi(argv[1]) : 0;
}
"""


def say(line: str) -> object:
    print(line, flush=True)
    return None


@dataclass
class Containerd:
    base: Path
    socket: Path

    def ctr(self, *args: str, check: bool = True, timeout: float = 60) -> str:
        result = subprocess.run(
            ["ctr", "-a", str(self.socket), "-n", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"ctr {' '.join(args)}: {result.stderr}")
        return result.stdout

    def task_pid(self, name: str) -> int | None:
        for line in self.ctr("task", "ls").splitlines()[1:]:
            fields = line.split()
            if fields[0] == name and fields[2] == "RUNNING":
                return int(fields[1])
        return None

    def wait_running(self, name: str, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while (pid := self.task_pid(name)) is None:
            assert time.monotonic() < deadline, f"task {name} never ran: {self.ctr('task', 'ls')}"
            time.sleep(0.2)
        return pid

    @contextmanager
    def run(
        self, name: str, image: str, *command: str, flags: tuple[str, ...] = ()
    ) -> Iterator[subprocess.Popen[bytes]]:
        """``ctr run --rm``, with runc's state in our dir (never another containerd's)."""
        argv = [
            "ctr",
            "-a",
            str(self.socket),
            "-n",
            "k8s.io",
            "run",
            "--rm",
            "--runc-root",
            str(self.base / "runc"),
            *flags,
            image,
            name,
            *command,
        ]
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
            try:
                yield proc
            finally:
                if proc.poll() is None:
                    self.ctr("task", "kill", "-s", "SIGKILL", name, check=False)
                    try:
                        proc.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        proc.kill()

    def remove_everything(self) -> None:
        """Tasks, containers: a shim outlives containerd while its task is alive."""
        for line in self.ctr("task", "ls", check=False).splitlines()[1:]:
            task, pid = line.split()[:2]
            self.ctr("task", "kill", "-s", "SIGKILL", task, check=False)
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)  # our own container's process
            for _ in range(50):
                self.ctr("task", "rm", "-f", task, check=False)
                if task not in self.ctr("task", "ls", "-q", check=False).split():
                    break
                time.sleep(0.1)
        for container in self.ctr("container", "ls", "-q", check=False).split():
            self.ctr("container", "rm", container, check=False)


@pytest.fixture(scope="module")
def containerd() -> Iterator[Containerd]:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    assert not missing, f"missing {missing}: Debian packages containerd runc gcc libc6-dev"
    base = Path(tempfile.mkdtemp(prefix="sits-ctr-", dir="/tmp"))  # short: socket path limit
    config = base / "config.toml"
    config.write_text(f"""version = 2
root = "{base}/root"
state = "{base}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "{base}/containerd.sock"
""")
    daemon = Containerd(base, base / "containerd.sock")
    with (
        (base / "containerd.log").open("wb") as log,
        subprocess.Popen(
            ["containerd", "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        ) as proc,
    ):
        try:
            deadline = time.monotonic() + 20
            while daemon.ctr("version", check=False, timeout=5) == "":
                assert proc.poll() is None, (base / "containerd.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "containerd did not start in 20 s"
                time.sleep(0.1)
            yield daemon
        finally:
            daemon.remove_everything()
            proc.terminate()
            proc.wait(timeout=20)
    leftover = rootfs.mounts_under(base)
    for point in reversed(leftover):
        subprocess.run(["umount", point], check=False)
    shutil.rmtree(base)
    assert leftover == [], f"containerd left mounts: {leftover}"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SITS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_pause_image_imports_once_runs_unprivileged_and_exits_0_on_sigterm(
    containerd: Containerd,
    cache: Path,
) -> None:
    (pause,) = ensure_images(["pause"], say)
    assert pause.tar.is_relative_to(cache)
    assert import_images(containerd.socket, [pause], say) == [pause]
    assert containerd_images(containerd.socket)[pause.name] == pause.manifest_digest
    assert import_images(containerd.socket, [pause], say) == []  # a warm node imports nothing
    with containerd.run("pause", pause.name) as run:
        pid = containerd.wait_running("pause")
        status = Path(f"/proc/{pid}/status").read_text()
        assert "\nUid:\t65535\t" in status, status
        containerd.ctr("task", "kill", "-s", "SIGTERM", "pause")
        assert run.wait(timeout=20) == 0
        assert run.stdout is not None
        assert b"not PID 1" not in run.stdout.read()


def layout_image(tmp_path: Path, reference: str, blobs: list[layers.LayerBlob]) -> BuiltImage:
    digests = [blob.digest for blob in blobs]
    config = oci.config_json(oci.ImageConfig(entrypoint=("/none",)), digests, digests)
    tar = tmp_path / f"{reference.rsplit(':')[0].rsplit('/')[-1]}.tar"
    manifest = oci.write_layout_tar(tar, reference, config, blobs)
    return BuiltImage("test", reference, tar, manifest.digest, tar.stat().st_size, tuple(digests))


def test_containerd_applies_our_layers_and_whiteouts(
    containerd: Containerd, tmp_path: Path
) -> None:
    lower = tmp_path / "lower"
    for rel, text in {"keep.txt": "k", "gone.txt": "g", "dir/sub/f.txt": "f"}.items():
        (lower / rel).parent.mkdir(parents=True, exist_ok=True)
        (lower / rel).write_text(text)
    before = layers.snapshot(lower)
    base = layers.write_full_layer(lower, tmp_path / "base.tar")
    upper = tmp_path / "upper"
    subprocess.run(["cp", "-al", str(lower), str(upper)], check=True)
    (upper / "gone.txt").unlink()
    shutil.rmtree(upper / "dir")
    (upper / "new.txt").write_text("n")
    top = layers.write_layer(
        upper, *layers.diff(before, layers.snapshot(upper)), tmp_path / "t.tar"
    )
    lower_image = layout_image(tmp_path, "sits.local/lower-only:1", [base])
    image = layout_image(tmp_path, "sits.local/whiteout-test:1", [base, top])
    import_images(containerd.socket, [lower_image], say)
    lines: list[str] = []
    import_images(containerd.socket, [image], lines.append)  # from a thin tar: top layer only
    assert any("1 of 2 layers already there" in line for line in lines), lines
    reference = image.name
    target = tmp_path / "mnt"
    target.mkdir()
    containerd.ctr("images", "mount", reference, str(target))
    try:
        seen = sorted(str(p.relative_to(target)) for p in target.rglob("*"))
        assert seen == ["keep.txt", "new.txt"]
        assert (target / "new.txt").read_text() == "n"
    finally:
        containerd.ctr("images", "unmount", "--rm", str(target))
    assert rootfs.mounts_under(target) == []


def test_a_command_in_a_root_leaves_nothing_mounted_even_when_it_fails(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for name in ("proc", "dev", "sys", "tmp", "etc", "bin"):
        (root / name).mkdir(parents=True)
    (root / "etc" / "resolv.conf").write_text("")
    (tmp_path / "mounts.c").write_text(MOUNTS_C)
    helper = root / "bin" / "mounts"
    subprocess.run(["gcc", "-static", "-o", str(helper), str(tmp_path / "mounts.c")], check=True)
    host_dir, pip_cache = tmp_path / "host", tmp_path / "pip"
    host_dir.mkdir()
    pip_cache.mkdir()
    (host_dir / "marker").write_text("from the host")
    out = rootfs.run_in_root(
        root, ["/bin/mounts"], say, env={}, host_dir=host_dir, pip_cache=pip_cache
    )
    inside = " ".join(out)
    for point in (
        " /proc ",
        " /dev ",
        " /dev/null ",
        " /dev/shm ",
        " /tmp ",
        " /tmp/.sits-host ",
        " /tmp/.sits-pip-cache ",
        " /etc/resolv.conf ",
    ):
        assert point in inside, f"{point.strip()} not mounted inside"
    assert rootfs.mounts_under(root) == []
    assert sorted(p.name for p in (root / "tmp").iterdir()) == []  # a tmpfs, gone with it
    with pytest.raises(rootfs.RootfsError, match="exit code 3"):
        rootfs.run_in_root(root, ["/bin/mounts", "3"], say, env={}, host_dir=host_dir)
    assert rootfs.mounts_under(root) == []
    rootfs.remove_tree(root)
    assert (host_dir / "marker").read_text() == "from the host"


def listens_on_53_as_65532(pid: int) -> bool:
    """A UDP socket on port 53 (0035) owned by uid 65532 in the process's netns (Go binds
    dual-stack, so it shows under udp6)."""
    tables = "".join(Path(f"/proc/{pid}/net/{name}").read_text() for name in ("udp", "udp6"))
    return re.search(r":0035 .* 65532 ", tables) is not None


def test_coredns_serves_port_53_as_a_non_root_user(
    containerd: Containerd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real cache's binary, built by `make test`'s set-up; the test builds it if missing
    # rather than skipping (a skipped test proves nothing).
    binary = ensure_binaries(say) / f"coredns-{specs.COREDNS_VERSION}"
    monkeypatch.setenv("SITS_CACHE_DIR", str(tmp_path / "cache"))  # the image: built here
    (coredns,) = ensure_images(["coredns"], say, coredns_binary=binary)
    import_images(containerd.socket, [coredns], say)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "Corefile").write_text(".:53 {\n    errors\n    health :8080\n}\n")
    mount = f"type=bind,src={conf},dst=/etc/coredns,options=rbind:ro"
    command = ("/coredns", "-conf", "/etc/coredns/Corefile")
    with containerd.run("coredns", coredns.name, *command, flags=("--mount", mount)) as run:
        pid = containerd.wait_running("coredns")
        assert "\nUid:\t65532\t" in Path(f"/proc/{pid}/status").read_text()
        deadline = time.monotonic() + 15
        while not (bound := listens_on_53_as_65532(pid)) and time.monotonic() < deadline:
            assert containerd.task_pid("coredns") == pid, "CoreDNS exited (port 53 denied?)"
            time.sleep(0.2)
        assert bound, "CoreDNS never bound UDP port 53"
        containerd.ctr("task", "kill", "-s", "SIGTERM", "coredns")
        run.wait(timeout=20)


def test_preimport_fills_a_containerd_root_a_later_containerd_finds_and_leaves_nothing(
    cache: Path,
) -> None:
    """What set-up does for the real node (`images build --into-node`): a containerd of its
    own, with the node's config, imports into the root and stops; the next start on that root
    finds the image (imports nothing); no process, mount or temporary directory is left."""
    (pause,) = ensure_images(["pause"], say)
    root = Path(tempfile.mkdtemp(prefix="sits-pre-root-", dir="/tmp"))
    ports = NodePorts(containerd_metrics=free_port())  # not the running node's
    before = set(Path("/tmp").glob("sits-preimport-*"))
    try:
        assert preimport([pause], say, root=root, ports=ports) == [pause]
        assert preimport([pause], say, root=root, ports=ports) == []
        left = subprocess.run(
            ["pgrep", "-f", "containerd --config /tmp/sits-preimport-"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        assert left == [], "a containerd of the import is still running"
        assert set(Path("/tmp").glob("sits-preimport-*")) == before
        assert rootfs.mounts_under(root) == []
        assert any(root.glob("io.containerd.content.v1.content/blobs/sha256/*"))
    finally:
        shutil.rmtree(root)
