"""``Classifier``: DeLFT's text classification API — train, train_nfold, eval, predict, save, load.

Every model is built in the scope of the process-wide strategy (:mod:`delft.utilities.devices`)
and trained by the shared epoch loop; this class wires the stages together: read (caller) ->
vectorise (preprocess) -> batch (the shared feeder) -> model -> probabilities (predictor) ->
scores (evaluation) / JSON.
"""
import datetime
import json
import logging
import os
import time

import numpy as np

from delft.textClassification.config import ModelConfig, TrainingConfig, split_settings
from delft.textClassification.model_dir import (CONFIG_FILE, DEFAULT_MODELS_DIR,
                                                PREPROCESSOR_FILE, read_classifier_folder,
                                                weights_file)
from delft.textClassification.preprocess import TextPreprocessor
from delft.training.saved_models import load_whole, save_folder, write_history
from delft.utilities import devices, verbosity
from delft.utilities.errors import ConfigurationError, ModelLoadError
from delft.utilities.tracking import started_trackers

logger = logging.getLogger(__name__)
report_logger = logging.getLogger("delft.report")  # the CLIs print the reports and mute it

# DeLFT's Classifier arguments with nothing to act on here (DeLFT 0.4.6 and 1.2.0 store most of
# them and never read them: its models take their own dropout, optimizer and units)
IGNORED_ARGUMENTS = ("char_emb_size", "recurrent_dropout", "use_char_feature", "optimizer",
                     "lr_decay_rate", "log_dir", "multiprocessing", "num_workers",
                     "nb_workers", "device", "short_model_name", "resource_registry_path")
VALIDATION_SHARE = 0.1  # what train carves off for early stopping when no validation set is given


