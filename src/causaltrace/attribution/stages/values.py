"""The typed values of a step that provenance traces (issue 20 item 4): numbers, units, entities, operators, target
names and qualifier words.

A decisive error is usually ONE value a step got wrong — a number miscopied, the wrong unit, the wrong city, ``/ 2``
for three items, a handoff to the wrong agent, a dropped "excluding". :func:`values_in` finds those values in a
step's text, tool arguments and code, each as a :class:`Value` with a normalised ``key`` (so ``12.50``, ``12.5`` and
``$12.50`` are one value, ``pounds`` and ``lb`` one unit) and a ``group`` that says which values are alternatives to
each other (a unit's dimension, ``weekday``, ``month``, ``name``, ``number``, ``operator``, a qualifier's pair):
two values of one group are what a substitution error swaps.

Kinds:

* ``number`` — a number as a reader sees it (sentence-final, in parentheses, with a unit or currency, thousands
  separators), normalised (``207.0`` = ``207``);
* ``unit`` — a unit word or abbreviation (abbreviations of one or two letters only right after a number, or as a
  whole argument value), grouped by dimension; ``quantity`` — a number with its unit (``13.1 mi``; a call's one
  number argument with its one unit argument), so ``13.1 feet`` for the task's ``13.1 miles`` is a substitution
  even where ``miles`` is also used;
* ``entity`` — a capitalised name (a city, a person, a landmark) that is not a sentence's function word, and every
  weekday / month;
* ``operator`` — in code: an arithmetic or comparison operator with its literal operand (``/ 2``, ``> 100``), the
  bounds of ``range(...)`` (also as the span it covers: ``range(1, 6)`` is ``1..5``) and of slices, a mean written
  ``(a + b + c) / n`` or ``sum(xs) / n`` (``xs`` a literal list, or a name the code assigns one); in any text: bounds stated in words (``at least 100`` is ``>= 100``, ``from 1 to 6`` the span
  ``1..6``) and aggregation words (sum, average, maximum…);
* ``identifier`` — a code that names one record: a date (``2026-04-09``, group ``date``; ``07/12/2026``,
  ``written-date``) or a clock time (``14:00``, ``time``), whose parts are no numbers and an upper-case code with digits (``A-512``, ``INV-2041``, group ``id:`` and its letters), compared only
  for copy slips (a digit changed, two swapped);
* ``target`` — the agent a step addresses (a handoff target, a selected speaker, ``X (-> Y)``) and a called tool or
  managed agent;
* ``word`` — qualifiers that flip a result (net / gross, including / excluding, cancelled…), and exclusions
  (``excluding cancelled orders``: group ``exclusion``; a number's ``tag`` is the word labelling it, ``80 cancelled``,
  so a step summing a number its instruction excluded can be found).

Pure functions over text, no model, linear in the text (texts are cut at ``limit`` characters).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache

from causaltrace.attribution.stages.tokens import salient_tokens

__all__ = ["argument_names", "Value", "number_key", "stem", "unit_group", "values_in"]

#: not a part of an identifier a hyphen joins to a word: "sales-7", "COVID-19" (a range "10-20" keeps its 20)
_NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z]-)-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d_]|\.\d|,\d{3}|(?:st|nd|rd|th)\b)")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
#: an ISO date, and a record's code: upper-case letters, an optional hyphen, two or more digits ("A-512", "INV2041")
_DATE = re.compile(r"(?<![\w-])(\d{4})-(\d{2})-(\d{2})(?![\w-]|\.\d)")
#: a clock time ("14:00", "9:30"): a time of day, no numbers (15:00 after 14:00 for one hour is no restated 15)
_TIME = re.compile(r"(?<![\w:.])([01]?\d|2[0-3]):([0-5]\d)(?![\w:]|\.\d)")
#: a date written day / month / year (or month / day: which, the text does not say), kept as written
_SLASH_DATE = re.compile(r"(?<![\w/.])\d{1,2}[/.]\d{1,2}[/.]\d{4}(?![\w/]|\.\d)")
_IDENTIFIER = re.compile(r"(?<![\w-])([A-Z]{1,5})-?(\d{2,})(?!\w|\.\d|-\w)")
_LABEL = re.compile(r"[ \t]?(?:[A-Za-z]{1,4}[ \t])?([A-Za-z]{4,})")
_EXCLUSION = re.compile(r"\b(?:excluding|except(?:\s+for)?|without|exclude|not\s+counting|other\s+than|but\s+not|"
                        r"leaving\s+out|ignoring)\s+(?:the\s+|any\s+|all\s+)?([A-Za-z]{4,}|VAT|GST|tax|tip|fee)\b",
                        re.IGNORECASE)
_CONTEXT_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
#: a number written as a percentage (``10%``, ``10 percent``): its factors (0.1, 0.9, 1.1) are derived from it
_PERCENT = re.compile(r"\s?(?:%|percent\b|per cent\b)", re.IGNORECASE)
_AFTER_NUMBER = re.compile(r"\s?(°?[A-Za-z]{1,12})")

_UNITS: dict[str, tuple[str, str]] = {}


def _units(dimension: str, canonical: str, *names: str) -> None:
    for name in (canonical, *names):
        _UNITS[name] = (canonical, dimension)


_units("mass", "kg", "kilogram", "kilograms", "kilo", "kilos", "kgs")
_units("mass", "g", "gram", "grams")
_units("mass", "lb", "lbs", "pound", "pounds")
_units("mass", "oz", "ounce", "ounces")
_units("mass", "t", "ton", "tons", "tonne", "tonnes")
_units("length", "km", "kilometre", "kilometres", "kilometer", "kilometers")
_units("length", "m", "metre", "metres", "meter", "meters")
_units("length", "cm", "centimetre", "centimetres", "centimeter", "centimeters")
_units("length", "mm", "millimetre", "millimetres", "millimeter", "millimeters")
_units("length", "mi", "mile", "miles")
_units("length", "ft", "foot", "feet")
_units("length", "inch", "inches")
_units("length", "yd", "yard", "yards")
_units("volume", "l", "litre", "litres", "liter", "liters")
_units("volume", "ml", "millilitre", "millilitres", "milliliter", "milliliters")
_units("volume", "gal", "gallon", "gallons")
_units("volume", "qt", "quart", "quarts")
_units("volume", "pt", "pint", "pints")
_units("temperature", "c", "celsius", "°c")
_units("temperature", "f", "fahrenheit", "°f")
_units("temperature", "k", "kelvin")
_units("time", "s", "sec", "secs", "second", "seconds")
_units("time", "min", "mins", "minute", "minutes")
_units("time", "h", "hr", "hrs", "hour", "hours")
_units("time", "day", "days")
_units("time", "week", "weeks")
_units("currency", "usd", "dollar", "dollars")
_units("currency", "eur", "euro", "euros")
_units("currency", "gbp")
_units("currency", "jpy", "yen")
_units("currency", "cent", "cents")
#: abbreviations that are units only right after a number or as a whole value ("in", "m", "s" are common words)
_SHORT = frozenset(k for k in _UNITS if len(k) <= 2 or k in {"min", "gal", "day", "sec"})

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
#: qualifiers whose swap or omission flips a result, grouped with their siblings
_QUALIFIERS: dict[str, str] = {}
for _group, _words in (
    ("net-gross", ("net", "gross")),
    ("inclusion", ("including", "excluding", "included", "excluded", "except", "without", "inclusive",
                   "exclusive")),
    ("status", ("cancelled", "canceled", "refunded", "returned", "pending", "completed", "active", "inactive")),
    ("extreme", ("minimum", "maximum", "lowest", "highest", "smallest", "largest", "cheapest", "earliest",
                 "latest")),
    ("direction", ("before", "after", "above", "below", "increase", "decrease")),
):
    for _w in _words:
        _QUALIFIERS[_w] = _group
_AGGREGATES = frozenset({"sum", "total", "average", "mean", "median", "max", "min", "count", "difference",
                         "product", "ratio", "percent", "percentage"})
_NUMBER_WORDS = {w: str(n) for n, w in enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven",
                                                  "eight", "nine", "ten", "eleven", "twelve"))}
_VOCABULARY_WORDS = frozenset({*_UNITS, *_WEEKDAYS, *_MONTHS, *_QUALIFIERS, *_AGGREGATES, *_NUMBER_WORDS})
#: a whole alphabetic word (delimited as ``\b`` delimits it); looked up in the vocabulary by a set, not a regex
#: alternation of every word (which tried each alternative at every position: a third of the stage's time)
_ALPHA_WORD = re.compile(r"(?<![\w])[A-Za-z]+(?![\w])")
_VOCABULARY_ALPHA = frozenset(w for w in _VOCABULARY_WORDS if w.isalpha())
_NAME = re.compile(r"\b[A-Z][a-z][A-Za-z'-]*[A-Za-z]")  # no trailing quote: "{'city': 'Paris'}" names Paris
_CODE_OPERATOR = re.compile(r"(?<![=!<>/*])(//|\*\*|[-+*/%]|[<>]=?|==|!=)\s*(\d+(?:\.\d+)?)(?![\w.])")
_COMPARISONS = frozenset({"<", ">", "<=", ">=", "==", "!="})
_MEAN = re.compile(r"\(([^()]{1,200})\)\s*/\s*(\d+)(?![\w.])")
_SUM_MEAN = re.compile(r"\bsum\(\s*(\[[^\[\]]{0,400}\]|[A-Za-z_]\w*)\s*\)\s*/\s*(\d+)(?![\w.])")
#: a bound stated in words → the comparison it means ("at least 100" is ">= 100")
_PHRASES = (
    (">=", r"at least|no less than|not less than|a minimum of|minimum of"),
    (">", r"more than|greater than|over|above|exceeding|higher than"),
    ("<=", r"at most|no more than|not more than|up to|a maximum of|maximum of|(?:cap|budget|limit|ceiling) (?:is|of)"),
    ("<", r"less than|fewer than|under|below|lower than"),
)
_BOUND = re.compile(r"\b(" + "|".join(f"(?P<p{i}>{alts})" for i, (_, alts) in enumerate(_PHRASES))
                    + r")\s+\$?(-?\d+(?:\.\d+)?)\b", re.IGNORECASE)
_SPAN = re.compile(r"\b(?:from|between)\s+(-?\d+)\s+(?:to|and|through)\s+(-?\d+)\b", re.IGNORECASE)
_RANGE = re.compile(r"\brange\(\s*([^()]{0,40})\)")
_SLICE = re.compile(r"\[\s*(-?\d*)\s*:\s*(-?\d*)\s*\]")
#: punctuation of prose: an argument holding it is a sentence (a query, a message), not a value
_PROSE = re.compile(r"[.?!:;\n]")
_LABEL_END = re.compile(r"[.)][ \t]+\S")
_SENTENCE_START = re.compile(r"(?:^|[.!?:\n]\s*|[\"'(\[]\s*)$")


@dataclass(frozen=True)
class Value:
    """One typed value of a step: ``key`` normalised, ``group`` the set of its alternatives, ``raw`` as written,
    ``context`` the salient words around it (what a restatement shares with its source)."""

    kind: str
    key: str
    group: str
    raw: str
    context: frozenset[str] = frozenset()
    #: a number's label: the word right after it (``80 cancelled``), the stem an exclusion is compared with
    tag: str = ""

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "value": self.key, "group": self.group}


#: the tag of a unit written right after a number: it belongs to that number's quantity ("5 min" on a page is
#: another measurement, not the task's "hours" substituted), so only the quantity is compared with the sources
AFTER_NUMBER = "after-number"


def stem(word: str) -> str:
    """A crude stem for comparing labels and exclusions (``cancelled`` / ``canceled`` / ``cancellations``)."""
    return word.lower()[:5]


def number_key(raw: str) -> str | None:
    """The normalised key of a written number (``1,234.50`` → ``1234.5``, ``207.0`` → ``207``), or None."""
    try:
        value = float(raw.replace(",", ""))
    except ValueError:
        return None
    if value != value or abs(value) > 1e15:  # NaN / huge
        return None
    return str(int(value)) if value == int(value) else format(value, ".10g")


def unit_group(word: str) -> tuple[str, str] | None:
    """``(canonical unit, dimension)`` of a unit word, or None."""
    return _UNITS.get(word.lower())


@lru_cache(maxsize=65536)
def _salient(word: str) -> bool:
    return bool(salient_tokens(word))


class _Words:
    """The salient words of a text with their positions, for the context of a value (one pass over the text, made
    when the first context is asked for)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts: list[int] = []
        self.words: list[str] = []
        self.ready = False

    def around(self, start: int, end: int, width: int = 48) -> frozenset[str]:
        if not self.ready:
            self.ready = True
            for m in _CONTEXT_WORD.finditer(self.text):
                low = m.group(0).lower()
                if _salient(low):
                    self.starts.append(m.start())
                    self.words.append(low)
        lo = bisect.bisect_left(self.starts, start - width)
        hi = bisect.bisect_right(self.starts, end + width)
        return frozenset(self.words[lo:hi])


