"""Vectorisation: tokens, features and labels to integer arrays; vocabularies saved as JSON.

A corpus is encoded once into *rows* (a row is a sequence, or a window of one when a sequence is
longer than what the model takes), and a batch of rows is padded on demand. Tokens are interned in
a table per corpus so that the characters of a token that occurs 10,000 times are looked up once and
a batch's character tensor is one numpy gather; per-token ids (tokens, features, labels) are held
flat (:class:`~delft.sequenceLabelling.token_arrays.TokenArrays`), a batch's rows one gather.

:class:`Preprocessor` is what every model family's preprocessor is (the label, character and feature
vocabularies, and JSON persistence); :class:`WordPreprocessor` is the RNN family's, and
``delft.sequenceLabelling.transformers.preprocess.TransformerPreprocessor`` the transformers'.
"""
import json
import logging
from dataclasses import dataclass, field
from itertools import chain
from typing import Dict, List, Optional

import numpy as np

from delft.sequenceLabelling.casing import CASING_INDEX, casing_class
from delft.sequenceLabelling.feature_columns import (DEFAULT_FEATURES_VOCABULARY_SIZE,
                                                     FeatureColumnsError, distinct_values,
                                                     select_columns)
from delft.sequenceLabelling.token_arrays import (TokenArrays, char_table, feature_ids,
                                                  first_bad_width, intern_tokens, sequence_lengths)
from delft.sequenceLabelling.vocabularies import (  # noqa: F401 - imported from here too
    PAD_INDEX, UNKNOWN_INDEX, LabelVocabulary, feature_map, id_map, positive_count)
from delft.sequenceLabelling.windows import rows_from_windows
from delft.training.batching import batch_width

logger = logging.getLogger(__name__)



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
    # for a model that reads its padding (WordPreprocessor.reads_padding), the width each row is
    # read at when tagging: its DeLFT batch's (batching.delft_read_widths); None in training,
    # where a row is read at the width of the batch it is padded in
    read_width: Optional[np.ndarray] = None

    def __post_init__(self):
        if self.row_width is None:
            self.row_width = self.row_length

    @property
    def num_rows(self):
        return len(self.row_sequence)


def pad_rows(corpus: EncodedCorpus, rows: np.ndarray, per_token: TokenArrays,
             width: int) -> np.ndarray:
    """The rows ``rows`` of per-token ids of ``corpus``'s sequences (tokens, features, labels),
    zero-padded to ``width``."""
    return per_token.padded(corpus.row_sequence[rows], corpus.row_offset[rows],
                            corpus.row_length[rows], width)


