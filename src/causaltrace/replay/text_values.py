"""The values inside a text that a correction may change: numbers and typed words (issue 19, "Proposals").

Mutation proposals (ARCHITECTURE decision 9) edit one value of a step at a time. Model sentences carry their values
in every shape, so a number is found wherever a reader sees one — at the end of a sentence (``The price is 21.``),
in parentheses, before a unit (``12kg``, ``12 kg``), after a currency sign (``$12.50``), with thousands separators
(``1,234``) — and is written back in the shape it had (decimals, separators, zero padding kept).

Words are typed: a word is only replaced by a word of the SAME type that the run already used (the task, the user's
input, an earlier step): a unit by a unit of the same dimension (kilograms / pounds), a weekday by a weekday, a
qualifier by its sibling (net / gross, minimum / maximum), an operator word by an operator word (sum / average), a
capitalised name (a person, a city) by another capitalised name. Framework markers and boilerplate (``Thought:``,
``TERMINATE``, role and agent names, stop words) are never edited and never inserted: a repair that swaps them
proves nothing about the agent's decision.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "NUMBER",
    "NumberMatch",
    "WordMatch",
    "close_first",
    "format_like",
    "is_boilerplate",
    "number_variants",
    "numbers_in",
    "same_case",
    "typed_words_in",
    "word_replacements",
    "word_type",
]

#: A number as a reader sees it. Not part of a word or identifier (``x2``, ``v1.2``), not a digit of a longer number;
#: a full stop after it ends a sentence unless a digit follows; letters may follow (a unit: ``12kg``), except
#: ordinal suffixes (``2nd``).
NUMBER = re.compile(
    r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d_]|\.\d|,\d{3}|(?:st|nd|rd|th)\b)"
)


@dataclass(frozen=True)
class NumberMatch:
    """One number in a text: where it is, how it was written, and its value."""

    start: int
    end: int
    raw: str
    value: int | float


def _parse(raw: str) -> int | float:
    plain = raw.replace(",", "")
    return float(plain) if "." in plain else int(plain)


def numbers_in(text: str) -> list[NumberMatch]:
    """Every number in ``text``, in order (see :data:`NUMBER`)."""
    return [NumberMatch(m.start(), m.end(), m.group(0), _parse(m.group(0))) for m in NUMBER.finditer(text)]


def number_variants(value: int | float) -> list[int | float]:
    """±1 and ±10 % of ``value`` (integers move by at least 1), without ``value`` itself or repeats."""
    if isinstance(value, bool):
        return []
    out: list[int | float] = [value + 1, value - 1]
    tenth = value * 0.1
    if isinstance(value, int):
        step = max(1, round(abs(tenth)))
        out += [value + step, value - step]
    else:
        out += [round(value + tenth, 10), round(value - tenth, 10)]
    seen: list[int | float] = []
    for v in out:
        if v != value and v not in seen:
            seen.append(v)
    return seen


def format_like(raw: str, value: int | float) -> str:
    """``value`` written the way ``raw`` was: the same decimals, thousands separators and zero padding."""
    plain = raw.replace(",", "")
    decimals = len(plain.split(".", 1)[1]) if "." in plain else 0
    separators = "," in raw
    if decimals:
        if round(float(value), decimals) == float(value):
            return f"{float(value):,.{decimals}f}" if separators else f"{float(value):.{decimals}f}"
        return repr(float(value))
    if float(value).is_integer():
        number = int(value)
        if separators:
            return f"{number:,}"
        digits = plain.lstrip("-")
        if len(digits) > 1 and digits.startswith("0") and number >= 0:
            return str(number).zfill(len(digits))
        return str(number)
    return repr(float(value))


def close_first(raw: str, candidates: Iterable[str]) -> tuple[list[str], list[str]]:
    """Split ``candidates`` into the ones that look like a copy of ``raw`` (a typo: swapped or changed digits, similar
    spelling) and the rest, each in their given order. A copy typo is the likeliest fault when a value seen earlier
    differs from ``raw`` by one or two characters, so those are tried first."""
    close, rest = [], []
    for c in candidates:
        (close if difflib.SequenceMatcher(None, raw, c).ratio() >= 0.6 else rest).append(c)
    return close, rest


# ------------------------------------------------------------------------------------------------------- words

#: Same-type word groups. A word is replaced only within its group, and only by a word the run already used.
_WORD_GROUPS: dict[str, tuple[str, ...]] = {
    "mass unit": ("kilograms", "kilogram", "kg", "pounds", "pound", "lbs", "lb", "grams", "gram", "ounces", "ounce",
                  "oz", "tons", "tonnes"),
    "length unit": ("meters", "meter", "metres", "metre", "kilometers", "kilometer", "km", "miles", "mile", "feet",
                    "foot", "ft", "inches", "inch", "centimeters", "centimeter", "cm", "millimeters", "mm", "yards"),
    "volume unit": ("liters", "liter", "litres", "litre", "gallons", "gallon", "milliliters", "ml", "cups"),
    "temperature unit": ("celsius", "fahrenheit", "kelvin"),
    "time unit": ("seconds", "second", "minutes", "minute", "hours", "hour", "days", "day", "weeks", "week",
                  "months", "month", "years", "year"),
    "currency": ("dollars", "dollar", "usd", "euros", "euro", "eur", "gbp", "yen", "jpy", "cents"),
    "weekday": ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
    "month name": ("january", "february", "march", "april", "june", "july", "august", "september", "october",
                   "november", "december"),
    "qualifier": ("net", "gross", "minimum", "maximum", "min", "max", "lowest", "highest", "smallest", "largest",
                  "first", "last", "before", "after", "above", "below", "more", "less", "increase", "decrease",
                  "ascending", "descending", "including", "excluding", "inclusive", "exclusive", "earliest",
                  "latest", "oldest", "newest", "cheapest"),
    "operator word": ("sum", "total", "average", "mean", "median", "product", "difference", "add", "subtract",
                      "multiply", "divide", "plus", "minus", "times", "divided", "multiplied", "added",
                      "subtracted", "count"),
    "direction": ("north", "south", "east", "west", "left", "right", "up", "down"),
}
_TYPE_OF: dict[str, str] = {word: kind for kind, words in _WORD_GROUPS.items() for word in words}

#: Framework markers, role names and words too common to carry a decision: never edited, never inserted.
_BOILERPLATE = frozenset(
    """thought thoughts code observation observations action actions final answer terminate approve approved
    task plan step steps user assistant system tool tools function calls call result results output input error
    the a an and or but if then else when what which who whom whose why how where will would shall should can could
    may might must have has had do does did is are was were be been being this that these those there here it its
    i we you he she they me us him her them my our your his their yes no not ok okay please thanks thank let lets
    now next so also just only very all any some each every both either neither of in on at to for from by with
    as into about over under between through during without within true false none null""".split()
)

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_NAME = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)*\b")


def is_boilerplate(word: str, agents: Iterable[str] = ()) -> bool:
    """A framework marker, a stop word, an ALL-CAPS keyword or the name of one of the run's agents."""
    lowered = word.lower()
    if lowered in _BOILERPLATE or (word.isupper() and len(word) > 1):
        return True
    return any(lowered == a.lower() or lowered in a.lower().replace("_", " ").split() for a in agents if a)


def word_type(word: str) -> str | None:
    """The same-type group ``word`` belongs to, or None."""
    return _TYPE_OF.get(word.lower())


@dataclass(frozen=True)
class WordMatch:
    """One typed word (or capitalised name) in a text."""

    start: int
    end: int
    text: str
    kind: str


def typed_words_in(text: str, agents: Iterable[str] = ()) -> list[WordMatch]:
    """The words of ``text`` a correction may swap: lexicon words (with their group) and capitalised names
    (kind ``name``), in order; boilerplate excluded."""
    agents = tuple(agents)
    found: dict[int, WordMatch] = {}
    for m in _WORD.finditer(text):
        kind = word_type(m.group(0))
        if kind is not None and not is_boilerplate(m.group(0), agents):
            found[m.start()] = WordMatch(m.start(), m.end(), m.group(0), kind)
    for m in _NAME.finditer(text):
        words = m.group(0).replace("-", " ").split()
        if m.start() in found or any(is_boilerplate(w, agents) or word_type(w) for w in words):
            continue
        if text[m.end() : m.end() + 1] == ":":  # a label such as ``Thought:`` or ``Answer:``
            continue
        found[m.start()] = WordMatch(m.start(), m.end(), m.group(0), "name")
    return [found[k] for k in sorted(found)]


def same_case(template: str, word: str) -> str:
    """``word`` in the capitalisation of ``template`` (lower, Capitalised or UPPER)."""
    if template.isupper() and len(template) > 1:
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word.lower() if word_type(word) else word


def word_replacements(match: WordMatch, pool: Iterable[WordMatch]) -> Iterator[str]:
    """Words of ``pool`` (from the task and earlier steps) of ``match``'s type, most recent first, each once."""
    seen = {match.text.lower()}
    for other in pool:
        if other.kind != match.kind or other.text.lower() in seen:
            continue
        seen.add(other.text.lower())
        yield other.text if match.kind == "name" else same_case(match.text, other.text)
