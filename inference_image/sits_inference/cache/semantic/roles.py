"""Who is source and who is target: the roles the near-miss guard compares for "order".

Swapped-order near misses ("convert Celsius to Fahrenheit" / "... Fahrenheit to
Celsius", "how many cups in a tablespoon" / "how many tablespoons in a cup") keep every
word and change only who plays which part. Word order alone cannot tell them from a
paraphrase ("flights from Paris to London" / "flights to London from Paris"), so the
guard gives words roles from the markers around them and compares roles, not positions:

- "from X": X is a source; "to/into/onto/towards X" (and "->"): X is a target, and a
  name just before the marker is a source ("Paris to London"; but "quick to learn" is
  an infinitive and names no source).
- the unit after a number written in digits is a source ("5 miles ..."), and "in X"
  right after it names the target ("5 miles in feet"); "how many/much X" asks for X (a
  target), and the next thing named is what it is measured against (a source): "how many
  feet is 5 miles".
- "than" (and comparing verbs: beat, outrun, ...): the words before it in the sentence
  are on the left, the words after it on the right ("is a cheetah faster than a lion").
Near a marker, a name (an entity token) wins over an ordinary word ("India time to
Greenwich Mean Time": the roles go to India and Greenwich, not to "time").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Protocol

SOURCE_MARKERS: Final = frozenset({"from"})
TARGET_MARKERS: Final = frozenset({"to", "into", "towards", "toward", "onto", "->", "\u2192"})
# "than", and verbs that compare their subject with their object ("A beats B").
COMPARISON_MARKERS: Final = frozenset(
    [
        "than",
        "beat",
        "beats",
        "outrun",
        "outruns",
        "outperform",
        "outperforms",
        "outpace",
        "outpaces",
        "exceed",
        "exceeds",
        "surpass",
        "surpasses",
        "defeat",
        "defeats",
        "outweigh",
        "outweighs",
        "outlast",
        "outlasts",
    ]
)
MARKERS: Final = SOURCE_MARKERS | TARGET_MARKERS | COMPARISON_MARKERS
# Words between a number and its unit ("120 degrees Fahrenheit").
_UNIT_FILLERS: Final = frozenset({"degrees", "degree", "of", "a", "an"})
_REACH: Final = 5  # tokens
_CLOCK_UNITS: Final = frozenset({"am", "pm", "oclock", "o'clock", "h"})


class RoleToken(Protocol):
    @property
    def lower(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def entity(self) -> bool: ...
    @property
    def content(self) -> bool: ...
    @property
    def initial(self) -> bool: ...


def assign(tokens: Sequence[RoleToken], after_number: frozenset[int]) -> dict[str, frozenset[str]]:
    """key -> roles; `after_number` holds the positions of tokens that follow a number."""
    roles: dict[str, set[str]] = {}

    def give(index: int | None, role: str) -> None:
        if index is not None:
            roles.setdefault(tokens[index].key, set()).add(role)

    for i, tok in enumerate(tokens):
        if tok.lower in SOURCE_MARKERS:
            give(_named(tokens, i, +1), "source")
        elif tok.lower in TARGET_MARKERS:
            give(_named(tokens, i, +1), "target")
            before = _named(tokens, i, -1)
            # "Paris to London": a source. "quick to learn", "how to enable": an infinitive,
            # whose "to" names no source; only a name before "to" is taken as one.
            if before is not None and tokens[before].entity:
                give(before, "source")
        elif tok.lower in COMPARISON_MARKERS:
            for j in _clause(tokens, i, -1):
                give(j, "left")
            for j in _clause(tokens, i, +1):
                give(j, "right")
        elif i in after_number:
            unit = _unit(tokens, i)
            give(unit, "source")
            if unit is not None:
                _measured_in(tokens, unit, give)
        elif _asks_quantity(tokens, i):
            give(i + 2, "target")
            give(_named(tokens, i + 2, +1), "source")
    return {k: frozenset(v) for k, v in roles.items()}


def _asks_quantity(tokens: Sequence[RoleToken], i: int) -> bool:
    """ "how many X" / "how much X" at position i."""
    return (
        tokens[i].lower == "how"
        and i + 2 < len(tokens)
        and tokens[i + 1].lower in ("many", "much")
        and tokens[i + 2].content
    )


def _measured_in(
    tokens: Sequence[RoleToken], unit: int, give: Callable[[int | None, str], None]
) -> None:
    """ "5 miles in feet", "3 pm India time in Japan time": what follows "in" is the
    target; a name between the unit and "in" is the source.

    A clock time is different: "3 pm in Tokyo" and "3 pm Tokyo time" both say where
    the time is read, so the place is the source.
    """
    clock = tokens[unit].lower in _CLOCK_UNITS
    names: list[int] = []
    found_in = False
    for j in range(unit + 1, min(len(tokens), unit + 5)):
        tok = tokens[j]
        if tok.lower in MARKERS or tok.initial:
            break
        if tok.lower == "in":
            give(_named(tokens, j, +1), "source" if clock else "target")
            found_in = True
            break
        if tok.entity:
            names.append(j)
            if clock:
                break
    if clock or found_in:
        for name in names:
            give(name, "source")


def _unit(tokens: Sequence[RoleToken], i: int) -> int | None:
    for j in range(i, min(len(tokens), i + 2)):
        if tokens[j].lower in _UNIT_FILLERS:
            continue
        return j if tokens[j].content else None
    return None


def _named(tokens: Sequence[RoleToken], i: int, step: int) -> int | None:
    """The nearest content word within reach on one side of a marker (or its name)."""
    j = i + step
    while 0 <= j < len(tokens) and abs(j - i) <= _REACH:
        tok = tokens[j]
        crossed = tok.initial if step > 0 else tokens[j + 1].initial
        if crossed or tok.lower in MARKERS:
            break
        if tok.entity:
            return j
        if tok.content:
            return _compound_name(tokens, j, step)
        j += step
    return None


def _compound_name(tokens: Sequence[RoleToken], j: int, step: int) -> int:
    """In a compound ("India time", "Greenwich Mean Time") the name carries the role."""
    k = j + step
    while 0 <= k < len(tokens) and tokens[k].content and not tokens[k].initial:
        if tokens[k].entity:
            return k
        k += step
    return j


def _clause(tokens: Sequence[RoleToken], i: int, step: int) -> list[int]:
    """Content words from the marker to the sentence's edge (or the next marker)."""
    out: list[int] = []
    j = i + step
    while 0 <= j < len(tokens) and tokens[j].lower not in MARKERS:
        if step > 0 and tokens[j].initial:
            break
        if tokens[j].content:
            out.append(j)
        if step < 0 and tokens[j].initial:
            break
        j += step
    return out
