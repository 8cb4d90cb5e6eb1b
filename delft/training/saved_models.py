"""Saving and loading a model folder, the same for every toolkit: written whole by the chief
(:func:`delft.utilities.atomic.replaced_directory`), with its training's history and curve;
read again when a concurrent save replaced it while it was read.
"""
import contextlib
import json
import logging
import os

from delft.utilities import atomic, devices
from delft.utilities.errors import ModelLoadError

logger = logging.getLogger(__name__)

CURVE_FILE = "training_curve.png"
HISTORY_FILE = "history.json"
LOAD_ATTEMPTS = 3  # a folder replaced by a concurrent save while it is read is read again


def save_folder(target, strategy, write_files, checkpoint_dir=None):
    """Write the model folder ``target`` with ``write_files(staging_folder)``, in one step; the
    chief writes, every worker returns once it has. ``checkpoint_dir``: the training's
    checkpoints, which the saved model replaces (removed once it is saved). Returns ``target``.
    """
    if not devices.is_chief(strategy):  # the chief writes; the others wait until it has
        devices.wait_for_workers(strategy)
        return target
    with atomic.replaced_directory(target) as staging:
        write_files(staging)
    logger.info("model saved in %s", target)
    if checkpoint_dir:
        from delft.training.checkpoints import remove_checkpoints

        remove_checkpoints(checkpoint_dir)
    devices.wait_for_workers(strategy)
    return target


def write_history(folder, history, plot_history=None):
    """``history.json`` and the training curve of ``history`` (nothing without one), drawn by
    ``plot_history`` (default :func:`delft.training.loop.plot_history`)."""
    if not history:
        return
    with open(os.path.join(folder, HISTORY_FILE), "w") as out:
        json.dump(history, out, indent=1)
    if plot_history is None:
        from delft.training.loop import plot_history
    plot_history(history, os.path.join(folder, CURVE_FILE))


def folder_identity(path):
    """What changes when a save replaces the folder at ``path`` (None when there is none).
    Compared across a read, it only holds while the folder is pinned (:func:`pinned_folder`)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


@contextlib.contextmanager
def pinned_folder(path):
    """The :func:`folder_identity` of ``path``, held open for the block: the folder's inode
    stays allocated, so a folder saved after it was replaced cannot reuse its number and look
    like the one that was read."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        handle = None
    if handle is None:  # yielded outside the except clause: no context on the block's errors
        yield None
        return
    try:
        status = os.fstat(handle)
        yield status.st_dev, status.st_ino
    finally:
        os.close(handle)


def load_whole(path, load_once):
    """``load_once(path)``, again when a save replaced the folder while it was read (up to
    :data:`LOAD_ATTEMPTS` times): what is loaded is one folder's, never a mix of two."""
    for _ in range(LOAD_ATTEMPTS):
        with pinned_folder(path) as identity:
            try:
                load_once(path)
            except ModelLoadError:
                if folder_identity(path) == identity:
                    raise
                continue  # replaced by a save while being read: read the new one
            if folder_identity(path) == identity:
                return
    raise ModelLoadError(f"{path}: replaced {LOAD_ATTEMPTS} times while being loaded")
