"""The BiGRU layer computes what Keras' masked Bidirectional(GRU) computes (reset_after)."""
import numpy as np
import tensorflow as tf
import keras

import delft  # noqa: F401
from delft.sequenceLabelling.layers.bigru import BiGRU
from test_bilstm_layer import (FEATURES, UNITS,
                               assert_gradients_reach_every_weight_and_trace_once)



def paired_layers():
    reference = keras.layers.Bidirectional(keras.layers.GRU(UNITS, return_sequences=True))
    ours = BiGRU(UNITS)
    x = tf.random.stateless_normal([1, 2, FEATURES], seed=[1, 2])
    reference(x, mask=tf.ones([1, 2], bool))
    ours(x, tf.constant([2]))
    rng = np.random.default_rng(0)
    weights = [rng.normal(scale=0.5, size=w.shape).astype("float32")
               for w in reference.get_weights()]
    reference.set_weights(weights)
    ours.set_weights(weights)  # the same layout: kernel, recurrent kernel, bias [2, 3 units]
    return reference, ours


def test_matches_keras_masked_bidirectional_gru():
    reference, ours = paired_layers()
    lengths = np.array([5, 1, 3], dtype=np.int32)
    x = np.random.default_rng(1).normal(size=(3, 5, FEATURES)).astype("float32")
    mask = np.arange(5)[None, :] < lengths[:, None]
    expected = reference(x, mask=tf.constant(mask)).numpy()
    got = ours(x, tf.constant(lengths)).numpy()
    np.testing.assert_allclose(got[mask], expected[mask], rtol=1e-5, atol=1e-6)


def test_padding_does_not_change_valid_outputs():
    layer = BiGRU(UNITS)
    x = np.random.default_rng(2).normal(size=(2, 6, FEATURES)).astype("float32")
    lengths = tf.constant([3, 6])
    padded = x.copy()
    padded[0, 3:] = 100.0
    np.testing.assert_allclose(layer(padded, lengths).numpy()[0, :3],
                               layer(x, lengths).numpy()[0, :3], rtol=1e-6)


def test_gradients_reach_every_weight_and_traces_once():
    assert_gradients_reach_every_weight_and_trace_once(BiGRU(UNITS))


def test_recurrent_dropout_trains_keras_gru_and_infers_with_its_weights():
    layer = BiGRU(UNITS, recurrent_dropout=0.5)
    x = np.random.default_rng(3).normal(size=(2, 4, FEATURES)).astype("float32")
    lengths = np.array([4, 2], np.int32)
    inferred = layer(x, tf.constant(lengths)).numpy()
    assert layer.keras_gru is not None
    mask = np.arange(4)[None, :] < lengths[:, None]
    keras_inference = layer.keras_gru(x, mask=tf.constant(mask), training=False).numpy()
    np.testing.assert_allclose(inferred[mask], keras_inference[mask], rtol=1e-5, atol=1e-6)
    trained = layer(x, tf.constant(lengths), training=True).numpy()
    assert not np.allclose(trained[mask], inferred[mask])  # the dropout acted


def test_gradients_match_keras_gru():
    """The hand-written backward recursion gives Keras' gradients, for inputs and weights."""
    reference, ours = paired_layers()
    lengths = np.array([5, 2, 4], dtype=np.int32)
    x = tf.constant(np.random.default_rng(4).normal(size=(3, 5, FEATURES)).astype("float32"))
    mask = np.arange(5)[None, :] < lengths[:, None]
    upstream = tf.constant(np.random.default_rng(5).normal(size=(3, 5, 2 * UNITS)) * mask[..., None],
                           tf.float32)

    def gradients(layer, run):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(run(layer) * upstream)
        return tape.gradient(loss, [x] + layer.trainable_variables)

    expected = gradients(reference, lambda layer: layer(x, mask=tf.constant(mask)))
    got = gradients(ours, lambda layer: layer(x, tf.constant(lengths)))
    np.testing.assert_allclose(got[0].numpy()[mask], expected[0].numpy()[mask], rtol=1e-4,
                               atol=1e-5)
    for g, e in zip(got[1:], expected[1:]):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-5)
