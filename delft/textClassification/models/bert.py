"""DeLFT's bert classifier: a keras-hub encoder (BERT, DistilBERT, RoBERTa and the other families
of :mod:`delft.sequenceLabelling.transformers.encoder`), the hidden state of its first position
([CLS] / ``<s>``), dropout 0.1, then the softmax output layer.

The first position's hidden state, not BERT's pooler, is DeLFT 1.2.0's choice (0.4.6 read the
pooler, which DistilBERT and RoBERTa checkpoints saved without a head do not have); the softmax
and the attention mask are 0.4.6's and 1.2.0's respectively.
"""
import keras
import tensorflow as tf

from delft.sequenceLabelling.transformers.checkpoint import (check_checkpoint,
                                                             encoder_positions,
                                                             read_encoder_config,
                                                             resolve_transformer)
from delft.utilities.errors import ConfigurationError

HEAD_DROPOUT = 0.1


@keras.saving.register_keras_serializable(package="delft")
class FirstTokenEncoder(keras.layers.Layer):
    """``token_ids``, ``padding_mask`` (and ``segment_ids``, for the encoders that read them)
    [batch, maxlen] -> the encoder's last hidden state at position 0, after dropout
    [batch, hidden].

    The encoder is built from ``encoder_config`` (a Hugging Face ``config.json``, as a dict) by
    :func:`~delft.sequenceLabelling.transformers.encoder.load_encoder`, with the checkpoint's
    weights when ``checkpoint_dir`` is given; its config is the layer's (``get_config``), so a
    saved classifier rebuilds it without the checkpoint and then reads its own weights.

    >>> import numpy as np
    >>> from delft.sequenceLabelling.transformers.checkpoint import read_encoder_config
    >>> path = tiny_checkpoint("distilbert")
    >>> layer = FirstTokenEncoder(read_encoder_config(path), checkpoint_dir=path)
    >>> ids = np.array([[2, 40, 41, 3]], "int32")
    >>> tuple(layer({"token_ids": ids, "padding_mask": ids > 0, "segment_ids": 0 * ids}).shape)
    (1, 32)
    """

    def __init__(self, encoder_config, dropout=HEAD_DROPOUT, checkpoint_dir=None, **kwargs):
        super().__init__(**kwargs)
        from delft.sequenceLabelling.transformers.encoder import ENCODERS, load_encoder

        self.encoder_config = dict(encoder_config)
        self.dropout = dropout
        self.uses_segments = ENCODERS[self.encoder_config["model_type"]].uses_segments
        self.encoder = load_encoder(checkpoint_dir or "encoder_config", self.encoder_config,
                                    load_weights=checkpoint_dir is not None)
        self.head_dropout = keras.layers.Dropout(dropout)

    def call(self, inputs, training=False):
        feed = {"token_ids": inputs["token_ids"], "padding_mask": inputs["padding_mask"]}
        if self.uses_segments:
            feed["segment_ids"] = inputs["segment_ids"]
        states = self.encoder(feed, training=training)
        states = states["sequence_output"] if isinstance(states, dict) else states
        return self.head_dropout(tf.cast(states[:, 0], tf.float32), training=training)

    def min_length(self):
        return 1

    def get_config(self):
        return dict(super().get_config(), encoder_config=self.encoder_config,
                    dropout=self.dropout)


def transformer_encoder(model_config, transformer_dir=None, pretrained=True):
    """The bert encoder of ``model_config``, built from the checkpoint folder ``transformer_dir``
    (default: the one ``model_config.transformer_name`` stands for) with its weights, or with
    ``pretrained=False`` from its ``config.json`` alone (a saved classifier's ``transformer/``
    copy, or a rebuild: the weights come next).

    Raises ConfigurationError when ``model_config.maxlen`` exceeds the encoder's positions.
    """
    path = transformer_dir or resolve_transformer(model_config.transformer_name)
    config = check_checkpoint(path) if pretrained else read_encoder_config(path)
    positions = encoder_positions(config)
    if model_config.maxlen > positions:
        raise ConfigurationError(f"bert: maxlen {model_config.maxlen} exceeds the {positions} "
                                 f"positions of the encoder {path}")
    return FirstTokenEncoder(config, checkpoint_dir=path if pretrained else None, name="encoder")
