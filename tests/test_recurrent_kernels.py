"""BiLSTM and BiGRU on cuDNN's kernels (a GPU) and on the portable ones (BlockLSTM, the GRU scan):
the same numbers from the same weights.

On the CPU, cuDNN is stood in for by Keras' own LSTM and GRU (their generic kernels, fed the
weights the layers map for cuDNN): the mapping and the wiring of both directions are checked
here; where a GPU is, cuDNN itself is compared.
"""
import contextlib
import functools
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf

from delft.sequenceLabelling import recurrent_kernels
from delft.sequenceLabelling.layers.bigru import BiGRU
from delft.sequenceLabelling.layers.bilstm import BiLSTM

FEATURES, UNITS = 5, 4
LENGTHS = np.array([6, 1, 4, 6, 2], np.int32)  # right-padded, of several lengths
HAS_GPU = bool(tf.config.list_physical_devices("GPU"))


MAKERS = {"lstm sequences": lambda: BiLSTM(UNITS, return_sequences=True),
          "lstm last states": lambda: BiLSTM(UNITS),
          "lstm of recurrent dropout": lambda: BiLSTM(UNITS, return_sequences=True,
                                                      recurrent_dropout=0.3),
          "gru": lambda: BiGRU(UNITS),
          "gru of recurrent dropout": lambda: BiGRU(UNITS, recurrent_dropout=0.3)}


def built(name):
    """A recurrent layer of each kind, weights and biases drawn (the LSTM's forget bias shows)."""
    layer = MAKERS[name]()
    layer(tf.zeros([1, 1, FEATURES]), tf.constant([1]))
    rng = np.random.default_rng(0)
    layer.set_weights([rng.normal(scale=0.5, size=w.shape).astype("float32")
                       for w in layer.get_weights()])
    return layer


def inputs():
    return tf.constant(np.random.default_rng(1).normal(
        size=(len(LENGTHS), LENGTHS.max(), FEATURES)).astype("float32"))


def valid(outputs):
    """The outputs the heads read: the steps within each row's length."""
    outputs = np.asarray(outputs)
    if outputs.ndim == 2:
        return outputs
    return outputs[np.arange(outputs.shape[1])[None, :] < LENGTHS[:, None]]


def keras_generic(kind, time_major, kernel, recurrent, bias):
    """What ``recurrent_kernels.cudnn_<kind>`` returns, by Keras' generic (non-cuDNN) kernel."""
    make = keras.layers.LSTM if kind == "lstm" else functools.partial(keras.layers.GRU,
                                                                      reset_after=True)
    layer = make(int(recurrent.shape[0]), return_sequences=True, use_cudnn=False)
    batch_major = tf.transpose(time_major, [1, 0, 2])
    layer.build(batch_major.shape)
    layer.set_weights([np.asarray(w) for w in (kernel, recurrent, bias)])
    return tf.transpose(layer(batch_major), [1, 0, 2])


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_weights_mapped_for_cudnn_give_the_portable_numbers(name, monkeypatch):
    layer = built(name)
    x = inputs()
    portable = layer(x, tf.constant(LENGTHS))
    monkeypatch.setattr(recurrent_kernels, "uses_cudnn", lambda dtype: True)
    monkeypatch.setattr(recurrent_kernels, "cudnn_lstm", functools.partial(keras_generic, "lstm"))
    monkeypatch.setattr(recurrent_kernels, "cudnn_gru", functools.partial(keras_generic, "gru"))
    mapped = layer(x, tf.constant(LENGTHS))
    np.testing.assert_allclose(valid(mapped), valid(portable), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layer", [BiLSTM(UNITS, return_sequences=True), BiGRU(UNITS),
                                   BiLSTM(UNITS, dtype="mixed_float16")],
                         ids=["lstm", "gru", "lstm mixed_float16"])
def test_graphs_run_cudnn_where_a_gpu_is_and_the_portable_kernels_for_export(layer, monkeypatch):
    """The graph a step traces on a GPU machine holds cuDNN's op, in the layer's compute dtype
    (built here, not run: a GPU is faked); traced under ``portable_kernels``, as delft/export
    does, it holds none."""
    layer(tf.zeros([1, 1, FEATURES]), tf.constant([1]))
    real = tf.config.list_logical_devices
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind=None: [
        tf.config.LogicalDevice("/device:GPU:0", "GPU")] if kind == "GPU" else real(kind))

    def ops(function):
        graph = tf.function(function).get_concrete_function(
            tf.TensorSpec([None, None, FEATURES]), tf.TensorSpec([None], tf.int32)).graph
        return {(op.type, op.get_attr("T") if op.type == "CudnnRNNV3" else None)
                for op in graph.get_operations()}

    def portable(x, lengths):
        with recurrent_kernels.portable_kernels():
            return layer(x, lengths)

    assert ("CudnnRNNV3", tf.as_dtype(layer.compute_dtype)) in ops(layer)
    assert "CudnnRNNV3" not in {kind for kind, _ in ops(portable)}
    assert recurrent_kernels.uses_cudnn(tf.float32)
    seen = []
    with recurrent_kernels.portable_kernels():  # MirroredStrategy traces replicas in threads
        thread = threading.Thread(target=lambda: seen.append(recurrent_kernels.uses_cudnn(
            tf.float32)))
        thread.start()
        thread.join()
    assert seen == [False]
    assert not recurrent_kernels.uses_cudnn(tf.bfloat16)  # cuDNN has no bfloat16 RNN


@pytest.mark.skipif(not HAS_GPU, reason="cuDNN's kernels need a GPU (none on this machine)")
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_cudnn_gives_the_portable_numbers_and_gradients(name):
    assert recurrent_kernels.uses_cudnn(tf.float32)
    layer = built(name)
    x = inputs()
    enabled = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)  # float32 on both sides

    def run(portable):
        with recurrent_kernels.portable_kernels() if portable else contextlib.nullcontext():
            @tf.function
            def step(x):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    outputs = layer(x, tf.constant(LENGTHS))
                    loss = tf.reduce_sum(tf.where(tf.constant(valid_mask(outputs)), outputs, 0.0))
                return outputs, tape.gradient(loss, [x] + layer.trainable_variables)
            return step(x)

    try:
        (cudnn, cudnn_gradients), (portable, portable_gradients) = run(False), run(True)
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(enabled)
    np.testing.assert_allclose(valid(cudnn), valid(portable), rtol=1e-5, atol=1e-5)
    for got, expected in zip(cudnn_gradients, portable_gradients):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def valid_mask(outputs):
    """True at the steps within each row's length (every entry of a 2-D output)."""
    if outputs.shape.rank == 2:
        return np.ones(tuple(outputs.shape), bool)
    return np.broadcast_to((np.arange(LENGTHS.max())[None, :] < LENGTHS[:, None])[..., None],
                           tuple(outputs.shape))
