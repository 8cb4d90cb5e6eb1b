"""Model folders this package did not write, read as they are: DeLFT 0.3/0.4's (Keras 2, the
folders GROBID ships) and DeLFT 1.x's (PyTorch, ``model.safetensors``).

A reader turns a folder into a :class:`ForeignModel`: our :class:`ModelConfig`, our preprocessor,
and the folder's weights converted to the portable layout of each of our layers (Keras' layout:
what :func:`assign_weights` sets on the model built from that config). Files are read with
``json``, ``h5py`` and ``safetensors``' numpy API, never unpickled; nothing is written in or
beside the folder (``grobid-home`` may be read-only). What a reader cannot serve is a one-line
:class:`ModelLoadError` naming the folder and the reason.
"""
import os
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import numpy as np

from delft.sequenceLabelling.config import ModelConfig
from delft.sequenceLabelling.model_dir import DELFT0
from delft.utilities.errors import ModelLoadError
from delft.utilities.json_files import read_json_object

# a weight as read: where it comes from in the folder (for messages), and its value
SourceWeight = Tuple[str, np.ndarray]


@dataclass
class ForeignModel:
    """What a reader makes of a folder.

    Attributes:
        config: the model's settings as our :class:`ModelConfig`.
        preprocessor: our preprocessor, with the folder's vocabularies.
        weights: per layer of our model (its attribute path, ``"char_encoder.lstm"``), its
            weights in Keras' layout, each with the name it has in the folder.
        built_with_weights: layers that read their weights from the folder when the model is
            built (a transformer encoder, ported by keras-hub's converter).
    """

    config: ModelConfig
    preprocessor: object
    weights: Dict[str, List[SourceWeight]] = field(default_factory=dict)
    built_with_weights: Tuple[str, ...] = ()


def read_foreign_folder(path, kind):
    """The :class:`ForeignModel` of the folder ``path`` written by ``kind`` (``DELFT0``,
    ``DELFT1``: :func:`delft.sequenceLabelling.model_dir.folder_format`)."""
    if kind == DELFT0:
        from delft.sequenceLabelling.foreign.delft0 import read_delft0_folder

        return read_delft0_folder(path)
    from delft.sequenceLabelling.foreign.delft1 import read_delft1_folder

    return read_delft1_folder(path)


def read_json(path):
    """A folder's JSON file as a dict; missing, too large, too deep or not an object is a one-line
    :class:`ModelLoadError`."""
    try:
        return read_json_object(path)
    except FileNotFoundError:
        raise ModelLoadError(f"{os.path.dirname(path)}: incomplete model directory, "
                             f"{os.path.basename(path)} is missing") from None


def vocabulary_list(vocabulary, where):
    """The names of a ``{name: id}`` vocabulary in id order; ids that are not exactly 0..n-1 (a
    gap, a duplicate) are a one-line :class:`ModelLoadError` naming ``where``."""
    if not isinstance(vocabulary, dict) or not vocabulary:
        raise ModelLoadError(f"{where}: missing or empty")
    names = [None] * len(vocabulary)
    for name, index in vocabulary.items():
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(names) \
                or names[index] is not None:
            raise ModelLoadError(f"{where}: the ids are not 0..{len(names) - 1}, each once "
                                 f"({name!r}: {index!r})")
        names[index] = name
    return names


def portable_shapes(layer):
    """The shapes of ``layer``'s weights in the portable layout :func:`assign_weights` takes."""
    if hasattr(layer, "set_keras_weights"):  # BiLSTM, BiGRU: forward then backward
        return [tuple(v.shape) for direction in layer.direction_variables() for v in direction]
    return [tuple(v.shape) for v in layer.weights]


def assign_weights(model, found, path):
    """Set ``model``'s weights from a reader's :class:`ForeignModel` ``found``; every layer of
    the model holding weights must be set (or be one of ``found.built_with_weights``), each
    weight at its shape, or a one-line :class:`ModelLoadError` names the folder's weight, its
    shape and the one the model expects."""
    weights = found.weights
    named = {id(v): name for name in found.built_with_weights
             for v in getattr(model, name).weights}
    for attribute, values in weights.items():
        layer = model
        for part in attribute.split("."):
            layer = getattr(layer, part, None)
        if layer is None:
            raise ModelLoadError(f"{path}: the {model.name} model has no layer {attribute} "
                                 f"for {values[0][0]}")
        expected = portable_shapes(layer)
        if len(expected) != len(values):
            raise ModelLoadError(f"{path}: {len(values)} weights for {attribute} "
                                 f"({values[0][0]}...), the model has {len(expected)}")
        for (name, value), shape in zip(values, expected):
            if tuple(value.shape) != shape:
                raise ModelLoadError(f"{path}: {name} is {_shape(value.shape)} where the "
                                     f"{model.name} model's {attribute} takes {_shape(shape)}")
        arrays = [value for _, value in values]
        if hasattr(layer, "set_keras_weights"):
            half = len(arrays) // 2
            layer.set_keras_weights(arrays[:half], arrays[half:])
        else:
            layer.set_weights(arrays)
        named.update({id(v): attribute for v in layer.weights})
    left = [v.path for v in model.weights if id(v) not in named]
    if left:
        raise ModelLoadError(f"{path}: the folder has no weights for {', '.join(left)}")


def _shape(shape):
    return "x".join(map(str, shape)) or "scalar"
