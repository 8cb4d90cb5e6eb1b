"""Per-token values of many sequences held in one flat array, and the vectorised encoding steps
that fill them: token interning, character tables, feature ids.

Encoding is the host side of every tagging call and training epoch, and a GPU waits on it: no
step here runs Python per token where a C-level ``map`` or a numpy gather does (a token costs a
dictionary lookup, not a loop over its characters or feature columns), and a batch's rows are one
gather from the flat array, not a copy per row (``benchmarks/encoding_throughput.py``).
"""
from collections import defaultdict
from itertools import chain, count
from operator import itemgetter

import numpy as np

from delft.sequenceLabelling.vocabularies import UNKNOWN_INDEX


class TokenArrays:
    """The values of every token of a list of sequences, in one array: sequence ``i`` is
    ``values[starts[i]:starts[i + 1]]`` (indexing and iterating give those views).

    >>> labels = TokenArrays(np.array([5, 6, 7]), [2, 1])
    >>> len(labels), labels[1].tolist(), [part.tolist() for part in labels]
    (2, [7], [[5, 6], [7]])
    """

    def __init__(self, values: np.ndarray, lengths):
        self.values = values
        self.starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])

    def __len__(self):
        return len(self.starts) - 1

    def __getitem__(self, i):
        return self.values[self.starts[i]:self.starts[i + 1]]

    def __iter__(self):
        return (self.values[a:b] for a, b in zip(self.starts[:-1], self.starts[1:]))

    def padded(self, sequences, offsets, lengths, width):
        """Zero-padded ``[rows, width, ...]`` values of rows, a row being ``lengths[k]`` tokens
        of sequence ``sequences[k]`` from its token ``offsets[k]``: one gather.

        >>> TokenArrays(np.arange(1, 6), [3, 2]).padded([1, 0], [0, 1], [2, 1], 3).tolist()
        [[4, 5, 0], [2, 0, 0]]
        """
        columns = np.arange(width)
        inside = columns < np.asarray(lengths)[:, None]
        positions = (self.starts[np.asarray(sequences)] + offsets)[:, None] + columns
        out = np.zeros((len(inside), width) + self.values.shape[1:], dtype=self.values.dtype)
        out[inside] = self.values[positions[inside]]
        return out


def sequence_lengths(sequences):
    return np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))


def interned(values, size, first=0):
    """``(index, ids)``: each distinct value's id, from ``first`` in order of first occurrence,
    and the id of every value (int64), of ``size`` values (an iterator is never held whole).
    One hash per value, no Python loop.

    >>> index, ids = interned(iter(["a", "b", "a"]), 3, first=1)
    >>> dict(index), ids.tolist()
    ({'a': 1, 'b': 2}, [1, 2, 1])
    """
    index = defaultdict(count(first).__next__)  # a value unseen so far takes the next id
    ids = np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=size)
    return index, ids


def intern_tokens(x):
    """``(token_index, token_ids)``: an id per distinct token (from 1, in order of first
    occurrence) and each token's id, as :class:`TokenArrays` of int32."""
    tokens = list(chain.from_iterable(x))
    index, ids = interned(tokens, len(tokens), first=1)
    return dict(index), TokenArrays(ids.astype(np.int32), sequence_lengths(x))


def _char_lookup(char_index):
    """Character ids by code point (one past the largest known code point: unknown)."""
    singles = {ord(c): i for c, i in char_index.items() if len(c) == 1}
    lookup = np.full(max(singles, default=0) + 2, UNKNOWN_INDEX, dtype=np.int32)
    lookup[list(singles)] = list(singles.values())
    return lookup


def char_table(words, char_index, max_chars):
    """``[len(words) + 1, max_chars]`` character ids of each word (row 0 pads), a word cut after
    ``max_chars`` characters; a character ``char_index`` does not hold is unknown.

    >>> char_table(["ab", "cab"], {"<PAD>": 0, "<UNK>": 1, "a": 2, "b": 3}, 2).tolist()
    [[0, 0], [2, 3], [1, 2]]
    """
    table = np.zeros((len(words) + 1, max_chars), dtype=np.int32)
    if not words:
        return table
    lookup = _char_lookup(char_index)
    # code points of all the words at once (a lone surrogate, which Python strings may hold,
    # is one code point too)
    codes = np.frombuffer("".join(words).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    ids = lookup[np.minimum(codes, len(lookup) - 1)]
    lengths = sequence_lengths(words)
    columns = np.arange(max_chars)
    inside = columns < np.minimum(lengths, max_chars)[:, None]
    positions = (np.cumsum(lengths) - lengths)[:, None] + columns
    table[1:][inside] = ids[positions[inside]]
    return table


def first_bad_width(features, accepted):
    """``(sequence, token, width)`` of the first token whose feature row's length is not
    ``accepted(length)``, or None; the lengths are checked in one pass, rows again only when
    one fails."""
    rows = chain.from_iterable(features)
    if all(map(accepted, set(map(len, rows)))):
        return None
    for s, seq in enumerate(features):
        for t, row in enumerate(seq):
            if not accepted(len(row)):
                return s, t, len(row)
    return None


def feature_ids(features, columns, vocabularies):
    """``[tokens, len(columns)]`` ids of the feature ``columns`` of every token of
    ``features`` (sequences of per-token value lists), value ``v`` of column ``columns[j]``
    being ``vocabularies[j].get(v, UNKNOWN_INDEX)``.

    Layout columns take few values, and so few distinct combinations: each token's combination
    is interned (one hash) and the ids are looked up once per combination.

    >>> feature_ids([[["x", "a", "b"]], [["y", "c", "b"]]], [1, 2],
    ...             [{"a": 2}, {"b": 2}]).tolist()
    [[2, 2], [1, 2]]
    """
    rows = list(chain.from_iterable(features))
    if len(columns) == 1:  # itemgetter of one column gives the value, not a 1-tuple
        keys = map(tuple, map(itemgetter(slice(columns[0], columns[0] + 1)), rows))
    else:
        keys = map(itemgetter(*columns), rows)
    index, combination = interned(keys, len(rows))
    table = np.array([[vocabulary.get(value, UNKNOWN_INDEX)
                       for value, vocabulary in zip(key, vocabularies)] for key in index],
                     dtype=np.int32).reshape(len(index), len(columns))
    return table[combination]
