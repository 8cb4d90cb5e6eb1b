"""DeLFT-style tokenisation: words and numbers stay whole, every other visible character is a token.

>>> tokenize("Received 3 March, 1999.")
['Received', '3', 'March', ',', '1999', '.']
"""
import regex

# A word is a run of letters, digits and combining marks (so "é" written as "e" + U+0301 stays in its
# word). Any other character is a token of its own, except separators: whitespace, and the invisible
# control and format characters (zero-width space, soft hyphen...) which would be empty-looking tokens.
_TOKEN = regex.compile(r"[\p{L}\p{M}\p{N}]+|[^\s\p{L}\p{M}\p{N}\p{Cc}\p{Cf}]")


def tokenize_with_offsets(text):
    """Split ``text`` into tokens and their ``(start, end)`` character offsets: ``text[start:end] == token``.

    >>> tokenize_with_offsets("Café, 10-06")
    (['Café', ',', '10', '-', '06'], [(0, 4), (4, 5), (6, 8), (8, 9), (9, 11)])
    """
    tokens = []
    offsets = []
    for match in _TOKEN.finditer(text):
        tokens.append(match.group())
        offsets.append(match.span())
    return tokens, offsets


def tokenize(text):
    """The tokens of ``text``, without offsets.

    >>> tokenize("l'été 2005")
    ['l', "'", 'été', '2005']
    """
    return _TOKEN.findall(text)
