"""The one source of settings: what a model is (saved as config.json) and how it is trained.

Each field carries its help, its command-line flag and its allowed range, as Hugging Face's
``HfArgumentParser`` dataclasses do: the CLIs generate their options from these fields
(:func:`add_config_options`), ``Sequence`` fills them from its DeLFT-named arguments, and
:meth:`ModelConfig.load` checks a saved ``config.json`` against them.
"""
import argparse
import dataclasses
import json
import math
import typing
from dataclasses import dataclass, field
from typing import List, Optional

from delft.training.batching import LENGTH_GROUPS, POOL_BATCHES
from delft.utilities.Utilities import parse_number_ranges, t_or_f
from delft.utilities.errors import ConfigurationError

COMPUTE_DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")
SEED_LIMIT = 2 ** 32 - 1  # the seeds numpy, scikit-learn and Keras all take
LR_SCHEDULES = ("plateau", "exponential")


def option(default, help, flag=None, minimum=None, maximum=None, choices=None, cli=True,
           name=False):
    """A config field with its help, its flag (default ``--field-name``), range and choices;
    ``name``: the value names a folder (one path component: no separator, not ``..``)."""
    metadata = {"help": help, "flag": flag, "min": minimum, "max": maximum, "choices": choices,
                "cli": cli, "name": name}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class ModelConfig:
    """Everything needed to rebuild a trained model; written to ``config.json`` beside its weights."""

    model_name: str = option("model", "the model's name, the folder it is saved in", cli=False,
                             name=True)
    architecture: str = option(
        "BidLSTM_CRF", "architecture: BidLSTM_CRF, BidLSTM_CRF_FEATURES, BidLSTM_ChainCRF(_FEATURES), "
                       "BidLSTM, BERT_CRF, BERT_CRF_FEATURES, BERT_CRF_CHAR(_FEATURES), BERT...")
    embeddings_name: Optional[str] = option(
        None, "static word embeddings: a name of the resource registry, or a file",
        flag="--embedding")
    word_embedding_size: int = option(0, "width of the word embeddings", minimum=0, cli=False)
    char_emb_size: int = option(25, "character embedding width", minimum=1)
    max_char_length: int = option(30, "characters of a token the model reads", minimum=1)
    char_lstm_units: int = option(25, "units of the character BiLSTM, per direction", minimum=1)
    word_lstm_units: int = option(100, "units of the word BiLSTM, per direction", minimum=1)
    max_sequence_length: int = option(
        300, "longest row the model sees at training; longer sequences are cut into windows "
             "(never truncated)", minimum=1)
    dropout: float = option(0.5, "dropout around the word encoder", minimum=0.0, maximum=0.99)
    recurrent_dropout: float = option(0.25, "recurrent dropout of the word BiLSTM",
                                      minimum=0.0, maximum=0.99)
    batch_size: int = option(20, "global batch size (training and tagging)", minimum=1)
    features_indices: Optional[List[int]] = option(
        None, "FEATURES architectures: the feature columns to use, counted from the one after "
              "the token, e.g. 9-18 or 0,2,5 (default: every column with at most "
              "features-vocabulary-size distinct values)")
    features_vocabulary_size: int = option(
        12, "most distinct values of a feature column: the automatic selection keeps the "
            "columns with no more, and each column has that many ids", minimum=1)
    features_embedding_size: int = option(4, "embedding width of a feature value", minimum=1)
    features_encoder: str = option(
        "concat", "FEATURES architectures: a token's feature columns as their embeddings "
                  "concatenated, or read by DeLFT's small BiLSTM over the columns "
                  "(benchmarks/features.py compares them)", choices=["concat", "lstm"])
    features_lstm_units: int = option(4, "units of the lstm features encoder", minimum=1)
    transformer_name: Optional[str] = option(
        None, "Hugging Face checkpoint: a local directory, a name of the hub (org/name, from "
              "its cache offline) or a registered name", flag="--transformer")
    window_stride: Optional[int] = option(
        None, "overlap long texts in windows of the max length, this stride apart", minimum=1)
    compute_dtype: Optional[str] = option(
        None, "transformer encoder compute dtype (mixed_bfloat16 for accelerators with bfloat16 "
              "units)", choices=COMPUTE_DTYPES)
    freeze_word_embeddings: bool = option(
        True, "keep the transformer's word-piece table as the checkpoint has it (same F1, "
              "faster, less memory); false fine-tunes it as DeLFT does")
    head_lr_multiplier: float = option(
        50.0, "transformers: how much faster than the encoder the dense head learns", minimum=0.0)
    crf_lr_multiplier: float = option(
        500.0, "transformers: how much faster than the encoder the CRF transitions learn",
        minimum=0.0)
    crf_over_subtokens: bool = option(
        False, "transformers: the CRF decodes every subtoken of a row (special and continuation "
               "ones labelled <PAD>) and a word takes its first subtoken's label, as DeLFT 1.x's "
               "BERT_CRF (its folders load with it); false: one potential per word",
        cli=False)
    delft_version: str = option("", "the delft version that saved the model", cli=False)

    def save(self, path):
        with open(path, "w", encoding="utf-8") as out:
            json.dump(dataclasses.asdict(self), out, indent=2, sort_keys=True)

    @classmethod
    def load(cls, path):
        """Read ``config.json``; unknown keys are ignored, known ones checked (one-line errors)."""
        from delft.utilities.json_files import read_json_object

        values = read_json_object(path, error=ConfigurationError)
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known}).validated(path)

    def validated(self, source="config"):
        return check_fields(self, source)


