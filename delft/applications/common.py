"""What the application scripts share: options, checks of their inputs, the 90/10 splits,
reports, and the one-line errors (the flow itself is ``flow.py``).

Options are generated from the config fields (a flag *is* a field, see
``delft.sequenceLabelling.config``); a user's error (bad file, bad option) ends as one line on
stderr; results (evaluation reports, tagged output) go to stdout, logs to stderr.
"""
import argparse
import contextlib
import functools
import importlib.abc
import logging
import math
import os
import sys
from dataclasses import dataclass
from typing import Optional

from delft.sequenceLabelling.output import FORMATS
from delft.utilities import atomic
from delft.utilities.errors import ConfigurationError, DataFormatError, DelftError, is_disk_full
from delft.utilities.native_logs import NativeStderrFilter

VERBOSE_FLAG = "--verbose"

# options DeLFT scripts pass that have nothing to act on here: refused, never silently ignored
REFUSED_OPTIONS = {
    "use_ELMo": "ELMo is not supported: use a transformer (--transformer)",
    "num_workers": "batches are padded in one background thread: there are no data workers to "
                   "set",
    "text_features_indices": "text feature columns are not supported: categorical columns only "
                             "(--features-indices)",
    "continuous_features_indices": "continuous feature columns are not supported: categorical "
                                   "columns only (--features-indices)",
}


def add_common_options(parser, toolkit, shown=None, shown_for=None):
    """The action, one option per config field of ``toolkit``'s configs (help: ``shown`` values,
    the presets of ``shown_for``), and the options every application has."""
    from delft.utilities.settings import add_config_options

    parser.add_argument("action", choices=list(toolkit.actions))
    add_config_options(parser, *toolkit.configs(), shown=shown, shown_for=shown_for)
    applies = toolkit.actions[-1]  # tag, classify
    parser.add_argument("--input", default=None, help=f"training/evaluation/{applies} data file")
    parser.add_argument("--output", default=None, help=f"directory of saved models (default: "
                                                        f"{toolkit.default_models_dir})")
    parser.add_argument("--input-model", default=None,
                        help=f"the model to load (eval, {applies}, --incremental): its folder, "
                             "or the directory holding it")
    parser.add_argument("--multi-gpu", action="store_true",
                        help="mirror over all GPUs (or DELFT_CPU_REPLICAS logical CPUs)")
    parser.add_argument("--incremental", action="store_true",
                        help="continue training the model of --input-model (or --output)")
    if toolkit.tags:
        parser.add_argument("--output-format", default="json", type=str.lower, choices=FORMATS,
                            help="tag: json (DeLFT's document), tei (TEI, entities as <rs type>) "
                                 "or iob (token<TAB>label lines); any case (default: json)")
    add_verbose_option(parser)
    parser.add_argument("--use-ELMo", dest="use_ELMo", action="store_true",
                        help=argparse.SUPPRESS)
    parser.add_argument("--num-workers", type=int, default=None, help=argparse.SUPPRESS)
    for name in ("text_features_indices", "continuous_features_indices"):
        parser.add_argument("--" + name.replace("_", "-"), default=None, help=argparse.SUPPRESS)
    return parser


def add_verbose_option(parser):
    parser.add_argument(VERBOSE_FLAG, action="store_true",
                        help="show TensorFlow's own log lines on stderr (held back by default)")


def parse(parser, argv, toolkit):
    """Parse ``argv``; options without effect here are refused in one line, an unknown
    architecture of ``toolkit`` too (naming the known ones). The namespace is not changed
    afterwards."""
    parser.set_defaults(architecture=toolkit.default_architecture)
    args = parser.parse_args(argv)
    for name, reason in REFUSED_OPTIONS.items():
        if getattr(args, name, None):
            raise ConfigurationError(f"--{name.replace('_', '-')}: {reason}")
    toolkit.architecture(args.architecture)
    return args


@dataclass
class DataSets:
    """The data of an action, each ``(x, y, f)`` (f may be None) or None when not given;
    ``test_file``: the file ``test`` was read from, whole and in order (errors name its lines)."""

    train: Optional[tuple] = None
    valid: Optional[tuple] = None
    test: Optional[tuple] = None
    test_file: Optional[str] = None


def held_out_size(num_sequences, share=0.1):
    """How many of ``num_sequences`` a 10% split holds out (scikit-learn rounds up).

    >>> held_out_size(573), held_out_size(3)
    (58, 1)
    """
    return math.ceil(num_sequences * share)


