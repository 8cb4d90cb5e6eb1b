"""Characters of each token to one vector per token: embedding + convolution + max over characters
(Ma and Hovy 2016; DeLFT's BidLSTM_CNN and BidLSTM_CNN_CRF)."""
import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="delft")
class CharCNN(keras.layers.Layer):
    """Encode ``chars`` [batch, words, chars] (0 = padding) into [batch, words, filters].

    Each character is embedded, a 1-D convolution of width ``kernel_size`` with tanh runs along
    the token ('same' padding), and each filter keeps its maximum over the token's characters.
    Padding characters are zero vectors and take no part in the maximum, so a token encodes the
    same whatever the longest token of its batch; a token without characters encodes as zeros.
    With ``reads_padding`` the maximum runs over every position, padding included, as in DeLFT
    1.2 (whose tokens always have ``max_char_length`` positions). As :class:`~delft.sequenceLabelling.layers.char_encoder.
    CharEncoder`, it runs on the distinct character rows of the batch only.

    >>> encoder = CharCNN(vocab_size=10, embedding_size=4, filters=5)
    >>> tuple(encoder(tf.constant([[[2, 3, 0], [2, 3, 0]]])).shape)
    (1, 2, 5)
    """

    def __init__(self, vocab_size, embedding_size=25, filters=30, kernel_size=3,
                 reads_padding=False, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.reads_padding = reads_padding
        self.embedding_size = embedding_size
        self.filters = filters
        self.kernel_size = kernel_size
        # N(0, 1) as torch's nn.Embedding (see CharEncoder)
        self.embedding = keras.layers.Embedding(
            vocab_size, embedding_size, name="char_embedding",
            embeddings_initializer=keras.initializers.RandomNormal(stddev=1.0))
        self.convolution = keras.layers.Conv1D(filters, kernel_size, padding="same",
                                               activation="tanh", name="char_convolution")

    def build(self, input_shape):
        self.embedding.build((None, None))
        self.convolution.build((None, None, self.embedding_size))

    def call(self, chars):
        shape = tf.shape(chars)
        flat = tf.reshape(chars, [-1, shape[2]])
        distinct, position = tf.raw_ops.UniqueV2(x=flat, axis=[0], out_idx=tf.int32)
        present = tf.cast(distinct > 0, self.compute_dtype)[:, :, tf.newaxis]
        convolved = self.convolution(self.embedding(distinct) * present)
        if self.reads_padding:
            encoded = tf.reduce_max(convolved, axis=1)
        else:
            # tanh is > -1: -2 at the padding never wins the maximum of a token with characters
            pooled = tf.reduce_max(convolved * present - 2.0 * (1.0 - present), axis=1)
            encoded = pooled * tf.reduce_max(present, axis=1)
        encoded = tf.gather(encoded, position)
        return tf.reshape(encoded, [shape[0], shape[1], self.filters])

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:2]) + (self.filters,)

    def get_config(self):
        return dict(super().get_config(), vocab_size=self.vocab_size,
                    embedding_size=self.embedding_size, filters=self.filters,
                    kernel_size=self.kernel_size, reads_padding=self.reads_padding)
