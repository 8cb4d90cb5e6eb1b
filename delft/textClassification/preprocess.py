"""Texts to a classifier's inputs, as DeLFT makes them.

A text is cleaned and tokenised as DeLFT does (:mod:`delft.textClassification.cleaning`); its last
``maxlen`` tokens are kept and post-padded to ``maxlen``. Every row of word inputs is ``maxlen``
wide: DeLFT's models read the padding (no mask), so a text is classified the same way in any
batch. Transformer rows are padded per batch, to the batch's longest text only: the attention mask
hides the padding, so a text's probabilities do not depend on it (within float32 rounding), and a
batch of short texts costs what they hold (citation sentences: 56 subtokens on average, maxlen
150). The tokens become, by the model's inputs:

- ``word_ids``: ids in a vocabulary learned from the training texts (DeLFT 1.2.0 without
  pre-trained vectors): ``<PAD>`` 0, ``<UNK>`` 1, then every token of the training texts by
  decreasing count (ties in the order first seen);
- ``word_vectors``: pre-trained vectors (``embeddings``, set by the ``Classifier``), looked up
  once per distinct token of a corpus; unknown tokens and padding are zero vectors;
- ``transformer``: the raw text (no cleaning, as DeLFT 1.2.0) through the checkpoint's tokenizer,
  its first ``maxlen`` subtokens with the special ones; a row's length is their count.

>>> p = TextPreprocessor(maxlen=4, list_classes=["a", "b"])
>>> p.fit(["the cat", "the dog"]).vocabulary
['<PAD>', '<UNK>', 'the', 'cat', 'dog']
>>> p.padded_batch(p.encode(["a dog, the end"]), np.array([0]))["word_ids"].tolist()
[[4, 1, 2, 1]]
"""
import collections
from dataclasses import dataclass

import numpy as np

# clean_text at DeLFT's import path (delft.textClassification.preprocess)
from delft.textClassification.cleaning import clean_text, text_tokens  # noqa: F401
from delft.training.batching import batch_width
from delft.utilities.errors import ModelLoadError

PAD, UNKNOWN = "<PAD>", "<UNK>"
PAD_ID, UNKNOWN_ID = 0, 1
INPUTS = ("word_ids", "word_vectors", "transformer")


@dataclass
class TextCorpus:
    """Encoded texts, one row each: ``data`` holds the matrices the batches are cut from (each
    ``maxlen`` wide), ``row_length`` how much of a row a batch must keep."""

    row_length: np.ndarray
    data: dict
    read_width = None  # the shared feeder's DeLFT read widths: none here

    @property
    def num_rows(self):
        return len(self.row_length)


