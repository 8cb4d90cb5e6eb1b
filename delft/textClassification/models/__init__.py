"""DeLFT's eleven text-classification architectures by name, and the one function that builds them.

>>> from delft.textClassification.config import ModelConfig
>>> config = ModelConfig(architecture="gru_simple", list_classes=["a", "b"], maxlen=6,
...                      vocab_size=20, word_embedding_size=4, recurrent_units=3)
>>> model = build_classifier(config, "word_ids")
>>> import numpy as np
>>> tuple(model({"word_ids": np.ones((2, 6), "int32")}).shape), model.output_activation
((2, 2), 'sigmoid')
"""
from dataclasses import dataclass

import numpy as np

from delft.training.batching import LENGTH_GROUPS
from delft.utilities.errors import ConfigurationError


@dataclass(frozen=True)
class Architecture:
    """An architecture's name and family: ``"rnn"`` (:mod:`.rnn`), ``"cnn"`` (:mod:`.cnn`) or
    ``"transformer"`` (:mod:`.bert`)."""

    name: str
    family: str

    @property
    def uses_transformer(self) -> bool:
        """Whether a keras-hub transformer reads the text (bert), from token ids."""
        return self.family == "transformer"

    @property
    def length_groups(self) -> int:
        """The length groups of its training batches: a transformer's rows are as long as their
        texts, each replica's slice is padded in groups of similar length as the sequence
        labeller's; word rows are all maxlen long (one group)."""
        return LENGTH_GROUPS if self.uses_transformer else 1

    @property
    def output_activation(self) -> str:
        """softmax for bert (DeLFT 0.4.6's), sigmoid per class for the others (DeLFT's)."""
        return "softmax" if self.uses_transformer else "sigmoid"


# DeLFT's order (its ``architectures`` list)
_FAMILIES = {"lstm": "rnn", "bidLstm_simple": "rnn", "cnn": "cnn", "cnn2": "cnn", "cnn3": "cnn",
             "gru_lstm": "rnn", "lstm_cnn": "cnn", "dpcnn": "cnn", "gru": "rnn",
             "gru_simple": "rnn", "bert": "transformer"}
ARCHITECTURES = {name: Architecture(name, family) for name, family in _FAMILIES.items()}


def architecture(name: str) -> Architecture:
    """The architecture ``name``; a one-line error naming the known ones.

    >>> architecture("gru").family, architecture("bert").uses_transformer
    ('rnn', True)
    """
    if name not in ARCHITECTURES:
        raise ConfigurationError(f"unknown architecture {name!r}; known: "
                                 f"{', '.join(sorted(ARCHITECTURES))}")
    return ARCHITECTURES[name]


def build_classifier(model_config, inputs, transformer_dir=None, pretrained=True):
    """Build (not train) the classifier ``model_config.architecture`` reading ``inputs``
    (``"word_ids"``, ``"word_vectors"`` or ``"transformer"``, bert's and only bert's), with its
    weights created; call inside ``strategy.scope()``.

    ``"word_ids"`` needs ``model_config.vocab_size``; ``"word_vectors"`` are
    ``model_config.word_embedding_size`` wide. bert's encoder comes from the checkpoint folder
    ``transformer_dir`` (default: the one ``model_config.transformer_name`` stands for), its
    weights included, or with ``pretrained=False`` from its ``config.json`` alone (a saved
    classifier's ``transformer/`` copy, a rebuild: the weights come next); the other
    architectures ignore both. One-line :class:`ConfigurationError` for what cannot work.
    """
    # imported here: looking up an architecture (a command's options) must not start TensorFlow
    from delft.textClassification.models.base import (INPUTS, TRANSFORMER, WORD_IDS,
                                                      WORD_VECTORS, TextClassifier)
    from delft.textClassification.models.cnn import cnn_encoder
    from delft.textClassification.models.rnn import rnn_encoder

    parts = architecture(model_config.architecture)
    if inputs not in INPUTS:
        raise ConfigurationError(f"unknown classifier inputs {inputs!r}; known: "
                                 f"{', '.join(INPUTS)}")
    if parts.uses_transformer != (inputs == TRANSFORMER):
        wanted = TRANSFORMER if parts.uses_transformer else f"{WORD_IDS} or {WORD_VECTORS}"
        raise ConfigurationError(f"{parts.name} reads {wanted}, not {inputs}")
    if inputs == WORD_IDS and not model_config.vocab_size:
        raise ConfigurationError(f"{parts.name} over learned word embeddings needs vocab_size")
    if not model_config.list_classes:
        raise ConfigurationError(f"{parts.name}: no classes (list_classes is empty)")
    if parts.family == "rnn":
        encoder = rnn_encoder(parts.name, model_config)
    elif parts.family == "cnn":
        encoder = cnn_encoder(parts.name, model_config)
    else:
        from delft.textClassification.models.bert import transformer_encoder

        encoder = transformer_encoder(model_config, transformer_dir, pretrained)
    if model_config.maxlen < encoder.min_length():
        raise ConfigurationError(f"{parts.name} needs maxlen >= {encoder.min_length()} (its "
                                 f"poolings and convolutions), not {model_config.maxlen}")
    learned = inputs == WORD_IDS
    model = TextClassifier(len(model_config.list_classes), encoder, inputs=inputs,
                           vocab_size=model_config.vocab_size if learned else None,
                           word_embedding_size=model_config.word_embedding_size if learned
                           else None,
                           output_activation=parts.output_activation, name=parts.name)
    model(building_batch(model_config, inputs, max(2, encoder.min_length())))
    return model


def building_batch(model_config, inputs, width):
    """A batch of one row of zeros ``width`` positions wide, enough to create a model's weights
    (none depends on the width: the fewest positions every step takes keep the build short)."""
    from delft.textClassification.models.base import WORD_IDS, WORD_VECTORS

    if inputs == WORD_IDS:
        return {WORD_IDS: np.zeros((1, width), np.int32)}
    if inputs == WORD_VECTORS:
        return {WORD_VECTORS: np.zeros((1, width, model_config.word_embedding_size), np.float32)}
    ids = np.zeros((1, width), np.int32)
    return {"token_ids": ids, "padding_mask": ids + 1, "segment_ids": ids}
