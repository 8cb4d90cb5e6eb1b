"""The distributed epoch loop both toolkits train with, and early stopping on a validation score.

One step on N replicas equals one step on one device for the same global batch: each replica's
loss is its rows' summed loss divided by the *global* batch size, gradients are summed across
replicas, clipped by their global norm, and applied once (see doc/multi-gpu.md). A toolkit
subclasses :class:`EpochTrainer` with its batches and its validation score (the tagger's entity
F1, the classifier's ROC-AUC); the model gives ``loss_per_example(batch, outputs)``.
"""
import concurrent.futures
import contextlib
import importlib
import logging
import sys
import time
from dataclasses import dataclass
from typing import List, Optional

import keras
import numpy as np
import tensorflow as tf

from delft.training import adam
from delft.training.batching import ReplicaFeeder, global_batch_size, prefetched
from delft.training.compiled import CompiledStep
from delft.training.checkpoints import EpochCheckpoints, TrainingProgress, run_directly
from delft.training.snapshots import weights_snapshot
from delft.utilities import devices
from delft.utilities.verbosity import showing_progress

logger = logging.getLogger(__name__)

# what plot_history draws with, imported when a curve is drawn (or beside a first train step)
CURVE_LIBRARY = "matplotlib.figure"
METRIC_LABELS = {"val_f1": "validation F1", "val_roc_auc": "validation ROC-AUC",
                 "val_loss": "validation loss"}


def make_optimizer(training_config, total_steps, uses_transformer, loss_scaling=False):
    """Adam for the RNN family; AdamW for transformers, at the ``transformer_schedule`` of
    ``training_config``: 10% linear warm-up then linear decay, or a constant rate. Both are
    Keras' with their update fused (:mod:`delft.training.adam`).

    ``loss_scaling`` (a model computing in float16) wraps it in Keras' dynamic
    ``LossScaleOptimizer``: small float16 gradients do not vanish, and a step whose scaled
    gradients overflow is skipped with a smaller scale.
    """
    learning_rate = training_config.resolved_learning_rate(uses_transformer)
    if uses_transformer:
        if training_config.transformer_schedule == "linear":
            learning_rate = warmup_then_decay(learning_rate, total_steps, training_config)
        optimizer = adam.AdamW(learning_rate=learning_rate,
                               weight_decay=training_config.weight_decay)
    else:
        optimizer = adam.Adam(learning_rate=learning_rate)
    return with_loss_scaling(optimizer, loss_scaling)


def warmup_then_decay(peak, total_steps, training_config):
    """The transformers' schedule: ``warmup_ratio`` of the steps up to ``peak``, then down to 0."""
    warmup = max(1, int(total_steps * training_config.warmup_ratio))
    return WarmupLinearDecay(peak, warmup, max(total_steps, warmup + 1))


def with_loss_scaling(optimizer, loss_scaling):
    return keras.optimizers.LossScaleOptimizer(optimizer) if loss_scaling else optimizer


def computes_in_float16(model):
    """Whether a layer of ``model`` computes in float16 (``compute_dtype="mixed_float16"``)."""
    return any(layer.dtype_policy.compute_dtype == "float16"
               for layer in model._flatten_layers(include_self=True, recursive=True))


