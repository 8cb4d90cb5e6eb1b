"""The model folder: the files a saved model is made of, read and checked before TensorFlow.

``dir_path/<model_name>/`` holds config.json (the :class:`ModelConfig`), preprocessor.json
(vocabularies), model.weights.h5, and after training history.json and training_curve.png. It is
written whole by :func:`delft.utilities.atomic.replaced_directory`. Folders written by DeLFT
(0.3/0.4: ``model_weights.hdf5``; 1.x: ``model.safetensors``) are read as they are, through
delft/sequenceLabelling/foreign/.
"""
import os

from delft.sequenceLabelling import models
from delft.sequenceLabelling.config import ModelConfig
from delft.sequenceLabelling.weights_layout import check_weights_match
# the files every saved model folder has, whatever the toolkit (imported from here before)
from delft.training.saved_models import CURVE_FILE, HISTORY_FILE  # noqa: F401
from delft.utilities.errors import ModelLoadError

DEFAULT_MODELS_DIR = "data/models/sequenceLabelling/"  # where models are saved by default
CONFIG_FILE = "config.json"
PREPROCESSOR_FILE = "preprocessor.json"
WEIGHTS_FILE = "model.weights.h5"

# who wrote a folder, told by the weights file it holds
OWN, DELFT0, DELFT1 = "delft", "DeLFT 0.x (Keras 2)", "DeLFT 1.x (PyTorch)"
FOLDER_WEIGHTS = {OWN: WEIGHTS_FILE, DELFT0: "model_weights.hdf5", DELFT1: "model.safetensors"}
PICKLED_WEIGHTS = "model_weights.pt"  # DeLFT 1.0/1.1's torch.save: refused, never unpickled


def folder_format(path):
    """Who wrote the model folder ``path``: ``OWN``, ``DELFT0`` or ``DELFT1``; a missing folder,
    or one without any of their weights files, is a one-line :class:`ModelLoadError`."""
    if not os.path.isdir(path):
        raise ModelLoadError(f"{path}: no such model directory")
    for kind, name in FOLDER_WEIGHTS.items():
        if os.path.isfile(os.path.join(path, name)):
            return kind
    if os.path.isfile(os.path.join(path, PICKLED_WEIGHTS)):
        raise ModelLoadError(f"{path}: a DeLFT 1.0/1.1 folder whose weights are pickled "
                             f"({PICKLED_WEIGHTS}), which is never unpickled here: save it "
                             "again with DeLFT 1.2 (model.safetensors)")
    raise ModelLoadError(f"{path}: incomplete model directory, {WEIGHTS_FILE} is missing")


def read_folder(path):
    """``(kind, config, preprocessor, foreign)`` of the model folder ``path``, read and checked
    without TensorFlow: ``foreign`` is None for our own folders (Keras loads their file), a
    DeLFT folder's :class:`~delft.sequenceLabelling.foreign.ForeignModel` (whose converted
    weights :func:`delft.sequenceLabelling.foreign.assign_weights` sets)."""
    kind = folder_format(path)
    if kind != OWN:
        from delft.sequenceLabelling.foreign import read_foreign_folder

        found = read_foreign_folder(path, kind)
        return kind, found.config, found.preprocessor, found
    config = read_model_config(path)
    preprocessor = models.load_preprocessor(os.path.join(path, PREPROCESSOR_FILE))
    expected = models.new_preprocessor_class(config.architecture)
    if not isinstance(preprocessor, expected):
        raise ModelLoadError(f"{os.path.join(path, PREPROCESSOR_FILE)}: a preprocessor of kind "
                             f"{preprocessor.kind!r}, where the architecture of {CONFIG_FILE}, "
                             f"{config.architecture}, takes one of kind {expected.kind!r}")
    preprocessor.load_resources(path)
    return kind, config, preprocessor, None


def set_folder_weights(model, path, foreign, strategy, architecture):
    """Give ``model`` (built as ``architecture`` in ``strategy``'s scope from the folder's config)
    the weights of the folder ``path``: ``foreign`` from :func:`read_folder`."""
    if foreign is not None:
        from delft.sequenceLabelling.foreign import assign_weights

        with strategy.scope():
            assign_weights(model, foreign, path)
        return
    file = os.path.join(path, WEIGHTS_FILE)
    check_weights_match(model, file, architecture)
    try:
        with strategy.scope():
            model.load_weights(file)
    except Exception as error:  # h5py/keras raise many types for a damaged file
        raise ModelLoadError(f"{file}: cannot load weights "
                             f"({type(error).__name__}: {str(error).splitlines()[0]})") from None


def read_model_config(path):
    """The checked :class:`ModelConfig` of the model folder ``path``, read without TensorFlow.

    A missing folder or file, a config field of the wrong type or out of range, or an unknown
    architecture is a one-line :class:`ModelLoadError` naming the file. A DeLFT folder's config
    is read with the rest of the folder (:func:`read_folder`).
    """
    if folder_format(path) != OWN:
        return read_folder(path)[1]
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
