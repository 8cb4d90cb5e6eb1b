"""Preemption-safe training: checkpoints at epoch ends, with TensorFlow's own machinery.

A checkpoint is one ``tf.train.Checkpoint`` in ``<models_dir>/<model_name>.checkpoints/``
(:func:`checkpoint_dir`), the latest one, named by TensorFlow's ``checkpoint`` state file. It holds:

- the model's variables (weights, and the seed state of its dropout layers) and the optimizer's
  (moments, iteration count, learning rate: the state of the plateau and exponential schedules;
  the transformers' warm-up/decay schedule is a function of the iteration count; the loss scale);
- the best weights so far, which early stopping restores at the end (``best-<epoch>`` beside it,
  written once when they stop being the model's own);
- the :class:`TrainingProgress`, as JSON in a string variable: the epoch to run next,
  the state of the numpy Generator its data order is drawn from, the steps of that epoch already
  applied and their summed loss, early stopping's counters, the history, and what the data order
  depends on (rows, global batch, seed), so that a checkpoint of another training is refused.

The same training run again restores the latest checkpoint, says so, and goes on: epochs continue
(the history is kept), the data order is the one the uninterrupted run draws, and the final
weights are those of an uninterrupted run. ``resume=False`` (``--no-resume``) removes it first.

A save is one compiled write of the variables as they are, no copy (the best weights are written
apart only once not the model's): its cost is that write (``benchmarks/checkpoint_overhead.py``).

What covers which end of a process:

- SIGKILL, a crash, a lost node: nothing can run then; the last epoch-end checkpoint is left.
  An epoch ends with one once ``checkpoint_interval`` seconds (default 60; 0: every epoch) have
  passed since the last: at most that and one epoch are done again (a save of BERT_CRF MiniLM
  is a quarter of its epoch on date: a short training saves rarely or never).
- SIGTERM (what a scheduler sends before it kills: SLURM at the time limit or with ``--signal``,
  preemptible VMs, ``docker stop``): ``tf.distribute.experimental.PreemptionCheckpointHandler``
  wraps every step; at the next step boundary (agreed between the workers through TF's
  coordination service) it saves a checkpoint that records the steps done in the epoch, and the
  process exits with code 143. Only a process's main thread can catch a signal: run from another
  thread (GROBID's JEP interpreters) the handler is not installed; epoch-end checkpoints remain.

With several workers the chief alone writes: a mirrored variable is read from the worker's own copy,
so writing needs no collective (the reason TF's recipe has every worker save, the others into a
temporary directory, is a save that reads variables aggregated across workers). Every worker
restores from the chief's directory: it must be on a filesystem they share (they check that they
resume from the same checkpoint).
"""
import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time

import keras
import tensorflow as tf

from delft.training.snapshots import weights_snapshot
from delft.utilities import atomic, devices
from delft.utilities.errors import ConfigurationError, disk_full, is_disk_full

logger = logging.getLogger(__name__)

CHECKPOINTS_SUFFIX = ".checkpoints"
CLAIM_FILE = ".training.lock"  # inside the checkpoints folder: held by the training writing there
PROGRESS_KEY = "progress/.ATTRIBUTES/VARIABLE_VALUE"  # the progress JSON in a checkpoint
PREEMPTED_EXIT_CODE = 143  # 128 + SIGTERM, what the scheduler expects of a process it ended


def checkpoint_dir(models_dir, model_name):
    """Where the training of ``model_name`` saved under ``models_dir`` keeps its checkpoints.

    >>> checkpoint_dir("models", "date-BidLSTM_CRF")
    'models/date-BidLSTM_CRF.checkpoints'
    """
    return os.path.join(models_dir, model_name + CHECKPOINTS_SUFFIX)


