"""docs/benchmarks.md: each benchmark owns one `## ` section and rewrites only that one."""

from __future__ import annotations

import subprocess
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def commit() -> str:
    """The checkout's short commit, `+dirty` when files differ from it: every figure in
    docs/benchmarks.md says which code produced it."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
    )
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True)
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def write_section(section: str, results: Path = RESULTS) -> None:
    """Replace the section with the same `## ` heading as `section`, or append it."""
    heading = section.splitlines()[0]
    text = results.read_text() if results.exists() else "# Benchmarks\n\n"
    if heading in text:
        head, _, tail = text.partition(heading)
        rest = tail.split("\n## ", 1)
        text = head + section + ("\n## " + rest[1] if len(rest) > 1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    results.write_text(text)
    print(section)
