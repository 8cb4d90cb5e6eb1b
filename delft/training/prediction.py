"""The compiled inference step both toolkits predict with, sharded across the strategy's
replicas: each global batch is split across them, and what they return is gathered back with the
index every slice carries, so the caller puts the rows in input order (the same on 1 or N
devices), and the context of the calls a server repeats (:func:`serving_call`)."""
import contextlib
import gc

from delft.training.batching import ReplicaFeeder, prefetched
from delft.training.compiled import CompiledStep


@contextlib.contextmanager
def serving_call():
    """The context of a call a server makes again and again (``Sequence.tag``,
    ``Classifier.predict``): Python's cyclic garbage collector off inside (and as it was, after),
    and one full collection at the end of a call that traced a compiled step.

    A tag call makes hundreds of thousands of small lists (tokens, labels, ``[token, label]``
    pairs), none of them in a reference cycle, so the collector finds nothing in them; yet every
    700 new objects it walks the young ones, and now and then every object of the process,
    TensorFlow's included. On 50,000 date sequences that was a fifth to a quarter of a
    ``Sequence.tag`` call (``benchmarks/tagging_stages.py``, the stitching stage).

    A trace leaves ~10^5 new objects (its graph's), which bring a full collection a few calls
    later (~0.25 s: one tag call of a series of 20 took 4x the others); made at the end of the call
    that traces, which its caller waits for anyway, it spares the calls that follow.
    ``Sequence.tag_file`` and ``eval``, one long job each, do not collect: a command that tags
    once would only pay for it.
    """
    enabled = gc.isenabled()
    traces = CompiledStep.traces
    gc.disable()
    try:
        yield
    finally:
        if CompiledStep.traces != traces:
            gc.collect()
        if enabled:
            gc.enable()


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

    def warm_up(self, corpus, rows):
        """Run the step once on ``rows`` of ``corpus``, its outputs dropped: what a first call
        pays (the trace, TensorFlow's graph optimization), paid where it can overlap other work."""
        for _ in self.batch_outputs(corpus, [rows]):
            pass

    def batch_outputs(self, corpus, batches):
        """The step's outputs (numpy) for each batch of rows of ``corpus``, in turn; the next
        batch's slices are made while the step runs when there is more than one (numpy arrays:
        the step's call makes them tensors, see ``prefetched``)."""
        slices = (self.feeder.slices(corpus, rows) for rows in batches)
        for parts in (prefetched(slices) if len(batches) > 1 else slices):
            yield tuple(value.numpy() for value in self._step(parts))

    def _predict_step(self, slices):
        outputs = self.strategy.run(lambda groups: self.replica_outputs(*groups),
                                    args=(self.feeder.distribute(slices),))
        return tuple(self.strategy.gather(value, axis=0) for value in outputs)
