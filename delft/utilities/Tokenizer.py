"""DeLFT's (and GROBID's default) tokenizer for Indo-European text: split on a fixed set of delimiters.

Every delimiter character is a token of its own; the text between two delimiters is one token,
whatever it holds, so ``50%``, ``AT&T``, ``a—b`` (em dash), ``x=1`` or ``b@c`` stay whole. Blanks
(space, tab, LF, NBSP, U+2000-U+200B) separate tokens and are dropped by the filtering functions;
CR and form feed are delimiters but not blanks, so they remain tokens. Offsets are ``(start, end)``
indices of Python ``str`` code points, end exclusive.

>>> tokenizeAndFilter("AT&T's 50%, (2003)")[0]
['AT&T', "'", 's', '50%', ',', '(', '2003', ')']
>>> tokenizeAndFilter("a  50%")
(['a', '50%'], [(0, 1), (3, 6)])
>>> tokenizeAndFilterSimple("state-of-the-art")
['state', '-', 'of', '-', 'the', '-', 'art']
>>> tokenize("(a b)")[0]
['', '(', 'a', ' ', 'b', ')', '']
"""
import re
from typing import List, Tuple

Offsets = List[Tuple[int, int]]

#: The delimiter characters, in DeLFT's order (NBSP and ``*`` are listed twice there too).
delimiters = ("\n\r\t\f\u00a0([ \u2022*,:;?.!/)-\u2212\u2013\u2010\"\u201c\u201d\u2018\u2019'`$]*"
              "\u2666\u2665\u2663\u2660\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
              "\u2008\u2009\u200a\u200b")
#: The delimiters that are blanks: left out of the filtered tokens (CR and FF are not blanks).
blanks = " \t\n\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u200b"
#: One delimiter character; the capturing group keeps the delimiters in ``pattern.split`` output.
pattern = re.compile("([" + "".join(map(re.escape, sorted(set(delimiters)))) + "])")


def _pieces(text: str) -> Tuple[List[str], Offsets]:
    """Pieces of ``text`` (runs between delimiters, empty ones too, and delimiters) with offsets."""
    pieces = pattern.split(text)
    offsets, position = [], 0
    for piece in pieces:
        offsets.append((position, position + len(piece)))
        position += len(piece)
    return pieces, offsets


def filterSpace(token: str) -> bool:
    """Whether the filtering tokenizers keep ``token`` (DeLFT's test: not a substring of ``blanks``).

    Args:
        token: a token, as the tokenizer returns it.

    Returns:
        False for the empty string and for a blank character, True otherwise (``"\\r"`` included).
    """
    return token not in blanks


def tokenizeAndFilter(text: str, filterBlank: bool = True) -> Tuple[List[str], Offsets]:
    """Tokens of ``text`` with their character offsets.

    Args:
        text: the text to tokenize.
        filterBlank: drop blank tokens and the empty strings between adjacent delimiters (default);
            with False every piece is kept, so the tokens put together give back ``text``.

    Returns:
        ``(tokens, offsets)``, with ``offsets[i] == (start, end)`` and ``text[start:end] == tokens[i]``.
    """
    pieces, offsets = _pieces(text)
    if not filterBlank:
        return pieces, offsets
    kept = [i for i, piece in enumerate(pieces) if filterSpace(piece)]
    return [pieces[i] for i in kept], [offsets[i] for i in kept]


def tokenize(text: str) -> Tuple[List[str], Offsets]:
    """Every piece of ``text`` with its offsets: blanks and empty strings stay (``filterBlank=False``).

    Args:
        text: the text to tokenize.

    Returns:
        ``(tokens, offsets)`` covering ``text`` without gap; ``tokenize("")`` is ``([""], [(0, 0)])``.
    """
    return tokenizeAndFilter(text, filterBlank=False)


def tokenizeAndFilterSimple(text: str) -> List[str]:
    """The tokens of ``tokenizeAndFilter(text)``, without offsets.

    Args:
        text: the text to tokenize.

    Returns:
        The tokens, blanks and empty strings left out.
    """
    return [piece for piece in pattern.split(text) if filterSpace(piece)]


def tokenize_with_offsets(text: str) -> Tuple[List[str], Offsets]:
    """The tokens a raw string is tagged with, and their offsets: ``tokenizeAndFilter(text)``.

    Args:
        text: the text to tokenize.

    Returns:
        ``(tokens, offsets)``: no blank or empty token, end-exclusive offsets in increasing order,
        ``text[start:end] == token``.

    >>> tokenize_with_offsets("Café, 10-06")
    (['Café', ',', '10', '-', '06'], [(0, 4), (4, 5), (6, 8), (8, 9), (9, 11)])
    """
    return tokenizeAndFilter(text)
