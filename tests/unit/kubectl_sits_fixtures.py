"""Recorded SitsDeployments (tests/unit/kubectl_sits_record.py) as `kubectl sits` snapshots."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType

from sits_kubectl.snapshot import Snapshot

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "kubectl-sits"
RECORDED = tuple(sorted(p.stem for p in FIXTURES.glob("*.json")))


def recorded(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / f"{name}.json").read_text()))


def snapshot(name: str, *, pods: bool = True, policy: bool = True) -> tuple[Snapshot, float]:
    """The recorded object with its pods and policy, and the time it was looked at."""
    found = recorded(name)
    obj = found["object"]
    return (
        Snapshot(
            obj["metadata"]["name"],
            obj["metadata"]["namespace"],
            obj,
            tuple(found["pods"]) if pods else None,
            found["policy"] if policy else None,
        ),
        float(found["now"]),
    )


def text(renderable: RenderableType, width: int = 160) -> str:
    """What a terminal of `width` columns shows, without colours; trailing blanks removed."""
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    console.print(renderable)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in str(out).splitlines())
