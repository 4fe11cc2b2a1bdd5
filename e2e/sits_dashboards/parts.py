"""Panels, queries and variables shared by the three dashboards, on the Foundation SDK.

Every panel and variable reads the Prometheus data source chosen by the ``datasource``
variable (kube-prometheus-stack provisions one of type ``prometheus``), so the dashboards
work with whatever that data source is named. Template variables use Grafana's ``$name``
syntax; ``$__rate_interval`` is Grafana's built-in rate window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import prometheus as prom_b
from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import statetimeline as timeline_b
from grafana_foundation_sdk.builders import timeseries as ts_b
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dash_m

DATASOURCE_VARIABLE = "datasource"
DATASOURCE = dash_m.DataSourceRef(type_val="prometheus", uid=f"${{{DATASOURCE_VARIABLE}}}")
# Refresh label-value variables when the time range changes (pods come and go).
ON_TIME_RANGE = dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED
FULL_WIDTH = 24
HALF = 12
THIRD = 8
HEIGHT = 8

Variable = cogbuilder.Builder[dash_m.VariableModel]
# Cursor shared by every panel of a dashboard.
CROSSHAIR = dash_m.DashboardCursorSync.CROSSHAIR


@dataclass(frozen=True)
class Query:
    """One PromQL query of a panel and its legend (``{{label}}`` as in Grafana)."""

    expr: str
    legend: str = ""


def datasource_variable() -> dash_b.DatasourceVariable:
    return (
        dash_b.DatasourceVariable(DATASOURCE_VARIABLE)
        .label("Data source")
        .type("prometheus")
        .regex("")
    )


def label_variable(
    name: str, label: str, metric: str, target_label: str, *, multi: bool = False
) -> dash_b.QueryVariable:
    """A variable listing ``label_values(metric, target_label)``; ``multi`` adds "All"."""
    variable = (
        dash_b.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(f"label_values({metric}, {target_label})")
        .refresh(ON_TIME_RANGE)
        .sort(dash_m.VariableSort.ALPHABETICAL_ASC)
    )
    if multi:
        variable = variable.multi(True).include_all(True)
    return variable


def choice_variable(name: str, label: str, values: Sequence[str]) -> dash_b.CustomVariable:
    """A fixed list of values; the first is the default."""
    first = values[0]
    return (
        dash_b.CustomVariable(name)
        .label(label)
        .values(",".join(values))
        .current(dash_m.VariableOption(selected=True, text=first, value=first))
    )


def targets(queries: Sequence[Query]) -> list[cogbuilder.Builder[cogvariants.Dataquery]]:
    refs = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return [
        prom_b.Dataquery()
        .expr(query.expr)
        .legend_format(query.legend or "__auto")
        .ref_id(refs[i])
        .datasource(DATASOURCE)
        for i, query in enumerate(queries)
    ]


def thresholds(base: str, steps: Sequence[tuple[float, str]]) -> dash_b.ThresholdsConfig:
    """Grafana's thresholds: ``base`` below the first step, then each step's colour."""
    return (
        dash_b.ThresholdsConfig()
        .mode(dash_m.ThresholdsMode.ABSOLUTE)
        .steps(
            [dash_m.Threshold(value=None, color=base)]
            + [dash_m.Threshold(value=value, color=color) for value, color in steps]
        )
    )


def timeseries(
    title: str,
    description: str,
    queries: Sequence[Query],
    *,
    unit: str,
    width: int = HALF,
    min_value: float | None = 0,
    max_value: float | None = None,
    stacked: bool = False,
    bars: bool = False,
    threshold_line: tuple[str, Sequence[tuple[float, str]]] | None = None,
) -> ts_b.Panel:
    """A time series panel. ``threshold_line``: (base colour, steps) drawn as dashed
    constant lines, the policy's thresholds on an SLI panel."""
    panel = (
        ts_b.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(targets(queries))
        .unit(unit)
        .span(width)
        .height(HEIGHT)
        .fill_opacity(20 if stacked else 10)
        .line_width(1)
        .legend(
            common_b.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(common_b.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI))
    )
    if min_value is not None:
        panel = panel.min(min_value)
    if max_value is not None:
        panel = panel.max(max_value)
    if stacked:
        panel = panel.stacking(common_b.StackingConfig().mode(common.StackingMode.NORMAL))
    if bars:
        panel = panel.draw_style(common.GraphDrawStyle.BARS)
    if threshold_line is not None:
        base, steps = threshold_line
        panel = panel.thresholds(thresholds(base, steps)).thresholds_style(
            common_b.GraphThresholdsStyleConfig().mode(common.GraphTresholdsStyleMode.DASHED)
        )
    return panel


def stat(
    title: str, description: str, queries: Sequence[Query], *, unit: str, width: int = THIRD
) -> stat_b.Panel:
    """The last value of each series; the series name is shown (e.g. the current phase)."""
    return (
        stat_b.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(targets(queries))
        .unit(unit)
        .span(width)
        .height(HEIGHT)
        .text_mode(common.BigValueTextMode.NAME)
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.NONE)
        .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .thresholds(thresholds("blue", []))
    )


def state_timeline(
    title: str, description: str, queries: Sequence[Query], *, width: int = FULL_WIDTH
) -> timeline_b.Panel:
    """One row per series, filled while its value is present (series dropped when 0)."""
    return (
        timeline_b.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(targets(queries))
        .span(width)
        .height(HEIGHT // 2 + 2)
        .show_value(common.VisibilityMode.NEVER)
        .merge_values(True)
        .fill_opacity(70)
        .thresholds(thresholds("blue", []))
    )


def row(title: str) -> dash_b.Row:
    return dash_b.Row(title)


def prometheus_annotation(
    name: str, expr: str, color: str, *, title: str, text: str, step: str = "30s"
) -> dict[str, object]:
    """A Prometheus annotation query. The SDK's AnnotationQuery has no ``titleFormat``,
    ``textFormat`` or ``step`` (Prometheus-specific fields), so this is the JSON Grafana
    stores, added to the built dashboard by ``build``."""
    return {
        "datasource": {"type": "prometheus", "uid": f"${{{DATASOURCE_VARIABLE}}}"},
        "enable": True,
        "hide": False,
        "iconColor": color,
        "name": name,
        "expr": expr,
        "step": step,
        "titleFormat": title,
        "textFormat": text,
        "useValueForTime": False,
    }
