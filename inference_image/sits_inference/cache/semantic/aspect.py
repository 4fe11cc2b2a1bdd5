"""What a question asks about its subject: the guard's "aspect" check.

Why it exists: "Why is plate tectonics important?" and "How does plate tectonics work?"
score 0.84 with all-MiniLM-L6-v2; "Who founded Microsoft?" and "When was Microsoft
founded?" 0.95. The embedding is dominated by the subject, and the question word or
the predicate ("risks of", "cost of", "history of") that decides the answer barely
moves it. The other checks compare critical tokens that both texts carry in the same
frame; here the frame itself differs, so they see nothing.

Design: each text is mapped to a set of *atoms*, the kinds of answer it could be asking
for (cause, mechanism, procedure, time, place, person, cost, risk, ...). Paraphrase
forms are folded by giving them the same atoms: "what makes X Y" and "why is X Y"
(cause), "what are the steps to" and "how do I" (procedure), "explain how X works" and
"how does X work" (mechanism), "how much does X cost" and "price of X" (cost, a kind of
quantity). A cue that can mean several things gets all of them: a bare "why" may ask for
a cause, a value or a function; "what does X do" a mechanism or a function; "what is X"
a definition or a mechanism. Cues are in two tiers: predicate cues (nouns and fixed
phrases: "risks", "symptoms", "history", "cost") say more than question frames ("what
is", "how do I", "why"), so a text with a predicate cue is judged by those alone
("what is the history of X" asks for history, not a definition). A "how do I" question
is refined by its task verb (install, configure, clean, store, ...) when it has one.

`differs` is true only when both texts have atoms and no atom of one is compatible with
an atom of the other (equal, or a generic atom such as "qty" against a specific one such
as "qty:cost"). The guard adds the other condition: the texts share a subject word, so
two rewordings with no word in common ("What is inflation?" / "Why do prices go up?")
are never judged by their frames.

What it cannot do: it reads cue words, not meaning. A question without a cue it knows
(yes/no questions, "what do octopuses eat", "which city ...") has no atoms and is never
refused. Two different questions with compatible atoms pass ("how are glaciers formed"
/ "why are glaciers melting": both may ask for a cause). A paraphrase whose frames are
folded differently here than a person would fold them is refused (a lost hit, the cheap
error). Meant for short single questions; context sentences add their cues to the set,
which only makes a refusal less likely.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Final

_CLAUSE: Final = r"(?:^|[.?!,:;]\s*|\b(?:explain|tell me|know|wonder|asked me|and)\s+)"


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# Predicate cues: what is asked *about* the subject. Checked first; if any matches,
# the question frames below are ignored.
_PREDICATES: Final[tuple[tuple[re.Pattern[str], frozenset[str]], ...]] = tuple(
    (_rx(p), frozenset(atoms.split()))
    for p, atoms in (
        (r"\bside effects?\b|\brisks?\b|\bdangers?\b|\bdangerous\b|\bdownsides?\b", "risk"),
        (r"\bdisadvantages?\b|\bcons\b|\bsafe\b|\bsafety\b|\btoxic\b|\bharmful\b", "risk"),
        (r"\bbad for\b|\bsecure\b|\badverse\b", "risk"),
        (r"\bwhat [\w' ]{1,30} (?:can|could|does|do|will) [\w' ]{1,30} cause\b", "effect risk"),
        (r"\bbenefits?\b|\badvantages?\b|\bpros\b|\bimportan(?:t|ce)\b|\bworth it\b", "value"),
        (r"\bwhy should (?:i|we|you|people)\b|\bwhat good\b|\bgood for (?:you|me|us|y)", "value"),
        (
            r"\bhow (?:does|do|can|will|would) [\w' ]{1,40}\bhelps?\b|\bhow \w+ [\w ]*helps\b",
            "value",
        ),
        (r"\bwhy (?:does|do|is|are) [\w' ]{1,30}\bmatters?\b", "value"),
        (r"\bpurpose\b|\bfunctions?\b|\bused for\b|\buses of\b", "function"),
        (r"\bwhy do (?:we|you|people|humans|i) (?:need|have)\b", "function value cause"),
        (r"\bwhat (?:does|do) [\w' ]{1,40} do\b", "function mech"),
        (r"\bcosts?\b|\bprices?\b|\bpriced\b|\bexpensive\b|\bcheap\w*\b|\bfees?\b", "qty:cost"),
        (r"\bafford\b|\bhow much (?:is|are|does|do) [\w' ]{1,30}\b(?:charge|pay)\b", "qty:cost"),
        (r"\bhistory\b|\bhistorical\b", "history"),
        (r"\borigins?\b|\boriginated?\b|\bcomes? from\b|\bcame from\b", "history cause"),
        (r"\bfuture\b", "future"),
        (r"\bsymptoms?\b|\bsigns? of\b|\bwarning signs\b|\bfeels? like\b", "symptom"),
        (r"\bhow (?:do|can|would|will) (?:i|you) (?:know|tell) if\b", "symptom"),
        (r"\bcaus(?:e|es|ed|ing)\b(?! and effect)|\btrigger(?:s|ed)?\b|\bwhat makes\b", "cause"),
        (r"\bhow come\b|\breasons?\b|\bwhat does it mean when\b", "cause"),
        (
            r"\btreat(?:ed|ing|ment|ments)?\b|\bcur(?:e|es|ed|able)\b|\bremed(?:y|ies)\b",
            "treatment",
        ),
        (r"\bget rid of\b", "treatment proc"),
        (r"\bprevent(?:ion|ing|ed)?\b", "prevention proc"),
        (r"\bdiagnos\w*", "diagnosis"),
        (
            r"\bdiffer(?:s|ent|ence|ences)?\b|\bvs\b|\bversus\b|\bcompared?\b|\bcomparison\b",
            "compare",
        ),
        (r"\b(?!(?:other|rather|more|less|fewer|greater|larger)\b)\w+er than\b", "compare"),
        (r"\bmore \w+ than\b", "compare"),
        (r"\bmade of\b|\bingredients?\b|\bconsists? of\b|\bcomposed of\b", "composition"),
        (r"\bwhat (?:happens|would happen|will happen) (?:if|when)\b|\bconsequences?\b", "effect"),
        (r"(?<!side )\beffects? (?:of|on)\b|\bimpacts?\b|\baffects?\b|\bresults?\b", "effect"),
        (r"\boutcome\b|\bhow did [\w' ]{1,40} end\b", "effect"),
        (r"\balternatives?\b|\binstead of\b|\bsubstitutes?\b|\bstand in for\b", "alternative"),
        (r"\breplace [\w' ]{1,20} with\b|\breplacement for\b", "alternative"),
        (r"\blegal\b|\billegal\b|\blegally\b", "legal"),
        (r"\beffective(?:ness)?\b", "effect"),
        (r"(?<!how )\bdoes [\w' ]{1,30} (?:actually |really )?(?:work|help)\b", "effect"),
        (r"\bmechanism\b|\bprinciples?\b|\b(?:technology|science|physics) (?:behind|of)\b", "mech"),
        (r"\barchitecture\b|\bstructure\b", "mech def"),
        (r"\bhow [\w' ]{1,40}\bworks\b|\bhow (?:does|do|did) [\w' ]{1,40} work\b", "mech def"),
        (r"\bhow (?:does|do) it work\b", "mech proc def"),
        (r"\bsteps?\b|\binstructions?\b|\btutorial\b|\bguide\b|\brecipe\b|\btips?\b", "proc"),
        (r"\btricks?\b|\bbest practices\b|\bmethod\b|\bways? to\b|\bwalk me through\b", "proc"),
        (r"\bteach me\b|\bwhere do i start\b|\bwhat can i do\b|\bideas\b|\bany tips\b", "proc"),
        (r"\bwhat (?:is|are|'s) the (?:best |easiest |fastest |right |simplest )?ways?\b", "proc"),
        (r"\bprocess\b", "proc mech"),
        (r"\bwhat year\b|\bwhich year\b|\bwhat time\b|\bwhat day\b|\bdates?\b|\bseason\b", "time"),
        (r"\b(?:best|good|right|worst) time\b|\bhow soon\b|\bhow early\b", "time"),
        (r"(?<!what )(?<!best )(?<!good )(?<!right )\btime\b", "time qty:duration"),
        (r"\bhow long (?:is|are|was|were)\b", "qty:duration qty:size"),
        (r"\bhow long\b", "qty:duration"),
        (
            r"\bhow much time\b|\bhow many (?:seconds|minutes|hours|days|weeks|months|years)\b",
            "qty:duration",
        ),
        (r"\blifespan\b|\blife expectancy\b", "qty:duration"),
        (r"\bhow often\b|\bhow many times\b|\bhow frequently\b|\bfrequency\b", "qty:freq"),
        (r"\bhow (?:much|many)\b|\bamount\b|\bnumber of\b|\bintake\b|\bdos(?:e|age)\b", "qty"),
        (r"\bhow (?:hot|cold|warm|cool)\b|\btemperature\b", "qty:temp"),
        (r"\bhow (?:old|young)\b|\bage of\b|\bwhat age\b", "qty:age"),
        (r"\bhow (?:fast|quick|slow)\b|\bspeed\b", "qty:speed"),
        (r"\bhow (?:far|close)\b", "qty:distance"),
        (r"\bdebate\b|\bcontrovers\w*", "debate"),
        (r"\bmisconceptions?\b|\bmyths?\b", "myth"),
        (r"\bhow (?:big|large|small|tall|high|deep|wide|heavy)\b|\bsize\b", "qty:size qty:count"),
        (r"\bwrite (?:me )?an? (?:short )?(?:poem|story|song|limerick)\b", "creative"),
        (r"\bhow (?:smart|hard|difficult|easy|contagious|efficient|popular|common)\b", "degree"),
        (r"\bhabitat\b|\bin which (?:part|parts|country|countries|region|regions)\b", "place"),
        (
            r"\binventor\b|\bfounders?\b|\bbuilders?\b|\bcreators?\b|\bwhich (?:person|people)\b",
            "person",
        ),
        (r"\bwho (?:is|was|were) credited\b", "person"),
    )
)

# Question frames: the question word and its auxiliaries. Only used without a predicate.
_FRAMES: Final[tuple[tuple[re.Pattern[str], frozenset[str]], ...]] = tuple(
    (_rx(p), frozenset(atoms.split()))
    for p, atoms in (
        (_CLAUSE + r"why\b|\bwhy\s*\?", "cause value function"),
        (_CLAUSE + r"when\b", "time"),
        (_CLAUSE + r"where\b", "place"),
        (_CLAUSE + r"who\b|\bwho studies\b", "person"),
        (r"\bhow (?:do|can|should|could|would|will) (?:i|you|we|one)\b|\bhow to\b", "proc"),
        (
            r"\bhow (?:is|are|was|were) [\w' ]{1,40} (?:made|built|formed|produced|created)\b",
            "proc mech",
        ),
        (
            r"\bhow (?:is|are|was|were) [\w' ]{1,40} (?:constructed|done|played|calculated)\b",
            "proc mech",
        ),
        (r"\bhow (?:is|are|was|were) [\w' ]{1,40} (?:measured|named|generated)\b", "proc mech"),
        (r"\bhow (?:is|are|was|were) [\w' ]{1,40} taught\b", "proc"),
        (r"\bwhy (?:is|are|does|do|won't|isn't|doesn't|can't|did) my\b", "proc:fix"),
        (r"\bhow (?:do|does|did) (?!i\b|you\b|we\b|one\b)[\w' ]{1,40}", "mech cause"),
        (
            r"\bhow (?!(?:do|does|did|is|are|was|were|can|could|should|would|will|to)\b)\w+ \w+",
            "mech cause",
        ),
        (r"\bwhat (?:does|do) [\w' ]{1,40} mean\b|\bmeaning of\b|\bdefin(?:e|ition)\b", "def"),
        (r"^explain (?!how\b|why\b|what\b|where\b|when\b|who\b)|\bexplained\b", "def mech cause"),
    )
)

# "How do I X": what the task is. Synonyms share a class; different classes are
# different procedures ("install nginx" / "configure nginx").
_TASKS: Final = {
    word: cls
    for cls, words in {
        "install": "install installing setup set-up",
        "configure": "configure configuring configuration customize customise",
        "update": "update updating upgrade upgrading",
        "clean": "clean cleaning wash washing descale descaling scrub",
        "store": "store storing preserve preserving freeze freezing",
        "grow": "grow growing plant planting",
        "learn": "learn learning study studying practice practise practicing",
        "debug": "debug debugging",
        "fix": "fix fixing repair repairing stop stopping solve solving troubleshoot",
        "teach": "teach teaching taught",
        "deploy": "deploy deploying host hosting publish publishing",
        "test": "test testing",
        "buy": "buy buying purchase purchasing",
        "sell": "sell selling",
        "register": "register registering",
        "finance": "finance financing fund funding",
        "reheat": "reheat reheating",
        "become": "become becoming",
        "wear": "wear wearing",
        "tune": "tune tuning",
        "brine": "brine brining marinate marinating",
        "check": "check checking",
        "speed": "speed",
        "backup": "back backing backup",
        "cook": "cook cooking bake baking roast roasting",
    }.items()
    for word in words.split()
}

# Words that name an aspect, not a subject: the guard does not count them as shared.
ASPECT_WORDS: Final = _words(
    """work works working cost costs price prices history future benefit benefits risk risks
    symptom symptoms sign signs cause causes caused treatment treat treated difference
    different function purpose time long much many often way ways step steps tip tips
    important importance made make happen happens mean meaning use used"""
)

_WORD: Final = re.compile(r"[a-z][a-z'-]*")


# A fix is what someone asking why their own thing misbehaves wants ("why is my attic so
# hot" / "how can I stop my attic from being so hot").
_FOLDED: Final = frozenset({frozenset({"proc:fix", "cause"})})
_DEFINED: Final = re.compile(
    r"^(?:what|what's|whats) (?:is |are |was |were )?(?:a |an |the )?(.*?)\s*\??$"
)
_NOT_A_SUBJECT: Final = _words(
    """of for to in on at from with about like by would could should will can do does did
    is are was were be made mean"""
)


def _definition(lower: str) -> bool:
    """ "What is X?" with X a short name, not "what is 5 inches in miles" or "what is the
    weather like in ...": those ask for an attribute the frame does not name."""
    m = _DEFINED.match(lower)
    if not m:
        return False
    words = m.group(1).split()
    return 1 <= len(words) <= 3 and not _NOT_A_SUBJECT & set(words)


