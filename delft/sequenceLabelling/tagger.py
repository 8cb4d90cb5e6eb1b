"""Inference: forward pass and decoding in one compiled graph, sharded across the replicas.

Rows are sorted by length into batches (little padding), each global batch is split across the
strategy's replicas, and the labels gathered back are put in input order by the row index every
slice carries, so the output is the same on 1 or N devices.
"""
import numpy as np
import tensorflow as tf

from delft.sequenceLabelling.batching import (ReplicaFeeder, global_batch_size,
                                              length_bucketed_batches, prefetched)
from delft.sequenceLabelling.windows import merge_row_predictions


class Predictor:
    """Label ids (and per-word confidences) for an encoded corpus, on the given strategy.

    The compiled step is traced once (its input signature leaves batch and length free) and kept
    for the life of the predictor: a call allocates nothing that outlives it.
    """

    def __init__(self, model, preprocessor, strategy):
        self.model = model
        self.strategy = strategy
        self.feeder = ReplicaFeeder(strategy, preprocessor)
        self._step = tf.function(self._predict_step,
                                 input_signature=self.feeder.step_signature(False))

    def _predict_step(self, slices):
        def replica_fn(batch):
            potentials = self.model(batch, training=False)
            tags, scores = self.model.decode(batch, potentials)
            return tags, scores, batch["index"]

        outputs = self.strategy.run(replica_fn, args=(self.feeder.distribute(slices),))
        return tuple(self.strategy.gather(value, axis=0) for value in outputs)

    def predict(self, corpus, batch_size):
        """Per input sequence: label ids (int32) and confidences (float32), every word labelled."""
        batch_size = global_batch_size(batch_size, self.strategy.num_replicas_in_sync)
        # a row without tokens (a text with no token) has nothing to label, and a batch made only
        # of such rows would be a zero-step RNN, which TF cannot run: they never reach the model
        filled = np.flatnonzero(corpus.row_length > 0)
        batches = [filled[rows] for rows in
                   length_bucketed_batches(corpus.row_width[filled], batch_size)]
        row_tags = [np.zeros(0, np.int32)] * corpus.num_rows
        row_scores = [np.zeros(0, np.float32)] * corpus.num_rows
        lengths = corpus.row_length
        slices = (self.feeder.slices(corpus, rows) for rows in batches)
        for parts in (prefetched(slices) if len(batches) > 1 else slices):
            tags, scores, index = (value.numpy() for value in self._step(parts))
            for i, row in enumerate(index):
                if row >= 0:
                    row_tags[row] = tags[i, :lengths[row]]
                    row_scores[row] = scores[i, :lengths[row]]
        return (merge_row_predictions(corpus, row_tags, np.int32),
                merge_row_predictions(corpus, row_scores, np.float32))
