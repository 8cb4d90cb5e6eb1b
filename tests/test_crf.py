"""Tests of the linear-chain CRF layer against brute-force enumeration of all paths."""
import itertools
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import tensorflow as tf
import keras

from delft.sequenceLabelling.layers.crf import ChainCRF

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ----------------------------------------------------------------------------- helpers

def make_crf(num_tags, seed):
    """A built CRF whose three weights hold seeded random values (not the small init)."""
    rng = np.random.default_rng(seed)
    crf = ChainCRF(num_tags)
    crf.build((None, None, num_tags))
    crf.transitions.assign(rng.normal(size=(num_tags, num_tags)).astype("float32"))
    crf.start_transitions.assign(rng.normal(size=(num_tags,)).astype("float32"))
    crf.end_transitions.assign(rng.normal(size=(num_tags,)).astype("float32"))
    return crf


def weights_of(crf):
    return (np.asarray(crf.transitions.numpy(), np.float64),
            np.asarray(crf.start_transitions.numpy(), np.float64),
            np.asarray(crf.end_transitions.numpy(), np.float64))


def path_score(pot, path, trans, start, end):
    """Unnormalised score of one path over one sequence's potentials [L, K] (float64)."""
    score = start[path[0]] + end[path[-1]]
    score += sum(pot[t, y] for t, y in enumerate(path))
    score += sum(trans[path[t - 1], path[t]] for t in range(1, len(path)))
    return score


def brute_force(pot, length, trans, start, end):
    """All paths of one sequence: (paths, scores, log Z) by enumeration of K**length paths."""
    k = pot.shape[-1]
    paths = list(itertools.product(range(k), repeat=length))
    scores = np.array([path_score(pot, p, trans, start, end) for p in paths])
    top = scores.max()
    log_z = top + np.log(np.exp(scores - top).sum())
    return paths, scores, log_z


def random_case(rng, batch, time, num_tags, padded=True):
    pot = rng.normal(scale=2.0, size=(batch, time, num_tags)).astype("float32")
    if padded:
        lengths = rng.integers(1, time + 1, size=batch).astype("int32")
        if batch:
            lengths[0] = time      # one full-length sequence
        if batch > 1:
            lengths[-1] = 1        # and one of a single token
    else:
        lengths = np.full(batch, time, dtype="int32")
    tags = rng.integers(0, num_tags, size=(batch, time)).astype("int32")
    # Padding holds garbage: -1 and out-of-range tags must be ignored, not indexed.
    for b, n in enumerate(lengths):
        tags[b, n:] = rng.choice([-1, num_tags + 3], size=time - n)
    return pot, tags, lengths


CASES = [(k, seed, padded) for k in (1, 2, 3, 4) for seed in range(3) for padded in (True, False)]


# ---------------------------------------------------------------------- brute force

@pytest.mark.parametrize("num_tags,seed,padded", CASES)
def test_log_likelihood_and_viterbi_match_brute_force(num_tags, seed, padded):
    rng = np.random.default_rng(100 * num_tags + seed)
    batch, time = int(rng.integers(1, 5)), int(rng.integers(1, 6))
    pot, tags, lengths = random_case(rng, batch, time, num_tags, padded)
    crf = make_crf(num_tags, seed)
    trans, start, end = weights_of(crf)

    ll = crf.log_likelihood(pot, tags, lengths).numpy()
    nll = crf.negative_log_likelihood(pot, tags, lengths).numpy()
    log_z = crf.log_partition(pot, lengths).numpy()
    best_tags, best_scores = crf.decode(pot, lengths)
    best_tags, best_scores = best_tags.numpy(), best_scores.numpy()
    assert ll.shape == (batch,) and ll.dtype == np.float32
    assert best_tags.shape == (batch, time) and best_tags.dtype == np.int32
    np.testing.assert_allclose(nll, -ll, rtol=0, atol=0)

    for b in range(batch):
        n = int(lengths[b])
        p = pot[b, :n].astype(np.float64)
        paths, scores, bf_log_z = brute_force(p, n, trans, start, end)
        gold = path_score(p, tags[b, :n], trans, start, end)
        np.testing.assert_allclose(log_z[b], bf_log_z, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ll[b], gold - bf_log_z, rtol=1e-5, atol=1e-5)
        best = int(np.argmax(scores))
        np.testing.assert_array_equal(best_tags[b, :n], paths[best])
        np.testing.assert_array_equal(best_tags[b, n:], 0)
        np.testing.assert_allclose(best_scores[b], scores[best], rtol=1e-5, atol=1e-5)


