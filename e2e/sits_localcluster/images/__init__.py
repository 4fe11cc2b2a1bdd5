"""OCI images for the local cluster's real node, built here without Docker or a registry.

``ensure_images()`` builds (or finds in ``~/.cache/sits/images``) the images pods run,
``import_images()`` puts them into the node's containerd. ``python -m
sits_localcluster.images build --help`` is the CLI. See build.py for the cache, layers.py
and oci.py for the formats, rootfs.py for the Debian trees, specs.py for the images.
"""

from .build import BuiltImage, ImageBuildError, ensure_images
from .ctr import containerd_images, import_images
from .specs import image_specs

__all__ = [
    "BuiltImage",
    "ImageBuildError",
    "containerd_images",
    "ensure_images",
    "image_specs",
    "import_images",
]
