"""Tests of DeLFT's tokenizer (``delft.utilities.Tokenizer``): tokens, offsets, the filtering variants.

``DELFT_1_2_0`` below is DeLFT 1.2.0's own output: its ``delft/utilities/Tokenizer.py`` was run on each
input (``tokenizeAndFilter`` for the tokens and offsets, ``tokenize`` for the unfiltered pieces) and the
results written here as literals; DeLFT itself is not needed to run these tests.
"""
import doctest
import unicodedata

import pytest

from delft.utilities import Tokenizer
from delft.utilities.data_path import shared_data_file
from delft.utilities.Tokenizer import (
    blanks,
    delimiters,
    filterSpace,
    tokenize,
    tokenize_with_offsets,
    tokenizeAndFilter,
    tokenizeAndFilterSimple,
)

# (text, tokenizeAndFilter tokens, tokenizeAndFilter offsets, tokenize tokens), from DeLFT 1.2.0.
DELFT_1_2_0 = [
    ("",
     [],
     [],
     [""]),
    ("   ",
     [],
     [],
     ["", " ", "", " ", "", " ", ""]),
    (" \t\n ",
     [],
     [],
     ["", " ", "", "\t", "", "\n", "", " ", ""]),
    ("50%",
     ["50%"],
     [(0, 3)],
     ["50%"]),
    ("5 %",
     ["5", "%"],
     [(0, 1), (2, 3)],
     ["5", " ", "%"]),
    ("AT&T",
     ["AT&T"],
     [(0, 4)],
     ["AT&T"]),
    ("AT&T's 50% stake",
     ["AT&T", "'", "s", "50%", "stake"],
     [(0, 4), (4, 5), (5, 6), (7, 10), (11, 16)],
     ["AT&T", "'", "s", " ", "50%", " ", "stake"]),
    ("http://example.com/a_b?x=1",
     ["http", ":", "/", "/", "example", ".", "com", "/", "a_b", "?", "x=1"],
     [(0, 4), (4, 5), (5, 6), (6, 7), (7, 14), (14, 15), (15, 18), (18, 19), (19, 22), (22, 23), (23, 26)],
     ["http", ":", "", "/", "", "/", "example", ".", "com", "/", "a_b", "?", "x=1"]),
    ("https://www.grobid.org/path/index.html#frag",
     ["https", ":", "/", "/", "www", ".", "grobid", ".", "org", "/", "path", "/", "index", ".", "html#frag"],
     [(0, 5), (5, 6), (6, 7), (7, 8), (8, 11), (11, 12), (12, 18), (18, 19), (19, 22), (22, 23), (23, 27), (27, 28), (28, 33), (33, 34), (34, 43)],
     ["https", ":", "", "/", "", "/", "www", ".", "grobid", ".", "org", "/", "path", "/", "index", ".", "html#frag"]),
    ("e-mail: a.b@c.org",
     ["e", "-", "mail", ":", "a", ".", "b@c", ".", "org"],
     [(0, 1), (1, 2), (2, 6), (6, 7), (8, 9), (9, 10), (10, 13), (13, 14), (14, 17)],
     ["e", "-", "mail", ":", "", " ", "a", ".", "b@c", ".", "org"]),
    ("state-of-the-art",
     ["state", "-", "of", "-", "the", "-", "art"],
     [(0, 5), (5, 6), (6, 8), (8, 9), (9, 12), (12, 13), (13, 16)],
     ["state", "-", "of", "-", "the", "-", "art"]),
    ("don't",
     ["don", "'", "t"],
     [(0, 3), (3, 4), (4, 5)],
     ["don", "'", "t"]),
    ("O’Neil",
     ["O", "’", "Neil"],
     [(0, 1), (1, 2), (2, 6)],
     ["O", "’", "Neil"]),
    ("l’été",
     ["l", "’", "été"],
     [(0, 1), (1, 2), (2, 5)],
     ["l", "’", "été"]),
    ("‘single curly’",
     ["‘", "single", "curly", "’"],
     [(0, 1), (1, 7), (8, 13), (13, 14)],
     ["", "‘", "single", " ", "curly", "’", ""]),
    ("a—b",
     ["a—b"],
     [(0, 3)],
     ["a—b"]),
    ("a — b",
     ["a", "—", "b"],
     [(0, 1), (2, 3), (4, 5)],
     ["a", " ", "—", " ", "b"]),
    ("a – b",
     ["a", "–", "b"],
     [(0, 1), (2, 3), (4, 5)],
     ["a", " ", "", "–", "", " ", "b"]),
    ("a−b",
     ["a", "−", "b"],
     [(0, 1), (1, 2), (2, 3)],
     ["a", "−", "b"]),
    ("x‐y",
     ["x", "‐", "y"],
     [(0, 1), (1, 2), (2, 3)],
     ["x", "‐", "y"]),
    ("a--b...",
     ["a", "-", "-", "b", ".", ".", "."],
     [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7)],
     ["a", "-", "", "-", "b", ".", "", ".", "", ".", ""]),
    ("“quoted”",
     ["“", "quoted", "”"],
     [(0, 1), (1, 7), (7, 8)],
     ["", "“", "quoted", "”", ""]),
    ("\"double\" 'single' `back`",
     ["\"", "double", "\"", "'", "single", "'", "`", "back", "`"],
     [(0, 1), (1, 7), (7, 8), (9, 10), (10, 16), (16, 17), (18, 19), (19, 23), (23, 24)],
     ["", "\"", "double", "\"", "", " ", "", "'", "single", "'", "", " ", "", "`", "back", "`", ""]),
    ("a\u00a0b",
     ["a", "b"],
     [(0, 1), (2, 3)],
     ["a", "\u00a0", "b"]),
    ("a\u2009b",
     ["a", "b"],
     [(0, 1), (2, 3)],
     ["a", "\u2009", "b"]),
    ("a\u202fb",
     ["a\u202fb"],
     [(0, 3)],
     ["a\u202fb"]),
    ("a\u3000b",
     ["a\u3000b"],
     [(0, 3)],
     ["a\u3000b"]),
    ("zero\u200bwidth",
     ["zero", "width"],
     [(0, 4), (5, 10)],
     ["zero", "\u200b", "width"]),
    ("soft\u00adhyphen",
     ["soft\u00adhyphen"],
     [(0, 11)],
     ["soft\u00adhyphen"]),
    ("a\tb\nc",
     ["a", "b", "c"],
     [(0, 1), (2, 3), (4, 5)],
     ["a", "\t", "b", "\n", "c"]),
    ("a\r\nb",
     ["a", "\r", "b"],
     [(0, 1), (1, 2), (3, 4)],
     ["a", "\r", "", "\n", "b"]),
    ("a\fb",
     ["a", "\f", "b"],
     [(0, 1), (1, 2), (2, 3)],
     ["a", "\f", "b"]),
    (" \t\n\r ",
     ["\r"],
     [(3, 4)],
     ["", " ", "", "\t", "", "\n", "", "\r", "", " ", ""]),
    ("a  b",
     ["a", "b"],
     [(0, 1), (3, 4)],
     ["a", " ", "", " ", "b"]),
    ("x,,y",
     ["x", ",", ",", "y"],
     [(0, 1), (1, 2), (2, 3), (3, 4)],
     ["x", ",", "", ",", "y"]),
    ("(a)",
     ["(", "a", ")"],
     [(0, 1), (1, 2), (2, 3)],
     ["", "(", "a", ")", ""]),
    ("[1], $5",
     ["[", "1", "]", ",", "$", "5"],
     [(0, 1), (1, 2), (2, 3), (3, 4), (5, 6), (6, 7)],
     ["", "[", "1", "]", "", ",", "", " ", "", "$", "5"]),
    ("3.14",
     ["3", ".", "14"],
     [(0, 1), (1, 2), (2, 4)],
     ["3", ".", "14"]),
    ("1,000",
     ["1", ",", "000"],
     [(0, 1), (1, 2), (2, 5)],
     ["1", ",", "000"]),
    ("U.S.A.",
     ["U", ".", "S", ".", "A", "."],
     [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)],
     ["U", ".", "S", ".", "A", ".", ""]),
    ("J. Doe",
     ["J", ".", "Doe"],
     [(0, 1), (1, 2), (3, 6)],
     ["J", ".", "", " ", "Doe"]),
    ("H2O+CO2=x",
     ["H2O+CO2=x"],
     [(0, 9)],
     ["H2O+CO2=x"]),
    ("#tag @user",
     ["#tag", "@user"],
     [(0, 4), (5, 10)],
     ["#tag", " ", "@user"]),
    ("snake_case",
     ["snake_case"],
     [(0, 10)],
     ["snake_case"]),
    ("Café naïve",
     ["Café", "naïve"],
     [(0, 4), (5, 10)],
     ["Café", " ", "naïve"]),
    ("cafe\u0301 e\u0301te\u0301",
     ["cafe\u0301", "e\u0301te\u0301"],
     [(0, 5), (6, 11)],
     ["cafe\u0301", " ", "e\u0301te\u0301"]),
    ("'\u0301x",
     ["'", "\u0301x"],
     [(0, 1), (1, 3)],
     ["", "'", "\u0301x"]),
    ("Москва 東京",
     ["Москва", "東京"],
     [(0, 6), (7, 9)],
     ["Москва", " ", "東京"]),
    ("😀 March 😀 1999 🎉",
     ["😀", "March", "😀", "1999", "🎉"],
     [(0, 1), (2, 7), (8, 9), (10, 14), (15, 16)],
     ["😀", " ", "March", " ", "😀", " ", "1999", " ", "🎉"]),
    ("👩\u200d💻 rocks",
     ["👩\u200d💻", "rocks"],
     [(0, 3), (4, 9)],
     ["👩\u200d💻", " ", "rocks"]),
    ("2021年3月5日",
     ["2021年3月5日"],
     [(0, 9)],
     ["2021年3月5日"]),
    ("•item ♦♥♣♠ suits",
     ["•", "item", "♦", "♥", "♣", "♠", "suits"],
     [(0, 1), (1, 5), (6, 7), (7, 8), (8, 9), (9, 10), (11, 16)],
     ["", "•", "item", " ", "", "♦", "", "♥", "", "♣", "", "♠", "", " ", "suits"]),
    ("*star*",
     ["*", "star", "*"],
     [(0, 1), (1, 5), (5, 6)],
     ["", "*", "star", "*", ""]),
    ("a/b\\c",
     ["a", "/", "b\\c"],
     [(0, 1), (1, 2), (2, 5)],
     ["a", "/", "b\\c"]),
    ("Received:  March 3,1999; accepted 12/04/2000.",
     ["Received", ":", "March", "3", ",", "1999", ";", "accepted", "12", "/", "04", "/", "2000", "."],
     [(0, 8), (8, 9), (11, 16), (17, 18), (18, 19), (19, 23), (23, 24), (25, 33), (34, 36), (36, 37), (37, 39), (39, 40), (40, 44), (44, 45)],
     ["Received", ":", "", " ", "", " ", "March", " ", "3", ",", "1999", ";", "", " ", "accepted", " ", "12", "/", "04", "/", "2000", ".", ""]),
    ("  (June 2005)  ",
     ["(", "June", "2005", ")"],
     [(2, 3), (3, 7), (8, 12), (12, 13)],
     ["", " ", "", " ", "", "(", "June", " ", "2005", ")", "", " ", "", " ", ""]),
    ("March the 27th, 2001",
     ["March", "the", "27th", ",", "2001"],
     [(0, 5), (6, 9), (10, 14), (14, 15), (16, 20)],
     ["March", " ", "the", " ", "27th", ",", "", " ", "2001"]),
    ("10-06-2005",
     ["10", "-", "06", "-", "2005"],
     [(0, 2), (2, 3), (3, 5), (5, 6), (6, 10)],
     ["10", "-", "06", "-", "2005"]),
    ("Accepted: 12th Dec. 2001",
     ["Accepted", ":", "12th", "Dec", ".", "2001"],
     [(0, 8), (8, 9), (10, 14), (15, 18), (18, 19), (20, 24)],
     ["Accepted", ":", "", " ", "12th", " ", "Dec", ".", "", " ", "2001"]),
    ("Tom & Jerry <b> 3 March 1999 \"quoted\"",
     ["Tom", "&", "Jerry", "<b>", "3", "March", "1999", "\"", "quoted", "\""],
     [(0, 3), (4, 5), (6, 11), (12, 15), (16, 17), (18, 23), (24, 28), (29, 30), (30, 36), (36, 37)],
     ["Tom", " ", "&", " ", "Jerry", " ", "<b>", " ", "3", " ", "March", " ", "1999", " ", "", "\"", "quoted", "\"", ""]),
]


