"""DeLFT 1.x model folders (PyTorch): ``config.json``, ``preprocessor.json`` and
``model.safetensors`` (the torch ``state_dict``), read with ``json`` and safetensors' numpy API
(no torch) and mapped onto our layers.

What DeLFT 1.2.0 computes, and where it lands here (``tests/data/delft1/README.md`` documents the
folders, ``doc/usage.md`` "Models you already have" the table):

- torch's LSTM gates are (input, forget, cell, output), as Keras', with two biases summed; its
  GRU gates (reset, update, new) become Keras' (update, reset, candidate), its input and
  recurrent biases Keras' two rows (``reset_after``); a ``Linear`` weight is a transposed Keras
  kernel, a ``Conv1d`` weight a Keras kernel with its axes reversed.
- The feature table and the feature BiLSTM are DeLFT 0.x's (see delft_files.py); DeLFT 1.x's
  table has a zero row 0.
- BidLSTM_CRF(_FEATURES, _CASING), BidGRU_CRF and BidLSTM_CNN_CRF mask the padding; the char CNN
  pools over all ``max_char_length`` positions (``reads_char_padding``); the ChainCRF models read
  their padding as DeLFT 0.x's do (``reads_padding``). Recurrent dropout has no effect on
  DeLFT 1.x's one-layer torch RNNs, so the model takes none.
- BERT and BERT_CRF: the encoder's weights (``transformer.*``) are ported by keras-hub's
  converter, as a Hugging Face checkpoint's; BERT_CRF's CRF decodes every subtoken
  (``crf_over_subtokens``), as DeLFT 1.x's.
- Refused in one line: BidLSTM and BidLSTM_CNN (their classifier reads the BiLSTM states, where
  ours has a dense layer between), the transformer architectures whose head is not ours, a
  pickled ``model_weights.pt`` (DeLFT 1.0/1.1: never unpickled).
"""
import os

import numpy as np

from delft.sequenceLabelling.foreign import ForeignModel, read_json, vocabulary_list
from delft.sequenceLabelling.foreign.delft_files import (check_vocabularies, feature_table,
                                                         model_config, word_preprocessor)
from delft.sequenceLabelling.model_dir import DELFT1, FOLDER_WEIGHTS
from delft.sequenceLabelling.preprocess import LabelVocabulary
from delft.utilities.errors import ModelLoadError

RNN_ARCHITECTURES = ("BidLSTM_CRF", "BidLSTM_CRF_FEATURES", "BidLSTM_CRF_CASING", "BidGRU_CRF",
                     "BidLSTM_ChainCRF", "BidLSTM_ChainCRF_FEATURES", "BidLSTM_CNN_CRF")
# BERT: a classifier over each word's first subtoken, as ours; BERT_CRF: its CRF decodes every
# subtoken (crf_over_subtokens)
TRANSFORMER_ARCHITECTURES = ("BERT", "BERT_CRF")
REFUSED = {
    "BidLSTM": "its classifier reads the BiLSTM states, where our BidLSTM has a dense layer "
               "between",
    "BidLSTM_CNN": "its classifier reads the BiLSTM states, where our BidLSTM_CNN has a dense "
                   "layer between",
    "BERT_ChainCRF": "its CRF decodes the padding of DeLFT's batches of subtokens, which ours "
                     "does not read",
}
for _name in ("BERT_FEATURES", "BERT_CRF_FEATURES", "BERT_ChainCRF_FEATURES"):
    REFUSED[_name] = "its BiLSTM over the subtokens and features is not a layer of ours"
TRANSFORMER_CONFIG, TRANSFORMER_TOKENIZER = "transformer-config.json", "transformer-tokenizer"
# parameters the models never use
UNUSED_PREFIXES = ("transformer.pooler.",)


