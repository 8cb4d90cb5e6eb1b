"""clean_text and text_tokens against DeLFT 0.4.6's own outputs, recorded by
tests/data/classification/record_delft046_clean_text.py (every non-ASCII text of the licences
data, a sample of the other texts and of the citations, every character of the blocks where we
follow DeLFT, and other scripts and symbols)."""
import csv
import gzip
import json
import random
import re
from pathlib import Path

import pytest
from anyascii import anyascii

from delft.textClassification.cleaning import DELFT_FORMS, clean_text, text_tokens
from delft.utilities.Tokenizer import tokenizeAndFilterSimple
from delft.utilities.data_path import shared_data_file

RECORDED = Path(__file__).parent / "data" / "classification" / "delft046_clean_text.json.gz"
LICENCES = shared_data_file("textClassification", "licenses", "copyrights-licenses-data-validated.csv")
KEPT = re.compile(r"[A-Za-z.\-?!,#@% ]*")

# Where ours differs from DeLFT (Unidecode) on a recorded character: {character: (DeLFT's cleaned
# form, ours)}. Outside Latin-1, Latin Extended-A and General Punctuation, anyascii's
# transliteration stands (cleaning.DELFT_FORMS); each difference below is anyascii's choice.
KNOWN_DIFFERENCES = {
    # Greek: anyascii follows modern Greek pronunciation (beta v, eta i), Unidecode the classical
    "\u0392": ("B", "V"), "\u03b2": ("b", "v"), "\u03b7": ("e", "i"), "\u03c5": ("u", "y"),
    "\u03c6": ("ph", "f"), "\u03c7": ("kh", "ch"),
    # Cyrillic IO, Hebrew BET, Arabic ALEF MAKSURA: other romanisations
    "\u0401": ("Io", "E"), "\u05d1": ("b", "v"), "\u0649": ("", "a"),
    # BALINESE MUSICAL SYMBOL DAENG (a broken copyright sign in one text of the licences data,
    # the only difference in the shared data): Unidecode deletes it, anyascii gives "e"
    "\u1b67": ("", "e"),
    # letterlike symbols: Unidecode lower-cases trade and service marks and deletes the others
    "\u2103": ("", "C"), "\u210f": ("", "h"), "\u2116": ("No. ", "No"), "\u2117": ("", "P"),
    "\u2120": ("sm", "SM"), "\u2122": ("tm", "TM"),
    # vulgar fractions outside Latin-1: Unidecode's " 1/3 " leaves its two spaces
    "\u2153": ("  ", ""),
    # arrows and mathematical symbols: Unidecode gives "-" for arrows and deletes operators,
    # anyascii names some of them
    "\u2190": ("-", ""), "\u2192": ("-", ""), "\u2211": ("", "S"), "\u221a": ("", "sqrt"),
    "\u221e": ("", "inf"), "\u222b": ("", "S"),
    # CJK: Unidecode ends each syllable with a space, anyascii capitalises Korean syllables
    "\u4e2d": ("Zhong ", "Zhong"), "\u6587": ("Wen ", "Wen"), "\u65e5": ("Ri ", "Ri"),
    "\u672c": ("Ben ", "Ben"), "\u8a9e": ("Yu ", "Yu"), "\uad6d": ("gug", "Gug"),
    "\uc5b4": ("eo", "Eo"), "\ud55c": ("han", "Han"),
    # REPLACEMENT CHARACTER: anyascii "?", Unidecode deletes it
    "\ufffd": ("", "?"),
    # emoji and flag letters: anyascii names them, Unidecode deletes them
    "\U0001f1eb": ("", "F"), "\U0001f1f7": ("", "R"), "\U0001f44d": ("", "thumbsup"),
    "\U0001f600": ("", "grinning"),
}
AS_DELFT = str.maketrans({char: delft for char, (delft, _) in KNOWN_DIFFERENCES.items()})


@pytest.fixture(scope="module")
def recorded():
    with gzip.open(RECORDED, "rt", encoding="utf-8") as stream:
        return json.load(stream)["cases"]


