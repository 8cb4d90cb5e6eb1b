"""Batching, for every model of the package: rows in batches (training: random by default;
prediction: by length), padded per batch, split across replicas, and in training padded per group
of similar length.

A *global batch* is what ``--batch-size`` says; under a strategy with N replicas it is split into N
contiguous slices of sizes that differ by at most one, so no example is ever dropped and a ragged
last batch needs no special case. A replica left without a row (a last batch smaller than N) gets a
copy of one with weight 0 and index -1: it adds nothing to the loss, the gradients or the output,
and no layer ever sees an empty batch. In training, each replica's slice is cut further into
``length_groups`` groups of rows of similar length, each padded to its own longest row (a
random batch of GROBID rows, 3 to 1,000 tokens, is mostly padding when padded whole); the step
sums the groups' losses, so the gradient is the batch's. Every slice carries the rows' positions
(``index``) so that predictions are put back in input order; a training slice also carries its
rows' weights and the size of its global batch (``global_count``), so that the loss of a step is
the same on 1 or N replicas.

Slices are padded in numpy (a vectorised gather per batch) and handed to the compiled step as its
arguments, one per local replica (:class:`ReplicaFeeder`); each worker pads only its own replicas'
slices. There is no ``tf.data.Dataset.from_generator`` on this path: its Python callback, run from
TensorFlow's own threads, was slow to build per call, kept every call's corpus alive for the life
of the process, made identical calls vary in time, and printed tracebacks under JEP's
sub-interpreters (doc/multi-gpu.md).
"""
import logging
import math
import queue
import threading

import numpy as np

logger = logging.getLogger(__name__)

# Training's default: every batch drawn at random, as DeLFT 1.2 does. Pools of length-sorted
# batches pad less, but a GROBID set of a few hundred to ~1,500 rows then fits in one or two
# pools and gets nearly the same batches every epoch, and scores lower (doc/benchmarks.md,
# "Training batches").
POOL_BATCHES = 1
# Two groups per replica: most of the padding saved; a third adds a copy of the model to the
# traced step for little more (doc/benchmarks.md, "Training batches").
LENGTH_GROUPS = 2
# A middle group's ends weighed at a time (3 or more groups): a [256, rows] array of costs, 8 MB
# for a slice of 4,096 rows
ENDS_PER_BLOCK = 256


