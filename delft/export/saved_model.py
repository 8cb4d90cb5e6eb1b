"""A TensorFlow SavedModel that labels padded id tensors with the Viterbi decoding in the graph.

The default serving signature (what TF Serving exposes) takes the tensors of one batch as the
model's preprocessor makes them (``Preprocessor.batch_signature``: ``chars``, ``lengths``, and
``features`` / ``words`` / the transformer's subtoken tensors when the model reads them), with
dynamic batch and length, and returns ``tags`` (label ids, 0 past each row's length), ``scores``
(the softmax confidence of each tag, as ``Sequence.tag`` computes it) and ``potentials`` (the
CRF's per-word inputs). ``vocab.json`` beside it maps strings to ids and ids to labels; a
transformer model also gets its tokenizer, in ``transformer/``. Loading it needs TensorFlow only.
"""
import logging
import os

import tensorflow as tf

from delft.sequenceLabelling.casing import CASING_CLASSES
from delft.sequenceLabelling.recurrent_kernels import portable_kernels
from delft.export.common import (VOCAB_FILE, load_model_dir, model_feature_ids,
                                                   uses_transformer,
                                                   vocabularies, write_json)
from delft.utilities import atomic

logger = logging.getLogger(__name__)

SAVED_MODEL_DIR = "1"  # TF Serving serves <base_path>/<version>/: the folder is version 1
SIGNATURE = "serving_default"


class LabellingModule(tf.Module):
    """The model's variables and one serving function: batch tensors -> decoded labels.

    The function reuses the model's own ``word_potentials`` and ``decode`` (the code behind
    ``Sequence.tag``); the module tracks the variables only, not the Keras objects, so loading
    the SavedModel needs no Keras class.

    Args:
        model: a built :class:`~delft.sequenceLabelling.models.base.SequenceLabeller`.
        signature: ``{name: tf.TensorSpec}`` of its batch (no labels).
    """

    def __init__(self, model, signature):
        super().__init__(name="delft_labeller")
        self.model_variables = [getattr(v, "value", v) for v in model.variables]
        self.input_names = sorted(signature)
        specs = [tf.TensorSpec(signature[n].shape, signature[n].dtype, name=n)
                 for n in self.input_names]
        # the model is only captured by the function, so the Keras objects are not saved
        self.serve = tf.function(_serving_function(model, self.input_names),
                                 input_signature=specs)


def _serving_function(model, input_names):
    """``f(*tensors in input_names order) -> {tags, scores, potentials}`` on ``model``."""
    def serve(*tensors):
        batch = dict(zip(input_names, tensors))
        if "features" in batch:
            batch["features"] = model_feature_ids(batch["features"])
        with portable_kernels():  # no cuDNN op: the SavedModel runs on a CPU too
            potentials = tf.cast(model.word_potentials(batch, training=False), tf.float32)
        tags, scores = model.decode(batch, potentials)
        return {"tags": tf.cast(tags, tf.int32), "scores": tf.cast(scores, tf.float32),
                "potentials": potentials}

    return serve


def export_saved_model(model_dir: str, output: str, sequence=None) -> str:
    """Write ``output/1/`` (the SavedModel) and ``output/vocab.json`` for ``model_dir``'s model.

    Args:
        model_dir: a saved model folder, any architecture.
        output: the folder to write (replaced atomically if it exists); TF Serving's
            ``--model_base_path``.
        sequence: the already loaded ``Sequence`` of ``model_dir`` (saves loading it again).

    Returns:
        The absolute path of the SavedModel folder (``output/1``).
    """
    sequence = sequence or load_model_dir(model_dir)
    module = LabellingModule(sequence.model, sequence.p.batch_signature(False))
    with atomic.replaced_directory(output) as staging:
        tf.saved_model.save(module, os.path.join(staging, SAVED_MODEL_DIR),
                            signatures={SIGNATURE: module.serve.get_concrete_function()})
        write_json(os.path.join(staging, VOCAB_FILE), saved_model_vocab(sequence, module))
        if uses_transformer(sequence):  # its encoder config and tokenizer, as the model has them
            sequence.p.save_resources(staging)
    logger.info("SavedModel of %s written to %s", model_dir, output)
    return os.path.join(os.path.abspath(output), SAVED_MODEL_DIR)


def saved_model_vocab(sequence, module: LabellingModule) -> dict:
    """``vocab.json`` of a SavedModel: the bundle's vocabularies and how to fill each input.

    Args:
        sequence: the loaded ``Sequence``.
        module: the module being saved (its input names).

    Returns:
        The dict, ready for ``write_json``.
    """
    preprocessor = sequence.p
    vocab = vocabularies(preprocessor)
    vocab["modelName"] = sequence.model_config.model_name
    vocab["architecture"] = sequence.model_config.architecture
    vocab["signature"] = SIGNATURE
    vocab["inputs"] = {name: _input_note(name) for name in module.input_names}
    if "casing" in module.input_names:
        vocab["casingClasses"] = list(CASING_CLASSES)
    if sequence.model_config.embeddings_name:
        vocab["embeddingsName"] = sequence.model_config.embeddings_name
    if preprocessor.reads_padding:
        vocab["readsPadding"] = ("a DeLFT ChainCRF model: it reads the whole padded batch, as "
                                 "DeLFT ran it; give every row the batch's width in lengths "
                                 "(at least 2), maxCharLength chars to every word, and DeLFT's "
                                 "batches (input order, its batch size) for DeLFT's labels")
    vocab["outputs"] = {"tags": "int32 [batch, words]: tagIndex ids, 0 past each row's length",
                        "scores": "float32 [batch, words]: softmax confidence of each tag",
                        "potentials": "float32 [batch, words, labels]: CRF inputs"}
    if uses_transformer(sequence):
        from delft.sequenceLabelling.transformers.checkpoint import RESOURCES_DIR

        prefix, suffix, pad, unknown = preprocessor._special_tokens()
        vocab["transformer"] = {"tokenizer": RESOURCES_DIR, "prefixIds": prefix.tolist(),
                                "suffixIds": suffix.tolist(), "padId": int(pad),
                                "unknownId": int(unknown),
                                "subtokenLimit": int(preprocessor.subtoken_limit)}
    return vocab


def _input_note(name: str) -> str:
    notes = {
        "chars": "int32 [batch, words, chars]: charVocab ids of each word's first maxCharLength "
                 "characters (code points), 1 for an unknown one, 0 after the word",
        "lengths": "int32 [batch]: words in each row (at least 1); rows are padded after them",
        "features": "int32 [batch, words, len(featuresIndices)]: featuresMapToIndex ids of "
                    "those columns (counted after the token); 0 for an unseen value",
        "word_vectors": "float32 [batch, words, size]: each word's vector from the embeddings "
                        "named embeddingsName",
        "casing": "int32 [batch, words]: each word's casingClasses id (DeLFT's casing: numeric, "
                  "mainly_numeric, allLower, allUpper, initialUpper, contains_digit, other)",
        "input_ids": "int32 [batch, subtokens]: prefixIds, the words' subtokens, suffixIds, padId",
        "token_type_ids": "int32 [batch, subtokens]: zeros",
        "padding_mask": "int32 [batch, subtokens]: 1 on prefix, subtokens and suffix, else 0",
        "word_starts": "int32 [batch, words]: position of each word's first subtoken in its row",
    }
    return notes.get(name, "see the model's preprocessor")
