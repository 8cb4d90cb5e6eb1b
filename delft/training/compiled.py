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
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
from tensorflow.python.eager import context


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

    def __init__(self, function, signature, trimmed_optimization=False):
        # no autograph: the steps have no Python control flow on tensors, and converting every
        # function they call made tracing far slower
        self.function = tf.function(function, autograph=False, input_signature=signature)
        self._dtypes = {name: spec.dtype for name, spec in signature[0][0].items()}
        self._concrete = None
        # a train step's calls run Grappler trimmed (trimmed_call_options); the inference steps
        # keep TensorFlow's two rounds: a tag call of 50,000 date sequences at batch 1024 was
        # 2-4% slower with one
        self._trimmed = trimmed_optimization
        self._call_options = None

    def trace(self):
        """Trace the step now rather than at its first call (which then optimizes and runs it)."""
        if self._concrete is None:
            self._concrete = self.function.get_concrete_function()
            self._call_options = trimmed_call_options() if self._trimmed else None
            CompiledStep.traces += 1
        return self._concrete

    def __call__(self, slices):
        # traced at the first call, as a tf.function is; tf.constant, where convert_to_tensor's
        # dispatch and registry end: ~12 us a step less (1 ms of a tag call of 20,000 date
        # sequences, 79 steps)
        step = self._concrete or self.trace()
        tensors = [{name: tf.constant(value, self._dtypes[name]) for name, value in part.items()}
                   for part in slices]
        if self._call_options is None:
            return step(tensors)
        # TensorFlow takes a function call's options from the calling thread's: every call of the
        # step, from any thread, runs the one instance optimized with the step's own
        eager = context.context()
        thread_options = eager.function_call_options
        eager.function_call_options = self._call_options
        try:
            return step(tensors)
        finally:
            eager.function_call_options = thread_options

    def experimental_get_tracing_count(self) -> int:
        """How many times the step was traced (``tf.function``'s count): 1 once called."""
        return self.function.experimental_get_tracing_count()


def trimmed_call_options():
    """The options a train step's calls run under on a machine without GPU: the calling
    thread's (the context's configuration) with TensorFlow's graph optimizer (Grappler, which
    runs at a step's first call) trimmed: one round of its passes instead of two, and without the
    passes that change nothing in these steps' graphs on a CPU (the layout optimizer, for GPU
    convolutions; the memory optimizer, whose swapping is to and from a GPU; conditional code
    motion). A BERT_CRF train step's first call took 1.2 s less, the steps after it as long
    (doc/benchmarks.md, "The first epoch"). None with a GPU: the calling thread's own options."""
    if tf.config.list_physical_devices("GPU"):
        return None
    options = context.context().function_call_options
    config = config_pb2.ConfigProto.FromString(options.config_proto_serialized)
    rewrite = config.graph_options.rewrite_options
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    rewrite.layout_optimizer = rewriter_config_pb2.RewriterConfig.OFF
    rewrite.memory_optimization = rewriter_config_pb2.RewriterConfig.NO_MEM_OPT
    rewrite.experimental_conditional_code_motion = rewriter_config_pb2.RewriterConfig.OFF
    return context.FunctionCallOptions(options.executor_type, config)