class Preprocessor:
    """The vocabularies every model family shares — labels, characters, categorical feature
    columns — and what a family's preprocessor provides: ``encode``, ``padded_batch``,
    ``batch_signature``, and JSON persistence with optional resources beside it.

    Feature columns are chosen by :func:`~delft.sequenceLabelling.feature_columns.select_columns`
    (``features_indices``, or DeLFT's rule of at most ``features_vocabulary_size`` values). Each
    column has ``features_vocabulary_size + 2`` ids: 0 pads, 1 is an unseen value (reserved:
    a value met at tagging only), values seen in training from 2, in sorted order. The count of
    feature columns of the training rows is kept, and tagging input with another count is an
    error (:class:`FeatureColumnsError`), not columns silently shifted.

    Subclasses set ``kind`` (the name saved in ``preprocessor.json``) and ``uses_chars``.
    """

    kind = ""
    uses_chars = True
    # a model that reads its batches, or its tokens' characters, whole (see WordPreprocessor)
    reads_padding = reads_char_padding = False

    def __init__(self, max_char_length: int = 30, features_indices: Optional[List[int]] = None,
                 features_vocabulary_size: int = DEFAULT_FEATURES_VOCABULARY_SIZE):
        self.max_char_length = max_char_length
        self.features_indices = features_indices
        self.features_vocabulary_size = features_vocabulary_size
        self.char_index = {"<PAD>": PAD_INDEX, "<UNK>": UNKNOWN_INDEX}
        self.feature_index: List[dict] = []
        # feature columns per token in the training rows (several when the training data mixes
        # feature layouts, as GROBID's table data does)
        self.feature_widths: List[int] = []
        self.label_vocabulary = LabelVocabulary()

    # -- vocabularies -------------------------------------------------------------------------
    def fit(self, x, y, features=None) -> Dict[str, list]:
        """Build (or, called again, extend) the vocabularies; returns what was new."""
        new_chars = sorted(set("".join(chain.from_iterable(x))) -
                           set(self.char_index)) if self.uses_chars else []
        for c in new_chars:
            self.char_index[c] = len(self.char_index)
        new_labels = self.label_vocabulary.fit(y)
        if features is not None and len(features) and _has_feature_columns(features):
            self._fit_features(features)
        return {"chars": new_chars, "labels": new_labels}

    def _fit_features(self, features):
        if not self.feature_index:
            self.feature_widths = sorted({len(row) for seq in features for row in seq})
            distinct = distinct_values(features, self.feature_widths[0])
            self.features_indices = select_columns(distinct, self.features_indices,
                                                   self.features_vocabulary_size)
            self.feature_index = [{value: UNKNOWN_INDEX + 1 + rank
                                   for rank, value in enumerate(sorted(distinct[column]))}
                                  for column in self.features_indices]
        else:  # incremental training: the same columns, new values while there is room
            self.check_feature_columns(features)
            self._add_feature_values(features)

    def _add_feature_values(self, features):
        limit = self.features_vocabulary_size
        for column, vocab in zip(self.features_indices, self.feature_index):
            new = sorted({row[column] for seq in features for row in seq} - set(vocab))
            room = max(limit - len(vocab), 0)
            for value in new[:room]:
                vocab[value] = UNKNOWN_INDEX + 1 + len(vocab)
            if len(new) > room:
                logger.warning("feature column %d: %d new values beyond features_vocabulary_size "
                               "(%d) are read as unseen", column, len(new) - room, limit)

    def check_feature_columns(self, features):
        """Raise :class:`FeatureColumnsError` at the first token whose count of feature columns
        the model was not trained on (a model folder that does not say that count, DeLFT's,
        takes any row holding the columns it reads)."""
        accepted = set(self.feature_widths)
        least = max(self.features_indices) + 1 if self.features_indices else 0
        bad = first_bad_width(features, accepted.__contains__ if accepted else
                              least.__le__)
        if bad is not None:
            raise FeatureColumnsError(*bad, " or ".join(map(str, self.feature_widths)) or
                                      f"at least {least}")

    def checked_feature_chunks(self, chunks, path):
        """The ``(x, f)`` chunks of the file ``path``, in order, as they come; for a model that
        reads features, a token with another count of feature columns than training is a
        :class:`DataFormatError` at its line."""
        first = 0
        for x, features in chunks:
            if self.feature_index:
                try:
                    self.check_feature_columns(features)
                except FeatureColumnsError as error:
                    raise error.in_file(path, first) from None
            first += len(x)
            yield x, features

    @property
    def num_labels(self) -> int:
        return len(self.label_vocabulary)

    @property
    def char_vocab_size(self) -> int:
        return len(self.char_index)

    @property
    def feature_vocab_sizes(self) -> List[int]:
        """Ids of each used feature column: padding, unseen, then the values it may hold."""
        return [self.features_vocabulary_size + UNKNOWN_INDEX + 1] * len(self.feature_index)

    def encode_labels(self, y):
        return self.label_vocabulary.encode(y)

    def decode_labels(self, ids):
        return self.label_vocabulary.decode(ids)

    # -- encoding shared by the families ------------------------------------------------------
    def char_data(self, token_index) -> dict:
        """The character ids of each distinct token (``char_table``) and their count."""
        table = char_table(list(token_index), self.char_index, self.max_char_length)
        return {"char_table": table, "char_lengths": (table > 0).sum(axis=1)}

    def features_data(self, features) -> dict:
        """``{"features": the feature ids of every token (TokenArrays)}`` for a model trained with
        features, else {}."""
        if not self.feature_index:
            return {}
        if features is None:
            raise ValueError("this model was trained with features: pass features=")
        self.check_feature_columns(features)
        return {"features": TokenArrays(feature_ids(features, self.features_indices,
                                                    self.feature_index),
                                        sequence_lengths(features))}

    @staticmethod
    def token_matrix(corpus, rows, width=None):
        """Interned token ids of the rows ``rows``, zero-padded to ``width`` (default: the
        longest row): [rows, words]."""
        width = batch_width(corpus, rows) if width is None else width
        return pad_rows(corpus, rows, corpus.data["token_ids"], width)

    @staticmethod
    def chars_of(corpus, tokens):
        """[rows, words, chars] character ids of a token matrix, as wide as its longest token."""
        char_width = max(int(corpus.data["char_lengths"][tokens].max()) if tokens.size else 0, 1)
        return corpus.data["char_table"][tokens, :char_width]

    def add_features_and_labels(self, batch, corpus, rows, width, label_ids=None):
        if "features" in corpus.data:
            batch["features"] = pad_rows(corpus, rows, corpus.data["features"], width)
        if label_ids is not None:
            batch["labels"] = pad_rows(corpus, rows, label_ids, width)
        return batch

    def common_signature(self, with_labels) -> dict:
        """Batch entries every family's model may read: lengths, chars, features, labels."""
        import tensorflow as tf

        signature = {"lengths": tf.TensorSpec([None], tf.int32)}
        if self.uses_chars:
            signature["chars"] = tf.TensorSpec([None, None, None], tf.int32)
        if self.feature_index:
            signature["features"] = tf.TensorSpec([None, None, len(self.features_indices)],
                                                  tf.int32)
        if with_labels:
            signature["labels"] = tf.TensorSpec([None, None], tf.int32)
        return signature

    # -- what a family provides ---------------------------------------------------------------
    def encode(self, x, features=None, window_size=None, window_stride=None) -> EncodedCorpus:
        """Encode token sequences (and their feature columns) into rows ready to batch.

        ``window_size``: rows of at most that many words (training); ``window_stride``: the
        distance between overlapping windows (their default is the family's own).
        """
        raise NotImplementedError

    def padded_batch(self, corpus: EncodedCorpus, rows: np.ndarray, label_ids=None,
                     width=None) -> dict:
        """The rows ``rows`` of ``corpus`` as one batch, padded to ``width`` words (default: the
        longest row; replicas of one global batch share its width, so outputs can be gathered)."""
        raise NotImplementedError

    def batch_signature(self, with_labels: bool) -> dict:
        raise NotImplementedError

    # -- persistence --------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"kind": self.kind, "max_char_length": self.max_char_length,
                "features_indices": self.features_indices,
                "features_vocabulary_size": self.features_vocabulary_size,
                "feature_widths": self.feature_widths,
                "char_index": self.char_index if self.uses_chars else {},
                "feature_index": self.feature_index, "labels": self.label_vocabulary.labels}

    def restore_vocabularies(self, values: dict):
        """Set the shared vocabularies from a ``to_dict`` result, each checked against itself (a
        ``ValueError`` naming the field otherwise): a model folder is refused when it is
        loaded, not when a call fails later inside TensorFlow."""
        if values.get("char_index"):
            self.char_index = id_map(values["char_index"], "char_index", first=(
                "<PAD>", "<UNK>"))
        self.features_vocabulary_size = positive_count(values.get(
            "features_vocabulary_size", DEFAULT_FEATURES_VOCABULARY_SIZE),
            "features_vocabulary_size")
        self.feature_index = [feature_map(v, column, self.features_vocabulary_size)
                              for column, v in enumerate(values.get("feature_index", []))]
        self.feature_widths = [positive_count(w, "feature_widths") for w in values.get("feature_widths", [])]
        if self.feature_index and len(self.features_indices or []) != len(self.feature_index):
            raise ValueError(f"features_indices names {len(self.features_indices or [])} columns, "
                             f"feature_index maps {len(self.feature_index)}")
        labels = values["labels"]
        if not isinstance(labels, list) or not labels or \
                not all(isinstance(label, str) for label in labels):
            raise ValueError(f"labels must be a non-empty list of strings, not {labels!r:.80}")
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise ValueError(f"labels: {twice[0]!r} appears more than once")
        self.label_vocabulary = LabelVocabulary(labels)
        return self

    @classmethod
    def from_dict(cls, values: dict) -> "Preprocessor":
        raise NotImplementedError

    def save(self, path: str):
        with open(path, "w", encoding="utf-8") as out:
            json.dump(self.to_dict(), out, ensure_ascii=False, indent=1)

    def save_resources(self, model_dir: str):
        """Write what the preprocessor needs beside ``preprocessor.json`` (nothing by default)."""

    def load_resources(self, model_dir: str):
        """Read what :meth:`save_resources` wrote (nothing by default)."""


