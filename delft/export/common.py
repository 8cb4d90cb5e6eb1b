"""What both export formats share: loading a model folder, the vocabularies a client needs, and
the feature ids as the model reads them (folders are written by delft.utilities.atomic, as saves).
"""
import json
import logging
import os
from typing import List, Optional

from delft.sequenceLabelling.models import architecture
from delft.sequenceLabelling.preprocess import UNKNOWN_INDEX
from delft.utilities.errors import ModelLoadError
from delft.utilities.tensorflow_pages import import_tensorflow

# the export package's first import of TensorFlow, through delft's start (tensorflow_pages)
tf = import_tensorflow()

logger = logging.getLogger(__name__)

VOCAB_FILE = "vocab.json"


def load_model_dir(model_dir: str):
    """The :class:`~delft.sequenceLabelling.Sequence` saved in the folder ``model_dir`` itself.

    Args:
        model_dir: a saved model folder (``.../date-BidLSTM_CRF/``), as ``Sequence.save`` writes.

    Returns:
        The loaded ``Sequence``.

    Raises:
        ModelLoadError: no such folder, or an incomplete or corrupt one.
    """
    from delft.sequenceLabelling import Sequence

    path = os.path.abspath(model_dir.rstrip("/\\") or model_dir)
    if not os.path.isdir(path):
        raise ModelLoadError(f"{model_dir}: no such model directory")
    sequence = Sequence(os.path.basename(path))
    sequence.load(dir_path=os.path.dirname(path))
    return sequence


def uses_transformer(sequence) -> bool:
    """Whether ``sequence``'s architecture is of the transformer family.

    Args:
        sequence: a loaded ``Sequence``.

    Returns:
        True for BERT_CRF and the like.
    """
    return architecture(sequence.model_config.architecture).uses_transformer


def write_json(path: str, value: dict) -> None:
    """Write ``value`` as indented JSON with ASCII escapes.

    GROBID's Java reads these files with ``FileReader``, i.e. the JVM's default charset: ``\\uXXXX``
    escapes read the same under any charset, raw UTF-8 would not.

    Args:
        path: the file to write.
        value: a JSON-serialisable dict (NaN and infinities are refused: Gson rejects them).
    """
    with open(path, "w", encoding="ascii") as out:
        json.dump(value, out, indent=2, ensure_ascii=True, allow_nan=False)
        out.write("\n")


def vocabularies(preprocessor, feature_columns: Optional[List[int]] = None) -> dict:
    """The vocabularies of ``vocab.json``, under the keys GROBID's ``Preprocessor.fromJson`` reads.

    ``charVocab`` (char -> id; ``<PAD>`` 0, ``<UNK>`` 1), ``tagVocab`` (label -> id), ``tagIndex``
    (id as a string -> label), ``maxCharLength``; with features, ``featuresIndices`` (the input
    columns, counted from the first column after the token), ``featuresMapToIndex`` (column as a
    string -> value -> id, for the columns the model reads; ids start at 2) and
    ``featuresVocabularySize`` (the largest id of a column + 1; informative).

    Args:
        preprocessor: the model's preprocessor (BiLSTM or transformer family).
        feature_columns: the ``featuresIndices`` to declare (default: the model's own columns);
            must contain them.

    Returns:
        The dict, ready for :func:`write_json`.
    """
    labels = preprocessor.label_vocabulary.labels
    vocab = {"charVocab": dict(preprocessor.char_index),
             "tagVocab": {label: i for i, label in enumerate(labels)},
             "tagIndex": {str(i): label for i, label in enumerate(labels)},
             "maxCharLength": int(preprocessor.max_char_length)}
    if preprocessor.feature_index:
        used = [int(c) for c in preprocessor.features_indices]
        vocab["featuresIndices"] = list(feature_columns if feature_columns is not None else used)
        vocab["featuresVocabularySize"] = max(preprocessor.feature_vocab_sizes)
        vocab["featuresMapToIndex"] = {str(column): dict(values) for column, values
                                       in zip(used, preprocessor.feature_index)}
    return vocab


def model_feature_ids(feature_ids: tf.Tensor) -> tf.Tensor:
    """Feature ids as the model reads them, from ids where 0 stands for an unseen value.

    GROBID's Java gives 0 to a value missing from ``featuresMapToIndex`` (and to padding); our
    preprocessor reserves 0 for padding and gives unseen values ``UNKNOWN_INDEX``. Padding
    positions are past each row's length, where the model reads nothing, so mapping every 0 to
    ``UNKNOWN_INDEX`` is exact.

    Args:
        feature_ids: integer ids ``[batch, words, columns]``.

    Returns:
        int32 ids of the same shape.
    """
    ids = tf.cast(feature_ids, tf.int32)
    return tf.where(ids == 0, tf.constant(UNKNOWN_INDEX, tf.int32), ids)
