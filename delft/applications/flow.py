"""The one flow of every application: an :class:`Application` declares its data, names and
options; the actions ``train``, ``train_eval``, ``eval`` and ``tag`` are the functions here.

A run is resolved once, before the data is read and before TensorFlow starts (:func:`resolve`):
the model's name and folder, the settings (the option given, else the application's preset for
the model and the architecture's family, else the config field's default:
``delft/sequenceLabelling/presets.py``), and every check that can fail early (the model folder to
load, the folder to save into, the data files).
"""
import argparse
import logging
import os
from dataclasses import dataclass, field
from typing import Callable, Optional

from delft.applications import common
from delft.applications.toolkits import SEQUENCE_LABELLING
from delft.utilities import atomic
from delft.utilities.errors import ConfigurationError

logger = logging.getLogger(__name__)


@dataclass
class Application:
    """What an application script says about itself.

    Attributes:
        presets: its name in its toolkit's presets (``delft/sequenceLabelling/presets.py``,
            ``delft/textClassification/presets.py``).
        description: the first line of its ``--help``.
        model_name: the folder name of the model of a run, from the parsed options.
        preset_model: the model whose presets apply (GROBID's model name; "" for the others).
        read_train: the data of ``train`` / ``train_eval`` (:class:`common.DataSets`).
        read_eval: the data of ``eval``.
        tag: what ``tag`` does with the loaded model and the options.
        add_options: the application's own options (and positional arguments).
        check: its checks before any data is read (inputs given, readable...).
        train_with_validation_set: whether the options ask to train on the validation set too.
        toolkit: the toolkit of its models (``delft/applications/toolkits.py``).
    """

    presets: str
    description: str
    model_name: Callable[[argparse.Namespace], str]
    read_train: Callable[[argparse.Namespace], "common.DataSets"]
    read_eval: Callable[[argparse.Namespace], "common.DataSets"]
    tag: Callable[[object, argparse.Namespace], None]
    preset_model: Callable[[argparse.Namespace], str] = lambda args: ""
    add_options: Callable[[argparse.ArgumentParser], None] = lambda parser: None
    check: Callable[[argparse.Namespace], None] = lambda args: None
    train_with_validation_set: Callable[[argparse.Namespace], bool] = lambda args: False
    toolkit: object = SEQUENCE_LABELLING


@dataclass
class Run:
    """A resolved run: the options as given, and what follows from them."""

    args: argparse.Namespace
    model_name: str             # the folder the model is saved as
    models_dir: str             # where the model is saved (and loaded from, without --input-model)
    load_dir: str               # the folder holding the model folder to load
    load_name: str              # the model folder to load (eval, tag, --incremental)
    settings: dict = field(default_factory=dict)   # Sequence's arguments: options and presets
    seed: Optional[int] = None


def parser(app: Application, argv=None) -> argparse.ArgumentParser:
    """The application's parser; each config option's help gives the value a run of the model
    and ``--architecture`` on the same command line takes."""
    known = _pre_parse(app, argv)
    architecture_name = known.architecture or app.toolkit.default_architecture
    try:
        model = app.preset_model(known)
    except AttributeError:  # a positional argument naming the model is missing (--help alone)
        model = None
    shown = app.toolkit.presets().preset(app.presets, model or "",
                                         _family(app, architecture_name))
    where = (f"{model}, {architecture_name}" if model else
             f"{app.presets} models, {architecture_name}" if model == "" else
             f"a model without a preset of its own, {architecture_name}")
    result = argparse.ArgumentParser(description=app.description)
    app.add_options(result)
    common.add_common_options(result, app.toolkit, shown, where)
    return result


def _pre_parse(app, argv):
    """The positional arguments and ``--architecture`` alone (no ``--help``, no errors)."""
    pre = _SilentParser(add_help=False)
    app.add_options(pre)
    pre.add_argument("action", nargs="?")
    pre.add_argument("--architecture", default=None)
    try:
        known, _ = pre.parse_known_args(argv)
    except ValueError:  # positional arguments missing: help without a model
        known = argparse.Namespace(architecture=None)
    return known


class _SilentParser(argparse.ArgumentParser):
    """A parser whose errors are exceptions, not a message and an exit (the full parser that
    follows reports them)."""

    def error(self, message):
        raise ValueError(message)


