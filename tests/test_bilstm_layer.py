"""The fused BiLSTM layer computes what Keras' masked Bidirectional(LSTM) computes."""
import numpy as np
import pytest
import tensorflow as tf
import keras

import delft  # noqa: F401
from delft.sequenceLabelling.layers.bilstm import BiLSTM

UNITS, FEATURES = 4, 3


def keras_to_block(kernel, recurrent, bias):
    """Keras gates (i, f, c, o) -> BlockLSTM gates (i, c, f, o); BlockLSTM adds forget_bias=1."""
    def reorder(w):
        i, f, c, o = np.split(w, 4, axis=-1)
        return np.concatenate([i, c, f, o], axis=-1)
    bias = reorder(bias).copy()
    bias[2 * UNITS:3 * UNITS] -= 1.0
    return reorder(kernel), reorder(recurrent), bias


def paired_layers(return_sequences):
    reference = keras.layers.Bidirectional(
        keras.layers.LSTM(UNITS, return_sequences=return_sequences))
    ours = BiLSTM(UNITS, return_sequences=return_sequences)
    x = tf.random.stateless_normal([1, 2, FEATURES], seed=[1, 2])
    reference(x, mask=tf.ones([1, 2], bool))
    ours(x, tf.constant([2]))
    rng = np.random.default_rng(0)
    weights = [rng.normal(scale=0.5, size=w.shape).astype("float32")
               for w in reference.get_weights()]
    reference.set_weights(weights)
    ours.set_weights(list(keras_to_block(*weights[:3])) + list(keras_to_block(*weights[3:])))
    return reference, ours


@pytest.mark.parametrize("return_sequences", [True, False])
def test_matches_keras_masked_bidirectional_lstm(return_sequences):
    reference, ours = paired_layers(return_sequences)
    lengths = np.array([5, 1, 3, 0], dtype=np.int32)
    x = np.random.default_rng(1).normal(size=(4, 5, FEATURES)).astype("float32")
    mask = np.arange(5)[None, :] < lengths[:, None]
    expected = reference(x, mask=tf.constant(mask)).numpy()
    got = ours(x, tf.constant(lengths)).numpy()
    if return_sequences:
        np.testing.assert_allclose(got[mask], expected[mask], rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(got[lengths > 0], expected[lengths > 0], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[lengths == 0], 0.0)


def test_padding_does_not_change_valid_outputs():
    layer = BiLSTM(UNITS, return_sequences=True)
    x = np.random.default_rng(2).normal(size=(2, 6, FEATURES)).astype("float32")
    lengths = tf.constant([3, 6])
    padded = x.copy()
    padded[0, 3:] = 100.0
    np.testing.assert_allclose(layer(padded, lengths).numpy()[0, :3],
                               layer(x, lengths).numpy()[0, :3], rtol=1e-6)


def assert_gradients_reach_every_weight_and_trace_once(layer):
    """``layer(x, lengths)``: every trainable weight gets a gradient, for several batch and time
    sizes through one traced function (time >= 2, so recurrent kernels get one too)."""
    layer(tf.zeros([1, 1, FEATURES]), tf.constant([1]))
    traces = []

    @tf.function(input_signature=[tf.TensorSpec([None, None, FEATURES]),
                                  tf.TensorSpec([None], tf.int32)])
    def gradients(x, lengths):
        traces.append(1)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(x, lengths) ** 2)
        return tape.gradient(loss, layer.trainable_variables)

    for batch, time in ((2, 3), (5, 2), (1, 7)):
        x = tf.random.stateless_normal([batch, time, FEATURES], seed=[batch, time])
        grads = gradients(x, tf.fill([batch], time))
        assert all(float(tf.reduce_sum(tf.abs(g))) > 0 for g in grads)
    assert len(traces) == 1


def test_gradients_reach_every_weight_and_traces_once():
    assert_gradients_reach_every_weight_and_trace_once(BiLSTM(UNITS, return_sequences=True))


def test_recurrent_dropout_uses_keras_lstm_and_config_round_trips():
    layer = BiLSTM(UNITS, return_sequences=True, recurrent_dropout=0.5)
    assert tuple(layer(tf.ones([2, 3, FEATURES]), tf.constant([3, 2])).shape) == (2, 3, 2 * UNITS)
    assert layer.keras_lstm is not None
    clone = BiLSTM.from_config(BiLSTM(UNITS, return_sequences=True).get_config())
    assert clone.units == UNITS and clone.return_sequences and clone.recurrent_dropout == 0.0
