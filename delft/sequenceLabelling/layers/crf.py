"""Linear-chain conditional random field (CRF) layer, in plain TensorFlow ops.

tensorflow-addons is end of life and does not import beside Keras 3, so the forward algorithm
(log-partition), the path score and Viterbi decoding live here.
"""
import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="delft")
class ChainCRF(keras.layers.Layer):
    """A linear-chain CRF over per-token tag potentials.

    The layer holds three weights: ``transitions`` ``[K, K]`` (score of moving from tag ``i`` to
    tag ``j``), ``start_transitions`` ``[K]`` and ``end_transitions`` ``[K]``. Calling the layer is
    a pass-through (``tf.identity``) so that it can sit at the end of a Keras model, whose output
    are the potentials (unary scores) ``[B, T, K]``. An incoming Keras mask is dropped, so that
    Keras does not attach it to the loss: the loss and the decoding go through the methods
    below, which take explicit ``lengths`` (padding sits at the end of each sequence).

    All methods work in float32, vectorised over the batch with ``tf.while_loop`` over time,
    inside ``tf.function`` with dynamic batch and time dimensions and in a
    ``tf.distribute`` replica context (an empty replica batch gives empty results). Positions
    ``t >= lengths[b]`` are padding: their potentials and tags are ignored (padded tags may hold
    any value, e.g. ``-1``). A sequence of length 0 has log-likelihood 0 and best score 0.

    Args:
        num_tags: int, the number of tags ``K``.
        **kwargs: passed to `keras.layers.Layer` (``name``, ``dtype``...).

    Example:

    >>> import numpy as np
    >>> import tensorflow as tf
    >>> crf = ChainCRF(num_tags=3)
    >>> crf.build((None, None, 3))
    >>> potentials = tf.random.normal([2, 4, 3], seed=1)
    >>> tags = tf.constant([[0, 1, 2, 1], [2, 0, -1, -1]])
    >>> lengths = tf.constant([4, 2])
    >>> loss = crf.negative_log_likelihood(potentials, tags, lengths)  # [2], one per example
    >>> best_tags, best_scores = crf.decode(potentials, lengths)
    >>> best_tags.shape, best_scores.shape
    (TensorShape([2, 4]), TensorShape([2]))
    >>> bool(np.all(best_tags.numpy()[1, 2:] == 0))
    True
    """

    def __init__(self, num_tags, **kwargs):
        super().__init__(**kwargs)
        num_tags = int(num_tags)
        if num_tags < 1:
            raise ValueError(f"num_tags must be >= 1, got {num_tags}")
        self.num_tags = num_tags
        # A Keras mask must not reach the loss (padding is given by `lengths`): accept the
        # mask quietly and drop it (see `compute_mask`).
        self.supports_masking = True

    def build(self, input_shape=None):
        if input_shape is not None:
            last = tuple(input_shape)[-1] if len(tuple(input_shape)) else None
            if last is not None and int(last) != self.num_tags:
                raise ValueError(
                    f"ChainCRF(num_tags={self.num_tags}) got potentials with {last} tags")
        k = self.num_tags
        self.transitions = self.add_weight(
            name="transitions", shape=(k, k), dtype="float32", autocast=False,
            initializer=keras.initializers.GlorotUniform())
        self.start_transitions = self.add_weight(
            name="start_transitions", shape=(k,), dtype="float32", autocast=False,
            initializer=keras.initializers.RandomUniform(-0.1, 0.1))
        self.end_transitions = self.add_weight(
            name="end_transitions", shape=(k,), dtype="float32", autocast=False,
            initializer=keras.initializers.RandomUniform(-0.1, 0.1))
        self.built = True

    def call(self, potentials):
        return tf.identity(potentials)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"num_tags": self.num_tags})
        return config

    # ------------------------------------------------------------------ helpers

    def _ensure_built(self, potentials):
        if not self.built:
            self.build(potentials.shape)

    def _weights(self):
        return (tf.cast(tf.convert_to_tensor(self.transitions), tf.float32),
                tf.cast(tf.convert_to_tensor(self.start_transitions), tf.float32),
                tf.cast(tf.convert_to_tensor(self.end_transitions), tf.float32))

    def _prepare(self, potentials, lengths):
        """float32 potentials padded to at least one step, clamped lengths, original T."""
        potentials = tf.cast(tf.convert_to_tensor(potentials), tf.float32)
        self._ensure_built(potentials)
        time = tf.shape(potentials)[1]
        lengths = tf.clip_by_value(
            tf.reshape(tf.cast(tf.convert_to_tensor(lengths), tf.int32), [-1]), 0, time)
        # A time axis of 0 steps (all lengths 0) is padded to 1 so the recursions never start
        # from an empty tensor; results are sliced back to the original T.
        potentials = tf.pad(potentials, [[0, 0], [0, tf.maximum(1 - time, 0)], [0, 0]])
        return potentials, lengths, time

    # --------------------------------------------------------------- likelihood

    def sequence_score(self, potentials, tags, lengths):
        """Unnormalised score of the path ``tags`` for each sequence, ``[B]`` float32."""
        potentials, lengths, time = self._prepare(potentials, lengths)
        trans, start, end = self._weights()
        k = self.num_tags
        steps = tf.shape(potentials)[1]
        tags = tf.cast(tf.convert_to_tensor(tags), tf.int32)
        tags = tf.pad(tags, [[0, 0], [0, steps - time]])
        mask = tf.sequence_mask(lengths, steps)  # [B, T]
        tags = tf.where(mask, tf.clip_by_value(tags, 0, k - 1), 0)
        maskf = tf.cast(mask, tf.float32)

        unary = tf.reduce_sum(tf.one_hot(tags, k, dtype=tf.float32) * potentials, axis=-1)
        unary = tf.reduce_sum(unary * maskf, axis=1)
        pair_index = tags[:, :-1] * k + tags[:, 1:]  # [B, T-1]
        pairs = tf.gather(tf.reshape(trans, [-1]), pair_index)
        pairs = tf.reduce_sum(pairs * maskf[:, 1:], axis=1)
        first = tf.gather(start, tags[:, 0])
        last_tag = tf.gather(tags, tf.maximum(lengths - 1, 0), batch_dims=1)
        last = tf.gather(end, last_tag)
        score = first + unary + pairs + last
        return tf.where(lengths > 0, score, tf.zeros_like(score))

    def log_partition(self, potentials, lengths):
        """log Z: log-sum-exp of the scores of all paths (forward algorithm), ``[B]`` float32."""
        potentials, lengths, _ = self._prepare(potentials, lengths)
        return log_partition(potentials, lengths, *self._weights())

    def log_likelihood(self, potentials, tags, lengths):
        """log p(tags | potentials) for each sequence, ``[B]`` float32.

        Args:
            potentials: ``[B, T, K]`` float, unary tag scores.
            tags: ``[B, T]`` int, gold tags; values at ``t >= lengths`` are ignored.
            lengths: ``[B]`` int, number of valid steps of each sequence.
        """
        return (self.sequence_score(potentials, tags, lengths)
                - self.log_partition(potentials, lengths))

    def negative_log_likelihood(self, potentials, tags, lengths):
        """Per-example loss ``-log p(tags | potentials)``, ``[B]`` (not reduced over the batch)."""
        return -self.log_likelihood(potentials, tags, lengths)

    # ----------------------------------------------------------------- decoding

    def decode(self, potentials, lengths):
        """Viterbi decoding.

        Returns:
            ``(tags, best_scores)``: ``tags`` ``[B, T]`` int32, the highest-scoring path (0 at
            ``t >= lengths``), and ``best_scores`` ``[B]`` float32, its unnormalised score.
        """
        potentials, lengths, time = self._prepare(potentials, lengths)
        trans, start, end = self._weights()
        k = self.num_tags
        steps = tf.shape(potentials)[1]
        batch = tf.shape(potentials)[0]
        inputs = _time_steps(tf.transpose(potentials, [1, 0, 2]))
        # backpointers[t][b, j]: best previous tag for tag j at step t (index 0 is never read).
        backpointers = tf.TensorArray(tf.int32, size=steps, element_shape=[None, k])
        identity = tf.range(k, dtype=tf.int32)[tf.newaxis, :]
        transitions = trans[tf.newaxis, :, :]
        alpha = start[tf.newaxis, :] + inputs.read(0)

        def forward(t, alpha, backpointers):
            scores = alpha[:, :, tf.newaxis] + transitions  # [B, from, to]
            best_prev = tf.argmax(scores, axis=1, output_type=tf.int32)
            new_alpha = tf.reduce_max(scores, axis=1) + inputs.read(t)
            valid = (t < lengths)[:, tf.newaxis]
            # Past the end, carry the scores and point each tag to itself, so that the
            # backtrace walks back unchanged to the last valid step.
            alpha = tf.where(valid, new_alpha, alpha)
            backpointers = backpointers.write(
                t, tf.where(valid, best_prev, tf.broadcast_to(identity, [batch, k])))
            return t + 1, alpha, backpointers

        _, alpha, backpointers = tf.while_loop(
            lambda t, *_: t < steps, forward, (tf.constant(1), alpha, backpointers),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, k]), None))
        final = alpha + end[tf.newaxis, :]
        best_scores = tf.reduce_max(final, axis=1)
        last_tag = tf.argmax(final, axis=1, output_type=tf.int32)

        path = tf.TensorArray(tf.int32, size=steps, element_shape=[None])
        path = path.write(steps - 1, last_tag)

        def backward(t, tag, path):
            prev = tf.gather(backpointers.read(t), tag, batch_dims=1)
            return t - 1, prev, path.write(t - 1, prev)

        _, _, path = tf.while_loop(
            lambda t, *_: t > 0, backward, (steps - 1, last_tag, path),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None]), None))
        tags = tf.transpose(path.stack(), [1, 0])[:, :time]
        tags = tf.where(tf.sequence_mask(lengths, time), tags, tf.zeros_like(tags))
        best_scores = tf.where(lengths > 0, best_scores, tf.zeros_like(best_scores))
        return tags, best_scores