@keras.saving.register_keras_serializable(package="delft")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to ``peak`` over ``warmup_steps``, then linear decay to 0 at ``total_steps``.

    >>> schedule = WarmupLinearDecay(1.0, 2, 4)
    >>> [round(float(schedule(step)), 2) for step in range(5)]
    [0.0, 0.5, 1.0, 0.5, 0.0]
    """

    def __init__(self, peak, warmup_steps, total_steps):
        self.peak = peak
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warmup = step / self.warmup_steps
        decay = (self.total_steps - step) / (self.total_steps - self.warmup_steps)
        return self.peak * tf.maximum(0.0, tf.minimum(warmup, decay))

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps}


@dataclass
class EarlyStopping:
    """Where early stopping and the plateau schedule stand after each epoch."""

    best_score: float = -1.0
    best_epoch: int = 0
    best_weights: Optional[List[np.ndarray]] = None
    wait: int = 0
    plateau_wait: int = 0


class EpochTrainer:
    """Fit ``model`` under ``strategy``, epoch after epoch; keeps the best epoch's weights.

    A subclass gives :meth:`epoch_batches` and :meth:`steps_per_epoch` (the rows of each global
    batch of an epoch), and :meth:`validation_score` (a number, higher is better unless
    ``higher_is_better`` is False) under the name ``metric`` in the history.
    ``training_config`` has the fields of
    :class:`delft.sequenceLabelling.config.TrainingConfig` the loop reads: ``max_epoch``,
    ``early_stop``, ``patience``, ``seed``, ``resume``, ``checkpoint_interval``,
    ``clip_gradients``, ``pool_batches``, ``lr_schedule``, ``lr_decay`` and the learning rate.
    """

    metric = "val_score"
    higher_is_better = True  # False: the score is a loss
    # whether an epoch that ties the best score becomes the best (see _should_stop)
    ties_reach_best = True

    def __init__(self, model, preprocessor, training_config, strategy, batch_size,
                 uses_transformer=False, trackers=(), length_groups=1):
        self.model = model
        self.trackers = list(trackers)  # delft.utilities.tracking, started by the caller
        self.preprocessor = preprocessor
        self.config = training_config
        self.strategy = strategy
        self.batch_size = global_batch_size(batch_size, strategy.num_replicas_in_sync)
        self.uses_transformer = uses_transformer
        self.loss_scaling = computes_in_float16(model)
        self.optimizer = None
        self.history = []
        self.feeder = ReplicaFeeder(strategy, preprocessor, length_groups)
        self._train_step = CompiledStep(self._distributed_train_step,
                                        self.feeder.step_signature(True), trimmed_optimization=True)
        # a function of its own, so that every length group of a step calls one trace of the
        # model's forward and backward pass instead of tracing them again
        self._group_gradients = tf.function(self._group_loss_and_gradients, autograph=False)

    # -- what a toolkit gives -----------------------------------------------------------------
    def epoch_batches(self, corpus, rng):
        """The row indices of each global batch of one epoch, in the order they are run."""
        raise NotImplementedError

    def steps_per_epoch(self, corpus):
        raise NotImplementedError

    def validation_score(self, validation):
        """The score of the model now on ``validation`` (what :meth:`fit` was given)."""
        raise NotImplementedError

    def validation_report(self, validation):
        """The scores the trackers receive at the end (None: only the per-epoch records)."""
        return None

    def prepare_validation(self, validation):
        """What :meth:`validation_score`'s first call would pay, paid now (e.g. its compiled
        step traced and run once); called in a thread of its own (:meth:`_prepare_aside`)."""

    def make_optimizer(self, total_steps):
        return make_optimizer(self.config, total_steps, self.uses_transformer, self.loss_scaling)

    # -- one step -----------------------------------------------------------------------------
    def _loss_scale(self):
        """What the loss is multiplied by before its gradients are taken (1 without loss scaling)."""
        return self.optimizer.dynamic_scale if self.loss_scaling else 1.0

    def _group_loss_and_gradients(self, batch):
        """A group's share of the step's loss (its rows' summed loss over the global batch size)
        and the gradients of that share times the loss scale for the trainable weights."""
        with tf.GradientTape() as tape:
            outputs = self.model(batch, training=True)
            losses = self.model.loss_per_example(batch, outputs) * batch["weights"]
            loss = tf.reduce_sum(losses) / tf.cast(batch["global_count"], tf.float32)
            scaled_loss = loss * self._loss_scale()
        return loss, [tf.convert_to_tensor(g)
                      for g in tape.gradient(scaled_loss, self.model.trainable_variables)]

    def _replica_step(self, groups):
        variables = self.model.trainable_variables
        # with loss scaling, gradients stay scaled until the LossScaleOptimizer divides them:
        # clipping the scaled ones at scale x the norm is clipping the true ones at the norm
        scale = self._loss_scale()
        results = [self._group_gradients(batch) for batch in groups]
        loss = tf.add_n([group_loss for group_loss, _ in results])
        gradients = [tf.add_n(parts) for parts in zip(*(grads for _, grads in results))]
        context = tf.distribute.get_replica_context()
        gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
        if self.config.clip_gradients:
            gradients, _ = tf.clip_by_global_norm(gradients, self.config.clip_gradients * scale)
        # the optimizer sums across replicas again: hand it 1/N of the already summed gradient
        share = 1.0 / context.num_replicas_in_sync
        self.optimizer.apply_gradients([(g * share, v) for g, v in zip(gradients, variables)])
        return loss

    def _distributed_train_step(self, slices):
        batch = self.feeder.distribute(slices)
        losses = self.strategy.run(self._replica_step, args=(batch,))
        rows = self.strategy.run(
            lambda groups: tf.add_n([tf.reduce_sum(b["weights"]) for b in groups]), args=(batch,))
        return (self.strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None),
                self.strategy.reduce(tf.distribute.ReduceOp.SUM, rows, axis=None))

    def build_optimizer(self, steps_per_epoch):
        with self.strategy.scope():
            self.optimizer = self.make_optimizer(steps_per_epoch * self.config.max_epoch)
            self.optimizer.build(self.model.trainable_variables)

    # -- epochs -------------------------------------------------------------------------------
    def _prepare_aside(self, validation):
        """What the epochs and the save need, started in a thread once the train step is traced:
        the step's first call then spends a second or more in TensorFlow's graph optimization,
        in C++ on one core without Python's lock, and this runs beside it instead of in turn:
        :meth:`prepare_validation` (on one replica only: on several, two steps' collectives in
        flight at once could wait on each other), then the import of the library
        :func:`plot_history` draws the training curve with (a saved model has its curve).
        BERT_CRF on date: a train_eval about a second shorter. A future, waited for before the
        first validation (its exception raised there)."""
        self._train_step.trace()
        prepares_validation = validation is not None and self.strategy.num_replicas_in_sync == 1

        def prepare():
            if prepares_validation:
                self.prepare_validation(validation)
            importlib.import_module(CURVE_LIBRARY)

        executor = concurrent.futures.ThreadPoolExecutor(1, "delft-prepare")
        ready = executor.submit(prepare)
        executor.shutdown(wait=False)  # its thread ends with the task
        return ready

    def fit(self, train_corpus, train_labels, validation=None, checkpoints_claim=None):
        """Train; with ``validation``, stop early on :meth:`validation_score` and restore the best
        weights.

        With ``checkpoints_claim`` (a :class:`~delft.training.checkpoints.CheckpointsClaim`),
        an epoch ends with a checkpoint in its folder once ``config.checkpoint_interval`` seconds
        have passed since the last one (or the start; 0: every epoch), and a checkpoint left by
        an interrupted run of the same training is resumed from unless ``config.resume`` is False
        (:mod:`delft.training.checkpoints`).
        """
        config = self.config
        seed = devices.common_seed(self.strategy, config.seed)
        rng = np.random.default_rng(seed)
        steps = self.steps_per_epoch(train_corpus)
        if self.optimizer is None:
            self.build_optimizer(steps)
        state = EarlyStopping()
        progress = TrainingProgress(rng, state, {"rows": int(train_corpus.num_rows),
                                                 "batch_size": self.batch_size, "seed": seed,
                                                 "pool_batches": config.pool_batches})
        self.history = progress.history
        checkpoints = None
        if checkpoints_claim:
            checkpoints = EpochCheckpoints(checkpoints_claim, self.strategy, self.model,
                                           self.optimizer, progress)
            checkpoints.restore(config.resume)
        guard = checkpoints.preemption_guard() if checkpoints else contextlib.nullcontext(run_directly)
        validation_ready = self._prepare_aside(validation)
        last_save = time.monotonic()
        with guard as run_step:
            for epoch in range(progress.next_epoch, config.max_epoch + 1):
                if progress.stopped_early:
                    break
                start = time.perf_counter()
                record = {"epoch": epoch,
                          "loss": self._run_epoch(train_corpus, train_labels, progress, epoch,
                                                  steps, run_step),
                          "learning_rate": self._current_learning_rate()}
                if validation is not None:
                    validation_ready.result()  # its exception, if it failed, is raised here
                    record[self.metric] = self.validation_score(validation)
                record["seconds"] = time.perf_counter() - start
                self.history.append(record)
                logger.info(format_epoch(record, config.max_epoch))
                for tracker in self.trackers:
                    tracker.epoch(record)
                stop = self._should_stop(record, state)
                progress.end_epoch(epoch, stopped_early=stop)
                if checkpoints and time.monotonic() - last_save >= config.checkpoint_interval:
                    checkpoints.save()
                    last_save = time.monotonic()
                if stop:
                    break
        if state.best_weights is not None:
            self.model.set_weights(state.best_weights)
            logger.info("restored the weights of epoch %d (%s %.4f)", state.best_epoch,
                        METRIC_LABELS.get(self.metric, self.metric), state.best_score)
        if self.trackers:
            scores = None if validation is None else self.validation_report(validation)
            for tracker in self.trackers:
                tracker.end(scores)
        return self.history

    def _run_epoch(self, corpus, label_ids, progress, epoch, steps, run_step):
        """One pass over ``corpus`` in a fresh random order; the mean loss per row.

        A run resumed in the middle of an epoch draws that epoch's order again from the state
        the checkpoint kept and skips the steps already applied.
        """
        progress.begin_epoch()
        batches = self.epoch_batches(corpus, progress.rng)
        done = progress.steps_done
        slices = (self.feeder.slices(corpus, rows, label_ids) for rows in batches[done:])
        with progress_bar(steps, f"epoch {epoch}") as bar:
            bar.update(done)
            for parts in prefetched(slices):
                loss, rows = (float(value) for value in run_step(self._train_step, parts))
                progress.step_done(loss * rows)
                bar.update(1)
        return progress.loss_sum / corpus.num_rows

    def _should_stop(self, record, state):
        """Update the schedule and early stopping after an epoch; True to stop training."""
        config = self.config
        adapts_rate = not self.uses_transformer
        if config.lr_schedule == "exponential" and adapts_rate:
            self._decay_learning_rate()
        if self.metric not in record:
            return False
        # By default a tie counts as reaching the best: on a small validation set (GROBID's 10%
        # of date is 58 sequences) the F1 saturates while the training loss still falls, and the
        # latest of the tied epochs generalises better (benchmarks/grobid_holdout.py). Keeping
        # the first would stop too early.
        score = record[self.metric]
        better = score > state.best_score if self.higher_is_better else score < state.best_score
        if not state.best_epoch or better or (self.ties_reach_best and score == state.best_score):
            state.best_score, state.best_epoch = record[self.metric], record["epoch"]
            state.best_weights = weights_snapshot(self.model)
            state.wait = state.plateau_wait = 0
            return False
        state.wait += 1
        state.plateau_wait += 1
        if config.lr_schedule == "plateau" and state.plateau_wait >= 2 and adapts_rate:
            self._decay_learning_rate()
            state.plateau_wait = 0
        if config.early_stop and state.wait >= config.patience:
            logger.info("early stop: no better %s for %d epochs",
                        METRIC_LABELS.get(self.metric, self.metric), state.wait)
            return True
        return False

    def _decay_learning_rate(self):
        self.optimizer.learning_rate.assign(self.optimizer.learning_rate * self.config.lr_decay)

    def _current_learning_rate(self):
        rate = self.optimizer.learning_rate
        return float(rate.numpy() if hasattr(rate, "numpy") else rate)


def progress_bar(total, description):
    """A progress bar on stderr in an interactive session (never on stdout, never in logs;
    ``delft.utilities.verbosity`` decides)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=description, unit="batch", leave=False, file=sys.stderr,
                disable=not showing_progress())


