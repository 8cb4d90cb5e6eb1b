"""A bidirectional GRU over right-padded sequences of known lengths."""
import keras
import tensorflow as tf

from delft.sequenceLabelling import recurrent_kernels


@keras.saving.register_keras_serializable(package="delft")
class BiGRU(keras.layers.Layer):
    """Bidirectional GRU: ``inputs`` [batch, time, features], ``lengths`` [batch] ->
    [batch, time, 2 * units] (positions past a row's length hold unspecified values: heads mask
    them).

    Keras' GRU cell (``reset_after``, the form of cuDNN and of torch's GRU, and Keras' weight
    layout): update gate z, reset gate r, ``h' = z * h + (1 - z) * tanh(x W_h + b_h + r * (h U_h
    + c_h))``. TensorFlow has no fused GRU op with a gradient (``GRUBlockCell`` lost its gradient
    with tf.contrib), so each direction is the input projection of every step in one matmul,
    then :func:`gru_recursion`, a scan with its gradient written out: a training step's graph
    traces several times faster than with Keras' GRU loop, whose gradient TensorFlow derives. Where
    a GPU is, cuDNN's fused GRU runs instead, on the same weights (the same layout: see
    delft/sequenceLabelling/recurrent_kernels.py). The backward direction reverses each
    row within its own length, so no step needs a mask. With ``recurrent_dropout > 0`` Keras' GRU
    trains (a per-step dropout mask has no place here), and inference runs its weights here, as
    :class:`~delft.sequenceLabelling.layers.bilstm.BiLSTM` does.

    >>> layer = BiGRU(units=3)
    >>> tuple(layer(tf.ones([2, 4, 5]), tf.constant([4, 2])).shape)
    (2, 4, 6)
    """

    def __init__(self, units, recurrent_dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.recurrent_dropout = recurrent_dropout
        self.keras_gru = None
        if recurrent_dropout:
            self.keras_gru = keras.layers.Bidirectional(keras.layers.GRU(
                units, return_sequences=True, recurrent_dropout=recurrent_dropout,
                reset_after=True))

    def build(self, input_shape):
        if self.keras_gru is not None:
            self.keras_gru.build(input_shape)
            return
        features = input_shape[-1]
        self.directions = []
        for name in ("forward", "backward"):
            kernel = self.add_weight(name=f"{name}_kernel", shape=(features, 3 * self.units),
                                     initializer="glorot_uniform")
            recurrent = self.add_weight(name=f"{name}_recurrent_kernel",
                                        shape=(self.units, 3 * self.units),
                                        initializer="orthogonal")
            bias = self.add_weight(name=f"{name}_bias", shape=(2, 3 * self.units),
                                   initializer="zeros")
            self.directions.append((kernel, recurrent, bias))

    def set_keras_weights(self, forward, backward):
        """Set both directions from weights in Keras' GRU layout (``reset_after``), this layer's
        own: ``(kernel [features, 3 units], recurrent kernel [units, 3 units], bias [2, 3 units])``,
        gate blocks (update, reset, candidate), the input bias then the recurrent one. The readers
        of other toolkits' model folders (delft/sequenceLabelling/foreign/) convert to it."""
        for variables, weights in zip(self.direction_variables(), (forward, backward)):
            for variable, value in zip(variables, weights):
                variable.assign(value)

    def direction_variables(self):
        """The ``(kernel, recurrent kernel, bias)`` variables of each direction."""
        if self.keras_gru is None:
            return self.directions
        return [(layer.cell.kernel, layer.cell.recurrent_kernel, layer.cell.bias)
                for layer in (self.keras_gru.forward_layer, self.keras_gru.backward_layer)]

    def call(self, inputs, lengths, training=False):
        if self.keras_gru is not None and training:
            mask = tf.sequence_mask(lengths, tf.shape(inputs)[1])
            return self.keras_gru(inputs, mask=mask, training=training)
        directions = self.direction_variables()
        lengths = tf.cast(lengths, tf.int32)
        time_major = tf.transpose(inputs, [1, 0, 2])
        forward = self._run(time_major, directions[0])
        reversed_inputs = tf.reverse_sequence(time_major, lengths, seq_axis=0, batch_axis=1)
        backward = tf.reverse_sequence(self._run(reversed_inputs, directions[1]), lengths,
                                       seq_axis=0, batch_axis=1)
        return tf.transpose(tf.concat([forward, backward], axis=-1), [1, 0, 2])

    def _run(self, time_major, direction):
        if recurrent_kernels.uses_cudnn(time_major.dtype):
            return recurrent_kernels.cudnn_gru(time_major, *direction)
        kernel, recurrent, bias = (tf.cast(tf.convert_to_tensor(w), time_major.dtype)
                                   for w in direction)
        projected = tf.einsum("tbf,fg->tbg", time_major, kernel) + bias[0]
        return gru_recursion(projected, recurrent, bias[1])

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:2]) + (2 * self.units,)

    def get_config(self):
        return dict(super().get_config(), units=self.units,
                    recurrent_dropout=self.recurrent_dropout)


