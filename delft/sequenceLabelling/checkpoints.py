"""Preemption-safe training: a checkpoint at every epoch end, with TensorFlow's own machinery.

A checkpoint is one ``tf.train.Checkpoint`` kept by a ``tf.train.CheckpointManager`` in
``<models_dir>/<model_name>.checkpoints/`` (:func:`checkpoint_dir`). It holds:

- the model's variables (weights, and the seed state of its dropout layers) and the optimizer's
  (moments, iteration count, learning rate: the state of the plateau and exponential schedules;
  the transformers' warm-up/decay schedule is a function of the iteration count);
- the best weights so far, which early stopping restores at the end;
- :class:`TrainingProgress`, a ``tf.train.experimental.PythonState``: the epoch to run next, the
  state of the numpy Generator its data order is drawn from, the steps of that epoch already
  applied and their summed loss, early stopping's counters, the history, and what the data order
  depends on (rows, global batch, seed), so that a checkpoint of another run is refused.

The same training run again restores the latest checkpoint, says so, and goes on: epochs continue
(the history is kept), the data order is the one the uninterrupted run draws, and the final
weights are those of an uninterrupted run. ``resume=False`` (``--no-resume``) removes it first.

What covers which end of a process:

- SIGKILL, a crash, a lost node: nothing can run at that moment; the per-epoch checkpoint is what
  is left, and at most one epoch is done again.
- SIGTERM (what a scheduler sends before it kills: SLURM at the time limit or with ``--signal``,
  preemptible VMs, ``docker stop``): ``tf.distribute.experimental.PreemptionCheckpointHandler``
  wraps every step; at the next step boundary (agreed between the workers through TF's
  coordination service) it saves a checkpoint that records the steps done in the epoch, and the
  process exits with code 143. Only a process's main thread can catch a signal: run from another
  thread (GROBID's JEP interpreters) the handler is not installed, and per-epoch checkpoints remain.

With several workers the chief writes the checkpoints; as TF's multi-worker recipe requires,
every worker saves (a save may need all of them), the others into a temporary directory that is
removed at once. Every worker restores from the chief's directory: it must be on a filesystem
they share (they check that they resume from the same epoch).
"""
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

import numpy as np
import tensorflow as tf

from delft.utilities import devices
from delft.utilities.errors import ConfigurationError

logger = logging.getLogger(__name__)

CHECKPOINTS_SUFFIX = ".checkpoints"
PROGRESS_KEY = "progress/.ATTRIBUTES/py_state"  # where tf.train.Checkpoint keeps PythonState
PREEMPTED_EXIT_CODE = 143  # 128 + SIGTERM, what the scheduler expects of a process it ended


def checkpoint_dir(models_dir, model_name):
    """Where the training of ``model_name`` saved under ``models_dir`` keeps its checkpoints.

    >>> checkpoint_dir("models", "date-BidLSTM_CRF")
    'models/date-BidLSTM_CRF.checkpoints'
    """
    return os.path.join(models_dir, model_name + CHECKPOINTS_SUFFIX)


def remove_checkpoints(directory, strategy):
    """Remove ``directory`` (the chief does; the others have nothing there)."""
    if directory and devices.is_chief(strategy) and os.path.isdir(directory):
        shutil.rmtree(directory)
        logger.info("checkpoints removed: %s", directory)


class TrainingProgress(tf.train.experimental.PythonState):
    """Where training stands, as the checkpoint stores it (JSON).

    ``early_stopping`` is the trainer's dataclass; its fields other than the weights are kept.
    """

    def __init__(self, rng, early_stopping, identity):
        self.rng = rng
        self.early_stopping = early_stopping
        self.identity = identity
        self.next_epoch = 1
        self.epoch_rng_state = rng.bit_generator.state
        self.steps_done = 0
        self.loss_sum = 0.0
        self.history = []
        self.stopped_early = False

    def begin_epoch(self):
        """Before an epoch draws its order: what a checkpoint made during it starts from."""
        self.epoch_rng_state = self.rng.bit_generator.state

    def step_done(self, loss_times_rows):
        self.steps_done += 1
        self.loss_sum += loss_times_rows

    def end_epoch(self, epoch, stopped_early):
        self.next_epoch = epoch + 1
        self.steps_done = 0
        self.loss_sum = 0.0
        self.epoch_rng_state = self.rng.bit_generator.state
        self.stopped_early = stopped_early

    def serialize(self):
        counters = {f.name: getattr(self.early_stopping, f.name)
                    for f in dataclasses.fields(self.early_stopping) if f.name != "best_weights"}
        return json.dumps({"identity": self.identity, "next_epoch": self.next_epoch,
                           "epoch_rng_state": self.epoch_rng_state,
                           "steps_done": self.steps_done, "loss_sum": self.loss_sum,
                           "history": self.history, "stopped_early": self.stopped_early,
                           "early_stopping": counters})

    def deserialize(self, text):
        values = json.loads(text)
        self.next_epoch = values["next_epoch"]
        self.epoch_rng_state = values["epoch_rng_state"]
        self.rng.bit_generator.state = values["epoch_rng_state"]
        self.steps_done = values["steps_done"]
        self.loss_sum = values["loss_sum"]
        self.history[:] = values["history"]
        self.stopped_early = values["stopped_early"]
        for name, value in values["early_stopping"].items():
            setattr(self.early_stopping, name, value)


