"""A step compiled once for the slices a :class:`~delft.training.batching.ReplicaFeeder` makes,
called with their numpy arrays.

A ``tf.function`` called with nested arguments matches them against its traces on every call
(binding, trace types, the conversion of each array); a tagging call of 20,000 date sequences
makes ~80 steps, and that matching was about a tenth of its time
(``benchmarks/results/history.md``, "the step's call"). With an ``input_signature`` there is only
one trace: :class:`CompiledStep` converts the arrays to tensors of the signature's dtypes itself
and calls that trace's concrete function directly.
"""
import tensorflow as tf


class CompiledStep:
    """``function`` traced once for ``signature`` (``ReplicaFeeder.step_signature``: one list of
    slice dicts, every slice of the same specs), called with a list of slice dicts of arrays or
    tensors.

    >>> import numpy as np
    >>> spec = {"x": tf.TensorSpec([None], tf.float32)}
    >>> total = CompiledStep(lambda slices: tf.add_n([s["x"] for s in slices]), [[spec, spec]])
    >>> total([{"x": np.ones(2)}, {"x": np.ones(2)}]).numpy().tolist()
    [2.0, 2.0]
    """

    traces = 0  # steps traced in this process, all together (read by prediction.serving_call)

    def __init__(self, function, signature):
        # no autograph: the steps have no Python control flow on tensors, and converting every
        # function they call made tracing far slower
        self.function = tf.function(function, autograph=False, input_signature=signature)
        self._dtypes = {name: spec.dtype for name, spec in signature[0][0].items()}
        self._concrete = None

    def __call__(self, slices):
        if self._concrete is None:  # traced at the first call, as a tf.function is
            self._concrete = self.function.get_concrete_function()
            CompiledStep.traces += 1
        # tf.constant, where convert_to_tensor's dispatch and registry end: ~12 us a step less
        # (1 ms of a tag call of 20,000 date sequences, 79 steps)
        return self._concrete([{name: tf.constant(value, self._dtypes[name])
                                for name, value in part.items()} for part in slices])

    def experimental_get_tracing_count(self) -> int:
        """How many times the step was traced (``tf.function``'s count): 1 once called."""
        return self.function.experimental_get_tracing_count()