def real_text(name):
    path = shared_data_file("test", name)
    if not path.exists():
        pytest.skip(f"shared data file {path} is absent")
    return path.read_text(encoding="utf-8")


def contiguous_offsets(pieces):
    offsets, position = [], 0
    for piece in pieces:
        offsets.append((position, position + len(piece)))
        position += len(piece)
    return offsets


def assert_offsets_point_to_tokens(text):
    tokens, offsets = tokenize_with_offsets(text)
    assert len(tokens) == len(offsets)
    assert all(isinstance(offset, tuple) for offset in offsets)
    assert all(text[start:end] == token for token, (start, end) in zip(tokens, offsets))
    assert all(start < end for start, end in offsets)  # no empty token
    assert all(previous[1] <= following[0] for previous, following in zip(offsets, offsets[1:]))
    assert not any(token in blanks for token in tokens)
    assert (tokens, offsets) == tokenizeAndFilter(text)
    assert tokens == tokenizeAndFilterSimple(text)
    return tokens, offsets


def test_doctests():
    failed, attempted = doctest.testmod(Tokenizer)
    assert attempted > 0 and failed == 0


def test_table_is_large_enough():
    assert len(DELFT_1_2_0) >= 30
    assert len({row[0] for row in DELFT_1_2_0}) == len(DELFT_1_2_0)


