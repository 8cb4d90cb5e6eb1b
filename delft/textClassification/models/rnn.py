"""DeLFT's recurrent classifiers (gru, gru_simple, gru_lstm, lstm, bidLstm_simple) as stacks of
layers, and the fast one-direction GRU and LSTM that they and the CNNs share.

Each architecture is a recipe: the names of its steps, in DeLFT 0.4.6's order (``RNN_RECIPES``),
which :class:`LayerStack` builds. The recurrent steps are the sequence labeller's fast layers
(:class:`~delft.sequenceLabelling.layers.bigru.BiGRU`, a loop with its gradient written out, and
:class:`~delft.sequenceLabelling.layers.bilstm.BiLSTM`, TensorFlow's fused LSTM op) given every
row's full width: they run over the padding, as DeLFT's unmasked layers do (a backward direction
reads the padding first). :class:`ForwardGRU` and :class:`ForwardLSTM` are their forward
direction alone.

What is DeLFT 0.4.6's and what is not:

- a recurrent layer's ``dropout=0.3`` (Keras 2 drops each input feature with one mask for the
  whole text) is the step ``rnn_input_dropout``, a ``SpatialDropout1D`` before it; a
  bidirectional layer's two directions share that mask (Keras 2 drew one per direction);
- no recurrent dropout (DeLFT 1.2.0 has none, and a per-step mask leaves no fused kernel);
- the ``Dropout`` layers are where 0.4.6 has them, at ``model_config.dropout``, but in ``gru``,
  which has DeLFT 1.2.0's one dropout between its BiGRUs.
"""
import keras
import tensorflow as tf

from delft.sequenceLabelling.layers.bigru import BiGRU
from delft.sequenceLabelling.layers.bilstm import BiLSTM
from delft.textClassification.models.base import MaxAndMeanPooling

LSTM_CNN_FILTERS = 300  # lstm_cnn's last convolution, fixed in both DeLFT versions

# DeLFT's layers, in order (see the module docstring and LayerStack for each step)
RNN_RECIPES = {
    # DeLFT 1.2.0's gru (0.4.6 adds a spatial dropout before each BiGRU): with word embeddings
    # learned from licence texts it scored higher on every seed (doc/classification.md); without
    # weights of their own, dropouts leave GROBID's shipped 0.4.6 gru unchanged at inference
    "gru": ("bigru", "dropout", "bigru", "max_and_mean", "dense"),
    "gru_simple": ("rnn_input_dropout", "bigru", "max_and_mean", "dense"),
    "gru_lstm": ("rnn_input_dropout", "bigru", "dropout", "rnn_input_dropout", "bilstm",
                 "max_and_mean", "dense"),
    "lstm": ("rnn_input_dropout", "lstm", "dropout", "max_and_mean", "dense", "dropout"),
    "bidLstm_simple": ("rnn_input_dropout", "bilstm", "dropout", "max_and_mean", "dense",
                       "dropout"),
}


def last_states(time_major, lengths):
    """Each row's state after its last step [batch, units] from ``time_major`` [time, batch,
    units] (zeros for an empty row)."""
    last = tf.stack([tf.maximum(lengths - 1, 0), tf.range(tf.shape(lengths)[0])], axis=1)
    return tf.gather_nd(time_major, last) * tf.cast(lengths > 0, time_major.dtype)[:, None]


class OneDirection:
    """What :class:`ForwardGRU` and :class:`ForwardLSTM` add to their two-direction layer: the
    time-major states of its one direction as every state or each row's last one, and no
    recurrent dropout in the config."""

    def _outputs(self, time_major_states, lengths):
        if self.return_sequences:
            return tf.transpose(time_major_states, [1, 0, 2])
        return last_states(time_major_states, tf.cast(lengths, tf.int32))

    def compute_output_shape(self, input_shape):
        if self.return_sequences:
            return tuple(input_shape[:2]) + (self.units,)
        return (input_shape[0], self.units)

    def get_config(self):
        config = dict(super().get_config(), return_sequences=self.return_sequences)
        config.pop("recurrent_dropout")
        return config


@keras.saving.register_keras_serializable(package="delft")
class ForwardGRU(OneDirection, BiGRU):
    """One-direction GRU on :class:`BiGRU`'s kernel: ``inputs`` [batch, time, features],
    ``lengths`` [batch] -> every state [batch, time, units] (``return_sequences``) or each row's
    last one [batch, units]. Keras' GRU cell and weight layout (``reset_after``).

    >>> layer = ForwardGRU(units=3, return_sequences=False)
    >>> tuple(layer(tf.ones([2, 4, 5]), tf.constant([4, 4])).shape)
    (2, 3)
    """

    def __init__(self, units, return_sequences=True, **kwargs):
        super().__init__(units, **kwargs)
        self.return_sequences = return_sequences

    def build(self, input_shape):
        # BiGRU's weights of one direction
        kernel = self.add_weight(name="forward_kernel", shape=(input_shape[-1], 3 * self.units),
                                 initializer="glorot_uniform")
        recurrent = self.add_weight(name="forward_recurrent_kernel",
                                    shape=(self.units, 3 * self.units), initializer="orthogonal")
        bias = self.add_weight(name="forward_bias", shape=(2, 3 * self.units),
                               initializer="zeros")
        self.directions = [(kernel, recurrent, bias)]

    def call(self, inputs, lengths, training=False):
        return self._outputs(self.time_major_states(inputs, self.directions, lengths)[0], lengths)


