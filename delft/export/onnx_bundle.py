"""The ONNX bundle GROBID's Java engine loads: ``config.json``, ``encoder.onnx``,
``crf_params.json`` and ``vocab.json`` in one folder (``<model>-<architecture>.onnx/`` under
``grobid-home/models``).

The encoder is the model's own ``word_potentials`` traced with inputs in the form GROBID's
``OnnxModelRunner`` feeds them (``word_input`` float32, ``char_input`` and ``features_input``
int64, each ``[batch, maxSequenceLength, ...]``) and converted with tf2onnx; the CRF is decoded
in Java from ``crf_params.json``. Field by field: ``doc/export.md``.
"""
import contextlib
import logging
import os
import warnings
from typing import Optional

import numpy as np
import tensorflow as tf

from delft.export.common import (VOCAB_FILE, load_model_dir, model_feature_ids,
                                                   vocabularies, write_json)
from delft.sequenceLabelling.models import architecture
from delft.sequenceLabelling.recurrent_kernels import portable_kernels
from delft.utilities import atomic
from delft.utilities.errors import ConfigurationError

logger = logging.getLogger(__name__)

ENCODER_FILE = "encoder.onnx"
CONFIG_FILE = "config.json"
CRF_FILE = "crf_params.json"
OPSET = 14  # DeLFT's exporter's: every ONNX Runtime GROBID ships runs it
# A model without word embeddings still gets a ``word_input``: GROBID always feeds one, of
# ``wordEmbeddingSize`` floats per word, and ONNX Runtime rejects a feed the graph lacks. One
# float (zeros from an empty LMDB) keeps the tensor small; the graph ignores it.
CHAR_ONLY_WORD_WIDTH = 1
CHAR_ONLY_EMBEDDINGS_NAME = "none"


def export_onnx_bundle(model_dir: str, output: str, max_sequence_length: Optional[int] = None,
                       embeddings_name: Optional[str] = None, sequence=None) -> str:
    """Write the bundle of the model saved in ``model_dir`` to the folder ``output``.

    Args:
        model_dir: a saved BiLSTM-family model folder (with or without CRF, features, words).
        output: the bundle folder to write (replaced atomically if it exists).
        max_sequence_length: ``config.json``'s ``maxSequenceLength``: GROBID pads every call to
            it and labels longer sequences in independent chunks of it. Default: the model's.
        embeddings_name: ``config.json``'s ``embeddingsName``, the LMDB folder GROBID opens under
            ``<delft.install>/data/db/``. Default: the model's embeddings, or ``"none"`` for a
            model without word embeddings (an empty folder of that name is enough).
        sequence: the already loaded ``Sequence`` of ``model_dir`` (saves loading it again).

    Returns:
        The absolute path of the bundle folder.

    Raises:
        ConfigurationError: a transformer model, or a ``max_sequence_length`` below 1.
    """
    sequence = sequence or load_model_dir(model_dir)
    refusal = onnx_refusal(sequence.model_config.architecture)
    if refusal:
        raise ConfigurationError(f"{sequence.model_config.architecture}: no ONNX bundle: "
                                 f"{refusal}; use --format savedmodel")
    config = bundle_config(sequence, max_sequence_length, embeddings_name)
    columns = java_feature_columns(sequence.p)
    encoder = encoder_onnx(sequence, word_embedding_width(sequence), columns)
    with atomic.replaced_directory(output) as staging:
        with open(os.path.join(staging, ENCODER_FILE), "wb") as out:
            out.write(encoder.SerializeToString())
        write_json(os.path.join(staging, CRF_FILE), crf_params(sequence.model))
        write_json(os.path.join(staging, VOCAB_FILE), vocabularies(sequence.p, columns))
        write_json(os.path.join(staging, CONFIG_FILE), config)
    logger.info("ONNX bundle of %s written to %s", model_dir, output)
    return os.path.abspath(output)


def onnx_refusal(architecture_name: str) -> Optional[str]:
    """Why the architecture ``architecture_name`` has no ONNX bundle, or None when it has one.

    GROBID's Java engine feeds the encoder words, characters and features only, and runs BiLSTM
    bundles: a model that reads casing classes cannot be fed, and our GRU (a TensorFlow scan)
    and the transformers do not convert to its bundle.

    >>> onnx_refusal("BidLSTM_CNN_CRF") is None, onnx_refusal("BidLSTM_CRF_CASING")
    (True, "it reads each word's casing class, which GROBID's Java engine does not feed")
    """
    parts = architecture(architecture_name)
    if parts.uses_transformer:
        return ("the transformer family has none (GROBID's Java ONNX engine reads BiLSTM "
                "bundles only)")
    if parts.casing:
        return "it reads each word's casing class, which GROBID's Java engine does not feed"
    if parts.recurrent == "gru":
        return "its GRU (a TensorFlow scan) has no conversion to the bundle's ONNX operators"
    return None


