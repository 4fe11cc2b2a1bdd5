"""The session context a shop assistant client sends with each turn, and its fingerprint.

Why it grows: the seed article's "dynamic context inflation" (section 2.2). Real
assistants send what they know about the shopper with every request, and they know more
as the session goes on: fixed base attributes at login (5 fields), aggregated behaviour
once history is worth summarising (12 fields after the third turn), and real-time
recommendations at the end of the session (28 or more). Prompt length, and with it
prefill time and the gateway's token bucket, follows.

Why a fingerprint: it names the session's state (user, cart, history) in one short value,
so a trace or a cache key can tell two sessions apart without reading every field.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field

from .phrases import PRODUCTS

DEVICES = ("ios", "android", "web-desktop", "web-mobile")
LOCALES = ("en-GB", "de-DE", "fr-FR", "pl-PL", "it-IT", "nl-NL")
REGIONS = ("eu-west", "eu-central", "eu-south", "eu-north")
TIERS = ("none", "silver", "gold", "platinum")
CATEGORIES = ("shoes", "outdoor", "home", "fitness", "accessories", "kitchen")

BASE_FIELDS = 5
HISTORY_FIELDS = 12  # once the fourth turn is reached
END_FIELDS = 28  # at least, on the last turn
RECOMMENDED_ITEMS = 8  # at least, on the last turn


@dataclass(frozen=True)
class Profile:
    """What is known about the shopper before the first message."""

    session_id: str
    user_id: str
    device: str
    locale: str
    region: str
    tier: str
    product: str  # what this shopper is after
    visits_30d: int
    avg_order_value: int


def new_profile(rng: random.Random, session_id: str) -> Profile:
    """A shopper drawn from ``rng`` (the session's own generator)."""
    return Profile(
        session_id=session_id,
        user_id=f"u{rng.getrandbits(40):010x}",
        device=rng.choice(DEVICES),
        locale=rng.choice(LOCALES),
        region=rng.choice(REGIONS),
        tier=rng.choice(TIERS),
        product=rng.choice(PRODUCTS),
        visits_30d=rng.randrange(0, 40),
        avg_order_value=rng.randrange(15, 400),
    )


@dataclass
class SessionContext:
    """The state a session accumulates turn by turn; ``fields`` renders it for a request."""

    profile: Profile
    history: list[tuple[str, str]] = field(default_factory=list)  # (state, message)
    cart: list[str] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)

    def record(self, state: str, message: str, rng: random.Random) -> None:
        """Take this turn's message into the history, cart and searches."""
        self.history.append((state, message))
        if state == "add_to_cart":
            self.cart.append(self.profile.product)
        elif state == "search":
            self.searches.append(message)
        elif state == "browse":
            self.categories.append(rng.choice(CATEGORIES))

    def fields(self, turn: int, *, last: bool) -> dict[str, str]:
        """The context fields of turn ``turn`` (1-based): 5, growing to 12 at the fourth
        turn, then one more per turn, and at least 28 when ``last``."""
        out = self._base()
        if turn >= 2:
            out |= {"session_turn": str(turn), "previous_intent": self.history[-2][0]}
        if turn >= 3:
            out |= {"cart_items": ",".join(self.cart) or "empty", "last_search": self._search()}
        if turn >= 4:
            out |= self._aggregates()
        for number in range(5, turn + 1):
            out[f"event_{number}"] = self.history[number - 1][0]
        if last:
            out |= self._recommendations(turn, len(out))
        return out

    def _base(self) -> dict[str, str]:
        p = self.profile
        return {
            "user_id": p.user_id,
            "device": p.device,
            "locale": p.locale,
            "region": p.region,
            "loyalty_tier": p.tier,
        }

    def _search(self) -> str:
        return self.searches[-1] if self.searches else "none"

    def _aggregates(self) -> dict[str, str]:
        """History aggregation, switched on after the third turn (seed: 12 fields)."""
        return {
            "viewed_categories": ",".join(sorted(set(self.categories))) or "none",
            "visits_30d": str(self.profile.visits_30d),
            "avg_order_value_eur": str(self.profile.avg_order_value),
        }

    def _recommendations(self, turn: int, present: int) -> dict[str, str]:
        """Real-time recommendations injected at the end of the session (seed: 28+)."""
        items = max(RECOMMENDED_ITEMS, END_FIELDS - present - 3)
        rng = random.Random(f"{self.profile.user_id}/recommend/{turn}")
        picks = [rng.choice(PRODUCTS) for _ in range(items)]
        out = {
            "rec_strategy": "session-cooccurrence",
            "rec_model_version": "2026.12",
            "rec_context_turn": str(turn),
        }
        out |= {f"rec_item_{i + 1}": pick for i, pick in enumerate(picks)}
        return out


def fingerprint(context: SessionContext) -> str:
    """16 hex digits of SHA-256 over session, user id, cart and history: distinct per
    session, and changing as the session moves on."""
    profile = context.profile
    state = {
        "session": profile.session_id,
        "user": profile.user_id,
        "cart": context.cart,
        "history": context.history,
    }
    digest = hashlib.sha256(json.dumps(state, separators=(",", ":")).encode())
    return digest.hexdigest()[:16]
