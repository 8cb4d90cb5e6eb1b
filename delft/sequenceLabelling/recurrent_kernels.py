"""Which kernel runs the recurrence of :class:`~delft.sequenceLabelling.layers.bilstm.BiLSTM` and
:class:`~delft.sequenceLabelling.layers.bigru.BiGRU`: cuDNN's fused kernels where a GPU is, else
TensorFlow's ``BlockLSTM`` op and the GRU scan of bigru.py.

Both run one direction from a zero state over every step of a time-major batch (the layers
reverse each row within its length for the backward direction), so the states at a row's valid
steps are the same on either, from the same variables: the layers map their weights to the layout
cuDNN reads when a step is traced, and save them as they always have. The choice is made when a
layer is traced: a graph traced under :func:`portable_kernels` runs the portable kernels even on a
GPU machine, which is what delft/export saves (a SavedModel that also runs on a CPU, and an ONNX
graph: tf2onnx converts ``BlockLSTM``, not cuDNN's ops).
"""
import collections
import contextlib
import threading

import keras
import tensorflow as tf
# Keras' own packing of Keras-layout weights into cuDNN's parameter buffer (the gate orders of
# CUDA and ROCm builds); it has no public name
from keras.src.backend.tensorflow.rnn import gru as keras_gru, lstm as keras_lstm

# open portable_kernels contexts, of every thread: MirroredStrategy traces each replica's step in a
# thread of its own, and a step traced on the portable kernels by mistake is only slower
_portable = collections.Counter()
_lock = threading.Lock()


@contextlib.contextmanager
def portable_kernels():
    """Recurrent layers traced while it is open run ``BlockLSTM`` and the GRU scan, GPU or not,
    in any thread (those of a strategy's replicas too)."""
    with _lock:
        _portable["open"] += 1
    try:
        yield
    finally:
        with _lock:
            _portable["open"] -= 1


def uses_cudnn(dtype) -> bool:
    """Whether a recurrent layer traced now on inputs of ``dtype`` runs cuDNN's kernels: a GPU is
    visible, :func:`portable_kernels` is not in force, and cuDNN has the dtype (float16 or
    float32: not mixed_bfloat16's bfloat16)."""
    return tf.as_dtype(dtype) in (tf.float16, tf.float32) and \
        not _portable["open"] and bool(tf.config.list_logical_devices("GPU"))


def cudnn_lstm(time_major, kernel, recurrent, bias):
    """The states [time, batch, units] of an LSTM from a zero state over ``time_major`` [time,
    batch, features], on cuDNN. Weights in Keras' LSTM layout: gate blocks (input, forget, cell,
    output), no forget bias beside ``bias``."""
    zeros = _zero_state(time_major, recurrent)
    _, states, _ = keras_lstm(time_major, zeros, zeros, None,
                              *_cast(time_major, kernel, recurrent, bias),
                              keras.activations.tanh, keras.activations.sigmoid,
                              return_sequences=True, time_major=True)
    return states


def cudnn_gru(time_major, kernel, recurrent, bias):
    """The states [time, batch, units] of a GRU (``reset_after``) from a zero state over
    ``time_major`` [time, batch, features], on cuDNN. Weights in Keras' GRU layout, that of
    :class:`~delft.sequenceLabelling.layers.bigru.BiGRU`."""
    _, states, _ = keras_gru(time_major, _zero_state(time_major, recurrent), None,
                             *_cast(time_major, kernel, recurrent, bias),
                             keras.activations.tanh, keras.activations.sigmoid,
                             return_sequences=True, time_major=True, reset_after=True)
    return states


def _zero_state(time_major, recurrent):
    return tf.zeros(tf.stack([tf.shape(time_major)[1], tf.shape(recurrent)[0]]), time_major.dtype)


def _cast(time_major, *weights):
    """The weights in the inputs' dtype (float16 under mixed precision): cuDNN takes one dtype."""
    return [tf.cast(tf.convert_to_tensor(w), time_major.dtype) for w in weights]
