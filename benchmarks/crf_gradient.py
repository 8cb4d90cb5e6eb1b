"""The CRF's loss and gradient: forward-backward written out against autodiff of the forward loop.

    python benchmarks/crf_gradient.py [--repeats 100]

Per shape (batch, steps, tags: name-citation's median and longest batches, a long name-header
one): milliseconds per call of ``-log p(tags)`` and its gradient in one compiled function, and
the first call (trace and graph optimisation), for :func:`~delft.sequenceLabelling.layers.crf.
log_partition` (the written-out gradient ChainCRF uses) and for ChainCRF's previous forward loop
differentiated by TensorFlow, with the largest gradient difference.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from delft.sequenceLabelling.layers import crf as crf_module  # noqa: E402

SHAPES = [(20, 12, 7), (20, 49, 7), (9, 800, 22)]


def autodiff_log_partition(potentials, lengths, transitions, start, end):
    """log Z by ChainCRF's forward loop before the written-out gradient, for TF to differentiate."""
    steps = tf.shape(potentials)[1]
    inputs = tf.TensorArray(tf.float32, size=steps, element_shape=[None, potentials.shape[-1]])
    inputs = inputs.unstack(tf.transpose(potentials, [1, 0, 2]))
    alpha = start[tf.newaxis, :] + inputs.read(0)

    def body(t, alpha):
        scores = alpha[:, :, tf.newaxis] + transitions[tf.newaxis, :, :]
        new_alpha = tf.reduce_logsumexp(scores, axis=1) + inputs.read(t)
        return t + 1, tf.where((t < lengths)[:, tf.newaxis], new_alpha, alpha)

    _, alpha = tf.while_loop(lambda t, _: t < steps, body, (tf.constant(1), alpha))
    log_z = tf.reduce_logsumexp(alpha + end[tf.newaxis, :], axis=1)
    return tf.where(lengths > 0, log_z, tf.zeros_like(log_z))


def timed(log_partition, shape, repeats):
    batch, steps, tags = shape
    keras.utils.set_random_seed(0)  # the same CRF weights for both
    crf = crf_module.ChainCRF(tags)
    crf.build((None, None, tags))
    potentials = tf.Variable(tf.random.stateless_normal([batch, steps, tags], seed=[1, 2]))
    lengths = tf.random.stateless_uniform([batch], [3, 4], steps // 2, steps + 1, tf.int32)
    gold = tf.random.stateless_uniform([batch, steps], [5, 6], 0, tags, tf.int32)

    @tf.function(autograph=False)
    def loss_and_gradient():
        with tf.GradientTape() as tape:
            clipped, kept, _ = crf._prepare(potentials, lengths)
            loss = tf.reduce_sum(log_partition(clipped, kept, *crf._weights())
                                 - crf.sequence_score(potentials, gold, lengths))
        return tape.gradient(loss, [potentials] + crf.trainable_variables)

    start = time.perf_counter()
    gradients = loss_and_gradient()
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(repeats):
        loss_and_gradient()
    return first, (time.perf_counter() - start) / repeats * 1e3, gradients


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    for shape in SHAPES:
        repeats = max(5, args.repeats * 25 // shape[1])
        first, ours, ours_gradients = timed(crf_module.log_partition, shape, repeats)
        first_autodiff, autodiff, autodiff_gradients = timed(autodiff_log_partition, shape,
                                                             repeats)
        difference = max(float(tf.reduce_max(tf.abs(a - b)))
                         for a, b in zip(ours_gradients, autodiff_gradients))
        print(f"batch {shape[0]:3d} steps {shape[1]:4d} tags {shape[2]:3d}: forward-backward "
              f"{ours:7.2f} ms (first {first:.2f} s), autodiff {autodiff:7.2f} ms (first "
              f"{first_autodiff:.2f} s), {autodiff / ours:.2f}x; largest gradient difference "
              f"{difference:.1e}", flush=True)


if __name__ == "__main__":
    main()
