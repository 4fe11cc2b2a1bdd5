"""Word lists for the near-miss guard: general English, not tuned to any workload.

Kept as plain data so that a reviewer can read what the guard knows. Every entry is
lower case; the guard stems words (`guard.stem`) before most lookups, so lists hold base
forms unless a form is irregular.
"""

from __future__ import annotations

from typing import Final


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Function words and question framing: words whose presence or absence never changes
# what is asked ("could you please tell me how ..." asks what "how ..." asks).
STOPWORDS: Final = _words(
    """
    a an the this that these those it its it's i me my mine we us our you your yours he him
    his she her they them their there here what which who whom whose when where why how
    is are was were be been being am do does did doing done have has had having will would
    shall should can could may might must of in on at by for with about as into through
    over under again further then once also just so too very really quite rather and or
    but if because while than until both each every any some all most more such only own
    same other another anyone someone something anything everything please kindly thanks
    thank tell explain show know wonder wondering want wanted like need let lets let's
    give get got okay ok many much hi hello hey help quick question way ways whats what's hows
    how's whos who's wheres where's im i'm ive i've id i'd youre you're exactly actually
    basically possible possibly best good go going able like mean means meaning
    to from into onto towards toward than versus vs via per out off up down on upon within
    across along around near between among
    """
)

# "avoid" negates as surely as "not": "which foods should I avoid" = "... shouldn't I eat".
NEGATIONS: Final = _words(
    "not no never none nothing nobody nowhere neither nor without cannot n't unable avoid"
)

# Words that take a number ("one" is mostly a pronoun: "which one", so it is not here).
NUMBER_WORDS: Final = {
    "zero": 0,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
    "thousand": 1000,
    "million": 1_000_000,
    "billion": 1_000_000_000,
    "dozen": 12,
    "half": 0.5,
    "double": 2,
    "twice": 2,
    "triple": 3,
    "first": 1,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
}

# Antonym axes: word -> (axis, polarity). Two texts that both speak on an axis must speak
# with the same polarities. Prefix antonyms (lock/unlock, able/unable, legal/illegal,
# connect/disconnect, encode/decode, upload/download) are found by rule, not listed.
_AXES: Final = {
    "activation": (
        "enable activate start begin allow open show unmute resume mount join subscribe "
        "include accept turn_on switch_on login signin connect attach",
        "disable deactivate stop end finish block close hide mute pause unmount leave "
        "unsubscribe exclude reject turn_off switch_off logout signout disconnect detach",
    ),
    "quantity": (
        "increase raise more higher grow boost expand maximize maximum max most "
        "upper greater bigger larger loud louder loudest",
        "decrease lower less fewer shrink reduce cut minimize minimum min least smaller "
        "quiet quieter quietest silent",
    ),
    "time": ("before earlier prior past previous last", "after later next future"),
    "trade": ("buy purchase import borrow receive download", "sell export lend send upload"),
    "speed": ("fast faster fastest quick quicker speed", "slow slower slowest"),
    "cost": ("cheap cheaper cheapest inexpensive", "expensive costly pricey"),
    "quality": ("best better good pro advantage benefit", "worst worse bad con disadvantage risk"),
    "temperature": ("hot warm warmer heat", "cold cool cooler freeze freezing chilly"),
    "truth": ("true correct valid", "false incorrect wrong invalid"),
    "direction": (
        "north east up left forward inside above top",
        "south west down right backward outside below bottom",
    ),
    "difficulty": ("easy easier simple", "hard harder difficult"),
    "size": ("big large huge long tall", "small little tiny short"),
    "age": ("old older oldest", "young younger youngest new newer newest"),
    "outcome": ("win won pass succeed success gain", "lose lost fail failure"),
    "employment": ("hire", "fire"),
    "travel": ("arrive arrival", "depart departure leave"),
    "presence": ("with", "without"),
    "safety": ("safe", "dangerous unsafe"),
    "gender": ("male man men boy father husband", "female woman women girl mother wife"),
    "day": ("day morning sunrise", "night evening sunset"),
    "wet": ("wet", "dry"),
    "membership": ("add insert install", "remove delete uninstall"),
    "sun": ("rise rises sunrise", "set sets sunset"),
    "heavy": ("heavy", "light"),
    "rich": ("rich", "poor"),
    "push": ("push", "pull"),
    "odd": ("odd", "even"),
    "import": ("import", "export"),
}


def _axis_table() -> dict[str, tuple[str, int]]:
    table: dict[str, tuple[str, int]] = {}
    for axis, (plus, minus) in _AXES.items():
        for polarity, words in ((1, plus), (-1, minus)):
            for word in words.split():
                table.setdefault(word, (axis, polarity))
    return table


ANTONYM_AXES: Final = _axis_table()

