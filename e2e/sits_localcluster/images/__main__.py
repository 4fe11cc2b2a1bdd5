"""``python -m sits_localcluster.images build [--only NAME ...] [--import SOCKET |
--into-node] [--list]``.

Builds the local images (or finds them in the cache) and optionally imports them into a
containerd, or into the real node's shared containerd root (``sits_localcluster.preimport``);
progress goes to stderr, the final ``name tar digest`` lines to stdout.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .build import ImageBuildError, cache_status, ensure_images
from .ctr import import_images
from .specs import image_specs


def _progress(line: str) -> object:
    print(line, file=sys.stderr, flush=True)
    return None


def parser() -> argparse.ArgumentParser:
    names = ", ".join(image_specs())
    p = argparse.ArgumentParser(prog="python -m sits_localcluster.images")
    sub = p.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build missing images (cached in ~/.cache/sits/images)")
    build.add_argument("--only", nargs="+", metavar="NAME", help=f"only these: {names}")
    build.add_argument(
        "--import",
        dest="socket",
        type=Path,
        metavar="SOCKET",
        help="then import into the containerd at this socket (namespace k8s.io)",
    )
    build.add_argument(
        "--into-node",
        action="store_true",
        help="then import into the real node's containerd root (~/.cache/sits/node-containerd), "
        "so that the first cluster start finds them there (skipped while a node runs)",
    )
    build.add_argument("--list", action="store_true", help="show what is cached; build nothing")
    build.add_argument(
        "--coredns-binary",
        type=Path,
        metavar="PATH",
        help="CoreDNS binary (default: from build-control-plane.sh's bin dir)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.list:
            for spec, _, note in cache_status(args.only, args.coredns_binary):
                print(f"{spec.short:<15} {spec.reference:<36} {note}")
            return 0
        images = ensure_images(args.only, _progress, coredns_binary=args.coredns_binary)
        if args.socket:
            import_images(args.socket, images, _progress)
        elif args.into_node:
            from ..preimport import preimport  # starts a containerd: only when asked

            preimport(images, _progress)
    except (ImageBuildError, RuntimeError, OSError) as error:
        _progress(f"error: {error}")
        return 1
    for image in images:
        print(f"{image.name} {image.tar} {image.manifest_digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
