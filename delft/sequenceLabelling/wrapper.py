"""``Sequence``: the API DeLFT users and GROBID call — train, eval, tag, tag_file, save, load.

Every model-building step runs inside the scope of the process-wide strategy from
:mod:`delft.utilities.devices`; this class only wires the stages together:
read (caller) -> vectorise (preprocess) -> batch (batching) -> model -> decode (tagger) ->
evaluate (evaluation) / write (output).
"""
import io
import itertools
import logging
import os
import time
from typing import Optional, Sequence as Sequence_, Union

import numpy as np

from delft.sequenceLabelling import evaluation, inputs, output
from delft.sequenceLabelling.batching import delft_read_widths
from delft.sequenceLabelling.config import (ModelConfig, TrainingConfig, check_settings,
                                            field_default, split_settings)
from delft.sequenceLabelling.model_dir import (CONFIG_FILE, CURVE_FILE,  # noqa: F401
                                               DEFAULT_MODELS_DIR, HISTORY_FILE,
                                               PREPROCESSOR_FILE, WEIGHTS_FILE, read_folder,
                                               set_folder_weights)
from delft.sequenceLabelling import models
from delft.utilities import atomic, devices, verbosity
from delft.utilities.errors import ConfigurationError, DataFormatError, ModelLoadError
from delft.utilities.Tokenizer import tokenize_with_offsets
from delft.training.saved_models import load_whole, save_folder, write_history
from delft.utilities.tracking import started_trackers

logger = logging.getLogger(__name__)
# the evaluation reports: the CLIs print them on stdout, and mute this logger
report_logger = logging.getLogger("delft.report")

TAG_FILE_CHUNK = 5000
# DeLFT's Sequence arguments that have nothing to act on here
IGNORED_ARGUMENTS = ("max_checkpoints_to_keep", "log_dir", "multiprocessing")