def _is_list_label(text: str, m: re.Match[str]) -> bool:
    """``m`` numbers a list item or a section (``1. Ask …``, ``### 1.2. Facts to look up``, ``2) …``): alone at the
    start of its line (after markdown's ``#``, ``-``, ``*``, ``>``), small parts (at most two digits each), followed
    by ``.`` or ``)`` and the item's text. A label orders the text; it is no value (a facts survey's headings are not
    restatements of the task's numbers)."""
    raw = m.group(0)
    if raw.startswith("-") or any(len(part) > 2 for part in raw.split(".")) or not _LABEL_END.match(text, m.end()):
        return False
    line_start = text.rfind("\n", 0, m.start()) + 1
    return not text[line_start:m.start()].strip(" \t#>*-")


def _identifiers(text: str, out: list[Value]) -> list[tuple[int, int]]:
    """The dates and record codes of ``text`` (module docstring), and the spans of the dates (no numbers in them:
    2026-12-07's 12 is no count to compare with the task's 30 minutes)."""
    spans: list[tuple[int, int]] = []
    if "-" in text:
        for m in _DATE.finditer(text):
            spans.append(m.span())
            out.append(Value("identifier", m.group(0), "date", m.group(0)))
    if ":" in text:
        for m in _TIME.finditer(text):
            spans.append(m.span())
            out.append(Value("identifier", f"{int(m.group(1)):02d}:{m.group(2)}", "time", m.group(0)))
    if "/" in text or "." in text:
        for m in _SLASH_DATE.finditer(text):
            spans.append(m.span())
            out.append(Value("identifier", m.group(0), "written-date", m.group(0)))
    for m in _IDENTIFIER.finditer(text):
        out.append(Value("identifier", f"{m.group(1)}-{m.group(2)}", f"id:{m.group(1)}", m.group(0)))
    return spans