def length_bucketed_batches(lengths, batch_size, rng=None, pool_batches=POOL_BATCHES):
    """Split row indices into batches of rows of similar length.

    Without ``rng`` (tagging, evaluation) rows are sorted by length; with it (training) rows are
    shuffled, sorted by length inside pools of ``pool_batches`` batches, and the batches shuffled,
    so that padding stays small and every epoch sees a different order. The pool trades padding
    for variety: a set smaller than one pool is sorted whole, and its batches are nearly the same
    ones every epoch; ``pool_batches=1`` draws every batch at random (DeLFT 1.2's order).

    >>> [b.tolist() for b in length_bucketed_batches(np.array([3, 1, 2, 5]), 2)]
    [[1, 2], [0, 3]]
    """
    lengths = np.asarray(lengths)
    if rng is None:
        order = np.argsort(lengths, kind="stable")
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    order = rng.permutation(len(lengths))
    pool = batch_size * pool_batches
    batches = []
    for start in range(0, len(order), pool):
        chunk = order[start:start + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def batch_width(corpus, rows):
    """The longest row of ``rows`` (``corpus.row_length``): the width they are padded to.

    >>> from types import SimpleNamespace
    >>> batch_width(SimpleNamespace(row_length=np.array([3, 7, 5])), np.array([0, 2]))
    5
    """
    return int(corpus.row_length[rows].max()) if len(rows) else 0


def batches_per_epoch(num_rows, batch_size, pool_batches=POOL_BATCHES):
    """How many batches :func:`length_bucketed_batches` makes of ``num_rows`` rows (with rng).

    >>> batches_per_epoch(3100, 60), len(length_bucketed_batches(np.ones(3100), 60, np.random.default_rng(0)))
    (52, 52)
    """
    pool = batch_size * pool_batches
    full, rest = divmod(num_rows, pool)
    return full * pool_batches + math.ceil(rest / batch_size)


def padding_groups(lengths, groups):
    """Cut ascending ``lengths`` into ``groups`` contiguous ``(start, end)`` groups that pad to the
    fewest cells (each group's size times its last length, summed).

    Every group has a row when there are at least ``groups`` rows; otherwise the last groups are
    empty (``start == end``).

    >>> padding_groups([2, 3, 3, 9, 10], 2)
    [(0, 3), (3, 5)]
    >>> padding_groups([4], 2)
    [(0, 1), (1, 1)]
    """
    lengths = np.asarray(lengths)
    count = len(lengths)
    filled = min(groups, count)
    # cells[i]: fewest cells for the first i rows in the groups so far; cut[g][i]: where the
    # last of those groups starts. The first group starts at 0 (its cells in closed form), and
    # of the last only the end ``count`` is read; a middle group's ends are taken a block at a
    # time (a Python loop over 480 rows was 3.2 of the 4 ms a training batch took to pad)
    cells = np.full(count + 1, np.inf)
    cells[1:] = np.arange(1, count + 1) * lengths
    cuts = [np.zeros(count + 1, dtype=int)] if filled else []
    for group in range(1, filled):
        extended = np.full(count + 1, np.inf)
        cut = np.zeros(count + 1, dtype=int)
        blocks = [np.array([count])] if group == filled - 1 else [
            np.arange(first, min(first + ENDS_PER_BLOCK, count + 1))
            for first in range(1, count + 1, ENDS_PER_BLOCK)]
        for ends in blocks:
            cut[ends], extended[ends] = cheapest_last_group(cells, lengths, ends)
        cells = extended
        cuts.append(cut)
    bounds, end = [], count
    for cut in reversed(cuts):
        bounds.append((int(cut[end]), end))
        end = int(cut[end])
    return bounds[::-1] + [(count, count)] * (groups - filled)


def cheapest_last_group(cells, lengths, ends):
    """For each of ``ends``: where the last group of the first ``end`` rows starts so that they
    pad to the fewest cells, ``cells[start]`` being the fewest for the rows before it (the
    earliest start among equals), and that count.

    >>> cheapest_last_group(np.array([np.inf, 2.0, 6.0, 9.0]), np.array([2, 3, 3]), np.array([2, 3]))
    (array([1, 1]), array([5., 8.]))
    """
    starts = np.arange(int(ends[-1]))
    costs = cells[starts] + (ends[:, None] - starts) * lengths[ends - 1][:, None]
    costs[starts >= ends[:, None]] = np.inf
    best = np.argmin(costs, axis=1)
    return best, costs[np.arange(len(ends)), best]


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
    """The global batch rounded up to a multiple of the replica count (with a logged notice)."""
    if batch_size % num_replicas:
        rounded = math.ceil(batch_size / num_replicas) * num_replicas
        logger.warning("batch size %d is not a multiple of the %d replicas: using %d",
                       batch_size, num_replicas, rounded)
        return rounded
    return batch_size


class ReplicaFeeder:
    """Global batches to the slices of this worker's replicas, and those to a compiled step.

    ``step_signature`` gives a step's ``input_signature``: ``groups`` batch dicts per local
    replica, so that the step is traced once whatever the batch shapes; inside the step,
    ``distribute`` turns that list into the strategy's per-replica value, each replica's list of
    ``groups`` batches. With one group (tagging) every slice is padded to the global batch's
    longest row, so that the replicas' outputs line up; with more (training) the rows are sorted by
    length and each group is padded to its own longest row.
    """

    def __init__(self, strategy, preprocessor, groups=1):
        self.strategy = strategy
        self.preprocessor = preprocessor
        self.groups = groups
        self.num_replicas = strategy.num_replicas_in_sync
        ids = strategy.experimental_local_results(
            strategy.experimental_distribute_values_from_function(
                lambda context: context.replica_id_in_sync_group))
        self.local_replicas = [int(i) for i in ids]

    def step_signature(self, with_labels):
        import tensorflow as tf

        signature = dict(self.preprocessor.batch_signature(with_labels),
                         index=tf.TensorSpec([None], tf.int32))
        if with_labels:  # what the loss reads: a prediction step need not bind and convert them
            signature.update(weights=tf.TensorSpec([None], tf.float32),
                             global_count=tf.TensorSpec([], tf.int32))
        return [[signature] * (len(self.local_replicas) * self.groups)]

    def distribute(self, slices):
        """Inside a step: the list of local slices as one per-replica value of the strategy."""
        first = self.local_replicas[0]

        def replica_groups(context):
            at = (context.replica_id_in_sync_group - first) * self.groups
            return slices[at:at + self.groups]

        return self.strategy.experimental_distribute_values_from_function(replica_groups)

    def slices(self, corpus, rows, label_ids=None):
        """The padded slices of the global batch ``rows`` that this worker's replicas take."""
        if self.groups > 1:
            rows = rows[np.argsort(corpus.row_length[rows], kind="stable")]
        bounds = replica_bounds(len(rows), self.num_replicas)
        # the slices line up at the widest row's width (or read width: see delft_read_widths)
        widths = corpus.row_length if corpus.read_width is None else corpus.read_width
        width = int(widths[rows].max())
        parts = []
        for replica in self.local_replicas:
            start, end = bounds[replica]
            if self.groups == 1:
                parts.append(self._slice(corpus, rows, start, end, label_ids, width))
                continue
            for first, last in padding_groups(corpus.row_length[rows[start:end]], self.groups):
                parts.append(self._slice(corpus, rows, start + first, start + last, label_ids))
        return parts

    def _slice(self, corpus, rows, start, end, label_ids, width=None):
        """Rows ``start:end`` of ``rows`` padded to ``width`` (default: their longest); with none,
        a copy of one row that weighs 0."""
        empty = start == end
        part_rows = rows[:1] if empty else rows[start:end]
        width = batch_width(corpus, part_rows) if width is None else width
        batch = self.preprocessor.padded_batch(corpus, part_rows, label_ids, width)
        batch["index"] = (np.full(1, -1) if empty else part_rows).astype(np.int32)
        if label_ids is not None:
            batch["weights"] = np.full(len(part_rows), 0.0 if empty else 1.0, dtype=np.float32)
            batch["global_count"] = np.int32(len(rows))
        return batch


def prefetched(items, depth=2):
    """Iterate ``items`` computed ``depth`` ahead in a background thread (padding overlaps the
    device's step); an exception there is raised here, and stopping early stops the thread.

    ``items`` must make no TensorFlow tensor: a thread that touches TensorFlow's eager context
    leaves per-thread state behind (a list, never freed; ``tests/test_repetition.py``), and this
    thread is made per call."""
    buffer = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(entry):
        while not stop.is_set():
            try:
                buffer.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((done, None))
        except BaseException as error:  # handed to the consumer, raised there
            put((done, error))

    thread = threading.Thread(target=produce, name="delft-batches", daemon=True)
    thread.start()
    try:
        while True:
            item, error = buffer.get()
            if error is not None:
                raise error
            if item is done:
                return
            yield item
    finally:
        stop.set()
        thread.join()

