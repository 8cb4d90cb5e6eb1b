"""DeLFT 0.3/0.4 model folders, as GROBID ships them: ``config.json``, ``preprocessor.json`` and
``model_weights.hdf5`` (Keras 2), read with ``json`` and ``h5py`` and mapped onto our layers.

What DeLFT 0.4.6 computes, and where it lands here (``doc/usage.md``, "Models you already have"):

- The char embedding and BiLSTM (``time_distributed*``), the word BiLSTM (``bidirectional*``), the
  tanh dense layer and the potentials dense layer are ours, weight for weight (Keras' LSTM layout,
  which :meth:`BiLSTM.set_keras_weights` converts to its own).
- The FEATURES models embed every feature column in one table of ``12·F + 1`` rows (row 0 for
  padding and for values unseen in training; column ``j``'s values at DeLFT's ids) and read a
  token's column embeddings with a small BiLSTM without a mask: our ``features_encoder="lstm"``,
  whose per-column tables get DeLFT's rows (ids 0 and 1, padding and unseen, both DeLFT's row 0).
- The CRF is TensorFlow Addons' (``crf``: ``chain_kernel``, ``left_boundary``, ``right_boundary``
  and its own dense layer) or DeLFT's ChainCRF (``chain_crf``: ``U``, ``b_start``, ``b_end``):
  both are our CRF's transitions, start and end energies.
- The BidLSTM_CRF(_FEATURES) models mask the padding (their char embedding has ``mask_zero``):
  a text's labels do not depend on its batch. The ChainCRF models have no mask: the char BiLSTM
  reads every token as ``max_char_length`` characters, the word BiLSTM and the CRF read the whole
  padded batch (the end energy lands on the batch's last position, and ``<PAD>``, label 0, can
  be predicted). Their preprocessor gets ``reads_padding`` and ``reads_char_padding``, which
  give them DeLFT's batches.

Layer names vary between folders (``bidirectional_1`` or ``_2``): layers are found by their base
name and their weights by their role in each group's ``weight_names``, never by a full name.
"""
import os
import re

import h5py
import numpy as np

from delft.sequenceLabelling.foreign import ForeignModel, read_json
from delft.sequenceLabelling.foreign.delft_files import (check_vocabularies, feature_table,
                                                         model_config, word_preprocessor)
from delft.sequenceLabelling.model_dir import DELFT0, FOLDER_WEIGHTS
from delft.utilities.errors import ModelLoadError

# the architectures GROBID ships, all of which DeLFT 0.4.6 loads
ARCHITECTURES = ("BidLSTM_CRF", "BidLSTM_CRF_FEATURES", "BidLSTM_ChainCRF",
                 "BidLSTM_ChainCRF_FEATURES")


def read_delft0_folder(path):
    """The :class:`ForeignModel` of the DeLFT 0.3/0.4 folder ``path``.

    Refused in one line: ELMo models (GROBID ships their folders without the ELMo weights), an
    architecture other than GROBID's four, vocabularies that disagree with the weights.
    """
    config_path = os.path.join(path, "config.json")
    values = read_json(config_path)
    architecture = values.get("architecture") or values.get("model_type")
    if values.get("use_ELMo"):
        raise ModelLoadError(f"{path}: a DeLFT model with ELMo embeddings (use_ELMo): ELMo is "
                             "not supported; use the same model without ELMo")
    if architecture not in ARCHITECTURES:
        raise ModelLoadError(f"{config_path}: architecture {architecture!r} of a DeLFT 0.x "
                             f"folder is not supported (supported: {', '.join(ARCHITECTURES)})")
    config = model_config(values, architecture, config_path)
    preprocessor_path = os.path.join(path, "preprocessor.json")
    chain = "ChainCRF" in architecture  # unmasked: they read their padding
    preprocessor, feature_rows = word_preprocessor(read_json(preprocessor_path), config,
                                                   preprocessor_path, reads_padding=chain,
                                                   reads_char_padding=chain)
    weights_path = os.path.join(path, FOLDER_WEIGHTS[DELFT0])
    layers = read_keras2_layers(weights_path)
    weights = _our_weights(layers, config, preprocessor, feature_rows, weights_path)
    return ForeignModel(config, preprocessor, weights)


