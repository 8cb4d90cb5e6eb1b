"""A text classifier's settings: what the model is (saved as ``config.json``) and how it is trained.

The fields carry their help, flag and range (:mod:`delft.utilities.settings`, shared with the
sequence labeller): ``licenseClassifier.py`` and ``citationClassifier.py`` generate their options
from them, ``Classifier`` fills them from DeLFT's argument names, and :meth:`ModelConfig.load`
checks a saved ``config.json`` against them (DeLFT 0.4.6's and 1.2.0's keys load too: the dead
ones, such as ``char_embedding_size``, are ignored).
"""
from dataclasses import dataclass
from typing import List, Optional

from delft.utilities.errors import ConfigurationError
from delft.utilities.settings import (TRANSFORMER_SCHEDULES, SavedConfig, TrainingRunSettings,
                                      check_fields, option, settings_of_each)

LR_SCHEDULES = ("none", "plateau", "exponential")
# what DeLFT 1.2.0 learns for a word when no pre-trained vectors are given
LEARNED_EMBEDDING_SIZE = 300


@dataclass
class ModelConfig(SavedConfig):
    """Everything needed to rebuild a trained classifier; written to ``config.json``."""

    model_name: str = option("classifier", "the model's name, the folder it is saved in",
                             cli=False, name=True)
    architecture: str = option(
        "gru", "architecture: gru, gru_simple, gru_lstm, lstm, bidLstm_simple, cnn, cnn2, cnn3, "
               "lstm_cnn, dpcnn, bert")
    embeddings_name: Optional[str] = option(
        None, "pre-trained word vectors: a name of the resource registry, or a file (default: "
              "word embeddings learned from the training texts)", flag="--embedding")
    word_embedding_size: int = option(LEARNED_EMBEDDING_SIZE, "width of the word embeddings",
                                      minimum=1, cli=False)
    vocab_size: Optional[int] = option(
        None, "learned embeddings: words of the vocabulary, <PAD> and <UNK> included", minimum=2,
        cli=False)
    maxlen: int = option(300, "tokens of a text the model reads (its last ones, as DeLFT)",
                         minimum=1)
    recurrent_units: int = option(64, "units of each recurrent layer, per direction", minimum=1)
    dense_size: int = option(32, "width of the dense layer before the output", minimum=1)
    dropout: float = option(0.3, "dropout between the layers", minimum=0.0, maximum=0.99)
    list_classes: List[str] = option([], "the classes, in the order of the outputs", cli=False)
    batch_size: int = option(256, "global batch size (training and prediction)", minimum=1)
    transformer_name: Optional[str] = option(
        None, "bert: Hugging Face checkpoint (a local directory, a hub name from its cache "
              "offline, or a registered name)", flag="--transformer")
    fold_number: int = option(1, "how many models were trained on folds (their predictions "
                                 "are combined)", minimum=1, cli=False)
    delft_version: str = option("", "the delft version that saved the model", cli=False)

    def validated(self, source="config"):
        check_fields(self, source)
        if not all(isinstance(c, str) and c for c in self.list_classes) or \
                len(set(self.list_classes)) != len(self.list_classes):
            raise ConfigurationError(f"{source}: list_classes must be distinct non-empty "
                                     f"strings, not {self.list_classes!r}")
        return self


@dataclass
class TrainingConfig(TrainingRunSettings):
    """How a classifier is trained; not needed to classify, so not saved with the model."""

    # DeLFT 1.2.0's classifiers fine-tune bert at a constant rate; warm-up then decay scored
    # lower on each of GROBID's three classification tasks (doc/classification.md, "Choices")
    transformer_schedule: str = option(
        "constant", "bert's learning rate: constant (DeLFT 1.2.0), or linear warm-up "
                    "(warmup_ratio) then linear decay to 0", choices=TRANSFORMER_SCHEDULES)
    lr_schedule: str = option("none", "reduce the learning rate on a validation plateau, every "
                                      "epoch, or never (DeLFT)", choices=LR_SCHEDULES)
    lr_decay: float = option(0.9, "factor of each learning-rate reduction", minimum=0.0,
                             maximum=1.0)
    clip_gradients: Optional[float] = option(
        None, "clip gradients to this global norm, 0 for none (default: 1 for the GRU "
              "architectures, as DeLFT's RMSprop, 5 for the others)", minimum=0.0)
    max_epoch: int = option(60, "most epochs to train", minimum=1)
    fold_number: int = option(1, "train this many models on folds (n-fold)", flag="--fold-count",
                              minimum=1)
    early_stop: bool = option(True, "stop when the validation loss (or ROC-AUC) stops improving "
                                    "(true|false)")
    patience: int = option(5, "epochs without a better validation score before stopping",
                           minimum=1)
    use_roc_auc: bool = option(
        False, "early stopping and the kept epoch by the validation ROC-AUC (DeLFT's apps) "
               "instead of the validation loss (true|false)")
    pool_batches: int = option(1, "accepted for the shared training loop: batches are drawn at "
                                  "random", minimum=1, maximum=1, cli=False)
    class_weights: Optional[dict] = option(
        None, "class index -> weight of the examples of that class in the loss", cli=False)
    def validated(self, source="training config"):
        check_fields(self, source)
        weights = self.class_weights
        if weights is not None and not (isinstance(weights, dict) and all(
                isinstance(k, int) and not isinstance(k, bool) and k >= 0
                and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                for k, v in weights.items())):
            raise ConfigurationError(f"{source}: class_weights must map class indices to "
                                     f"weights >= 0, not {weights!r}")
        return self


def split_settings(settings, source="settings"):
    """``(ModelConfig fields, TrainingConfig fields)`` of ``settings``; an unknown name is a
    one-line ``TypeError`` naming ``source`` and the known names.

    >>> split_settings({"maxlen": 150, "max_epoch": 3})
    ({'maxlen': 150}, {'max_epoch': 3})
    """
    return settings_of_each(settings, (ModelConfig, TrainingConfig), source)
