"""``python -m sits_dashboards [--out DIR]``: write the chart's dashboard JSON files."""

from __future__ import annotations

import argparse
from pathlib import Path

from .build import DASHBOARD_DIR, write_dashboards


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sits_dashboards", description=__doc__)
    parser.add_argument(
        "--out", type=Path, default=DASHBOARD_DIR, help=f"directory (default {DASHBOARD_DIR})"
    )
    args = parser.parse_args(argv)
    for path in write_dashboards(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