def _time_steps(unary):
    """``unary`` ``[T, B, K]`` as a TensorArray of its steps, for the loops to read one per step."""
    steps = tf.TensorArray(tf.float32, size=tf.shape(unary)[0], element_shape=unary.shape[1:])
    return steps.unstack(unary)


def _forward_scores(unary, lengths, transitions, start):
    """Forward algorithm in log space: ``alphas`` ``[T, B, K]`` (carried unchanged past each
    row's end) from time-major ``unary`` ``[T, B, K]``."""
    steps = tf.shape(unary)[0]
    inputs = _time_steps(unary)
    alpha = start[tf.newaxis, :] + inputs.read(0)
    alphas = tf.TensorArray(tf.float32, size=steps, element_shape=alpha.shape).write(0, alpha)

    def body(t, alpha, alphas):
        new_alpha = tf.reduce_logsumexp(alpha[:, :, tf.newaxis] + transitions, axis=1)
        alpha = tf.where((t < lengths)[:, tf.newaxis], new_alpha + inputs.read(t), alpha)
        return t + 1, alpha, alphas.write(t, alpha)

    _, _, alphas = tf.while_loop(lambda t, *_: t < steps, body, (tf.constant(1), alpha, alphas))
    return alphas.stack()


def _backward_scores(unary, lengths, transitions, end):
    """Backward algorithm in log space: ``betas`` ``[T, B, K]``, the log-sum-exp of the scores of
    every continuation from each step and tag (``end`` at a row's last step and past it)."""
    steps = tf.shape(unary)[0]
    inputs = _time_steps(unary)
    last = tf.broadcast_to(end, tf.shape(unary[0]))
    betas = tf.TensorArray(tf.float32, size=steps, element_shape=last.shape)
    betas = betas.write(steps - 1, last)

    def body(t, beta, betas):
        following = (inputs.read(t + 1) + beta)[:, tf.newaxis, :]  # [B, 1, to]
        new_beta = tf.reduce_logsumexp(transitions[tf.newaxis] + following, axis=2)
        beta = tf.where((t + 1 < lengths)[:, tf.newaxis], new_beta, last)
        return t - 1, beta, betas.write(t, beta)

    _, _, betas = tf.while_loop(lambda t, *_: t >= 0, body, (steps - 2, last, betas))
    return betas.stack()


