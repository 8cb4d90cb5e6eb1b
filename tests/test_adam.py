"""delft.training.adam: Keras' Adam and AdamW with one fused op a weight, the same updates."""
import json

import numpy as np
import pytest

from conftest import run_python

SHAPES = [(7, 5), (5,), (3, 4, 2)]


def gradients_of_step(step):
    rng = np.random.default_rng(step)
    # magnitudes from 1e-6 to 1: Adam's moments of a rarely used embedding row as of a busy weight
    return [rng.normal(size=shape).astype("float32") * 10.0 ** rng.integers(-6, 1, size=shape)
            for shape in SHAPES]


def trained_weights(optimizer, steps=20, compiled=True):
    """The weights after ``steps`` updates by ``optimizer`` from the same start and gradients."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    weights = [tf.Variable(rng.normal(size=shape).astype("float32")) for shape in SHAPES]

    def apply(gradients):
        optimizer.apply_gradients(zip(gradients, weights))

    apply = tf.function(apply) if compiled else apply
    for step in range(steps):
        apply([tf.constant(g) for g in gradients_of_step(step)])
    return [w.numpy() for w in weights]


def initial_weights():
    return trained_weights(None, steps=0)


def assert_same_updates(ours, reference, start):
    """``ours`` moved the weights from ``start`` as ``reference`` did, within 1e-4 of the move:
    the kernel computes ``1 - beta_2`` in float32 (1 - 0.999f = 0.0010000467), Keras in Python
    (0.001), so the second moments differ by 5e-5 of themselves."""
    moved = max(np.abs(r - s).max() for r, s in zip(reference, start))
    assert moved > 1e-3  # the weights did move: the comparison is not vacuous
    difference = max(np.abs(o - r).max() for o, r in zip(ours, reference))
    assert difference < 1e-4 * moved


@pytest.mark.parametrize("compiled", [True, False])
def test_adam_updates_as_keras_adam(compiled):
    import keras

    from delft.training.adam import Adam

    ours = trained_weights(Adam(learning_rate=1e-2), compiled=compiled)
    assert_same_updates(ours, trained_weights(keras.optimizers.Adam(learning_rate=1e-2),
                                              compiled=compiled), initial_weights())


def test_adamw_with_a_schedule_updates_as_keras_adamw():
    import keras

    from delft.training.adam import AdamW
    from delft.training.loop import WarmupLinearDecay

    def options():
        return {"learning_rate": WarmupLinearDecay(1e-2, 5, 30), "weight_decay": 0.1}

    assert_same_updates(trained_weights(AdamW(**options())),
                        trained_weights(keras.optimizers.AdamW(**options())),
                        initial_weights())


def traced_ops(optimizer):
    """The op types of a traced ``apply_gradients`` of ``optimizer`` on weights of SHAPES."""
    import tensorflow as tf

    weights = [tf.Variable(np.zeros(shape, "float32")) for shape in SHAPES]
    optimizer.build(weights)
    graph = tf.function(lambda gradients: optimizer.apply_gradients(
        zip(gradients, weights))).get_concrete_function(
            [tf.TensorSpec(shape, tf.float32) for shape in SHAPES]).graph
    return [op.type for op in graph.get_operations()]


def test_the_update_is_one_op_a_weight_and_the_step_s_scalars_are_taken_once():
    import keras

    from delft.training.adam import Adam, AdamW
    from delft.training.loop import WarmupLinearDecay

    ours, keras_ops = traced_ops(Adam()), traced_ops(keras.optimizers.Adam())
    assert ours.count("ResourceApplyAdam") == len(SHAPES)
    assert "ResourceApplyAdam" not in keras_ops
    assert len(ours) < len(keras_ops) - 10 * len(SHAPES)
    assert ours.count("Pow") == 2 and keras_ops.count("Pow") == 2 * len(SHAPES)
    # a schedule's learning rate (one Minimum each): once for the update, once for the decay
    decayed = traced_ops(AdamW(learning_rate=WarmupLinearDecay(1.0, 2, 4), weight_decay=0.1))
    keras_decayed = traced_ops(keras.optimizers.AdamW(learning_rate=WarmupLinearDecay(1.0, 2, 4),
                                                      weight_decay=0.1))
    assert decayed.count("Minimum") == 2 and keras_decayed.count("Minimum") == 1 + len(SHAPES)


@pytest.mark.parametrize("options", [{"amsgrad": True}, {}])
def test_amsgrad_and_sparse_gradients_keep_keras_update(options):
    """AMSGrad and sparse gradients (no fused kernel for them) take Keras' own update."""
    import keras
    import tensorflow as tf

    from delft.training.adam import Adam

    def weights_after(optimizer):
        table = tf.Variable(np.arange(12, dtype="float32").reshape(4, 3))
        gradient = tf.IndexedSlices(tf.constant([[1.0, -2.0, 0.5]]), tf.constant([2]),
                                    tf.constant([4, 3]))
        dense = tf.Variable(np.ones(3, "float32"))
        for _ in range(3):
            optimizer.apply_gradients([(gradient, table), (tf.constant([1.0, 0.0, -1.0]), dense)])
        return table.numpy(), dense.numpy()

    ours = weights_after(Adam(learning_rate=0.1, **options))
    reference = weights_after(keras.optimizers.Adam(learning_rate=0.1, **options))
    assert not np.array_equal(ours[0], np.arange(12, dtype="float32").reshape(4, 3))
    np.testing.assert_array_equal(ours[0], reference[0])
    if options.get("amsgrad"):
        np.testing.assert_array_equal(ours[1], reference[1])
    else:
        assert_same_updates([ours[1]], [reference[1]], [np.ones(3, "float32")])


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_config_round_trip(name):
    import keras

    from delft.training import adam

    optimizer = getattr(adam, name)(learning_rate=3e-4, beta_2=0.98, epsilon=1e-6)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is type(optimizer)
    assert restored.get_config() == optimizer.get_config()


