"""A bidirectional LSTM over right-padded sequences of known lengths, on TF's fused LSTM kernel."""
import keras
import numpy as np
import tensorflow as tf

from delft.sequenceLabelling import recurrent_kernels

# what BlockLSTM adds to the forget gate of this layer's own weights (TensorFlow's LSTM default)
BLOCK_FORGET_BIAS = 1.0


def keras_to_block_gates(weight):
    """A weight's last axis from Keras' gate blocks (input, forget, cell, output) to BlockLSTM's
    (input, cell, forget, output), and back: the swap is its own inverse.

    >>> keras_to_block_gates(np.array([0, 1, 2, 3])).numpy().tolist()
    [0, 2, 1, 3]
    """
    i, f, c, o = tf.split(tf.convert_to_tensor(weight), 4, axis=-1)
    return tf.concat([i, c, f, o], axis=-1)


def block_to_keras(direction):
    """One direction's ``((kernel, recurrent kernel, bias), forget bias)`` as BlockLSTM runs them
    -> ``(kernel, recurrent kernel, bias)`` in Keras' LSTM layout, the same LSTM: gate blocks
    (input, forget, cell, output) and the forget bias inside the bias vector (what cuDNN reads).
    """
    (kernel, recurrent, bias), forget_bias = direction
    i, f, c, o = tf.split(keras_to_block_gates(bias), 4)
    return (keras_to_block_gates(kernel), keras_to_block_gates(recurrent),
            tf.concat([i, f + forget_bias, c, o], axis=0))


