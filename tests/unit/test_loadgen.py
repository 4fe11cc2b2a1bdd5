"""sits-loadgen without a server: journeys, context growth, paraphrase repeats, the plan,
the open-loop runner on simulated time (no sleeping), the address rule, the sender against
canned HTTP (httpx2 MockTransport: what the installed ``openai`` client runs on), summary
math and the command line."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from sits_loadgen import (
    CANCELLED,
    DROPPED,
    ERROR,
    EXIT,
    SHOP_JOURNEY,
    SUCCESS,
    Journey,
    LoadConfig,
    PlannedRequest,
    Progress,
    RequestRecord,
    SendResult,
    Turn,
    UnsafeTargetError,
    check_target,
    cli,
    format_summary,
    plan,
    run_load,
    sender,
    session_turns,
    summarize,
)
from sits_loadgen.clock import RealClock
from sits_loadgen.config import parse_temperatures
from sits_loadgen.phrases import FAMILIES, TEMPLATES
from sits_loadgen.plan import CONTEXT_HEADER, FINGERPRINT_HEADER, SESSION_HEADER
from sits_loadgen.records import completed_record
from sits_loadgen.summary import percentile, stats_of
from sits_loadgen.testing import SimClock

BASE = "http://127.0.0.1:9/v1"


def config(**overrides: Any) -> LoadConfig:
    values: dict[str, Any] = {
        "base_url": BASE,
        "model": "tiny",
        "rate": 10.0,
        "max_requests": 100,
        "duration_s": 60.0,
    }
    return LoadConfig(**(values | overrides))


def sessions(count: int, *, seed: int = 1, **kwargs: Any) -> Iterator[list[Turn]]:
    for index in range(count):
        yield list(session_turns(index, seed=seed, **kwargs))


# -- journeys -----------------------------------------------------------------------------


def test_transition_frequencies_match_the_table_over_many_sessions() -> None:
    drawn: dict[str, Counter[str]] = defaultdict(Counter)
    for turns in sessions(4000, max_turns=1000):
        for turn in turns:
            drawn[turn.state][turn.drawn_next] += 1
    for state, row in SHOP_JOURNEY.transitions.items():
        n = sum(drawn[state].values())
        assert n > 1000, f"{state} visited too rarely to judge"
        for following, p in row.items():
            tolerance = 4 * math.sqrt(p * (1 - p) / n) + 1e-9
            assert drawn[state][following] / n == pytest.approx(p, abs=tolerance), (
                state,
                following,
            )


def test_sessions_start_at_login_end_at_exit_or_the_turn_bound() -> None:
    lengths = []
    for turns in sessions(500, max_turns=6):
        assert turns[0].state == "login"
        assert [t.turn for t in turns] == list(range(1, len(turns) + 1))
        assert [t.last for t in turns] == [False] * (len(turns) - 1) + [True]
        assert turns[-1].drawn_next == EXIT or len(turns) == 6
        assert all(t.drawn_next != EXIT for t in turns[:-1])
        assert len({t.session_id for t in turns}) == 1
        lengths.append(len(turns))
    assert max(lengths) == 6
    assert any(t.state == "checkout" for turns in sessions(200) for t in turns)


def test_a_journey_table_that_cannot_be_sampled_is_refused() -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        Journey("login", {"login": {EXIT: 0.5}})
    with pytest.raises(ValueError, match="unknown states"):
        Journey("login", {"login": {"nowhere": 1.0}})
    with pytest.raises(ValueError, match="no phrases"):
        Journey("lobby", {"lobby": {EXIT: 1.0}})


# -- context growth and fingerprints -------------------------------------------------------


def test_context_grows_5_then_12_after_the_third_turn_then_28_or_more_at_the_end() -> None:
    seen_turn_4 = 0
    for turns in sessions(1500):
        sizes = [len(t.context) for t in turns]
        assert sizes == sorted(sizes), "context only grows along a session"
        assert len(turns[-1].context) >= 28
        for turn in turns[:-1]:
            if turn.turn == 1:
                assert len(turn.context) == 5
            elif turn.turn < 4:
                assert 5 < len(turn.context) < 12
            elif turn.turn == 4:
                assert len(turn.context) == 12
                seen_turn_4 += 1
            else:
                assert len(turn.context) > 12
    assert seen_turn_4 > 100


def test_fingerprints_differ_between_sessions_change_along_one_and_repeat_with_the_seed() -> None:
    runs = [[t.fingerprint for turns in sessions(50) for t in turns] for _ in range(2)]
    assert runs[0] == runs[1]
    firsts = [turns[0].fingerprint for turns in sessions(300)]
    assert len(set(firsts)) == 300
    long_one = next(turns for turns in sessions(100) if len(turns) >= 4)
    assert len({t.fingerprint for t in long_one}) == len(long_one)
    other_seed = [t.fingerprint for turns in sessions(50, seed=2) for t in turns]
    assert not set(other_seed) & set(runs[0])


# -- paraphrase repeats --------------------------------------------------------------------


def test_the_repeat_share_is_the_share_of_family_questions() -> None:
    for share in (0.0, 0.4, 1.0):
        turns = [t for ts in sessions(1500, repeat_share=share) for t in ts]
        repeats = sum(t.utterance.family is not None for t in turns) / len(turns)
        assert repeats == pytest.approx(share, abs=0.02)


def test_repeats_come_back_in_other_words_and_popular_families_dominate() -> None:
    turns = [t for ts in sessions(2000, repeat_share=1.0) for t in ts]
    wordings: dict[str, set[str]] = defaultdict(set)
    for turn in turns:
        assert turn.utterance.family is not None
        wordings[turn.utterance.family].add(turn.utterance.text)
    asked = Counter(t.utterance.family for t in turns)
    for state, families in FAMILIES.items():
        names = [f"{state}.{name}" for name in families]
        assert all(len(wordings[n]) == len(families[n.split(".")[1]]) for n in names)
        assert asked[names[0]] > asked[names[-1]], "Zipf-like popularity"


def test_one_off_questions_are_mostly_unique() -> None:
    texts = [t.utterance.text for ts in sessions(500, repeat_share=0.0) for t in ts]
    assert len(set(texts)) / len(texts) > 0.95
    assert all("{" not in text for text in texts), "every template slot is filled"


def test_every_state_has_paraphrase_families_and_templates() -> None:
    for state in SHOP_JOURNEY.transitions:
        assert len(TEMPLATES[state]) >= 2
        for wordings in FAMILIES[state].values():
            assert len(wordings) >= 3
            assert len(set(wordings)) == len(wordings)


# -- the plan: arrivals, determinism, the request's shape ----------------------------------


def test_arrivals_are_poisson_at_the_rate_and_bounded_in_time() -> None:
    planned = list(plan(config(rate=10.0, duration_s=1000.0, max_requests=1_000_000)))
    assert abs(len(planned) - 10_000) < 4 * math.sqrt(10_000)
    assert all(p.at_s < 1000.0 for p in planned)
    gaps = [b.at_s - a.at_s for a, b in itertools.pairwise(planned)]
    assert min(gaps) > 0
    assert statistics.mean(gaps) == pytest.approx(0.1, rel=0.03)
    assert statistics.stdev(gaps) / statistics.mean(gaps) == pytest.approx(1.0, abs=0.05)


def test_the_request_bound_cuts_the_plan() -> None:
    assert len(list(plan(config(rate=1000.0, max_requests=37)))) == 37


def test_the_plan_is_deterministic_for_a_seed() -> None:
    def fingerprint(seed: int) -> list[tuple[Any, ...]]:
        return [
            (
                p.at_s,
                p.turn.session_id,
                p.turn.utterance.text,
                p.stream,
                p.temperature,
                tuple(p.headers.items()),
            )
            for p in plan(config(seed=seed))
        ]

    assert fingerprint(7) == fingerprint(7)
    assert fingerprint(7) != fingerprint(8)


def test_sessions_interleave_with_their_turns_in_order() -> None:
    planned = list(plan(config(rate=50.0, max_requests=2000, duration_s=100.0, sessions=8)))
    turns: dict[str, list[int]] = defaultdict(list)
    open_now: set[str] = set()
    for p in planned:
        turns[p.turn.session_id].append(p.turn.turn)
        open_now.add(p.turn.session_id)
        assert len(open_now) <= 8
        if p.turn.last:
            open_now.discard(p.turn.session_id)
    assert all(numbers == list(range(1, len(numbers) + 1)) for numbers in turns.values())


def test_stream_share_and_temperature_mix_are_honoured() -> None:
    mix = parse_temperatures("0.7:0.5,none:0.4,0:0.1")
    planned = list(
        plan(
            config(
                rate=100.0, max_requests=5000, duration_s=100.0, stream_share=0.3, temperatures=mix
            )
        )
    )
    assert sum(p.stream for p in planned) / len(planned) == pytest.approx(0.3, abs=0.03)
    drawn = Counter(p.temperature for p in planned)
    for value, weight in mix:
        assert drawn[value] / len(planned) == pytest.approx(weight, abs=0.03)


def test_context_goes_in_the_system_message_or_a_header() -> None:
    in_system = next(iter(plan(config(context_mode="system"))))
    in_header = next(iter(plan(config(context_mode="header", extra_headers={"x-a": "b"}))))
    fields = json.dumps(dict(in_system.turn.context), separators=(",", ":"))
    assert fields in in_system.messages[0]["content"]
    assert CONTEXT_HEADER not in in_system.headers
    assert fields not in in_header.messages[0]["content"]
    assert json.loads(in_header.headers[CONTEXT_HEADER]) == dict(in_header.turn.context)
    for p in (in_system, in_header):
        assert p.headers[SESSION_HEADER] == p.turn.session_id
        assert p.headers[FINGERPRINT_HEADER] == p.turn.fingerprint
        assert p.messages[1] == {"role": "user", "content": p.turn.utterance.text}
    assert in_header.headers["x-a"] == "b"


# -- the runner, on simulated time --------------------------------------------------------


class FakeSender:
    """Answers after ``latency_s`` of simulated time; v2 serves every fourth request."""

    def __init__(self, clock: SimClock, latency_s: float = 0.2) -> None:
        self.clock, self.latency_s = clock, latency_s
        self.sent_at: dict[int, float] = {}
        self.in_flight = self.peak = 0
        self.fail: Callable[[PlannedRequest], bool] = lambda _: False

    async def send(self, request: PlannedRequest) -> SendResult:
        self.sent_at[request.index] = self.clock.monotonic()
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await self.clock.sleep(self.latency_s)
        finally:
            self.in_flight -= 1
        if self.fail(request):
            raise RuntimeError("sender bug")
        return SendResult(
            ok=True,
            latency_s=self.latency_s,
            status=200,
            variant="v2" if request.index % 4 == 0 else "v1",
            ttft_s=0.05 if request.stream else None,
            prompt_tokens=10,
            completion_tokens=5,
        )


async def simulate(cfg: LoadConfig, latency_s: float = 0.2, **kwargs: Any) -> tuple[Any, ...]:
    clock = SimClock()
    fake = FakeSender(clock, latency_s)
    if "fail" in kwargs:
        fake.fail = kwargs.pop("fail")
    result = await clock.run(run_load(cfg, sender=fake, clock=clock, **kwargs))
    return result, fake, clock


async def test_requests_go_out_at_their_planned_times_open_loop() -> None:
    cfg = config(rate=20.0, max_requests=200, duration_s=1000.0, concurrency=1000)
    result, fake, clock = await simulate(cfg, latency_s=3.0)  # answers far slower than arrivals
    planned = list(plan(cfg))
    assert [fake.sent_at[p.index] for p in planned] == pytest.approx([p.at_s for p in planned])
    assert [r.start for r in result.records] == pytest.approx(
        [clock.wall() - clock.monotonic() + p.at_s for p in planned], abs=0.001
    )
    assert {r.outcome for r in result.records} == {SUCCESS}
    assert fake.peak > 30, "the slow answers did not hold arrivals back"
    assert result.elapsed_s == pytest.approx(planned[-1].at_s + 3.0)


async def test_the_run_stops_at_the_duration() -> None:
    cfg = config(rate=10.0, max_requests=1_000_000, duration_s=30.0)
    result, _, _ = await simulate(cfg)
    assert 200 < len(result.records) < 400
    assert all(r.scheduled_s < 30.0 for r in result.records)
    assert result.elapsed_s <= 30.0 + 0.2 + 1e-9


async def test_stop_ends_the_arrivals_early_and_in_flight_requests_finish() -> None:
    cfg = config(rate=10.0, max_requests=1_000_000, duration_s=300.0)
    clock = SimClock()
    fake = FakeSender(clock, 2.0)
    result = await clock.run(
        run_load(cfg, sender=fake, clock=clock, stop=lambda: clock.monotonic() >= 10.0)
    )
    assert 50 < len(result.records) < 150
    assert all(r.scheduled_s < 10.5 for r in result.records)
    assert {r.outcome for r in result.records} == {SUCCESS}  # drained, not cancelled
    assert result.elapsed_s <= 10.5 + 2.0


async def test_the_concurrency_cap_drops_arrivals_instead_of_queueing_them() -> None:
    cfg = config(rate=10.0, max_requests=100, duration_s=100.0, concurrency=5)
    result, fake, _ = await simulate(cfg, latency_s=5.0)
    outcomes = Counter(r.outcome for r in result.records)
    assert fake.peak == 5
    assert outcomes[DROPPED] > 50
    assert outcomes[SUCCESS] + outcomes[DROPPED] == 100
    assert result.summary.dropped == outcomes[DROPPED]
    assert all(r.latency_ms is None for r in result.records if r.outcome == DROPPED)


async def test_the_drain_timeout_cancels_what_is_still_in_flight() -> None:
    cfg = config(rate=10.0, max_requests=20, duration_s=100.0, drain_timeout_s=5.0)
    result, _, _ = await simulate(cfg, latency_s=1000.0)
    assert {r.outcome for r in result.records} == {CANCELLED}
    assert result.elapsed_s == pytest.approx(result.records[-1].scheduled_s + 5.0, abs=1e-5)
    assert result.summary.overall.cancelled == 20
    assert result.summary.overall.success_rate is None


async def test_hooks_see_every_record_and_periodic_progress(tmp_path: Path) -> None:
    seen: list[RequestRecord] = []
    lines: list[Progress] = []
    out = tmp_path / "records.jsonl"
    cfg = config(rate=10.0, max_requests=100, duration_s=100.0, progress_interval_s=2.0, out=out)
    result, _, _ = await simulate(cfg, on_record=seen.append, on_progress=lines.append)
    assert sorted(seen, key=lambda r: r.index) == list(result.records)
    assert len(lines) == pytest.approx(result.elapsed_s / 2.0, abs=1)
    assert lines[-1].success <= 100
    assert "sent=" in lines[-1].line()
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(w["index"] for w in written) == list(range(100))
    assert set(written[0]) >= {
        "start",
        "variant",
        "cache",
        "outcome",
        "status",
        "latency_ms",
        "ttft_ms",
        "prompt_tokens",
        "completion_tokens",
        "error",
    }


async def test_a_failing_sender_or_hook_does_not_stop_the_run() -> None:
    def broken_hook(record: RequestRecord) -> None:
        raise ValueError("live view bug")

    def broken_progress(progress: Progress) -> None:
        raise ValueError("progress view bug")

    cfg = config(rate=10.0, max_requests=40, duration_s=100.0, progress_interval_s=1.0)
    result, _, _ = await simulate(
        cfg, fail=lambda p: p.index % 10 == 0, on_record=broken_hook, on_progress=broken_progress
    )
    assert Counter(r.outcome for r in result.records) == {SUCCESS: 36, ERROR: 4}
    assert result.summary.errors_by_kind == {"RuntimeError": 4}


async def test_simulated_runs_are_repeatable() -> None:
    cfg = config(rate=10.0, max_requests=50, duration_s=100.0, seed=3)
    first, _, _ = await simulate(cfg)
    second, _, _ = await simulate(cfg)
    assert first.records == second.records


# -- the address rule ----------------------------------------------------------------------

ALLOWED = [
    "http://127.0.0.1:8000/v1",
    "http://127.9.8.7/v1",
    "https://localhost:1/v1",
    "http://[::1]:80/v1",
    "http://10.244.0.1:8000/v1",
    "http://10.244.255.254/v1",
    "http://[::ffff:127.0.0.1]:8000/v1",
]
REFUSED = [
    "http://10.245.0.1/v1",
    "http://10.0.0.1/v1",
    "http://192.168.1.1/v1",
    "http://8.8.8.8/v1",
    "http://example.com/v1",
    "http://localhost.example.com/v1",
    "http://127.0.0.1.nip.io/v1",
    "http://127.0.0.1@example.com/v1",
    "http://user:pw@127.0.0.1/v1",
    "ftp://127.0.0.1/v1",
    "http://0x7f.0.0.1/v1",
    "http://2130706433/v1",
    "http://[::ffff:8.8.8.8]/v1",
    "http://[fe80::1]/v1",
    "http:///v1",
    "127.0.0.1:8000/v1",
]


@pytest.mark.parametrize("url", ALLOWED)
def test_loopback_and_local_cluster_pods_are_allowed(url: str) -> None:
    assert check_target(url) == url
    assert config(base_url=url).base_url == url


@pytest.mark.parametrize("url", REFUSED)
def test_everything_else_is_refused_before_any_request(url: str) -> None:
    with pytest.raises(UnsafeTargetError):
        check_target(url)
    with pytest.raises(UnsafeTargetError):
        config(base_url=url)


async def test_a_client_pointed_elsewhere_is_refused_by_the_sender() -> None:
    elsewhere = sender.build_client(config())
    elsewhere.base_url = "http://203.0.113.5/v1"
    with pytest.raises(UnsafeTargetError):
        sender.OpenAISender(config(), SimClock(), client=elsewhere)
    await elsewhere.close()


def test_the_cli_refuses_a_remote_target_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "--base-url",
        "http://93.184.216.34/v1",
        "--model",
        "m",
        "--rate",
        "1",
        "--max-requests",
        "1",
        "--duration",
        "1",
    ]
    with pytest.raises(SystemExit) as exited:
        cli.main(args)
    assert exited.value.code == 2
    assert "refused" in capsys.readouterr().err


# -- the sender, against canned HTTP -------------------------------------------------------

Handler = Callable[[httpx2.Request], httpx2.Response]
USAGE = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}


def completion_body() -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "tiny",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "hello"},
            }
        ],
        "usage": USAGE,
    }


def chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = (
        []
        if "usage" in extra
        else [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ]
    )
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "tiny",
        "choices": choices,
        **extra,
    }


def sse(*events: dict[str, Any] | str) -> bytes:
    lines = (e if isinstance(e, str) else json.dumps(e) for e in events)
    return "".join(f"data: {line}\n\n" for line in lines).encode()


STREAM = sse(
    chunk(""), chunk("he"), chunk("llo"), chunk(finish="stop"), chunk(usage=USAGE), "[DONE]"
)
SSE_HEADERS = {"content-type": "text/event-stream"}


async def send_via(
    handler: Handler, *, stream: bool, temperature: float | None = 0.7
) -> tuple[SendResult, list[httpx2.Request]]:
    seen: list[httpx2.Request] = []

    def recording(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return handler(request)

    cfg = config()
    client = sender.build_client(cfg, transport=httpx2.MockTransport(recording))
    openai_sender = sender.OpenAISender(cfg, RealClock(), client=client)
    first = next(iter(plan(cfg)))
    planned = PlannedRequest(
        first.index, first.at_s, first.turn, stream, temperature, first.messages, first.headers
    )
    try:
        return await openai_sender.send(planned), seen
    finally:
        await openai_sender.aclose()


async def test_a_plain_answer_yields_variant_cache_result_and_tokens() -> None:
    headers = {"x-sits-variant": "v2", "x-sits-cache": "hit"}
    result, seen = await send_via(
        lambda _: httpx2.Response(200, json=completion_body(), headers=headers), stream=False
    )
    assert result.ok
    assert result.status == 200
    assert result.error is None
    assert (result.variant, result.cache) == ("v2", "hit")
    assert (result.prompt_tokens, result.completion_tokens) == (11, 3)
    assert result.ttft_s is None
    assert result.latency_s > 0
    body = json.loads(seen[0].content)
    assert body["model"] == "tiny"
    assert body["max_tokens"] == 32
    assert body["temperature"] == 0.7
    assert "stream" not in body
    assert seen[0].headers[SESSION_HEADER].startswith("s")
    assert str(seen[0].url) == "http://127.0.0.1:9/v1/chat/completions"


async def test_no_temperature_is_sent_when_the_mix_says_none() -> None:
    _, seen = await send_via(
        lambda _: httpx2.Response(200, json=completion_body()), stream=False, temperature=None
    )
    assert "temperature" not in json.loads(seen[0].content)


async def test_a_stream_yields_time_to_first_token_and_usage() -> None:
    headers = SSE_HEADERS | {"x-sits-variant": "v1", "x-sits-cache": "miss"}
    result, seen = await send_via(
        lambda _: httpx2.Response(200, content=STREAM, headers=headers), stream=True
    )
    assert result.ok
    assert result.error is None
    assert result.ttft_s is not None
    assert 0 < result.ttft_s <= result.latency_s
    assert (result.variant, result.cache, result.completion_tokens) == ("v1", "miss", 3)
    body = json.loads(seen[0].content)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("response", "error", "status"),
    [
        (
            httpx2.Response(
                503, json={"error": {"message": "down"}}, headers={"x-sits-variant": "v1"}
            ),
            "InternalServerError",
            503,
        ),
        (httpx2.Response(429, json={"error": {"message": "slow down"}}), "RateLimitError", 429),
        (httpx2.Response(400, json={"error": {"message": "too long"}}), "BadRequestError", 400),
    ],
)
async def test_error_statuses_are_recorded_with_class_status_and_variant(
    response: httpx2.Response, error: str, status: int
) -> None:
    for stream in (False, True):
        result, _ = await send_via(lambda _: response, stream=stream)
        assert (result.ok, result.error, result.status) == (False, error, status)
    assert result.variant == response.headers.get("x-sits-variant")


async def test_transport_failures_and_broken_streams_are_errors() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("refused", request=request)

    result, _ = await send_via(refuse, stream=False)
    assert (result.ok, result.error, result.status) == (False, "APIConnectionError", None)
    broken = sse(chunk(""), chunk("he"), {"error": {"message": "upstream died", "code": 502}})
    result, _ = await send_via(
        lambda _: httpx2.Response(200, content=broken, headers=SSE_HEADERS), stream=True
    )
    assert (result.ok, result.error) == (False, "APIError")
    empty = httpx2.Response(200, content=sse("[DONE]"), headers=SSE_HEADERS)
    result, _ = await send_via(lambda _: empty, stream=True)
    assert (result.ok, result.error) == (False, "EmptyStream")


async def test_redirects_are_not_followed_anywhere() -> None:
    moved = httpx2.Response(307, headers={"location": "http://203.0.113.5/v1/chat/completions"})
    result, seen = await send_via(lambda _: moved, stream=False)
    assert len(seen) == 1
    assert seen[0].url.host == "127.0.0.1"
    assert (result.ok, result.status) == (False, 307)


def test_header_names_match_the_gateway_and_the_sidecar() -> None:
    """A drift check on the source (the data plane is refactored independently: where the
    constants live may move, the header values must not)."""
    data_plane = Path(__file__).resolve().parents[2] / "inference_image" / "sits_inference"

    def quoted_in(package: str, value: str) -> bool:
        return any(f'"{value}"' in p.read_text() for p in (data_plane / package).rglob("*.py"))

    assert quoted_in("gateway", sender.VARIANT_HEADER)
    assert quoted_in("gateway", SESSION_HEADER)
    assert quoted_in("cache", sender.CACHE_HEADER)


# -- summary math --------------------------------------------------------------------------


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.95) == 7.0
    values = [float(v) for v in range(100, 0, -1)]
    assert percentile(values, 0.5) == pytest.approx(50.5)
    assert percentile(values, 0.95) == pytest.approx(95.05)
    assert (percentile(values, 0.0), percentile(values, 1.0)) == (1.0, 100.0)


def record(index: int, outcome: str, **fields: Any) -> RequestRecord:
    base: dict[str, Any] = {
        "index": index,
        "session": "s",
        "turn": 1,
        "state": "login",
        "fingerprint": "f",
        "context_fields": 5,
        "family": None,
        "stream": False,
        "temperature": None,
        "scheduled_s": 0.0,
        "start": 0.0,
        "outcome": outcome,
    }
    return RequestRecord(**(base | fields))


RECORDS = [
    record(0, SUCCESS, variant="v1", latency_ms=100.0, prompt_tokens=10, completion_tokens=4),
    record(1, SUCCESS, variant="v1", latency_ms=300.0, ttft_ms=30.0),
    record(2, SUCCESS, variant="v1", latency_ms=200.0, ttft_ms=10.0),
    record(3, ERROR, variant="v1", status=503, error="InternalServerError", latency_ms=5.0),
    record(4, SUCCESS, variant="v2", latency_ms=50.0, cache="hit", completion_tokens=2),
    record(5, ERROR, error="APIConnectionError", latency_ms=1.0),
    record(6, DROPPED),
    record(7, CANCELLED, latency_ms=900.0),
]


def test_the_summary_counts_per_variant_and_keeps_dropped_and_cancelled_apart() -> None:
    summary = summarize(RECORDS, elapsed_s=2.0)
    assert (summary.planned, summary.dropped, summary.sent_rate) == (8, 1, 3.5)
    overall = summary.overall
    assert (overall.requests, overall.success, overall.errors, overall.cancelled) == (7, 4, 2, 1)
    assert overall.success_rate == pytest.approx(4 / 6)
    assert overall.latency_p50_ms == pytest.approx(150.0), "successes only"
    assert overall.ttft_p50_ms == pytest.approx(20.0)
    assert list(summary.per_variant) == ["-", "v1", "v2"]
    v1 = summary.per_variant["v1"]
    assert (v1.requests, v1.success_rate, v1.latency_p50_ms) == (4, 0.75, 200.0)
    assert summary.per_variant["v2"].cache_hits == 1
    assert summary.errors_by_kind == {"InternalServerError (503)": 1, "APIConnectionError": 1}
    assert summary.cache == {"hit": 1}
    assert (summary.prompt_tokens, summary.completion_tokens) == (10, 6)
    text = format_summary(summary)
    assert "8 planned, 7 sent, 1 dropped, 1 cancelled" in text
    assert any(line.split()[:5] == ["v1", "4", "3", "1", "75.0%"] for line in text.splitlines())
    assert "InternalServerError (503): 1" in text


def test_stats_of_nothing_has_no_rates() -> None:
    empty = stats_of([])
    assert empty.success_rate is None
    assert empty.latency_p95_ms is None


def test_a_completed_record_rounds_start_to_milliseconds() -> None:
    planned = next(iter(plan(config())))
    rec = completed_record(planned, 1_800_000_000.123456, SendResult(ok=True, latency_s=0.0123456))
    assert (rec.start, rec.latency_ms, rec.outcome) == (1_800_000_000.123, 12.346, SUCCESS)
    assert rec.context_fields == len(planned.turn.context)


# -- configuration and the command line ---------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"rate": 0.0},
        {"max_requests": 0},
        {"duration_s": 0.0},
        {"duration_s": math.inf},
        {"concurrency": 0},
        {"stream_share": 1.5},
        {"repeat_share": -0.1},
        {"model": ""},
        {"temperatures": ()},
        {"temperatures": ((0.7, 0.0),)},
        {"drain_timeout_s": 0.0},
    ],
)
def test_a_config_without_sane_bounds_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 (each case has its own message)
        config(**bad)


def test_the_command_line_maps_onto_the_config() -> None:
    args = cli.build_parser().parse_args(
        [
            "--base-url",
            BASE,
            "--model",
            "chat",
            "--rate",
            "8",
            "--max-requests",
            "40",
            "--duration",
            "10",
            "--seed",
            "5",
            "--stream-share",
            "0.25",
            "--context-mode",
            "header",
            "--temperature",
            "0:1,none:3",
            "--header",
            "x-sits-cache: bypass",
            "--extra-body",
            '{"ignore_eos": true}',
            "--out",
            "r.jsonl",
        ]
    )
    cfg = cli.config_from(args)
    assert (cfg.rate, cfg.max_requests, cfg.duration_s, cfg.seed) == (8.0, 40, 10.0, 5)
    assert (cfg.stream_share, cfg.context_mode) == (0.25, "header")
    assert cfg.temperatures == ((0.0, 1.0), (None, 3.0))
    assert cfg.extra_headers == {"x-sits-cache": "bypass"}
    assert cfg.extra_body == {"ignore_eos": True}
    assert cfg.out == Path("r.jsonl")


def test_the_command_line_requires_every_bound(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--base-url", BASE, "--model", "m", "--rate", "1", "--max-requests", "5"])
    assert exited.value.code == 2
    assert "--duration" in capsys.readouterr().err


def test_an_unparsable_temperature_mix_is_refused() -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        parse_temperatures("0.7:-1")
