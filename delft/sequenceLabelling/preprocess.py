"""Vectorisation: tokens, features and labels to integer arrays; vocabularies saved as JSON.

A corpus is encoded once into *rows* (a row is a sequence, or a window of one when a sequence is
longer than what the model takes), and a batch of rows is padded on demand. Tokens are interned in
a table per corpus so that the characters of a token that occurs 10,000 times are looked up once and
a batch's character tensor is one numpy gather.
"""
import json
import logging
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from delft.utilities.errors import ModelLoadError

logger = logging.getLogger(__name__)

PAD_INDEX = 0
UNKNOWN_INDEX = 1
MAX_CATEGORICAL_VALUES = 32


def windows(length, size, stride=None):
    """Cover ``range(length)`` with windows of at most ``size`` items, every item kept exactly once.

    Returns ``(start, end, keep_from, keep_to)`` per window: the window is ``[start, end)`` and its
    items ``[start + keep_from, start + keep_to)`` are the ones whose prediction is kept. Without a
    stride the windows do not overlap; with ``stride < size`` they overlap and each item is kept from
    the window where it has the most context on both sides.

    >>> windows(5, 10)
    [(0, 5, 0, 5)]
    >>> windows(7, 3)
    [(0, 3, 0, 3), (3, 6, 0, 3), (6, 7, 0, 1)]
    >>> windows(6, 4, stride=2)
    [(0, 4, 0, 3), (2, 6, 1, 4)]
    """
    if length <= size:
        return [(0, length, 0, length)]
    if stride is None or stride >= size:
        return [(s, min(s + size, length), 0, min(size, length - s)) for s in range(0, length, size)]
    starts = list(range(0, length - size, stride)) + [length - size]
    spans = []
    for i, start in enumerate(starts):
        # keep on from where the previous window stopped, up to the middle of the next overlap
        keep_from = spans[-1][0] + spans[-1][3] - start if spans else 0
        keep_to = size if i == len(starts) - 1 else (start + size + starts[i + 1]) // 2 - start
        spans.append((start, start + size, keep_from, keep_to))
    return spans


@dataclass
class EncodedCorpus:
    """Rows ready to batch. ``row_*`` arrays describe where each row sits in its sequence."""

    sequence_lengths: np.ndarray
    row_sequence: np.ndarray
    row_offset: np.ndarray
    row_length: np.ndarray
    keep_from: np.ndarray
    keep_to: np.ndarray
    data: dict = field(default_factory=dict)
    # what a row costs in a batch, to bucket rows by: its words, or its subtokens for a
    # transformer (where the encoder's work follows the subtokens)
    row_width: Optional[np.ndarray] = None

    def __post_init__(self):
        if self.row_width is None:
            self.row_width = self.row_length

    @property
    def num_rows(self):
        return len(self.row_sequence)


def rows_from_windows(sequence_lengths, size=None, stride=None):
    """Row arrays covering each sequence whole (``size=None``) or in windows of ``size``."""
    spans = []
    for s, length in enumerate(sequence_lengths):
        for start, end, keep_from, keep_to in (windows(length, size, stride) if size else
                                               [(0, length, 0, length)]):
            spans.append((s, start, end - start, keep_from, keep_to))
    table = np.asarray(spans, dtype=np.int64).reshape(-1, 5)
    return [table[:, i] for i in range(5)]


def merge_row_predictions(corpus, row_values, dtype):
    """Stitch per-row predictions back into one array per sequence, every position filled once."""
    merged = [np.zeros(n, dtype=dtype) for n in corpus.sequence_lengths]
    for r, values in enumerate(row_values):
        a, b = corpus.keep_from[r], corpus.keep_to[r]
        offset = corpus.row_offset[r]
        merged[corpus.row_sequence[r]][offset + a: offset + b] = values[a:b]
    return merged


class LabelVocabulary:
    """Label names to ids and back; labels unseen in training map to 'O' at evaluation time."""

    def __init__(self, labels=()):
        self.labels = list(labels)
        self.index = {label: i for i, label in enumerate(self.labels)}

    def fit(self, label_sequences):
        seen = set(self.labels)
        new = sorted({label for seq in label_sequences for label in seq} - seen)
        self.labels.extend(new)
        self.index = {label: i for i, label in enumerate(self.labels)}
        return new

    def encode(self, label_sequences, source="labels"):
        outside = self.index.get("O", 0)
        return [np.fromiter((self.index.get(label, outside) for label in seq), dtype=np.int32,
                            count=len(seq)) for seq in label_sequences]

    def decode(self, ids):
        names = np.asarray(self.labels, dtype=object)
        return names[np.asarray(ids, dtype=np.int64)].tolist()

    def __len__(self):
        return len(self.labels)


