"""The `kubectl sits get` screen: a header, the rollout tree, the last decisions.

Shaped after `kubectl argo rollouts get rollout`: the object with its phase and message
on top, then one branch per variant (role, revision, weight, ready pods) holding its SLIs
against the policy's thresholds and its pods with their MIG slices, then what the
operator decided last. Pure: a RolloutView and the time in, a rich renderable out.
"""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from sits_kubectl.screens import add_row, fields, phase_badge, ready_mark, verdict_mark
from sits_kubectl.text import age, clock, number, plural, weights
from sits_kubectl.view import (
    GatewayRow,
    PodRow,
    RolloutView,
    SliRow,
    VariantRow,
    candidate_values,
)


def render(view: RolloutView, now: float) -> RenderableType:
    if not view.exists:
        return Group(
            *_notes(view),
            Text(
                f'sitsdeployment "{view.name}" not found in namespace "{view.namespace}"',
                style="red",
            ),
        )
    parts: list[RenderableType] = [_header(view, now), Text(""), _tree(view, now)]
    if view.decisions:
        parts += [Text(""), _decisions(view, now)]
    if view.attention:
        parts += [Text(""), _attention(view)]
    return Group(*parts, *_notes(view))


def watching(view: RolloutView, now: float) -> RenderableType:
    """The --watch screen: the same, with a footer saying it lives and how to stop it."""
    footer = Text(
        f"watching sitsdeployment/{view.name}: redrawn on every change, Ctrl-C stops "
        f"({clock(now)} UTC)",
        style="dim",
    )
    return Group(render(view, now), Text(""), footer)


def _header(view: RolloutView, now: float) -> Table:
    rows: list[tuple[str, RenderableType | str]] = [
        ("Name", view.name),
        ("Namespace", view.namespace),
        ("Status", phase_badge(view.phase)),
    ]
    if view.message:
        rows.append(("Message", view.message))
    if view.stale:
        rows.append(
            (
                "Note",
                Text("the operator has not caught up with the latest spec yet", style="yellow"),
            )
        )
    if view.strategy:
        rows.append(("Strategy", view.strategy))
    if view.policy_name:
        rows.append(("Policy", _policy_line(view)))
    split = {v.name: v.weight for v in view.variants if v.weight is not None}
    if split:
        decided = f", decided {age(view.decided_at, now)} ago" if view.decided_at else ""
        rows.append(("Traffic", f"{weights(split)} % (router {view.router}{decided})"))
    if candidate_values(view):
        rows.append(("Candidate", f"{candidate_values(view)} (latest samples)"))
    for key, value in view.pending:
        rows.append(
            ("Pending", Text(f"{key}={value}: not acted on by the operator yet", style="yellow"))
        )
    return fields(rows)


def _policy_line(view: RolloutView) -> str:
    policy = view.policy
    if policy is None:
        return f"{view.policy_name} (not readable: thresholds not shown)"
    return (
        f"{policy.name}: every {policy.interval_seconds:g}s, "
        f"{policy.promotion_consecutive_passes} passing periods per step, "
        f"at least {policy.min_requests} requests per window"
    )


def _tree(view: RolloutView, now: float) -> Tree:
    root = Tree(Text.assemble((view.name, "bold"), "  SitsDeployment  ", phase_badge(view.phase)))
    for variant in view.variants:
        branch = root.add(_variant_label(variant))
        if variant.slis:
            branch.add(_slis(variant.slis))
        if variant.pods:
            branch.add(_pods(variant.pods, now))
        elif variant.scaled_down:
            branch.add(Text("no pods: scaled to zero after the decision", style="dim"))
    if view.gateway is not None:
        _gateway(root, view.gateway, now)
    return root


def _variant_label(variant: VariantRow) -> Text:
    style = "bold cyan" if variant.role == "stable" else "bold magenta"
    label = Text.assemble((f"● {variant.name}", style), "  ", (variant.role, style))
    label.append(f"  {variant.revision}" if variant.revision else "")
    if variant.weight is not None:
        label.append(f"  weight {variant.weight} %", style="bold")
    ready_style = "green" if variant.ready >= variant.replicas and variant.replicas else "yellow"
    label.append(f"  ready {variant.ready}/{variant.replicas}", style=ready_style)
    if variant.profile:
        label.append(f"  MIG {variant.profile} x{variant.replicas}")
    if variant.restarts:
        label.append(f"  {plural(variant.restarts, 'restart')}", style="red")
    return label


def _slis(rows: tuple[SliRow, ...]) -> Table:
    grid = Table.grid(padding=(0, 2))
    for _ in range(5):
        grid.add_column()
    for row in rows:
        add_row(
            grid,
            row.sli,
            Text(number(row.value), style="bold"),
            verdict_mark(row.verdict),
            f"breach {row.breach}" if row.breach else "",
            Text(f"{row.window} window" if row.window else "", style="dim"),
        )
    return grid


def _pods(rows: tuple[PodRow, ...], now: float) -> Table:
    grid = Table.grid(padding=(0, 2))
    for _ in range(7):
        grid.add_column()
    for pod in rows:
        add_row(
            grid,
            ready_mark(pod.ready),
            pod.name,
            Text(pod.status, style="green" if pod.status == "Running" else "red"),
            pod.node,
            pod.slices,
            Text(plural(pod.restarts, "restart"), style="red" if pod.restarts else "dim"),
            Text(age(pod.created, now), style="dim"),
        )
    return grid


def _gateway(root: Tree, gateway: GatewayRow, now: float) -> None:
    label = Text("● gateway", style="bold")
    if gateway.asked is not None:
        applying = gateway.applying if gateway.applying is not None else 0
        label.append(f"  {applying} of {gateway.asked} ready pods apply the decided weights")
    branch = root.add(label)
    if gateway.pods:
        branch.add(_pods(gateway.pods, now))


def _decisions(view: RolloutView, now: float) -> Table:
    table = Table(
        title="Decisions (newest first)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        expand=False,
    )
    table.add_column("AGE", no_wrap=True)
    table.add_column("ACTION", no_wrap=True)
    table.add_column("WEIGHTS", no_wrap=True)
    table.add_column("REASON", overflow="fold")
    for row in view.decisions:
        add_row(table, age(row.at, now), row.action, weights(row.weights), row.reason)
    return table


def _attention(view: RolloutView) -> Table:
    table = Table(title="Conditions", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("TYPE", "STATUS", "REASON"):
        table.add_column(column, no_wrap=True)
    table.add_column("MESSAGE", overflow="fold")
    for row in view.attention:
        add_row(table, row.type, Text(row.status, style="red"), row.reason, row.message)
    return table


def _notes(view: RolloutView) -> list[RenderableType]:
    return [Text(note, style="yellow") for note in view.notes]