# ------------------------------------------------------- DeLFT's ChainCRF, from its definition

def _logsumexp(values, axis):
    top = values.max(axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.exp(values - top).sum(axis=axis))


def delft_chain_crf(x, y, length, U, b_start, b_end):
    """DeLFT's ChainCRF (Philipp Gross's Keras CRF: crf_layer.py of the TensorFlow line, ported
    to torch in 1.2's crf_pytorch.ChainCRF) on one sequence, written from its definition in
    numpy: ``add_boundary_energy`` adds ``b_start`` to the potentials of the first step and
    ``b_end`` to those of the last valid one; ``path_energy`` is the sum of the path's potentials
    and of ``U[y_t, y_t+1]``; ``free_energy`` is the log-sum-exp of all paths' energies by its
    recursion over the steps; the loss is free energy - path energy; decoding is the Viterbi
    recursion of the energies with back-pointers. Returns (loss, best path, its energy)."""
    energies = x[:length].astype(np.float64).copy()
    energies[0] += b_start
    energies[length - 1] += b_end
    path_energy = sum(energies[t, y[t]] for t in range(length)) + \
        sum(U[y[t], y[t + 1]] for t in range(length - 1))
    alpha = energies[0]
    for t in range(1, length):
        alpha = _logsumexp(alpha[:, None] + U, axis=0) + energies[t]
    free_energy = _logsumexp(alpha, axis=0)
    delta, pointers = energies[0], []
    for t in range(1, length):
        scores = delta[:, None] + U
        pointers.append(scores.argmax(axis=0))
        delta = scores.max(axis=0) + energies[t]
    path = [int(delta.argmax())]
    for back in reversed(pointers):
        path.append(int(back[path[-1]]))
    return free_energy - path_energy, path[::-1], float(delta.max())


