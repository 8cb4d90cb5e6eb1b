"""What every sequence labelling model is: batch -> per-word potentials, with a CRF or softmax head.

A batch is a dict of int32 tensors; all models read ``lengths`` [batch] (words per row) and, to
train, ``labels`` [batch, words]. What else a model reads (``chars``, ``features``, subword ids) is
its own business, produced by its preprocessor. Potentials are per *word*, so the loss, decoding,
metrics and output are the same code for every family.
"""
import keras
import tensorflow as tf

from delft.sequenceLabelling.layers.crf import ChainCRF


class SequenceLabeller(keras.Model):
    """Base class: subclasses implement ``word_potentials(batch, training)`` -> [batch, words, K]."""

    def __init__(self, num_labels, use_crf=True, **kwargs):
        super().__init__(**kwargs)
        self.num_labels = num_labels
        self.use_crf = use_crf
        self.crf = ChainCRF(num_labels, name="crf") if use_crf else None

    def build(self, input_shape):
        # sublayers build on their first call (a dummy batch, in the strategy's scope): Keras
        # cannot trace a dict of dynamic-shape inputs symbolically to build them earlier
        self.built = True

    def word_potentials(self, batch, training=False):
        raise NotImplementedError

    def call(self, batch, training=False):
        potentials = tf.cast(self.word_potentials(batch, training=training), tf.float32)
        return self.crf(potentials) if self.use_crf else potentials

    def loss_per_example(self, batch, potentials):
        """Negative log-likelihood of each row's labels, shape [batch] (not reduced: see trainer)."""
        lengths, labels = batch["lengths"], batch["labels"]
        if self.use_crf:
            return self.crf.negative_log_likelihood(potentials, labels, lengths)
        mask = tf.sequence_mask(lengths, tf.shape(labels)[1], dtype=tf.float32)
        token_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, potentials)
        return tf.reduce_sum(token_loss * mask, axis=1)

    def decode(self, batch, potentials):
        """Best label ids [batch, words] and a confidence per word (softmax of its potentials)."""
        if self.use_crf:
            tags, _ = self.crf.decode(potentials, batch["lengths"])
        else:
            tags = tf.argmax(potentials, axis=-1, output_type=tf.int32)
        scores = tf.gather(tf.nn.softmax(potentials), tags, batch_dims=2)
        return tags, scores
