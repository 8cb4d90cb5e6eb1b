"""DeLFT's convolutional classifiers: cnn, cnn2, cnn3 and lstm_cnn as DeLFT 0.4.6 stacks them
(recipes of :class:`~delft.textClassification.models.rnn.LayerStack`), and dpcnn as DeLFT 1.2.0
builds it (:class:`DPCNN`).

DeLFT 0.4.6's dpcnn is broken: each block's convolutions are computed and then dropped
(``X = Activation("relu")(X_shortcut)`` overwrites them), so it trains no convolution at all.
DeLFT 1.2.0 replaced it with a working deep pyramid CNN, which is the one built here.
"""
import keras
import tensorflow as tf

from delft.textClassification.models.rnn import LayerStack

# DeLFT 0.4.6's layers, in order (see LayerStack for each step; its Dropout on the word vectors is
# per element, a recurrent layer's input dropout one mask per text and feature)
CNN_RECIPES = {
    "cnn": ("dropout", "conv", "max_pool", "conv", "max_pool", "conv", "max_pool",
            "gru_last_state", "dropout", "dense"),
    "cnn2": ("dropout", "conv", "conv", "conv", "rnn_input_dropout", "gru_last_state", "dense"),
    "cnn3": ("rnn_input_dropout", "gru", "conv", "max_pool", "conv", "max_pool", "conv",
             "max_pool", "max_and_mean", "dense"),
    "lstm_cnn": ("rnn_input_dropout", "lstm", "dropout", "conv", "wide_tanh_conv",
                 "max_and_mean", "dense", "dropout"),
}
# DeLFT 1.2.0's DPCNN: two blocks of two convolutions of width 2 and stride 3, a max pooling of 3
# and stride 2 between them
DPCNN_KERNEL, DPCNN_STRIDE, DPCNN_POOL, DPCNN_POOL_STRIDE = 2, 3, 3, 2


def adaptive_max_pool(inputs, size):
    """PyTorch's ``adaptive_max_pool1d`` along axis 1: ``inputs`` [batch, length, features] ->
    [batch, size, features], output ``i`` the max over positions ``floor(i * length / size)`` to
    ``ceil((i + 1) * length / size)`` (exclusive). ``size`` <= ``length``; both may be dynamic.

    >>> x = tf.reshape(tf.range(7.0), [1, 7, 1])
    >>> adaptive_max_pool(x, 3)[0, :, 0].numpy().tolist()
    [2.0, 4.0, 6.0]
    """
    length = tf.shape(inputs)[1]
    outputs = tf.range(size)
    starts = (outputs * length) // size
    ends = ((outputs + 1) * length + size - 1) // size
    widest = tf.reduce_max(ends - starts)
    # each window's positions, its last one repeated to the widest window's width
    positions = tf.minimum(starts[:, None] + tf.range(widest)[None, :], ends[:, None] - 1)
    return tf.reduce_max(tf.gather(inputs, positions, axis=1), axis=2)


@keras.saving.register_keras_serializable(package="delft")
class DPCNN(keras.layers.Layer):
    """DeLFT 1.2.0's deep pyramid CNN: word vectors [batch, maxlen, features] -> [batch, units].

    A width-1 convolution to ``units`` filters, then two blocks, each two convolutions (width 2,
    stride 3, ReLU) plus its input max-pooled to their length (PyTorch's adaptive max pooling),
    a max pooling (3, stride 2) between the blocks, and the max over the remaining positions. No
    dropout, no dense layer (the output layer follows). Needs :meth:`min_length` positions.

    >>> tuple(DPCNN(units=4)(tf.ones([2, DPCNN().min_length(), 5])).shape)
    (2, 4)
    """

    def __init__(self, units=64, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.projection = keras.layers.Conv1D(units, 1, name="projection")

        def convolution(name):
            return keras.layers.Conv1D(units, DPCNN_KERNEL, strides=DPCNN_STRIDE,
                                       padding="valid", activation="relu", name=name)

        # block 1's two convolutions, then block 2's
        self.convolutions = [convolution(f"block{b}_conv{c}") for b in (1, 2) for c in (1, 2)]
        self.pool = keras.layers.MaxPooling1D(DPCNN_POOL, strides=DPCNN_POOL_STRIDE,
                                              name="pool")

    def build(self, input_shape):
        self.projection.build(tuple(input_shape))
        for layer in self.convolutions:  # each reads ``units`` channels
            layer.build((input_shape[0], None, self.units))

    def call(self, inputs):
        x = self.projection(inputs)
        for block in (0, 1):
            if block:
                x = self.pool(x)
            shortcut = x
            first, second = self.convolutions[2 * block:2 * block + 2]
            x = second(first(x))
            x = x + adaptive_max_pool(shortcut, tf.shape(x)[1])
        return tf.reduce_max(x, axis=1)

    def min_length(self):
        """The fewest positions from which every convolution has an output (95)."""
        length = 1  # what the last convolution must give, back to the input
        for undo in ("conv", "conv", "pool", "conv", "conv"):
            if undo == "conv":
                length = (length - 1) * DPCNN_STRIDE + DPCNN_KERNEL
            else:
                length = (length - 1) * DPCNN_POOL_STRIDE + DPCNN_POOL
        return length

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.units)

    def get_config(self):
        return dict(super().get_config(), units=self.units)


def cnn_encoder(name, model_config):
    """The encoder of the convolutional architecture ``name`` (dpcnn or a key of
    :data:`CNN_RECIPES`)."""
    if name == "dpcnn":
        return DPCNN(model_config.recurrent_units, name="encoder")
    return LayerStack(CNN_RECIPES[name], model_config.recurrent_units, model_config.dense_size,
                      model_config.dropout, name="encoder")