def _numbers(text: str, out: list[Value], words: _Words, most: int = 400,
             skip: list[tuple[int, int]] | None = None) -> None:
    for n, m in enumerate(_NUMBER.finditer(text)):
        if n >= most:
            break
        key = number_key(m.group(0))
        if key is None or _is_list_label(text, m) or (skip and any(a <= m.start() < b for a, b in skip)):
            continue
        label = _LABEL.match(text, m.end())
        out.append(Value("number", key, "number", m.group(0), words.around(m.start(), m.end()),
                         stem(label.group(1)) if label else ""))
        if _PERCENT.match(text, m.end()):
            out.append(Value("percent", key, "percent", m.group(0) + "%"))
        unit = _AFTER_NUMBER.match(text, m.end())
        if unit:
            found = unit_group(unit.group(1))
            if found is not None:
                out.append(Value("unit", found[0], found[1], unit.group(1), tag=AFTER_NUMBER))
                out.append(Value("quantity", f"{key} {found[0]}", found[1], m.group(0) + unit.group(0)))


#: a name code assigns (``week = [...]``, ``net = round(...)``): a variable, whatever word it is
_ASSIGNED = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*=(?!=)")


def _words(text: str, out: list[Value], skip: frozenset[str]) -> None:
    # a unit or qualifier word the code names a variable by is that variable wherever it appears (``sum(week)``,
    # ``f'net refunds: {net}'``): the code's label for what it computes, not a unit or qualifier it was given
    assigned = {n.lower() for n in _ASSIGNED.findall(text)} if "=" in text else ()
    for m in _ALPHA_WORD.finditer(text):
        word = m.group(0)
        low = word.lower()
        if low not in _VOCABULARY_ALPHA or low in assigned:
            continue
        unit = unit_group(low)
        if unit is not None:
            # "the week's readings": a noun the text owns something by, not a unit it measures in
            if low not in _SHORT and not text.startswith("'s", m.end()):
                out.append(Value("unit", unit[0], unit[1], word))
        elif low in _WEEKDAYS:
            out.append(Value("entity", low, "weekday", word))
        elif low in _MONTHS:
            if word[0].isupper() or low != "may":
                out.append(Value("entity", low, "month", word))
        elif low in _QUALIFIERS:
            out.append(Value("word", low, _QUALIFIERS[low], word))
        elif low in _AGGREGATES:
            out.append(Value("operator", low, "aggregate", word))
        elif low in _NUMBER_WORDS:  # "three pens": the number 3, as a source of a call's argument
            out.append(Value("number", _NUMBER_WORDS[low], "number", word))
    for m in _NAME.finditer(text):
        low = m.group(0).lower()
        if (low not in skip and low not in _VOCABULARY_WORDS and _salient(low)
                and not _SENTENCE_START.search(text[max(0, m.start() - 3):m.start()])):
            out.append(Value("entity", low, "name", m.group(0)))