# ---- EMBEDDINGS ADAPTATION POINT ------------------------------------------------------------
# The only place that knows how the model reads its words. Contract: a model trained with static
# embeddings (``model_config.embeddings_name``, vectors of ``model_config.word_embedding_size``)
# reads one float32 vector per word from ``batch["word_vectors"]`` [batch, words, size], which
# GROBID fills from DeLFT's LMDB cache (``word_input``), as delft's preprocessor does.
def word_embedding_width(sequence) -> int:
    """Floats per word the model reads from ``word_input``: 0 for a char-only model.

    Args:
        sequence: the loaded ``Sequence``.

    Returns:
        The word vectors' size, or 0.
    """
    config = sequence.model_config
    return int(config.word_embedding_size) if config.embeddings_name else 0


def word_batch(word_input: tf.Tensor, width: int) -> dict:
    """The batch entries that carry the words, from GROBID's ``word_input`` vectors.

    Args:
        word_input: ``[batch, words, max(width, 1)]`` float32, as GROBID feeds it.
        width: :func:`word_embedding_width` (0: the model reads no words; ``word_input`` ignored).

    Returns:
        ``{"word_vectors": word_input}``, or ``{}`` for a char-only model.
    """
    return {"word_vectors": word_input} if width else {}
# ---- end of the embeddings adaptation point ------------------------------------------------


def java_feature_columns(preprocessor) -> Optional[list]:
    """``featuresIndices`` for GROBID: ``0 .. max(model columns)``, or None without features.

    GROBID's ``Preprocessor.tokensToFeatureIndices`` takes the k-th value from input column k,
    not from column ``featuresIndices[k]`` (it looks it up in that column's map). Declaring every
    column from 0 makes position and column the same, so the Java engine and a DeLFT-style reader
    (which selects by column) both feed the right values; the encoder picks the model's columns,
    and columns without a map are 0 in Java and never read. When the model's columns already are
    0..F-1 this is exactly DeLFT's layout.

    Args:
        preprocessor: the model's preprocessor.

    Returns:
        The column list, or None for a model without features.
    """
    if not preprocessor.feature_index:
        return None
    return list(range(max(int(c) for c in preprocessor.features_indices) + 1))


def encoder_function(sequence, word_width: int, columns: Optional[list]):
    """The model's per-word potentials as a function of GROBID's encoder inputs.

    Inputs: ``word_input`` float32 ``[batch, seq, max(word_width, 1)]``, ``char_input`` int64
    ``[batch, seq, maxCharLength]`` and, with features, ``features_input`` int64
    ``[batch, seq, len(columns)]``; output ``[batch, seq, labels]`` float32. Batch and seq are
    dynamic. A row's length is its last non-empty ``char_input`` token (GROBID pads with zero
    rows), and the model runs on the batch's longest row only: the potentials of the padding GROBID
    adds up to ``maxSequenceLength`` are zeros it never decodes, and cost nothing to compute. A
    model that reads its padding (a DeLFT ChainCRF folder, ``reads_padding``) reads all of it, as
    it does in DeLFT: its labels through GROBID's Java engine are those of a batch padded to
    ``maxSequenceLength`` and decoded without the padding (doc/export.md measures the
    difference); one that reads its characters' padding reads all ``maxCharLength`` of them.

    Args:
        sequence: the loaded ``Sequence``.
        word_width: floats per word the model reads (0: none, see :func:`word_embedding_width`).
        columns: ``featuresIndices`` of the bundle (see :func:`java_feature_columns`), or None.

    Returns:
        A concrete function (inference runs every BiLSTM on the fused BlockLSTM op, GPU or not).
    """
    model, preprocessor = sequence.model, sequence.p
    specs = [tf.TensorSpec([None, None, max(word_width, CHAR_ONLY_WORD_WIDTH)], tf.float32,
                           name="word_input"),
             tf.TensorSpec([None, None, preprocessor.max_char_length], tf.int64,
                           name="char_input")]
    if columns is not None:
        specs.append(tf.TensorSpec([None, None, len(columns)], tf.int64, name="features_input"))
        model_columns = [int(c) for c in preprocessor.features_indices]

    def encode(word_input, char_input, features_input=None):
        chars = tf.cast(char_input, tf.int32)
        steps = tf.shape(chars)[1]
        if preprocessor.reads_padding:
            # DeLFT's unmasked ChainCRF models read all they are fed: GROBID's padding too
            width = steps
            lengths = tf.fill(tf.shape(chars)[:1], steps)
        else:
            filled = tf.reduce_any(chars > 0, axis=2)
            positions = tf.range(1, steps + 1)[tf.newaxis, :]
            lengths = tf.reduce_max(tf.where(filled, positions, 0), axis=1)
            # at least one step: an all-empty batch must still run (its potentials are not
            # decoded)
            width = tf.maximum(tf.reduce_max(lengths), 1)
        if not preprocessor.reads_char_padding:
            chars = chars[:, :, :tf.maximum(
                tf.reduce_max(tf.reduce_sum(tf.cast(chars > 0, tf.int32), 2)), 1)]
        batch = {"chars": chars[:, :width], "lengths": lengths}
        batch.update(word_batch(word_input[:, :width], word_width))
        if features_input is not None:
            picked = tf.gather(features_input[:, :width], model_columns, axis=2)
            batch["features"] = model_feature_ids(picked)
        with portable_kernels():  # BlockLSTM, which tf2onnx converts; cuDNN's ops it does not
            potentials = tf.cast(model.word_potentials(batch, training=False), tf.float32)
        padded = tf.pad(potentials, [[0, 0], [0, steps - tf.shape(potentials)[1]], [0, 0]])
        padded.set_shape([None, None, model.num_labels])  # GROBID reads the label count from it
        return tf.identity(padded, name="emissions")

    return tf.function(encode, input_signature=specs).get_concrete_function()


