"""DeLFT 0.4.6's ``gru`` classifiers, as GROBID ships them (``copyright_gru``: ``config.json`` and a
Keras 2 ``model_weights.hdf5``), read with ``h5py`` and put onto our ``gru`` model.

DeLFT 0.4.6's gru is two ``Bidirectional(GRU(reset_after=True))`` layers, a max-and-mean pooling,
``Dense(relu)`` and ``Dense(sigmoid)``, over word vectors looked up outside the model: our ``gru``
architecture with ``inputs="word_vectors"`` is the same computation (no mask: the GRUs run over
the padding, the pools cover it), and Keras' GRU layout is our
:class:`~delft.sequenceLabelling.layers.bigru.BiGRU`'s, so the weights go over as they are.
The widths are the file's (``recurrent_units`` = rows of a recurrent kernel): DeLFT's
``config.json`` does not hold them (its ``dropout``, ``recurrent_dropout`` are unused values).

Layers are found by their base name (``bidirectional``, ``dense``), in the order of their Keras
suffix (``dense`` before ``dense_1``), and their weights by their role, never by a full name.
"""
import dataclasses
import os
import re
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np

from delft.sequenceLabelling.foreign.delft0 import _by_variable, read_keras2_layers
from delft.utilities.errors import ModelLoadError

WEIGHTS_FILE = "model_weights.hdf5"
GRU_WEIGHTS = ("kernel", "recurrent_kernel", "bias")
GRU_GATES = 3  # Keras' gate blocks: update, reset, candidate


@dataclass
class Delft0ClassifierWeights:
    """The weights of a DeLFT 0.4.6 ``gru`` classifier, in Keras' (and our layers') layout.

    Attributes:
        path: the HDF5 file they were read from.
        recurrent: per bidirectional GRU, its ``(forward, backward)`` directions, each
            ``(kernel [features, 3 units], recurrent kernel [units, 3 units], bias [2, 3 units])``.
        dense: ``(kernel, bias)`` of the ReLU dense layer.
        output: ``(kernel, bias)`` of the sigmoid output layer.
    """

    path: str
    recurrent: List[Tuple[tuple, tuple]]
    dense: tuple
    output: tuple

    @property
    def recurrent_units(self):
        return self.recurrent[0][0][1].shape[0]

    @property
    def word_embedding_size(self):
        return self.recurrent[0][0][0].shape[0]

    @property
    def dense_size(self):
        return self.dense[0].shape[1]

    @property
    def n_classes(self):
        return self.output[0].shape[1]

    def shaped_config(self, model_config):
        """``model_config`` (a :class:`~delft.textClassification.config.ModelConfig`) with the
        widths of these weights: recurrent units, word vectors and dense layer."""
        if len(model_config.list_classes) != self.n_classes:
            raise ModelLoadError(f"{self.path}: {self.n_classes} outputs, the config "
                                 f"{len(model_config.list_classes)} classes")
        return dataclasses.replace(model_config, recurrent_units=int(self.recurrent_units),
                                   word_embedding_size=int(self.word_embedding_size),
                                   dense_size=int(self.dense_size))


def weights_path(path):
    """``path`` itself, or the weights file of the model folder ``path``.

    >>> weights_path("copyright_gru/model_weights.hdf5")
    'copyright_gru/model_weights.hdf5'
    """
    return os.path.join(path, WEIGHTS_FILE) if os.path.isdir(path) else path


def _suffix(layer):
    """The Keras counter of a layer's name: 0 for ``dense``, 1 for ``dense_1``."""
    found = re.search(r"_(\d+)$", layer)
    return int(found.group(1)) if found else 0


def _gru_directions(weights, where):
    """``((kernel, recurrent kernel, bias) forward, (...) backward)`` of a Keras
    Bidirectional(GRU) layer's ``[(name, value)]``, its shapes checked."""
    layer = weights[0][0].split("/")[0]
    if any("gru_cell" not in name for name, _ in weights):
        raise ModelLoadError(f"{where}: {layer} is not a bidirectional GRU (the gru architecture)")
    directions = []
    for direction in ("forward", "backward"):
        mine = [(n, v) for n, v in weights if any(p.startswith(direction) for p in n.split("/"))]
        if not mine:
            raise ModelLoadError(f"{where}: {layer} lacks its {direction} GRU")
        kernel, recurrent, bias = (value for _, value in _by_variable(mine, GRU_WEIGHTS, where))
        units = recurrent.shape[0]
        if bias.shape != (2, GRU_GATES * units):
            raise ModelLoadError(f"{where}: {layer} {direction} bias has shape {bias.shape}, not "
                                 f"{(2, GRU_GATES * units)} (a GRU with reset_after=True)")
        if recurrent.shape != (units, GRU_GATES * units) or \
                kernel.ndim != 2 or kernel.shape[1] != GRU_GATES * units:
            raise ModelLoadError(f"{where}: {layer} {direction} kernels of shapes "
                                 f"{kernel.shape} and {recurrent.shape} are not a GRU's")
        directions.append((kernel, recurrent, bias))
    if any(a.shape != b.shape for a, b in zip(*directions)):
        raise ModelLoadError(f"{where}: {layer}'s two directions differ in shape")
    return tuple(directions)


