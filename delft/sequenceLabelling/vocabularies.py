"""Vocabularies: labels to ids and back, and the checks a saved vocabulary passes before a model
folder is used (each a ``ValueError`` naming the field: the loader makes it a one-line
``ModelLoadError`` naming the file)."""
from itertools import chain, repeat

import numpy as np

PAD_INDEX = 0
UNKNOWN_INDEX = 1


class LabelVocabulary:
    """Label names to ids and back; labels unseen in training map to 'O' at evaluation time."""

    def __init__(self, labels=()):
        self.labels = list(labels)
        self._index_labels()

    def _index_labels(self):
        self.index = {label: i for i, label in enumerate(self.labels)}
        self._names = np.asarray(self.labels, dtype=object)  # id -> label, one gather per row

    def fit(self, label_sequences):
        seen = set(self.labels)
        new = sorted({label for seq in label_sequences for label in seq} - seen)
        self.labels.extend(new)
        self._index_labels()
        return new

    def encode(self, label_sequences):
        """The label ids of every sequence, as :class:`~delft.sequenceLabelling.token_arrays.TokenArrays`."""
        from delft.sequenceLabelling.token_arrays import TokenArrays, sequence_lengths

        outside = self.index.get("O", 0)
        labels = list(chain.from_iterable(label_sequences))
        ids = np.fromiter(map(self.index.get, labels, repeat(outside)), dtype=np.int32,
                          count=len(labels))
        return TokenArrays(ids, sequence_lengths(label_sequences))

    def decode(self, ids):
        return self._names[np.asarray(ids, dtype=np.int64)].tolist()

    def __len__(self):
        return len(self.labels)


def positive_count(value, field):
    """``value`` if it is a positive int, else a ``ValueError`` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{field} must be a positive integer, not {value!r}")
    return value


def id_map(values, field, first=()):
    """``values`` if it maps strings to the ids 0..n-1, each once, ``first`` at 0, 1...; else a
    ``ValueError`` naming ``field``."""
    if not isinstance(values, dict) or not all(isinstance(k, str) for k in values):
        raise ValueError(f"{field} must map strings to ids")
    ids = sorted(values.values(), key=lambda i: (not isinstance(i, int), i if isinstance(i, int)
                                                 else 0))
    if ids != list(range(len(values))):
        raise ValueError(f"{field}: the ids must be 0..{len(values) - 1}, each once")
    for index, name in enumerate(first):
        if values.get(name) != index:
            raise ValueError(f"{field}: {name} must have id {index}")
    return dict(values)


def feature_map(values, column, vocabulary_size):
    """One column's ``{value: id}``: ids from 2 (0 pads, 1 is unseen) within the column's
    ``vocabulary_size + 2`` ids, each once; else a ``ValueError`` naming the column."""
    where = f"feature_index[{column}]"
    if not isinstance(values, dict) or not all(isinstance(k, str) for k in values):
        raise ValueError(f"{where} must map feature values to ids")
    ids = list(values.values())
    if not all(isinstance(i, int) and not isinstance(i, bool) and
               UNKNOWN_INDEX < i <= vocabulary_size + UNKNOWN_INDEX for i in ids) \
            or len(set(ids)) != len(ids):
        raise ValueError(f"{where}: the ids must be distinct, from {UNKNOWN_INDEX + 1} to "
                         f"{vocabulary_size + UNKNOWN_INDEX} (features_vocabulary_size "
                         f"{vocabulary_size})")
    return dict(values)
