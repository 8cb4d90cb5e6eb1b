"""Batching on tf.data: rows grouped by similar length, padded per batch, split across replicas.

A *global batch* is what ``--batch-size`` says; under a strategy with N replicas it is split into N
contiguous slices of sizes that differ by at most one, so no example is ever dropped and a ragged
last batch needs no special case. A replica left without a row (a last batch smaller than N) gets a
copy of one with weight 0 and index -1: it adds nothing to the loss, the gradients or the output,
and no layer ever sees an empty batch. Every slice carries the rows' positions (``index``) so that
predictions are put back in input order, and the size of its global batch (``global_count``) so that
the loss of a step is the same on 1 or N replicas.
"""
import math

import numpy as np
import tensorflow as tf

POOL_BATCHES = 50


def length_bucketed_batches(lengths, batch_size, rng=None):
    """Split row indices into batches of rows of similar length.

    Without ``rng`` (tagging, evaluation) rows are sorted by length; with it (training) rows are
    shuffled, sorted by length inside pools of ``POOL_BATCHES`` batches, and the batches shuffled,
    so that padding stays small and every epoch sees a different order.

    >>> [b.tolist() for b in length_bucketed_batches(np.array([3, 1, 2, 5]), 2)]
    [[1, 2], [0, 3]]
    """
    lengths = np.asarray(lengths)
    if rng is None:
        order = np.argsort(lengths, kind="stable")
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    order = rng.permutation(len(lengths))
    pool = batch_size * POOL_BATCHES
    batches = []
    for start in range(0, len(order), pool):
        chunk = order[start:start + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def batches_per_epoch(num_rows, batch_size):
    """How many batches :func:`length_bucketed_batches` makes of ``num_rows`` rows (with rng).

    >>> batches_per_epoch(3100, 60), len(length_bucketed_batches(np.ones(3100), 60, np.random.default_rng(0)))
    (52, 52)
    """
    pool = batch_size * POOL_BATCHES
    full, rest = divmod(num_rows, pool)
    return full * POOL_BATCHES + math.ceil(rest / batch_size)


def replica_bounds(num_examples, num_replicas):
    """Contiguous ``(start, end)`` slices of a global batch, one per replica, sizes within one.

    >>> replica_bounds(5, 2)
    [(0, 3), (3, 5)]
    >>> replica_bounds(5, 4)
    [(0, 2), (2, 3), (3, 4), (4, 5)]
    >>> replica_bounds(1, 2)
    [(0, 1), (1, 1)]
    """
    base, extra = divmod(num_examples, num_replicas)
    ends = np.cumsum([base + (r < extra) for r in range(num_replicas)])
    return [(int(end - (base + (r < extra))), int(end)) for r, end in enumerate(ends)]


def global_batch_size(batch_size, num_replicas):
    """The global batch rounded up to a multiple of the replica count (with a notice)."""
    if batch_size % num_replicas:
        rounded = math.ceil(batch_size / num_replicas) * num_replicas
        print(f"batch size {batch_size} is not a multiple of the {num_replicas} replicas: "
              f"using {rounded}")
        return rounded
    return batch_size


def distributed_dataset(strategy, preprocessor, corpus, batches, label_ids=None):
    """A distributed tf.data dataset: each global batch that ``batches()`` yields becomes one step.

    ``batches`` is called when the dataset is iterated; it may yield forever (epoch after epoch,
    or the same validation batches again), so that one iterator serves a whole training run.
    """
    num_replicas = strategy.num_replicas_in_sync
    signature = dict(preprocessor.batch_signature(label_ids is not None),
                     index=tf.TensorSpec([None], tf.int32),
                     weights=tf.TensorSpec([None], tf.float32),
                     global_count=tf.TensorSpec([], tf.int32))

    def dataset_fn(input_context):
        local_replicas = num_replicas // input_context.num_input_pipelines
        first = input_context.input_pipeline_id * local_replicas

        def slices():
            for rows in batches():
                batch = preprocessor.padded_batch(corpus, rows, label_ids)
                batch["index"] = rows.astype(np.int32)
                batch["weights"] = np.ones(len(rows), dtype=np.float32)
                bounds = replica_bounds(len(rows), num_replicas)
                for start, end in bounds[first:first + local_replicas]:
                    if start == end:
                        part = {key: value[:1] for key, value in batch.items()}
                        part["index"] = np.full(1, -1, dtype=np.int32)
                        part["weights"] = np.zeros(1, dtype=np.float32)
                    else:
                        part = {key: value[start:end] for key, value in batch.items()}
                    part["global_count"] = np.int32(len(rows))
                    yield part

        dataset = tf.data.Dataset.from_generator(slices, output_signature=signature)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return strategy.distribute_datasets_from_function(dataset_fn)


def dummy_batch(signature):
    """A one-row, one-word batch of zeros matching ``signature``: enough to build a model's weights."""
    batch = {}
    for key, spec in signature.items():
        shape = [1 if d is None else d for d in spec.shape]
        batch[key] = np.zeros(shape, dtype=spec.dtype.as_numpy_dtype)
    batch["lengths"] = np.ones(batch["lengths"].shape, dtype=np.int32)
    return batch
