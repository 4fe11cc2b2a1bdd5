"""The run's schedule: when each request is sent, from which session, with what body.

Why plan ahead, purely: the whole sequence (arrival times, which session each arrival
continues, every message, header and sampling choice) follows from the configuration and
the seed alone, never from how fast the server answered. Two runs with one seed send the
same requests at the same offsets, so a regression between two builds is the server's,
not the generator's. It also keeps this module free of I/O and testable without a clock.

Arrivals are a Poisson process at ``rate`` (exponential gaps). Each arrival picks one of
``sessions`` slots at random and sends that slot's session's next turn; a slot whose
session has ended starts a new one. A session's turns therefore go out in order but do
not wait for the previous answer (open loop): the history a turn carries is its context
fields, not the assistant's earlier replies.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from .config import LoadConfig, TemperatureMix
from .journey import Turn, session_turns

PERSONA = "You are the shop assistant of an online store. Answer briefly and politely."
SESSION_HEADER = "x-session-id"  # the gateway's default sticky-session header
FINGERPRINT_HEADER = "x-sits-context-fingerprint"
CONTEXT_HEADER = "x-sits-context"


@dataclass(frozen=True)
class PlannedRequest:
    """One chat request, ready to send ``at_s`` seconds after the run starts."""

    index: int
    at_s: float
    turn: Turn
    stream: bool
    temperature: float | None
    messages: tuple[Mapping[str, str], ...]
    headers: Mapping[str, str]


def arrival_offsets(rate: float, *, seed: int, limit: int, duration_s: float) -> Iterator[float]:
    """Poisson arrival times (seconds from the start), at most ``limit``, all before
    ``duration_s``."""
    rng = random.Random(f"sits-loadgen/{seed}/arrivals")
    offset = 0.0
    for _ in range(limit):
        offset += rng.expovariate(rate)
        if offset >= duration_s:
            return
        yield offset


class SessionSlots:
    """``count`` concurrently open sessions; each call continues a randomly chosen one."""

    def __init__(self, config: LoadConfig) -> None:
        self._config = config
        self._rng = random.Random(f"sits-loadgen/{config.seed}/slots")
        self._slots: list[Iterator[Turn] | None] = [None] * config.sessions
        self.started = 0

    def next_turn(self) -> Turn:
        """The next turn of a random slot's session (a new session if the slot is free)."""
        slot = self._rng.randrange(len(self._slots))
        turns = self._slots[slot]
        if turns is None:
            turns = self._slots[slot] = self._new_session()
        turn = next(turns)
        if turn.last:
            self._slots[slot] = None
        return turn

    def _new_session(self) -> Iterator[Turn]:
        config = self._config
        turns = session_turns(
            self.started,
            seed=config.seed,
            journey=config.journey,
            repeat_share=config.repeat_share,
            max_turns=config.max_turns,
        )
        self.started += 1
        return turns


def context_json(turn: Turn) -> str:
    """The context fields as compact, ASCII-only JSON (also valid as a header value)."""
    return json.dumps(dict(turn.context), separators=(",", ":"), ensure_ascii=True)


def build_messages(turn: Turn, mode: str) -> tuple[Mapping[str, str], ...]:
    """System message (with the context when ``mode`` is ``system``) and the user turn."""
    system = PERSONA
    if mode == "system":
        system += f"\nSession context (fingerprint {turn.fingerprint}): {context_json(turn)}"
    return ({"role": "system", "content": system}, {"role": "user", "content": turn.utterance.text})


def build_headers(turn: Turn, mode: str, extra: Mapping[str, str]) -> dict[str, str]:
    """Sticky-session key and fingerprint always; the context too in ``header`` mode."""
    headers = {SESSION_HEADER: turn.session_id, FINGERPRINT_HEADER: turn.fingerprint}
    if mode == "header":
        headers[CONTEXT_HEADER] = context_json(turn)
    return headers | dict(extra)


def draw_temperature(rng: random.Random, mix: TemperatureMix) -> float | None:
    """One temperature from the weighted mix (None: the client sends none)."""
    values = [value for value, _ in mix]
    return rng.choices(values, weights=[weight for _, weight in mix])[0]


def plan(config: LoadConfig) -> Iterator[PlannedRequest]:
    """Every request of the run, in send order (lazily: a long run is not held in memory)."""
    slots = SessionSlots(config)
    rng = random.Random(f"sits-loadgen/{config.seed}/requests")
    arrivals = arrival_offsets(
        config.rate, seed=config.seed, limit=config.max_requests, duration_s=config.duration_s
    )
    for index, at_s in enumerate(arrivals):
        turn = slots.next_turn()
        yield PlannedRequest(
            index=index,
            at_s=at_s,
            turn=turn,
            stream=rng.random() < config.stream_share,
            temperature=draw_temperature(rng, config.temperatures),
            messages=build_messages(turn, config.context_mode),
            headers=build_headers(turn, config.context_mode, config.extra_headers),
        )