def encoder_onnx(sequence, word_width: int, columns: Optional[list]):
    """``encoder.onnx``: :func:`encoder_function` converted by :func:`function_to_onnx`.

    Args:
        sequence: the loaded ``Sequence``.
        word_width: floats per word the model reads (:func:`word_embedding_width`).
        columns: ``featuresIndices`` of the bundle, or None.

    Returns:
        The ONNX ModelProto.
    """
    return function_to_onnx(encoder_function(sequence, word_width, columns), "emissions")


def function_to_onnx(function, output_name: str):
    """Convert a concrete TF function to ONNX, inputs named as its specs, one output.

    Variables (and captured constants) are frozen into the graph first, then tf2onnx converts it
    with the handlers of :mod:`~delft.export.onnx_ops` for the two ops it lacks.

    Args:
        function: a concrete function with named input specs and one output tensor.
        output_name: the ONNX name of the output.

    Returns:
        The checked ONNX ModelProto, batch and sequence axes symbolic.

    Raises:
        ConfigurationError: tf2onnx/onnx are not installed (``pip install delft[export]``), or an
            op was left unconverted.
    """
    try:
        import onnx
        import tf2onnx
    except ImportError as error:
        raise ConfigurationError(f"ONNX export needs tf2onnx and onnx ({error.name} is missing): "
                                 "pip install 'delft[export]'") from None
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2)

    from delft.export.onnx_ops import CUSTOM_OP_HANDLERS

    _patch_tf2onnx_for_numpy2()
    frozen = convert_variables_to_constants_v2(function)
    inputs = [t.name for t in frozen.inputs]
    output = frozen.outputs[0].name
    renames = {name: name.split(":")[0] for name in inputs}
    renames[output] = output_name
    # tf2onnx logs each rewrite at INFO, and its TF1-style freezing calls log deprecation
    # warnings: none of it is news to the user of an export
    with _quiet_loggers("tf2onnx", "tensorflow"):
        proto, _ = tf2onnx.convert.from_graph_def(
            frozen.graph.as_graph_def(), input_names=inputs, output_names=[output], opset=OPSET,
            custom_op_handlers=dict(CUSTOM_OP_HANDLERS), tensors_to_rename=renames)
    _declare_interface(proto, [renames[name] for name in inputs], function.outputs[0].shape)
    # tf2onnx keeps an op it cannot convert under its TF name, in ONNX's own domain
    unconverted = sorted({node.op_type for node in proto.graph.node
                          if not onnx.defs.has(node.op_type, node.domain)})
    if unconverted:
        raise ConfigurationError(f"tf2onnx left TensorFlow ops unconverted: {unconverted}")
    onnx.checker.check_model(proto)
    return proto


def _declare_interface(proto, input_names, output_shape) -> None:
    """Check every input is declared (GROBID feeds ``word_input`` even to a graph that ignores
    it, and ONNX Runtime refuses an undeclared feed); name the batch and sequence axes as
    DeLFT's exporter does (``batch_size``, ``seq_length``); give the output its static sizes
    (GROBID reads the label count from the emissions' shape)."""
    declared = [value.name for value in proto.graph.input]
    if declared != list(input_names):
        raise ConfigurationError(f"tf2onnx declared the inputs {declared}, not {input_names}")
    (output,) = proto.graph.output
    for axis, size in enumerate(output_shape.as_list()):
        if size is not None and axis < len(output.type.tensor_type.shape.dim):
            output.type.tensor_type.shape.dim[axis].dim_value = size
    for value in list(proto.graph.input) + [output]:
        dims = value.type.tensor_type.shape.dim
        for axis, label in enumerate(("batch_size", "seq_length")):
            if axis < len(dims):
                dims[axis].ClearField("dim_value")
                dims[axis].dim_param = label