@pytest.mark.parametrize("num_tags,seed", [(k, seed) for k in (2, 5, 9) for seed in range(3)])
def test_delft_chain_crf_is_the_same_computation(num_tags, seed):
    """BidLSTM_ChainCRF(_FEATURES) use our CRF: DeLFT's ChainCRF, with U, b_start and b_end as
    transitions, start and end transitions, gives the same loss and the same decoding (over
    sequences of every length, so the end energy sits on each row's last valid step)."""
    rng = np.random.default_rng(1000 + seed)
    batch, time = 6, 7
    pot, tags, lengths = random_case(rng, batch, time, num_tags)
    crf = make_crf(num_tags, seed)
    U, b_start, b_end = weights_of(crf)
    nll = crf.negative_log_likelihood(pot, tags, lengths).numpy()
    best_tags, best_scores = (t.numpy() for t in crf.decode(pot, lengths))
    for b in range(batch):
        n = int(lengths[b])
        loss, path, energy = delft_chain_crf(pot[b], tags[b], n, U, b_start, b_end)
        np.testing.assert_allclose(nll[b], loss, rtol=1e-5, atol=1e-4)
        assert best_tags[b, :n].tolist() == path
        np.testing.assert_allclose(best_scores[b], energy, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("num_tags,length", [(1, 3), (2, 4), (3, 3), (4, 2)])
def test_probabilities_of_all_paths_sum_to_one(num_tags, length):
    rng = np.random.default_rng(num_tags)
    crf = make_crf(num_tags, num_tags)
    pot = rng.normal(size=(1, length, num_tags)).astype("float32")
    paths = np.array(list(itertools.product(range(num_tags), repeat=length)), dtype="int32")
    n = len(paths)
    ll = crf.log_likelihood(np.repeat(pot, n, axis=0), paths, np.full(n, length, "int32"))
    np.testing.assert_allclose(np.exp(ll.numpy().astype(np.float64)).sum(), 1.0, atol=1e-5)
    # The best path's probability is the largest of all.
    best, _ = crf.decode(pot, [length])
    assert tuple(best.numpy()[0]) == tuple(paths[int(np.argmax(ll.numpy()))])


# ------------------------------------------------------------------------ gradients

def marginals(pot, length, trans, start, end):
    """P(y_t = k) for one sequence by enumeration: [length, K]."""
    paths, scores, log_z = brute_force(pot, length, trans, start, end)
    probs = np.exp(scores - log_z)
    out = np.zeros((length, pot.shape[-1]))
    for path, prob in zip(paths, probs):
        out[np.arange(length), list(path)] += prob
    return out


def test_gradients_are_finite_and_equal_expected_counts():
    rng = np.random.default_rng(7)
    num_tags = 3
    pot, tags, lengths = random_case(rng, 3, 4, num_tags)
    crf = make_crf(num_tags, 7)
    trans, start, end = weights_of(crf)
    pot_t = tf.constant(pot)
    with tf.GradientTape() as tape:
        tape.watch(pot_t)
        loss = tf.reduce_sum(crf.log_likelihood(pot_t, tags, lengths))
    variables = [crf.transitions, crf.start_transitions, crf.end_transitions]
    grads = tape.gradient(loss, [pot_t] + variables)
    for g in grads:
        assert g is not None
        assert np.all(np.isfinite(tf.convert_to_tensor(g).numpy()))
    for g in grads[1:]:
        assert np.abs(tf.convert_to_tensor(g).numpy()).sum() > 0
    # d log p / d potentials[b, t, k] = 1[tags[b, t] == k] - P(y_t = k), 0 on padding.
    expected = np.zeros_like(pot, dtype=np.float64)
    for b in range(3):
        n = int(lengths[b])
        expected[b, :n] = -marginals(pot[b, :n].astype(np.float64), n, trans, start, end)
        expected[b, np.arange(n), tags[b, :n]] += 1.0
    np.testing.assert_allclose(grads[0].numpy(), expected, atol=1e-5)


def test_gradient_equals_finite_differences():
    rng = np.random.default_rng(3)
    num_tags, time = 2, 3
    pot = rng.normal(size=(1, time, num_tags)).astype("float32")
    tags = np.array([[1, 0, 1]], "int32")
    lengths = np.array([time], "int32")
    crf = make_crf(num_tags, 3)
    variables = [crf.transitions, crf.start_transitions, crf.end_transitions]

    def loss_fn(p):
        return float(crf.negative_log_likelihood(p, tags, lengths).numpy()[0])

    pot_t = tf.constant(pot)
    with tf.GradientTape() as tape:
        tape.watch(pot_t)
        loss = tf.reduce_sum(crf.negative_log_likelihood(pot_t, tags, lengths))
    grads = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, [pot_t] + variables)]

    eps = 1e-2
    numeric = np.zeros_like(pot)
    for idx in np.ndindex(pot.shape):
        plus, minus = pot.copy(), pot.copy()
        plus[idx] += eps
        minus[idx] -= eps
        numeric[idx] = (loss_fn(plus) - loss_fn(minus)) / (2 * eps)
    np.testing.assert_allclose(grads[0], numeric, atol=2e-3)

    for var, grad in zip(variables, grads[1:]):
        base = var.numpy().copy()
        numeric = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            for sign in (1, -1):
                shifted = base.copy()
                shifted[idx] += sign * eps
                var.assign(shifted)
                numeric[idx] += sign * loss_fn(pot) / (2 * eps)
        var.assign(base)
        np.testing.assert_allclose(grad, numeric, atol=2e-3)


# ------------------------------------------------------------------------ edge cases

def test_empty_batch():
    crf = make_crf(3, 0)
    pot = tf.zeros([0, 5, 3])
    tags = tf.zeros([0, 5], tf.int32)
    lengths = tf.zeros([0], tf.int32)
    assert crf.log_likelihood(pot, tags, lengths).shape == (0,)
    best_tags, best_scores = crf.decode(pot, lengths)
    assert best_tags.shape == (0, 5) and best_scores.shape == (0,)
    with tf.GradientTape() as tape:
        tape.watch(pot)
        loss = tf.reduce_sum(crf.negative_log_likelihood(pot, tags, lengths))
    grads = tape.gradient(loss, [pot, crf.transitions])
    assert grads[0].shape == (0, 5, 3)
    np.testing.assert_array_equal(tf.convert_to_tensor(grads[1]).numpy(), 0.0)