def argument_names(arguments: dict[str, object] | None, skip: frozenset[str] = frozenset()) -> frozenset[str]:
    """The keys of the names a call's short string arguments hold (:func:`_argument_names`)."""
    out: list[Value] = []
    for value in (arguments or {}).values():
        if isinstance(value, str) and len(value) <= 60 and value.count(" ") < 4 and not _PROSE.search(value):
            _argument_names(value, out, skip)
    return frozenset(v.key for v in out)


def _argument_names(value: str, out: list[Value], skip: frozenset[str]) -> None:
    """The names in a call's short string argument (``{"hotel": "Baixa"}``): a value, not prose, so a capitalised
    word there is a name even where a sentence would start (the text rule skips sentence starts: "Report …")."""
    for m in _NAME.finditer(value):
        low = m.group(0).lower()
        if low not in skip and low not in _VOCABULARY_WORDS and _salient(low):
            out.append(Value("entity", low, "name", m.group(0)))


def _bounds(text: str, out: list[Value]) -> None:
    """Bounds stated in words: ``at least 100`` → ``>= 100``; ``from 1 to 6`` → the span ``1..6``; exclusions:
    ``excluding cancelled orders`` → the word ``excluding cancelled`` (group ``exclusion``, tag its stem)."""
    for m in _EXCLUSION.finditer(text):
        word = m.group(1).lower()
        if salient_tokens(word):
            out.append(Value("word", f"excluding {word}", "exclusion", m.group(0), tag=stem(word)))
    for m in _BOUND.finditer(text):
        op = next(_PHRASES[i][0] for i in range(len(_PHRASES)) if m.group(f"p{i}"))
        key = number_key(m.group(len(_PHRASES) + 2))
        if key is not None:
            out.append(Value("operator", f"{op} {key}", "comparison", m.group(0)))
    for m in _SPAN.finditer(text):
        out.append(Value("operator", f"{int(m.group(1))}..{int(m.group(2))}", "span", m.group(0)))


