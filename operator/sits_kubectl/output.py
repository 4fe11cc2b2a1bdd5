"""`get -o json|yaml`: the SitsDeployment as `kubectl get -o` prints it.

kubectl users pipe this into jq and yq, so it is the object itself (without
managedFields, which kubectl hides too), not a plugin-specific shape.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from sits_kubectl.snapshot import Obj


def document(obj: Obj, output: str) -> str:
    shown: dict[str, Any] = copy.deepcopy(dict(obj))
    (shown.get("metadata") or {}).pop("managedFields", None)
    if output == "yaml":
        return str(yaml.safe_dump(shown, sort_keys=False, default_flow_style=False))
    return json.dumps(shown, indent=4) + "\n"