class Preprocessor:
    """Character, feature and label vocabularies of the BiLSTM family, saved as JSON.

    >>> p = Preprocessor(max_char_length=5)
    >>> p.fit([["June", "2005"]], [["B-<month>", "B-<year>"]])["labels"]
    ['B-<month>', 'B-<year>']
    >>> corpus = p.encode([["June", "2006"]])
    >>> sorted(p.padded_batch(corpus, np.array([0])).keys())
    ['chars', 'lengths']
    """

    kind = "bilstm"

    def __init__(self, max_char_length=30, features_indices=None, max_sequence_length=None):
        self.max_char_length = max_char_length
        self.features_indices = features_indices
        self.max_sequence_length = max_sequence_length
        self.char_index = {"<PAD>": PAD_INDEX, "<UNK>": UNKNOWN_INDEX}
        self.feature_index: List[dict] = []
        self.word_index = {}
        self.word_vectors = None  # the embedding matrix, only between fit and model build
        self.label_vocabulary = LabelVocabulary()

    # -- vocabularies -------------------------------------------------------------------------
    def fit(self, x, y, features=None, fit_chars=True):
        """Build (or, called again, extend) the vocabularies; returns what was new.

        ``fit_chars=False`` leaves the characters out (a model without a char encoder).
        """
        new_chars = sorted({c for seq in x for token in seq for c in token} -
                           set(self.char_index)) if fit_chars else []
        for c in new_chars:
            self.char_index[c] = len(self.char_index)
        new_labels = self.label_vocabulary.fit(y)
        if features is not None and len(features) and self.uses_features(features):
            self._fit_features(features)
        return {"chars": new_chars, "labels": new_labels}

    def fit_word_vectors(self, vectors):
        """Index the words of ``{word: vector}``; rows 0 (padding) and 1 (unknown) are zeros."""
        words = sorted(vectors)
        self.word_index = {word: i + 2 for i, word in enumerate(words)}
        dimension = len(next(iter(vectors.values()))) if vectors else 0
        self.word_vectors = np.zeros((len(words) + 2, dimension), dtype=np.float32)
        for word, row in self.word_index.items():
            self.word_vectors[row] = vectors[word]

    def word_lookup_keys(self, x):
        """The strings whose vectors tagging may look up: each token and its lowercase form."""
        return {key for seq in x for token in seq for key in (token, token.lower())}

    @property
    def word_vocab_size(self):
        return len(self.word_index) + 2 if self.word_index else 0

    @staticmethod
    def uses_features(features):
        return any(len(seq) and len(seq[0]) for seq in features)

    def _fit_features(self, features):
        num_columns = len(next(seq for seq in features if len(seq))[0])
        if self.features_indices is None:
            distinct = [set() for _ in range(num_columns)]
            for seq in features:
                for token_features in seq:
                    for c, value in enumerate(token_features):
                        distinct[c].add(value)
            self.features_indices = [c for c in range(num_columns)
                                     if len(distinct[c]) <= MAX_CATEGORICAL_VALUES]
            logger.info("categorical feature columns: %s", self.features_indices)
        if not self.feature_index:
            self.feature_index = [{} for _ in self.features_indices]
        for seq in features:
            for token_features in seq:
                for column, vocab in zip(self.features_indices, self.feature_index):
                    # ids start at 2: 0 pads, 1 is an unseen value
                    vocab.setdefault(token_features[column], len(vocab) + 2)

    @property
    def num_labels(self):
        return len(self.label_vocabulary)

    @property
    def char_vocab_size(self):
        return len(self.char_index)

    @property
    def feature_vocab_sizes(self):
        return [len(v) + 2 for v in self.feature_index]

    def encode_labels(self, y):
        return self.label_vocabulary.encode(y)

    def decode_labels(self, ids):
        return self.label_vocabulary.decode(ids)

    # -- corpus -------------------------------------------------------------------------------
    def encode(self, x, features=None, window_size=None):
        """Encode sequences of tokens (and their feature columns) into an :class:`EncodedCorpus`.

        ``window_size`` cuts longer sequences into consecutive rows (training); by default every
        sequence is one row, whatever its length (tagging never truncates).
        """
        token_index = {}
        token_rows = []
        for seq in x:
            token_rows.append(np.fromiter(
                (token_index.setdefault(t, len(token_index) + 1) for t in seq),
                dtype=np.int32, count=len(seq)))
        char_table = np.zeros((len(token_index) + 1, self.max_char_length), dtype=np.int32)
        char_get = self.char_index.get
        for token, row in token_index.items():
            ids = [char_get(c, UNKNOWN_INDEX) for c in token[:self.max_char_length]]
            char_table[row, :len(ids)] = ids
        lengths = np.fromiter((len(seq) for seq in x), dtype=np.int64, count=len(x))
        row_sequence, row_offset, row_length, keep_from, keep_to = rows_from_windows(
            lengths, window_size)
        data = {"token_rows": token_rows, "char_table": char_table,
                "char_lengths": (char_table > 0).sum(axis=1)}
        if self.word_index:
            word_table = np.zeros(len(token_index) + 1, dtype=np.int32)
            for token, row in token_index.items():
                word_table[row] = self.word_index.get(
                    token, self.word_index.get(token.lower(), UNKNOWN_INDEX))
            data["word_table"] = word_table
        data.update(self.features_data(features))
        return EncodedCorpus(lengths, row_sequence, row_offset, row_length, keep_from, keep_to,
                             data)

    def features_data(self, features):
        """``{"features": per-sequence id arrays}`` for a model trained with features, else {}."""
        if not self.feature_index:
            return {}
        if features is None:
            raise ValueError("this model was trained with features: pass features=")
        return {"features": self._encode_features(features)}

    def _encode_features(self, features):
        encoded = []
        for seq in features:
            array = np.zeros((len(seq), len(self.features_indices)), dtype=np.int32)
            for t, token_features in enumerate(seq):
                for j, (column, vocab) in enumerate(zip(self.features_indices, self.feature_index)):
                    array[t, j] = vocab.get(token_features[column], UNKNOWN_INDEX)
            encoded.append(array)
        return encoded

    def padded_batch(self, corpus, rows, label_ids=None):
        """Pad the rows ``rows`` of ``corpus`` to the batch's longest row and longest token."""
        lengths = corpus.row_length[rows]
        width = int(lengths.max()) if len(rows) else 0
        tokens = np.zeros((len(rows), width), dtype=np.int32)
        for i, r in enumerate(rows):
            start = corpus.row_offset[r]
            tokens[i, :lengths[i]] = corpus.data["token_rows"][corpus.row_sequence[r]][
                start:start + lengths[i]]
        char_width = max(int(corpus.data["char_lengths"][tokens].max()) if tokens.size else 0, 1)
        batch = {"chars": corpus.data["char_table"][tokens, :char_width],
                 "lengths": lengths.astype(np.int32)}
        if "word_table" in corpus.data:
            batch["words"] = corpus.data["word_table"][tokens]
        if "features" in corpus.data:
            batch["features"] = self._pad_rows(corpus, rows, corpus.data["features"], width,
                                               (len(self.features_indices),))
        if label_ids is not None:
            batch["labels"] = self._pad_rows(corpus, rows, label_ids, width, ())
        return batch

    @staticmethod
    def _pad_rows(corpus, rows, per_sequence, width, tail):
        out = np.zeros((len(rows), width) + tail, dtype=np.int32)
        for i, r in enumerate(rows):
            start, n = corpus.row_offset[r], corpus.row_length[r]
            out[i, :n] = per_sequence[corpus.row_sequence[r]][start:start + n]
        return out

    def batch_signature(self, with_labels):
        import tensorflow as tf

        signature = {"chars": tf.TensorSpec([None, None, None], tf.int32),
                     "lengths": tf.TensorSpec([None], tf.int32)}
        if self.word_index:
            signature["words"] = tf.TensorSpec([None, None], tf.int32)
        if self.feature_index:
            signature["features"] = tf.TensorSpec([None, None, len(self.features_indices)],
                                                  tf.int32)
        if with_labels:
            signature["labels"] = tf.TensorSpec([None, None], tf.int32)
        return signature

    # -- persistence --------------------------------------------------------------------------
    def to_dict(self):
        return {"kind": self.kind, "max_char_length": self.max_char_length,
                "features_indices": self.features_indices,
                "max_sequence_length": self.max_sequence_length,
                "char_index": self.char_index, "feature_index": self.feature_index,
                "word_index": self.word_index,
                "labels": self.label_vocabulary.labels}

    @classmethod
    def from_dict(cls, values):
        p = cls(values["max_char_length"], values.get("features_indices"),
                values.get("max_sequence_length"))
        p.char_index = dict(values["char_index"])
        p.feature_index = [dict(v) for v in values.get("feature_index", [])]
        p.word_index = dict(values.get("word_index", {}))
        p.label_vocabulary = LabelVocabulary(values["labels"])
        return p

    def save(self, path):
        with open(path, "w", encoding="utf-8") as out:
            json.dump(self.to_dict(), out, ensure_ascii=False, indent=1)


PREPROCESSORS = {Preprocessor.kind: Preprocessor}


def load_preprocessor(path):
    """Load ``preprocessor.json`` whatever the model family that wrote it."""
    try:
        with open(path, encoding="utf-8") as stream:
            values = json.load(stream)
        kind = values.get("kind", "bilstm")
        if kind == "transformer" and kind not in PREPROCESSORS:
            from delft.sequenceLabelling.models.transformer import TransformerPreprocessor

            PREPROCESSORS[kind] = TransformerPreprocessor
        return PREPROCESSORS[kind].from_dict(values)
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: missing preprocessor file") from None
    except (ValueError, KeyError, TypeError, AttributeError) as error:  # AttributeError: not an object
        raise ModelLoadError(f"{path}: corrupt preprocessor file ({error})") from None
