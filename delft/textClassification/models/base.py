"""What every text classifier is: a batch -> class probabilities [batch, classes], and its loss.

A :class:`TextClassifier` reads one of three inputs (``inputs``):

- ``"word_ids"``: int32 ``word_ids`` [batch, maxlen], embedded by the model's own
  :class:`PaddedEmbedding` (DeLFT 1.2.0's learned embeddings: id 0 ``<PAD>``, 1 ``<UNK>``);
- ``"word_vectors"``: float32 ``word_vectors`` [batch, maxlen, width], pre-trained vectors looked
  up outside the model (DeLFT 0.4.6's input, zero vectors for padding and unknown words);
- ``"transformer"``: ``token_ids``, ``padding_mask`` and ``segment_ids`` [batch, width], ``width``
  the batch's longest text (at most ``maxlen``), the padding masked.

Its ``encoder`` (a layer of :mod:`.rnn`, :mod:`.cnn` or :mod:`.bert`) turns them into one vector
per text; a dense output layer gives the probabilities, sigmoid per class (DeLFT's RNNs and
CNNs, even for exclusive classes) or softmax (bert). Every row of words is ``maxlen`` long,
post-padded, and nothing is masked: DeLFT's RNNs run over the padding and its pools cover it, and
its shipped models' predictions depend on that.
"""
import keras
import tensorflow as tf

WORD_IDS, WORD_VECTORS, TRANSFORMER = "word_ids", "word_vectors", "transformer"
INPUTS = (WORD_IDS, WORD_VECTORS, TRANSFORMER)
TRANSFORMER_KEYS = ("token_ids", "padding_mask", "segment_ids")
OUTPUT_ACTIVATIONS = ("sigmoid", "softmax")
PAD_ID = 0  # <PAD>, as DeLFT 1.2.0's vocabulary (1 is <UNK>)


@keras.saving.register_keras_serializable(package="delft")
class PaddedEmbedding(keras.layers.Embedding):
    """Learned word embeddings whose ``<PAD>`` row (id 0) is zero and stays zero, as PyTorch's
    ``padding_idx`` in DeLFT 1.2.0: its vectors are multiplied by ``ids != 0``, so the row gets
    no gradient; the other rows start from N(0, 1), PyTorch's ``nn.Embedding`` initialisation.

    >>> layer = PaddedEmbedding(5, 3)
    >>> vectors = layer(tf.constant([[2, 0]]))
    >>> float(tf.reduce_sum(tf.abs(vectors[0, 1]))), float(tf.reduce_sum(layer.embeddings[0]))
    (0.0, 0.0)
    """

    def __init__(self, input_dim, output_dim, **kwargs):
        kwargs.setdefault("embeddings_initializer", keras.initializers.RandomNormal(stddev=1.0))
        super().__init__(input_dim, output_dim, **kwargs)

    def build(self, input_shape=None):
        super().build(input_shape)
        rows = tf.range(self.input_dim)[:, tf.newaxis]
        self.embeddings.assign(tf.where(rows == PAD_ID, 0.0, self.embeddings))

    def call(self, inputs):
        vectors = super().call(inputs)
        return vectors * tf.cast(tf.not_equal(inputs, PAD_ID), vectors.dtype)[..., tf.newaxis]


@keras.saving.register_keras_serializable(package="delft")
class MaxAndMeanPooling(keras.layers.Layer):
    """``[max over time, mean over time]`` [batch, 2 * features] over every position, padding
    included: DeLFT's ``concatenate([GlobalMaxPool1D, GlobalAveragePooling1D])``, whose mean
    divides by ``maxlen``, not by a text's length.

    >>> MaxAndMeanPooling()(tf.constant([[[1.0], [3.0], [0.0], [0.0]]])).numpy().tolist()
    [[3.0, 1.0]]
    """

    def call(self, inputs):
        return tf.concat([tf.reduce_max(inputs, axis=1), tf.reduce_mean(inputs, axis=1)], axis=-1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], 2 * input_shape[-1])


