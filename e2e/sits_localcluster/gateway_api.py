"""The Gateway API CRDs, from the `sigs.k8s.io/gateway-api` Go module (pinned version).

The module on the Go proxy carries the CRD YAMLs; `go mod download` caches it in the Go
module cache, so installing them needs no website and no second copy in this repository.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from sits_localcluster.build import read_versions


def gateway_api_crds(channel: str = "standard") -> Path:
    """Directory of the pinned release's CRD YAMLs (downloaded once into GOMODCACHE)."""
    version = read_versions()["GATEWAY_API_VERSION"]
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(
            ["go", "mod", "init", "sits.dev/gwapi"], cwd=scratch, check=True, capture_output=True
        )
        result = subprocess.run(
            ["go", "mod", "download", "-json", f"sigs.k8s.io/gateway-api@{version}"],
            cwd=scratch,
            check=True,
            capture_output=True,
            text=True,
        )
    directory = Path(json.loads(result.stdout)["Dir"]) / "config" / "crd" / channel
    if not directory.is_dir():
        raise FileNotFoundError(f"no CRDs at {directory}")
    return directory