def test_single_step_sequences():
    rng = np.random.default_rng(11)
    crf = make_crf(4, 11)
    trans, start, end = weights_of(crf)
    pot = rng.normal(size=(3, 1, 4)).astype("float32")
    tags = np.array([[0], [3], [2]], "int32")
    ll = crf.log_likelihood(pot, tags, [1, 1, 1]).numpy()
    best_tags, best_scores = crf.decode(pot, [1, 1, 1])
    unary = pot[:, 0].astype(np.float64) + start + end  # [B, K]
    log_z = np.log(np.exp(unary).sum(axis=1))
    np.testing.assert_allclose(ll, unary[np.arange(3), tags[:, 0]] - log_z, atol=1e-5)
    np.testing.assert_array_equal(best_tags.numpy()[:, 0], unary.argmax(axis=1))
    np.testing.assert_allclose(best_scores.numpy(), unary.max(axis=1), atol=1e-5)


def test_zero_lengths_are_empty_sequences():
    rng = np.random.default_rng(5)
    crf = make_crf(3, 5)
    pot = tf.constant(rng.normal(size=(2, 3, 3)).astype("float32"))
    tags = tf.constant([[-1, -1, -1], [0, 2, 1]])
    lengths = tf.constant([0, 3])
    with tf.GradientTape() as tape:
        tape.watch(pot)
        ll = crf.log_likelihood(pot, tags, lengths)
        total = tf.reduce_sum(ll)
    grad = tape.gradient(total, pot).numpy()
    assert ll.numpy()[0] == 0.0 and np.all(np.isfinite(ll.numpy()))
    assert np.all(np.isfinite(grad)) and np.all(grad[0] == 0.0)
    best_tags, best_scores = crf.decode(pot, lengths)
    np.testing.assert_array_equal(best_tags.numpy()[0], 0)
    assert best_scores.numpy()[0] == 0.0
    # A time axis of 0 steps.
    best_tags, best_scores = crf.decode(tf.zeros([2, 0, 3]), [0, 0])
    assert best_tags.shape == (2, 0) and best_scores.shape == (2,)
    assert crf.log_likelihood(tf.zeros([2, 0, 3]), tf.zeros([2, 0], tf.int32), [0, 0]).shape == (2,)


def test_padding_invariance():
    rng = np.random.default_rng(21)
    num_tags = 3
    pot, tags, lengths = random_case(rng, 4, 4, num_tags)
    crf = make_crf(num_tags, 21)
    ll = crf.log_likelihood(pot, tags, lengths).numpy()
    best_tags, best_scores = crf.decode(pot, lengths)

    garbage_pot = np.concatenate(
        [pot, rng.normal(scale=50.0, size=(4, 3, num_tags)).astype("float32")], axis=1)
    for b, n in enumerate(lengths):
        garbage_pot[b, n:] = rng.normal(scale=50.0, size=(7 - n, num_tags))
    garbage_tags = np.concatenate([tags, np.full((4, 3), 99, "int32")], axis=1)
    garbage_tags[garbage_tags < 0] = -7
    ll2 = crf.log_likelihood(garbage_pot, garbage_tags, lengths).numpy()
    best_tags2, best_scores2 = crf.decode(garbage_pot, lengths)
    np.testing.assert_allclose(ll2, ll, atol=1e-5)
    np.testing.assert_array_equal(best_tags2.numpy()[:, :4], best_tags.numpy())
    np.testing.assert_array_equal(best_tags2.numpy()[:, 4:], 0)
    np.testing.assert_allclose(best_scores2.numpy(), best_scores.numpy(), atol=1e-5)


def test_half_precision_potentials_give_float32():
    crf = make_crf(3, 1)
    pot = tf.random.normal([2, 3, 3], seed=1)
    ll32 = crf.log_likelihood(pot, tf.zeros([2, 3], tf.int32), [3, 2])
    ll16 = crf.log_likelihood(tf.cast(pot, tf.float16), tf.zeros([2, 3], tf.int32), [3, 2])
    assert ll16.dtype == tf.float32
    np.testing.assert_allclose(ll16.numpy(), ll32.numpy(), atol=5e-2)


# ------------------------------------------------------------------------ tf.function