class CheckpointsClaim:
    """The lock that makes one training the writer of a checkpoints folder while it trains.

    Two trainings of the same model into the same folder (two shells, a rerun while the first
    still runs) would otherwise write, resume from and remove one folder together. The first
    holds an ``fcntl.flock`` on ``<folder>/.training.lock`` while it trains (the kernel releases a
    dead holder's lock); the second keeps no checkpoints and says so. The save that follows a
    training removes the folder only if it can claim it (:func:`remove_checkpoints`). With
    several workers the chief claims and the others follow its word.

    >>> import tempfile, os; folder = os.path.join(tempfile.mkdtemp(), "m.checkpoints")
    >>> first = CheckpointsClaim.take(folder); second = CheckpointsClaim.take(folder)
    >>> (first is not None, second)
    (True, None)
    >>> first.release(); remove_checkpoints(folder); os.path.exists(folder)
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
        if not claimed:
            logger.warning("%s: another training of this model is running (%s) and keeps its "
                           "checkpoints there; this one keeps none (it cannot be resumed)",
                           directory, _holder(directory))
            return None
        return cls(directory, handle)

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


@contextlib.contextmanager
def claimed(directory, strategy):
    """Yield the claim on ``directory`` for a training, released when it ends (None without a
    directory, or when another training holds it)."""
    claim = CheckpointsClaim.take(directory, strategy) if directory else None
    try:
        yield claim
    finally:
        if claim:
            claim.release()


def saved_seed(directory):
    """The seed of the training whose latest checkpoint is in ``directory`` (None without one):
    a run resumed without ``--seed`` takes it, and with it the same data splits."""
    try:
        latest = tf.train.latest_checkpoint(directory) if os.path.isdir(directory) else None
        if latest is None:
            return None
        return json.loads(tf.train.load_checkpoint(latest).get_tensor(PROGRESS_KEY))[
            "identity"].get("seed")
    except (tf.errors.OpError, ValueError, KeyError, TypeError, IndexError):
        return None  # restoring it will say what is wrong with it


def remove_checkpoints(directory):
    """Remove ``directory`` once its model is saved, unless a training running now claims it."""
    if not os.path.isdir(directory):
        return
    handle = _lock_claim_file(directory)
    if handle is None:
        logger.info("%s: kept, another training of this model is writing there (%s)", directory,
                    _holder(directory))
        return
    with handle:
        shutil.rmtree(directory, ignore_errors=True)
    logger.info("checkpoints removed: %s", directory)


def _holder(directory):
    """Who holds the claim on ``directory``, as the holder wrote it."""
    with contextlib.suppress(OSError):
        with open(os.path.join(directory, CLAIM_FILE)) as claim_file:
            return claim_file.read().strip() or "another process"
    return "another process"


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
            handle.close()
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
    """Where training stands; the checkpoint stores it as JSON (:meth:`serialize`).

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
    """The checkpoints of one training run in its claimed folder (see the module's docstring).

    A save writes the model's and the optimizer's variables as they are, with the progress, in
    one compiled call (the progress assigned and ``tf.train.Checkpoint.write``, traced once and
    called as a concrete function: an eager save re-walks the object graph in Python each time,
    several times slower), then points TensorFlow's ``checkpoint`` state file at it and
    removes the previous one. Nothing is copied: no host snapshot, no second set of best weights
    in memory. The best weights are written only when they are no longer the model's own (after
    an epoch below the best), once, as ``best-<epoch>``.
    With several workers the chief alone writes: reading a mirrored variable is local.
    """

    def __init__(self, claim, strategy, model, optimizer, progress):
        self.claim = claim
        self.directory = claim.directory
        self.strategy = strategy
        self.progress = progress
        self.model = model
        self._best_written = None  # the epoch whose best weights are in a best-<epoch> file
        with tf.device("CPU:0"):
            self.progress_text = tf.Variable("", dtype=tf.string, trainable=False)
        self.checkpoint = tf.train.Checkpoint(
            model=[_tensorflow_variable(v) for v in model.variables],
            optimizer=[_tensorflow_variable(v) for v in optimizer.variables],
            progress=self.progress_text)
        self._compiled_write = None  # traced at the first save, once the handler has attached
        self._latest = None  # the name of the latest checkpoint, e.g. "ckpt-3"

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
            return False
        latest = tf.train.latest_checkpoint(self.directory)
        self._check_workers_agree(latest)
        if latest is None:
            return False
        self._latest = os.path.basename(latest)
        start = time.perf_counter()
        self._check_same_training(latest)
        try:
            # what the checkpoint has beyond this object graph (the preemption handler's step
            # count) is restored when the handler attaches it
            self.checkpoint.read(latest).assert_existing_objects_matched().expect_partial()
        except (AssertionError, ValueError, tf.errors.OpError) as error:
            raise ConfigurationError(f"{latest}: a checkpoint of another model "
                                     f"({_op_message(error)}); --no-resume starts afresh") from None
        progress = self.progress
        progress.deserialize(self.progress_text.numpy().decode())
        state = progress.early_stopping
        if state.best_epoch and self._best_is_current():
            state.best_weights = weights_snapshot(self.model)
        elif state.best_epoch:
            state.best_weights = self._read_best(state.best_epoch)
            self._best_written = state.best_epoch
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
            reader = tf.train.load_checkpoint(latest)
            saved = json.loads(reader.get_tensor(PROGRESS_KEY))
        except (tf.errors.OpError, ValueError, IndexError) as error:
            raise ConfigurationError(f"{latest}: not a checkpoint of delft's training, or damaged "
                                     f"({_op_message(error)}); --no-resume starts afresh") from None
        try:  # every value readable: a damaged file is said before anything is restored
            for name in reader.get_variable_to_shape_map():
                reader.get_tensor(name)
        except (tf.errors.OpError, IndexError) as error:  # IndexError: "Read less bytes"
            raise ConfigurationError(
                f"{latest}: damaged ({_op_message(error)}: its files were cut short, by a full "
                "disk or a kill while they were written); --no-resume starts afresh") from None
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
        """Write where training stands (the chief does; the others have nothing to do)."""
        if not devices.is_chief(self.strategy):
            return
        state, progress = self.progress.early_stopping, self.progress
        best_is_current = self._best_is_current()
        # what this save makes stale, removed once it is written: the previous checkpoint, and a
        # best-<epoch> file that no longer holds the best weights kept apart
        stale = [self._latest] if self._latest else []
        if self._best_written is not None and (best_is_current
                                               or self._best_written != state.best_epoch):
            stale.append(f"best-{self._best_written}")
            self._best_written = None
        if self._compiled_write is None:
            self._compiled_write = tf.function(self._write).get_concrete_function(
                tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.string))
        latest = f"ckpt-{int(self._latest.rsplit('-', 1)[1]) + 1 if self._latest else 1}"
        with self._whole_or_nothing(latest):
            if state.best_epoch and not best_is_current and self._best_written is None:
                self._write_best(state)
            self._compiled_write(tf.constant(os.path.join(self.directory, latest)),
                                 tf.constant(progress.serialize()))
            # TensorFlow's state file, replaced in one rename: a kill leaves it naming a complete
            # checkpoint (relative: the folder may move); not synced, as TF syncs no checkpoint
            with atomic.replaced_file(os.path.join(self.directory, "checkpoint"),
                                      durable=False) as state_file:
                state_file.write(f'model_checkpoint_path: "{latest}"\n'
                                 f'all_model_checkpoint_paths: "{latest}"\n')
        self._latest = latest
        self._remove_files_of(stale)

    @contextlib.contextmanager
    def _whole_or_nothing(self, latest):
        """Run a save; if it fails (a full disk), remove what it wrote and say in one line which
        checkpoint the folder still holds, complete."""
        best_written = self._best_written
        try:
            yield
        except (tf.errors.OpError, OSError) as error:
            self._remove_files_of([latest] + ([f"best-{self._best_written}"]
                                              if self._best_written != best_written else []))
            self._best_written = best_written
            kept = (f"{self._latest}, the last complete checkpoint, is kept: the same command "
                    "resumes from it" if self._latest else "no checkpoint was complete yet")
            if is_disk_full(error):
                raise disk_full(os.path.join(self.directory, latest), kept) from None
            raise ConfigurationError(f"{os.path.join(self.directory, latest)}: cannot be written "
                                     f"({_op_message(error)}); {kept}") from None

    def _remove_files_of(self, checkpoints):
        """Remove the files of ``checkpoints`` (``ckpt-3.index``, ``ckpt-3.data-...``) and of
        their writes cut short (``ckpt-3_temp/``)."""
        prefixes = tuple(name + "." for name in checkpoints)
        folders = {name + "_temp" for name in checkpoints}
        for file_name in os.listdir(self.directory):
            path = os.path.join(self.directory, file_name)
            if file_name in folders:
                shutil.rmtree(path, ignore_errors=True)
            elif file_name.startswith(prefixes):
                os.unlink(path)

    def _write(self, prefix, progress_text):
        self.progress_text.assign(progress_text)
        return self.checkpoint.write(prefix)

    def _best_is_current(self):
        """Whether early stopping's best weights are the model's now (none to write apart)."""
        progress = self.progress
        return progress.early_stopping.best_epoch == progress.next_epoch - 1 \
            and progress.steps_done == 0

    def _write_best(self, state):
        with tf.device("CPU:0"):  # held for this write only
            weights = [tf.Variable(w, trainable=False) for w in state.best_weights]
        tf.train.Checkpoint(best_weights=weights).write(self._best_prefix(state.best_epoch))
        self._best_written = state.best_epoch

    def _read_best(self, epoch):
        reader = tf.train.load_checkpoint(self._best_prefix(epoch))
        count = len(self.model.weights)
        return [reader.get_tensor(f"best_weights/{i}/.ATTRIBUTES/VARIABLE_VALUE")
                for i in range(count)]

    def _best_prefix(self, epoch):
        return os.path.join(self.directory, f"best-{epoch}")

    # -- SIGTERM ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def preemption_guard(self):
        """Yield ``run(step, *args)``: under PreemptionCheckpointHandler when this is the main
        thread (a SIGTERM saves at the next step boundary and exits), else a plain call."""
        if threading.current_thread() is not threading.main_thread():
            yield run_directly
            return
        previous = signal.getsignal(signal.SIGTERM)
        # made after restore(): a manager reads the folder when made, the handler restores from it
        manager = tf.train.CheckpointManager(self.checkpoint, self.directory, max_to_keep=1)
        handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            getattr(self.strategy, "cluster_resolver", None), manager,
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


def _op_message(error):
    """The first line of a TensorFlow error, without its ``{{function_node ...}}`` and ``[Op:...]``
    decorations."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return re.sub(r"\{\{[^}]*\}\}\s*|\s*\[Op:\w+\]", "", text).strip()


def _tensorflow_variable(variable):
    """The tf.Variable behind a Keras variable (a MirroredVariable under a strategy)."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def run_directly(step, *args):
    """Run a training step as it is (no preemption handler)."""
    return step(*args)
