"""The guard's aspect check: the same subject asked about in another way is refused
with reason "aspect"; a question reworded with another question word passes."""

from __future__ import annotations

import pytest

from sits_inference.cache.semantic import aspect, guard

DIFFERENT_QUESTIONS = [
    ("Why is plate tectonics important?", "How does plate tectonics work?"),
    ("What is a heat pump?", "What are the risks of a heat pump?"),
    ("How do I install nginx?", "What is the way to configure nginx as a reverse proxy?"),
    ("When was the Colosseum built?", "Who built the Colosseum?"),
    ("What causes gout?", "How is gout treated?"),
    ("history of the violin", "What does the future hold for the violin?"),
    ("What are the benefits of heat pumps?", "How expensive are heat pumps?"),
    ("What is Terraform?", "Why is Terraform so slow?"),
    ("How long do parrots live?", "Where do parrots live?"),
    ("shingles symptoms", "shingles treatment"),
    ("How do I grow tomatoes?", "Why are my tomatoes splitting?"),
]


@pytest.mark.parametrize(("stored", "query"), DIFFERENT_QUESTIONS)
def test_different_questions_about_one_subject_are_refused(stored: str, query: str) -> None:
    assert guard.check(query, stored) == "aspect"
    assert guard.check(stored, query) == "aspect"


SAME_QUESTIONS = [
    ("Why is the sea salty?", "What makes the sea salty?"),
    ("How does a dishwasher work?", "Explain how a dishwasher works"),
    ("How does a dishwasher work?", "What is the mechanism behind a dishwasher?"),
    ("How do I repot a cactus?", "What are the steps to repot a cactus?"),
    ("What causes thunder?", "Why does thunder happen?"),
    ("What is the purpose of the spleen?", "What does the spleen do?"),
    ("How much does a passport cost?", "What is the price of a passport?"),
    ("What is a mortgage?", "Can you explain how a mortgage works?"),
    ("When did the Titanic sink?", "What year did the Titanic sink?"),
    ("Who invented the light bulb?", "inventor of the light bulb"),
    ("Why is my fridge so loud?", "How do I stop my fridge from being so loud?"),
    ("What is the weather like in Oslo in May?", "How warm is Oslo in May?"),
    ("What is inflation?", "Why do prices go up over time?"),  # no shared subject
    ("Why do owls hoot?", "owls hooting explained"),
]


@pytest.mark.parametrize(("stored", "query"), SAME_QUESTIONS)
def test_rewordings_of_the_question_word_pass(stored: str, query: str) -> None:
    assert guard.check(query, stored) is None
    assert guard.check(stored, query) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("How does a VPN work?", {"mech", "def"}),
        ("What is the history of the VPN?", {"history"}),  # predicate over frame
        ("How do I install Docker?", {"proc:install"}),
        ("How much does Docker cost?", {"qty:cost", "qty"}),
        ("Is Docker fun?", set()),  # yes/no without a cue: no judgement
        ("What is 5 inches in miles?", set()),  # an attribute, not a definition
    ],
)
def test_atoms(text: str, expected: set[str]) -> None:
    assert aspect.atoms(text) == expected


def test_aspect_is_a_reported_reason() -> None:
    assert "aspect" in guard.REASONS