def test_one_trace_for_all_shapes():
    num_tags = 3
    crf = make_crf(num_tags, 2)
    traces = []
    spec = [tf.TensorSpec([None, None, num_tags], tf.float32),
            tf.TensorSpec([None, None], tf.int32),
            tf.TensorSpec([None], tf.int32)]

    @tf.function(input_signature=spec)
    def step(pot, tags, lengths):
        traces.append(1)
        with tf.GradientTape() as tape:
            tape.watch(pot)
            nll = crf.negative_log_likelihood(pot, tags, lengths)
            total = tf.reduce_sum(nll)
        grads = tape.gradient(total, [pot, crf.transitions])
        best_tags, best_scores = crf.decode(pot, lengths)
        return nll, best_tags, best_scores, grads[0], grads[1]

    rng = np.random.default_rng(0)
    for batch, time in [(4, 5), (0, 3), (2, 1), (3, 2)]:
        pot, tags, lengths = random_case(rng, batch, time, num_tags)
        nll, best_tags, best_scores, g_pot, g_trans = step(pot, tags, lengths)
        assert nll.shape == (batch,) and best_tags.shape == (batch, time)
        assert g_pot.shape == (batch, time, num_tags)
        assert np.all(np.isfinite(g_pot.numpy())) and np.all(np.isfinite(g_trans.numpy()))
        np.testing.assert_allclose(
            nll.numpy(), crf.negative_log_likelihood(pot, tags, lengths).numpy(), atol=1e-5)
        eager_tags, eager_scores = crf.decode(pot, lengths)
        np.testing.assert_array_equal(best_tags.numpy(), eager_tags.numpy())
        np.testing.assert_allclose(best_scores.numpy(), eager_scores.numpy(), atol=1e-5)
    assert len(traces) == 1
    assert step.experimental_get_tracing_count() == 1


# ------------------------------------------------------------------ Keras integration

def test_get_config_round_trip():
    crf = ChainCRF(5, name="my_crf")
    config = crf.get_config()
    assert config["num_tags"] == 5 and config["name"] == "my_crf"
    clone = ChainCRF.from_config(config)
    assert clone.num_tags == 5 and clone.name == "my_crf"
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(crf))
    assert isinstance(restored, ChainCRF) and restored.num_tags == 5
    with pytest.raises(ValueError):
        ChainCRF(0)


def test_call_is_pass_through_and_checks_tags():
    crf = ChainCRF(3)
    x = tf.random.normal([2, 4, 3], seed=3)
    np.testing.assert_array_equal(crf(x).numpy(), x.numpy())
    assert len(crf.weights) == 3
    with pytest.raises(ValueError):
        ChainCRF(4)(x)


