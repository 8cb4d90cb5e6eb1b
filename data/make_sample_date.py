"""Write ``data/sequenceLabelling/grobid/date/date-sample.train``, a small synthetic GROBID date file.

The dates come in many formats ("June 10, 2005", "10-06-2005", "Accepted: 12th Dec. 2001", "(2003)"...) and
are written in the column layout of GROBID's real ``date-*.train`` files: the token, 16 feature columns
whose rules were read off ``date-220311.train``, then the label in GROBID form (``I-<x>`` begins a field,
``<x>`` continues it). The random generator is seeded, so every run writes the same bytes::

    python data/make_sample_date.py
"""
import random
import re
import sys
from pathlib import Path

OUTPUT = Path(__file__).resolve().parent / "sequenceLabelling" / "grobid" / "date" / "date-sample.train"
SEED = 20050610
SEQUENCES = 700

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
# The real file flags English month names and their three-letter abbreviations in any case ("july"),
# not "Sept" nor other languages' names.
MONTH_WORDS = frozenset([month.lower() for month in MONTHS] + [month[:3].lower() for month in MONTHS])
FOREIGN_MONTHS = ["janvier", "Juillet", "Mai", "Dezember", "Gennaio", "Ottobre", "Februar", "novembre"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
# Tokens outside these classes are NOPUNCT in the real file, "/" and "–" included.
PUNCTUATION = {",": "COMMA", ".": "DOT", "-": "HYPHEN", "(": "OPENBRACKET", ")": "ENDBRACKET",
               ":": "PUNCT", ";": "PUNCT"}
YEAR = re.compile(r"[12][0-9]{3}")
PREFIXES = ["Date :", "Received", "Received :", "Accepted :", "Accepted", "Published online",
            "Published online :", "Final version", "Final version received", "Revised", "Revised :",
            "Available online", "Submitted", "Last updated on", "First published :", "Published :",
            "Issue date :", "Dated", "Copyright", "Version of"]
SUFFIXES = [".", ";", ","]


def token_features(token, position, length):
    """The 16 feature columns GROBID writes for the token at ``position`` in a date of ``length`` tokens.

    >>> " ".join(token_features("June", 0, 3))
    'june J Ju Jun June e ne une June LINESTART INITCAP NODIGIT 0 0 1 NOPUNCT'
    """
    if position == 0:
        line = "LINESTART"
    elif position == length - 1:
        line = "LINEEND"
    else:
        line = "LINEIN"
    if token.isascii() and token.isdigit():
        digits = "ALLDIGIT"
    elif any(character.isdigit() for character in token):
        digits = "CONTAINSDIGITS"
    else:
        digits = "NODIGIT"
    # Numbers are NOCAPS but any other token without lower case, punctuation included, is ALLCAP.
    if digits == "ALLDIGIT":
        capitals = "NOCAPS"
    elif token == token.upper():
        capitals = "ALLCAP"
    elif token[0].isupper():
        capitals = "INITCAP"
    else:
        capitals = "NOCAPS"
    return [token.lower(),
            *(token[:size] for size in range(1, 5)),
            *(token[-size:] for size in range(1, 5)),
            line, capitals, digits,
            str(int(len(token) == 1)),
            str(int(YEAR.search(token) is not None)),
            str(int(token.lower() in MONTH_WORDS)),
            PUNCTUATION.get(token, "NOPUNCT")]


def grobid_labels(fields):
    """GROBID labels of a sequence of field names: ``I-<x>`` where a field begins, ``<x>`` inside it.

    >>> grobid_labels(["other", "other", "day", "month"])
    ['I-<other>', '<other>', 'I-<day>', 'I-<month>']
    """
    labels = []
    for index, field in enumerate(fields):
        begins = index == 0 or fields[index - 1] != field
        labels.append(f"I-<{field}>" if begins else f"<{field}>")
    return labels


def _other(text):
    return [(token, "other") for token in text.split()]


def _day(rng, ordinal=True):
    day = rng.randint(1, 28 if rng.random() < 0.5 else 31)
    style = rng.random()
    if ordinal and style < 0.15:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(day % 10 if day not in (11, 12, 13) else 0, "th")
        return [(f"{day}{suffix}", "day")]
    if style < 0.35:
        return [(f"{day:02d}", "day")]
    return [(str(day), "day")]


def _month_name(rng):
    month = rng.choice(MONTHS)
    style = rng.random()
    if style < 0.55:
        return [(month, "month")]
    if style < 0.70:
        return [(month[:3], "month")]
    if style < 0.80:
        # An abbreviation's dot is not part of the month in GROBID's annotations.
        return [("Sept" if month == "September" else month[:3], "month"), (".", "other")]
    if style < 0.85:
        return [(month.upper(), "month")]
    if style < 0.90:
        return [(month.lower(), "month")]
    return [(rng.choice(FOREIGN_MONTHS), "month")]


def _month_number(rng):
    month = rng.randint(1, 12)
    return [(f"{month:02d}" if rng.random() < 0.7 else str(month), "month")]


def _year(rng, digits=4):
    year = rng.randint(1965, 2022)
    return [(str(year) if digits == 4 else f"{year % 100:02d}", "year")]


def _numeric(rng, order):
    """Day, month and year as numbers joined by one separator, in ``order`` ("dmy", "ymd" or "mdy")."""
    separator = [(rng.choice("-/."), "other")]
    parts = {"d": _day(rng, ordinal=False), "m": _month_number(rng),
             "y": _year(rng, 2 if order != "ymd" and rng.random() < 0.1 else 4)}
    return parts[order[0]] + separator + parts[order[1]] + separator + parts[order[2]]


def _date(rng):
    """One date, as (token, field) pairs, in a format drawn at random."""
    form = rng.randrange(13)
    if form == 0:
        return _month_name(rng) + _day(rng) + [(",", "other")] + _year(rng)
    if form == 1:
        return _day(rng) + _month_name(rng) + _year(rng)
    if form == 2:
        return _numeric(rng, "dmy")
    if form == 3:
        return _numeric(rng, "ymd")
    if form == 4:
        return _numeric(rng, "mdy")
    if form == 5:
        return _month_name(rng) + _year(rng)
    if form == 6:
        return [("(", "other")] + _year(rng) + [(")", "other")]
    if form == 7:
        first = rng.randint(1965, 2021)
        return [(str(first), "year"), ("-", "other"), (str(first + rng.randint(1, 3)), "year")]
    if form == 8:
        return _year(rng)
    if form == 9:
        return [(rng.choice(WEEKDAYS), "other"), (",", "other")] + _day(rng) + _month_name(rng) + _year(rng)
    if form == 10:
        first = rng.randint(1, 25)
        days = [(str(first), "day"), ("-", "other"), (str(first + rng.randint(1, 3)), "day")]
        return _month_name(rng) + days + [(",", "other")] + _year(rng)
    if form == 11:
        return _month_name(rng) + [(",", "other")] + _year(rng)
    return _year(rng) + _month_name(rng) + _day(rng)


def _sequence(rng):
    """A date with, sometimes, a prefix ("Received :") and a final punctuation mark."""
    pairs = _date(rng)
    if rng.random() < 0.45:
        pairs = _other(rng.choice(PREFIXES)) + pairs
    if rng.random() < 0.12:
        pairs = pairs + _other(rng.choice(SUFFIXES))
    return pairs


def sample_text(seed=SEED, sequences=SEQUENCES):
    """The whole sample file; like the real one, each sequence is followed by an empty and a " " line."""
    rng = random.Random(seed)
    blocks = []
    for _ in range(sequences):
        pairs = _sequence(rng)
        tokens = [token for token, _ in pairs]
        labels = grobid_labels([field for _, field in pairs])
        lines = [" ".join([token, *token_features(token, position, len(tokens)), label])
                 for position, (token, label) in enumerate(zip(tokens, labels))]
        blocks.append("\n".join(lines) + "\n\n \n")
    return "".join(blocks)


def main(output=OUTPUT):
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(sample_text().encode("utf-8"))
    return output


if __name__ == "__main__":
    print(main(*sys.argv[1:]))
