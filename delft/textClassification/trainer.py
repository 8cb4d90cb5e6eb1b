"""Training of a classifier: the shared epoch loop (:mod:`delft.training.loop`) on batches drawn at
random, early stopping on the validation set's loss (or its mean ROC-AUC, as DeLFT's apps), DeLFT's
optimizers.

The optimizer is DeLFT's for the architecture: RMSprop (rho 0.9) for the GRU architectures with
gradients clipped at a global norm of 1, AdamW with warm-up then linear decay for ``bert``, Adam
for the others (gradients clipped at 5, as DeLFT 1.2.0).
"""
import dataclasses

import keras
import numpy as np

from delft.textClassification.evaluation import class_scores, mean_cross_entropy, mean_roc_auc
from delft.textClassification.models import architecture
from delft.textClassification.predictor import ClassPredictor
from delft.training.batching import batches_per_epoch, length_bucketed_batches
from delft.training.loop import EpochTrainer, with_loss_scaling

RMSPROP_ARCHITECTURES = ("gru", "gru_simple", "gru_lstm")
# DeLFT 1.2.0 (PyTorch) divides by sqrt(v) + 1e-7; Keras by sqrt(v + epsilon). With Keras' own
# 1e-7 under the root, a weight whose gradients stay below ~3e-4 (a word's embedding row, under
# the global clip at 1) moves slower, ~100x at 1e-5, and `gru` learned the rare licence classes
# too slowly: 1e-14 under the root is PyTorch's 1e-7 beside it (within 25% near 1e-7).
RMSPROP_EPSILON_UNDER_ROOT = 1e-14


def resolved_clip(training_config, architecture_name):
    """The gradient clipping norm a training of ``architecture_name`` takes: the config's, else
    DeLFT's (1 with RMSprop, 5 otherwise).

    >>> from delft.textClassification.config import TrainingConfig
    >>> resolved_clip(TrainingConfig(), "gru"), resolved_clip(TrainingConfig(clip_gradients=0.0), "cnn")
    (1.0, 0.0)
    """
    if training_config.clip_gradients is not None:
        return training_config.clip_gradients
    return 1.0 if architecture_name in RMSPROP_ARCHITECTURES else 5.0


class ClassifierTrainer(EpochTrainer):
    """Fit a classifier on a :class:`~delft.textClassification.preprocess.TextCorpus`; keeps the
    weights of the epoch of lowest validation loss (``use_roc_auc``: of highest ROC-AUC, as
    DeLFT's apps train)."""

    # Only a strictly better score is progress, as in DeLFT: ROC-AUC reaches 1 on small
    # validation sets (GROBID's licence data: 78 texts), where counting ties trained every model
    # to max_epoch.
    ties_reach_best = False

    def __init__(self, model, preprocessor, training_config, strategy, batch_size,
                 architecture_name, uses_transformer=False, trackers=()):
        self.architecture_name = architecture_name
        training_config = dataclasses.replace(
            training_config, clip_gradients=resolved_clip(training_config, architecture_name))
        super().__init__(model, preprocessor, training_config, strategy, batch_size,
                         uses_transformer, trackers, architecture(architecture_name).length_groups)
        self.predictor = ClassPredictor(model, preprocessor, strategy)
        # The validation loss by default: on the licence data's 78 validation texts ROC-AUC
        # nears 1 while the rare classes are still learned, and stopping on it kept epochs whose
        # argmax missed them (doc/classification.md, "Figures").
        self.metric = "val_roc_auc" if training_config.use_roc_auc else "val_loss"
        self.higher_is_better = bool(training_config.use_roc_auc)

    def train(self, train_corpus, train_labels, valid_corpus=None, valid_truth=None,
              checkpoints_claim=None):
        """Train on ``train_labels`` (:meth:`TextPreprocessor.label_rows`); with a validation
        set (its one-hot ``valid_truth``), stop early on its ROC-AUC."""
        validation = None if valid_corpus is None else (valid_corpus, valid_truth)
        return self.fit(train_corpus, train_labels, validation, checkpoints_claim)

    def epoch_batches(self, corpus, rng):
        return length_bucketed_batches(corpus.row_length, self.batch_size, rng, 1)

    def steps_per_epoch(self, corpus):
        return batches_per_epoch(corpus.num_rows, self.batch_size, 1)

    def prepare_validation(self, validation):
        """The validation step traced and optimized: run on the first validation text."""
        self.predictor.warm_up(validation[0], np.arange(1))

    def validation_score(self, validation):
        corpus, truth = validation
        probabilities = self.predictor.predict(corpus, self.batch_size)
        if self.config.use_roc_auc:
            return mean_roc_auc(truth, probabilities)
        # without the class weights: weighted 25 / 1 / 9 (citations), the loss of a few rare
        # texts decided, and stopped at epoch 3 (macro F1 47.15, unweighted 57.27, seed 1)
        return mean_cross_entropy(truth, probabilities, self.model.output_activation == "softmax")

    def validation_report(self, validation):
        corpus, truth = validation
        return class_scores(truth, self.predictor.predict(corpus, self.batch_size),
                            self.preprocessor.list_classes)

    def make_optimizer(self, total_steps):
        if self.architecture_name not in RMSPROP_ARCHITECTURES:
            return super().make_optimizer(total_steps)  # Adam, or AdamW for bert
        optimizer = keras.optimizers.RMSprop(
            learning_rate=self.config.resolved_learning_rate(False), rho=0.9,
            epsilon=RMSPROP_EPSILON_UNDER_ROOT)
        return with_loss_scaling(optimizer, self.loss_scaling)
