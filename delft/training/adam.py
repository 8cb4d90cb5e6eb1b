"""Keras' Adam and AdamW, each weight's update one TensorFlow op (``ResourceApplyAdam``).

Keras 3 writes Adam's update as about twenty-five ops a weight (the step's powers of the betas,
the two moments, the step): the train step of a date BidLSTM_CRF (20 weights) traced 3,342 ops
instead of 2,862 and ran 2,016 a step instead of 1,614 after Grappler's passes; its first epoch
took 0.3-0.4 s longer and each further one ~7% longer than with one fused op a weight
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


class FusedAdamStep:
    """The update of Keras' Adam (and of its subclasses) as ``ResourceApplyAdam``."""

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad or isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        if isinstance(variable, keras.Variable):
            variable = variable.value
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        # under a tf.distribute update, ``.handle`` is the variable of the replica being updated
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=self._momentums[index].value.handle,
            v=self._velocities[index].value.handle,
            beta1_power=tf.pow(beta_1, step), beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, dtype), beta1=beta_1, beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype), grad=tf.cast(gradient, dtype))


@keras.saving.register_keras_serializable(package="delft")
class Adam(FusedAdamStep, keras.optimizers.Adam):
    """``keras.optimizers.Adam``, its update fused (see the module's docstring)."""


@keras.saving.register_keras_serializable(package="delft")
class AdamW(FusedAdamStep, keras.optimizers.AdamW):
    """``keras.optimizers.AdamW``, its update fused; the weight decay is Keras' own."""