@pytest.mark.parametrize("text, tokens, offsets, pieces", DELFT_1_2_0,
                         ids=[ascii(row[0]) for row in DELFT_1_2_0])
def test_same_as_delft(text, tokens, offsets, pieces):
    assert tokenizeAndFilter(text) == (tokens, offsets)
    assert tokenizeAndFilterSimple(text) == tokens
    assert tokenize_with_offsets(text) == (tokens, offsets)
    assert assert_offsets_point_to_tokens(text) == (tokens, offsets)
    # unfiltered: every piece, blanks and the empty strings between adjacent delimiters included
    assert tokenize(text) == (pieces, contiguous_offsets(pieces))
    assert tokenizeAndFilter(text, filterBlank=False) == tokenize(text)
    assert "".join(pieces) == text


def test_delimiters():
    assert len(delimiters) == 49 and len(set(delimiters)) == 47
    assert set(blanks) < set(delimiters)
    assert set(delimiters) - set(blanks) == set("\r\f([\u2022*,:;?.!/)-\u2212\u2013\u2010\"\u201c\u201d"
                                                "\u2018\u2019'`$]\u2666\u2665\u2663\u2660")
    for character in "%&+=#@_<>{}|~^\\\u2014\u202f\u3000\u00ad\u200d":
        assert tokenizeAndFilter(f"a{character}b") == ([f"a{character}b"], [(0, 3)])
    for character in set(delimiters):
        expected = ["a", "b"] if character in blanks else ["a", character, "b"]
        assert tokenizeAndFilterSimple(f"a{character}b") == expected