@keras.saving.register_keras_serializable(package="delft")
class TextClassifier(keras.Model):
    """A text classifier: the batch's ``inputs`` -> ``encoder`` -> dense -> probabilities.

    Args:
        n_classes: outputs, one per class.
        encoder: a layer from the text's input (word vectors [batch, maxlen, width], or the
            transformer keys) to one vector per text.
        inputs: ``"word_ids"``, ``"word_vectors"`` or ``"transformer"`` (see the module).
        vocab_size, word_embedding_size: the learned embeddings' rows and width
            (``inputs="word_ids"`` only).
        output_activation: ``"sigmoid"`` (one independent probability per class) or
            ``"softmax"``.

    >>> import numpy as np
    >>> encoder = MaxAndMeanPooling()
    >>> model = TextClassifier(3, encoder, inputs="word_ids", vocab_size=10,
    ...                        word_embedding_size=4)
    >>> batch = {"word_ids": np.array([[3, 4, 0]], "int32"),
    ...          "labels": np.array([[0, 1, 0]], "float32")}
    >>> probabilities = model(batch)
    >>> tuple(probabilities.shape), tuple(model.loss_per_example(batch, probabilities).shape)
    ((1, 3), (1,))
    """

    def __init__(self, n_classes, encoder, inputs=WORD_VECTORS, vocab_size=None,
                 word_embedding_size=None, output_activation="sigmoid", **kwargs):
        super().__init__(**kwargs)
        if inputs not in INPUTS:
            raise ValueError(f"inputs must be one of {', '.join(INPUTS)}, not {inputs!r}")
        if output_activation not in OUTPUT_ACTIVATIONS:
            raise ValueError(f"output_activation must be one of {', '.join(OUTPUT_ACTIVATIONS)}, "
                             f"not {output_activation!r}")
        self.n_classes = n_classes
        self.inputs_kind = inputs
        self.vocab_size = vocab_size
        self.word_embedding_size = word_embedding_size
        self.output_activation = output_activation
        self.word_embedding = (PaddedEmbedding(vocab_size, word_embedding_size,
                                               name="word_embedding")
                               if inputs == WORD_IDS else None)
        self.encoder = encoder
        # float32 whatever the encoder computes in: the loss reads these probabilities
        self.output_layer = keras.layers.Dense(n_classes, activation=output_activation,
                                               dtype="float32", name="output")

    def build(self, input_shape):
        # sublayers build on their first call (build_classifier makes one): Keras cannot trace a
        # dict batch symbolically to build them earlier
        self.built = True

    def text_inputs(self, batch):
        """What the encoder reads from ``batch``."""
        if self.inputs_kind == WORD_IDS:
            return self.word_embedding(batch[WORD_IDS])
        if self.inputs_kind == WORD_VECTORS:
            return batch[WORD_VECTORS]
        return {key: batch[key] for key in TRANSFORMER_KEYS if key in batch}

    def call(self, batch, training=False):
        encoded = self.encoder(self.text_inputs(batch), training=training)
        return self.output_layer(tf.cast(encoded, tf.float32))

    def loss_per_example(self, batch, probabilities):
        """Each row's loss [batch]: the mean over classes of the binary cross-entropy (sigmoid) or
        the categorical cross-entropy (softmax), as Keras' losses compute them (from the logits
        when they can see them), times ``batch["example_weights"]`` when the batch has it."""
        labels = tf.cast(batch["labels"], probabilities.dtype)
        if self.output_activation == "sigmoid":
            losses = keras.losses.binary_crossentropy(labels, probabilities)
        else:
            losses = keras.losses.categorical_crossentropy(labels, probabilities)
        if "example_weights" in batch:
            losses = losses * tf.cast(batch["example_weights"], losses.dtype)
        return losses

    def get_config(self):
        return dict(super().get_config(), n_classes=self.n_classes,
                    encoder=keras.saving.serialize_keras_object(self.encoder),
                    inputs=self.inputs_kind, vocab_size=self.vocab_size,
                    word_embedding_size=self.word_embedding_size,
                    output_activation=self.output_activation)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
