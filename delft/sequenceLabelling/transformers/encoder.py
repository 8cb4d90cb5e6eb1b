"""The encoder: keras-hub's backbone for a checkpoint's ``model_type``, its weights ported by
keras-hub's own Hugging Face converters (BERT, DistilBERT, RoBERTa, XLM-RoBERTa) or by ours
(ELECTRA, DeBERTa-v3: :mod:`.converters`), corrected where keras-hub hard-codes something else than
the checkpoint says: the feed-forward activation (exact GELU where the config says ``gelu``;
keras-hub's BERT and ELECTRA use the tanh approximation), layer-norm epsilons, dropout, RoBERTa's
token-type embedding (keras-hub has none: its one row is folded into the position embeddings, an
exact rewrite, as keras-hub's XLM-RoBERTa converter does itself).
"""
import importlib
import sys

import keras
import numpy as np
import tensorflow as tf

from delft.sequenceLabelling.config import COMPUTE_DTYPES
from delft.sequenceLabelling.transformers.checkpoint import read_encoder_config
from delft.utilities.errors import ConfigurationError, ModelLoadError



class _Encoder:
    """How one ``model_type`` maps to keras-hub: converter (a keras-hub converter module's name, or
    with ``ours`` a function of :mod:`.converters`), inputs, settings to correct, the prefix of its
    parameter names in checkpoints saved from a task head (the model class's
    ``base_model_prefix``)."""

    def __init__(self, converter, uses_segments, activation_key, dropout_key, epsilon_key,
                 prefix, token_type_fold=False, ours=False):
        self.converter = converter
        self.ours = ours
        self.uses_segments = uses_segments
        self.activation_key = activation_key
        self.dropout_key = dropout_key
        self.epsilon_key = epsilon_key
        self.prefix = prefix
        self.token_type_fold = token_type_fold

    def module(self):
        if not self.ours:
            return keras_hub_module(f"keras_hub.src.utils.transformers.{self.converter}")
        from delft.sequenceLabelling.transformers import converters  # it imports this module

        return getattr(converters, self.converter)()


def keras_hub_module(name):
    """Import ``name``, a keras-hub module, without TensorFlow Text when keras-hub is not loaded.

    keras-hub imports ``tensorflow_text`` whenever it is installed (for its own tokenizers; ours
    are Hugging Face's, from ``transformers``): resident memory that a training never uses
    (doc/benchmarks.md, "Start-up"). Hidden while keras-hub loads, it is an optional import
    keras-hub does without; it stays importable afterwards for anyone who wants it.
    """
    if "keras_hub" in sys.modules or "tensorflow_text" in sys.modules:
        return importlib.import_module(name)
    sys.modules["tensorflow_text"] = None  # `import tensorflow_text` raises ImportError
    try:
        return importlib.import_module(name)
    finally:
        del sys.modules["tensorflow_text"]


_BERT_KEYS = ("hidden_act", "hidden_dropout_prob", "layer_norm_eps")
ENCODERS = {
    "bert": _Encoder("convert_bert", True, *_BERT_KEYS, "bert"),
    "distilbert": _Encoder("convert_distilbert", False, "activation", "dropout", None,
                           "distilbert"),
    "roberta": _Encoder("convert_roberta", False, *_BERT_KEYS, "roberta", token_type_fold=True),
    "xlm-roberta": _Encoder("convert_xlm_roberta", False, *_BERT_KEYS, "roberta"),
    "electra": _Encoder("electra", True, *_BERT_KEYS, "electra", ours=True),
    "deberta-v2": _Encoder("deberta_v3", False, *_BERT_KEYS, "deberta", ours=True),
}


@tf.custom_gradient
def exact_gelu(x):
    """GELU with the exact erf, as ``torch.nn.functional.gelu``; for training it keeps only ``x``
    for the backward pass (autodiff of the composite formula keeps four more tensors of the
    feed-forward's width per layer, the widest activations of an encoder).

    >>> x = tf.constant([-1.0, 0.0, 2.0])
    >>> np.allclose(exact_gelu(x), keras.activations.gelu(x, approximate=False))
    True
    """
    x = tf.convert_to_tensor(x)
    cdf = 0.5 * (1.0 + tf.math.erf(x * tf.cast(1.0 / np.sqrt(2.0), x.dtype)))

    def gradient(upstream):
        # recomputed from x: d/dx x*cdf(x) = cdf(x) + x*pdf(x)
        cdf_again = 0.5 * (1.0 + tf.math.erf(x * tf.cast(1.0 / np.sqrt(2.0), x.dtype)))
        pdf = tf.exp(-0.5 * tf.square(x)) * tf.cast(1.0 / np.sqrt(2.0 * np.pi), x.dtype)
        return upstream * (cdf_again + x * pdf)

    return x * cdf, gradient


_ACTIVATIONS = {
    "gelu": exact_gelu,
    "gelu_new": lambda x: keras.activations.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: keras.activations.gelu(x, approximate=True),
    "gelu_fast": lambda x: keras.activations.gelu(x, approximate=True),
    "relu": keras.activations.relu,
    "silu": keras.activations.silu,
    "swish": keras.activations.silu,
}


