"""Keras' Adam and AdamW, each weight's update one TensorFlow op (``ResourceApplyAdam``).

Keras 3 writes Adam's update as about twenty-five ops a weight, its scalars (the learning rate,
the powers of the betas) taken again for each weight, and AdamW's decay evaluates the learning
rate's schedule once a weight. With one fused op a weight and the scalars taken once a step, a
date BidLSTM_CRF's train step (20 weights) traces 2,672 ops instead of 3,342 and runs 1,519 a
step instead of 2,016 after Grappler's passes; BERT_CRF's (MiniLM, 105 weights) 10,399 instead of
15,415 and 6,058 instead of 9,511. First epochs took 0.4 s (date) and 3.9 s (BERT_CRF) less
(doc/benchmarks.md, "Adam's update fused"). The kernel computes Keras' formula in Keras' order
(``m += (g - m)(1 - b1)``, ``v += (g² - v)(1 - b2)``,
``w -= m·lr·√(1 - b2ᵗ)/(1 - b1ᵗ) / (√v + ε)``) but takes ``1 - b`` in float32 where Keras takes
it in Python (1 - 0.999f = 0.0010000467 against 0.001): the second moments differ by 5e-5 of
themselves, the weights' moves by less than 1e-4 of themselves (tests/test_adam.py), as with
TensorFlow's own Adam of Keras 2. Sparse gradients and AMSGrad keep Keras' update.

>>> import tensorflow as tf
>>> weight = tf.Variable([1.0, 2.0])
>>> optimizer = Adam(learning_rate=0.1)
>>> _ = optimizer.apply_gradients([(tf.constant([1.0, -1.0]), weight)])
>>> [round(float(w), 4) for w in weight.numpy()]
[0.9, 2.1]
"""
import keras
import tensorflow as tf


def once_a_copy(make):
    """``make(dtype)``, made once for each (dtype, device) of the weights' copies a step updates:
    ``get(variable)`` returns it for ``variable``'s."""
    made = {}

    def get(variable):
        key = (variable.dtype, variable.device)
        if key not in made:
            made[key] = make(variable.dtype)
        return made[key]

    return get


class FusedAdamStep:
    """The update of Keras' Adam (and of its subclasses) as ``ResourceApplyAdam``, the step's
    scalars (the powers of the betas, AdamW's decayed learning rate) taken once a step and
    replica instead of once a weight.

    Overrides the two methods of Keras' TensorFlow optimizer that loop over the weights, in
    cross-replica context (a weight's update runs on each replica's copy of it); Keras is pinned
    (setup.py), and tests/test_adam.py fails where a Keras release renames them.
    """

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
        if self.amsgrad:
            return super()._distributed_tf_update_step(distribution, grads_and_vars,
                                                       learning_rate)

        def make_scalars(dtype):
            step = tf.cast(self.iterations + 1, dtype)
            beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
            return dict(beta1_power=tf.pow(beta_1, step), beta2_power=tf.pow(beta_2, step),
                        beta1=beta_1, beta2=beta_2, epsilon=tf.cast(self.epsilon, dtype))

        step_scalars = once_a_copy(make_scalars)

        def update(variable, gradient, learning_rate):
            if isinstance(gradient, tf.IndexedSlices):  # no fused kernel: Keras' own update
                return self.update_step(gradient, variable, learning_rate)
            index = self._get_variable_index(variable)
            # under a tf.distribute update, ``.handle`` is the copy of the replica being updated
            # and ``learning_rate`` that replica's (a schedule's is computed on each)
            tf.raw_ops.ResourceApplyAdam(
                var=variable.handle, m=self._momentums[index].value.handle,
                v=self._velocities[index].value.handle, lr=tf.cast(learning_rate, variable.dtype),
                grad=tf.cast(gradient, variable.dtype), **step_scalars(variable))

        for gradient, variable in grads_and_vars:
            distribution.extended.update(variable, update, args=(gradient, learning_rate),
                                         group=False)

    def _apply_weight_decay(self, variables):
        """Keras' decay (``w -= w * decay * lr``), its learning rate taken once."""
        if self.weight_decay is None:
            return
        rates = once_a_copy(lambda dtype: (tf.cast(self.weight_decay, dtype),
                                           tf.cast(self.learning_rate, dtype)))

        def decay(variable):
            if self._use_weight_decay(variable):
                weight_decay, learning_rate = rates(variable)
                variable.assign_sub(variable * weight_decay * learning_rate)

        def decay_all(distribution, variables):
            for variable in variables:
                distribution.extended.update(
                    variable.value if isinstance(variable, keras.Variable) else variable,
                    decay, group=False)

        tf.__internal__.distribute.interim.maybe_merge_call(
            decay_all, self._distribution_strategy, variables)


@keras.saving.register_keras_serializable(package="delft")
class Adam(FusedAdamStep, keras.optimizers.Adam):
    """``keras.optimizers.Adam``, its update fused (see the module's docstring)."""


@keras.saving.register_keras_serializable(package="delft")
class AdamW(FusedAdamStep, keras.optimizers.AdamW):
    """``keras.optimizers.AdamW``, its update fused; its weight decay Keras' formula, the
    learning rate taken once a step."""
