"""Batching of sequence-labelling rows: what is the sequence models' own (DeLFT's read widths,
batches by padded cells, a dummy batch to build a model with); the rest is shared with text
classification in :mod:`delft.training.batching` and imported from here as before."""
import numpy as np

from delft.training.batching import (LENGTH_GROUPS, POOL_BATCHES, ReplicaFeeder,  # noqa: F401
                                     batches_per_epoch, global_batch_size,
                                     length_bucketed_batches, padding_groups, prefetched,
                                     replica_bounds)


def cell_budget_batches(widths, cells):
    """Row indices sorted by width and cut into batches of at most ``cells`` padded cells (rows
    times their widest row; a wider row alone).

    >>> [b.tolist() for b in cell_budget_batches(np.array([3, 1, 2, 5, 2]), 6)]
    [[1, 2, 4], [0], [3]]
    """
    order = np.argsort(np.asarray(widths), kind="stable")
    batches, start = [], 0
    for end in range(1, len(order) + 1):
        if end == len(order) or (end + 1 - start) * widths[order[end]] > cells:
            batches.append(order[start:end])
            start = end
    return batches


def delft_read_widths(lengths, batch_size, max_sequence_length):
    """The width at which DeLFT reads each row when it tags: its batch's longest row, batches
    being consecutive runs of ``batch_size`` rows in input order; DeLFT cuts rows at
    ``max_sequence_length`` (and so its batches' widths), and widens a batch of one-word rows to
    2. A model that reads its padding (DeLFT's ChainCRF) labels a row as DeLFT does when read at
    that width, whatever batch it runs in. A row longer than ``max_sequence_length``, which DeLFT
    would cut, is read whole, at its own length.

    >>> delft_read_widths(np.array([3, 0, 1, 5, 1, 9, 1]), 2, 8).tolist()
    [3, 3, 5, 5, 8, 9, 2]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    widths = np.zeros(len(lengths), dtype=np.int64)
    for start in range(0, len(lengths), batch_size):
        cut = np.minimum(lengths[start:start + batch_size], max_sequence_length)
        widths[start:start + batch_size] = max(int(cut.max()), 2)
    return np.maximum(widths, lengths)


def dummy_batch(signature):
    """A small batch of zeros matching ``signature``: enough to build a model's weights.

    Free dimensions are 2 wide (a 1-wide key axis makes Keras warn about a softmax over one key).
    """
    batch = {}
    for key, spec in signature.items():
        shape = [2 if d is None else d for d in spec.shape]
        batch[key] = np.zeros(shape, dtype=spec.dtype.as_numpy_dtype)
    batch["lengths"] = np.ones(batch["lengths"].shape, dtype=np.int32)
    return batch
