"""`kubectl sits get` and `explain` over recorded SitsDeployments, one table per screen."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from sits_kubectl import explain_screen, get_screen
from sits_kubectl.explain import Trigger, explain
from sits_kubectl.snapshot import Snapshot
from sits_kubectl.view import build
from sits_operator.model.analysis import AnalysisState, Command, command_annotation
from tests.unit.kubectl_sits_fixtures import RECORDED, recorded, snapshot, text

PAUSE, ABORT = command_annotation(Command.PAUSE), command_annotation(Command.ABORT)


def get_text(name: str, *, pods: bool = True, policy: bool = True) -> str:
    found, now = snapshot(name, pods=pods, policy=policy)
    return text(get_screen.render(build(found), now))


def explain_text(name: str) -> str:
    found, now = snapshot(name)
    return text(explain_screen.render(explain(build(found)), now))


def test_every_recorded_analysis_is_what_the_operator_model_reads() -> None:
    """A recording whose fields the operator renamed or dropped would test nothing (a new
    field the recording lacks reads as its default: re-record to show it)."""
    assert set(RECORDED) >= {"progressing", "progressing-no-data", "paused", "rolled-back"}
    for name in RECORDED:
        raw = recorded(name)["object"]["status"]["analysis"]
        read = AnalysisState.from_dict(raw).to_dict()
        assert {key: read.get(key) for key in raw} == raw, name


@pytest.mark.parametrize(
    ("name", "shown", "not_shown"),
    [
        (
            "progressing",
            [
                "Status:     ◌ Progressing",
                "Message:    step 2 of 5 at 20 %: 1 of 3 passing periods before step 3",
                "Strategy:   canary: 10 % steps up to 50 %, each at least 2m",
                "Traffic:    v1 80 · v2 20 % (router builtin, decided 42s ago)",
                "● v1  stable  qwen2.5-1.5b-instruct  weight 80 %  ready 1/1  MIG 1g.10gb x1",
                "● v2  candidate  qwen3-1.7b  weight 20 %  ready 1/1  MIG 1g.10gb x1",
                "success_rate_5m  1     ✔ Pass  breach < 0.95 for 2 periods -> rollback  5m window",
                "latency_p95_ms   61.2  ✔ Pass  breach > 200 for 90s -> setWeight 10     1m window",
                "✔  chat-v2-6f8b4d9c7-k7q4m  Running  gpu-a100-1  1g.10gb x1  0 restarts",
                "42s     step      v1 80 · v2 20   all SLIs passed 3 consecutive periods: step 1",
            ],
            ["Pending:", "Conditions"],
        ),
        (
            "progressing-no-data",
            [
                "◌ Progressing",
                "waiting for data: v2 has 3 of 20 requests in the 5m window (success-rate)",
                "success_rate_5m  1     … NoData",
                "success_rate_5m  0.9987  ✔ Pass",
                "restart   v1 90 · v2 10",
            ],
            ["✖"],
        ),
        (
            "paused",
            [
                "Status:     ॥ Paused",
                f"Pending:    {ABORT}=2026-05-28T20:23:30Z: not acted on by the operator yet",
                f"12s     pause     v1 80 · v2 20   paused by {PAUSE}=2026-05-28T20:22:41Z",
                "● v2  candidate  qwen3-1.7b  weight 20 %",
            ],
            [f"Pending:    {PAUSE}"],  # acknowledged: the operator acted on it
        ),
        (
            "rolled-back",
            [
                "Status:     ↺ RolledBack",
                "Candidate:  v2: success rate 0.75, p95 1381 ms (latest samples)",
                "● v1  stable  qwen2.5-1.5b-instruct  weight 100 %",
                "● v2  candidate  qwen3-1.7b  weight 0 %",
                "42s     rollback   v1 100 · v2 0   rolled back: success-rate: success_rate_5m of "
                "v2 = 0.75 < 0.95 for 2 of 2 periods",
            ],
            ["breach <"],  # the terminal pass wrote no SLI samples
        ),
        (
            "succeeded",
            [
                "Status:     ✔ Succeeded",
                "● v1  stable  qwen2.5-1.5b-instruct  weight 0 %",
                "no pods: scaled to zero after the decision",
                "● v2  candidate  qwen3-1.7b  weight 100 %",
                "scaleDown   v1 0 · v2 100",
            ],
            ["chat-v1-5c7d9b7f4-x2x9z"],
        ),
        (
            "degraded",
            [
                "Status:     ⚠ Degraded",
                "Message:    variant v2 pod chat-v2-x container vllm: CrashLoopBackOff",
                "● v2  candidate  qwen3-1.7b  weight 0 %  ready 0/1  MIG 1g.10gb x1  5 restarts",
                "✖  chat-v2-6f8b4d9c7-k7q4m  CrashLoopBackOff  gpu-a100-1  1g.10gb x1  5 restarts",
            ],
            ["ContainersFailing"],  # its message is the phase's message already
        ),
    ],
)
def test_get_screen(name: str, shown: list[str], not_shown: list[str]) -> None:
    screen = get_text(name)
    for line in shown:
        assert line in screen, f"{line!r} not in\n{screen}"
    for line in not_shown:
        assert line not in screen, f"{line!r} in\n{screen}"


def test_get_shows_the_gateway_pods_under_their_own_branch() -> None:
    screen = get_text("progressing")
    gateway = screen[screen.index("● gateway") :]
    assert "chat-gateway-7b9d6c5f8-b8d4q  Running  gpu-a100-0" in gateway
    assert "chat-v1" not in gateway


def test_get_without_the_policy_says_so_and_shows_values_without_thresholds() -> None:
    found, now = snapshot("progressing", policy=False)
    refused = "SitsPolicy sits2026 not shown: Forbidden: you may not get sitspolicies.sits.dev"
    screen = text(get_screen.render(build(replace(found, notes=(refused,))), now))
    assert "Policy:     sits2026 (not readable: thresholds not shown)" in screen
    assert "success_rate_5m  1     ✔ Pass" in screen
    assert "breach" not in screen
    assert refused in screen


def test_get_without_pods_keeps_the_variants() -> None:
    found, now = snapshot("progressing", pods=False)
    screen = text(get_screen.render(build(found), now))
    assert "● v2  candidate  qwen3-1.7b  weight 20 %  ready 1/1" in screen
    assert "chat-v2-6f8b4d9c7-k7q4m" not in screen


def test_get_of_a_new_object_without_status_and_of_a_missing_one() -> None:
    obj = recorded("progressing")["object"]
    fresh = {k: v for k, v in obj.items() if k != "status"}
    screen = text(get_screen.render(build(Snapshot("chat", "sits-demo", fresh)), 0.0))
    assert "(no status yet: is the operator running?)" in screen
    assert "● v1  stable  qwen2.5-1.5b-instruct" in screen  # from the spec
    assert "Decisions" not in screen
    missing = text(get_screen.render(build(Snapshot("chat", "sits-demo", None)), 0.0))
    assert 'sitsdeployment "chat" not found in namespace "sits-demo"' in missing


def test_get_says_when_the_status_is_older_than_the_spec() -> None:
    obj = recorded("progressing")["object"]
    newer = {**obj, "metadata": {**obj["metadata"], "generation": 2}}
    screen = text(get_screen.render(build(Snapshot("chat", "sits-demo", newer)), 0.0))
    assert "the operator has not caught up with the latest spec yet" in screen


def test_get_shows_abnormal_conditions_the_message_does_not_already_say() -> None:
    obj = recorded("progressing")["object"]
    condition = {
        "type": "TrafficApplied",
        "status": "False",
        "reason": "GatewayBehind",
        "message": "gateway pod chat-gateway-b applies v1 90, v2 10",
        "lastTransitionTime": "x",
    }
    status = {**obj["status"], "conditions": [*obj["status"]["conditions"], condition]}
    screen = text(get_screen.render(build(Snapshot("c", "n", {**obj, "status": status})), 0.0))
    assert "TrafficApplied   False    GatewayBehind   gateway pod chat-gateway-b applies" in screen


# ------------------------------------------------------------------------------ explain


@pytest.mark.parametrize(
    ("name", "kind", "shown"),
    [
        (
            "rolled-back",
            Trigger.RULE,
            [
                "Decision:   rollback, 42s ago (2026-05-28 20:29:31 UTC)",
                "Reason:     rolled back: success-rate: success_rate_5m of v2 = 0.75 < 0.95",
                "Followed:   success-rate of SitsPolicy sits2026: success_rate_5m < 0.95 for 2 "
                "periods -> rollback (5m window, at least 20 requests)",
                "Period:     59333339: 20:29:30 to 20:30:00 UTC (SitsPolicy sits2026 evaluates "
                "every 30s)",
                "Candidate:  v2: success rate 0.75, p95 1381 ms",
                "• success-rate: failing 2 of 2 periods -> rollback",
                "• latency-p95: failing for 30s of 90s -> setWeight 10",
                "`kubectl sits retry chat -n sits-demo` starts the analysis over",
            ],
        ),
        (
            "paused",
            Trigger.COMMAND,
            [
                f"Followed:   the annotation {PAUSE}=2026-05-28T20:22:41Z",
                "`kubectl sits resume chat -n sits-demo` continues",
            ],
        ),
        (
            "progressing",
            Trigger.PROMOTION,
            [
                "Reason:     all SLIs pass (1 of 3 periods)",
                "Followed:   promotion.consecutivePasses 3",
                "v2        success_rate_5m   1        ✔ Pass    < 0.95 for 2 periods -> rollback",
                "• passing streak: 1 of 3 consecutive periods",
                "• the operator says: step 2 of 5 at 20 %: 1 of 3 passing periods before step 3",
                "• 2 more passing periods of every rule, then the next step",
            ],
        ),
        (
            "progressing-no-data",
            Trigger.NO_DATA,
            [
                "Followed:   noData: too few requests or no series (minRequests 20); after 10m "
                "noData.action hold",
                "v2        success_rate_5m   1        … NoData",
                "• no data for 0s of 600s",
            ],
        ),
        ("succeeded", Trigger.NONE, ["Decision:   scaleDown", "• done: the candidates serve"]),
        (
            "degraded",
            Trigger.RULE,
            [
                "Followed:   containers: the operator's own rule, not one of SitsPolicy sits2026",
                "• containers: failing 1 period",
            ],
        ),
    ],
)
def test_explain(name: str, kind: str, shown: list[str]) -> None:
    found, _ = snapshot(name)
    assert explain(build(found)).cause.kind == kind
    screen = explain_text(name)
    for line in shown:
        assert line in screen, f"{line!r} not in\n{screen}"


def test_explain_period_is_the_one_the_decision_fell_in() -> None:
    found, _ = snapshot("rolled-back")
    ex = explain(build(found))
    assert ex.decided_at is not None
    assert ex.period is not None
    assert ex.period.number == math.floor(ex.decided_at / 30)
    assert ex.period.start <= ex.decided_at < ex.period.end
    assert [r.sli for r in ex.numbers] == []  # the terminal pass emptied status.slis


def test_explain_numbers_are_those_of_the_rule_that_acted() -> None:
    found, _ = snapshot("progressing")
    obj = dict(found.obj or {})
    analysis = {**obj["status"]["analysis"], "lastReason": "holding: latency-p95: latency_p95_ms"}
    status = {**obj["status"], "analysis": analysis}
    ex = explain(build(replace(found, obj={**obj, "status": status})))
    assert ex.cause.kind == Trigger.RULE
    assert [r.name for r in ex.cause.rules] == ["latency-p95"]
    assert {row.sli for row in ex.numbers} == {"latency_p95_ms"}


def test_explain_before_any_analysis() -> None:
    obj = recorded("progressing")["object"]
    fresh = {k: v for k, v in obj.items() if k != "status"}
    screen = text(explain_screen.render(explain(build(Snapshot("chat", "ns", fresh))), 0.0))
    assert "no analysis has run yet" in screen
    assert "Decision:" not in screen


# ------------------------------------------------------------------------------ README

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(command: str) -> str:
    """The text of the README's code block that starts with `$ command`."""
    text = README.read_text()
    start = text.index(f"$ {command}\n") + len(command) + 3
    return text[start : text.index("\n```", start)]


