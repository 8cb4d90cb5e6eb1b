"""CompiledStep: one trace for every batch shape, arrays converted to the signature's dtypes, the
same outputs as the tf.function it wraps."""
import numpy as np
import pytest
import tensorflow as tf

from delft.training.compiled import CompiledStep

SPEC = {"ids": tf.TensorSpec([None, None], tf.int32),
        "weights": tf.TensorSpec([None], tf.float32),
        "count": tf.TensorSpec([], tf.int32)}


def weighted_sums(slices):
    return tuple(tf.reduce_sum(tf.cast(s["ids"], tf.float32), axis=1) * s["weights"]
                 + tf.cast(s["count"], tf.float32) for s in slices)


def test_one_trace_for_every_shape_and_the_tf_function_outputs():
    step = CompiledStep(weighted_sums, [[SPEC, SPEC]])
    traces = CompiledStep.traces
    rng = np.random.default_rng(0)
    for rows, width in ((3, 5), (1, 1), (7, 2)):
        slices = [{"ids": rng.integers(0, 9, (rows, width)).astype(np.int32),
                   "weights": rng.random(rows).astype(np.float32),
                   "count": np.int32(rows)} for _ in range(2)]
        got = step(slices)
        expected = step.function(slices)
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert step.experimental_get_tracing_count() == 1
    assert CompiledStep.traces == traces + 1  # the process' count of traces


def test_arrays_of_another_dtype_are_converted_to_the_signature_s():
    step = CompiledStep(weighted_sums, [[SPEC]])
    # int64 ids and float64 weights (numpy's defaults), a Python int count
    out, = step([{"ids": np.array([[1, 2], [3, 4]]), "weights": np.array([1.0, 0.5]),
                  "count": 2}])
    assert out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy(), [5.0, 5.5])


def test_tensors_pass_through_and_a_wrong_structure_is_refused():
    step = CompiledStep(weighted_sums, [[SPEC]])
    batch = {"ids": tf.constant([[1]], tf.int32), "weights": tf.constant([2.0]),
             "count": tf.constant(1)}
    assert step([batch])[0].numpy().tolist() == [3.0]
    with pytest.raises((TypeError, ValueError)):
        step([batch, batch])  # two slices where the signature has one


def test_every_call_runs_under_the_step_s_optimizer_options_from_any_thread(monkeypatch):
    """On a machine without GPU a train step's calls carry its own options (Grappler trimmed:
    one round, no layout or memory optimizer, no conditional code motion), whichever thread
    calls, and the calling thread's options are its own again afterwards; an inference step's
    calls run under the thread's own."""
    import threading

    from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
    from tensorflow.python.eager import context

    from delft.training import compiled

    # the machine without GPU, wherever the test runs
    monkeypatch.setattr(compiled.tf.config, "list_physical_devices", lambda kind=None: [])
    seen = []
    real_call = context.Context.call_function

    def recording_call(self, name, tensor_inputs, num_outputs):
        serialized = self.function_call_options.config_proto_serialized
        seen.append(config_pb2.ConfigProto.FromString(serialized).graph_options.rewrite_options)
        return real_call(self, name, tensor_inputs, num_outputs)

    monkeypatch.setattr(context.Context, "call_function", recording_call)
    step = CompiledStep(weighted_sums, [[SPEC]], trimmed_optimization=True)
    batch = {"ids": np.ones((2, 3), np.int32), "weights": np.ones(2, np.float32), "count": 2}
    thread_options = context.context().function_call_options
    assert step([batch])[0].numpy().tolist() == [5.0, 5.0]
    other = threading.Thread(target=step, args=([batch],))
    other.start()
    other.join()
    assert context.context().function_call_options is thread_options
    config = rewriter_config_pb2.RewriterConfig
    assert len(seen) == 2
    for rewrite in seen:
        assert rewrite.meta_optimizer_iterations == config.ONE
        assert rewrite.layout_optimizer == config.OFF
        assert rewrite.memory_optimization == config.NO_MEM_OPT
        assert rewrite.experimental_conditional_code_motion == config.OFF
    # the thread's own options (the context's) are TensorFlow's: two rounds by default
    default = config_pb2.ConfigProto.FromString(thread_options.config_proto_serialized)
    assert default.graph_options.rewrite_options.meta_optimizer_iterations != config.ONE
    CompiledStep(weighted_sums, [[SPEC]])([batch])
    assert seen[-1] == default.graph_options.rewrite_options
    # with a GPU, a train step's calls run under the thread's own options too
    monkeypatch.setattr(compiled.tf.config, "list_physical_devices",
                        lambda kind=None: ["GPU:0"] if kind == "GPU" else [])
    assert compiled.trimmed_call_options() is None
    CompiledStep(weighted_sums, [[SPEC]], trimmed_optimization=True)([batch])
    assert seen[-1] == default.graph_options.rewrite_options