def _has_feature_columns(features):
    return any(len(seq) and len(seq[0]) for seq in features)


class WordPreprocessor(Preprocessor):
    """The RNN family's preprocessor: characters, word vectors (optional), casing (optional),
    feature columns.

    Word vectors are looked up in the *whole* vocabulary of ``embeddings`` (a
    :class:`~delft.utilities.Embeddings.Embeddings`, set by ``Sequence`` and not saved with the
    preprocessor: the model folder names the embeddings), once per distinct token of a corpus, as
    DeLFT and GROBID's Java do: a word unseen in training still gets its pretrained vector. With
    ``uses_casing`` a batch also carries each word's :func:`casing_class` id (``casing``). Two
    settings serve DeLFT's models loaded from their folders (delft/sequenceLabelling/foreign/):
    with ``reads_padding`` batches are built for a model that reads them whole, padding included
    (DeLFT's ChainCRF models); with ``reads_char_padding`` every token has ``max_char_length``
    characters, all of which the char encoder reads (DeLFT's ChainCRF and char CNN models).

    >>> p = WordPreprocessor(max_char_length=5)
    >>> p.fit([["June", "2005"]], [["B-<month>", "B-<year>"]])["labels"]
    ['B-<month>', 'B-<year>']
    >>> corpus = p.encode([["June", "2006"]])
    >>> sorted(p.padded_batch(corpus, np.array([0])).keys())
    ['chars', 'lengths']
    """

    kind = "bilstm"

    def __init__(self, max_char_length=30, features_indices=None,
                 features_vocabulary_size=DEFAULT_FEATURES_VOCABULARY_SIZE, uses_casing=False,
                 reads_padding=False, reads_char_padding=False):
        super().__init__(max_char_length, features_indices, features_vocabulary_size)
        self.uses_casing = uses_casing
        self.reads_padding = reads_padding
        self.reads_char_padding = reads_char_padding
        self.embeddings = None

    def encode(self, x, features=None, window_size=None, window_stride=None):
        """Encode sequences of tokens (and their feature columns) into an :class:`EncodedCorpus`.

        ``window_size`` cuts longer sequences into rows (training), overlapping when
        ``window_stride`` is smaller; by default every sequence is one row, whatever its length
        (an RNN tags whole sequences, never truncated).
        """
        token_index, token_ids = intern_tokens(x)
        lengths = sequence_lengths(x)
        data = {"token_ids": token_ids, **self.char_data(token_index)}
        if self.embeddings is not None:
            table = np.zeros((len(token_index) + 1, self.embeddings.embed_size), dtype=np.float32)
            if token_index:
                table[1:] = self.embeddings.get_word_vectors(list(token_index))
            data["word_vector_table"] = table
        if self.uses_casing:
            data["casing_table"] = np.fromiter(
                [PAD_INDEX] + [CASING_INDEX[casing_class(t)] for t in token_index],
                dtype=np.int32, count=len(token_index) + 1)
        data.update(self.features_data(features))
        return EncodedCorpus(lengths, *rows_from_windows(lengths, window_size, window_stride),
                             data)

    def padded_batch(self, corpus, rows, label_ids=None, width=None):
        width = batch_width(corpus, rows) if width is None else width
        lengths = corpus.row_length[rows].astype(np.int32)
        if self.reads_padding:
            lengths, width = self._read_lengths(corpus, rows, width)
        tokens = self.token_matrix(corpus, rows, width)
        chars = corpus.data["char_table"][tokens] if self.reads_char_padding else \
            self.chars_of(corpus, tokens)
        batch = {"chars": chars, "lengths": lengths}
        return self._add_token_inputs(batch, corpus, rows, tokens, label_ids)

    @staticmethod
    def _read_lengths(corpus, rows, width):
        """``(lengths, width)`` of a batch for a model that reads its padding, as DeLFT's
        ChainCRF models do: each row's length is the width DeLFT read it at
        (``corpus.read_width``; in training the batch's width, at least 2 as DeLFT widens a batch
        of one-word rows), so that the word BiLSTM and the CRF run over the padding as DeLFT's
        do; past a row's length, positions are padding the model does not read."""
        if corpus.read_width is None:
            width = max(width, 2)
            return np.full(len(rows), width, dtype=np.int32), width
        lengths = corpus.read_width[rows].astype(np.int32)
        return lengths, max(width, int(lengths.max()))

    def _add_token_inputs(self, batch, corpus, rows, tokens, label_ids):
        """``batch`` with the inputs looked up by token: word vectors, casing, features, labels."""
        if "word_vector_table" in corpus.data:
            batch["word_vectors"] = corpus.data["word_vector_table"][tokens]
        if self.uses_casing:
            batch["casing"] = corpus.data["casing_table"][tokens]
        return self.add_features_and_labels(batch, corpus, rows, tokens.shape[1], label_ids)

    def batch_signature(self, with_labels):
        import tensorflow as tf

        signature = self.common_signature(with_labels)
        if self.embeddings is not None:
            signature["word_vectors"] = tf.TensorSpec([None, None, self.embeddings.embed_size],
                                                      tf.float32)
        if self.uses_casing:
            signature["casing"] = tf.TensorSpec([None, None], tf.int32)
        return signature

    def to_dict(self):
        return dict(super().to_dict(), uses_casing=self.uses_casing,
                    reads_padding=self.reads_padding, reads_char_padding=self.reads_char_padding)

    @classmethod
    def from_dict(cls, values):
        p = cls(positive_count(values["max_char_length"], "max_char_length"),
                values.get("features_indices"), uses_casing=bool(values.get("uses_casing")),
                reads_padding=bool(values.get("reads_padding")),
                reads_char_padding=bool(values.get("reads_char_padding")))
        return p.restore_vocabularies(values)