def _code(code: str, out: list[Value]) -> None:
    for m in _CODE_OPERATOR.finditer(code):
        key = number_key(m.group(2))
        if key is not None:
            group = "comparison" if m.group(1) in _COMPARISONS else "arithmetic"
            out.append(Value("operator", f"{m.group(1)} {key}", group, m.group(0)))
    for m in _RANGE.finditer(code):
        out.append(Value("operator", "range(" + re.sub(r"\s+", "", m.group(1)) + ")", "bound", m.group(0)))
        bounds = [b.strip() for b in m.group(1).split(",")]
        if 1 <= len(bounds) <= 2 and all(re.fullmatch(r"-?\d+", b) for b in bounds):
            lo, hi = (0, int(bounds[0])) if len(bounds) == 1 else (int(bounds[0]), int(bounds[1]))
            out.append(Value("operator", f"{lo}..{hi - 1}", "span", m.group(0)))
    for m in _MEAN.finditer(code):
        terms = len([t for t in m.group(1).split("+") if t.strip()])
        if terms >= 2:  # "(a + b + c) / n": a mean of `terms` values divided by n
            out.append(Value("operator", f"mean of {terms} / {m.group(2)}", "mean", m.group(0)))
    for m in _SUM_MEAN.finditer(code):  # "sum(temps) / 2" with temps = [a, b, c]: a mean of 3 values divided by 2
        listed = m.group(1)
        if not listed.startswith("["):
            assigned = re.search(rf"\b{re.escape(listed)}\s*=\s*(\[[^\[\]]{{0,400}}\])", code)
            listed = assigned.group(1) if assigned else ""
        terms = len([t for t in listed.strip("[]").split(",") if t.strip()])
        if terms >= 2:
            out.append(Value("operator", f"mean of {terms} / {m.group(2)}", "mean", m.group(0)))
    for m in _SLICE.finditer(code):
        out.append(Value("operator", f"[{m.group(1)}:{m.group(2)}]", "bound", m.group(0)))