@dataclass
class TrainingConfig:
    """How a model is trained; not needed to tag, so not saved with the model."""

    optimizer: str = option("adam", "accepted for DeLFT scripts: Adam (AdamW for transformers)",
                            cli=False)
    learning_rate: Optional[float] = option(
        None, "initial learning rate (default 1e-3, or 2e-5 with a transformer)", minimum=0.0)
    lr_decay: float = option(0.9, "factor of each learning-rate reduction", minimum=0.0,
                             maximum=1.0)
    lr_schedule: str = option(
        "plateau", "reduce the learning rate on a validation plateau (DeLFT 1.2) or every epoch "
                   "(DeLFT 0.4.6)", choices=LR_SCHEDULES)
    clip_gradients: float = option(5.0, "clip gradients to this global norm (0: no clipping)",
                                   minimum=0.0)
    max_epoch: int = option(50, "most epochs to train", minimum=1)
    pool_batches: int = option(
        POOL_BATCHES, "training batches are cut from pools of this many batches' rows sorted by "
                      "length (less padding); 1 draws each batch at random, as DeLFT 1.2",
        minimum=1)
    length_groups: int = option(
        LENGTH_GROUPS, "each replica's share of a training batch is sorted by length and padded "
                       "in this many groups (the same gradient, less padding)", minimum=1)
    early_stop: bool = option(True, "stop when validation F1 stops improving (true|false)")
    patience: int = option(5, "epochs without a better validation F1 before stopping",
                           minimum=1)
    fold_number: int = option(1, "train this many models on folds (n-fold)", flag="--fold-count",
                              minimum=1)
    seed: Optional[int] = option(None, "random seed (data order, splits, initial weights)",
                                 minimum=0, maximum=SEED_LIMIT)
    resume: bool = option(
        True, "resume an interrupted training from its last checkpoint (<output>/<model>"
              ".checkpoints/); --no-resume starts afresh")
    weight_decay: float = option(0.01, "AdamW weight decay (transformers)", minimum=0.0)
    warmup_ratio: float = option(0.1, "share of the steps of linear warm-up (transformers)",
                                 minimum=0.0, maximum=1.0)
    tensorboard: Optional[str] = option(
        None, "write TensorBoard scalars (each epoch) and the per-label validation F1 (at the "
              "end) under this folder")
    report_to_wandb: bool = option(
        False, "report to Weights & Biases as DeLFT does (pip install wandb; WANDB_API_KEY, or "
               "WANDB_MODE=offline)", flag="--wandb")
    wandb_project: Optional[str] = option(
        None, "Weights & Biases project (default: WANDB_PROJECT, else wandb's own)")
    wandb_run_id: Optional[str] = option(None, "Weights & Biases run to continue")

    def resolved_learning_rate(self, uses_transformer):
        if self.learning_rate is not None:
            return self.learning_rate
        return 2e-5 if uses_transformer else 1e-3

    def validated(self, source="training config"):
        return check_fields(self, source)


def field_default(name):
    """The default of the config field ``name`` (of :class:`ModelConfig` or
    :class:`TrainingConfig`).

    >>> field_default("batch_size"), field_default("patience")
    (20, 5)
    """
    for config_class in (ModelConfig, TrainingConfig):
        for f in dataclasses.fields(config_class):
            if f.name == name:
                return _default_of(f)
    raise KeyError(f"no config field {name!r}")


def split_settings(settings, source="settings"):
    """``(ModelConfig fields, TrainingConfig fields)`` of ``settings`` (field name -> value); a
    name that is neither is a one-line ``TypeError`` naming ``source`` and the known names.

    >>> split_settings({"batch_size": 8, "max_epoch": 3})
    ({'batch_size': 8}, {'max_epoch': 3})
    """
    model_names = {f.name for f in dataclasses.fields(ModelConfig)}
    training_names = {f.name for f in dataclasses.fields(TrainingConfig)}
    unknown = sorted(set(settings) - model_names - training_names)
    if unknown:
        raise TypeError(f"{source}: unknown setting {unknown[0]!r} (settings: "
                        f"{', '.join(sorted(model_names | training_names))})")
    return ({k: v for k, v in settings.items() if k in model_names},
            {k: v for k, v in settings.items() if k in training_names})


def _field_types(config_class):
    return typing.get_type_hints(config_class)


