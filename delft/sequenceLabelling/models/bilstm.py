"""The BiLSTM family as DeLFT builds it: per-word vectors -> word BiLSTM -> dense -> CRF or softmax.

A word's vector is the concatenation of its static word vector (optional), its characters
encoded by a char BiLSTM (or, for the CNN architectures, a char CNN), its casing class embedded
(BidLSTM_CNN, BidLSTM_CRF_CASING) and its categorical feature columns (the FEATURES
architectures), their embeddings concatenated or, with ``features_encoder="lstm"``, encoded by
DeLFT's small BiLSTM over the columns (:class:`FeatureEncoder` says why the concatenation is the
default). The casing and BiLSTM feature encodings get a dropout of their own before the
concatenation, as in DeLFT.

Two differences from DeLFT, both deliberate: every model, softmax ones included, has the dense
tanh layer before the potentials (DeLFT's BidLSTM and BidLSTM_CNN project the BiLSTM states
directly); and padded positions never take part, in every architecture (DeLFT 1.2's ChainCRF
models run their LSTMs and CRF over the padding, so a text's labels depend on the longest text
of its batch). A model loaded from a DeLFT folder keeps DeLFT's computation: its
preprocessor's ``reads_padding`` (ChainCRF) makes the batches whole-width, and its
``reads_char_padding`` (ChainCRF, char CNN) makes the char encoder read the padding
(delft/sequenceLabelling/foreign/).
"""
import keras
import tensorflow as tf

from delft.sequenceLabelling.casing import CASING_CLASSES
from delft.sequenceLabelling.layers.bilstm import BiLSTM
from delft.sequenceLabelling.layers.char_cnn import CharCNN
from delft.sequenceLabelling.layers.char_encoder import CharEncoder
from delft.sequenceLabelling.layers.feature_encoder import FeatureEncoder
from delft.sequenceLabelling.models.base import SequenceLabeller

CASING_EMBEDDING_SIZE = 5  # DeLFT's case_embedding_size
CHAR_CNN_FILTERS = 30  # DeLFT's CharacterCNNEncoder


