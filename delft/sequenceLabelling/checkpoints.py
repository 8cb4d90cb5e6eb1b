"""Preemption-safe training: a checkpoint at every epoch end, with TensorFlow's own machinery.

A checkpoint is one ``tf.train.Checkpoint`` kept by a ``tf.train.CheckpointManager`` in
``<models_dir>/<model_name>.checkpoints/`` (:func:`checkpoint_dir`). It holds:

- the model's variables (weights, and the seed state of its dropout layers) and the optimizer's
  (moments, iteration count, learning rate: the state of the plateau and exponential schedules;
  the transformers' warm-up/decay schedule is a function of the iteration count; the loss scale);
- the best weights so far, which early stopping restores at the end;
- the :class:`TrainingProgress` (a ``tf.train.experimental.PythonState``): the epoch to run next,
  the state of the numpy Generator its data order is drawn from, the steps of that epoch already
  applied and their summed loss, early stopping's counters, the history, and what the data order
  depends on (rows, global batch, seed), so that a checkpoint of another training is refused.

The same training run again restores the latest checkpoint, says so, and goes on: epochs continue
(the history is kept), the data order is the one the uninterrupted run draws, and the final
weights are those of an uninterrupted run. ``resume=False`` (``--no-resume``) removes it first.

A save costs the training a snapshot (the variables copied to host variables in one compiled
call); the checkpoint is written from it in a background thread while the next epoch trains
(``benchmarks/checkpoint_overhead.py`` measures both).

What covers which end of a process:

- SIGKILL, a crash, a lost node: nothing can run at that moment; the last complete epoch-end
  checkpoint is what is left, and at most one epoch is done again.
- SIGTERM (what a scheduler sends before it kills: SLURM at the time limit or with ``--signal``,
  preemptible VMs, ``docker stop``): ``tf.distribute.experimental.PreemptionCheckpointHandler``
  wraps every step; at the next step boundary (agreed between the workers through TF's
  coordination service) it saves a checkpoint that records the steps done in the epoch, and the
  process exits with code 143. Only a process's main thread can catch a signal: run from another
  thread (GROBID's JEP interpreters) the handler is not installed, and per-epoch checkpoints remain.

With several workers the chief alone writes: a snapshot is the worker's own copy of the mirrored
variables, so writing it needs no collective (the reason TF's recipe has every worker save, the
others into a temporary directory, is a save that reads distributed variables). Every worker
restores from the chief's directory: it must be on a filesystem they share (they check that they
resume from the same checkpoint).
"""
import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time

import keras
import numpy as np
import tensorflow as tf

from delft.utilities import devices
from delft.utilities.errors import ConfigurationError

logger = logging.getLogger(__name__)

CHECKPOINTS_SUFFIX = ".checkpoints"
CLAIM_FILE = ".training.lock"  # inside the checkpoints folder: held by the training writing there
PROGRESS_KEY = "progress/.ATTRIBUTES/py_state"  # where tf.train.Checkpoint keeps PythonState
PREEMPTED_EXIT_CODE = 143  # 128 + SIGTERM, what the scheduler expects of a process it ended


def checkpoint_dir(models_dir, model_name):
    """Where the training of ``model_name`` saved under ``models_dir`` keeps its checkpoints.

    >>> checkpoint_dir("models", "date-BidLSTM_CRF")
    'models/date-BidLSTM_CRF.checkpoints'
    """
    return os.path.join(models_dir, model_name + CHECKPOINTS_SUFFIX)


class CheckpointsClaim:
    """The lock that makes one training the writer of a checkpoints folder, until it is removed.

    Two trainings of the same model into the same folder (two shells, a rerun while the first
    still runs) would otherwise write, resume from and remove one folder together. The first
    holds an ``fcntl.flock`` on ``<folder>/.training.lock`` from its start until its model is saved
    (or the process ends: the kernel releases a dead holder's lock); the second keeps no
    checkpoints and says so. With several workers the chief claims and the others follow its word.

    >>> import tempfile, os; folder = os.path.join(tempfile.mkdtemp(), "m.checkpoints")
    >>> first = CheckpointsClaim.take(folder); second = CheckpointsClaim.take(folder)
    >>> (first is not None, second)
    (True, None)
    >>> first.remove(); os.path.exists(folder)
    False
    """

    def __init__(self, directory, handle):
        self.directory = directory
        self._handle = handle  # the chief's; None on the other workers, which never write

    @classmethod
    def take(cls, directory, strategy=None):
        """The claim on ``directory``, or None when a training running now holds it."""
        chief = strategy is None or devices.is_chief(strategy)
        handle = _lock_claim_file(directory) if chief else None
        claimed = handle is not None or not chief
        if strategy is not None and devices.worker_count(strategy) > 1:
            claimed = bool(devices.chief_value(strategy, int(claimed)))
        return cls(directory, handle) if claimed else None

    def remove(self):
        """Remove the folder (its checkpoints are replaced by the saved model) and let it go."""
        if self._handle is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            logger.info("checkpoints removed: %s", self.directory)
        self.release()

    def release(self):
        """Let another training claim the folder; its checkpoints stay (to resume from)."""
        if self._handle is not None:
            self._handle.close()  # closing the file releases its flock
            self._handle = None

    def has_checkpoints(self):
        """Whether the folder holds anything beyond the claim (only the chief looks)."""
        return self._handle is not None and set(os.listdir(self.directory)) != {CLAIM_FILE}

    def clear(self):
        """Remove every checkpoint in the folder, keeping the claim (``--no-resume``)."""
        for entry in os.listdir(self.directory):
            if entry != CLAIM_FILE:
                path = os.path.join(self.directory, entry)
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)


