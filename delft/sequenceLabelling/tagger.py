"""Inference: forward pass and decoding in one compiled graph, sharded across the replicas.

Rows are sorted by length into batches (little padding; a model that reads its padding, DeLFT's
ChainCRF, by the width DeLFT's batches read each row at, in steps of as many padded cells as
DeLFT's largest batch), each global batch is split across the strategy's replicas, and the labels gathered back are put in input order by the row index every
slice carries, so the output is the same on 1 or N devices.
"""
from typing import List

import numpy as np

from delft.sequenceLabelling.batching import cell_budget_batches
from delft.sequenceLabelling.output import Tagged, per_text
from delft.training.batching import global_batch_size, length_bucketed_batches
from delft.sequenceLabelling.windows import Stitcher
from delft.training.prediction import ShardedStep
# DeLFT's import path of the entity chunker (GROBID-side code reads it from here)
from delft.sequenceLabelling.output import get_entities_with_offsets

__all__ = ["Predictions", "Predictor", "get_entities_with_offsets"]


class Predictions:
    """Label ids and confidences of every word of a corpus, sequence after sequence (flat):
    sequence ``i`` is ``[starts[i], starts[i + 1])``; filled step by step (:meth:`put`)."""

    def __init__(self, corpus):
        self._stitcher = Stitcher(corpus)
        self.ids = np.zeros(self._stitcher.size, np.int32)
        self.scores = np.zeros(self._stitcher.size, np.float32)
        self.starts = self._stitcher.starts.tolist()  # Python ints slice faster than numpy's

    def put(self, tags, scores, index):
        """A step's outputs: the labels and confidences of the rows ``index`` (-1: none)."""
        kept, positions = self._stitcher.positions(index, tags.shape[1])
        self.ids[positions] = tags[kept]
        self.scores[positions] = scores[kept]

    def labels(self, preprocessor) -> List[List[str]]:
        """The label names of each sequence's words."""
        return per_text(preprocessor.decode_labels(self.ids), self.starts)

    def tagged(self, preprocessor, texts, tokens, offsets) -> Tagged:
        """The texts these are the predictions of (their originals, tokens and offsets, as
        :class:`~delft.sequenceLabelling.output.Tagged` holds them), with their labels and
        confidences."""
        return Tagged(texts, tokens, offsets, preprocessor.decode_labels(self.ids), self.scores,
                      self.starts)


class Predictor(ShardedStep):
    """Label ids (and per-word confidences) for an encoded corpus, on the given strategy (the
    compiled step: :class:`~delft.training.prediction.ShardedStep`)."""

    def replica_outputs(self, batch):
        potentials = self.model(batch, training=False)
        tags, scores = self.model.decode(batch, potentials)
        return tags, scores, batch["index"]

    def batches(self, corpus, batch_size) -> List[np.ndarray]:
        """The global batches of ``corpus``'s rows, in the order they run."""
        # a row without tokens (a text with no token) has nothing to label, and a batch made only
        # of such rows would be a zero-step RNN, which TF cannot run: they never reach the model
        filled = np.flatnonzero(corpus.row_length > 0)
        if corpus.read_width is None:
            batch_size = global_batch_size(batch_size, self.strategy.num_replicas_in_sync)
            batches = length_bucketed_batches(corpus.row_width[filled], batch_size)
        elif len(filled):
            # a model that reads its padding labels a row as in its DeLFT batch whatever step it
            # runs in: steps as large as the largest DeLFT batch, in padded cells
            widths = corpus.read_width[filled]
            batches = cell_budget_batches(widths, batch_size * int(widths.max()))
        else:
            batches = []
        return [filled[rows] for rows in batches]

    def predict(self, corpus, batch_size) -> Predictions:
        """Label ids (int32) and confidences (float32) of every word of ``corpus``."""
        batches = self.batches(corpus, batch_size)
        predictions = Predictions(corpus)
        for outputs in self.batch_outputs(corpus, batches):
            predictions.put(*outputs)
        return predictions