class BidLSTM(SequenceLabeller):
    """Lample et al. 2016: static word vectors (optional) and characters (and optional casing
    and categorical features) through BiLSTMs; char-only when no embeddings are given.

    Word vectors arrive in the batch (``word_vectors`` [batch, words, word_embedding_size]): the
    preprocessor looks them up in the whole embedding vocabulary, as GROBID's Java engine does for
    the exported encoder, so the model holds no embedding matrix.

    With ``use_crf=True`` this is DeLFT's BidLSTM_CRF, with features BidLSTM_CRF_FEATURES, with
    casing BidLSTM_CRF_CASING, with ``char_encoder="cnn"`` BidLSTM_CNN_CRF; with
    ``use_crf=False`` the softmax BidLSTM (BidLSTM_CNN with the char CNN and casing).

    >>> import numpy as np
    >>> model = BidLSTM(num_labels=3, char_vocab_size=10)
    >>> batch = {"chars": np.ones((2, 4, 3), "int32"), "lengths": np.array([4, 2], "int32")}
    >>> tuple(model(batch).shape)
    (2, 4, 3)
    """

    def __init__(self, num_labels, char_vocab_size, char_emb_size=25, char_lstm_units=25,
                 word_lstm_units=100, dropout=0.5, recurrent_dropout=0.25,
                 feature_vocab_sizes=(), features_embedding_size=4, features_lstm_units=4,
                 features_encoder="concat",
                 word_embedding_size=0, char_encoder="lstm", casing=False, use_crf=True,
                 reads_char_padding=False, **kwargs):
        super().__init__(num_labels, use_crf=use_crf, **kwargs)
        self.word_lstm_units = word_lstm_units
        self.dropout = dropout
        self.recurrent_dropout = recurrent_dropout
        self.word_embedding_size = word_embedding_size
        if char_encoder == "cnn":
            self.char_encoder = CharCNN(char_vocab_size, char_emb_size, CHAR_CNN_FILTERS,
                                        reads_padding=reads_char_padding, name="char_encoder")
        else:
            self.char_encoder = CharEncoder(char_vocab_size, char_emb_size, char_lstm_units,
                                            reads_padding=reads_char_padding,
                                            name="char_encoder")
        # N(0, 1) as torch's nn.Embedding (see CharEncoder); trainable, as in DeLFT 1.2
        self.casing_embedding = keras.layers.Embedding(
            len(CASING_CLASSES), CASING_EMBEDDING_SIZE, name="casing_embedding",
            embeddings_initializer=keras.initializers.RandomNormal(stddev=1.0)) if casing else None
        self.feature_encoder = (FeatureEncoder(feature_vocab_sizes, features_embedding_size,
                                               features_lstm_units, features_encoder,
                                               name="feature_encoder")
                                if len(feature_vocab_sizes) else None)
        self.part_dropout = keras.layers.Dropout(dropout)
        # dropout before and after the word encoder, not also inside it on the same inputs
        self.input_dropout = keras.layers.Dropout(dropout)
        self.make_word_encoder()
        self.output_dropout = keras.layers.Dropout(dropout)
        self.dense = keras.layers.Dense(word_lstm_units, activation="tanh", name="dense")
        self.potentials_layer = keras.layers.Dense(num_labels, name="potentials")

    def make_word_encoder(self):
        """The layers that read the sequence of word vectors (here one BiLSTM)."""
        self.word_lstm = BiLSTM(self.word_lstm_units, return_sequences=True,
                                recurrent_dropout=self.recurrent_dropout, name="word_lstm")

    def encode_words(self, x, lengths, training=False):
        """[batch, words, features] -> [batch, words, 2 * word_lstm_units], dropout included."""
        x = self.word_lstm(x, lengths, training=training)
        return self.output_dropout(x, training=training)

    def word_vectors(self, batch, training=False):
        """Each word's input vector: [word vector] + characters [+ casing] [+ features]."""
        parts = [self.char_encoder(batch["chars"])]
        if self.word_embedding_size:
            parts.insert(0, tf.cast(batch["word_vectors"], parts[0].dtype))
        if self.casing_embedding is not None:
            parts.append(self.part_dropout(self.casing_embedding(batch["casing"]),
                                           training=training))
        if self.feature_encoder is not None and self.feature_encoder.encoder == "concat":
            parts.append(self.feature_encoder(batch["features"]))
        elif self.feature_encoder is not None:
            parts.append(self.part_dropout(self.feature_encoder(batch["features"]),
                                           training=training))
        return parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)

    def word_potentials(self, batch, training=False):
        x = self.input_dropout(self.word_vectors(batch, training=training), training=training)
        x = self.encode_words(x, batch["lengths"], training=training)
        return self.potentials_layer(self.dense(x))


def rnn_options(model_config, preprocessor, parts):
    """The constructor arguments of an RNN-family model for ``model_config`` and ``parts``."""
    return dict(num_labels=preprocessor.num_labels,
                char_vocab_size=preprocessor.char_vocab_size,
                char_emb_size=model_config.char_emb_size,
                char_lstm_units=model_config.char_lstm_units,
                word_lstm_units=model_config.word_lstm_units,
                dropout=model_config.dropout,
                recurrent_dropout=model_config.recurrent_dropout,
                feature_vocab_sizes=preprocessor.feature_vocab_sizes if parts.features else (),
                features_embedding_size=model_config.features_embedding_size,
                features_lstm_units=model_config.features_lstm_units,
                features_encoder=model_config.features_encoder,
                word_embedding_size=model_config.word_embedding_size,
                char_encoder=parts.char_encoder, casing=parts.casing, use_crf=parts.crf,
                reads_char_padding=preprocessor.reads_char_padding,
                name=model_config.architecture)


def build_bilstm(model_config, preprocessor, parts):
    """The BiLSTM model of ``model_config``; ``parts`` says its CRF, chars, casing, features."""
    return BidLSTM(**rnn_options(model_config, preprocessor, parts))