def read_delft1_folder(path):
    """The :class:`ForeignModel` of the DeLFT 1.x folder ``path``."""
    config_path = os.path.join(path, "config.json")
    values = read_json(config_path)
    architecture = values.get("architecture")
    if architecture in REFUSED:
        raise ModelLoadError(f"{config_path}: a DeLFT 1.x {architecture} is not supported: "
                             f"{REFUSED[architecture]}")
    if architecture in TRANSFORMER_ARCHITECTURES:
        return read_transformer_folder(path, values, architecture)
    if architecture not in RNN_ARCHITECTURES:
        raise ModelLoadError(f"{config_path}: architecture {architecture!r} of a DeLFT 1.x "
                             f"folder is not supported (supported: "
                             f"{', '.join(RNN_ARCHITECTURES + TRANSFORMER_ARCHITECTURES)})")
    config = model_config(values, architecture, config_path, recurrent_dropout=0.0)
    preprocessor_path = os.path.join(path, "preprocessor.json")
    chain = "ChainCRF" in architecture
    preprocessor, feature_rows = word_preprocessor(
        read_json(preprocessor_path), config, preprocessor_path,
        uses_casing=architecture.endswith("CASING"), reads_padding=chain,
        reads_char_padding=chain or "CNN" in architecture)
    weights_path = os.path.join(path, FOLDER_WEIGHTS[DELFT1])
    tensors = TorchTensors(read_safetensors(weights_path), weights_path)
    weights = rnn_weights(tensors, config)
    check_vocabularies(weights, preprocessor, weights_path)
    if feature_rows is not None:
        weights["feature_encoder.embedding"] = [feature_table(
            weights["feature_encoder.embedding"][0], feature_rows,
            config.features_vocabulary_size, weights_path)]
    tensors.check_all_used()
    return ForeignModel(config, preprocessor, weights)


def read_transformer_folder(path, values, architecture):
    """A DeLFT 1.x BERT or BERT_CRF folder: the encoder's config and tokenizer beside the
    weights, the encoder's weights (``transformer.*``) read by keras-hub's converter when the
    model is built, the head's mapped here. The learning-rate multipliers of our head are 1
    (DeLFT trains its head at the encoder's rate) and the word-piece table is not frozen (DeLFT
    fine-tunes it)."""
    from delft.sequenceLabelling.transformers.preprocess import TransformerPreprocessor

    where = os.path.join(path, "config.json")
    config = model_config(values, architecture, where, recurrent_dropout=0.0,
                          head_lr_multiplier=1.0, crf_lr_multiplier=1.0,
                          freeze_word_embeddings=False,
                          crf_over_subtokens=architecture == "BERT_CRF")
    preprocessor_path = os.path.join(path, "preprocessor.json")
    labels = vocabulary_list(read_json(preprocessor_path).get("vocab_tag"),
                             f"{preprocessor_path}: vocab_tag")
    preprocessor = TransformerPreprocessor.from_files(
        config.transformer_name, path, read_json(os.path.join(path, TRANSFORMER_CONFIG)),
        os.path.join(path, TRANSFORMER_TOKENIZER), config.max_sequence_length)
    preprocessor.label_vocabulary = LabelVocabulary(labels)
    weights_path = os.path.join(path, FOLDER_WEIGHTS[DELFT1])
    tensors = TorchTensors(read_safetensors(weights_path), weights_path)
    tensors.used.update(k for k in tensors.tensors if k.startswith("transformer."))
    weights = {"potentials_layer": tensors.linear(tensors.first("linear", "classifier"))}
    if architecture == "BERT_CRF":
        weights["crf"] = crf_weights(tensors)
    check_vocabularies(weights, preprocessor, weights_path)
    tensors.check_all_used()
    return ForeignModel(config, preprocessor, weights, built_with_weights=("encoder",))