def values_in(text: str, *, code: str = "", arguments: dict[str, object] | None = None,
              targets: tuple[str, ...] = (), skip: frozenset[str] = frozenset(), limit: int = 50_000) -> list[Value]:
    """The typed values of one step (module docstring): in ``text``, in ``code`` (operators too), in the string and
    number ``arguments`` of a call (a whole-string argument that is a unit abbreviation counts as a unit), and the
    ``targets`` it addresses or calls. ``skip`` names words that are never entities (agent and tool names)."""
    out: list[Value] = []
    text = text[:limit]
    codes: list[Value] = []  # after the other values: a step's first values are the ones compared (a pool's cut)
    dates = _identifiers(text, codes)
    _numbers(text, out, _Words(text), skip=dates)
    _words(text, out, skip)
    _bounds(text, out)
    if code:
        _code(code[:limit], out)
    arg_numbers = [v for v in (arguments or {}).values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    arg_units = [v for v in (arguments or {}).values() if isinstance(v, str) and unit_group(v.strip())]
    for value in (arguments or {}).values():
        if isinstance(value, str) and value.strip():
            unit = unit_group(value.strip())
            if unit is not None:
                out.append(Value("unit", unit[0], unit[1], value))
                key = number_key(str(arg_numbers[0])) if len(arg_numbers) == 1 == len(arg_units) else None
                if key is not None:  # a call's one number with its one unit: a quantity, as a text states it
                    out.append(Value("quantity", f"{key} {unit[0]}", unit[1], f"{arg_numbers[0]} {value}"))
            elif value.strip().lower() in _QUALIFIERS:
                out.append(Value("word", value.strip().lower(), _QUALIFIERS[value.strip().lower()], value))
            elif len(value) <= 60 and value.count(" ") < 4 and not _PROSE.search(value):
                _argument_names(value, out, skip)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            key = number_key(str(value))
            if key is not None and not any(v.kind == "number" and v.key == key for v in out):
                out.append(Value("number", key, "number", str(value)))
    for target in targets:
        if target:
            out.append(Value("target", target.lower(), "target", target))
    out += codes
    seen: set[tuple[str, str]] = set()
    unique: list[Value] = []
    for v in out:
        if (v.kind, v.key) not in seen:
            seen.add((v.kind, v.key))
            unique.append(v)
    return unique