def read_delft0_classifier_weights(path):
    """The :class:`Delft0ClassifierWeights` of DeLFT 0.4.6's ``gru`` weights file ``path`` (or
    of the model folder ``path``); a one-line :class:`ModelLoadError` naming the file when its
    layers or shapes are not those of the gru architecture.
    """
    path = weights_path(os.fspath(path))
    if not os.path.isfile(path):
        raise ModelLoadError(f"{path}: no such weights file")
    layers = read_keras2_layers(path)
    by_base = {}
    for layer in sorted(layers, key=_suffix):
        base = re.sub(r"_\d+$", "", layer)
        if base not in ("bidirectional", "dense"):
            raise ModelLoadError(f"{path}: {layer}: a layer the gru architecture does not have")
        by_base.setdefault(base, []).append(layers[layer])
    recurrent, dense = by_base.get("bidirectional", []), by_base.get("dense", [])
    if len(recurrent) != 2 or len(dense) != 2:
        raise ModelLoadError(f"{path}: {len(recurrent)} bidirectional and {len(dense)} dense "
                             "layers, not the gru architecture's 2 and 2")
    recurrent = [_gru_directions(weights, path) for weights in recurrent]
    dense, output = ([value for _, value in _by_variable(weights, ("kernel", "bias"), path)]
                     for weights in dense)
    read = Delft0ClassifierWeights(path, recurrent, tuple(dense), tuple(output))
    units = read.recurrent_units
    expected = [("second bidirectional GRU's kernel", recurrent[1][0][0].shape,
                 (2 * units, GRU_GATES * units)),
                ("second bidirectional GRU's recurrent kernel", recurrent[1][0][1].shape,
                 (units, GRU_GATES * units)),
                ("dense kernel", dense[0].shape, (4 * units, dense[0].shape[-1])),
                ("dense bias", dense[1].shape, (dense[0].shape[-1],)),
                ("output kernel", output[0].shape, (dense[0].shape[-1], output[0].shape[-1])),
                ("output bias", output[1].shape, (output[0].shape[-1],))]
    for what, shape, wanted in expected:
        if tuple(shape) != tuple(wanted):
            raise ModelLoadError(f"{path}: the {what} has shape {tuple(shape)}, not "
                                 f"{tuple(wanted)}")
    return read


def read_delft0_shapes(path):
    """The widths of DeLFT 0.4.6's ``gru`` weights file (or model folder) ``path``: what our
    model must be built with to take them (``recurrent_units``, ``word_embedding_size``,
    ``dense_size``, ``n_classes``)."""
    read = read_delft0_classifier_weights(path)
    return {"recurrent_units": int(read.recurrent_units),
            "word_embedding_size": int(read.word_embedding_size),
            "dense_size": int(read.dense_size), "n_classes": int(read.n_classes)}


def assign_delft0_weights(model, path):
    """Put DeLFT 0.4.6's weights (a file or folder ``path``, or what
    :func:`read_delft0_classifier_weights` read) onto ``model``, a built ``gru``
    :class:`~delft.textClassification.models.base.TextClassifier` over word vectors of the same
    widths; a one-line :class:`ModelLoadError` naming the file when they do not fit."""
    from delft.sequenceLabelling.layers.bigru import BiGRU
    from delft.textClassification.models.rnn import RNN_RECIPES

    read = path if isinstance(path, Delft0ClassifierWeights) else \
        read_delft0_classifier_weights(path)
    steps = getattr(model.encoder, "steps", None)
    if steps != list(RNN_RECIPES["gru"]) or model.inputs_kind != "word_vectors":
        raise ModelLoadError(f"{read.path}: DeLFT 0.4.6 gru weights go onto a gru model over "
                             f"word vectors, not {model.name} over {model.inputs_kind}")
    dense = model.encoder.stack[steps.index("dense")]
    pairs = []
    for layer, directions in zip(model.encoder.layers_of(BiGRU), read.recurrent):
        pairs += [(layer.name, ours, theirs) for variables, weights in
                  zip(layer.direction_variables(), directions)
                  for ours, theirs in zip(variables, weights)]
    pairs += [(dense.name, ours, theirs) for ours, theirs in zip((dense.kernel, dense.bias),
                                                                read.dense)]
    pairs += [(model.output_layer.name, ours, theirs) for ours, theirs in
              zip((model.output_layer.kernel, model.output_layer.bias), read.output)]
    for name, ours, theirs in pairs:
        if tuple(ours.shape) != tuple(theirs.shape):
            raise ModelLoadError(f"{read.path}: {ours.name} of {name} has shape "
                                 f"{tuple(theirs.shape)} in the file, {tuple(ours.shape)} in "
                                 "the model")
    for _, ours, theirs in pairs:
        ours.assign(np.asarray(theirs, dtype=np.float32))
