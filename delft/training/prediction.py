"""The compiled inference step both toolkits predict with, sharded across the strategy's
replicas: each global batch is split across them, and what they return is gathered back with the
index every slice carries, so the caller puts the rows in input order (the same on 1 or N
devices)."""
import gc

from delft.training.batching import ReplicaFeeder, prefetched
from delft.training.compiled import CompiledStep


class ShardedStep:
    """A compiled inference step over the strategy's replicas: each replica's
    :meth:`replica_outputs` of its slice of a global batch, gathered back with the rows' index.

    The step is traced once (its input signature leaves batch and length free) and kept for the
    life of the object: a call allocates nothing that outlives it.
    """

    def __init__(self, model, preprocessor, strategy):
        self.model = model
        self.strategy = strategy
        self.feeder = ReplicaFeeder(strategy, preprocessor)
        self._step = CompiledStep(self._predict_step, self.feeder.step_signature(False))

    def replica_outputs(self, batch):
        """The tensors of one replica's batch, its ``batch["index"]`` last."""
        raise NotImplementedError

    def predict(self, corpus, batch_size):
        """The predictions of every row of ``corpus``, in input order."""
        raise NotImplementedError

    def serve(self, corpus, batch_size):
        """:meth:`predict` for a caller that calls again and again (``Sequence.tag``,
        ``Classifier.predict``): the call that traces the step ends with one full collection of
        Python's garbage collector.

        A trace leaves ~10^5 new Python objects (its graph's), which push the collector into a
        full collection a few calls later, one that walks every object of the process, TensorFlow's
        included (~0.25 s: one tag call of a series took 4x the others); made at the end of the
        call that traces, which its caller waits for anyway, it spares the calls that follow.
        Training's validation calls :meth:`predict`: a collection there would only lengthen it.
        """
        traced = self._step.traced
        predictions = self.predict(corpus, batch_size)
        if not traced:
            gc.collect()
        return predictions

    def batch_outputs(self, corpus, batches):
        """The step's outputs (numpy) for each batch of rows of ``corpus``, in turn; the next
        batch's slices are made while the step runs when there is more than one."""
        slices = (self.feeder.slices(corpus, rows) for rows in batches)
        for parts in (prefetched(slices) if len(batches) > 1 else slices):
            yield tuple(value.numpy() for value in self._step(parts))

    def _predict_step(self, slices):
        outputs = self.strategy.run(lambda groups: self.replica_outputs(*groups),
                                    args=(self.feeder.distribute(slices),))
        return tuple(self.strategy.gather(value, axis=0) for value in outputs)