def test_filter_space():
    assert not any(filterSpace(token) for token in ("", " ", "\t", "\u00a0", "\u200b"))
    assert filterSpace("\r") and filterSpace("\f") and filterSpace("a") and filterSpace("a b")
    assert not filterSpace(" \t")  # DeLFT's test is a substring test on the string of blanks


@pytest.mark.parametrize("text, expected", [
    ("June 10, 2005", ["June", "10", ",", "2005"]),
    ("10-06-2005", ["10", "-", "06", "-", "2005"]),
    ("Accepted: 12th Dec. 2001", ["Accepted", ":", "12th", "Dec", ".", "2001"]),
    ("(2003)", ["(", "2003", ")"]),
    ("a--b...", ["a", "-", "-", "b", ".", ".", "."]),
    ("40% of $5", ["40%", "of", "$", "5"]),
    ("snake_case", ["snake_case"]),
    ("Veröffentlichungsdatum Édition naïve", ["Veröffentlichungsdatum", "Édition", "naïve"]),
    ("Москва 東京", ["Москва", "東京"]),
    ("tab\tnew\nline\u00a0nbsp", ["tab", "new", "line", "nbsp"]),
])
def test_tokens(text, expected):
    assert assert_offsets_point_to_tokens(text)[0] == expected


def test_delft_tagger_example():
    # DeLFT's own example: "March the 27th, 2001" and the offsets its JSON output is built from
    assert tokenizeAndFilter("March the 27th, 2001") == (
        ["March", "the", "27th", ",", "2001"], [(0, 5), (6, 9), (10, 14), (14, 15), (16, 20)])