def _lock_claim_file(directory):
    """The open, locked claim file of ``directory`` (made if need be), or None if held."""
    path = os.path.join(directory, CLAIM_FILE)
    while True:
        try:
            os.makedirs(directory, exist_ok=True)
            handle = open(path, "a+")
        except OSError as error:
            raise ConfigurationError(f"{directory}: cannot keep checkpoints there "
                                     f"({error.strerror})") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            logger.warning("%s: another training of this model is running (%s) and keeps its "
                           "checkpoints there; this one keeps none (it cannot be resumed)",
                           directory, holder)
            return None
        try:
            same_file = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:  # its holder removed the folder as we took the lock
            same_file = False
        if same_file:
            handle.truncate(0)
            handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
            handle.flush()
            return handle
        handle.close()


class TrainingProgress:
    """Where training stands; the checkpoint stores it as JSON (:class:`SavedProgress`).

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


class SavedProgress(tf.train.experimental.PythonState):
    """The progress as it stood at the last snapshot: the checkpoint is written after it, in a
    background thread, while training goes on."""

    def __init__(self, progress):
        self.progress = progress
        self.text = progress.serialize()

    def serialize(self):
        return self.text

    def deserialize(self, string_value):
        self.text = string_value.decode() if isinstance(string_value, bytes) else string_value
        self.progress.deserialize(self.text)


class EpochCheckpoints:
    """The checkpoints of one training run in ``directory`` (see the module's docstring).

    A save takes a snapshot (one compiled copy of the model's and the optimizer's variables into
    host variables) and writes it with ``CheckpointManager.save`` in a
    background thread while the next epoch trains; the next save, a SIGTERM save and the end of
    training wait for that write. The snapshot is this worker's own copy, so a save needs no other
    worker: with several workers the chief alone writes. Restoring reads the checkpoint into the
    snapshot variables and assigns them to the model and the optimizer.
    """

    def __init__(self, claim, strategy, model, optimizer, progress):
        self.claim = claim
        self.directory = directory = claim.directory
        self.strategy = strategy
        self.progress = progress
        self._best_weights_saved = None
        self._writer = None
        self._write_error = None
        self.live = {"model": [_tensorflow_variable(v) for v in model.variables],
                     "optimizer": [_tensorflow_variable(v) for v in optimizer.variables]}
        with tf.device("CPU:0"):  # host copies: no accelerator memory taken
            self.snapshot = {part: [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False)
                                    for v in variables]
                             for part, variables in self.live.items()}
            self.best_weights = [tf.Variable(np.zeros(w.shape, w.dtype), trainable=False)
                                 for w in model.get_weights()]
        pairs = [(source, target) for part in self.live
                 for source, target in zip(self.live[part], self.snapshot[part])]

        def copy_to_snapshot():
            for source, target in pairs:
                target.assign(source)

        self._copy_to_snapshot = tf.function(copy_to_snapshot)
        self.saved_progress = SavedProgress(progress)
        self.checkpoint = tf.train.Checkpoint(
            model=self.snapshot["model"], optimizer=self.snapshot["optimizer"],
            best_weights=self.best_weights, progress=self.saved_progress)
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep=1)

    # -- restore ------------------------------------------------------------------------------
    def restore(self, resume):
        """Restore the latest checkpoint unless ``resume`` is False (then remove them all).

        Returns:
            True when training goes on from a checkpoint.
        """
        if not resume:
            if self.claim.has_checkpoints():
                self.claim.clear()
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
        for part in self.live:
            for variable, value in zip(self.live[part], self.snapshot[part]):
                variable.assign(value)
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
        """Snapshot where training stands and write it in the background (the chief does)."""
        if not devices.is_chief(self.strategy):
            return
        self._snapshot()
        self._writer = threading.Thread(target=self._write, name="delft-checkpoint", daemon=True)
        self._writer.start()

    def save_now(self):
        """Snapshot and write before returning (the preemption handler's save, before exit)."""
        if devices.is_chief(self.strategy):
            self._snapshot()
            self._write()
            self.wait()

    def wait(self):
        """Return once the checkpoint being written is complete (raise what its write raised)."""
        if self._writer is not None:
            self._writer.join()
            self._writer = None
        if self._write_error is not None:
            error, self._write_error = self._write_error, None
            raise error

    def _snapshot(self):
        self.wait()  # the snapshot variables are free again
        state = self.progress.early_stopping
        if state.best_weights is not None and state.best_weights is not self._best_weights_saved:
            for variable, value in zip(self.best_weights, state.best_weights):
                variable.assign(value)
            self._best_weights_saved = state.best_weights
        self._copy_to_snapshot()
        self.saved_progress.text = self.progress.serialize()

    def _write(self):
        try:
            self.manager.save()
        except Exception as error:  # raised in the training thread by wait()
            self._write_error = error

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
                exit_fn=self._exit_preempted, save_fn=self.save_now))
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


def _tensorflow_variable(variable):
    """The tf.Variable behind a Keras variable (a MirroredVariable under a strategy)."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def run_directly(step, *args):
    """Run a training step as it is (no preemption handler)."""
    return step(*args)
