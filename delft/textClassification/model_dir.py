"""A classifier's model folder: its files, read and checked before TensorFlow.

``dir_path/<model_name>/`` holds config.json (the :class:`ModelConfig`), preprocessor.json (the
:class:`TextPreprocessor`: inputs, maxlen, classes, vocabulary), model.weights.h5 (one per fold:
model-<k>.weights.h5), the encoder's config and tokenizer under ``transformer/`` for ``bert``, and
after training history.json and training_curve.png. GROBID's shipped classifiers, written by
DeLFT 0.3/0.4 (config.json and Keras 2's ``model_weights.hdf5``, no preprocessor: word vectors
of the registry's embeddings, post-padded to maxlen), are read as they are.
"""
import os

from delft.textClassification.config import ModelConfig
from delft.textClassification.preprocess import TextPreprocessor
from delft.utilities.errors import ConfigurationError, ModelLoadError

DEFAULT_MODELS_DIR = "data/models/textClassification/"  # DeLFT's default
CONFIG_FILE = "config.json"
PREPROCESSOR_FILE = "preprocessor.json"
WEIGHTS_FILE = "model.weights.h5"
DELFT0_WEIGHTS = "model_weights.hdf5"  # DeLFT 0.3/0.4 (Keras 2)
DELFT1_WEIGHTS = ("model.safetensors", "model_weights.pth")  # DeLFT 1.x (PyTorch)


def weights_file(fold, folds):
    """The weights file of fold ``fold`` of ``folds`` (``model.weights.h5`` for one model; Keras
    wants the ``.weights.h5`` ending).

    >>> weights_file(0, 1), weights_file(2, 5)
    ('model.weights.h5', 'model-2.weights.h5')
    """
    return WEIGHTS_FILE if folds == 1 else f"model-{fold}.weights.h5"


def read_classifier_folder(path):
    """``(config, preprocessor, weights_files, delft0)`` of the classifier folder ``path``, checked
    without TensorFlow; ``delft0``: a DeLFT 0.x folder (whose preprocessor is made from its config:
    word vectors of its embeddings). Anything missing or malformed is a one-line
    :class:`ModelLoadError` naming the file."""
    from delft.utilities.json_files import read_json_object

    if not os.path.isdir(path):
        raise ModelLoadError(f"{path}: no such model directory")
    config_path = os.path.join(path, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise ModelLoadError(f"{path}: incomplete model directory, {CONFIG_FILE} is missing")
    try:
        config = ModelConfig.load(config_path)
    except ConfigurationError as error:
        raise ModelLoadError(str(error)) from None
    if not config.list_classes:
        raise ModelLoadError(f"{config_path}: list_classes is empty")
    if os.path.isfile(os.path.join(path, DELFT0_WEIGHTS)):
        if config.fold_number != 1:
            raise ModelLoadError(f"{path}: a DeLFT 0.x n-fold classifier, which is not read here")
        preprocessor = TextPreprocessor(config.maxlen, config.list_classes, "word_vectors")
        return config, preprocessor, [os.path.join(path, DELFT0_WEIGHTS)], True
    for name in DELFT1_WEIGHTS:
        if os.path.isfile(os.path.join(path, name)):
            raise ModelLoadError(f"{path}: a DeLFT 1.x (PyTorch) classifier ({name}), which is "
                                 "not read here: train it again with delft")
    preprocessor_path = os.path.join(path, PREPROCESSOR_FILE)
    if not os.path.isfile(preprocessor_path):
        raise ModelLoadError(f"{path}: incomplete model directory, {PREPROCESSOR_FILE} is missing")
    values = read_json_object(preprocessor_path, error=ModelLoadError)
    preprocessor = TextPreprocessor.from_dict(values, preprocessor_path)
    if preprocessor.list_classes != config.list_classes or preprocessor.maxlen != config.maxlen:
        raise ModelLoadError(f"{path}: {CONFIG_FILE} and {PREPROCESSOR_FILE} do not describe the "
                             "same model (classes or maxlen differ)")
    if preprocessor.inputs == "word_ids" and len(preprocessor.vocabulary) != config.vocab_size:
        raise ModelLoadError(f"{preprocessor_path}: {len(preprocessor.vocabulary)} words, where "
                             f"{CONFIG_FILE} says vocab_size {config.vocab_size}")
    files = [os.path.join(path, weights_file(k, config.fold_number))
             for k in range(config.fold_number)]
    for file in files:
        if not os.path.isfile(file):
            raise ModelLoadError(f"{path}: incomplete model directory, "
                                 f"{os.path.basename(file)} is missing")
    return config, preprocessor, files, False