@contextlib.contextmanager
def _quiet_loggers(*names):
    """Only errors from the loggers ``names`` while in the context."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for log, level in zip(loggers, levels):
            log.setLevel(level)


def _patch_tf2onnx_for_numpy2() -> None:
    """Keras' own fix of tf2onnx 1.17's constant folding under numpy 2 (what ``model.export(
    format="onnx")`` applies); a no-op where Keras lacks it."""
    try:
        from keras.src.export.tf2onnx_lib import patch_tf2onnx
    except ImportError:
        return
    with warnings.catch_warnings():  # its `hasattr(np, "object")` probe warns under numpy 2
        warnings.simplefilter("ignore", FutureWarning)
        patch_tf2onnx()


def crf_params(model) -> dict:
    """``crf_params.json``: ``transitions[from][to]``, ``startTransitions``, ``endTransitions``.

    Our :class:`~delft.sequenceLabelling.layers.crf.ChainCRF` holds exactly these (transitions
    from i to j, start and end scores) and decodes as GROBID's ``CRFDecoder`` does. A model
    without a CRF gets zeros: Viterbi over zero transitions is the per-word argmax of its
    potentials, i.e. its own softmax decoding.

    Args:
        model: the built ``SequenceLabeller``.

    Returns:
        The three lists, float32 values as Python floats.
    """
    if model.crf is None:
        k = model.num_labels
        return {"transitions": [[0.0] * k for _ in range(k)], "startTransitions": [0.0] * k,
                "endTransitions": [0.0] * k}
    transitions, start, end = (np.asarray(w, dtype=np.float32) for w in model.crf._weights())
    return {"transitions": transitions.tolist(), "startTransitions": start.tolist(),
            "endTransitions": end.tolist()}


def lmdb_name(embeddings_name: str) -> str:
    """The LMDB folder name of the embeddings a model was trained with.

    A registry name (``glove-840B``) is DeLFT's LMDB folder name already; a file path (which
    GROBID cannot use: it looks under ``<delft.install>/data/db/``) gives its file name without
    extensions.

    Args:
        embeddings_name: ``model_config.embeddings_name``.

    Returns:
        The folder name.

    >>> lmdb_name("glove-840B"), lmdb_name("/data/glove.840B.300d.txt.gz")
    ('glove-840B', 'glove')
    """
    if os.sep not in embeddings_name and not embeddings_name.endswith((".vec", ".txt", ".gz")):
        return embeddings_name
    return os.path.basename(embeddings_name).split(".")[0]


def bundle_config(sequence, max_sequence_length: Optional[int] = None,
                  embeddings_name: Optional[str] = None) -> dict:
    """``config.json``: the keys and order of DeLFT's exporter.

    GROBID reads ``wordEmbeddingSize``, ``maxSequenceLength`` and ``embeddingsName``; the others
    describe the model.

    Args:
        sequence: the loaded ``Sequence``.
        max_sequence_length: ``maxSequenceLength`` (default: the model's).
        embeddings_name: ``embeddingsName`` (default: see :func:`export_onnx_bundle`).

    Returns:
        The dict, in DeLFT's key order.

    Raises:
        ConfigurationError: ``max_sequence_length`` below 1.
    """
    model_config, preprocessor = sequence.model_config, sequence.p
    length = max_sequence_length or model_config.max_sequence_length
    if length is None or int(length) < 1:
        raise ConfigurationError(f"max sequence length must be >= 1, not {length}")
    width = word_embedding_width(sequence)
    config = {
        "modelName": model_config.model_name,
        "architecture": model_config.architecture,
        "wordEmbeddingSize": width or CHAR_ONLY_WORD_WIDTH,
        "charEmbeddingSize": model_config.char_emb_size,
        "numCharLstmUnits": model_config.char_lstm_units,
        "numWordLstmUnits": model_config.word_lstm_units,
        "maxSequenceLength": int(length),
        "embeddingsName": embeddings_name or (lmdb_name(model_config.embeddings_name) if width
                                              else CHAR_ONLY_EMBEDDINGS_NAME),
    }
    columns = java_feature_columns(preprocessor)
    if columns is not None:
        config["featuresIndices"] = columns
        config["featuresEmbeddingSize"] = model_config.features_embedding_size
        config["featuresLstmUnits"] = model_config.features_lstm_units
        config["featuresVocabularySize"] = max(preprocessor.feature_vocab_sizes)
    return config
