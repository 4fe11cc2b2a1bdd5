"""The near-miss guard: a second opinion on every candidate that cleared the threshold.

Why it exists: a sentence embedding summarises meaning as a direction, and a small edit
that flips the meaning barely moves it. With all-MiniLM-L6-v2, "convert Celsius to
Fahrenheit" and "convert Fahrenheit to Celsius" score 0.994, "enable 2FA" and "disable
2FA" about 0.9, "weather in Paris in 2023" and "... 2024" above 0.9, while honest
rewordings of one question often score 0.8 to 0.9. No threshold separates them.

Why this design: embeddings fail exactly where the surface is almost the same, and a
lexical comparison is reliable exactly there. So the guard compares the *critical
tokens* of the query and the candidate, in this order (the first failing check names
the `reason` label of `sits_cache_near_miss_rejections_total`):

1. number / year: the sequence of numeric values (digits, "1,000", "15%", number words,
   ordinals) must be identical, in order. "year" when a differing value is in 1900-2100.
2. negation: both texts negate (not, n't, never, without, avoid, ...) or neither does.
3. antonym: on each axis of a small lexicon (enable/disable, increase/decrease,
   buy/sell, before/after, ...) that both texts use, they must use the same polarities;
   and no word of one text may be the prefix-negation of a word of the other
   (lock/unlock, able/unable, connect/disconnect, encode/decode, upload/download).
4. order: direction and comparison markers give words roles (`roles.py`: "from X"
   source, "to X" target, "5 miles in feet", "how many X", "X than Y"); a shared word
   in opposite roles, or each text giving a role to a word the other does not, is a
   swap. So is the same set of content words with two of them exchanged around a third
   ("does smoking cause cancer" / "does cancer cause smoking").
5. entity: names must appear in both texts: capitalised words that do not start a
   sentence, acronyms, mixed case (iPhone), letters with digits (EC2), code and paths
   (os.path, snake_case), quoted strings, and a gazetteer of names people type in lower
   case (countries, cities, languages, programming languages, months, units).
6. substitution: the same sentence around one replaced span of one or two content words
   that no synonym explains: "how long should I boil an egg" / "... a potato". Only
   when the texts share their opening (or the span is a bare noun at the start), since a
   paraphrase rewords the opening ("how often" / "how many times a week").
7. aspect: the same subject asked about in another way ("why is X important" / "how does
   X work", "when was X built" / "who built X"): `aspect.py` says what each question
   asks for, with equivalent wordings folded together; only judged when the texts share
   a subject word and both ask something it recognises.

What it cannot do: it reads words, not meaning. A paraphrase that restates a number in
words it does not parse is refused; a swap of two neighbouring words without a marker
("feed my cat dog food" / "feed my dog cat food") or an antonym outside the lexicon
passes. The threshold still has to do its part. The benchmark reports
how often the guard rejects true paraphrases (lost hits) per reason.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from sits_inference.cache.semantic import aspect as asp
from sits_inference.cache.semantic import lexicon as lx
from sits_inference.cache.semantic import roles as rl

REASONS: Final = (
    "number",
    "year",
    "negation",
    "antonym",
    "order",
    "entity",
    "substitution",
    "aspect",
)

_TOKEN: Final = re.compile(
    r"""
    "(?P<dq>[^"]{1,80})" | `(?P<bq>[^`]{1,80})`
    | (?P<num>\d[\d,]*(?:\.\d+)?%?)(?P<suffix>[^\W\d_]*)
    | (?P<word>[^\W\d_](?:[\w'\u2019./:]*\w)?)
    | (?P<arrow>->|→)
    """,
    re.VERBOSE,
)
_SENTENCE_END: Final = frozenset(".?!:;\n")
_ORDINAL_SUFFIXES: Final = frozenset({"st", "nd", "rd", "th", "s"})
_MULTIPLIERS: Final = frozenset({"hundred", "thousand", "million", "billion", "dozen"})
_CONTRACTIONS: Final = {"ca": "can", "wo": "will", "sha": "shall"}
_SUFFIXES: Final = ("'s", "\u2019s", "'re", "'ll", "'ve", "'d", "'m")
_PHRASAL_ON_OFF: Final = frozenset({"turn", "switch", "toggle", "flip", "power", "put"})
_SPAN: Final = 2  # content words in a replaced span that still reads as one slot
_PHRASAL_IN_OUT: Final = frozenset({"log", "sign", "opt", "check"})


@dataclass(frozen=True, slots=True)
class Token:
    """One word of a text: `key` is the stemmed, synonym-folded form used for comparison."""

    lower: str
    key: str
    entity: bool
    content: bool
    initial: bool  # starts a sentence


@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything the guard compares, computed once per text (cached)."""

    tokens: tuple[Token, ...]
    numbers: tuple[float, ...]
    negated: bool
    axes: tuple[tuple[str, int], ...]
    roles: dict[str, frozenset[str]]
    words: frozenset[str]
    text: str


def stem(word: str) -> str:
    """A crude suffix stripper: only needs to map inflections of one word together."""
    w = word
    for suffix, keep in (("ies", "y"), ("ing", ""), ("est", ""), ("ed", ""), ("er", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)] + keep
            break
    else:
        if w.endswith("es") and w[:-2].endswith(("s", "x", "ch", "sh")) and len(w) > 4:
            w = w[:-2]
        elif w.endswith("s") and not w.endswith("ss") and len(w) > 3:
            w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiousl":
        w = w[:-1]  # stopp(ing) -> stop, bigg(er) -> big
    return w


def _key(lower: str) -> str:
    if lower in lx.SYNONYMS:
        return lx.SYNONYMS[lower]
    stemmed = stem(lower)
    return lx.SYNONYMS.get(stemmed, stemmed)


def _split_word(raw: str) -> tuple[str, bool]:
    """Lower-case base of a word and whether it carried "n't"."""
    lower = raw.lower().replace("\u2019", "'")
    if lower.endswith("n't"):
        base = lower[:-3]
        return _CONTRACTIONS.get(base, base), True
    for suffix in _SUFFIXES:
        if lower.endswith(suffix):
            return lower[: -len(suffix)], False
    return lower, False


def _is_entity(raw: str, lower: str, initial: bool) -> bool:
    if lower in lx.GAZETTEER or stem(lower) in lx.GAZETTEER:
        return True
    if any(c.isdigit() for c in raw) or any(c in raw for c in "_/.:"):
        return True
    if len(raw) > 1 and any(c.isupper() for c in raw[1:]):
        return True
    return raw[0].isupper() and not initial and lower != "i"


def _parse_number(text: str) -> float:
    return float(text.rstrip("%").replace(",", ""))


class _Builder:
    """Turns a text into an `Analysis`; one instance per text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[Token] = []
        self.number_slots: list[tuple[int, float, bool]] = []  # (position, value, is_word)
        self.quantities: list[int] = []  # positions of tokens right after a digit number
        self.negated = False

    def run(self) -> Analysis:
        for match in _TOKEN.finditer(self.text):
            self._take(match)
        return Analysis(
            tokens=tuple(self.tokens),
            numbers=tuple(_combine_numbers(self.number_slots)),
            negated=self.negated,
            axes=tuple(_axes(self.tokens)),
            roles=rl.assign(self.tokens, frozenset(self.quantities)),
            words=frozenset(w for t in self.tokens for w in (t.lower, t.key)),
            text=self.text,
        )

    def _initial(self, start: int) -> bool:
        before = self.text[:start].rstrip()
        return not before or before[-1] in _SENTENCE_END

    def _add(self, lower: str, *, entity: bool = False, initial: bool = False) -> None:
        key = _key(lower)
        content = lower not in lx.STOPWORDS and key not in lx.STOPWORDS and len(lower) > 1
        self.tokens.append(Token(lower, key, entity, content or entity, initial))

    def _take(self, m: re.Match[str]) -> None:
        quoted = m.group("dq") or m.group("bq")
        if quoted:
            self._add(quoted.strip().lower(), entity=True, initial=self._initial(m.start()))
        elif m.group("num"):
            self.number_slots.append((len(self.tokens), _parse_number(m.group("num")), False))
            suffix = m.group("suffix").lower()
            if not suffix:
                self.quantities.append(len(self.tokens))
            if suffix and suffix not in _ORDINAL_SUFFIXES:
                self._add(suffix)
        elif m.group("arrow"):
            self._add("->", initial=self._initial(m.start()))
        else:
            self._take_word(m.group("word"), m.start())

    def _take_word(self, raw: str, start: int) -> None:
        lower, contracted = _split_word(raw)
        if contracted or lower in lx.NEGATIONS:
            self.negated = True
        if lower in lx.NUMBER_WORDS:
            self.number_slots.append((len(self.tokens), lx.NUMBER_WORDS[lower], True))
            return
        initial = self._initial(start)
        self._add(lower, entity=_is_entity(raw, lower, initial), initial=initial)


def _combine_numbers(slots: Sequence[tuple[int, float, bool]]) -> list[float]:
    """Adjacent number words make one number: "twenty five" 25, "3 million" 3e6."""
    values: list[float] = []
    last_pos = -2
    for pos, value, is_word in slots:
        adjacent = values and pos == last_pos
        if adjacent and is_word and value in (100, 1000, 1_000_000, 1_000_000_000, 12):
            values[-1] *= value
        elif adjacent and is_word and values[-1] >= 20 and value < 10:
            values[-1] += value
        else:
            values.append(value)
        last_pos = pos
    return [round(float(v), 6) for v in values]


def _axes(tokens: Sequence[Token]) -> list[tuple[str, int]]:
    """(axis, polarity) for each antonym-lexicon word, in text order."""
    found: list[tuple[str, int]] = []
    for i, tok in enumerate(tokens):
        word = tok.lower
        before = {t.lower for t in tokens[max(0, i - 3) : i]}
        if word in ("on", "off") and before & _PHRASAL_ON_OFF:
            word = "turn_on" if word == "on" else "turn_off"
        elif word in ("in", "out") and before & _PHRASAL_IN_OUT:
            word = "login" if word == "in" else "logout"
        elif word == "with" and i + 1 < len(tokens) and tokens[i + 1].lower in ("no", "zero"):
            word = "without"
        forms = (word, tok.key, tok.key + "e")  # disabling -> disabl -> disable
        hit = next((lx.ANTONYM_AXES[f] for f in forms if f in lx.ANTONYM_AXES), None)
        if hit:
            found.append(hit)
    return found


@lru_cache(maxsize=8192)
def analyse(text: str) -> Analysis:
    """The guard's view of one text (cached: stored candidates are compared many times)."""
    return _Builder(text).run()


def check(query: str, candidate: str) -> str | None:
    """None when the candidate may answer the query, else the reason it may not."""
    a, b = analyse(query), analyse(candidate)
    for rule in _RULES:
        reason = rule(a, b)
        if reason:
            return reason
    return None


def _numbers(a: Analysis, b: Analysis) -> str | None:
    if a.numbers == b.numbers:
        return None
    differing = set(a.numbers) ^ set(b.numbers)
    if any(v.is_integer() and 1900 <= v <= 2100 for v in differing):
        return "year"
    return "number"


def _negation(a: Analysis, b: Analysis) -> str | None:
    return "negation" if a.negated != b.negated else None


def _antonyms(a: Analysis, b: Analysis) -> str | None:
    for axis in {x for x, _ in a.axes} & {x for x, _ in b.axes}:
        if {p for x, p in a.axes if x == axis} != {p for x, p in b.axes if x == axis}:
            return "antonym"
    only_a = {w for t in a.tokens for w in (t.lower, t.key)} - b.words
    only_b = {w for t in b.tokens for w in (t.lower, t.key)} - a.words
    if any(_opposite(x, y) for x in only_a for y in only_b):
        return "antonym"
    return None


def _opposite(x: str, y: str) -> bool:
    for first, second in ((x, y), (y, x)):
        for prefix in lx.NEGATING_PREFIXES:
            if second == prefix + first and len(first) >= 3:
                return True
        for p, q in lx.SWAPPED_PREFIXES:
            if first.startswith(p) and second.startswith(q):
                base = first[len(p) :]
                if len(base) >= 3 and base == second[len(q) :]:
                    return True
        for p, q in lx.SWAPPED_SUFFIXES:
            if first.endswith(p) and second.endswith(q) and first[: -len(p)] == second[: -len(q)]:
                return True
    return False


_OPPOSITE_ROLES: Final = (("source", "target"), ("left", "right"))


def _order(a: Analysis, b: Analysis) -> str | None:
    """A shared word in the opposite role, or each text giving a role to another word."""
    for key in a.roles.keys() & b.roles.keys():
        for x, y in _OPPOSITE_ROLES:
            ra, rb = a.roles[key], b.roles[key]
            if (x in ra and y in rb and y not in ra) or (y in ra and x in rb and x not in ra):
                return "order"
    if _transposed(a.tokens, b.tokens):
        return "order"
    shared = {t.key for t in a.tokens} & {t.key for t in b.tokens}
    for role in ("source", "target", "left", "right"):
        in_a = {k for k, roles in a.roles.items() if role in roles} & shared
        in_b = {k for k, roles in b.roles.items() if role in roles} & shared
        if in_a - in_b and in_b - in_a:  # each gives the role to a word the other does not
            return "order"
    return None


def _transposed(ta: Sequence[Token], tb: Sequence[Token]) -> bool:
    """The same content words with two of them exchanged around a third, inside one
    sentence: "does smoking cause cancer" / "does cancer cause smoking". (This also
    refuses a few true rewordings such as "Japan's capital is which city?"; a miss is the
    cheaper error.)"""
    ca = [(t.key, _sentence_no(ta, i)) for i, t in enumerate(ta) if t.content]
    cb = [(t.key, _sentence_no(tb, i)) for i, t in enumerate(tb) if t.content]
    if len(ca) < 2 or Counter(k for k, _ in ca) != Counter(k for k, _ in cb):
        return False
    diff = [i for i in range(len(ca)) if ca[i][0] != cb[i][0]]
    if len(diff) != 2:
        return False
    i, j = diff
    # Something stays between them ("smoking [cause] cancer"); two neighbours trading
    # places is how rewordings move a modifier ("Toronto population").
    return j - i >= 2 and ca[i][1] == ca[j][1] and cb[i][1] == cb[j][1]


def _sentence_no(tokens: Sequence[Token], index: int) -> int:
    return sum(t.initial for t in tokens[1 : index + 1])


def _entities(a: Analysis, b: Analysis) -> str | None:
    for first, second in ((a, b), (b, a)):
        for tok in first.tokens:
            if tok.entity and tok.lower not in second.words and tok.key not in second.words:
                return "entity"
    return None


def _substitution(a: Analysis, b: Analysis) -> str | None:
    """Same sentence around one replaced span: the same question about something else.

    Only when the words before and after the span are the same in both texts (most of
    each sentence) and each span holds a content word that no synonym explains.
    Paraphrases reword more than one span, so this rarely costs a hit.
    """
    ta, tb = a.tokens, b.tokens
    prefix = 0
    while prefix < min(len(ta), len(tb)) and ta[prefix].key == tb[prefix].key:
        prefix += 1
    suffix = 0
    limit = min(len(ta), len(tb)) - prefix
    while suffix < limit and ta[-1 - suffix].key == tb[-1 - suffix].key:
        suffix += 1
    mid_a = ta[prefix : len(ta) - suffix]
    mid_b = tb[prefix : len(tb) - suffix]
    content_a = sum(t.content for t in mid_a)
    content_b = sum(t.content for t in mid_b)
    if not (1 <= content_a <= _SPAN and 1 <= content_b <= _SPAN):
        return None
    kept = prefix + suffix
    if 2 * kept < max(len(ta), len(tb)) or kept < 2:
        return None
    if {t.key for t in mid_a if t.content} == {t.key for t in mid_b if t.content}:
        return None
    # A shared opening ("how long should I boil ...") frames the same question around a
    # different thing. Without one, only a bare noun swap at the start ("ibuprofen side
    # effects") is a slot; anything else is the question being reworded.
    if prefix >= 2 or all(t.content for t in (*mid_a, *mid_b)):
        return "substitution"
    return None


def _aspect(a: Analysis, b: Analysis) -> str | None:
    """The same subject asked about in another way: "why is X important" / "how does X
    work", "when was X built" / "who built X" (`aspect.py` says what a question asks).

    Only when the texts share a subject word (a content word that does not itself name
    an aspect): rewordings with nothing in common are not judged by their frames.
    """
    if not asp.differs(a.text, b.text):
        return None
    shared = _subject_keys(a) & _subject_keys(b)
    return "aspect" if shared else None


def _subject_keys(a: Analysis) -> set[str]:
    return {
        t.key
        for t in a.tokens
        if t.content and t.lower not in asp.ASPECT_WORDS and t.key not in asp.ASPECT_WORDS
    }


_RULES: Final = (_numbers, _negation, _antonyms, _order, _entities, _substitution, _aspect)