MIRRORED = """
import json
import numpy as np
import tensorflow as tf
from delft.utilities import devices
from delft.training.adam import Adam, AdamW
from delft.training.loop import WarmupLinearDecay

strategy = devices.get_strategy(multi_gpu=True)
shapes = [(7, 5), (5,)]
rng = np.random.default_rng(0)
start = [rng.normal(size=s).astype("float32") for s in shapes]
gradients = [[rng.normal(size=s).astype("float32") for s in shapes] for _ in range(5)]
OPTIMIZERS = {
    "Adam": lambda: Adam(learning_rate=1e-2),
    # a schedule's learning rate is computed on each replica: a value per replica
    "Adam, a schedule": lambda: Adam(learning_rate=WarmupLinearDecay(1e-2, 2, 6)),
    "AdamW, a schedule": lambda: AdamW(learning_rate=WarmupLinearDecay(1e-2, 2, 6),
                                       weight_decay=0.5),
}

def train(strategy, make_optimizer):
    with strategy.scope():
        weights = [tf.Variable(w) for w in start]
        optimizer = make_optimizer()
        optimizer.build(weights)

    @tf.function
    def step(step_gradients):
        def replica(step_gradients):
            context = tf.distribute.get_replica_context()
            share = 1.0 / context.num_replicas_in_sync  # each replica holds 1/N of the sum
            optimizer.apply_gradients([(g * share, w) for g, w in zip(step_gradients, weights)])
        strategy.run(replica, args=(step_gradients,))

    for step_gradients in gradients:
        step([tf.constant(g) for g in step_gradients])
    return [[c.numpy() for c in strategy.experimental_local_results(w)] for w in weights]

for name, make_optimizer in OPTIMIZERS.items():
    two = train(strategy, make_optimizer)
    one = train(tf.distribute.get_strategy(), make_optimizer)
    print(json.dumps({"optimizer": name, "replicas": strategy.num_replicas_in_sync,
                      "copies": len(two[0]),
                      "moved": float(np.abs(one[0][0] - start[0]).max()),
                      "difference": max(float(np.abs(c - o[0]).max())
                                        for w, o in zip(two, one) for c in w)}))
"""


def test_each_replica_s_weights_move_as_on_one_device(tmp_path):
    """Under MirroredStrategy the fused op updates every replica's copy of a weight, each as
    one device's update, with a constant rate or a schedule, with AdamW's decay (2 logical CPU
    devices)."""
    script = tmp_path / "mirrored_adam.py"
    script.write_text(MIRRORED)
    run = run_python([script], DELFT_CPU_REPLICAS=2)
    assert run.returncode == 0, run.stderr[-3000:]
    results = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert [r["optimizer"] for r in results] == ["Adam", "Adam, a schedule", "AdamW, a schedule"]
    for result in results:
        assert result["replicas"] == result["copies"] == 2
        assert result["moved"] > 1e-2
        assert result["difference"] < 1e-6
