"""A dense layer with its own learning rate under Adam(W), without a second optimizer."""
import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="delft")
class ScaledDense(keras.layers.Layer):
    """A dense layer whose weights are stored divided by ``multiplier``: with Adam(W), whose step
    does not depend on the gradient's scale, it learns ``multiplier`` times faster than the rest
    of the model.

    Args:
        units: output width.
        multiplier: how much faster than the optimizer's learning rate the layer learns.

    >>> layer = ScaledDense(3, multiplier=10.0)
    >>> tuple(layer(tf.ones([2, 5, 4])).shape)
    (2, 5, 3)
    """

    def __init__(self, units, multiplier=1.0, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.multiplier = float(multiplier)

    def build(self, input_shape):
        m = self.multiplier
        self.kernel = self.add_weight(
            name="kernel", shape=(int(input_shape[-1]), self.units),
            initializer=keras.initializers.VarianceScaling(1.0 / m ** 2, "fan_avg", "uniform"))
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")
        self.built = True

    def call(self, x):
        return (tf.matmul(x, tf.cast(self.kernel, x.dtype)) + tf.cast(self.bias, x.dtype)) * \
            tf.cast(self.multiplier, x.dtype)

    def get_config(self):
        return dict(super().get_config(), units=self.units, multiplier=self.multiplier)