def read_keras2_layers(path):
    """``{Keras layer name: [(weight name, float32 value), ...]}`` of a Keras 2 HDF5 weights file,
    each layer's weights in the order of its group's ``weight_names``.

    Two layouts occur: one group per layer (``bidirectional_1/bidirectional_1/...``), and the
    TensorFlow Addons CRF wrapper's ``model/`` and ``crf/`` groups, whose weight names are
    relative to the model (``model/bidirectional_1/...``) or to the CRF (``crf/chain_kernel``).
    A damaged file is a one-line :class:`ModelLoadError`.
    """
    layers = {}
    try:
        with h5py.File(path, "r") as weights:
            root = weights["model_weights"] if "model_weights" in weights else weights
            for group_name, group in root.items():
                if not isinstance(group, h5py.Group):
                    continue
                for name in group.attrs.get("weight_names", []):
                    name = name.decode("utf-8") if isinstance(name, bytes) else str(name)
                    full = name if "/" in name else f"{group_name}/{name}"
                    value = np.asarray(group[name], dtype=np.float32)
                    layers.setdefault(full.split("/")[0], []).append((full, value))
    except ModelLoadError:
        raise
    except Exception as error:  # h5py raises many types for a damaged file
        raise ModelLoadError(f"{path}: cannot read the weights ({type(error).__name__}: "
                             f"{str(error).splitlines()[0] if str(error) else ''})") from None
    if not layers:
        raise ModelLoadError(f"{path}: no weights in the file")
    return layers


def _variable(name):
    """``kernel`` for ``bidirectional_1/forward_lstm_1/lstm_cell_4/kernel:0``."""
    return name.rsplit("/", 1)[-1].split(":")[0]


def _lstm_directions(weights, where):
    """``[(name, value)] * 6`` of a Keras Bidirectional(LSTM): forward then backward, each
    kernel, recurrent kernel, bias (the portable layout of our BiLSTM)."""
    found = {}
    for name, value in weights:
        parts = name.split("/")
        direction = "forward" if any(p.startswith("forward") for p in parts) else \
            "backward" if any(p.startswith("backward") for p in parts) else None
        if "gru_cell" in name or direction is None:
            raise ModelLoadError(f"{where}: {name}: a layer we do not have (not a bidirectional "
                                 "LSTM)")
        found[direction, _variable(name)] = (name, value)
    order = [(d, v) for d in ("forward", "backward") for v in ("kernel", "recurrent_kernel", "bias")]
    missing = [f"{d} {v}" for d, v in order if (d, v) not in found]
    if missing:
        raise ModelLoadError(f"{where}: {weights[0][0].split('/')[0]} lacks its "
                             f"{', '.join(missing)}")
    return [found[key] for key in order]


def _by_variable(weights, names, where):
    """The weights named ``names`` (last path component), in that order."""
    found = {_variable(name): (name, value) for name, value in weights}
    missing = [n for n in names if n not in found]
    if missing:
        raise ModelLoadError(f"{where}: {weights[0][0].split('/')[0]} lacks "
                             f"{', '.join(missing)}")
    return [found[n] for n in names]


def _our_weights(layers, config, preprocessor, feature_rows, where):
    """The portable weights of each of our layers, from the file's Keras layers."""
    ours = {}
    for layer, weights in layers.items():
        base = re.sub(r"_\d+$", "", layer)
        variables = {_variable(name) for name, _ in weights}
        if base in ("time_distributed", "features_embedding_td") and variables == {"embeddings"}:
            target = "char_encoder.embedding" if base == "time_distributed" else \
                "feature_encoder.embedding"
            ours[target] = weights
        elif base in ("time_distributed", "features_embedding_td"):
            target = "char_encoder.lstm" if base == "time_distributed" else "feature_encoder.lstm"
            ours[target] = _lstm_directions(weights, where)
        elif base == "bidirectional":
            ours["word_lstm"] = _lstm_directions(weights, where)
        elif base == "dense":
            kernel, bias = _by_variable(weights, ("kernel", "bias"), where)
            tanh = kernel[1].shape[0] == 2 * config.word_lstm_units
            ours["dense" if tanh else "potentials_layer"] = [kernel, bias]
        elif base == "crf":  # TensorFlow Addons' CRF and its dense layer
            dense = [(n, v) for n, v in weights if "dense" in n]
            ours["potentials_layer"] = _by_variable(dense, ("kernel", "bias"), where)
            ours["crf"] = _by_variable(weights, ("chain_kernel", "left_boundary",
                                                 "right_boundary"), where)
        elif base == "chain_crf":  # DeLFT's ChainCRF
            ours["crf"] = _by_variable(weights, ("U", "b_start", "b_end"), where)
        else:
            raise ModelLoadError(f"{where}: {weights[0][0]}: a layer we do not have")
    check_vocabularies(ours, preprocessor, where)
    if feature_rows is not None and "feature_encoder.embedding" in ours:
        ours["feature_encoder.embedding"] = [feature_table(
            ours["feature_encoder.embedding"][0], feature_rows, config.features_vocabulary_size,
            where)]
    return ours