def check_enough_sequences(action, sets, folds, train_with_validation_set, items="sequences"):
    """A one-line error, before TensorFlow starts, when the training data cannot be split as
    ``action`` needs: a test part (train_eval without a test set), a validation part (no
    validation set given), and at least one sequence (or text: ``items``) to train on (or one
    per fold)."""
    def trainable(n):
        if action == "train_eval" and sets.test is None:
            n -= held_out_size(n)
        if folds > 1:
            return n >= folds
        if sets.valid is None and not train_with_validation_set:
            n -= held_out_size(n)
        return n >= 1

    given = len(sets.train[0])
    if trainable(given):
        return
    needed = next(n for n in range(given + 1, given + folds + 4) if trainable(n))
    parts = ["10% held out to evaluate" if action == "train_eval" and sets.test is None else None,
             "one per fold" if folds > 1 else
             "10% of the rest to validate" if sets.valid is None and not train_with_validation_set
             else None,
             None if folds > 1 else "one to train on"]
    item = items if given != 1 else items[:-1]
    raise ConfigurationError(f"{given} training {item}: {action} needs at least {needed} "
                             f"({', '.join(p for p in parts if p)})")


KERAS_EXTRAS = ("sklearn", "IPython", "matplotlib")


class _KerasExtrasHidden(importlib.abc.MetaPathFinder):
    """Finds no module of ``KERAS_EXTRAS``: Keras imports them when installed, for its
    scikit-learn wrappers, notebook display and image plots, none of which a command uses."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in KERAS_EXTRAS:
            raise ModuleNotFoundError(f"{name} is not loaded with TensorFlow by delft's commands",
                                      name=name)
        return None


@contextlib.contextmanager
def keras_extras_hidden():
    """Import TensorFlow (and Keras, which it loads) in this block without Keras' optional
    extras: scikit-learn, IPython and matplotlib took ~1 s of the 12 s of a ``date train_eval``
    process (doc/benchmarks.md). Keras guards each of those imports; a command imports what it
    needs of them later (metrics, the training curve), as usual. Commands only: a library host
    keeps Keras whole."""
    finder = _KerasExtrasHidden()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def split(x, y, f, test_size, seed):
    """A seeded split that keeps tokens, labels and features aligned (f may be None):
    ``((x, y, f) kept, (x, y, f) held out)``, the rows scikit-learn's
    ``train_test_split(x, y, f, test_size=test_size, random_state=seed)`` gives (an int seed),
    in its order, made here because importing scikit-learn is about a second of a short run."""
    import numpy as np

    held_out = math.ceil(test_size * len(x))
    order = np.random.RandomState(seed).permutation(len(x))

    def rows(values, indices):
        if values is None:
            return None
        return values[indices] if hasattr(values, "shape") else [values[i] for i in indices]

    return tuple(tuple(rows(values, indices) for values in (x, y, f))
                 for indices in (order[held_out:], order[:held_out]))


def concatenate(*sets):
    """The ``(x, y, f)`` sets given, one after the other (None entries skipped)."""
    import numpy as np

    sets = [s for s in sets if s is not None]
    features = None if any(s[2] is None for s in sets) else \
        np.concatenate([s[2] for s in sets])
    return (np.concatenate([s[0] for s in sets]), np.concatenate([s[1] for s in sets]), features)


def print_scores(scores):
    """The evaluation report on stdout (per fold, then their mean, for n-fold models)."""
    from delft.utilities.scores import format_report

    for k, fold in enumerate(scores.get("folds", [scores])):
        if "folds" in scores:
            print(f"---- fold {k + 1}/{len(scores['folds'])}")
        print(format_report(fold))
        if "roc_auc" in fold:  # a classifier's
            print(f"accuracy {fold['accuracy']:.4f}, mean ROC-AUC {fold['roc_auc']:.4f}")
    if "folds" in scores:
        print(f"average micro F1 over {len(scores['folds'])} folds: "
              f"{scores['micro_f1_mean']:.4f} (best fold {scores['best_fold'] + 1})")
    sys.stdout.flush()


def existing_path(path, option, folder_allowed=False):
    """``path`` if it exists (a file, or a folder where allowed), else a one-line error naming ``option``."""
    if os.path.isdir(path) and folder_allowed:
        return path
    if os.path.isdir(path):
        raise ConfigurationError(f"{option} {path}: is a folder, a file is expected")
    if not os.path.exists(path):
        raise ConfigurationError(f"{option} {path}: no such file")
    return path


def readable_file(path, option):
    """``path`` if it is a file this process can open, else a one-line error naming ``option``."""
    existing_path(path, option)
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise ConfigurationError(f"{option} {path}: cannot read it ({error.strerror})") from None
    return path


def check_text_file(path, option):
    """``path`` if it is a readable UTF-8 text file with a text in it, else a one-line error
    (before any model loads)."""
    readable_file(path, option)
    found = False
    with open(path, "rb") as stream:
        for line_number, line in enumerate(stream, start=1):
            try:
                found = line.decode("utf-8").strip() != "" or found
            except UnicodeDecodeError as error:
                raise DataFormatError(path, line_number, f"not valid UTF-8 ({error.reason})") from None
    if not found:
        raise DataFormatError(path, None, "empty: no text to tag")
    return path


def check_matrix_file(path, option):
    """``path`` if it is a readable GROBID feature matrix whose first sequence parses, else a
    one-line error, before any model loads. The rest is read as it is tagged: a malformed line
    further on ends the run, and the output, written to a temporary file, is not left partial
    (a whole pass first would read and parse a large file twice)."""
    from delft.sequenceLabelling.reader import iter_data_crf_file

    readable_file(path, option)
    chunks = iter_data_crf_file(path, chunk_size=1)
    next(chunks)  # an empty file is a DataFormatError here
    chunks.close()
    return path


def check_action_files(args, check_training, eval_needs="--test FILE"):
    """The checks of an application's files before any data is read: ``check_training(args)``
    for train and train_eval, an evaluation file for eval, and for the action that applies a
    model (tag, classify) its ``--file-in`` and ``--file-out``."""
    applies = args.action in ("tag", "classify")
    if args.action in ("train", "train_eval"):
        check_training(args)
    elif args.action == "eval" and not (args.test or args.input):
        raise ConfigurationError(f"eval needs {eval_needs}")
    elif applies and args.file_in:
        check_text_file(args.file_in, "--file-in")
    if applies and args.file_out:
        check_output_file(args.file_out, "--file-out")


def check_output_file(path, option):
    """A one-line error, before any work, when the output file ``path`` cannot be written."""
    try:
        atomic.check_file_destination(path)
    except ConfigurationError as error:
        raise ConfigurationError(f"{option}: {error}") from None
    return path


def add_tag_options(parser):
    parser.add_argument("--file-in", default=None, help="tag: text file, one text per line")
    parser.add_argument("--file-out", default=None, help="tag: output file (default: stdout)")
    return parser


def user_errors_are_one_line(main):
    """Run ``main``; a :class:`DelftError` (bad data, bad option, bad model dir) prints one line.

    TensorFlow's own C++ log lines are held back from stderr unless ``--verbose`` is given."""
    @functools.wraps(main)
    def wrapped(argv=None):
        verbose = VERBOSE_FLAG in (sys.argv[1:] if argv is None else argv)
        with contextlib.nullcontext() if verbose else NativeStderrFilter():
            return _run(main, argv)
    return wrapped


