"""The BiLSTM family as DeLFT builds it: char BiLSTM (+ features) -> word BiLSTM -> dense -> CRF."""
import keras
import tensorflow as tf

from delft.sequenceLabelling.layers.bilstm import BiLSTM
from delft.sequenceLabelling.layers.char_encoder import CharEncoder
from delft.sequenceLabelling.layers.feature_encoder import FeatureEncoder
from delft.sequenceLabelling.models.base import SequenceLabeller


class BidLSTM(SequenceLabeller):
    """Lample et al. 2016: static word vectors (optional) and characters (and optional
    categorical features) through BiLSTMs; char-only when no embeddings are given.

    Word vectors arrive in the batch (``word_vectors`` [batch, words, word_embedding_size]): the
    preprocessor looks them up in the whole embedding vocabulary, as GROBID's Java engine does for
    the exported encoder, so the model holds no embedding matrix.

    With ``use_crf=True`` this is DeLFT's BidLSTM_CRF, with features BidLSTM_CRF_FEATURES; with
    ``use_crf=False`` the softmax BidLSTM.

    >>> import numpy as np
    >>> model = BidLSTM(num_labels=3, char_vocab_size=10)
    >>> batch = {"chars": np.ones((2, 4, 3), "int32"), "lengths": np.array([4, 2], "int32")}
    >>> tuple(model(batch).shape)
    (2, 4, 3)
    """

    def __init__(self, num_labels, char_vocab_size, char_emb_size=25, char_lstm_units=25,
                 word_lstm_units=100, dropout=0.5, recurrent_dropout=0.25,
                 feature_vocab_sizes=(), features_embedding_size=4, word_embedding_size=0,
                 use_crf=True, **kwargs):
        super().__init__(num_labels, use_crf=use_crf, **kwargs)
        self.char_vocab_size = char_vocab_size
        self.char_emb_size = char_emb_size
        self.char_lstm_units = char_lstm_units
        self.word_lstm_units = word_lstm_units
        self.dropout = dropout
        self.recurrent_dropout = recurrent_dropout
        self.feature_vocab_sizes = list(feature_vocab_sizes)
        self.features_embedding_size = features_embedding_size
        self.word_embedding_size = word_embedding_size
        self.char_encoder = CharEncoder(char_vocab_size, char_emb_size, char_lstm_units,
                                        name="char_encoder")
        self.feature_encoder = (FeatureEncoder(self.feature_vocab_sizes, features_embedding_size,
                                               name="feature_encoder")
                                if self.feature_vocab_sizes else None)
        # dropout before and after the word BiLSTM, not also inside it on the same inputs
        self.input_dropout = keras.layers.Dropout(dropout)
        self.word_lstm = BiLSTM(word_lstm_units, return_sequences=True,
                                recurrent_dropout=recurrent_dropout, name="word_lstm")
        self.output_dropout = keras.layers.Dropout(dropout)
        self.dense = keras.layers.Dense(word_lstm_units, activation="tanh", name="dense")
        self.potentials_layer = keras.layers.Dense(num_labels, name="potentials")

    def word_potentials(self, batch, training=False):
        chars = batch["chars"]
        parts = [self.char_encoder(chars)]
        if self.word_embedding_size:
            parts.insert(0, tf.cast(batch["word_vectors"], parts[0].dtype))
        if self.feature_encoder is not None:
            parts.append(self.feature_encoder(batch["features"]))
        x = parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)
        x = self.input_dropout(x, training=training)
        x = self.word_lstm(x, batch["lengths"], training=training)
        x = self.output_dropout(x, training=training)
        return self.potentials_layer(self.dense(x))


def build_bilstm(model_config, preprocessor, parts):
    """The RNN model of ``model_config``; ``parts`` says its CRF and feature columns."""
    return BidLSTM(num_labels=preprocessor.num_labels,
                   char_vocab_size=preprocessor.char_vocab_size,
                   char_emb_size=model_config.char_emb_size,
                   char_lstm_units=model_config.char_lstm_units,
                   word_lstm_units=model_config.word_lstm_units,
                   dropout=model_config.dropout,
                   recurrent_dropout=model_config.recurrent_dropout,
                   feature_vocab_sizes=preprocessor.feature_vocab_sizes if parts.features else (),
                   features_embedding_size=model_config.features_embedding_size,
                   word_embedding_size=model_config.word_embedding_size,
                   use_crf=parts.crf, name=model_config.architecture)
