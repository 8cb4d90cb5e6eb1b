"""A CRF whose transitions learn faster than the encoder below it (the transformer family's head)."""
import keras

from delft.sequenceLabelling.layers.crf import ChainCRF


@keras.saving.register_keras_serializable(package="delft")
class ScaledChainCRF(ChainCRF):
    """:class:`ChainCRF` whose transition weights learn ``multiplier`` times faster (as
    :class:`~delft.sequenceLabelling.layers.scaled_dense.ScaledDense`), starting from small values
    as pytorch-crf does (uniform +-0.1).

    >>> crf = ScaledChainCRF(3, multiplier=10.0)
    >>> crf.build((None, None, 3))
    >>> bool(abs(crf._weights()[0].numpy()).max() <= 0.1)
    True
    """

    def __init__(self, num_tags, multiplier=1.0, **kwargs):
        super().__init__(num_tags, **kwargs)
        self.multiplier = float(multiplier)

    def build(self, input_shape=None):
        super().build(input_shape)
        m = self.multiplier
        for weight in (self.transitions, self.start_transitions, self.end_transitions):
            weight.assign(keras.random.uniform(weight.shape, -0.1 / m, 0.1 / m))

    def _weights(self):
        return tuple(w * self.multiplier for w in super()._weights())

    def get_config(self):
        return dict(super().get_config(), multiplier=self.multiplier)