class EpochCheckpoints:
    """The checkpoints of one training run in ``directory`` (see the module's docstring)."""

    def __init__(self, directory, strategy, model, optimizer, progress):
        self.directory = directory
        self.strategy = strategy
        self.progress = progress
        self._best_weights_saved = None
        self.best_weights = [tf.Variable(np.zeros(w.shape, w.dtype), trainable=False)
                             for w in model.get_weights()]
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                              best_weights=self.best_weights, progress=progress)
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep=1)

    # -- restore ------------------------------------------------------------------------------
    def restore(self, resume):
        """Restore the latest checkpoint unless ``resume`` is False (then remove them all).

        Returns:
            True when training goes on from a checkpoint.
        """
        if not resume:
            if devices.is_chief(self.strategy) and os.path.isdir(self.directory):
                shutil.rmtree(self.directory)
                logger.info("--no-resume: removed the checkpoints of an earlier run in %s",
                            self.directory)
            devices.wait_for_workers(self.strategy)  # nobody reads what the chief removes
            # a manager reads the directory when made: this one knows it is empty
            self.manager = tf.train.CheckpointManager(self.checkpoint, self.directory,
                                                      max_to_keep=1)
            return False
        latest = self.manager.latest_checkpoint
        self._check_workers_agree(latest)
        if latest is None:
            return False
        start = time.perf_counter()
        self._check_same_training(latest)
        try:
            # what the checkpoint has beyond this object graph (the preemption handler's step
            # count) is restored when the handler attaches it
            self.checkpoint.restore(latest).assert_existing_objects_matched().expect_partial()
        except (AssertionError, ValueError, tf.errors.OpError) as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise ConfigurationError(f"{latest}: a checkpoint of another model ({first_line}); "
                                     "--no-resume starts afresh") from None
        progress = self.progress
        if progress.early_stopping.best_epoch:
            progress.early_stopping.best_weights = [v.numpy() for v in self.best_weights]
            self._best_weights_saved = progress.early_stopping.best_weights
        if progress.stopped_early:
            going_on = "early stopping had ended the training: its best weights are kept"
        else:
            going_on = f"going on with epoch {progress.next_epoch}" + (
                f" at step {progress.steps_done + 1} of it" if progress.steps_done else "")
        logger.info("resuming from %s: %d epoch(s) done, %s (restored in %.2f s)", latest,
                    progress.next_epoch - 1, going_on, time.perf_counter() - start)
        return True

    def _check_same_training(self, latest):
        """Refuse, before anything is restored, a checkpoint whose data order is another's."""
        try:
            saved = json.loads(tf.train.load_checkpoint(latest).get_tensor(PROGRESS_KEY))
        except (tf.errors.OpError, ValueError) as error:
            raise ConfigurationError(f"{latest}: not a checkpoint of delft's training "
                                     f"({str(error).strip().splitlines()[0]}); --no-resume starts "
                                     "afresh") from None
        identity = self.progress.identity
        if saved["identity"] != identity:
            differences = ", ".join(f"{key} {saved['identity'].get(key)} there, {value} here"
                                    for key, value in identity.items()
                                    if saved["identity"].get(key) != value)
            raise ConfigurationError(f"{latest}: a checkpoint of another training ({differences}); "
                                     "--no-resume starts afresh")

    def _check_workers_agree(self, latest):
        """Each worker reads the chief's directory: they must find the same checkpoint."""
        if devices.worker_count(self.strategy) == 1:
            return
        number = int(latest.rsplit("-", 1)[1]) if latest else 0
        if devices.all_workers_agree(self.strategy, number):
            return
        raise ConfigurationError(f"{self.directory}: the workers do not find the same checkpoint "
                                 "(it must be on a filesystem they share)")

    # -- save ---------------------------------------------------------------------------------
    def save(self):
        """Save where training stands (every worker calls it; only the chief's copy is kept)."""
        state = self.progress.early_stopping
        if state.best_weights is not None and state.best_weights is not self._best_weights_saved:
            for variable, value in zip(self.best_weights, state.best_weights):
                variable.assign(value)
            self._best_weights_saved = state.best_weights
        if devices.is_chief(self.strategy):
            self.manager.save()
            return
        scratch = tempfile.mkdtemp(prefix="delft-worker-checkpoint-")
        try:
            tf.train.CheckpointManager(self.checkpoint, scratch, max_to_keep=1).save()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    # -- SIGTERM ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def preemption_guard(self):
        """Yield ``run(step, *args)``: under PreemptionCheckpointHandler when this is the main
        thread (a SIGTERM saves at the next step boundary and exits), else a plain call."""
        if threading.current_thread() is not threading.main_thread():
            yield run_directly
            return
        previous = signal.getsignal(signal.SIGTERM)
        handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            getattr(self.strategy, "cluster_resolver", None), self.manager,
            termination_config=tf.distribute.experimental.TerminationConfig(
                exit_fn=self._exit_preempted, save_fn=self.save))
        try:
            yield handler.run
        finally:
            signal.signal(signal.SIGTERM, previous)
            del handler  # its watcher threads stop when it goes

    def _exit_preempted(self):
        progress = self.progress
        logger.warning("SIGTERM: checkpoint saved in %s after %d step(s) of epoch %d; the same "
                       "command resumes from it", self.directory, progress.steps_done, progress.next_epoch)
        logging.shutdown()
        sys.exit(PREEMPTED_EXIT_CODE)


def run_directly(step, *args):
    """Run a training step as it is (no preemption handler)."""
    return step(*args)
