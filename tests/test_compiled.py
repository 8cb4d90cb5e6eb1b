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
