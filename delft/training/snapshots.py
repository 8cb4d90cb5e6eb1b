"""Early stopping's snapshot of a model's weights, taken each time an epoch is the best so far.

A snapshot is ``model.get_weights()``'s list as tensors read from the weights instead of numpy
copies: TensorFlow copies a variable's buffer at its next update while a read of it lives (the
fused Adam kernel's update too), so taking one copies nothing, each weight training changes is
copied once at its next update, and a weight training leaves as it is (a frozen word-piece table,
half of a BERT_CRF's bytes) is never copied. ``get_weights()`` copied a BERT_CRF MiniLM's 91 MB
into fresh pages at each better epoch: 0.6 s of a 10-epoch date train_eval (doc/benchmarks.md,
"Early stopping's snapshot").

>>> import keras
>>> layer = keras.layers.Dense(1, kernel_initializer="ones")
>>> layer.build((None, 1))
>>> kept = weights_snapshot(layer)
>>> _ = layer.kernel.assign([[5.0]])
>>> float(kept[0][0, 0]), float(layer.kernel[0, 0])
(1.0, 5.0)
"""
import tensorflow as tf


def weights_snapshot(model):
    """``model.get_weights()``'s list, as tensors that keep these values while the weights move
    (``model.set_weights`` takes it back)."""
    return [tf.convert_to_tensor(weight) for weight in model.weights]