def _base_type(annotation):
    """``int`` for ``Optional[int]``, ``list`` for ``List[int]``..."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Union and len(args) == 1:
        return _base_type(args[0])
    return typing.get_origin(annotation) or annotation


def check_fields(config, source):
    """Raise a one-line :class:`ConfigurationError` naming the first field of the wrong type, out
    of its range, not a finite number, or a name that is not one path component; returns
    ``config``.

    >>> check_fields(ModelConfig(word_lstm_units=-5), "config.json")
    Traceback (most recent call last):
    ...
    delft.utilities.errors.ConfigurationError: config.json: word_lstm_units must be >= 1, not -5
    """
    hints = _field_types(type(config))
    for f in dataclasses.fields(config):
        setattr(config, f.name, checked_value(f, hints[f.name], getattr(config, f.name), source))
    return config


def check_settings(settings, source):
    """Check the values of ``settings`` (field name -> value, of either config) as
    :func:`check_fields` does, without building a config: what a call or a command line passes
    on its own (a tagging batch size). Returns the values, ints of float fields made floats."""
    hints = dict(_field_types(ModelConfig), **_field_types(TrainingConfig))
    fields = {f.name: f for cls in (ModelConfig, TrainingConfig) for f in dataclasses.fields(cls)}
    split_settings(settings, source)  # an unknown name is one line
    return {name: checked_value(fields[name], hints[name], value, source)
            for name, value in settings.items()}


def checked_value(f, hint, value, source):
    """``value`` of the field ``f`` (annotation ``hint``) if it is valid, else a one-line
    :class:`ConfigurationError` naming ``source`` and the field."""
    if value is None and f.default is None:
        return value
    expected = _base_type(hint)
    meta = f.metadata
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ConfigurationError(f"{source}: {f.name} must be {_kind(expected)}, not {value!r}")
    if expected is float and not math.isfinite(value):
        raise ConfigurationError(f"{source}: {f.name} must be a finite number, not {value!r}")
    if expected is list and not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                    for v in value):
        raise ConfigurationError(f"{source}: {f.name} must be a list of indices, not {value!r}")
    if meta.get("min") is not None and value < meta["min"]:
        raise ConfigurationError(f"{source}: {f.name} must be >= {meta['min']}, not {value!r}")
    if meta.get("max") is not None and value > meta["max"]:
        raise ConfigurationError(f"{source}: {f.name} must be <= {meta['max']}, not {value!r}")
    if meta.get("choices") and value not in meta["choices"]:
        raise ConfigurationError(f"{source}: {f.name} must be one of "
                                 f"{', '.join(meta['choices'])}, not {value!r}")
    if meta.get("name"):
        check_name(value, f"{source}: {f.name}")
    return value


def check_name(value, what):
    """``value`` if it can name a folder inside another (one path component), else a one-line
    :class:`ConfigurationError` naming ``what``.

    >>> check_name("date-BidLSTM_CRF", "model name")
    'date-BidLSTM_CRF'
    >>> check_name("../escaped", "model name")
    Traceback (most recent call last):
    ...
    delft.utilities.errors.ConfigurationError: model name must be one folder name (no /, \\, .. or NUL), not '../escaped'
    """
    if not value or value in (".", "..") or any(c in value for c in "/\\\0"):
        raise ConfigurationError(f"{what} must be one folder name (no /, \\, .. or NUL), not "
                                 f"{value!r}")
    return value


def _kind(expected):
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
            list: "a list"}.get(expected, expected.__name__)


def cli_fields(*config_classes):
    """The fields of ``config_classes`` that are command-line options, in declaration order."""
    return [f for cls in config_classes for f in dataclasses.fields(cls) if f.metadata["cli"]]


def add_config_options(parser, *config_classes, shown=None, shown_for=None):
    """Add one option per config field: the flag is the field; its default is None (not given),
    so that the presets can apply before the field's own (:func:`config_values`).

    ``shown``: the values a run takes where they are not the fields' defaults (an application's
    presets), named ``shown_for`` (the model) in the help."""
    hints = {}
    for cls in config_classes:
        hints.update(_field_types(cls))
    shown = shown or {}
    for f in cli_fields(*config_classes):
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        value = shown.get(f.name, _default_of(f))
        help_text = f"{f.metadata['help']} (default: {value}" + \
            (f" for {shown_for})" if shown_for and f.name in shown else ")")
        kind = _base_type(hints[f.name])
        allowed = f.metadata["choices"]
        if kind is bool:
            parser.add_argument(flag, dest=f.name, nargs="?", const=True, default=None,
                                type=t_or_f, metavar="true|false", help=help_text)
            parser.add_argument("--no-" + flag[2:], dest=f.name, action="store_false",
                                help=argparse.SUPPRESS)
        elif kind is list:
            parser.add_argument(flag, dest=f.name, type=parse_number_ranges, default=None,
                                metavar="INDICES", help=help_text)
        else:
            parser.add_argument(flag, dest=f.name, type=kind, default=None, choices=allowed,
                                help=help_text)
    return parser


def _default_of(f):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def config_values(args, config_class, defaults=None):
    """Field values of ``config_class`` from parsed ``args``: the option when given, else
    ``defaults[name]`` (the presets), else nothing (the field's own default applies)."""
    values = {}
    for f in cli_fields(config_class):
        given = getattr(args, f.name, None)
        if given is not None:
            values[f.name] = given
        elif defaults and f.name in defaults:
            values[f.name] = defaults[f.name]
    return values
