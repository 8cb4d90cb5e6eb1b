"""Inference: forward pass and decoding in one compiled graph, sharded across the replicas.

Rows are sorted by length into batches (little padding), each global batch is split across the
strategy's replicas, and the labels gathered back are put in input order by the row index every
slice carries, so the output is the same on 1 or N devices.
"""
import itertools

import numpy as np
import tensorflow as tf

from delft.sequenceLabelling.batching import (distributed_dataset, global_batch_size,
                                              length_bucketed_batches)
from delft.sequenceLabelling.preprocess import merge_row_predictions


class Predictor:
    """Label ids (and per-word confidences) for an encoded corpus, on the given strategy."""

    def __init__(self, model, preprocessor, strategy):
        self.model = model
        self.preprocessor = preprocessor
        self.strategy = strategy
        self._step = tf.function(self._predict_step)

    def _predict_step(self, iterator):
        def replica_fn(batch):
            potentials = self.model(batch, training=False)
            tags, scores = self.model.decode(batch, potentials)
            return tags, scores, batch["index"]

        outputs = self.strategy.run(replica_fn, args=(next(iterator),))
        return tuple(self.strategy.gather(value, axis=0) for value in outputs)

    def predict(self, corpus, batch_size):
        """Per input sequence: label ids (int32) and confidences (float32), every word labelled."""
        return self.repeatable(corpus, batch_size)()

    def repeatable(self, corpus, batch_size):
        """A function predicting ``corpus`` at each call, on one dataset iterator made once.

        Validation predicts the same rows every epoch: reusing the iterator saves building a
        tf.data pipeline each time.
        """
        batch_size = global_batch_size(batch_size, self.strategy.num_replicas_in_sync)
        # a row without tokens (a text with no token) has nothing to label, and a batch made only
        # of such rows would be a zero-step RNN, which TF cannot run: they never reach the model
        filled = np.flatnonzero(corpus.row_length > 0)
        batches = [filled[rows] for rows in
                   length_bucketed_batches(corpus.row_width[filled], batch_size)]
        iterator = iter(distributed_dataset(self.strategy, self.preprocessor, corpus,
                                            lambda: itertools.cycle(batches)))
        return lambda: self._collect(corpus, len(batches), iterator)

    def _collect(self, corpus, steps, iterator):
        row_tags = [np.zeros(0, np.int32)] * corpus.num_rows
        row_scores = [np.zeros(0, np.float32)] * corpus.num_rows
        lengths = corpus.row_length
        for _ in range(steps):
            tags, scores, index = (value.numpy() for value in self._step(iterator))
            for i, row in enumerate(index):
                if row >= 0:
                    row_tags[row] = tags[i, :lengths[row]]
                    row_scores[row] = scores[i, :lengths[row]]
        return (merge_row_predictions(corpus, row_tags, np.int32),
                merge_row_predictions(corpus, row_scores, np.float32))