def _checkpoint_loader(path, model_type):
    SafetensorLoader = keras_hub_module(
        "keras_hub.src.utils.transformers.safetensor_utils").SafetensorLoader

    class CheckpointLoader(SafetensorLoader):
        """keras-hub's loader, forgiving about the model-class prefix of parameter names.

        keras-hub's converters ask for ``distilbert.*`` / ``roberta.*`` names (checkpoints saved
        from a task head), BERT's, XLM-RoBERTa's and ours for names without a prefix; a
        checkpoint saved from the bare model class has the other form. Names are looked up
        exactly, then without / with the model prefix, then by a unique suffix. A missing pooler
        (token-classification checkpoints and ELECTRA have none) is skipped: the tagger never
        uses it.
        """

        def get_prefixed_key(self, hf_weight_key, dict_like):
            keys = set(dict_like.keys())
            bare = hf_weight_key
            for prefix in {spec.prefix + "." for spec in ENCODERS.values()}:
                if bare.startswith(prefix):
                    bare = bare[len(prefix):]
            for candidate in (hf_weight_key, bare, f"{ENCODERS[model_type].prefix}.{bare}"):
                if candidate in keys:
                    return candidate
            matches = [k for k in keys if k.endswith("." + bare)]
            if len(matches) == 1:
                return matches[0]
            raise KeyError(hf_weight_key)

        def port_weight(self, keras_variable, hf_weight_key, hook_fn=None):
            try:
                super().port_weight(keras_variable, hf_weight_key, hook_fn)
            except KeyError:
                if "pooler." in hf_weight_key:
                    return
                raise ModelLoadError(f"{path}: incomplete checkpoint, parameter {hf_weight_key} "
                                     "is missing") from None
            except ValueError as error:
                raise ModelLoadError(f"{path}: parameter {hf_weight_key} does not fit its "
                                     f"config.json ({error})") from None

    return CheckpointLoader(path)


def load_encoder(path, config=None, load_weights=True, dropout=None, dtype=None,
                 freeze_word_embeddings=False):
    """keras-hub backbone for the checkpoint at ``path``, corrected to the checkpoint's definition.

    ``load_weights=False`` builds it from ``config.json`` alone (a saved delft model carries the
    fine-tuned weights itself). ``dropout`` overrides the checkpoint's hidden dropout.
    Build it inside the strategy's scope.
    """
    config = config or read_encoder_config(path)
    if dtype is not None and dtype not in COMPUTE_DTYPES:
        raise ConfigurationError(f"encoder compute dtype {dtype!r} is not one of "
                                 f"{', '.join(COMPUTE_DTYPES)}")
    spec = ENCODERS[config["model_type"]]
    converter = spec.module()
    kwargs = converter.convert_backbone_config(config)
    kwargs["dropout"] = float(config.get(spec.dropout_key, 0.1) if dropout is None else dropout)
    if spec.uses_segments:
        kwargs["num_segments"] = int(config.get("type_vocab_size", 2))
    activation_name = config.get(spec.activation_key, "gelu")
    if activation_name not in _ACTIVATIONS:
        raise ConfigurationError(f"{path}: activation {activation_name!r} is not supported")
    try:
        backbone = converter.backbone_cls(**kwargs, dtype=dtype, name="encoder")
    except (TypeError, ValueError) as error:
        raise ModelLoadError(f"{path}: cannot build the encoder from config.json "
                             f"({error})") from None
    activation = _ACTIVATIONS[activation_name]
    epsilon = config.get(spec.epsilon_key) if spec.epsilon_key else None
    for layer in backbone.transformer_layers:
        layer._feedforward_intermediate_dense.activation = activation
    if epsilon is not None:
        for layer in backbone._flatten_layers(include_self=False, recursive=True):
            if isinstance(layer, keras.layers.LayerNormalization):
                layer.epsilon = float(epsilon)
    if spec.uses_segments:
        backbone.get_layer("pooled_dense").trainable = False  # never used: no gradient
    if freeze_word_embeddings:
        backbone.token_embedding.trainable = False
    if load_weights:
        try:
            with _checkpoint_loader(path, config["model_type"]) as loader:
                converter.convert_weights(backbone, loader, config)
                if spec.token_type_fold:
                    _fold_token_type(backbone, loader)
        except OSError as error:
            raise ModelLoadError(f"{path}: cannot read the weights ({error})") from None
    return backbone


def _fold_token_type(backbone, loader):
    """RoBERTa adds token-type embedding 0 to every position: keras-hub's RoBERTa has no such
    table, so the row is added to the position embeddings (the same sum, exactly)."""
    try:
        token_type = loader.get_tensor("embeddings.token_type_embeddings.weight")
    except KeyError:
        return
    positions = backbone.embeddings.position_embedding.position_embeddings
    positions.assign(positions.numpy() + token_type[0][np.newaxis, :])

