"""The defaults of each application's models, as data: the one table every CLI applies.

A setting not in these tables takes its config field's default (``config.py``: ``ModelConfig``,
``TrainingConfig``), which is also what ``Sequence(...)`` takes for an argument not given. A CLI's
run resolves, for its model and architecture family: the option given, else the model's preset,
else the application's common preset, else the field's default (:func:`preset`).

Per-model values are DeLFT 1.2.0's applications' (batch size, max sequence length, max epoch).
Recurrent dropout is 0 for the RNN models of every application: DeLFT 1.2.0 trains without it in
effect (a single-layer torch LSTM ignores it) and scores better on date than DeLFT 0.4.6 with a
true recurrent dropout (benchmarks/results/history.md, "Recipe choices"), and Keras' fused GPU
LSTM kernel needs it at 0 (doc/usage.md, "Defaults").

>>> preset("grobid", "date", "rnn")["batch_size"], preset("ner", "any", "transformer")["max_epoch"]
(60, 15)
"""
from typing import Dict

from delft.sequenceLabelling.transformers.checkpoint import ENCODER_LIMIT

FAMILIES = ("rnn", "transformer")

# application -> model -> family -> config field values. A model name ending in "*" matches every
# model that starts with it; "" is every other model of the application, and what a model's entry
# does not give for a family.
MODEL_PRESETS: Dict[str, Dict[str, Dict[str, dict]]] = {
    "grobid": {
        "": {"rnn": dict(batch_size=20, max_sequence_length=3000),
             "transformer": dict(batch_size=20, max_sequence_length=200)},
        "date": {"rnn": dict(batch_size=60, max_sequence_length=50),
                 "transformer": dict(batch_size=80, max_sequence_length=30)},
        "citation": {"rnn": dict(batch_size=30, max_sequence_length=500),
                     "transformer": dict(batch_size=20, max_sequence_length=200)},
        "header": {"rnn": dict(batch_size=9, max_sequence_length=3500, max_epoch=80),
                   "transformer": dict(batch_size=6, max_sequence_length=512)},
        "affiliation-address": {"rnn": dict(batch_size=20, max_sequence_length=600),
                                "transformer": dict(batch_size=20, max_sequence_length=200)},
        "software*": {"rnn": dict(batch_size=20, max_sequence_length=1500),
                      "transformer": dict(batch_size=8, max_sequence_length=512, max_epoch=30)},
        "reference-segmenter": {"rnn": dict(batch_size=5, max_sequence_length=3000)},
        "funding-acknowledgement*": {"transformer": dict(batch_size=8, max_sequence_length=512)},
        "funding-acknowledgement": {"rnn": dict(batch_size=30, max_sequence_length=800),
                                    "transformer": dict(batch_size=8, max_sequence_length=512)},
        "patent-citation": {"rnn": dict(batch_size=40, max_sequence_length=1000),
                            "transformer": dict(batch_size=8, max_sequence_length=512)},
        "figure": {"rnn": dict(batch_size=3, max_sequence_length=1000)},
        "table": {"rnn": dict(batch_size=3, max_sequence_length=3000)},
    },
    "ner": {"": {"rnn": dict(batch_size=32, max_sequence_length=300, max_epoch=50),
                 "transformer": dict(batch_size=32, max_sequence_length=150, max_epoch=15)}},
    "insult": {"": {"rnn": dict(batch_size=20, max_sequence_length=300, max_epoch=50),
                    "transformer": dict(batch_size=10, max_sequence_length=300, max_epoch=3)}},
}

# application -> family -> values every model of it takes (a model's own preset wins)
COMMON_PRESETS: Dict[str, Dict[str, dict]] = {
    "grobid": {"rnn": dict(max_epoch=60, patience=5, recurrent_dropout=0.0),
               "transformer": dict(max_epoch=60, patience=5)},
    "ner": {"rnn": dict(patience=5, recurrent_dropout=0.0), "transformer": dict(patience=5)},
    "insult": {"rnn": dict(patience=5, recurrent_dropout=0.0), "transformer": dict(patience=5)},
}

# the settings the defaults table of doc/usage.md shows, in its column order, and the family
# each is only for
TABLE_FIELDS = ("batch_size", "max_sequence_length", "max_epoch", "patience",
                "recurrent_dropout")
ONLY_FOR = {"recurrent_dropout": "rnn"}


def model_preset_key(application: str, model: str) -> str:
    """The key of ``MODEL_PRESETS[application]`` whose values ``model`` takes.

    >>> model_preset_key("grobid", "software-mention"), model_preset_key("grobid", "name-header")
    ('software*', '')
    """
    table = MODEL_PRESETS[application]
    if model in table:
        return model
    return next((key for key in table if key.endswith("*") and model.startswith(key[:-1])), "")


def preset(application: str, model: str, family: str) -> dict:
    """The config field values ``application`` gives ``model`` for the architecture ``family``
    (``"rnn"`` or ``"transformer"``); a transformer's ``max_sequence_length`` is capped at the
    encoders' limit (512 subtokens)."""
    if application not in MODEL_PRESETS:
        raise ValueError(f"no presets for {application!r}: {', '.join(MODEL_PRESETS)}")
    table = MODEL_PRESETS[application]
    values = dict(COMMON_PRESETS[application].get(family, {}))
    values.update(table[""].get(family, {}))
    values.update(table[model_preset_key(application, model)].get(family, {}))
    if family == "transformer" and "max_sequence_length" in values:
        values["max_sequence_length"] = min(values["max_sequence_length"], ENCODER_LIMIT)
    return values


def table_rows():
    """``(application, model, family, {field: value})`` of every preset, the fields of
    :data:`TABLE_FIELDS` that apply to the family resolved (a preset's, else the config field's
    default)."""
    from delft.sequenceLabelling.config import field_default

    for application, models in MODEL_PRESETS.items():
        for model in models:
            for family in FAMILIES:
                values = preset(application, model, family)
                yield application, model, family, {
                    name: values.get(name, field_default(name)) for name in TABLE_FIELDS
                    if ONLY_FOR.get(name, family) == family}


def markdown_table() -> str:
    """The defaults table of doc/usage.md (a test checks that the document holds it)."""
    lines = ["| application | model | family | " + " | ".join(TABLE_FIELDS) + " |",
             "|---|---|---|" + "---|" * len(TABLE_FIELDS)]
    for application, model, family, values in table_rows():
        lines.append(f"| {application} | {model or '(any other)'} | {family} | " +
                     " | ".join(str(values.get(name, "-")) for name in TABLE_FIELDS) + " |")
    return "\n".join(lines) + "\n"
