"""Words to subtokens with the checkpoint's tokenizer, and rows that fit the encoder.

A row of the encoded corpus is a sequence, or a window of it when its subtokens (with the special
tokens) exceed :attr:`TransformerPreprocessor.subtoken_limit`: long inputs are never truncated, at
training or at tagging; a word is labelled from the window where it has the most context.
"""
import logging

import numpy as np

from delft.sequenceLabelling.feature_columns import DEFAULT_FEATURES_VOCABULARY_SIZE
from delft.sequenceLabelling.preprocess import EncodedCorpus, Preprocessor
from delft.sequenceLabelling.transformers.checkpoint import (
    ENCODER_LIMIT, check_checkpoint, checked_encoder_config, encoder_positions,
    load_tokenizer, model_resources_dir, read_encoder_config, resolve_transformer,
    write_model_resources)
from delft.sequenceLabelling.token_arrays import intern_tokens, sequence_lengths
from delft.sequenceLabelling.windows import subtoken_windows, window_table
from delft.training.batching import batch_width
from delft.utilities.errors import ConfigurationError, ModelLoadError

logger = logging.getLogger(__name__)


class TransformerPreprocessor(Preprocessor):
    """Words to subtokens with the checkpoint's tokenizer; labels (and chars, features) as JSON.

    A batch carries ``input_ids``, ``token_type_ids``, ``padding_mask`` (int32), ``word_starts``
    (position of each word's first subtoken in its row) and ``lengths`` (words per row), plus
    ``chars`` / ``features`` / ``labels`` when used.

    >>> p = TransformerPreprocessor(tiny_checkpoint("bert"))
    >>> _ = p.fit([["June", "2005"]], [["B-<month>", "B-<year>"]])
    >>> batch = p.padded_batch(p.encode([["Unbelievably", "2005"]]), np.array([0]))
    >>> batch["input_ids"].shape, batch["word_starts"].tolist()
    ((1, 6), [[1, 4]])
    """

    kind = "transformer"

    def __init__(self, transformer_name, max_sequence_length=ENCODER_LIMIT, window_stride=None,
                 use_chars=False, max_char_length=30, features_indices=None,
                 features_vocabulary_size=DEFAULT_FEATURES_VOCABULARY_SIZE):
        super().__init__(max_char_length, features_indices, features_vocabulary_size)
        self.transformer_name = transformer_name
        self.transformer_dir = None
        # weights come from the checkpoint when training starts, from model.weights.h5 once saved
        self.load_encoder_weights = True
        self.max_sequence_length = max_sequence_length
        self.window_stride = window_stride
        self.uses_chars = use_chars
        self._tokenizer = None
        self._config = None
        self._specials = None
        if transformer_name is not None:
            self.transformer_dir = resolve_transformer(transformer_name)
            self._config = check_checkpoint(self.transformer_dir)
            self.tokenizer  # noqa: B018 - a checkpoint without a tokenizer fails here, named

    @classmethod
    def from_files(cls, transformer_name, weights_dir, encoder_config, tokenizer_dir,
                   max_sequence_length):
        """A preprocessor whose encoder's config, tokenizer and weights lie apart, as in a DeLFT
        1.x folder: ``encoder_config`` (a dict), the tokenizer files in ``tokenizer_dir``, the
        weights in ``weights_dir/model.safetensors`` (read when the model is built)."""
        preprocessor = cls(None, max_sequence_length)
        preprocessor.transformer_name = transformer_name
        preprocessor.transformer_dir = weights_dir
        preprocessor._config = checked_encoder_config(encoder_config, weights_dir)
        preprocessor._tokenizer = load_tokenizer(tokenizer_dir, preprocessor.model_type,
                                                 encoder_config.get("vocab_size"))
        return preprocessor

    # -- checkpoint ---------------------------------------------------------------------------
    @property
    def encoder_config(self) -> dict:
        if self._config is None:
            if self.transformer_dir is None:
                raise ModelLoadError("transformer preprocessor without its checkpoint: call "
                                     "load_resources(model_dir)")
            self._config = read_encoder_config(self.transformer_dir)
        return self._config

    @property
    def model_type(self) -> str:
        return self.encoder_config["model_type"]

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.transformer_dir, self.model_type,
                                             self.encoder_config.get("vocab_size"))
        return self._tokenizer

    @property
    def subtoken_limit(self) -> int:
        """Subtokens per row, special tokens included."""
        limits = [ENCODER_LIMIT, encoder_positions(self.encoder_config)]
        if self.max_sequence_length:
            limits.append(int(self.max_sequence_length))
        return min(limits)

    def _special_tokens(self):
        """(prefix ids, suffix ids, pad id, unknown id) around/of a row of words."""
        if self._specials is None:
            tok = self.tokenizer
            plain = tok(["a"], is_split_into_words=True, add_special_tokens=False)["input_ids"]
            full = tok(["a"], is_split_into_words=True)["input_ids"]
            cut = next((i for i in range(len(full) - len(plain) + 1)
                        if full[i:i + len(plain)] == plain), 0)
            pad = tok.pad_token_id if tok.pad_token_id is not None else 0
            unknown = tok.unk_token_id if tok.unk_token_id is not None else pad
            self._specials = (np.asarray(full[:cut], np.int32),
                              np.asarray(full[cut + len(plain):], np.int32), pad, unknown)
        return self._specials

    @property
    def budget(self) -> int:
        """Subtokens of words a row holds beside the special tokens."""
        prefix, suffix, _, _ = self._special_tokens()
        budget = self.subtoken_limit - len(prefix) - len(suffix)
        if budget < 1:
            raise ConfigurationError(f"max_sequence_length={self.max_sequence_length} leaves no "
                                     "room for words beside the special tokens")
        return budget

    # -- corpus -------------------------------------------------------------------------------
    def word_subtokens(self, words):
        """Subtoken ids of each distinct word, as the tokenizer splits it among pre-split words.

        A word the tokenizer makes nothing of (a zero-width space) is the unknown token, and a
        word longer than a row is cut to its first subtokens: every word keeps its place.
        """
        _, _, _, unknown = self._special_tokens()
        budget = self.budget
        encoded = self.tokenizer([[w] for w in words], is_split_into_words=True,
                                 add_special_tokens=False)["input_ids"] if words else []
        return [np.asarray(ids[:budget] if ids else [unknown], dtype=np.int32) for ids in encoded]

    def encode(self, x, features=None, window_size=None, window_stride=None):
        """Encode token sequences into rows that fit the encoder (``window_size`` is not used:
        rows are windows of at most :attr:`subtoken_limit` subtokens, at training and tagging,
        ``window_stride`` subtokens apart, by default the model's own)."""
        token_index, token_ids = intern_tokens(x)
        pieces = [np.zeros(0, np.int32)] + self.word_subtokens(list(token_index))
        counts = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=len(pieces))
        budget = self.budget
        stride = self.window_stride if window_stride is None else window_stride
        flats, starts, spans, widths = [], [], [], []
        windowed = 0
        for s, ids in enumerate(token_ids):
            word_counts = counts[ids]
            starts.append(np.concatenate([[0], np.cumsum(word_counts)]).astype(np.int32))
            flats.append(np.concatenate([pieces[i] for i in ids]) if len(ids) else
                         np.zeros(0, np.int32))
            rows = subtoken_windows(word_counts, budget, stride)
            windowed += len(rows) > 1
            for start, end, keep_from, keep_to in rows:
                spans.append((s, start, end - start, keep_from, keep_to))
                widths.append(starts[-1][end] - starts[-1][start])
        if windowed:
            logger.info("%d sequences longer than %d subtokens are cut into overlapping windows "
                        "(no word dropped)", windowed, self.subtoken_limit)
        lengths = sequence_lengths(x)
        data = {"subtokens": flats, "word_offsets": starts}
        if self.uses_chars:
            data.update(token_ids=token_ids, **self.char_data(token_index))
        data.update(self.features_data(features))
        prefix, suffix, _, _ = self._special_tokens()
        widths = np.asarray(widths, dtype=np.int64) + len(prefix) + len(suffix)
        return EncodedCorpus(lengths, *window_table(spans), data, row_width=widths)

    def padded_batch(self, corpus, rows, label_ids=None, width=None):
        prefix, suffix, pad, _ = self._special_tokens()
        rows = np.asarray(rows)
        lengths = corpus.row_length[rows].astype(np.int32)
        width = batch_width(corpus, rows) if width is None else width
        size = int(corpus.row_width[rows].max()) if len(rows) else len(prefix) + len(suffix)
        input_ids = np.full((len(rows), size), pad, dtype=np.int32)
        padding_mask = np.zeros((len(rows), size), dtype=np.int32)
        word_starts = np.zeros((len(rows), width), dtype=np.int32)
        for i, r in enumerate(rows):
            s = corpus.row_sequence[r]
            first, n = corpus.row_offset[r], corpus.row_length[r]
            offsets = corpus.data["word_offsets"][s]
            a, b = offsets[first], offsets[first + n]
            row = np.concatenate([prefix, corpus.data["subtokens"][s][a:b], suffix])
            input_ids[i, :len(row)] = row
            padding_mask[i, :len(row)] = 1
            word_starts[i, :n] = offsets[first:first + n] - a + len(prefix)
        batch = {"input_ids": input_ids, "token_type_ids": np.zeros_like(input_ids),
                 "padding_mask": padding_mask, "word_starts": word_starts, "lengths": lengths}
        if self.uses_chars:
            batch["chars"] = self.chars_of(corpus, self.token_matrix(corpus, rows, width))
        return self.add_features_and_labels(batch, corpus, rows, width, label_ids)

    def batch_signature(self, with_labels):
        import tensorflow as tf

        matrix = tf.TensorSpec([None, None], tf.int32)
        return dict(self.common_signature(with_labels), input_ids=matrix, token_type_ids=matrix,
                    padding_mask=matrix, word_starts=matrix)

    # -- persistence --------------------------------------------------------------------------
    def to_dict(self):
        return dict(super().to_dict(), transformer_name=self.transformer_name,
                    model_type=self.model_type, max_sequence_length=self.max_sequence_length,
                    window_stride=self.window_stride, use_chars=self.uses_chars)

    @classmethod
    def from_dict(cls, values):
        p = cls(None, values.get("max_sequence_length"), values.get("window_stride"),
                bool(values.get("use_chars")), values.get("max_char_length", 30),
                values.get("features_indices"))
        p.transformer_name = values.get("transformer_name")
        return p.restore_vocabularies(values)

    def save_resources(self, model_dir):
        """Write the encoder's config.json and the tokenizer files to ``model_dir/transformer``."""
        write_model_resources(model_dir, self.encoder_config, self.tokenizer)

    def load_resources(self, model_dir):
        """Use the encoder config and tokenizer saved in ``model_dir`` (not the checkpoint)."""
        path = model_resources_dir(model_dir)
        self.transformer_dir = path
        self.load_encoder_weights = False
        self._config = read_encoder_config(path)
        self._tokenizer = self._specials = None
        self.tokenizer  # noqa: B018 - fail now, with the path, not at the first batch