def _family(app, architecture_name):
    return "transformer" if app.toolkit.architecture(architecture_name).uses_transformer \
        else "rnn"


def resolve(app: Application, argv=None, check_inputs=True) -> Run:
    """Parse ``argv`` and resolve the run; a user's error is a one-line
    :class:`ConfigurationError` (options without effect here, an unknown architecture, the
    application's checks of its inputs unless ``check_inputs`` is false...)."""
    from delft.utilities.settings import check_name, check_values, config_values

    toolkit = app.toolkit
    args = common.parse(parser(app, argv), argv, toolkit)
    values = toolkit.presets().preset(app.presets, app.preset_model(args),
                                      _family(app, args.architecture))
    settings = check_values({name: value for config in toolkit.configs()
                             for name, value in config_values(args, config, values).items()},
                            toolkit.configs(), "command line")
    if app.train_with_validation_set(args):
        settings["early_stop"] = False
    models_dir = args.output or toolkit.default_models_dir
    model_name = check_name(app.model_name(args), "the model name")
    load_dir, load_name = models_dir, model_name
    if args.input_model:  # the directory holding the model folder, or that folder itself
        load_dir = args.input_model
        if toolkit.is_model_folder(args.input_model) and not \
                os.path.isdir(os.path.join(args.input_model, model_name)):
            load_dir, load_name = os.path.split(os.path.abspath(args.input_model))
    if check_inputs:
        app.check(args)
        if args.action == "train" and settings.get("fold_number", 1) > 1 and \
                not toolkit.saves_folds:
            raise ConfigurationError("--fold-count with train: a model folder keeps one model, "
                                     "the best fold, which only evaluation picks; use train_eval")
        if args.action in ("train", "train_eval"):  # a tracker that cannot report: say it now
            from delft.utilities.tracking import trackers_for

            trackers_for(args.tensorboard, bool(args.report_to_wandb), args.wandb_project,
                         args.wandb_run_id)
    return Run(args, model_name if args.action in ("train", "train_eval") else load_name,
               models_dir, load_dir, load_name, settings, args.seed)


def resolved_configs(app: Application, argv=None):
    """The ``(ModelConfig, TrainingConfig)`` a training run of ``argv`` starts from (nothing
    trained, TensorFlow not started): what ``--help`` and doc/usage.md's table describe."""
    run = resolve(app, argv, check_inputs=False)
    model = app.toolkit.model(run.model_name, **run.settings)
    return model.model_config, model.training_config


def main(app: Application, argv=None) -> int:
    """Run the action of ``argv``: the body of every application's ``main``."""
    run = resolve(app, argv)
    ACTIONS[run.args.action](app, run)
    return 0


def entry_points(app: Application):
    """``(main, command)`` of an application's module: ``main(argv)`` runs :func:`main` with a
    user's error as one line and exit code 2; ``command`` is its console script."""
    @common.user_errors_are_one_line
    def application_main(argv=None):
        return main(app, argv)

    return application_main, common.command_for(application_main)


# -- the actions ----------------------------------------------------------------------------------

def train(app, run):
    """Train (validated on ``--valid``, else on a seeded 10% of the data) and save."""
    _fit(app, run, evaluate=False)


def train_eval(app, run):
    """Train, evaluate on ``--test`` (else on a seeded 10% held out first), report, save."""
    _fit(app, run, evaluate=True)


def evaluate(app, run):
    """Evaluate the saved model on the evaluation data and report."""
    model, sets, report = _loaded(app, run, lambda: app.read_eval(run.args))
    report(_evaluate_file(app, model, sets, run.args.multi_gpu))


def tag(app, run):
    """Tag with the saved model as the application says (a file, texts, stdout...)."""
    model, _, _ = _loaded(app, run, common.DataSets)
    app.tag(model, run.args)


ACTIONS = {"train": train, "train_eval": train_eval, "eval": evaluate, "tag": tag,
           "classify": tag}


def _loaded(app, run, read_sets):
    """``(model, data, report)``: the saved model of ``run`` (its folder checked before the data
    is read and TensorFlow starts), the data it will be used on, and this worker's report
    function."""
    config = app.toolkit.read_model_config(os.path.join(run.load_dir, run.load_name))
    sets = read_sets()
    strategy = _strategy(app, run, config.architecture)
    model = app.toolkit.model(run.load_name)
    model.load(run.load_dir, multi_gpu=run.args.multi_gpu)
    return model, sets, _report(strategy)