def format_epoch(record, max_epoch):
    """One readable line per epoch.

    >>> format_epoch({"epoch": 3, "loss": 1.5, "val_f1": 0.9, "learning_rate": 1e-3, "seconds": 0.2}, 60)
    'epoch   3/60  loss 1.5000  val_f1 0.9000  lr 1.00e-03  0.20s'
    """
    text = f"epoch {record['epoch']:3d}/{max_epoch}  loss {record['loss']:.4f}"
    for key in (key for key in record if key.startswith("val_")):
        text += f"  {key} {record[key]:.4f}"
    return text + f"  lr {record['learning_rate']:.2e}  {record['seconds']:.2f}s"


def plot_history(history, path):
    """Write the training curve (loss, the validation score per epoch) as a PNG.

    A bare ``Figure`` (no pyplot): the host process's matplotlib backend is left as it is.
    """
    Figure = importlib.import_module(CURVE_LIBRARY).Figure

    epochs = [r["epoch"] for r in history]
    figure = Figure(figsize=(6, 3.5))
    loss_axis = figure.subplots()
    loss_axis.plot(epochs, [r["loss"] for r in history], color="tab:blue", label="train loss")
    loss_axis.set_xlabel("epoch")
    loss_axis.set_ylabel("loss", color="tab:blue")
    metric = next((key for r in history for key in r if key.startswith("val_")), None)
    if metric:
        score_axis = loss_axis.twinx()
        score_axis.plot(epochs, [r.get(metric, np.nan) for r in history], color="tab:orange")
        label = {"val_f1": "validation micro F1"}.get(metric, METRIC_LABELS.get(metric, metric))
        score_axis.set_ylabel(label, color="tab:orange")
    figure.tight_layout()
    figure.savefig(path, dpi=80)