# Prefixes that turn a word into its opposite (un-lock), and prefix pairs that swap
# (en-code / de-code).
NEGATING_PREFIXES: Final = ("un", "dis", "de", "in", "im", "il", "ir", "non", "anti", "mis")
SWAPPED_PREFIXES: Final = (
    ("en", "de"),
    ("en", "dis"),
    ("up", "down"),
    ("in", "out"),
    ("over", "under"),
    ("max", "min"),
    ("inc", "dec"),
    ("pre", "post"),
    ("im", "ex"),
)
SWAPPED_SUFFIXES: Final = (("ful", "less"),)


# Words a paraphrase may swap for each other without changing the question.
_SYNONYMS: Final = (
    "fix repair solve resolve troubleshoot",
    "buy purchase",
    "make create build",
    "begin start",
    "large big huge",
    "small little tiny",
    "display show",
    "remove delete erase",
    "change modify alter edit",
    "find locate",
    "need require",
    "use utilize",
    "error issue problem bug",
    "car vehicle automobile",
    "picture photo image",
    "movie film",
    "kid child children kids",
    "cost price",
    "method approach technique",
    "step instruction procedure",
    "recipe dish",
    "phone smartphone",
    "doctor physician",
    "job career",
    "learn study",
    "trip journey",
    "cook prepare",
)


def _synonym_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for group in _SYNONYMS:
        words = group.split()
        for word in words:
            table.setdefault(word, words[0])
    return table


SYNONYMS: Final = _synonym_table()

# Proper names people often type in lower case. A name in this list, or any capitalised
# word that does not start a sentence, is an entity: it must appear in both texts.
_GAZETTEER: Final = """
afghanistan albania algeria andorra angola argentina armenia australia austria azerbaijan
bahamas bahrain bangladesh barbados belarus belgium belize benin bhutan bolivia bosnia
botswana brazil brunei bulgaria burkina burundi cambodia cameroon canada chad chile china
colombia comoros congo croatia cuba cyprus czechia czech denmark djibouti dominica ecuador
egypt eritrea estonia eswatini ethiopia fiji finland france gabon gambia georgia germany
ghana greece grenada guatemala guinea guyana haiti honduras hungary iceland india
indonesia iran iraq ireland israel italy jamaica japan jordan kazakhstan kenya kiribati
korea kosovo kuwait kyrgyzstan laos latvia lebanon lesotho liberia libya liechtenstein
lithuania luxembourg madagascar malawi malaysia maldives mali malta mauritania mauritius
mexico micronesia moldova monaco mongolia montenegro morocco mozambique myanmar namibia
nauru nepal netherlands holland nicaragua niger nigeria norway oman pakistan palau
palestine panama paraguay peru philippines poland portugal qatar romania russia rwanda
samoa senegal serbia seychelles singapore slovakia slovenia somalia spain sudan suriname
sweden switzerland syria taiwan tajikistan tanzania thailand togo tonga tunisia turkey
turkmenistan tuvalu uganda ukraine uruguay uzbekistan vanuatu vatican venezuela vietnam
yemen zambia zimbabwe usa uk uae america england scotland wales britain europe asia africa
antarctica oceania
london paris berlin madrid rome lisbon dublin amsterdam brussels vienna prague warsaw
budapest athens stockholm oslo copenhagen helsinki moscow kyiv kiev istanbul ankara cairo
nairobi lagos johannesburg tokyo osaka kyoto beijing shanghai seoul delhi mumbai bangalore
karachi dhaka bangkok hanoi jakarta manila sydney melbourne auckland toronto montreal
vancouver chicago boston seattle denver dallas houston austin miami atlanta phoenix
philadelphia detroit portland vegas orleans francisco angeles york washington ottawa lima
bogota santiago caracas havana dubai doha riyadh tehran baghdad jerusalem zurich geneva
munich hamburg frankfurt milan naples venice florence barcelona valencia seville porto
edinburgh manchester liverpool glasgow copenhagen reykjavik marrakech casablanca
california texas florida nevada oregon ohio michigan alaska hawaii arizona colorado
virginia carolina massachusetts pennsylvania illinois georgia tennessee kentucky
english french spanish german italian portuguese russian chinese mandarin cantonese
japanese korean arabic hindi bengali urdu turkish dutch swedish norwegian danish finnish
polish czech greek hebrew persian thai vietnamese indonesian swahili latin ukrainian
python java javascript typescript rust golang kotlin swift ruby php perl scala haskell
elixir erlang clojure lua fortran cobol matlab julia bash powershell sql mysql postgres
postgresql sqlite mongodb redis kafka docker kubernetes linux windows macos ubuntu debian
android ios iphone ipad excel word powerpoint chrome firefox safari git github gitlab
aws azure gcp react angular vue django flask spring node nodejs numpy pandas pytorch
tensorflow
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday
mercury venus earth mars jupiter saturn uranus neptune pluto
dollar dollars euro euros yen pound pounds rupee rupees peso pesos franc yuan won bitcoin
celsius fahrenheit kelvin meter meters metre kilometer kilometers km mile miles foot feet
inch inches yard yards kilogram kilograms kg gram grams ounce ounces liter liters litre
gallon gallons cup cups tablespoon teaspoon
"""
GAZETTEER: Final = _words(_GAZETTEER) - {"may", "word", "won", "spring", "turkey"}