def test_ours_is_delft_on_every_recorded_text_but_the_known_differences(recorded):
    exact = differing = 0
    for case in recorded:
        text = case["text"]
        if any(char in KNOWN_DIFFERENCES for char in text):
            # the same once DeLFT's form of each known character is put in its place
            differing += 1
            text = text.translate(AS_DELFT)
        else:
            exact += 1
        assert clean_text(text) == case["clean"], case["source"]
        assert text_tokens(text) == case["tokens"], case["source"]
    assert (exact, differing) == (1036, 47)


def test_each_known_difference_is_recorded_alone_and_still_differs(recorded):
    alone = {case["text"]: case["clean"] for case in recorded if len(case["text"]) == 1}
    for char, (delft, ours) in KNOWN_DIFFERENCES.items():
        assert alone[char] == delft, f"U+{ord(char):04X}"
        assert clean_text(char) == ours != delft, f"U+{ord(char):04X}"


def test_the_blocks_we_follow_delft_on_are_recorded_whole(recorded):
    alone = {case["text"]: case["clean"] for case in recorded if len(case["text"]) == 1}
    for code in [*range(0x80, 0x180), *range(0x2000, 0x2070)]:
        assert clean_text(chr(code)) == alone[chr(code)], f"U+{code:04X}"


def test_each_delft_form_is_delfts_and_needed(recorded):
    alone = {case["text"]: case["clean"] for case in recorded if len(case["text"]) == 1}
    for char, form in DELFT_FORMS.items():
        assert alone[char] == form
        assert re.sub(r"[^A-Za-z.\-?!,#@% ]", "", anyascii(char)) != form  # anyascii alone differs


@pytest.mark.parametrize("text, cleaned", [
    ("Attribution 3.0 license", "Attribution . license"),
    ("author(s)", "authors"),
    ("authors&apos; moral", "authorsapos moral"),
    ("© 2005 Elsevier Inc. a\nb", "c  Elsevier Inc. ab"),
    ("x_y it's", "xy its"),
    ("a\tb\r\nc", "abc"),
    ("0123456789 ()[]{}<>:;/&'\"_=+*^~|\\$`", " "),
    (".-?!,#@%", ".-?!,#@%"),
    ("", ""),
    ("Café Œuvre Straße Ørsted — ½", "Cafe OEuvre Strasse Orsted --   "),
    ("a\u00a0b\u200bc\ufeffd", "a b cd"),
    ("a\ud800b", "ab"),  # a lone surrogate (possible in a string from Java) is deleted
])
def test_cleaned_as_delft(text, cleaned):
    assert clean_text(text) == cleaned


def test_tokens_are_delfts_tokenizer_on_the_cleaned_text():
    assert text_tokens("CC-BY 3.0 .") == ["CC", "-", "BY", ".", "."]
    assert text_tokens("© Springer-Verlag, 2001 #1 @x 50%!") == [
        "c", "Springer", "-", "Verlag", ",", "#", "@x", "%", "!"]
    assert text_tokens("Case Kept") == ["Case", "Kept"]
    assert text_tokens("12 (34)") == []


def test_random_text_is_cleaned_to_the_kept_alphabet_once_and_for_all():
    generator = random.Random(7)
    for _ in range(300):
        text = "".join(chr(generator.choice([generator.randrange(0x20, 0x80),
                                             generator.randrange(0x80, 0x3000),
                                             generator.randrange(0x3000, 0x30000)]))
                       for _ in range(generator.randrange(0, 40)))
        cleaned = clean_text(text)
        assert KEPT.fullmatch(cleaned), repr(text)
        assert clean_text(cleaned) == cleaned
        assert text_tokens(text) == tokenizeAndFilterSimple(cleaned)


@pytest.mark.parametrize("value", [None, 3, b"bytes", float("nan")])
def test_a_value_that_is_no_string_is_one_line(value):
    with pytest.raises(TypeError, match=r"^clean_text expects a str, not \w+$"):
        clean_text(value)


def test_the_recording_holds_every_non_ascii_text_of_the_licences_data(recorded):
    if not LICENCES.is_file():
        pytest.skip(f"shared licences data absent ({LICENCES}); set DELFT_SHARED_DATA")
    with open(LICENCES, encoding="utf-8", newline="") as stream:
        texts = {row[0] for row in csv.reader(stream) if any(ord(c) > 127 for c in row[0])}
    assert len(texts) == 442
    assert texts <= {case["text"] for case in recorded}