@keras.saving.register_keras_serializable(package="delft")
class ForwardLSTM(OneDirection, BiLSTM):
    """One-direction LSTM on :class:`BiLSTM`'s fused kernel: ``inputs`` [batch, time,
    features], ``lengths`` [batch] -> every state [batch, time, units] (``return_sequences``) or
    each row's last one [batch, units].

    >>> layer = ForwardLSTM(units=3, return_sequences=True)
    >>> tuple(layer(tf.ones([2, 4, 5]), tf.constant([4, 4])).shape)
    (2, 4, 3)
    """

    def __init__(self, units, return_sequences=True, **kwargs):
        super().__init__(units, return_sequences=return_sequences, **kwargs)

    def build(self, input_shape):
        # BiLSTM's weights of one direction, in its gate order (see BiLSTM.direction_variables)
        kernel = self.add_weight(name="forward_kernel", shape=(input_shape[-1], 4 * self.units),
                                 initializer="glorot_uniform")
        recurrent = self.add_weight(name="forward_recurrent_kernel",
                                    shape=(self.units, 4 * self.units), initializer="orthogonal")
        bias = self.add_weight(name="forward_bias", shape=(4 * self.units,), initializer="zeros")
        self.directions = [(kernel, recurrent, bias)]

    def call(self, inputs, lengths, training=False):
        return self._outputs(self._run(tf.transpose(inputs, [1, 0, 2]),
                                       self._fused_directions(inputs.shape)[0]), lengths)


RECURRENT_LAYERS = (BiGRU, BiLSTM)  # ForwardGRU and ForwardLSTM included: they take lengths


def make_step(step, units, dense_size, dropout, name):
    """The layer of the recipe step ``step`` (``units``: recurrent units per direction and
    convolution filters)."""
    makers = {
        "dropout": lambda: keras.layers.Dropout(dropout, name=name),
        "rnn_input_dropout": lambda: keras.layers.SpatialDropout1D(dropout, name=name),
        "bigru": lambda: BiGRU(units, name=name),
        "bilstm": lambda: BiLSTM(units, return_sequences=True, name=name),
        "gru": lambda: ForwardGRU(units, name=name),
        "gru_last_state": lambda: ForwardGRU(units, return_sequences=False, name=name),
        "lstm": lambda: ForwardLSTM(units, name=name),
        "conv": lambda: keras.layers.Conv1D(units, 2, padding="same", activation="relu",
                                            name=name),
        "max_pool": lambda: keras.layers.MaxPooling1D(2, name=name),
        "wide_tanh_conv": lambda: keras.layers.Conv1D(LSTM_CNN_FILTERS, 5, padding="valid",
                                                      activation="tanh", name=name),
        "max_and_mean": lambda: MaxAndMeanPooling(name=name),
        "dense": lambda: keras.layers.Dense(dense_size, activation="relu", name=name),
    }
    if step not in makers:
        raise ValueError(f"unknown step {step!r}; known: {', '.join(sorted(makers))}")
    return makers[step]()


@keras.saving.register_keras_serializable(package="delft")
class LayerStack(keras.layers.Layer):
    """Word vectors [batch, maxlen, features] through ``steps`` in order -> one vector per text.

    Steps: ``dropout`` (Dropout), ``rnn_input_dropout`` (SpatialDropout1D: one mask per text and
    feature, Keras 2's recurrent input dropout), ``bigru``, ``bilstm`` (bidirectional, every
    state), ``gru``, ``lstm`` (forward, every state), ``gru_last_state`` (forward, the last
    state), ``conv`` (Conv1D of ``units`` filters, width 2, same padding, ReLU), ``max_pool``
    (MaxPooling1D(2)), ``wide_tanh_conv`` (Conv1D(300, 5, valid, tanh): lstm_cnn's),
    ``max_and_mean`` (:class:`MaxAndMeanPooling`), ``dense`` (Dense(``dense_size``, ReLU)).
    Recurrent layers read every position: each row's length is the batch's width.

    >>> stack = LayerStack(RNN_RECIPES["gru_simple"], units=4, dense_size=3)
    >>> tuple(stack(tf.ones([2, 6, 5])).shape)
    (2, 3)
    """

    def __init__(self, steps, units=64, dense_size=32, dropout=0.3, **kwargs):
        super().__init__(**kwargs)
        self.steps = list(steps)
        self.units = units
        self.dense_size = dense_size
        self.dropout = dropout
        self.stack = [make_step(step, units, dense_size, dropout, f"{step}_{position}")
                      for position, step in enumerate(self.steps)]

    def build(self, input_shape):
        shape = tuple(input_shape)
        for layer in self.stack:
            layer.build(shape)
            shape = layer.compute_output_shape(shape)

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        for layer in self.stack:
            shape = layer.compute_output_shape(shape)
        return shape

    def call(self, inputs, training=False):
        x = inputs
        for layer in self.stack:
            if isinstance(layer, RECURRENT_LAYERS):
                full_width = tf.fill(tf.shape(x)[:1], tf.shape(x)[1])
                x = layer(x, full_width, training=training)
            else:
                x = layer(x, training=training)
        return x

    def min_length(self):
        """The fewest positions a text needs for every step to have an output: each pooling
        halves them, the wide convolution takes 4."""
        length = 1
        for step in reversed(self.steps):
            if step == "max_pool":
                length *= 2
            elif step == "wide_tanh_conv":
                length += 4
        return length

    def layers_of(self, kind):
        """The layers of this stack that are ``kind`` (a class), in order."""
        return [layer for layer in self.stack if type(layer) is kind]

    def get_config(self):
        return dict(super().get_config(), steps=self.steps, units=self.units,
                    dense_size=self.dense_size, dropout=self.dropout)


def rnn_encoder(name, model_config):
    """The encoder of the recurrent architecture ``name`` (a key of :data:`RNN_RECIPES`)."""
    return LayerStack(RNN_RECIPES[name], model_config.recurrent_units, model_config.dense_size,
                      model_config.dropout, name="encoder")