class Classifier:
    """A text classifier by DeLFT's name: ``Classifier('copyright_gru')``.

    ``model_name``, ``architecture``, ``embeddings_name`` and ``list_classes`` may be given by
    position, every other setting by its name, DeLFT's, which is the config field's
    (``delft/textClassification/config.py``). DeLFT's arguments that its models never read
    (``char_emb_size``, ``recurrent_dropout``, ``optimizer``...) are accepted and have no
    effect. Early stopping watches the validation loss unless ``use_roc_auc=True`` (DeLFT's
    ROC-AUC). Without ``embeddings_name`` (and not ``bert``), word embeddings are learned
    from the training texts, as DeLFT 1.2.0 does.

    >>> model = Classifier("copyright_gru", list_classes=["publisher", "authors"], max_epoch=2)
    >>> model.model_config.architecture, model.training_config.max_epoch
    ('gru', 2)
    """

    def __init__(self, model_name=None, architecture=None, embeddings_name=None,
                 list_classes=None, **settings):
        from delft.textClassification import models
        from delft.textClassification.presets import ARCHITECTURE_PRESETS

        if isinstance(architecture, str) and architecture.startswith("architecture="):
            # GROBID's DeLFTClassifierModel passes "architecture=gru" by position
            architecture = architecture[len("architecture="):]
        settings = dict(settings, architecture=architecture, embeddings_name=embeddings_name,
                        list_classes=list(list_classes) if list_classes else None)
        for name in IGNORED_ARGUMENTS:
            settings.pop(name, None)
        settings = {name: value for name, value in settings.items() if value is not None}
        name_of_architecture = settings.get("architecture", "gru")
        models.architecture(name_of_architecture)
        settings = dict(ARCHITECTURE_PRESETS.get(name_of_architecture, {}), **settings)
        model_fields, training_fields = split_settings(settings, "Classifier")
        model_fields.setdefault("model_name", model_name or name_of_architecture)
        self.model_config = ModelConfig(**model_fields).validated("Classifier")
        self.training_config = TrainingConfig(**training_fields).validated("Classifier")
        self.p = None
        self.model = None
        self.models = []
        self.history = []
        self._strategy = None
        self._predictors = {}
        self._checkpoint_dir = None

    @property
    def config(self):
        """The model's config (DeLFT's ``model_config``; GROBID sets ``config.batch_size``)."""
        return self.model_config

    @property
    def architecture(self):
        from delft.textClassification import models

        return models.architecture(self.model_config.architecture)

    # -- building -----------------------------------------------------------------------------
    def _inputs(self):
        if self.architecture.uses_transformer:
            return "transformer"
        return "word_vectors" if self.model_config.embeddings_name else "word_ids"

    def _build(self, strategy, preprocessor, transformer_dir=None, pretrained=True):
        from delft.textClassification.models import build_classifier

        with strategy.scope():
            model = build_classifier(self.model_config, preprocessor.inputs,
                                     transformer_dir=transformer_dir, pretrained=pretrained)
            model(dummy_batch(preprocessor.batch_signature(False)))
        return model

    def _use_strategy(self, multi_gpu):
        strategy = devices.get_strategy(multi_gpu)
        if self.models and strategy is not self._strategy:
            # the variables must live under the scope that runs them: rebuild there, copy weights
            rebuilt = []
            for model in self.models:
                copy = self._build(strategy, self.p, self._transformer_dir, pretrained=False)
                copy.set_weights(model.get_weights())
                rebuilt.append(copy)
            self.models, self.model = rebuilt, rebuilt[0]
            self._predictors = {}
        self._strategy = strategy
        return strategy

    def _new_preprocessor(self, texts):
        config = self.model_config
        self.p = TextPreprocessor(config.maxlen, config.list_classes, self._inputs())
        self._transformer_dir = None
        if self.p.inputs == "word_ids":
            self.p.fit(texts)
            config.vocab_size = len(self.p.vocabulary)
        elif self.p.inputs == "word_vectors":
            self._open_embeddings()
        else:
            self._open_transformer(None)

    def _open_embeddings(self, loading_from=None):
        from delft.utilities.Embeddings import embeddings_for_model

        self.p.embeddings = embeddings_for_model(self.model_config.embeddings_name, loading_from,
                                                 self.model_config.word_embedding_size)
        self.model_config.word_embedding_size = self.p.embeddings.embed_size

    def _open_transformer(self, folder):
        """The encoder's tokenizer and config: the checkpoint's for a training, the saved copy of
        ``folder`` for a model loaded."""
        from delft.sequenceLabelling.transformers.checkpoint import (
            check_checkpoint, load_tokenizer, model_resources_dir, read_encoder_config,
            resolve_transformer)

        if folder is None:
            if not self.model_config.transformer_name:
                raise ConfigurationError("bert needs transformer_name (--transformer)")
            path = resolve_transformer(self.model_config.transformer_name)
            encoder_config = check_checkpoint(path)
        else:
            path = model_resources_dir(folder)
            encoder_config = read_encoder_config(path)
        self._transformer_dir = path
        self._encoder_config = encoder_config
        self.p.tokenizer = load_tokenizer(path, encoder_config["model_type"],
                                          encoder_config.get("vocab_size"))

    # -- training -----------------------------------------------------------------------------
    def train(self, x_train, y_train, vocab_init=None, incremental=False, callbacks=None,
              x_valid=None, y_valid=None, multi_gpu=False, checkpoint_dir=None):
        """Train on texts ``x_train`` and their classes ``y_train`` (one-hot rows, as DeLFT, or
        class names). With ``early_stop`` (default) the epoch of lowest validation loss (with
        ``use_roc_auc``, of highest ROC-AUC) is kept:
        on ``(x_valid, y_valid)`` when given, else on 10% of the training texts (seeded by
        ``seed``). ``fold_number`` > 1 trains that many models (:meth:`train_nfold`).

        ``vocab_init`` is accepted for DeLFT's scripts and has no effect; ``incremental`` goes on
        from the loaded model's weights (its vocabulary kept). ``checkpoint_dir``: a checkpoint
        there at an epoch end once ``checkpoint_interval`` seconds have passed since the last
        (0: every epoch), resumed from when the same training runs again.
        """
        if callbacks:
            raise ConfigurationError("callbacks are not supported: the trainer logs each epoch "
                                     "and keeps the best weights itself")
        if self.training_config.fold_number > 1 and not incremental:
            return self.train_nfold(x_train, y_train, multi_gpu=multi_gpu)
        verbosity.show_work()
        from delft.textClassification.inputs import checked_texts, one_hot_rows

        x_train = checked_texts(x_train, "training")
        y_train = one_hot_rows(y_train, self.model_config.list_classes, len(x_train), "training")
        strategy = self._use_strategy(multi_gpu)
        seed = devices.common_seed(strategy, self.training_config.seed)
        if x_valid is None and self.training_config.early_stop:
            x_train, y_train, x_valid, y_valid = validation_split(x_train, y_train, seed)
        elif x_valid is not None:
            x_valid = checked_texts(x_valid, "validation")
            y_valid = one_hot_rows(y_valid, self.model_config.list_classes, len(x_valid),
                                   "validation")
        self._fit(x_train, y_train, x_valid, y_valid, strategy, seed, incremental, checkpoint_dir)
        self.models = [self.model]

    def _fit(self, x_train, y_train, x_valid, y_valid, strategy, seed, incremental,
             checkpoint_dir):
        from delft.textClassification.trainer import ClassifierTrainer
        from delft.training.checkpoints import claimed

        if seed is not None:
            import keras

            keras.utils.set_random_seed(seed)
        if not (incremental and self.model is not None):
            self._new_preprocessor(x_train)
            self.model = self._build(strategy, self.p, self._transformer_dir)
        self._predictors = {}
        train_corpus = self.p.encode(x_train)
        train_labels = self.p.label_rows(y_train, self.training_config.class_weights)
        valid_corpus = self.p.encode(x_valid) if x_valid is not None and len(x_valid) else None
        trainer = ClassifierTrainer(
            self.model, self.p, self.training_config, strategy, self.model_config.batch_size,
            self.model_config.architecture, self.architecture.uses_transformer,
            started_trackers(self.model_config, self.training_config, devices.is_chief(strategy)))
        start = time.perf_counter()
        with claimed(checkpoint_dir, strategy) as claim:
            self._checkpoint_dir = claim.directory if claim else None
            self.history = trainer.train(train_corpus, train_labels, valid_corpus,
                                         None if valid_corpus is None else y_valid, claim)
        logger.info("training runtime: %.1f s", time.perf_counter() - start)

    def train_nfold(self, x_train, y_train, vocab_init=None, incremental=False, callbacks=None,
                    multi_gpu=False):
        """Train ``fold_number`` models, fold k validating on the k-th part of the shuffled texts
        (every text is used); their predictions are combined by geometric mean, as DeLFT's."""
        from delft.textClassification.inputs import checked_texts, one_hot_rows

        verbosity.show_work()
        x_train = checked_texts(x_train, "training")
        y_train = one_hot_rows(y_train, self.model_config.list_classes, len(x_train), "training")
        folds = self.training_config.fold_number
        strategy = self._use_strategy(multi_gpu)
        seed = devices.common_seed(strategy, self.training_config.seed)
        parts = np.array_split(np.random.default_rng(seed).permutation(len(x_train)), folds)
        trained = []
        for k, held_out in enumerate(parts):
            kept = np.concatenate([p for i, p in enumerate(parts) if i != k])
            logger.info("---- fold %d/%d: %d train, %d validation", k + 1, folds, len(kept),
                        len(held_out))
            self._fit([x_train[i] for i in kept], y_train[kept], [x_train[i] for i in held_out],
                      y_train[held_out], strategy, seed, False, None)
            trained.append(self.model)
        self.models, self.model = trained, trained[0]

    # -- prediction ---------------------------------------------------------------------------
    def _predictor(self, model, strategy):
        from delft.textClassification.predictor import ClassPredictor

        if id(model) not in self._predictors:
            self._predictors[id(model)] = ClassPredictor(model, self.p, strategy)
        return self._predictors[id(model)]

    def _probabilities(self, texts, batch_size=None, multi_gpu=False):
        if self.model is None:
            raise ModelLoadError("no model: train or load one before predict")
        from delft.textClassification.inputs import checked_texts

        texts = checked_texts(texts, "texts")
        strategy = self._use_strategy(multi_gpu)
        corpus = self.p.encode(texts)
        size = batch_size or self.model_config.batch_size
        probabilities = [self._predictor(model, strategy).predict(corpus, size)
                         for model in self.models]
        if len(probabilities) == 1:
            return texts, probabilities[0]
        # DeLFT's combination of the folds: their geometric mean
        logs = np.mean([np.log(np.maximum(p, 1e-30)) for p in probabilities], axis=0)
        return texts, np.exp(logs).astype(np.float32)

    def predict(self, texts, output_format="json", use_main_thread_only=False, batch_size=None,
                multi_gpu=False):
        """The class probabilities of ``texts``: with ``output_format`` "json" DeLFT 0.4.6's
        document (``classifications``: each text with one score per class, what GROBID reads),
        any other value the array [texts, classes]. ``use_main_thread_only`` is accepted (every
        call runs in the caller's thread)."""
        from delft.training.prediction import serving_call

        with serving_call():
            texts, probabilities = self._probabilities(texts, batch_size, multi_gpu)
            if output_format != "json":
                return probabilities
            classes = self.model_config.list_classes
            return {"software": "DeLFT", "date": datetime.datetime.now().isoformat(),
                    "model": self.model_config.model_name,
                    "classifications": [dict({"text": text}, **{c: float(p) for c, p in
                                                                 zip(classes, row)})
                                        for text, row in zip(texts, probabilities)]}

    def eval(self, x_test, y_test, use_main_thread_only=False, multi_gpu=False):
        """Scores on ``(x_test, y_test)``: per-class precision, recall and F1 of the most probable
        class, their averages, accuracy and ROC-AUC — a dict whose ``str`` is the table, also
        logged (logger ``delft.report``)."""
        from delft.textClassification.evaluation import class_scores
        from delft.textClassification.inputs import one_hot_rows

        verbosity.show_work()
        texts, probabilities = self._probabilities(x_test, multi_gpu=multi_gpu)
        truth = one_hot_rows(y_test, self.model_config.list_classes, len(texts), "evaluation")
        scores = class_scores(truth, probabilities, self.model_config.list_classes)
        report_logger.info("evaluation on %d texts: accuracy %.4f, ROC-AUC %.4f\n%s", len(texts),
                           scores["accuracy"], scores["roc_auc"], scores)
        return scores

    # -- persistence --------------------------------------------------------------------------
    def save(self, dir_path=DEFAULT_MODELS_DIR):
        """Write ``dir_path/<model_name>/`` atomically: a crash never leaves a half-written
        model."""
        if self.model is None:
            raise ModelLoadError("no model to save: train or load one first")
        if self._delft0:
            raise ConfigurationError(f"{self.model_config.model_name}: a DeLFT 0.x classifier "
                                     "is read as it is, not saved again")
        target = save_folder(os.path.join(dir_path, self.model_config.model_name),
                             self._strategy or devices.get_strategy(False),
                             self._write_model_files, self._checkpoint_dir)
        self._checkpoint_dir = None
        return target

    _delft0 = False

    def _write_model_files(self, folder):
        from delft import __version__

        self.model_config.delft_version = __version__
        self.model_config.fold_number = len(self.models)
        self.model_config.save(os.path.join(folder, CONFIG_FILE))
        with open(os.path.join(folder, PREPROCESSOR_FILE), "w", encoding="utf-8") as out:
            json.dump(self.p.to_dict(), out)
        if self.p.inputs == "transformer":
            from delft.sequenceLabelling.transformers.checkpoint import write_model_resources

            write_model_resources(folder, self._encoder_config, self.p.tokenizer)
        for k, model in enumerate(self.models):
            model.save_weights(os.path.join(folder, weights_file(k, len(self.models))))
        write_history(folder, self.history)

    def load(self, dir_path=DEFAULT_MODELS_DIR, multi_gpu=False):
        """Load ``dir_path/<model_name>/`` (ours, or GROBID's shipped DeLFT 0.x classifiers); a
        missing or malformed file is a one-line :class:`ModelLoadError`. Returns None, as
        DeLFT's (JEP would print a value returned)."""
        load_whole(os.path.join(dir_path, self.model_config.model_name),
                   lambda path: self._load_folder(path, multi_gpu))

    def _load_folder(self, path, multi_gpu):
        config, self.p, files, self._delft0 = read_classifier_folder(path)
        config.model_name = self.model_config.model_name
        self.model_config = config
        self._transformer_dir = None
        if self.p.inputs == "transformer":
            self._open_transformer(path)
        strategy = devices.get_strategy(multi_gpu)
        if self._delft0:  # its widths are its weights' (its config.json does not hold them)
            from delft.textClassification.foreign import read_delft0_classifier_weights

            config = read_delft0_classifier_weights(files[0]).shaped_config(config)
            self.model_config = config
        if self.p.inputs == "word_vectors":
            self._open_embeddings(loading_from=path)
        self.models = [self._load_weights(file, strategy) for file in files]
        self.model = self.models[0]
        self._strategy = strategy
        self._predictors = {}

    def _load_weights(self, file, strategy):
        try:
            model = self._build(strategy, self.p, self._transformer_dir, pretrained=False)
        except ConfigurationError as error:
            raise ModelLoadError(f"{os.path.dirname(file)}: {CONFIG_FILE} does not describe a "
                                 f"model ({error})") from None
        try:
            with strategy.scope():
                if self._delft0:
                    from delft.textClassification.foreign import assign_delft0_weights

                    assign_delft0_weights(model, file)
                else:
                    model.load_weights(file)
        except ModelLoadError:
            raise
        except Exception as error:  # h5py/keras raise many types for a damaged file
            raise ModelLoadError(f"{file}: cannot load weights "
                                 f"({type(error).__name__}: {str(error).splitlines()[0]})") from None
        return model


def validation_split(texts, one_hot, seed):
    """``(train texts, train rows, validation texts, validation rows)``: a seeded
    ``VALIDATION_SHARE`` of the texts set apart (at least one, and one left to train on).

    >>> split = validation_split(["a", "b", "c"], np.eye(3), 1)
    >>> len(split[0]), len(split[2])
    (2, 1)
    """
    if len(texts) < 2:
        raise ValueError(f"{len(texts)} training text: train needs at least 2 (one to validate "
                         "early stopping on, one to train on)")
    order = np.random.default_rng(seed).permutation(len(texts))
    count = min(max(1, int(round(len(texts) * VALIDATION_SHARE))), len(texts) - 1)
    held, kept = order[:count], order[count:]
    return ([texts[i] for i in kept], one_hot[kept], [texts[i] for i in held], one_hot[held])


def dummy_batch(signature):
    """A batch of zeros of two rows matching ``signature``: enough to build a model's weights."""
    return {key: np.zeros([2 if d is None else d for d in spec.shape],
                          dtype=spec.dtype.as_numpy_dtype) for key, spec in signature.items()}
