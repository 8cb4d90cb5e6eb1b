"""Categorical feature columns (GROBID layout features) to one vector per token."""
import keras
import tensorflow as tf

from delft.sequenceLabelling.layers.bilstm import BiLSTM


@keras.saving.register_keras_serializable(package="delft")
class FeatureEncoder(keras.layers.Layer):
    """Encode ``features`` [batch, words, F] (per-column ids, 0 = padding), one vector per token.

    ``encoder="concat"`` (the default): each column's value is embedded and the F embeddings are
    concatenated, [batch, words, F * embedding_size]. ``encoder="lstm"``: as DeLFT's
    BidLSTM_CRF_FEATURES, a small BiLSTM reads the F embeddings of a token as a sequence and its
    final forward and backward states are the token's encoding, [batch, words, 2 * lstm_units].
    The concatenation is the default by measurement (``benchmarks/features.py``, doc/usage.md):
    on name-header, name-citation and affiliation-address it scored as well or better, in less
    time.

    Columns share one embedding table, each with its own id range, so one lookup serves all. The
    BiLSTM runs on the distinct feature rows of the batch only (layout features repeat: a batch of
    name-header has a few dozen distinct rows among thousands of tokens), then results are
    gathered back, as :class:`~delft.sequenceLabelling.layers.char_encoder.CharEncoder` does.

    >>> features = tf.constant([[[2, 3], [2, 3], [0, 0]]])
    >>> tuple(FeatureEncoder(vocab_sizes=[3, 4], embedding_size=2)(features).shape)
    (1, 3, 4)
    >>> tuple(FeatureEncoder([3, 4], embedding_size=2, lstm_units=3, encoder="lstm")(features).shape)
    (1, 3, 6)
    """

    ENCODERS = ("concat", "lstm")

    def __init__(self, vocab_sizes, embedding_size=4, lstm_units=4, encoder="concat", **kwargs):
        super().__init__(**kwargs)
        self.vocab_sizes = list(vocab_sizes)
        self.embedding_size = embedding_size
        self.lstm_units = lstm_units
        offsets = [0]
        for size in self.vocab_sizes[:-1]:
            offsets.append(offsets[-1] + size)
        self.offsets = tf.constant(offsets, tf.int32)
        if encoder not in self.ENCODERS:
            raise ValueError(f"encoder must be one of {', '.join(self.ENCODERS)}, not {encoder!r}")
        self.encoder = encoder
        # N(0, 1) under the BiLSTM as torch's nn.Embedding in DeLFT; Keras' uniform otherwise
        init = "uniform" if encoder == "concat" else keras.initializers.RandomNormal(stddev=1.0)
        self.embedding = keras.layers.Embedding(sum(self.vocab_sizes), embedding_size,
                                                name="feature_embedding", embeddings_initializer=init)
        self.lstm = BiLSTM(lstm_units, name="feature_lstm") if encoder == "lstm" else None

    def build(self, input_shape):
        self.embedding.build((None, None, None))
        if self.lstm is not None:
            self.lstm.build((None, None, self.embedding_size))

    def call(self, features):
        shape = tf.shape(features)
        columns = len(self.vocab_sizes)
        if self.encoder == "concat":
            embedded = self.embedding(features + self.offsets)
            return tf.reshape(embedded, [shape[0], shape[1], columns * self.embedding_size])
        flat = tf.reshape(features + self.offsets, [-1, columns])
        distinct, position = tf.raw_ops.UniqueV2(x=flat, axis=[0], out_idx=tf.int32)
        lengths = tf.fill(tf.shape(distinct)[:1], columns)
        encoded = tf.gather(self.lstm(self.embedding(distinct), lengths), position)
        return tf.reshape(encoded, [shape[0], shape[1], 2 * self.lstm_units])

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:2]) + (self.output_width,)

    @property
    def output_width(self):
        if self.encoder == "concat":
            return len(self.vocab_sizes) * self.embedding_size
        return 2 * self.lstm_units

    def get_config(self):
        return dict(super().get_config(), vocab_sizes=self.vocab_sizes,
                    embedding_size=self.embedding_size, lstm_units=self.lstm_units,
                    encoder=self.encoder)
