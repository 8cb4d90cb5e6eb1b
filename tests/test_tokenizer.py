"""Tests of the DeLFT-style tokenizer: what a token is, and that offsets point back into the text."""
import doctest
import unicodedata

import pytest

from delft.utilities import tokenizer
from delft.utilities.data_path import shared_data_file
from delft.utilities.tokenizer import tokenize, tokenize_with_offsets


def real_text(name):
    path = shared_data_file("test", name)
    if not path.exists():
        pytest.skip(f"shared data file {path} is absent")
    return path.read_text(encoding="utf-8")


def assert_offsets_point_to_tokens(text):
    tokens, offsets = tokenize_with_offsets(text)
    assert len(tokens) == len(offsets)
    assert all(text[start:end] == token for token, (start, end) in zip(tokens, offsets))
    assert all(previous[1] <= following[0] for previous, following in zip(offsets, offsets[1:]))
    assert tokens == tokenize(text)
    return tokens, offsets


def test_doctests():
    assert doctest.testmod(tokenizer).failed == 0


@pytest.mark.parametrize("text, expected", [
    ("June 10, 2005", ["June", "10", ",", "2005"]),
    ("10-06-2005", ["10", "-", "06", "-", "2005"]),
    ("Accepted: 12th Dec. 2001", ["Accepted", ":", "12th", "Dec", ".", "2001"]),
    ("(2003)", ["(", "2003", ")"]),
    ("a--b...", ["a", "-", "-", "b", ".", ".", "."]),
    ("40% of $5", ["40", "%", "of", "$", "5"]),
    ("snake_case", ["snake", "_", "case"]),
    ("Veröffentlichungsdatum Édition naïve", ["Veröffentlichungsdatum", "Édition", "naïve"]),
    ("Москва 東京", ["Москва", "東京"]),
    ("tab\tnew\nline\u00a0nbsp", ["tab", "new", "line", "nbsp"]),
])
def test_tokens(text, expected):
    assert assert_offsets_point_to_tokens(text)[0] == expected


def test_combining_marks_stay_in_their_word():
    decomposed = unicodedata.normalize("NFD", "café été")
    assert len(decomposed) == 11  # three accents, each its own code point
    assert tokenize(decomposed) == [unicodedata.normalize("NFD", word) for word in ("café", "été")]


def test_invisible_characters_separate_and_are_dropped():
    assert tokenize("zero\u200bwidth soft\u00adhyphen") == ["zero", "width", "soft", "hyphen"]


@pytest.mark.parametrize("text", ["", " ", " \t\n\r "])
def test_no_tokens(text):
    assert tokenize_with_offsets(text) == ([], [])
    assert tokenize(text) == []


def test_offsets_are_character_positions():
    tokens, offsets = tokenize_with_offsets("  Hi, é!")
    assert tokens == ["Hi", ",", "é", "!"]
    assert offsets == [(2, 4), (4, 5), (6, 7), (7, 8)]


@pytest.mark.parametrize("name", ["test.ner.en.txt", "test.ner.fr.txt"])
def test_offsets_on_real_text(name):
    text = real_text(name)
    tokens, _ = assert_offsets_point_to_tokens(text)
    # Only whitespace is dropped: the tokens put together give back every other character.
    assert "".join(tokens) == "".join(text.split())
    assert not any(character.isspace() for token in tokens for character in token)


def test_real_english_sentence():
    tokens = tokenize(real_text("test.ner.en.txt"))
    assert tokens[:8] == ["The", "University", "of", "California", "has", "found", "that", "40"]
    assert ["White", "House", "."] == tokens[tokens.index("White"):tokens.index("White") + 3]


def test_real_french_sentence():
    tokens = tokenize(real_text("test.ner.fr.txt"))
    assert tokens[:6] == ["Elargie", "à", "l", "’", "Italie", "et"]
    assert "Crimée" in tokens and "étrangères" in tokens
