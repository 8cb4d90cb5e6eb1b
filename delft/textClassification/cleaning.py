"""DeLFT's text cleaning for classification: transliterate to ASCII, then delete every character
other than ASCII letters, ``. - ? ! , # @ %`` and the plain space.

DeLFT transliterates with Unidecode (GPL); this package (Apache-2.0) uses anyascii (ISC), which
agrees with it on the letters of European languages. Where the two disagree on a character of
the Latin-1 Supplement, Latin Extended-A or General Punctuation blocks, :data:`DELFT_FORMS` gives
DeLFT's form: those are the characters of the scholarly texts GROBID classifies (the copyright
sign, em dash, ligatures), and the vocabularies of trained models hold DeLFT's forms of them
("(c)" cleaned to ``c``, not anyascii's ``C``). Elsewhere (Greek, CJK, arrows, mathematical
symbols, emoji) anyascii's transliteration stands; ``tests/test_clean_text.py`` lists the known
differences and ``benchmarks/clean_text_vs_unidecode.py`` measures them on the shared data.

Characters are deleted, not replaced: digits, parentheses, quotes, tabs and newlines disappear,
so ``"a\\nb"`` becomes ``"ab"``. No lower-casing (DeLFT's vectors are looked up as written).

>>> clean_text("© 2005 Elsevier Inc. a\\nb")
'c  Elsevier Inc. ab'
>>> text_tokens("Attribution 3.0 license (CC-BY)")
['Attribution', '.', 'license', 'CC', '-', 'BY']
"""
import re

from anyascii import anyascii

from delft.utilities.Tokenizer import tokenizeAndFilterSimple

#: What survives cleaning: every other character of the ASCII transliteration is deleted.
_DELETED = re.compile(r"[^A-Za-z.\-?!,#@% ]")

#: DeLFT's cleaned form of the characters of U+0080-U+017F and U+2000-U+206F whose cleaned
#: anyascii transliteration differs from it (each one's anyascii form in its comment). Applied
#: before transliterating; each value is already clean.
DELFT_FORMS = {
    "\u00a2": "C",  # CENT SIGN: anyascii c
    "\u00a3": "PS",  # POUND SIGN: anyascii GBP
    "\u00a4": "?",  # CURRENCY SIGN: anyascii (deleted)
    "\u00a7": "SS",  # SECTION SIGN: anyascii S
    "\u00a9": "c",  # COPYRIGHT SIGN: anyascii C
    "\u00ae": "r",  # REGISTERED SIGN: anyascii R
    "\u00b7": "",  # MIDDLE DOT: anyascii -
    "\u00bc": "  ",  # VULGAR FRACTION ONE QUARTER: anyascii (deleted)
    "\u00bd": "  ",  # VULGAR FRACTION ONE HALF: anyascii (deleted)
    "\u00be": "  ",  # VULGAR FRACTION THREE QUARTERS: anyascii (deleted)
    "\u00c6": "AE",  # LATIN CAPITAL LETTER AE: anyascii Ae
    "\u00d7": "x",  # MULTIPLICATION SIGN: anyascii (deleted)
    "\u0138": "k",  # LATIN SMALL LETTER KRA: anyascii q
    "\u014a": "ng",  # LATIN CAPITAL LETTER ENG: anyascii Ng (DeLFT's case is swapped)
    "\u014b": "NG",  # LATIN SMALL LETTER ENG: anyascii ng
    "\u0152": "OE",  # LATIN CAPITAL LIGATURE OE: anyascii Oe
    "\u200b": " ",  # ZERO WIDTH SPACE: anyascii (deleted)
    "\u2014": "--",  # EM DASH: anyascii -
    "\u2015": "--",  # HORIZONTAL BAR: anyascii -
    "\u201a": ",",  # SINGLE LOW-9 QUOTATION MARK: anyascii (deleted)
    "\u201e": ",,",  # DOUBLE LOW-9 QUOTATION MARK: anyascii (deleted)
    "\u2027": ".",  # HYPHENATION POINT: anyascii -
    "\u2028": "",  # LINE SEPARATOR: anyascii space
    "\u2029": "",  # PARAGRAPH SEPARATOR: anyascii space
    "\u2043": "--",  # HYPHEN BULLET: anyascii -
    "\u2045": "-",  # LEFT SQUARE BRACKET WITH QUILL: anyascii (deleted)
    "\u2046": "-",  # RIGHT SQUARE BRACKET WITH QUILL: anyascii (deleted)
    "\u204b": "PP",  # REVERSED PILCROW SIGN: anyascii P
    "\u2052": "%",  # COMMERCIAL MINUS SIGN: anyascii ..
}
_DELFT_TABLE = str.maketrans(DELFT_FORMS)


def clean_text(text):
    """``text`` transliterated to ASCII, every character other than ASCII letters,
    ``. - ? ! , # @ %`` and the space deleted (DeLFT's ``preprocess.clean_text``).

    Args:
        text: any string.

    Returns:
        The cleaned string (possibly empty).

    >>> clean_text("authors&apos; moral rights (x_y), it's Café — naïve")
    'authorsapos moral rights xy, its Cafe -- naive'
    """
    if not isinstance(text, str):
        raise TypeError(f"clean_text expects a str, not {type(text).__name__}")
    return _DELETED.sub("", anyascii(text.translate(_DELFT_TABLE)))


def text_tokens(text):
    """The tokens a classifier reads of ``text``: DeLFT's tokenizer on the cleaned text.

    Args:
        text: any string.

    Returns:
        The list of tokens (runs of letters and the kept punctuation, each delimiter its own
        token), case kept.

    >>> text_tokens("Licensed under CC BY-NC 4.0: ok?")
    ['Licensed', 'under', 'CC', 'BY', '-', 'NC', '.', 'ok', '?']
    """
    return tokenizeAndFilterSimple(clean_text(text))