def test_the_readme_shows_what_the_renderer_draws() -> None:
    found, now = snapshot("progressing")
    drawn = text(get_screen.watching(build(found), now), width=116)
    assert readme_block("kubectl sits get chat -n sits-demo --watch") == drawn
    found, now = snapshot("rolled-back")
    drawn = text(explain_screen.render(explain(build(found)), now), width=100)
    assert readme_block("kubectl sits explain chat -n sits-demo") == drawn


def test_brackets_in_the_operators_words_are_shown_not_read_as_markup() -> None:
    """Messages quote container logs: vLLM's "[rank0]:" (and worse) must come out as is."""
    found, now = snapshot("degraded")
    obj = dict(found.obj or {})
    said = "vllm: [rank0]: ValueError [bold]x[/] [/oops]"
    analysis = {**obj["status"]["analysis"], "lastReason": said}
    analysis["history"] = [
        *analysis["history"],
        {"at": now, "action": "hold", "reason": said, "weights": {}},
    ]
    status = {**obj["status"], "message": said, "analysis": analysis}
    view = build(replace(found, obj={**obj, "status": status}))
    screen = text(get_screen.render(view, now))
    assert f"Message:    {said}" in screen
    assert f"0s      hold      -               {said}" in screen
    assert f"Reason:     {said}" in text(explain_screen.render(explain(view), now))
