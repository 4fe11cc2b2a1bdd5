"""What shoppers type, per journey state: paraphrase families and one-off templates.

Why families: an L1 semantic cache is only worth measuring against traffic where the same
question comes back in other words. Each family is one intent ("where is my order")
written several ways; sessions draw families with Zipf-like popularity (the first family
of a state is asked most), then one wording uniformly. Paraphrases inside a family say the
same thing: no other number, entity, negation or subject, which the sidecar's near-miss
guard would (rightly) refuse to treat as the same question.

Why templates: the rest of the traffic must be questions a cache has never seen, filled
with the session's own products, sizes and budgets, so hit rates are not inflated.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

FAMILIES: Mapping[str, Mapping[str, Sequence[str]]] = {
    "login": {
        "order_status": (
            "Where is my order?",
            "Where's my order?",
            "Can you tell me where my order is?",
            "Could you check where my order is right now?",
        ),
        "reset_password": (
            "How do I reset my password?",
            "How can I reset my password?",
            "What do I do to reset my password?",
            "I need to reset my password, how does that work?",
        ),
        "account_points": (
            "How many loyalty points do I have?",
            "What is my loyalty points balance?",
            "Can you show me my loyalty points balance?",
        ),
    },
    "browse": {
        "whats_new": (
            "What's new in the store this week?",
            "What is new in the store this week?",
            "Show me what's new in the store this week.",
            "Which new arrivals came in this week?",
        ),
        "deals": (
            "Are there any deals today?",
            "What deals do you have today?",
            "Any special offers today?",
            "Show me today's deals.",
        ),
        "bestsellers": (
            "What are your best sellers?",
            "Which products sell best?",
            "Show me the best selling products.",
        ),
    },
    "search": {
        "running_shoes": (
            "Do you have running shoes?",
            "Do you sell running shoes?",
            "Can I buy running shoes here?",
            "Are running shoes available in your store?",
        ),
        "waterproof_jacket": (
            "I'm looking for a waterproof jacket.",
            "I am looking for a waterproof jacket.",
            "Can you help me find a waterproof jacket?",
            "Show me waterproof jackets.",
        ),
        "gift_ideas": (
            "Can you suggest a gift for my mother?",
            "What would be a good gift for my mother?",
            "Help me pick a gift for my mother.",
        ),
    },
    "add_to_cart": {
        "add_item": (
            "Add this to my cart.",
            "Please add this to my cart.",
            "Put this in my cart.",
            "Can you add this item to my cart?",
        ),
        "size_guide": (
            "How do I know which size to pick?",
            "How do I choose the right size?",
            "Which size should I pick?",
        ),
        "stock": (
            "Is this item in stock?",
            "Do you have this item in stock?",
            "Is this item available right now?",
        ),
    },
    "checkout": {
        "payment_methods": (
            "Which payment methods do you accept?",
            "What payment methods can I use?",
            "How can I pay for my order?",
            "What are the ways to pay?",
        ),
        "delivery_time": (
            "How long does delivery take?",
            "How long will delivery take?",
            "When will my order arrive after I pay?",
        ),
        "return_policy": (
            "What is your return policy?",
            "How do returns work?",
            "Can I return items if they don't fit?",
        ),
    },
}

TEMPLATES: Mapping[str, Sequence[str]] = {
    "login": (
        "Hi, I'm back. Did my order {order} ship?",
        "Hello, can you update the email on account {order} to the new one?",
    ),
    "browse": (
        "Show me {color} {product} under {budget} euros.",
        "What {product} do you have in {color} for under {budget} euros?",
    ),
    "search": (
        "Find a {product} in size {size} for under {budget} euros.",
        "Do you have the {color} {product} in size {size} for under {budget} euros?",
    ),
    "add_to_cart": (
        "Add {qty} of the {color} {product} in size {size} to my cart.",
        "Put {qty} {color} {product}, size {size}, in my cart for delivery to {city}.",
    ),
    "checkout": (
        "Check out my cart and ship it to {city} by {weekday}; my budget is {budget} euros.",
        "Can the {color} {product} be delivered to {city} by {weekday}? Order {order}.",
    ),
}

PRODUCTS = (
    "running shoes",
    "rain jacket",
    "wool sweater",
    "backpack",
    "yoga mat",
    "desk lamp",
    "coffee grinder",
    "sunglasses",
    "leather belt",
    "hiking boots",
    "water bottle",
    "scarf",
)
COLORS = ("black", "navy", "red", "green", "grey", "white", "olive", "beige")
SIZES = ("XS", "S", "M", "L", "XL", "38", "40", "42", "44")
CITIES = ("Berlin", "Lyon", "Porto", "Gdansk", "Turin", "Utrecht", "Graz", "Brno")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


@dataclass(frozen=True)
class Utterance:
    """One user message, and which paraphrase family it came from (None: a one-off)."""

    text: str
    family: str | None
    variant: int | None  # which wording of the family


def family_weights(count: int) -> list[float]:
    """Zipf-like popularity (1, 1/2, 1/3...): a few questions dominate, as in real logs."""
    return [1.0 / (rank + 1) for rank in range(count)]


def repeat_utterance(state: str, rng: random.Random) -> Utterance:
    """A question of a popular family, in one of its wordings."""
    families = FAMILIES[state]
    names = list(families)
    name = rng.choices(names, weights=family_weights(len(names)))[0]
    wordings = families[name]
    index = rng.randrange(len(wordings))
    return Utterance(wordings[index], f"{state}.{name}", index)


def unique_utterance(state: str, rng: random.Random, product: str) -> Utterance:
    """A one-off question, filled with this session's details."""
    template = rng.choice(TEMPLATES[state])
    text = template.format(
        product=product,
        color=rng.choice(COLORS),
        size=rng.choice(SIZES),
        budget=rng.randrange(20, 400, 5),
        qty=rng.randrange(1, 6),
        city=rng.choice(CITIES),
        weekday=rng.choice(WEEKDAYS),
        order=f"#{rng.randrange(100000, 999999)}",
    )
    return Utterance(text, None, None)


def utterance(state: str, rng: random.Random, *, repeat_share: float, product: str) -> Utterance:
    """A repeat (share ``repeat_share``) or a one-off question for ``state``."""
    if rng.random() < repeat_share:
        return repeat_utterance(state, rng)
    return unique_utterance(state, rng, product)