def test_keras_mask_is_dropped_quietly():
    inputs = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 8, mask_zero=True)(inputs)
    potentials = keras.layers.Dense(4)(embedded)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outputs = ChainCRF(4)(potentials)
    model = keras.Model(inputs, outputs)
    result = model(np.array([[1, 2, 0]]))
    assert result.shape == (1, 3, 4)
    assert getattr(result, "_keras_mask", None) is None


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # keras save
def test_model_save_and_reload(tmp_path):
    keras.utils.set_random_seed(1)
    inputs = keras.Input((None, 4))
    potentials = keras.layers.Dense(3)(inputs)
    outputs = ChainCRF(3, name="crf")(potentials)
    model = keras.Model(inputs, outputs)
    crf = model.get_layer("crf")
    crf.transitions.assign(np.arange(9, dtype="float32").reshape(3, 3) / 10)
    path = str(tmp_path / "x.keras")
    model.save(path)
    reloaded = keras.models.load_model(path, compile=False)
    for a, b in zip(model.weights, reloaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    x = np.random.default_rng(0).normal(size=(2, 5, 4)).astype("float32")
    crf2 = reloaded.get_layer("crf")
    assert isinstance(crf2, ChainCRF)
    pot, pot2 = model(x), reloaded(x)
    np.testing.assert_array_equal(pot.numpy(), pot2.numpy())
    tags, scores = crf.decode(pot, [5, 3])
    tags2, scores2 = crf2.decode(pot2, [5, 3])
    np.testing.assert_array_equal(tags.numpy(), tags2.numpy())
    np.testing.assert_array_equal(scores.numpy(), scores2.numpy())


def test_training_lowers_the_loss():
    keras.utils.set_random_seed(4)
    rng = np.random.default_rng(4)
    num_tags = 3
    x = rng.normal(size=(8, 6, 5)).astype("float32")
    # Tags follow a fixed chain 0 -> 1 -> 2 -> 0 ... from a random start: learnable transitions.
    first = rng.integers(0, num_tags, size=8)
    tags = ((first[:, None] + np.arange(6)[None, :]) % num_tags).astype("int32")
    lengths = rng.integers(2, 7, size=8).astype("int32")
    dense = keras.layers.Dense(num_tags)
    crf = ChainCRF(num_tags)
    dense.build((None, None, 5))
    crf.build((None, None, num_tags))
    variables = dense.trainable_weights + crf.trainable_weights
    optimizer = keras.optimizers.Adam(0.1)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(crf.negative_log_likelihood(dense(x), tags, lengths))
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    losses = [float(train_step()) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]
    best, _ = crf.decode(dense(x), lengths)
    mask = np.arange(6)[None, :] < lengths[:, None]
    assert (best.numpy() == tags)[mask].mean() > 0.9


# -------------------------------------------------------------------- tf.distribute

MIRRORED_CODE = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from delft.sequenceLabelling.layers.crf import ChainCRF

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.num_replicas_in_sync == 2
    rng = np.random.default_rng(0)
    K, T, B = 3, 4, 3
    pot = rng.normal(size=(B, T, K)).astype("float32")
    tags = rng.integers(0, K, size=(B, T)).astype("int32")
    lengths = np.array([4, 1, 2], "int32")
    tags[1, 1:] = -1
    tags[2, 2:] = -1
    with strategy.scope():
        crf = ChainCRF(K)
        crf.build((None, None, K))
    crf.transitions.assign(rng.normal(size=(K, K)).astype("float32"))
    mirrored = type(crf.transitions.value).__name__

    def per_replica(ctx):
        # Replica 0 gets the whole global batch, replica 1 an empty (0-example) batch.
        part = slice(0, B) if ctx.replica_id_in_sync_group == 0 else slice(0, 0)
        return tf.constant(pot[part]), tf.constant(tags[part]), tf.constant(lengths[part])

    dist = strategy.experimental_distribute_values_from_function(per_replica)

    def step(p, t, l):
        with tf.GradientTape() as tape:
            nll = crf.negative_log_likelihood(p, t, l)
            loss = tf.reduce_sum(nll) / B
        grads = tape.gradient(loss, crf.trainable_weights)
        best, scores = crf.decode(p, l)
        return nll, best, scores, grads

    @tf.function
    def distributed_step(args):
        nll, best, scores, grads = strategy.run(step, args=args)
        summed = [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) for g in grads]
        return nll, best, scores, summed

    nll, best, scores, grads = distributed_step(dist)
    local = lambda v: [x.numpy() for x in strategy.experimental_local_results(v)]
    ref_nll, ref_best, ref_scores, ref_grads = step(*[tf.constant(a) for a in (pot, tags, lengths)])
    out = {
        "mirrored": mirrored,
        "nll_shapes": [list(x.shape) for x in local(nll)],
        "best_shapes": [list(x.shape) for x in local(best)],
        "score_shapes": [list(x.shape) for x in local(scores)],
        "nll_diff": float(np.abs(local(nll)[0] - ref_nll.numpy()).max()),
        "best_equal": bool(np.array_equal(local(best)[0], ref_best.numpy())),
        "grad_diff": max(float(np.abs(g.numpy() - tf.convert_to_tensor(r).numpy()).max())
                         for g, r in zip(grads, ref_grads)),
        "finite": all(bool(np.all(np.isfinite(g.numpy()))) for g in grads),
    }
    print("RESULT " + json.dumps(out))
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: TF issue 50487 (thread pool of cross-device ops)
""")


def test_mirrored_strategy_with_an_empty_replica():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("DELFT_CPU_REPLICAS", None)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", MIRRORED_CODE], capture_output=True, text=True,
                          env=env, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["mirrored"] == "MirroredVariable"
    assert out["nll_shapes"] == [[3], [0]]
    assert out["best_shapes"] == [[3, 4], [0, 4]]
    assert out["score_shapes"] == [[3], [0]]
    assert out["nll_diff"] < 1e-5 and out["best_equal"]
    assert out["finite"] and out["grad_diff"] < 1e-5
