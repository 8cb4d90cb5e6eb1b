"""The model folder: the files a saved model is made of, and its config read and checked first.

``dir_path/<model_name>/`` holds config.json (the :class:`ModelConfig`), preprocessor.json
(vocabularies), model.weights.h5, and after training history.json and training_curve.png. It is
written whole by :func:`delft.utilities.atomic.replaced_directory`.
"""
import os

from delft.sequenceLabelling import models
from delft.sequenceLabelling.config import ModelConfig
from delft.utilities.errors import ModelLoadError

CONFIG_FILE = "config.json"
PREPROCESSOR_FILE = "preprocessor.json"
WEIGHTS_FILE = "model.weights.h5"
CURVE_FILE = "training_curve.png"
HISTORY_FILE = "history.json"


def read_model_config(path):
    """The checked :class:`ModelConfig` of the model folder ``path``, read without TensorFlow.

    A missing folder or file, a config field of the wrong type or out of range, or an unknown
    architecture is a one-line :class:`ModelLoadError` naming the file.
    """
    if not os.path.isdir(path):
        raise ModelLoadError(f"{path}: no such model directory")
    for name in (CONFIG_FILE, PREPROCESSOR_FILE, WEIGHTS_FILE):
        if not os.path.isfile(os.path.join(path, name)):
            raise ModelLoadError(f"{path}: incomplete model directory, {name} is missing")
    where = os.path.join(path, CONFIG_FILE)
    try:
        config = ModelConfig.load(where)
        models.architecture(config.architecture)
    except (ValueError, TypeError) as error:  # ConfigurationError is a ValueError
        message = str(error)
        raise ModelLoadError(message if message.startswith(where) else
                             f"{where}: corrupt ({message})") from None
    return config


def folder_identity(path):
    """What changes when a save replaces the folder at ``path`` (None when there is none)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino
