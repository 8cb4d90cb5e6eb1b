"""DeLFT's ``config.json`` and ``preprocessor.json``, which DeLFT 0.3/0.4 and 1.x write with the
same keys, as our :class:`ModelConfig` and :class:`WordPreprocessor`; and DeLFT's one feature
table as our per-column ones.

DeLFT's feature ids: the values of the k-th feature column it reads (columns in increasing
order) have ids ``1 + rank + k * features_vocabulary_size`` in ``features_map_to_index``, and id
0 stands for padding and for a value unseen in training, in one embedding table. Ours: per
column, 0 pads, 1 is unseen, the values from 2; so each of our columns takes DeLFT's row 0
twice, then its values' rows (:func:`feature_table`). The ids are read from the map, not
recomputed, so a folder whose columns hold fewer values keeps its own.
"""
import numpy as np

from delft.sequenceLabelling.casing import CASING_CLASSES
from delft.sequenceLabelling.config import ModelConfig
from delft.sequenceLabelling.foreign import vocabulary_list
from delft.sequenceLabelling.preprocess import (PAD_INDEX, UNKNOWN_INDEX, LabelVocabulary,
                                                WordPreprocessor)
from delft.utilities.errors import ConfigurationError, ModelLoadError

# our ModelConfig field -> DeLFT's config.json key, where the names differ
RENAMED = {"char_emb_size": "char_embedding_size", "char_lstm_units": "num_char_lstm_units",
           "word_lstm_units": "num_word_lstm_units"}
KEPT = ("embeddings_name", "word_embedding_size", "max_char_length", "max_sequence_length",
        "dropout", "recurrent_dropout", "batch_size", "features_indices",
        "features_vocabulary_size", "features_embedding_size", "features_lstm_units",
        "transformer_name")


def model_config(values, architecture, where, **fields):
    """Our :class:`ModelConfig` of a DeLFT ``config.json`` (``values``), ``fields`` overriding
    what is read; a field of the wrong type or out of range is a one-line
    :class:`ModelLoadError` naming ``where``."""
    read = {name: values.get(RENAMED.get(name, name)) for name in list(RENAMED) + list(KEPT)}
    read = {name: value for name, value in read.items() if value is not None}
    if not read.get("embeddings_name"):
        read["word_embedding_size"] = 0
    try:
        return ModelConfig(architecture=architecture, features_encoder="lstm",
                           **dict(read, **fields)).validated(where)
    except (TypeError, ConfigurationError) as error:
        raise ModelLoadError(str(error) if str(error).startswith(where) else
                             f"{where}: {error}") from None


def word_preprocessor(values, config, where, **settings):
    """Our preprocessor of a DeLFT ``preprocessor.json`` (``values``) for ``config``, and for each
    feature column the rows of DeLFT's feature table that our per-column table takes (None
    without features). ``settings``: :class:`WordPreprocessor`'s ``uses_casing``,
    ``reads_padding``, ``reads_char_padding``."""
    chars = vocabulary_list(values.get("vocab_char"), f"{where}: vocab_char")
    if chars[PAD_INDEX] != "<PAD>" or chars[UNKNOWN_INDEX] != "<UNK>":
        raise ModelLoadError(f"{where}: vocab_char does not start with <PAD>, <UNK>")
    labels = vocabulary_list(values.get("vocab_tag"), f"{where}: vocab_tag")
    if settings.get("uses_casing") and \
            tuple(values.get("vocab_case") or CASING_CLASSES) != CASING_CLASSES:
        raise ModelLoadError(f"{where}: vocab_case is not DeLFT's {list(CASING_CLASSES)}")
    preprocessor = WordPreprocessor(int(values.get("max_char_length") or config.max_char_length),
                                    **settings)
    preprocessor.char_index = {c: i for i, c in enumerate(chars)}
    preprocessor.label_vocabulary = LabelVocabulary(labels)
    if not config.architecture.endswith("FEATURES"):
        return preprocessor, None
    columns, feature_rows = feature_columns(values.get("feature_preprocessor"), config, where)
    preprocessor.features_indices = columns
    preprocessor.features_vocabulary_size = config.features_vocabulary_size
    preprocessor.feature_index = [{value: UNKNOWN_INDEX + 1 + rank for rank, value in
                                   enumerate(sorted(rows, key=rows.get))}
                                  for rows in feature_rows]
    # DeLFT reads the columns it knows of any row holding them: no count of columns to check
    preprocessor.feature_widths = []
    return preprocessor, feature_rows


def feature_columns(values, config, where):
    """The feature columns DeLFT reads, in its order (increasing), and each one's ``{value:
    DeLFT row}``; ``config.features_vocabulary_size`` is raised to the most values of a column."""
    if not isinstance(values, dict) or not isinstance(values.get("features_map_to_index"), dict):
        raise ModelLoadError(f"{where}: a {config.architecture} model without "
                             "feature_preprocessor.features_map_to_index")
    indices = values.get("features_indices") or config.features_indices
    if not isinstance(indices, list) or not indices or \
            not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices):
        raise ModelLoadError(f"{where}: feature_preprocessor.features_indices must be a list of "
                             f"column indices, not {indices!r}")
    columns = sorted(set(indices))  # DeLFT keeps a row's columns in their order
    mapping = values["features_map_to_index"]
    feature_rows = []
    for column in columns:
        rows = mapping.get(str(column), {})
        if not isinstance(rows, dict) or not all(
                isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in rows.values()):
            raise ModelLoadError(f"{where}: features_map_to_index[{column!r}] must map values "
                                 "to positive ids")
        feature_rows.append(rows)
    config.features_indices = columns
    config.features_vocabulary_size = max([config.features_vocabulary_size] +
                                          [len(rows) for rows in feature_rows])
    return columns, feature_rows


def feature_table(source, feature_rows, vocabulary_size, where):
    """``(name, our per-column feature table)`` (``vocabulary_size + 2`` rows a column) from
    DeLFT's one table ``source`` (``(name, value)``): ids 0 and 1 (padding, unseen) take DeLFT's
    row 0, then the column's values in the order of their DeLFT rows."""
    name, table = source
    width = vocabulary_size + UNKNOWN_INDEX + 1
    ours = np.zeros((width * len(feature_rows), table.shape[1]), dtype=np.float32)
    for column, rows in enumerate(feature_rows):
        ids = [0, 0] + sorted(rows.values())
        if ids[-1] >= len(table):
            raise ModelLoadError(f"{where}: {name} has {len(table)} rows, the feature map "
                                 f"names row {ids[-1]}")
        ours[column * width:column * width + len(ids)] = table[ids]
    return name, ours


def check_vocabularies(ours, preprocessor, where):
    """Vocabulary sizes that disagree with the weights (``ours``, portable weights by layer):
    a one-line :class:`ModelLoadError` naming both."""
    sizes = [("char_encoder.embedding", preprocessor.char_vocab_size, "vocab_char"),
             ("crf", preprocessor.num_labels, "vocab_tag"),
             ("potentials_layer", preprocessor.num_labels, "vocab_tag")]
    for target, size, vocabulary in sizes:
        if target in ours:
            name, value = ours[target][-1 if target == "potentials_layer" else 0]
            if value.shape[0] != size:
                raise ModelLoadError(f"{where}: {name} has {value.shape[0]} rows, "
                                     f"preprocessor.json's {vocabulary} {size} entries")