def read_safetensors(path):
    """``{name: float32 array}`` of a safetensors file; a damaged one is a one-line error."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return {name: np.asarray(value, dtype=np.float32)
                for name, value in load_file(path).items()}
    except (SafetensorError, OSError, ValueError) as error:
        raise ModelLoadError(f"{path}: cannot read the weights ({type(error).__name__}: "
                             f"{str(error).splitlines()[0] if str(error) else ''})") from None


class TorchTensors:
    """A state dict read from ``where``, converted to our layers' portable (Keras) layout; each
    tensor taken is noted, so that one no layer of ours reads is an error, not a silent drop."""

    def __init__(self, tensors, where):
        self.tensors = tensors
        self.where = where
        self.used = set()

    def __contains__(self, name):
        return any(key == name or key.startswith(name + ".") for key in self.tensors)

    def take(self, name):
        if name not in self.tensors:
            raise ModelLoadError(f"{self.where}: no parameter {name}")
        self.used.add(name)
        return name, self.tensors[name]

    def first(self, *modules):
        """The first of ``modules`` the state dict holds."""
        return next(m for m in modules if m in self)

    def check_all_used(self):
        left = sorted(k for k in self.tensors
                      if k not in self.used and not k.startswith(UNUSED_PREFIXES))
        if left:
            raise ModelLoadError(f"{self.where}: {left[0]}: a layer we do not have"
                                 + (f" (and {len(left) - 1} more parameters)" if len(left) > 1
                                    else ""))

    def embedding(self, module):
        return [self.take(f"{module}.weight")]

    def linear(self, module):
        """A torch Linear as a Keras Dense: ``(kernel [in, out], bias)``."""
        (name, weight), bias = self.take(f"{module}.weight"), self.take(f"{module}.bias")
        return [(name, weight.T), bias]

    def conv1d(self, module):
        """A torch Conv1d ``[filters, in, width]`` as a Keras Conv1D ``[width, in, filters]``."""
        (name, weight), bias = self.take(f"{module}.weight"), self.take(f"{module}.bias")
        return [(name, weight.transpose(2, 1, 0)), bias]

    def bidirectional(self, module, gates):
        """A bidirectional torch LSTM (``gates=4``) or GRU (3) as our BiLSTM's or BiGRU's
        portable weights: forward then backward, kernel, recurrent kernel, bias."""
        weights = []
        for suffix in ("l0", "l0_reverse"):
            (name, w_input), (_, w_recurrent) = (self.take(f"{module}.weight_ih_{suffix}"),
                                                 self.take(f"{module}.weight_hh_{suffix}"))
            b_input, b_recurrent = (self.take(f"{module}.bias_ih_{suffix}")[1],
                                    self.take(f"{module}.bias_hh_{suffix}")[1])
            if gates == 3:
                w_input, w_recurrent = map(gru_gates_to_keras, (w_input, w_recurrent))
                bias = np.stack([gru_gates_to_keras(b_input), gru_gates_to_keras(b_recurrent)])
            else:  # torch's LSTM gates are Keras' (input, forget, cell, output)
                bias = b_input + b_recurrent
            weights += [(name, w_input.T), (f"{module}.weight_hh_{suffix}", w_recurrent.T),
                        (f"{module}.bias_ih_{suffix}", bias)]
        return weights


def gru_gates_to_keras(weight):
    """A torch GRU weight's gate blocks (reset, update, new), stacked on its first axis, in
    Keras' order (update, reset, candidate).

    >>> gru_gates_to_keras(np.array([0, 1, 2])).tolist()
    [1, 0, 2]
    """
    reset, update, new = np.split(weight, 3, axis=0)
    return np.concatenate([update, reset, new], axis=0)


def rnn_weights(tensors, config):
    """The portable weights of our RNN-family model, by layer, from a DeLFT 1.x state dict."""
    ours = {"char_encoder.embedding": tensors.embedding("char_encoder.char_embeddings")}
    if "char_encoder.conv" in tensors:
        ours["char_encoder.convolution"] = tensors.conv1d("char_encoder.conv")
    else:
        ours["char_encoder.lstm"] = tensors.bidirectional("char_encoder.bilstm", 4)
    if "casing_embedding" in tensors:
        ours["casing_embedding"] = tensors.embedding("casing_embedding")
    if "features_embedding" in tensors:
        ours["feature_encoder.embedding"] = tensors.embedding("features_embedding")
        ours["feature_encoder.lstm"] = tensors.bidirectional("features_lstm", 4)
    if "bigru1" in tensors:
        ours["word_gru"] = tensors.bidirectional("bigru1", 3)
        ours["word_gru_2"] = tensors.bidirectional("bigru2", 3)
    else:
        ours["word_lstm"] = tensors.bidirectional("bilstm", 4)
    ours["dense"] = tensors.linear(tensors.first("dense1", "dense"))
    ours["potentials_layer"] = tensors.linear(tensors.first("linear", "dense2"))
    ours["crf"] = crf_weights(tensors)
    return ours


def crf_weights(tensors):
    """Our CRF's transitions, start and end energies from DeLFT 1.x's CRF (pytorch-crf's,
    ``crf.crf.*``) or ChainCRF (``crf.U``, ``crf.b_start``, ``crf.b_end``): the same three."""
    if "crf.crf" in tensors:
        return [tensors.take(f"crf.crf.{n}") for n in ("transitions", "start_transitions",
                                                      "end_transitions")]
    return [tensors.take(f"crf.{n}") for n in ("U", "b_start", "b_end")]