def _strategy(app, run, architecture_name, training_passes=1):
    from delft.utilities import devices

    app.toolkit.start_tensorflow(architecture_name, training_passes)
    return devices.get_strategy(run.args.multi_gpu)


def _report(strategy):
    """Print reports on the chief only (with several workers each runs the same flow)."""
    from delft.utilities import devices

    return common.print_scores if devices.is_chief(strategy) else (lambda scores: None)


def _fit(app, run, evaluate):
    """Train ``run``'s model on the application's data (checks first, then the data, then
    TensorFlow), evaluate it when asked, save it."""
    toolkit = app.toolkit
    args = run.args
    action = "train_eval" if evaluate else "train"
    if args.incremental:
        toolkit.read_model_config(os.path.join(run.load_dir, run.load_name))
    atomic.check_folder_destination(os.path.join(run.models_dir, run.model_name))
    model = toolkit.model(run.model_name, **run.settings)
    sets = app.read_train(args)
    folds = model.training_config.fold_number
    with_validation = app.train_with_validation_set(args)
    common.check_enough_sequences(action, sets, folds, with_validation, toolkit.items)
    strategy = _strategy(app, run, model.model_config.architecture,
                         toolkit.training_passes(model))
    report = _report(strategy)
    seed = _training_seed(run, model, strategy)
    model.training_config.seed = seed
    train_set, valid, test = sets.train, sets.valid, sets.test
    if evaluate and test is None:
        train_set, test = common.split(*train_set, 0.1, seed)
    if with_validation or folds > 1:
        train_set, valid = common.concatenate(train_set, valid), None
    elif valid is None:
        train_set, valid = common.split(*train_set, 0.1, seed)
    items = toolkit.items
    logger.info("%d train %s, %d validation %s%s", len(train_set[0]), items,
                0 if valid is None else len(valid[0]), items,
                f", {len(test[0])} evaluation {items}" if evaluate else "")
    if args.incremental:
        training_config = model.training_config
        model.model_config.model_name = run.load_name
        model.load(run.load_dir, multi_gpu=args.multi_gpu)
        model.model_config.model_name = run.model_name
        model.training_config = training_config
    if folds > 1:
        toolkit.train_nfold(model, train_set, args.multi_gpu)
    else:
        from delft.training.checkpoints import checkpoint_dir  # imports TensorFlow

        toolkit.train(model, train_set, valid, args.incremental, args.multi_gpu,
                      checkpoint_dir(run.models_dir, run.model_name))
    if evaluate:
        report(toolkit.evaluate(model, test, args.multi_gpu))
    model.save(run.models_dir)


def _training_seed(run, model, strategy):
    """The seed of the splits and the training: ``--seed``; else the one of the training being
    resumed from its checkpoint (its splits: never train on what it validated or evaluated on);
    else one drawn now (shared by every worker), logged so that the run can be made again."""
    import secrets

    from delft.training.checkpoints import checkpoint_dir, saved_seed
    from delft.utilities import devices
    from delft.utilities.settings import SEED_LIMIT

    seed = run.seed
    if seed is None and model.training_config.resume:
        seed = saved_seed(checkpoint_dir(run.models_dir, run.model_name))
        if seed is not None:
            logger.info("resuming a training of seed %d: its splits and data order", seed)
    seed = devices.common_seed(strategy, seed)
    if seed is None:
        seed = secrets.randbelow(SEED_LIMIT + 1)
        logger.info("no --seed given: seed %d (--seed %d makes this run again)", seed, seed)
    return seed


def _evaluate_file(app, model, sets, multi_gpu):
    """``model.eval`` on ``sets.test``; features it was not trained on are a file:line error."""
    from delft.sequenceLabelling.feature_columns import FeatureColumnsError

    if sets.test is None:
        raise ConfigurationError("eval needs evaluation data")
    try:
        return app.toolkit.evaluate(model, sets.test, multi_gpu)
    except FeatureColumnsError as error:
        if sets.test_file is None:
            raise
        raise error.in_file(sets.test_file) from None
