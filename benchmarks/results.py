"""docs/benchmarks.md: each benchmark owns one `## ` section and rewrites only that one."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


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