@tf.custom_gradient
def gru_recursion(projected, recurrent, recurrent_bias):
    """The GRU recursion from a zero state: ``projected`` [time, batch, 3 units] (each step's
    input already through the kernel, with its bias), ``recurrent`` [units, 3 units] and
    ``recurrent_bias`` [3 units] -> the states [time, batch, units].

    Its gradient is written out as a second scan, backwards through the steps kept by the
    first: TensorFlow then has no loop to differentiate, which is what made tracing a training
    step slow.
    """
    units = tf.shape(recurrent)[0]
    zeros = tf.zeros(tf.stack([tf.shape(projected)[1], units]), projected.dtype)

    def step(previous, x):
        state = previous[0]
        update_x, reset_x, candidate_x = tf.split(x, 3, axis=-1)
        update_h, reset_h, candidate_h = tf.split(
            tf.matmul(state, recurrent) + recurrent_bias, 3, axis=-1)
        update = tf.sigmoid(update_x + update_h)
        reset = tf.sigmoid(reset_x + reset_h)
        candidate = tf.tanh(candidate_x + reset * candidate_h)
        return update * state + (1.0 - update) * candidate, update, reset, candidate, candidate_h

    states, updates, resets, candidates, candidates_h = tf.scan(
        step, projected, initializer=(zeros,) * 5)
    previous_states = tf.concat([zeros[tf.newaxis], states[:-1]], axis=0)

    def gradient(d_states):
        def back(carry, step_values):
            d_state, update, reset, candidate, candidate_h, previous = step_values
            d_state = d_state + carry[0]
            d_update = d_state * (previous - candidate) * update * (1.0 - update)
            d_candidate = d_state * (1.0 - update) * (1.0 - candidate * candidate)
            d_reset = d_candidate * candidate_h * reset * (1.0 - reset)
            d_recurrent_out = tf.concat([d_update, d_reset, d_candidate * reset], axis=-1)
            d_previous = d_state * update + tf.matmul(d_recurrent_out, recurrent,
                                                      transpose_b=True)
            return (d_previous, tf.concat([d_update, d_reset, d_candidate], axis=-1),
                    d_recurrent_out)

        width = tf.stack([tf.shape(projected)[1], 3 * units])
        _, d_projected, d_recurrent_out = tf.scan(
            back, (d_states, updates, resets, candidates, candidates_h, previous_states),
            initializer=(zeros, tf.zeros(width, projected.dtype), tf.zeros(width, projected.dtype)),
            reverse=True)
        d_recurrent = tf.einsum("tbu,tbg->ug", previous_states, d_recurrent_out)
        return d_projected, d_recurrent, tf.reduce_sum(d_recurrent_out, axis=[0, 1])

    return states, gradient
