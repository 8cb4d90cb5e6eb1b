"""Settings as dataclass fields that carry their help, flag, range and choices, as Hugging Face's
``HfArgumentParser`` dataclasses do: one place checks every value (type, range, NaN, infinity,
a folder name) and turns fields into command-line options, for every toolkit's configs
(:mod:`delft.sequenceLabelling.config`, :mod:`delft.textClassification.config`).
"""
import argparse
import dataclasses
import json
import math
import typing
from dataclasses import dataclass, field
from typing import Optional

from delft.utilities.Utilities import parse_number_ranges, t_or_f
from delft.utilities.errors import ConfigurationError

SEED_LIMIT = 2 ** 32 - 1  # the seeds numpy, scikit-learn and Keras all take
# a save of BERT_CRF MiniLM's 22M parameters and their Adam moments takes ~0.3 s, a quarter of
# its 1.3 s epoch on date (doc/distributed.md): runs of minutes save a few times, not every epoch
CHECKPOINT_INTERVAL = 60.0
# a transformer's learning rate as it is fine-tuned: warm-up then linear decay to 0, or constant
TRANSFORMER_SCHEDULES = ("linear", "constant")


def option(default, help, flag=None, minimum=None, maximum=None, choices=None, cli=True,
           name=False):
    """A config field with its help, its flag (default ``--field-name``), range and choices;
    ``name``: the value names a folder (one path component: no separator, not ``..``)."""
    metadata = {"help": help, "flag": flag, "min": minimum, "max": maximum, "choices": choices,
                "cli": cli, "name": name}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def field_types(config_class):
    """Field name -> annotation of the dataclass ``config_class``."""
    return typing.get_type_hints(config_class)


def _base_type(annotation):
    """``int`` for ``Optional[int]``, ``list`` for ``List[int]``..."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Union and len(args) == 1:
        return _base_type(args[0])
    return typing.get_origin(annotation) or annotation


def _item_type(annotation):
    """``int`` for ``Optional[List[int]]``, ``str`` for ``List[str]``..."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Union and len(args) == 1:
        return _item_type(args[0])
    return args[0] if typing.get_origin(annotation) is list and args else None


def check_fields(config, source):
    """Raise a one-line :class:`ConfigurationError` naming the first field of the wrong type, out
    of its range, not a finite number, or a name that is not one path component; returns
    ``config``.

    >>> @dataclasses.dataclass
    ... class Example:
    ...     units: int = option(100, "units", minimum=1)
    >>> check_fields(Example(units=-5), "config.json")
    Traceback (most recent call last):
    ...
    delft.utilities.errors.ConfigurationError: config.json: units must be >= 1, not -5
    """
    hints = field_types(type(config))
    for f in dataclasses.fields(config):
        setattr(config, f.name, checked_value(f, hints[f.name], getattr(config, f.name), source))
    return config


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
    if expected is list and _item_type(hint) is int and not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise ConfigurationError(f"{source}: {f.name} must be a list of indices, not {value!r}")
    if expected is list and _item_type(hint) is str and not all(isinstance(v, str)
                                                                for v in value):
        raise ConfigurationError(f"{source}: {f.name} must be a list of strings, not {value!r}")
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
        hints.update(field_types(cls))
    shown = shown or {}
    for f in cli_fields(*config_classes):
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        value = shown.get(f.name, default_of(f))
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


def default_of(f):
    """The default of the dataclass field ``f``."""
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def config_values(args, config_class, defaults=None):
    """Field values of ``config_class`` from parsed ``args``: the option when given, else
    ``defaults[name]`` (the presets, which may also set fields that are not options), else
    nothing (the field's own default applies)."""
    values = {}
    for f in dataclasses.fields(config_class):
        given = getattr(args, f.name, None) if f.metadata["cli"] else None
        if given is not None:
            values[f.name] = given
        elif defaults and f.name in defaults:
            values[f.name] = defaults[f.name]
    return values


def settings_of_each(settings, config_classes, source="settings"):
    """``settings`` (field name -> value) split into one dict per class of ``config_classes``, by
    the class that has the field; a name that none has is a one-line ``TypeError`` naming
    ``source`` and the known names."""
    names = [set(field_types(cls)) for cls in config_classes]
    known = set().union(*names)
    unknown = sorted(set(settings) - known)
    if unknown:
        raise TypeError(f"{source}: unknown setting {unknown[0]!r} (settings: "
                        f"{', '.join(sorted(known))})")
    return tuple({k: v for k, v in settings.items() if k in fields} for fields in names)


def check_values(settings, config_classes, source):
    """Check the values of ``settings`` (field name -> value, of any of ``config_classes``) as
    :func:`check_fields` does, without building a config: what a call or a command line passes
    on its own. Returns the values, ints of float fields made floats; an unknown name is one
    line."""
    settings_of_each(settings, config_classes, source)
    hints, fields = {}, {}
    for cls in config_classes:
        hints.update(field_types(cls))
        fields.update({f.name: f for f in dataclasses.fields(cls)})
    return {name: checked_value(fields[name], hints[name], value, source)
            for name, value in settings.items()}


class SavedConfig:
    """``save`` and ``load`` of a model's config dataclass as ``config.json``; the class gives
    ``validated(source)``."""

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


@dataclass
class TrainingRunSettings:
    """The fields every toolkit's training config has: the shared training loop's learning rate,
    seed and, for transformers, AdamW's weight decay and warm-up (delft.training.loop); how a run
    reports its progress (delft.utilities.tracking) and keeps its checkpoints
    (delft.training.checkpoints)."""

    learning_rate: Optional[float] = option(
        None, "initial learning rate (default 1e-3, or 2e-5 for a transformer)", minimum=0.0)
    seed: Optional[int] = option(None, "random seed (data order, splits, initial weights)",
                                 minimum=0, maximum=SEED_LIMIT)
    weight_decay: float = option(0.01, "AdamW weight decay (transformers)", minimum=0.0)
    warmup_ratio: float = option(0.1, "share of the steps of linear warm-up (transformers)",
                                 minimum=0.0, maximum=1.0)
    transformer_schedule: str = option(
        "linear", "a transformer's learning rate: linear warm-up (warmup_ratio) then linear "
                  "decay to 0, or constant (DeLFT 1.2.0's classifiers)",
        choices=TRANSFORMER_SCHEDULES)
    tensorboard: Optional[str] = option(
        None, "write TensorBoard scalars (each epoch) and the per-label validation scores (at "
              "the end) under this folder")
    report_to_wandb: bool = option(
        False, "report to Weights & Biases as DeLFT does (pip install wandb; WANDB_API_KEY, or "
               "WANDB_MODE=offline)", flag="--wandb")
    wandb_project: Optional[str] = option(
        None, "Weights & Biases project (default: WANDB_PROJECT, else wandb's own)")
    wandb_run_id: Optional[str] = option(None, "Weights & Biases run to continue")
    resume: bool = option(
        True, "resume an interrupted training from its last checkpoint (<output>/<model>"
              ".checkpoints/); --no-resume starts afresh")
    checkpoint_interval: float = option(
        CHECKPOINT_INTERVAL, "seconds of training between two epoch-end checkpoints (0: at every "
                             "epoch end); a kill loses at most this and the epoch in progress",
        minimum=0.0)

    def resolved_learning_rate(self, uses_transformer):
        """``learning_rate``, or its default for the model (2e-5 with a transformer, else 1e-3)."""
        if self.learning_rate is not None:
            return self.learning_rate
        return 2e-5 if uses_transformer else 1e-3
