"""The one source of settings: what a model is (saved as config.json) and how it is trained.

Each field carries its help, its command-line flag and its allowed range, as Hugging Face's
``HfArgumentParser`` dataclasses do: the CLIs generate their options from these fields
(:func:`add_config_options`), ``Sequence`` fills them from its DeLFT-named arguments, and
:meth:`ModelConfig.load` checks a saved ``config.json`` against them.
"""
import dataclasses
from dataclasses import dataclass
from typing import List, Optional

from delft.training.batching import LENGTH_GROUPS, POOL_BATCHES
# the settings machinery, shared with text classification (imported from here before)
from delft.utilities.settings import (SEED_LIMIT, SavedConfig, TrainingRunSettings,  # noqa: F401
                                      add_config_options, check_fields, check_name, check_values,
                                      checked_value, cli_fields, config_values, default_of,
                                      field_types, option, settings_of_each)

COMPUTE_DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")
LR_SCHEDULES = ("plateau", "exponential")


@dataclass
class ModelConfig(SavedConfig):
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

    def validated(self, source="config"):
        return check_fields(self, source)


@dataclass
class TrainingConfig(TrainingRunSettings):
    """How a model is trained; not needed to tag, so not saved with the model."""

    optimizer: str = option("adam", "accepted for DeLFT scripts: Adam (AdamW for transformers)",
                            cli=False)
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
                return default_of(f)
    raise KeyError(f"no config field {name!r}")


def split_settings(settings, source="settings"):
    """``(ModelConfig fields, TrainingConfig fields)`` of ``settings`` (field name -> value); a
    name that is neither is a one-line ``TypeError`` naming ``source`` and the known names.

    >>> split_settings({"batch_size": 8, "max_epoch": 3})
    ({'batch_size': 8}, {'max_epoch': 3})
    """
    return settings_of_each(settings, (ModelConfig, TrainingConfig), source)


def check_settings(settings, source):
    """Check the values of ``settings`` (field name -> value, of either config) as
    :func:`check_fields` does, without building a config: what a call or a command line passes
    on its own (a tagging batch size). Returns the values, ints of float fields made floats."""
    return check_values(settings, (ModelConfig, TrainingConfig), source)