@tf.custom_gradient
def log_partition(potentials, lengths, transitions, start, end):
    """log Z of each row of ``potentials`` ``[B, T >= 1, K]`` float32 (0 for a row of length 0).

    The gradient is written out (forward-backward: the tag and transition marginals) instead of
    differentiated through the forward loop: Keras and TF then trace and run one backward loop
    of a few ops instead of the autodiff of every forward op (doc/benchmarks.md, "CRF loss and
    gradient").
    """
    unary = tf.transpose(potentials, [1, 0, 2])  # time-major
    # [T, B]: the steps the marginals count; the loops test ``t < lengths`` per step instead
    valid = tf.transpose(tf.sequence_mask(lengths, tf.shape(unary)[0]))
    alphas = _forward_scores(unary, lengths, transitions, start)
    log_z = tf.reduce_logsumexp(alphas[-1] + end[tf.newaxis, :], axis=1)
    has_steps = lengths > 0

    def gradient(upstream):
        betas = _backward_scores(unary, lengths, transitions, end)
        weight = tf.where(has_steps, upstream, tf.zeros_like(upstream))
        log_weight = log_z[tf.newaxis, :, tf.newaxis]
        marginals = tf.where(valid[:, :, tf.newaxis], tf.exp(alphas + betas - log_weight), 0.0)
        marginals *= weight[tf.newaxis, :, tf.newaxis]
        # pair marginals of the steps t-1 -> t, t >= 1: [T-1, B, from, to]
        pairs = tf.exp(alphas[:-1, :, :, tf.newaxis] + transitions
                       + (unary[1:] + betas[1:])[:, :, tf.newaxis, :]
                       - log_weight[:, :, :, tf.newaxis])
        pairs = tf.where(valid[1:, :, tf.newaxis, tf.newaxis], pairs, 0.0)
        pairs *= weight[tf.newaxis, :, tf.newaxis, tf.newaxis]
        ends = tf.exp(alphas[-1] + end[tf.newaxis, :] - log_z[:, tf.newaxis])
        return (tf.transpose(marginals, [1, 0, 2]), None, tf.reduce_sum(pairs, axis=[0, 1]),
                tf.reduce_sum(marginals[0], axis=0),
                tf.reduce_sum(ends * weight[:, tf.newaxis], axis=0))

    return tf.where(has_steps, log_z, tf.zeros_like(log_z)), gradient
