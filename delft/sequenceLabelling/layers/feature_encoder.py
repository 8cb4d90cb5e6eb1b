"""Categorical feature columns (GROBID layout features) to one vector per token."""
import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="delft")
class FeatureEncoder(keras.layers.Layer):
    """Embed each of the F columns of ``features`` [batch, words, F] and concatenate them.

    Columns share one embedding table, each with its own id range, so one lookup serves all.

    >>> encoder = FeatureEncoder(vocab_sizes=[3, 4], embedding_size=2)
    >>> tuple(encoder(tf.constant([[[2, 3]]])).shape)
    (1, 1, 4)
    """

    def __init__(self, vocab_sizes, embedding_size=4, **kwargs):
        super().__init__(**kwargs)
        self.vocab_sizes = list(vocab_sizes)
        self.embedding_size = embedding_size
        offsets = [0]
        for size in self.vocab_sizes[:-1]:
            offsets.append(offsets[-1] + size)
        self.offsets = tf.constant(offsets, tf.int32)
        self.embedding = keras.layers.Embedding(sum(self.vocab_sizes), embedding_size,
                                                name="feature_embedding")

    def build(self, input_shape):
        self.embedding.build((None, None, None))

    def call(self, features):
        shape = tf.shape(features)
        embedded = self.embedding(features + self.offsets)
        return tf.reshape(embedded, [shape[0], shape[1], len(self.vocab_sizes) * self.embedding_size])

    def get_config(self):
        return dict(super().get_config(), vocab_sizes=self.vocab_sizes,
                    embedding_size=self.embedding_size)
