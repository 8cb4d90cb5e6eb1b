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


def test_odd_sizes_give_each_row_its_own_result_and_no_warning(tmp_path):
    """An odd batch with an odd input or cell size is run with one zero row more (BlockLSTM logs
    a warning at every such call): the rows' outputs are those of each row alone, and a training
    step on such sizes leaves no warning on stderr."""
    from conftest import run_python

    layer = BiLSTM(5, return_sequences=True)
    x = np.random.default_rng(3).normal(size=(3, 4, 3)).astype("float32")
    lengths = np.array([4, 2, 3], dtype=np.int32)
    together = layer(x, tf.constant(lengths)).numpy()
    for row in range(3):
        alone = layer(x[row:row + 1], tf.constant(lengths[row:row + 1])).numpy()
        np.testing.assert_allclose(together[row, :lengths[row]], alone[0, :lengths[row]],
                                   rtol=1e-5, atol=1e-6)
    script = tmp_path / "odd.py"
    script.write_text(
        "import tensorflow as tf\n"
        "from delft.sequenceLabelling.layers.bilstm import BiLSTM\n"
        "layer = BiLSTM(25, return_sequences=True)\n"
        "x = tf.random.normal([7, 5, 25])\n"
        "with tf.GradientTape() as tape:\n"
        "    loss = tf.reduce_sum(layer(x, tf.constant([5, 4, 3, 2, 1, 5, 5])))\n"
        "assert all(g is not None for g in tape.gradient(loss, layer.trainable_variables))\n")
    completed = run_python([script], cwd=tmp_path, timeout=120, TF_CPP_MIN_LOG_LEVEL="0")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "BlockLSTMOp is inefficient" not in completed.stderr
