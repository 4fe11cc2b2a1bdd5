"""What one look at the cluster found: the plugin's only input besides the clock.

`kube` fills it from the apiserver; every screen is a pure function of a Snapshot, so the
screens are tested with recorded objects and a watch redraws from the latest one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Snapshot:
    """The SitsDeployment, its pods and the SitsPolicy it names, as the user may read them.

    `pods` and `policy` are None when they could not be read (RBAC, not found): the screen
    then says so from `notes` instead of failing, since a user allowed to read the
    SitsDeployment may still lack `list pods` or `get sitspolicies`.
    """

    name: str
    namespace: str
    obj: Obj | None
    pods: tuple[Obj, ...] | None = ()
    policy: Obj | None = None
    notes: tuple[str, ...] = ()
