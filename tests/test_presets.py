"""One source of defaults: every CLI's ``--help``, the configuration a run resolves (nothing
trained) and doc/usage.md's table give each preset's values; ``Sequence`` restates none."""
import dataclasses
import importlib
import inspect
import re

import pytest

from conftest import REPO_ROOT
from delft.applications import flow
from delft.sequenceLabelling import presets

APPLICATIONS = {"grobid": "grobidTagger", "ner": "nerTagger", "insult": "insultTagger"}
ARCHITECTURES = {"rnn": "BidLSTM_CRF", "transformer": "BERT_CRF"}


def application(name):
    return importlib.import_module(f"delft.applications.{APPLICATIONS[name]}").APPLICATION


def model_argument(name, key):
    """A model name a run of application ``name`` gives to reach the preset ``key``."""
    if name != "grobid":
        return []
    return [{"": "name-header", "software*": "software-mention",
             "funding-acknowledgement*": "funding-acknowledgement-x"}.get(key, key)]


def cases():
    for name, models in presets.MODEL_PRESETS.items():
        for key in models:
            for family in presets.FAMILIES:
                yield name, key, family


@pytest.fixture(scope="module")
def transformer(tmp_path_factory):
    from tiny_transformers import write_tiny_checkpoint

    return write_tiny_checkpoint("bert", str(tmp_path_factory.mktemp("tiny_bert")))


def shown_default(help_text, flag):
    """The default ``--help`` shows for ``flag`` (in its own entry of the options)."""
    entries = re.split(r"\n  (?=-)", help_text.split("options:", 1)[1])
    entry = " ".join(next(e for e in entries if e.startswith(flag + " ")).split())
    return re.search(r"\(default: ([^ )]+)", entry).group(1)


@pytest.mark.parametrize("name,key,family", list(cases()))
def test_help_resolved_config_and_doc_table_agree(name, key, family, transformer):
    app = application(name)
    argv = model_argument(name, key) + ["train", "--architecture", ARCHITECTURES[family]]
    if family == "transformer":
        argv += ["--transformer", transformer]
    help_text = flow.parser(app, argv).format_help()
    model_config, training_config = flow.resolved_configs(app, argv)
    rows = {(row[0], row[1], row[2]): row[3] for row in presets.table_rows()}
    for field, value in rows[name, key, family].items():
        config = model_config if hasattr(model_config, field) else training_config
        assert getattr(config, field) == value, (field, getattr(config, field), value)
        assert shown_default(help_text, "--" + field.replace("_", "-")) == str(value), field


def test_the_doc_holds_the_table():
    usage = (REPO_ROOT / "doc" / "usage.md").read_text(encoding="utf-8")
    assert presets.markdown_table() in usage


def test_an_option_given_wins_over_the_presets():
    app = application("grobid")
    model_config, training_config = flow.resolved_configs(
        app, ["date", "train", "--batch-size", "7", "--early-stop", "false",
              "--recurrent-dropout", "0.3"])
    assert (model_config.batch_size, model_config.recurrent_dropout) == (7, 0.3)
    assert training_config.early_stop is False
    assert training_config.max_epoch == 60  # the preset, not given


def test_sequence_restates_no_default():
    """``Sequence`` takes every config field by name and restates none of their defaults: what
    is not given is the field's default."""
    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.config import ModelConfig, TrainingConfig, cli_fields

    parameters = inspect.signature(Sequence.__init__).parameters
    assert all(p.default is None for n, p in parameters.items()
               if p.kind is p.POSITIONAL_OR_KEYWORD and n != "self")
    model = Sequence("x")
    assert dataclasses.replace(model.model_config, model_name="model") == ModelConfig()
    assert model.training_config == TrainingConfig()
    every = {f.name: f.default for f in cli_fields(ModelConfig, TrainingConfig)
             if f.default is not None and f.default is not dataclasses.MISSING}
    assert Sequence("x", **every).model_config.batch_size == every["batch_size"]


def test_delft_constructor_arguments_are_accepted():
    """DeLFT 0.4.6's and 1.2.0's ``Sequence`` arguments, as GROBID and scripts pass them."""
    from delft.sequenceLabelling import Sequence

    model = Sequence("date", "BidLSTM_CRF", None, char_emb_size=25, max_char_length=30,
                     char_lstm_units=25, word_lstm_units=100, max_sequence_length=300,
                     dropout=0.5, recurrent_dropout=0.5, batch_size=20, optimizer="adam",
                     learning_rate=None, lr_decay=0.9, clip_gradients=5.0, max_epoch=100,
                     early_stop=True, patience=5, max_checkpoints_to_keep=0, use_ELMo=False,
                     log_dir=None, fold_number=1, multiprocessing=True, features_indices=None,
                     transformer_name=None, model_type="BidLSTM_CRF_FEATURES")
    assert model.model_config.architecture == "BidLSTM_CRF_FEATURES"
    assert model.training_config.max_epoch == 100
    with pytest.raises(TypeError, match="unknown setting 'epochs'"):
        Sequence("date", epochs=3)