def _compatible(x: str, y: str) -> bool:
    if x == y or frozenset({x, y}) in _FOLDED:
        return True
    for generic in ("qty", "proc"):
        if (x == generic and y.startswith(generic + ":")) or (
            y == generic and x.startswith(generic + ":")
        ):
            return True
    return False


def _matches(table: Iterable[tuple[re.Pattern[str], frozenset[str]]], text: str) -> set[str]:
    return {a for pattern, atoms in table if pattern.search(text) for a in atoms}


@lru_cache(maxsize=8192)
def atoms(text: str) -> frozenset[str]:
    """The kinds of answer `text` may ask for; empty when it has no cue (no judgement)."""
    lower = " ".join(text.lower().replace("\u2019", "'").split())
    found = _matches(_PREDICATES, lower)
    if not found:
        found = _matches(_FRAMES, lower) | ({"def", "mech"} if _definition(lower) else set())
    if "proc" in found:
        words = _WORD.findall(lower.replace("teach me", ""))
        tasks = {_TASKS[w] for w in words if w in _TASKS}
        if tasks:
            found = (found - {"proc"}) | {f"proc:{t}" for t in tasks}
    return frozenset(found)


def differs(query: str, candidate: str) -> bool:
    """Both texts ask something known, and nothing one may ask is what the other asks."""
    a, b = atoms(query), atoms(candidate)
    return bool(a and b) and not any(_compatible(x, y) for x in a for y in b)