@keras.saving.register_keras_serializable(package="delft")
class BiLSTM(keras.layers.Layer):
    """Bidirectional LSTM: ``inputs`` [batch, time, features], ``lengths`` [batch] -> outputs.

    With ``return_sequences`` the output is [batch, time, 2 * units] (positions past a row's length
    hold unspecified values: heads mask them); without, [batch, 2 * units]: the forward state after
    the last valid step and the backward state after the first (zeros for an empty row).

    Without recurrent dropout each direction is one fused ``BlockLSTM`` op: a Keras ``LSTM`` in a
    graph is a while loop of small ops whose gradient takes several times longer to trace, and that
    runs no faster. Where a GPU is, cuDNN's fused LSTM runs instead, on the same weights mapped to
    its layout when the step is traced (delft/sequenceLabelling/recurrent_kernels.py). The
    backward direction reverses each row within its own length. Recurrent dropout needs a per-step
    mask the fused op has no place for: with ``recurrent_dropout > 0`` Keras' LSTM trains, and
    inference (no dropout) runs its weights on the fused op, the same numbers to float rounding
    (and one LSTM op an exported graph can convert).

    >>> layer = BiLSTM(units=3, return_sequences=True)
    >>> tuple(layer(tf.ones([2, 4, 5]), tf.constant([4, 2])).shape)
    (2, 4, 6)
    """

    def __init__(self, units, return_sequences=False, recurrent_dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.return_sequences = return_sequences
        self.recurrent_dropout = recurrent_dropout
        self.keras_lstm = None
        if recurrent_dropout:
            self.keras_lstm = keras.layers.Bidirectional(keras.layers.LSTM(
                units, return_sequences=return_sequences, recurrent_dropout=recurrent_dropout))

    def build(self, input_shape):
        if self.keras_lstm is not None:
            return
        features = input_shape[-1]
        self.directions = []
        for name in ("forward", "backward"):
            kernel = self.add_weight(name=f"{name}_kernel", shape=(features, 4 * self.units),
                                     initializer="glorot_uniform")
            recurrent = self.add_weight(name=f"{name}_recurrent_kernel",
                                        shape=(self.units, 4 * self.units),
                                        initializer="orthogonal")
            bias = self.add_weight(name=f"{name}_bias", shape=(4 * self.units,),
                                   initializer="zeros")
            self.directions.append((kernel, recurrent, bias))

    def call(self, inputs, lengths, training=False):
        if self.keras_lstm is not None and training:
            mask = tf.sequence_mask(lengths, tf.shape(inputs)[1])
            return self.keras_lstm(inputs, mask=mask, training=training)
        directions = self._fused_directions(inputs.shape)
        lengths = tf.cast(lengths, tf.int32)
        time_major = tf.transpose(inputs, [1, 0, 2])
        forward = self._run(time_major, directions[0])
        reversed_inputs = tf.reverse_sequence(time_major, lengths, seq_axis=0, batch_axis=1)
        backward = self._run(reversed_inputs, directions[1])
        if self.return_sequences:
            backward = tf.reverse_sequence(backward, lengths, seq_axis=0, batch_axis=1)
            return tf.transpose(tf.concat([forward, backward], axis=-1), [1, 0, 2])
        last = tf.stack([tf.maximum(lengths - 1, 0), tf.range(tf.shape(lengths)[0])], axis=1)
        final = tf.concat([tf.gather_nd(forward, last), tf.gather_nd(backward, last)], axis=-1)
        return final * tf.cast(lengths > 0, final.dtype)[:, None]

    def _fused_directions(self, input_shape):
        """``((kernel, recurrent kernel, bias), forget bias)`` of each direction for BlockLSTM."""
        if self.keras_lstm is None:
            return [(weights, BLOCK_FORGET_BIAS) for weights in self.directions]
        if not self.keras_lstm.built:
            self.keras_lstm.build(input_shape)
        # Keras has no forget bias beside its bias vector, hence 0
        return [(tuple(map(keras_to_block_gates, weights)), 0.0)
                for weights in self.direction_variables()]

    def set_keras_weights(self, forward, backward):
        """Set both directions from weights in Keras' LSTM layout, whatever this layer's own.

        ``forward`` and ``backward`` are ``(kernel [features, 4 units], recurrent kernel
        [units, 4 units], bias [4 units])`` with the gate blocks (input, forget, cell, output)
        and no forget bias beside the bias vector: what Keras 2 and 3 save, and what the readers
        of other toolkits' model folders (delft/sequenceLabelling/foreign/) convert to.
        """
        for variables, (kernel, recurrent, bias) in zip(self.direction_variables(),
                                                         (forward, backward)):
            if self.keras_lstm is None:
                bias = np.array(bias, dtype=np.float32)
                bias[self.units:2 * self.units] -= BLOCK_FORGET_BIAS  # BlockLSTM adds it back
                kernel, recurrent, bias = map(keras_to_block_gates, (kernel, recurrent, bias))
            for variable, value in zip(variables, (kernel, recurrent, bias)):
                variable.assign(value)

    def direction_variables(self):
        """The ``(kernel, recurrent kernel, bias)`` variables of each direction, in this layer's
        own gate order; their shapes are those of Keras' layout."""
        if self.keras_lstm is None:
            return self.directions
        return [(layer.cell.kernel, layer.cell.recurrent_kernel, layer.cell.bias)
                for layer in (self.keras_lstm.forward_layer, self.keras_lstm.backward_layer)]

    def _run(self, time_major, direction):
        if recurrent_kernels.uses_cudnn(time_major.dtype):
            return recurrent_kernels.cudnn_lstm(time_major, *block_to_keras(direction))
        (kernel, recurrent, bias), forget_bias = direction
        batch = tf.shape(time_major)[1]
        if time_major.shape[-1] % 2 or self.units % 2:
            # BlockLSTM logs a warning at every call whose batch and input or cell size are
            # both odd (724 lines in one name-citation training): one zero row makes the batch
            # even; rows are independent, so the others are unchanged
            time_major = tf.pad(time_major, [[0, 0], [0, batch % 2], [0, 0]])
        zeros = tf.zeros([tf.shape(time_major)[1], self.units], time_major.dtype)
        peephole = tf.zeros([self.units], time_major.dtype)
        outputs = tf.raw_ops.BlockLSTM(
            seq_len_max=tf.cast(tf.shape(time_major)[0], tf.int64), x=time_major,
            cs_prev=zeros, h_prev=zeros, w=tf.concat([kernel, recurrent], axis=0),
            wci=peephole, wcf=peephole, wco=peephole, b=bias, forget_bias=forget_bias,
            cell_clip=-1.0, use_peephole=False)
        return outputs[6][:, :batch]  # h: [time, batch, units]

    def compute_output_shape(self, input_shape):
        if self.return_sequences:
            return tuple(input_shape[:2]) + (2 * self.units,)
        return (input_shape[0], 2 * self.units)

    def get_config(self):
        return dict(super().get_config(), units=self.units,
                    return_sequences=self.return_sequences,
                    recurrent_dropout=self.recurrent_dropout)
