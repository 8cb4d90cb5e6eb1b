"""Training: a distributed custom loop with early stopping on validation entity F1.

One step on N replicas equals one step on one device for the same global batch: each replica's
loss is its rows' summed negative log-likelihood divided by the *global* batch size, gradients are
summed across replicas, clipped by their global norm, and applied once (see doc/multi-gpu.md).
"""
import logging
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from delft.sequenceLabelling import evaluation
from delft.sequenceLabelling.batching import (batches_per_epoch, distributed_dataset,
                                              global_batch_size, length_bucketed_batches)
from delft.sequenceLabelling.tagger import Predictor

logger = logging.getLogger(__name__)


def make_optimizer(training_config, total_steps, uses_transformer):
    """Adam for the RNN family; AdamW with 10% linear warm-up then linear decay for transformers."""
    learning_rate = training_config.resolved_learning_rate(uses_transformer)
    if uses_transformer:
        warmup = max(1, int(total_steps * training_config.warmup_ratio))
        schedule = WarmupLinearDecay(learning_rate, warmup, max(total_steps, warmup + 1))
        return keras.optimizers.AdamW(learning_rate=schedule,
                                      weight_decay=training_config.weight_decay)
    return keras.optimizers.Adam(learning_rate=learning_rate)


@keras.saving.register_keras_serializable(package="delft")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to ``peak`` over ``warmup_steps``, then linear decay to 0 at ``total_steps``."""

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


class Trainer:
    """Fit ``model`` on encoded corpora under ``strategy``; keeps the best epoch's weights."""

    def __init__(self, model, preprocessor, training_config, strategy, uses_transformer=False):
        self.model = model
        self.preprocessor = preprocessor
        self.config = training_config
        self.strategy = strategy
        self.uses_transformer = uses_transformer
        self.optimizer = None
        self.history = []
        self._train_step = tf.function(self._distributed_train_step)

    # -- one step -----------------------------------------------------------------------------
    def _replica_step(self, batch):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            potentials = self.model(batch, training=True)
            losses = self.model.loss_per_example(batch, potentials) * batch["weights"]
            loss = tf.reduce_sum(losses) / tf.cast(batch["global_count"], tf.float32)
        gradients = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
        context = tf.distribute.get_replica_context()
        gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
        if self.config.clip_gradients:
            gradients, _ = tf.clip_by_global_norm(gradients, self.config.clip_gradients)
        # the optimizer sums across replicas again: hand it 1/N of the already summed gradient
        share = 1.0 / context.num_replicas_in_sync
        self.optimizer.apply_gradients([(g * share, v) for g, v in zip(gradients, variables)])
        return loss

    def _distributed_train_step(self, iterator):
        batch = next(iterator)
        losses = self.strategy.run(self._replica_step, args=(batch,))
        rows = self.strategy.run(lambda b: tf.reduce_sum(b["weights"]), args=(batch,))
        return (self.strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None),
                self.strategy.reduce(tf.distribute.ReduceOp.SUM, rows, axis=None))

    def build_optimizer(self, steps_per_epoch):
        with self.strategy.scope():
            self.optimizer = make_optimizer(self.config, steps_per_epoch * self.config.max_epoch,
                                            self.uses_transformer)
            self.optimizer.build(self.model.trainable_variables)

    # -- epochs -------------------------------------------------------------------------------
    def train(self, train_corpus, train_labels, valid_corpus=None, valid_labels=None):
        """Train; with a validation set, stop early on its micro-F1 and restore the best weights."""
        config = self.config
        batch_size = global_batch_size(config.batch_size, self.strategy.num_replicas_in_sync)
        rng = np.random.default_rng(config.seed)
        steps = batches_per_epoch(train_corpus.num_rows, batch_size)
        if self.optimizer is None:
            self.build_optimizer(steps)

        def epochs():
            while True:
                yield from length_bucketed_batches(train_corpus.row_width, batch_size, rng)

        # one iterator for the whole run: no tf.data pipeline to build per epoch
        iterator = iter(distributed_dataset(self.strategy, self.preprocessor, train_corpus,
                                            epochs, train_labels))
        if valid_corpus is not None:
            predict_valid = Predictor(self.model, self.preprocessor,
                                      self.strategy).repeatable(valid_corpus, batch_size)
            valid_truth = [self.preprocessor.decode_labels(ids) for ids in valid_labels]
        best_f1, best_epoch, best_weights, wait, plateau_wait = -1.0, 0, None, 0, 0
        for epoch in range(1, config.max_epoch + 1):
            start = time.perf_counter()
            progress = keras.utils.Progbar(steps, verbose=1 if sys.stdout.isatty() else 0)
            total = 0.0
            for i in range(steps):
                loss, rows = (float(value) for value in self._train_step(iterator))
                total += loss * rows
                progress.update(i + 1, [("loss", loss)])
            record = {"epoch": epoch, "loss": total / train_corpus.num_rows,
                      "learning_rate": self._current_learning_rate()}
            if valid_corpus is not None:
                predicted, _ = predict_valid()
                predicted = [self.preprocessor.decode_labels(ids) for ids in predicted]
                record["val_f1"] = evaluation.f1_score(valid_truth, predicted)
            record["seconds"] = time.perf_counter() - start
            self.history.append(record)
            print(_format_epoch(record, config.max_epoch), flush=True)
            if config.lr_schedule == "exponential" and not self.uses_transformer:
                self.optimizer.learning_rate.assign(self.optimizer.learning_rate * config.lr_decay)
            if valid_corpus is None:
                continue
            if record["val_f1"] > best_f1:
                best_f1, best_epoch, wait, plateau_wait = record["val_f1"], epoch, 0, 0
                best_weights = self.model.get_weights()
            else:
                wait += 1
                plateau_wait += 1
                if config.lr_schedule == "plateau" and plateau_wait >= 2 and not self.uses_transformer:
                    self.optimizer.learning_rate.assign(self.optimizer.learning_rate * config.lr_decay)
                    plateau_wait = 0
                if config.early_stop and wait >= config.patience:
                    print(f"early stop: no better validation F1 for {wait} epochs", flush=True)
                    break
        if best_weights is not None:
            self.model.set_weights(best_weights)
            print(f"restored the weights of epoch {best_epoch} (validation F1 {best_f1:.4f})",
                  flush=True)
        return self.history

    def _current_learning_rate(self):
        rate = self.optimizer.learning_rate
        return float(rate.numpy() if hasattr(rate, "numpy") else rate)


def _format_epoch(record, max_epoch):
    text = f"epoch {record['epoch']:3d}/{max_epoch}  loss {record['loss']:.4f}"
    if "val_f1" in record:
        text += f"  val_f1 {record['val_f1']:.4f}"
    return text + f"  lr {record['learning_rate']:.2e}  {record['seconds']:.2f}s"


def plot_history(history, path):
    """Write the training curve (loss, validation F1 per epoch) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [r["epoch"] for r in history]
    figure, loss_axis = plt.subplots(figsize=(6, 3.5))
    loss_axis.plot(epochs, [r["loss"] for r in history], color="tab:blue", label="train loss")
    loss_axis.set_xlabel("epoch")
    loss_axis.set_ylabel("loss", color="tab:blue")
    if any("val_f1" in r for r in history):
        f1_axis = loss_axis.twinx()
        f1_axis.plot(epochs, [r.get("val_f1", np.nan) for r in history], color="tab:orange")
        f1_axis.set_ylabel("validation micro F1", color="tab:orange")
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
