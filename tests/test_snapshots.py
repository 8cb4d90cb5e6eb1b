"""Early stopping's snapshot of the weights (delft/training/snapshots.py)."""
import numpy as np


def test_weights_snapshot_keeps_its_values_while_the_weights_move():
    """Early stopping's snapshot is ``get_weights()``'s list (order, shapes, values) and keeps
    those values through a fused Adam step and an assign after it; set back, it restores them."""
    import keras
    import tensorflow as tf

    from delft.training.adam import Adam
    from delft.training.snapshots import weights_snapshot

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(2)])
    model.layers[1].trainable = False  # a frozen weight is in the list too
    before = model.get_weights()
    snapshot = weights_snapshot(model)
    Adam(learning_rate=0.5).apply_gradients(
        [(tf.ones_like(v), v) for v in model.trainable_variables])
    model.layers[0].bias.assign_add(tf.ones(4))
    assert not np.array_equal(model.get_weights()[0], before[0])
    assert [tuple(t.shape) for t in snapshot] == [w.shape for w in before]
    for kept, value in zip(snapshot, before):
        np.testing.assert_array_equal(np.asarray(kept), value)
    model.set_weights(snapshot)
    for restored, value in zip(model.get_weights(), before):
        np.testing.assert_array_equal(restored, value)
