"""Every dashboard query parses as PromQL, by the project's own promtool.

An integration test, not a unit test: the promtool comes from scripts/setup.sh's build of
Prometheus, which on a fresh machine is still running in the background while the unit
tests run (scripts/test.sh). Debian's promtool (2.42) cannot stand in: it has no
`promql format`.
"""

from __future__ import annotations

import os
import subprocess

from sits_dashboards import dashboard_queries
from sits_localcluster.prometheus import built_prometheus


def test_queries_parse_as_promql() -> None:
    promtool = built_prometheus().with_name("promtool")
    assert os.access(promtool, os.X_OK), f"no promtool at {promtool} (scripts/setup.sh builds it)"
    failures = []
    for dashboard, what, expr in dashboard_queries("ns", "chat", source="sidecar"):
        result = subprocess.run(
            [str(promtool), "--experimental", "promql", "format", expr],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if result.returncode != 0:
            failures.append(f"{dashboard} / {what}: {result.stderr.strip()}\n  {expr}")
    assert not failures, "\n".join(failures)
