"""Training of a sequence labeller: the shared epoch loop (:mod:`delft.training.loop`) on batches
of rows of similar length, early stopping on validation entity F1.
"""
from delft.sequenceLabelling import evaluation
from delft.sequenceLabelling.tagger import Predictor
from delft.training.batching import batches_per_epoch, length_bucketed_batches
# the shared loop's names, imported from here by code written before it was shared
from delft.training.loop import (EarlyStopping, EpochTrainer, WarmupLinearDecay,  # noqa: F401
                                 computes_in_float16, format_epoch, make_optimizer, plot_history,
                                 progress_bar)


class Trainer(EpochTrainer):
    """Fit a sequence model on encoded corpora under ``strategy``; keeps the best epoch's
    weights (validation micro F1 over entities)."""

    metric = "val_f1"

    def __init__(self, model, preprocessor, training_config, strategy, batch_size,
                 uses_transformer=False, trackers=()):
        super().__init__(model, preprocessor, training_config, strategy, batch_size,
                         uses_transformer, trackers, training_config.length_groups)

    def train(self, train_corpus, train_labels, valid_corpus=None, valid_labels=None,
              checkpoints_claim=None, predictor=None):
        """Train; with a validation set, stop early on its micro-F1 and restore the best weights.

        ``checkpoints_claim``: see :meth:`~delft.training.loop.EpochTrainer.fit`. ``predictor``:
        the :class:`~delft.sequenceLabelling.tagger.Predictor` validation uses (made if None).
        """
        validation = None
        if valid_corpus is not None:
            predictor = predictor or Predictor(self.model, self.preprocessor, self.strategy)
            validation = (valid_corpus, [self.preprocessor.decode_labels(ids)
                                         for ids in valid_labels], predictor)
        return self.fit(train_corpus, train_labels, validation, checkpoints_claim)

    def epoch_batches(self, corpus, rng):
        return length_bucketed_batches(corpus.row_width, self.batch_size, rng,
                                       self.config.pool_batches)

    def steps_per_epoch(self, corpus):
        return batches_per_epoch(corpus.num_rows, self.batch_size, self.config.pool_batches)

    def _predicted_labels(self, validation):
        corpus, truth, predictor = validation
        predictions = predictor.predict(corpus, self.batch_size)
        return truth, predictions.labels(self.preprocessor)

    def prepare_validation(self, validation):
        """The validation step traced and optimized: run on one row of the validation set."""
        corpus, _, predictor = validation
        batches = predictor.batches(corpus, self.batch_size)
        if batches:
            predictor.warm_up(corpus, batches[0][:1])

    def validation_score(self, validation):
        return evaluation.f1_score(*self._predicted_labels(validation))

    def validation_report(self, validation):
        return evaluation.precision_recall_f1(*self._predicted_labels(validation))
