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
    then :func:`gru_recursion`, a loop with its gradient written out: a training step's graph
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
        forward, backward = self.time_major_states(inputs, self.direction_variables(), lengths)
        return tf.transpose(tf.concat([forward, backward], axis=-1), [1, 0, 2])

    @staticmethod
    def time_major_states(inputs, directions, lengths):
        """The states [time, batch, units] of each of ``directions`` (``(kernel, recurrent
        kernel, bias)``) over the batch-major ``inputs``: the first forward, the second, if any,
        backward within each row's length (``lengths``)."""
        lengths = tf.cast(lengths, tf.int32)

        def backward_in_rows(per_direction):  # the second direction's, each row reversed
            return [values if i == 0 else
                    tf.reverse_sequence(values, lengths, seq_axis=0, batch_axis=1)
                    for i, values in enumerate(per_direction)]

        if recurrent_kernels.uses_cudnn(inputs.dtype):
            time_major = tf.transpose(inputs, [1, 0, 2])
            sources = backward_in_rows([time_major] * len(directions))
            states = [recurrent_kernels.cudnn_gru(source, *direction)
                      for source, direction in zip(sources, directions)]
        else:
            weights = [[tf.cast(tf.convert_to_tensor(w), inputs.dtype) for w in direction]
                       for direction in directions]
            states = [gru_recursion(source, recurrent, bias[1]) for source, (_, recurrent, bias)
                      in zip(backward_in_rows(projections(inputs, weights)), weights)]
        return backward_in_rows(states)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:2]) + (2 * self.units,)

    def get_config(self):
        return dict(super().get_config(), units=self.units,
                    recurrent_dropout=self.recurrent_dropout)


def projections(inputs, directions):
    """Each direction's input projection [time, batch, 3 units], with its input bias, of the
    batch-major ``inputs`` [batch, time, features]. ``directions``: ``(kernel, recurrent kernel,
    bias)`` of each, in the inputs' dtype. Both read one time-major copy of the inputs, a matmul
    each (with one thread per op they run side by side, where one matmul of both kernels took
    a core); the backward direction's projection is reversed after
    (:meth:`BiGRU.time_major_states`): reversed inputs were a second copy, kept for the gradient.
    """
    time_major = tf.transpose(inputs, [1, 0, 2])
    return [tf.einsum("tbf,fg->tbg", time_major, kernel) + bias[0]
            for kernel, _, bias in directions]


@tf.custom_gradient
def gru_recursion(projected, recurrent, recurrent_bias):
    """The GRU recursion from a zero state: ``projected`` [time, batch, 3 units] (each step's
    input already through the kernel, with its bias), ``recurrent`` [units, 3 units] and
    ``recurrent_bias`` [3 units] -> the states [time, batch, units].

    Its gradient is written out as a second loop, backwards through the steps kept by the
    first: TensorFlow then has no loop to differentiate, which is what made tracing a training
    step slow. What it keeps of each step is the state and the update, reset and candidate gates
    (the candidate's recurrent part is computed again); the weights' gradients are summed step by
    step.
    """
    steps, batch = tf.shape(projected)[0], tf.shape(projected)[1]
    units = tf.shape(recurrent)[0]
    dtype = projected.dtype
    zeros = tf.zeros(tf.stack([batch, units]), dtype)

    def gates(state, x):
        update_x, reset_x, candidate_x = tf.split(x, 3, axis=-1)
        update_h, reset_h, candidate_h = tf.split(
            tf.matmul(state, recurrent) + recurrent_bias, 3, axis=-1)
        update = tf.sigmoid(update_x + update_h)
        reset = tf.sigmoid(reset_x + reset_h)
        candidate = tf.tanh(candidate_x + reset * candidate_h)
        return update, reset, candidate

    # while loops that index the tensors they read: tf.scan would first copy each into a
    # TensorArray (the projections; in the backward pass, every kept tensor)
    def step(t, state, *kept):
        update, reset, candidate = gates(state, projected[t])
        state = update * state + (1.0 - update) * candidate
        return (t + 1, state) + tuple(array.write(t, value) for array, value in
                                      zip(kept, (state, update, reset, candidate)))

    arrays = tuple(tf.TensorArray(dtype, size=steps) for _ in range(4))
    _, _, *kept = tf.while_loop(lambda t, *_: t < steps, step, (0, zeros) + arrays)
    # stacked: a SavedModel keeps the gradient, which cannot capture a TensorArray of the loop
    states, updates, resets, candidates = (array.stack() for array in kept)
    candidate_recurrent = recurrent[:, 2 * units:]
    candidate_bias = recurrent_bias[2 * units:]

    def gradient(d_states):
        def back(t, d_next, d_recurrent, d_bias, d_projected):
            d_state = d_states[t] + d_next
            update, reset, candidate = updates[t], resets[t], candidates[t]
            previous = states[tf.maximum(t - 1, 0)] * tf.cast(t > 0, dtype)
            d_update = d_state * (previous - candidate) * update * (1.0 - update)
            d_candidate = d_state * (1.0 - update) * (1.0 - candidate * candidate)
            # the candidate's recurrent part again rather than kept: one [time, batch, units] less
            candidate_h = tf.matmul(previous, candidate_recurrent) + candidate_bias
            d_reset = d_candidate * candidate_h * reset * (1.0 - reset)
            d_recurrent_out = tf.concat([d_update, d_reset, d_candidate * reset], axis=-1)
            d_previous = d_state * update + tf.matmul(d_recurrent_out, recurrent,
                                                      transpose_b=True)
            # the weights' gradients summed step by step: no [time, batch, 3 units] tensor
            return (t - 1, d_previous,
                    d_recurrent + tf.matmul(previous, d_recurrent_out, transpose_a=True),
                    d_bias + tf.reduce_sum(d_recurrent_out, axis=0),
                    d_projected.write(t, tf.concat([d_update, d_reset, d_candidate], axis=-1)))

        _, _, d_recurrent, d_bias, d_projected = tf.while_loop(
            lambda t, *_: t >= 0, back,
            (steps - 1, zeros, tf.zeros_like(recurrent), tf.zeros_like(recurrent_bias),
             tf.TensorArray(dtype, size=steps)))
        return d_projected.stack(), d_recurrent, d_bias

    return states, gradient
