"""What the one CLI flow (flow.py) needs of each toolkit: its configs, presets, architectures,
model class and folders, and how its model trains and evaluates on an application's data.

Everything is imported when asked: a command resolves its options and checks its inputs before
TensorFlow starts.
"""
import importlib
import os


class Toolkit:
    """What every toolkit finds in its package (``package``): ``config`` (ModelConfig,
    TrainingConfig), ``presets``, ``models.architecture`` and the model class ``model_class``."""

    package = ""
    model_class = ""

    def _module(self, name=""):
        return importlib.import_module(f"{self.package}.{name}" if name else self.package)

    def configs(self):
        config = self._module("config")
        return config.ModelConfig, config.TrainingConfig

    def presets(self):
        return self._module("presets")

    def architecture(self, name):
        return self._module("models").architecture(name)

    def model(self, name, **settings):
        return getattr(self._module(), self.model_class)(name, **settings)

    def large_ops(self, architecture_name):
        """Whether the model's ops are large (``devices.configure_cpu_ops``): a transformer's."""
        return self.architecture(architecture_name).uses_transformer

    def training_passes(self, model):
        """The passes a train step of ``model`` runs side by side: its length groups."""
        return model.training_config.length_groups

    def start_tensorflow(self, architecture_name, training_passes=1):
        """Start TensorFlow as this toolkit's commands do for ``architecture_name``: its CPU
        threads and kernels (``devices.configure_cpu_ops``; ``training_passes`` for a training,
        :meth:`training_passes`), Keras without its optional extras
        (``common.keras_extras_hidden``). Settings that TensorFlow reads when it starts change
        nothing once it has."""
        from delft.applications import common
        from delft.utilities import devices

        with common.keras_extras_hidden():
            devices.configure_cpu_ops(self.large_ops(architecture_name), training_passes)


class SequenceLabelling(Toolkit):
    """The tagger (``Sequence``): data ``(tokens, labels, features)``."""

    package = "delft.sequenceLabelling"
    model_class = "Sequence"

    items = "sequences"
    actions = ("train", "train_eval", "eval", "tag")
    default_architecture = "BidLSTM_CRF"
    default_models_dir = "data/models/sequenceLabelling/"
    tags = True  # its tag action writes json, TEI or iob (--output-format)
    saves_folds = False  # a folder holds one model: eval keeps the best of n folds (as DeLFT)

    @staticmethod
    def read_model_config(path):
        from delft.sequenceLabelling.model_dir import read_model_config

        return read_model_config(path)

    @staticmethod
    def is_model_folder(path):
        from delft.sequenceLabelling.model_dir import FOLDER_WEIGHTS

        return any(os.path.isfile(os.path.join(path, name)) for name in FOLDER_WEIGHTS.values())

    @staticmethod
    def train(model, train_set, valid, incremental, multi_gpu, checkpoint_dir):
        model.train(*train_set, *(valid or (None, None, None)), incremental=incremental,
                    multi_gpu=multi_gpu, checkpoint_dir=checkpoint_dir)

    @staticmethod
    def train_nfold(model, train_set, multi_gpu):
        model.train_nfold(*train_set[:2], f_train=train_set[2], multi_gpu=multi_gpu)

    @staticmethod
    def evaluate(model, test, multi_gpu):
        return model.eval(*test, multi_gpu=multi_gpu)


class TextClassification(Toolkit):
    """The classifier (``Classifier``): data ``(texts, class names, None)``."""

    package = "delft.textClassification"
    model_class = "Classifier"

    items = "texts"
    actions = ("train", "train_eval", "eval", "classify")
    default_architecture = "gru"
    default_models_dir = "data/models/textClassification/"
    tags = False
    saves_folds = True  # a folder holds the n fold models, averaged at prediction (as DeLFT)

    @staticmethod
    def large_ops(architecture_name):
        """Every classifier's: batches of 256 texts of 150-300 words, for the RNNs too (an epoch
        of `gru` 7-16% shorter than on the sequence labeller's settings: doc/benchmarks.md,
        "Host memory of training")."""
        return True

    def training_passes(self, model):
        return self.architecture(model.model_config.architecture).length_groups

    @staticmethod
    def read_model_config(path):
        from delft.textClassification.model_dir import read_classifier_folder

        return read_classifier_folder(path)[0]

    @staticmethod
    def is_model_folder(path):
        from delft.textClassification.model_dir import CONFIG_FILE

        return os.path.isfile(os.path.join(path, CONFIG_FILE))

    @staticmethod
    def train(model, train_set, valid, incremental, multi_gpu, checkpoint_dir):
        x_valid, y_valid = (valid or (None, None, None))[:2]
        model.train(train_set[0], train_set[1], x_valid=x_valid, y_valid=y_valid,
                    incremental=incremental, multi_gpu=multi_gpu, checkpoint_dir=checkpoint_dir)

    @staticmethod
    def train_nfold(model, train_set, multi_gpu):
        model.train_nfold(train_set[0], train_set[1], multi_gpu=multi_gpu)

    @staticmethod
    def evaluate(model, test, multi_gpu):
        return model.eval(test[0], test[1], multi_gpu=multi_gpu)


SEQUENCE_LABELLING = SequenceLabelling()
TEXT_CLASSIFICATION = TextClassification()
