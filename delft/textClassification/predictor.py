"""Class probabilities of encoded texts, sharded across the strategy's replicas.

Texts are batched by length (transformer rows are padded to their batch's longest; word rows are
all ``maxlen`` long, and keep their order); each global batch is split across the replicas and the
probabilities gathered back are put in input order by the row index every slice carries, so the
output is the same on 1 or N devices. The compiled step is traced once and kept for the life of the
predictor.
"""
import numpy as np

from delft.training.batching import global_batch_size, length_bucketed_batches
from delft.training.prediction import ShardedStep


class ClassPredictor(ShardedStep):
    """Probabilities [texts, classes] of a :class:`~delft.textClassification.preprocess.TextCorpus`
    on the given strategy."""

    def __init__(self, model, preprocessor, strategy):
        super().__init__(model, preprocessor, strategy)
        self.classes = len(preprocessor.list_classes)

    def replica_outputs(self, batch):
        return self.model(batch, training=False), batch["index"]

    def predict(self, corpus, batch_size):
        """The class probabilities (float32) of every row of ``corpus``, in input order."""
        batch_size = global_batch_size(batch_size, self.strategy.num_replicas_in_sync)
        batches = length_bucketed_batches(corpus.row_length, batch_size)
        probabilities = np.zeros((corpus.num_rows, self.classes), dtype=np.float32)
        for values, index in self.batch_outputs(corpus, batches):
            kept = index >= 0  # a replica without a row of its own had a copy weighing 0
            probabilities[index[kept]] = values[kept]
        return probabilities
