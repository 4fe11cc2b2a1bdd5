"""User journeys as a state machine with probabilistic transitions (seed article, 2.2).

A shopper talks to a shop assistant: every state of the journey is one chat turn, and the
next state is drawn from the current state's transition table. ``EXIT`` is the terminal
state: reaching it ends the session without another message (the shopper leaves, or has
paid). Why a state machine rather than a fixed script: sessions of varied length and
shape are what make context sizes, cache repeats and sticky routing realistic, and the
tables are the one place to change the traffic mix.

Sampling is pure: every session draws from its own ``random.Random``, so a session's
whole conversation is fixed by the seed and its index, whatever the timing of the run.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from .context import SessionContext, fingerprint, new_profile
from .phrases import FAMILIES, Utterance, utterance

EXIT = "exit"

# Rows sum to 1. login -> browse/search (0.95, as in the seed's template), browse/search ->
# add to cart, add to cart -> checkout; every state but checkout may also be abandoned.
SHOP_TRANSITIONS: Mapping[str, Mapping[str, float]] = {
    "login": {"browse": 0.55, "search": 0.40, EXIT: 0.05},
    "browse": {"browse": 0.15, "search": 0.35, "add_to_cart": 0.35, EXIT: 0.15},
    "search": {"search": 0.20, "browse": 0.15, "add_to_cart": 0.50, EXIT: 0.15},
    "add_to_cart": {
        "browse": 0.15,
        "search": 0.15,
        "add_to_cart": 0.10,
        "checkout": 0.50,
        EXIT: 0.10,
    },
    "checkout": {EXIT: 1.0},
}


@dataclass(frozen=True)
class Journey:
    """A start state and, per state, the probability of each next state."""

    start: str
    transitions: Mapping[str, Mapping[str, float]]

    def __post_init__(self) -> None:
        """Refuse a table that cannot be sampled or names a state without phrases."""
        if self.start not in self.transitions:
            raise ValueError(f"start state {self.start!r} has no transitions")
        for state, row in self.transitions.items():
            if abs(sum(row.values()) - 1.0) > 1e-9 or min(row.values()) < 0:
                raise ValueError(f"transitions of {state!r} must be >= 0 and sum to 1")
            unknown = set(row) - set(self.transitions) - {EXIT}
            if unknown:
                raise ValueError(f"{state!r} leads to unknown states {sorted(unknown)}")
            if state not in FAMILIES:
                raise ValueError(f"state {state!r} has no phrases")

    def next_state(self, state: str, rng: random.Random) -> str:
        """Draw the state after ``state`` (``EXIT`` ends the session)."""
        row = self.transitions[state]
        return rng.choices(list(row), weights=list(row.values()))[0]


SHOP_JOURNEY = Journey(start="login", transitions=SHOP_TRANSITIONS)


@dataclass(frozen=True)
class Turn:
    """One user message of a session, with the context the client sends along with it."""

    session_id: str
    turn: int  # 1-based
    state: str
    drawn_next: str  # the state the table drew next (the session may end first: max_turns)
    last: bool
    utterance: Utterance
    context: Mapping[str, str]
    fingerprint: str


def session_id_of(seed: int, index: int) -> str:
    """Stable and distinct across seeds, so two runs never share sticky-session keys."""
    return f"s{seed & 0xFFFFFFFF:08x}-{index:06d}"


def session_turns(
    index: int,
    *,
    seed: int,
    journey: Journey = SHOP_JOURNEY,
    repeat_share: float = 0.4,
    max_turns: int = 12,
) -> Iterator[Turn]:
    """The turns of session ``index``: a walk of ``journey`` that ends at ``EXIT`` or
    after ``max_turns`` (a bound, so a browse loop cannot run forever)."""
    rng = random.Random(f"sits-loadgen/{seed}/session/{index}")
    session_id = session_id_of(seed, index)
    context = SessionContext(new_profile(rng, session_id))
    state = journey.start
    for number in range(1, max_turns + 1):
        following = journey.next_state(state, rng)
        last = following == EXIT or number == max_turns
        said = utterance(state, rng, repeat_share=repeat_share, product=context.profile.product)
        context.record(state, said.text, rng)
        fields = context.fields(number, last=last)
        yield Turn(session_id, number, state, following, last, said, fields, fingerprint(context))
        if last:
            return
        state = following