class TextPreprocessor:
    """What turns texts into a classifier's batches, and is saved with it
    (``preprocessor.json``)."""

    kind = "text"

    def __init__(self, maxlen, list_classes, inputs="word_ids", vocabulary=None):
        if inputs not in INPUTS:
            raise ValueError(f"inputs must be one of {', '.join(INPUTS)}, not {inputs!r}")
        self.maxlen = int(maxlen)
        self.list_classes = list(list_classes)
        self.inputs = inputs
        self.vocabulary = list(vocabulary) if vocabulary is not None else None
        self._word_ids = None
        self.embeddings = None  # word_vectors: opened by the Classifier, named in config.json
        self.tokenizer = None  # transformer: the checkpoint's, or the model folder's copy

    # -- vocabulary ---------------------------------------------------------------------------
    def fit(self, texts):
        """Learn the vocabulary of ``texts`` (``word_ids`` inputs); returns self."""
        counts = collections.Counter()
        for text in texts:
            counts.update(text_tokens(text))
        # sorted() is stable and a Counter keeps first-seen order: ties stay in that order
        self.vocabulary = [PAD, UNKNOWN] + sorted(counts, key=counts.__getitem__, reverse=True)
        self._word_ids = None
        return self

    @property
    def word_ids(self):
        if self._word_ids is None:
            self._word_ids = {word: i for i, word in enumerate(self.vocabulary)}
        return self._word_ids

    # -- texts to rows ------------------------------------------------------------------------
    def encode(self, texts) -> TextCorpus:
        """The rows of ``texts`` (a list of str): word rows ``maxlen`` long, transformer rows as
        long as their subtokens."""
        texts = list(texts)
        if self.inputs == "transformer":
            data = self._subtokens(texts)
            return TextCorpus(data["padding_mask"].sum(axis=1, dtype=np.int64), data)
        tokens = [text_tokens(text)[-self.maxlen:] for text in texts]
        data = self._word_ids_of(tokens) if self.inputs == "word_ids" else \
            self._vectors_of(tokens)
        return TextCorpus(np.full(len(texts), self.maxlen, dtype=np.int64), data)

    def _word_ids_of(self, tokens):
        ids = np.full((len(tokens), self.maxlen), PAD_ID, dtype=np.int32)
        index = self.word_ids
        for row, words in enumerate(tokens):
            ids[row, :len(words)] = [index.get(word, UNKNOWN_ID) for word in words]
        return {"word_ids": ids}

    def _vectors_of(self, tokens):
        distinct = {}
        rows = np.zeros((len(tokens), self.maxlen), dtype=np.int32)  # 0: the zero vector
        for row, words in enumerate(tokens):
            rows[row, :len(words)] = [distinct.setdefault(word, len(distinct) + 1)
                                      for word in words]
        table = np.zeros((len(distinct) + 1, self.embeddings.embed_size), dtype=np.float32)
        if distinct:
            # the tokens hold no digit (cleaning removed them): nothing to normalise
            table[1:] = self.embeddings.get_word_vectors(list(distinct), normalize_digits=False)
        return {"token_rows": rows, "vector_table": table}

    def _subtokens(self, texts):
        encoded = self.tokenizer(texts, max_length=self.maxlen, padding="max_length",
                                 truncation=True, return_tensors="np")
        ids = encoded["input_ids"].astype(np.int32)
        segments = encoded.get("token_type_ids")
        return {"token_ids": ids,
                "padding_mask": encoded["attention_mask"].astype(np.int32),
                "segment_ids": np.zeros_like(ids) if segments is None else
                segments.astype(np.int32)}

    def label_rows(self, one_hot, class_weights=None):
        """What training batches take of the labels: the one-hot rows and each row's weight in
        the loss (``class_weights``: class index -> weight, that of the row's class)."""
        one_hot = np.asarray(one_hot, dtype=np.float32)
        weights = np.ones(len(one_hot), dtype=np.float32)
        if class_weights:
            table = np.array([class_weights.get(c, 1.0) for c in range(one_hot.shape[1])],
                             dtype=np.float32)
            weights = table[one_hot.argmax(axis=1)]
        return {"labels": one_hot, "example_weights": weights}

    # -- batches ------------------------------------------------------------------------------
    def batch_signature(self, with_labels):
        import tensorflow as tf

        width = None if self.inputs == "transformer" else self.maxlen
        if self.inputs == "word_ids":
            signature = {"word_ids": tf.TensorSpec([None, width], tf.int32)}
        elif self.inputs == "word_vectors":
            signature = {"word_vectors": tf.TensorSpec(
                [None, width, self.embeddings.embed_size], tf.float32)}
        else:
            signature = {key: tf.TensorSpec([None, width], tf.int32)
                         for key in ("token_ids", "padding_mask", "segment_ids")}
        if with_labels:
            signature["labels"] = tf.TensorSpec([None, len(self.list_classes)], tf.float32)
            signature["example_weights"] = tf.TensorSpec([None], tf.float32)
        return signature

    def padded_batch(self, corpus, rows, label_ids=None, width=None):
        """The batch of ``rows``: transformer rows ``width`` wide (default: their longest), word
        rows ``maxlen`` wide; ``label_ids``: :meth:`label_rows` of the corpus."""
        data = corpus.data
        if self.inputs == "word_vectors":
            batch = {"word_vectors": data["vector_table"][data["token_rows"][rows]]}
        elif self.inputs == "word_ids":
            batch = {"word_ids": data["word_ids"][rows]}
        else:
            width = batch_width(corpus, rows) if width is None else width
            batch = {key: data[key][rows, :width]
                     for key in ("token_ids", "padding_mask", "segment_ids")}
        if label_ids is not None:
            batch["labels"] = label_ids["labels"][rows]
            batch["example_weights"] = label_ids["example_weights"][rows]
        return batch

    # -- persistence --------------------------------------------------------------------------
    def to_dict(self):
        return {"kind": self.kind, "inputs": self.inputs, "maxlen": self.maxlen,
                "list_classes": self.list_classes, "vocabulary": self.vocabulary}

    @classmethod
    def from_dict(cls, values, source="preprocessor.json"):
        """The preprocessor of a saved ``preprocessor.json``, its values checked (one line naming
        ``source`` and the field)."""
        try:
            preprocessor = cls(values["maxlen"], values["list_classes"], values["inputs"],
                               values.get("vocabulary"))
        except (KeyError, TypeError, ValueError) as error:
            raise ModelLoadError(f"{source}: not a classifier's preprocessor ({error})") from None
        vocabulary = preprocessor.vocabulary
        if preprocessor.maxlen < 1:
            raise ModelLoadError(f"{source}: maxlen must be a positive integer")
        if preprocessor.inputs == "word_ids" and not (
                isinstance(vocabulary, list) and vocabulary[:2] == [PAD, UNKNOWN]
                and all(isinstance(w, str) for w in vocabulary)
                and len(set(vocabulary)) == len(vocabulary)):
            raise ModelLoadError(f"{source}: vocabulary must be distinct words after {PAD} and "
                                 f"{UNKNOWN}")
        return preprocessor