def test_combining_marks_stay_in_their_word():
    decomposed = unicodedata.normalize("NFD", "café été")
    assert len(decomposed) == 11  # three accents, each its own code point
    assert tokenizeAndFilterSimple(decomposed) == [unicodedata.normalize("NFD", word)
                                                   for word in ("café", "été")]


def test_zero_width_space_separates_soft_hyphen_does_not():
    assert tokenizeAndFilterSimple("zero\u200bwidth soft\u00adhyphen") == ["zero", "width",
                                                                          "soft\u00adhyphen"]


@pytest.mark.parametrize("text", ["", " ", " \t\n\u00a0\u2009\u200b "])
def test_no_tokens(text):
    assert tokenize_with_offsets(text) == ([], [])
    assert tokenizeAndFilterSimple(text) == []


def test_carriage_return_and_form_feed_are_tokens():
    assert tokenize_with_offsets(" \t\n\r ") == (["\r"], [(3, 4)])
    assert tokenizeAndFilterSimple("a\fb\r\n") == ["a", "\f", "b", "\r"]


def test_offsets_are_character_positions():
    tokens, offsets = tokenize_with_offsets("  Hi, é!")
    assert tokens == ["Hi", ",", "é", "!"]
    assert offsets == [(2, 4), (4, 5), (6, 7), (7, 8)]
    # code points, not UTF-16 units: an emoji counts for one
    assert tokenize_with_offsets("😀 1999") == (["😀", "1999"], [(0, 1), (2, 6)])


@pytest.mark.parametrize("name", ["test.ner.en.txt", "test.ner.fr.txt"])
def test_offsets_on_real_text(name):
    text = real_text(name)
    tokens, _ = assert_offsets_point_to_tokens(text)
    pieces, offsets = tokenize(text)
    assert "".join(pieces) == text and offsets == contiguous_offsets(pieces)
    # only blanks and empty pieces are dropped
    assert tokens == [piece for piece in pieces if piece and piece not in blanks]


def test_real_english_sentence():
    tokens = tokenizeAndFilterSimple(real_text("test.ner.en.txt"))
    assert tokens[:8] == ["The", "University", "of", "California", "has", "found", "that", "40"]
    assert ["White", "House", "."] == tokens[tokens.index("White"):tokens.index("White") + 3]


def test_real_french_sentence():
    tokens = tokenizeAndFilterSimple(real_text("test.ner.fr.txt"))
    assert tokens[:6] == ["Elargie", "à", "l", "’", "Italie", "et"]
    assert "Crimée" in tokens and "étrangères" in tokens