@contextlib.contextmanager
def _command_logging():
    """The CLIs' logging for the block, the caller's back after it (``main`` may be called in
    a process that has its own)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    # the INFO lines of TensorFlow's Python side (one per collective op under several
    # replicas, checkpoint sharding, preemption watchers) are not ours; delft's report is
    # printed on stdout instead
    quieted = {name: logging.getLogger(name).level
               for name in ("tensorflow", "absl", "delft.report")}
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in quieted:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        yield
    finally:
        for name, previous in quieted.items():
            logging.getLogger(name).setLevel(previous)
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


def _run(main, argv):
    """``main(argv)`` with the CLIs' logging; a user's error is one line and exit code 2."""
    # a command's stderr is for its own notices: transformers' advice that PyTorch is absent
    # (torch is never used here) is not one of them
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    try:
        with _command_logging():
            return main(argv)
    except (DelftError, FileNotFoundError, IsADirectoryError, PermissionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        if not is_disk_full(error):
            raise
        # a write no stage turned into a DiskFullError of its own
        print(f"error: {error.filename or 'a write'}: no space left on the device", file=sys.stderr)
        return 2


def command_for(main):
    """The console script of a command: ``main`` on the command line's arguments, then the
    process ends with its exit code, skipping the interpreter's teardown of TensorFlow's objects
    (a noticeable share of a short command, and nothing to save).

    Output is flushed first; in-process users call ``main`` instead.
    """
    def command():
        code = main()
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)

    return command


def new_parser(description):
    return argparse.ArgumentParser(description=description)