class Sequence:
    """A sequence labelling model by DeLFT's name: ``Sequence('date-BidLSTM_CRF')``.

    ``model_name``, ``architecture`` (or DeLFT's ``model_type``) and ``embeddings_name`` may be
    given by position; every other setting by its name, DeLFT's, which is the config field's
    (``delft/sequenceLabelling/config.py``: ``ModelConfig`` and ``TrainingConfig``, whose defaults
    apply to what is not given; doc/usage.md lists them). ``max_checkpoints_to_keep``, ``log_dir``
    and ``multiprocessing`` are accepted so that existing calls run, and have no effect (the best
    epoch is kept in memory, progress goes through ``logging``, batches are padded in a
    background thread); ``use_ELMo=True`` is refused.

    >>> model = Sequence("date-BidLSTM_CRF", max_epoch=1)
    >>> model.model_config.architecture, model.training_config.max_epoch
    ('BidLSTM_CRF', 1)
    """

    def __init__(self, model_name=None, architecture=None, embeddings_name=None, **settings):
        settings = dict(settings, architecture=settings.pop("model_type", None) or architecture,
                        embeddings_name=embeddings_name)
        if settings.pop("use_ELMo", False):
            raise ConfigurationError("ELMo is not supported: use a transformer (--transformer)")
        for name in IGNORED_ARGUMENTS:
            settings.pop(name, None)
        model_fields, training_fields = split_settings(
            {name: value for name, value in settings.items() if value is not None}, "Sequence")
        model_fields.setdefault("model_name", model_name or model_fields.get(
            "architecture", field_default("architecture")))
        models.architecture(model_fields.get("architecture", field_default("architecture")))
        self.model_config = ModelConfig(**model_fields).validated("Sequence")
        self.training_config = TrainingConfig(**training_fields).validated("Sequence")
        models.check_resources(self.model_config)
        self.p = None
        self.model = None
        self.models = []
        self.history = []
        self._strategy = None
        self._predictors = {}
        self._checkpoint_dir = None  # what this object's last training wrote: save removes it

    # -- building -----------------------------------------------------------------------------
    @property
    def architecture(self):
        """The parts of this model's architecture (family, CRF, features, chars)."""
        return models.architecture(self.model_config.architecture)

    @property
    def uses_transformer(self):
        return self.architecture.uses_transformer

    def _build(self, strategy, preprocessor):
        """Model built and its weights created inside ``strategy.scope()``."""
        from delft.sequenceLabelling.batching import dummy_batch

        with strategy.scope():
            model = models.build_model(self.model_config, preprocessor)
            model(dummy_batch(preprocessor.batch_signature(False)))
        return model

    def _use_strategy(self, multi_gpu):
        strategy = devices.get_strategy(multi_gpu)
        if self.model is not None and strategy is not self._strategy:
            # the variables must live under the scope that runs them: rebuild there, copy weights
            weights = self.model.get_weights()
            self.model = self._build(strategy, self.p)
            self.model.set_weights(weights)
            self._predictors = {}
        self._strategy = strategy
        return strategy

    def _seed(self):
        if self.training_config.seed is not None:
            import keras

            keras.utils.set_random_seed(self.training_config.seed)

    def _features_for(self, features):
        return features if self.architecture.features else None

    # -- training -----------------------------------------------------------------------------
    def train(self, x_train, y_train, f_train=None, x_valid=None, y_valid=None, f_valid=None,
              incremental=False, callbacks=None, multi_gpu=False, checkpoint_dir=None):
        """Train on (x_train, y_train); with a validation set, early stopping keeps the best epoch.

        GROBID's in-process trainer calls ``train(x_train, y_train, x_valid, y_valid)``
        positionally: tokens passed where features are expected are taken as that call.
        Keras ``callbacks`` have no place in this training loop: passing any is an error.
        ``checkpoint_dir``: a checkpoint there at an epoch end once ``checkpoint_interval``
        seconds have passed since the last (0: every epoch), resumed from when the same
        training runs again (unless ``resume=False``), removed by :meth:`save` (the CLIs pass
        ``<output>/<model_name>.checkpoints``; see delft/training/checkpoints.py).
        """
        if callbacks:
            raise ConfigurationError("callbacks are not supported: the trainer logs each epoch "
                                     "and keeps the best weights itself")
        verbosity.show_work()
        if inputs.looks_like_tokens(f_train):
            f_train, x_valid, y_valid = None, f_train, x_valid
        inputs.check_labelled(x_train, y_train, f_train, "training")
        if x_valid is not None and len(x_valid):
            inputs.check_labelled(x_valid, y_valid, f_valid, "validation")
        inputs.warn_if_one_label(y_train)
        strategy = self._use_strategy(multi_gpu)  # starts TensorFlow (devices.get_strategy)
        from delft.training.checkpoints import claimed
        from delft.sequenceLabelling.trainer import Trainer

        self._seed()
        f_train, f_valid = self._features_for(f_train), self._features_for(f_valid)
        if incremental and self.model is not None:
            self._grow_for(x_train, y_train, f_train, strategy)
        else:
            self.p = models.new_preprocessor(self.model_config)
            self.p.fit(x_train, y_train, f_train)
            self._open_embeddings()
            self.model = self._build(strategy, self.p)
        self._predictors = {}
        train_corpus = self._encode_for_training(x_train, f_train)
        train_labels = self.p.encode_labels(y_train)
        valid_corpus = valid_labels = None
        if x_valid is not None and len(x_valid):
            valid_corpus = self.p.encode(x_valid, f_valid)
            valid_labels = self.p.encode_labels(y_valid)
        trainer = Trainer(self.model, self.p, self.training_config, strategy,
                          self.model_config.batch_size, uses_transformer=self.uses_transformer,
                          trackers=started_trackers(self.model_config, self.training_config,
                                                    devices.is_chief(strategy)))
        start = time.perf_counter()
        with claimed(checkpoint_dir, strategy) as claim:
            self._checkpoint_dir = claim.directory if claim else None
            # validation's predictor is the one eval and tag use next: its step is traced once
            self.history = trainer.train(
                train_corpus, train_labels, valid_corpus, valid_labels, checkpoints_claim=claim,
                predictor=self._predictor(strategy) if valid_corpus is not None else None)
        logger.info("training runtime: %.1f s", time.perf_counter() - start)
        self.models = [self.model]

    def _open_embeddings(self, loading_from=None):
        """Attach the word embeddings the config names to the preprocessor (nothing without).

        Their whole vocabulary is looked up at each encoding: a word unseen in training still
        gets its vector. ``loading_from``: the model folder being loaded, for the error message.
        """
        name = self.model_config.embeddings_name
        if not name:
            return
        if self.uses_transformer:
            raise ConfigurationError("static word embeddings go with the RNN family only")
        from delft.utilities.Embeddings import embeddings_for_model

        embeddings = embeddings_for_model(name, loading_from,
                                          self.model_config.word_embedding_size)
        self.model_config.word_embedding_size = embeddings.embed_size
        self.p.embeddings = embeddings

    def _encode_for_training(self, x, features):
        size = None if self.uses_transformer else self.model_config.max_sequence_length
        corpus = self.p.encode(x, features, window_size=size)
        cut = int(np.sum(corpus.sequence_lengths > size)) if size else 0
        if cut:
            logger.info("%d training sequences longer than max_sequence_length=%d are trained in "
                        "consecutive windows (no token dropped)", cut, size)
        return corpus

    def _grow_for(self, x, y, features, strategy):
        """Incremental training: extend vocabularies; grow the model if new chars/labels appear."""
        new = self.p.fit(x, y, features)
        if not any(new.values()):
            return
        logger.info("incremental training: %d new characters, %d new labels: growing the model",
                    len(new["chars"]), len(new["labels"]))
        old = self.model
        self.model = self._build(strategy, self.p)
        for target, source in zip(self.model.weights, old.weights):
            value = source.numpy()
            grown = target.numpy()
            grown[tuple(slice(0, n) for n in value.shape)] = value
            target.assign(grown)

    def train_nfold(self, x_train, y_train, x_valid=None, y_valid=None, f_train=None,
                    f_valid=None, incremental=False, callbacks=None, multi_gpu=False):
        """Train ``fold_number`` models, each validated on its own fold; every sequence is used.

        The arguments are in DeLFT's order (which differs from :meth:`train`'s).
        ``x_valid``/``y_valid`` are not needed (each fold validates on its held-out part) and,
        as in DeLFT, not used. :meth:`eval` then keeps the best fold, the one :meth:`save` writes.
        """
        folds = self.training_config.fold_number
        order = np.random.default_rng(self.training_config.seed).permutation(len(x_train))
        parts = np.array_split(order, folds)
        trained = []  # self.train() resets self.models: collect the folds aside

        def pick(sequences, rows):
            return None if sequences is None else [sequences[i] for i in rows]

        for k, held_out in enumerate(parts):
            kept = np.concatenate([p for i, p in enumerate(parts) if i != k])
            logger.info("---- fold %d/%d: %d train, %d validation", k + 1, folds, len(kept),
                        len(held_out))
            self.train(pick(x_train, kept), pick(y_train, kept), pick(f_train, kept),
                       pick(x_train, held_out), pick(y_train, held_out), pick(f_train, held_out),
                       multi_gpu=multi_gpu)
            trained.append((self.model, self.p))
        self.models = trained
        self.model, self.p = self.models[0]

    # -- evaluation ---------------------------------------------------------------------------
    def eval(self, x_test, y_test, features=None, multi_gpu=False):
        """Score the model on ``(x_test, y_test)``: per-label and micro/macro precision, recall, F1.

        Returns the scores, a dict whose ``str`` is the per-label table
        (:class:`~delft.sequenceLabelling.evaluation.Report`), also logged (logger
        ``delft.report``); n-fold models are each scored and the best fold is kept.
        """
        if self.model is None:
            raise ModelLoadError("no model: train or load one before eval")
        verbosity.show_work()
        inputs.check_labelled(x_test, y_test, features, "evaluation")
        if len(self.models) > 1:
            return self._eval_folds(x_test, y_test, features, multi_gpu)
        return self._score_one(x_test, y_test, features, multi_gpu)

    def _eval_folds(self, x_test, y_test, features, multi_gpu):
        fold_scores = []
        for k, (model, preprocessor) in enumerate(self.models):
            self.model, self.p, self._predictors = model, preprocessor, {}
            logger.info("---- fold %d/%d", k + 1, len(self.models))
            fold_scores.append(self._score_one(x_test, y_test, features, multi_gpu))
        f1s = [s["micro"]["f1"] for s in fold_scores]
        best = int(np.argmax(f1s))
        logger.info("average micro F1 over %d folds: %.4f (best fold %d: %.4f)", len(f1s),
                    np.mean(f1s), best + 1, f1s[best])
        self.model, self.p = self.models[best]
        self.models = [self.models[best]]
        self._predictors = {}
        return {"folds": fold_scores, "micro_f1_mean": float(np.mean(f1s)), "best_fold": best}

    def _score_one(self, x_test, y_test, features, multi_gpu):
        predicted = self._predict(x_test, features, multi_gpu).labels(self.p)
        scores = evaluation.precision_recall_f1(list(map(list, y_test)), predicted)
        report_logger.info("evaluation on %d sequences: micro F1 %.4f\n%s", len(y_test),
                           scores["micro"]["f1"], scores)
        return scores

    # -- tagging ------------------------------------------------------------------------------
    def _predictor(self, strategy):
        """The predictor of the model on ``strategy``, made once (its step traced once)."""
        from delft.sequenceLabelling.tagger import Predictor

        if id(strategy) not in self._predictors:
            self._predictors[id(strategy)] = Predictor(self.model, self.p, strategy)
        return self._predictors[id(strategy)]

    def _predict(self, sequences, features=None, multi_gpu=False, batch_size=None,
                 window_stride=None):
        """The :class:`~delft.sequenceLabelling.tagger.Predictions` of every token of
        ``sequences``."""
        if self.model is None:
            raise ModelLoadError("no model: train or load one before tagging")
        predictor = self._predictor(self._use_strategy(multi_gpu))
        features = self._features_for(features)
        inputs.check_features(features, sequences)
        corpus = self.p.encode(sequences, features,
                               window_stride=window_stride)
        batch_size = batch_size or self.model_config.batch_size
        if self.p.reads_padding:  # a DeLFT ChainCRF folder: each row read as in DeLFT's batches
            corpus.read_width = delft_read_widths(corpus.row_length, batch_size,
                                                  self.model_config.max_sequence_length)
        return predictor.predict(corpus, batch_size)

    def tagged(self, texts, features=None, batch_size=None, multi_gpu=False,
               window_stride=None) -> output.Tagged:
        """``texts`` (token lists, or raw strings split by DeLFT's ``tokenizeAndFilter``) with
        their labels and confidences, what every output format is written from."""
        check_settings({name: value for name, value in (("batch_size", batch_size),
                                                        ("window_stride", window_stride))
                        if value is not None}, "tag")
        raw = inputs.check_texts(texts)
        if raw:
            tokenised = [tokenize_with_offsets(text) for text in texts]
            tokens = [t for t, _ in tokenised]
            offsets = [o for _, o in tokenised]
        else:
            # token lists are used as given (read, never changed); other sequences (tuples,
            # numpy arrays) are copied into the lists every encoder takes
            tokens = [seq if type(seq) is list else list(seq) for seq in texts]
            offsets = None  # only the JSON and TEI outputs need them
        predictions = self._predict(tokens, features, multi_gpu, batch_size, window_stride)
        originals = list(texts) if raw else [None] * len(tokens)
        return predictions.tagged(self.p, originals, tokens, offsets)

    def tag(self, texts: Sequence_[Union[str, Sequence_[str]]], output_format: Optional[str] = None,
            features=None, batch_size: Optional[int] = None, multi_gpu: bool = False,
            window_stride: Optional[int] = None, nb_workers: Optional[int] = None):
        """Label ``texts`` (token lists, or raw strings split by DeLFT's ``tokenizeAndFilter``).

        Args:
            texts: token sequences (GROBID's ``load_data_crf_string`` output), or raw strings.
            output_format: None for ``[token, label]`` pairs; ``"json"`` for DeLFT's JSON dict
                (``output.JsonWriter``); ``"tei"`` or ``"iob"`` (any case) for that document as a
                string.
            features: the feature columns of each token (FEATURES architectures).
            batch_size: the global tagging batch (default: the model's).
            multi_gpu: shard the batches across the devices (see doc/multi-gpu.md).
            window_stride: transformers: the stride of the overlapping windows long texts are cut
                into (default: the model's); RNN models tag whole sequences, never cut.
            nb_workers: accepted for DeLFT's callers; batches are padded in one background
                thread whatever its value.

        Returns:
            Per text, ``[token, label]`` pairs of ``str``, one per input token, in input order
            (what GROBID's Java casts to ``List<List<List<String>>>``); or the JSON dict; or the
            TEI or IOB document.
            Anything but a list of texts or a list of token lists (a bare string, None, a mix)
            is a ``TypeError`` saying so.
        """
        from delft.training.prediction import serving_call

        start = time.perf_counter()
        key = None if output_format is None else output.output_format(output_format)
        with serving_call():
            tagged = self.tagged(texts, features, batch_size, multi_gpu, window_stride)
            if key is None:
                return output.token_label_pairs(tagged)
            runtime = round(time.perf_counter() - start, 3)
            if key == "json":
                return output.JsonWriter.document(self.model_config.model_name, tagged, runtime)
            stream = io.StringIO()
            self._write(stream, key, [tagged], start)
            return stream.getvalue()

    def tag_file(self, file_in, output_format="json", file_out=None, batch_size=None,
                 multi_gpu=False, input_format="text"):
        """Tag a large file chunk by chunk, writing as it goes (nothing held whole in memory).

        ``file_in``: a file of ``input_format`` ``"text"`` (one text per line) or ``"crf"`` (a
        GROBID feature matrix); or a list of texts. ``output_format``: json, tei or iob (any
        case). The output goes to a temporary file beside ``file_out``, renamed over it once
        complete: a failure (a malformed line, a kill) leaves an existing ``file_out`` untouched
        and nothing partial. With ``file_out=None`` it is written to stdout once complete, as
        DeLFT's does.
        """
        from delft.sequenceLabelling import reader

        key = output.output_format(output_format)
        chunks = iter([(list(file_in), None)]) if isinstance(file_in, (list, tuple)) else \
            _chunks(file_in, input_format, reader, self.p)
        first = next(chunks, None)  # opened and its first chunk read before any output
        if first is None or not first[0]:
            raise DataFormatError(file_in if first is None else "<texts>", None,
                                  "empty: no text to tag")
        start = time.perf_counter()
        # with several workers every worker tags (the steps are collective), the chief writes
        chief = devices.is_chief(self._use_strategy(multi_gpu))
        with (atomic.replaced_file(file_out) if chief else open(os.devnull, "w")) as stream:
            self._write(stream, key, (self.tagged(texts, features, batch_size, multi_gpu)
                                      for texts, features in itertools.chain([first], chunks)),
                        start)

    def _write(self, stream, key, tagged_chunks, start):
        """Write a document of format ``key`` of the tagged chunks to ``stream``."""
        writer = output.WRITERS[key](stream, self.model_config.model_name)
        writer.begin()
        for tagged in tagged_chunks:
            writer.add(tagged)
        writer.end(round(time.perf_counter() - start, 3))

    # -- persistence --------------------------------------------------------------------------
    def save(self, dir_path=DEFAULT_MODELS_DIR):
        """Write ``dir_path/<model_name>/`` atomically: a crash never leaves a half-written model.

        With several workers only the chief writes, and every worker returns once it has.
        """
        if self.model is None:
            raise ModelLoadError("no model to save: train or load one first")
        if len(self.models) > 1:  # as DeLFT's save, which writes no weights then
            raise ConfigurationError(f"{len(self.models)} fold models and none chosen: eval "
                                     "keeps the best fold, then save writes it")
        target = save_folder(os.path.join(dir_path, self.model_config.model_name),
                             self._strategy or devices.get_strategy(False),
                             self._write_model_files, self._checkpoint_dir)
        self._checkpoint_dir = None
        return target

    def _write_model_files(self, folder):
        from delft import __version__

        self.model_config.delft_version = __version__
        self.model_config.save(os.path.join(folder, CONFIG_FILE))
        self.p.save(os.path.join(folder, PREPROCESSOR_FILE))
        self.p.save_resources(folder)
        self.model.save_weights(os.path.join(folder, WEIGHTS_FILE))
        from delft.sequenceLabelling import trainer

        write_history(folder, self.history, trainer.plot_history)

    def load(self, dir_path=DEFAULT_MODELS_DIR, multi_gpu=False):
        """Load ``dir_path/<model_name>/``; a missing or corrupt file, or weights of another
        architecture than config.json names, is a one-line :class:`ModelLoadError`.

        Returns None, as DeLFT's: GROBID runs ``model.load(dir_path=...)`` through JEP, whose
        interactive evaluation would print any value returned.
        """
        load_whole(os.path.join(dir_path, self.model_config.model_name),
                   lambda path: self._load_folder(path, multi_gpu))

    def _load_folder(self, path, multi_gpu):
        _, config, self.p, foreign = read_folder(path)
        config.model_name = self.model_config.model_name
        self.model_config = config
        self._open_embeddings(loading_from=path)
        strategy = devices.get_strategy(multi_gpu)
        try:
            self.model = self._build(strategy, self.p)
        except ConfigurationError as error:
            raise ModelLoadError(f"{path}: config.json and {PREPROCESSOR_FILE} do not describe "
                                 f"the same model ({error})") from None
        set_folder_weights(self.model, path, foreign, strategy, config.architecture)
        self._strategy = strategy
        self._predictors = {}
        self.models = [self.model]


def _chunks(path, input_format, reader, preprocessor):
    """``(texts, features)`` chunks of a file to tag: a GROBID matrix, or one text per line."""
    if input_format == "crf":
        chunks = reader.iter_data_crf_file(path, TAG_FILE_CHUNK)
        for x, features in preprocessor.checked_feature_chunks(chunks, path):
            yield list(x), list(features)
    else:
        for texts in reader.iter_text_file(path, TAG_FILE_CHUNK):
            yield texts, None
