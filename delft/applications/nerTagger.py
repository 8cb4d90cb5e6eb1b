"""Train, evaluate and apply named entity recognisers on CoNLL-2003 / CoNLL-2012 (OntoNotes) data.

    python delft/applications/nerTagger.py train_eval --train eng.train --valid eng.testa --test eng.testb
    python delft/applications/nerTagger.py train --input eng.train [--valid eng.testa] [--multi-gpu]
    python delft/applications/nerTagger.py eval --test eng.testb
    python delft/applications/nerTagger.py tag --file-in texts.txt [--output-format json|iob|TEI]
                                               [--file-out FILE]

Nothing is downloaded: the data files are given as paths. ``--dataset-type`` says how to read them:
``conll2003`` (``token ... label`` per line, IOB1 or IOB2), ``conll2012`` (DeLFT's CoNLL-2012-NER
column files such as ``eng.train``, or the ``*_gold_conll`` files of the OntoNotes 5.0 release, a file
or a folder of them), ``ontonotes`` (``*_gold_conll`` files only).

- train: trained on ``--train`` (or ``--input``), early-stopped on ``--valid``, else on 10% of the
  training data; ``--train-with-validation-set`` trains on both without early stopping (as DeLFT).
- train_eval: the same, then evaluated on ``--test``, else on 10% of the training data held out first.
- eval: the saved model evaluated on ``--test`` (or ``--input``).
- tag: one text per line of ``--file-in``, written to ``--file-out`` or stdout.

Models are saved as ``<output>/ner-<lang>-<dataset-type>-<architecture>/``. ``--multi-gpu`` mirrors
training, evaluation and tagging over every GPU (or ``DELFT_CPU_REPLICAS`` logical CPUs).
"""
import os
import sys

if __package__ in (None, ""):  # run as a script: python delft/applications/nerTagger.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from delft.applications import common  # noqa: E402
from delft.utilities.errors import ConfigurationError, DataFormatError, ModelLoadError  # noqa: E402

DATASET_TYPES = ["conll2003", "conll2012", "ontonotes"]
# DeLFT's nerTagger defaults: batch 32, max length 300, 50 epochs, patience 5 (transformers 150/15)
RNN_DEFAULTS = {"batch_size": 32, "max_sequence_length": 300, "max_epoch": 50, "patience": 5}
TRANSFORMER_DEFAULTS = {"batch_size": 32, "max_sequence_length": 150, "max_epoch": 15, "patience": 5}


def existing_path(path, option, folder_allowed=False):
    """``path`` if it exists (a file, or a folder where allowed), else a one-line error naming ``option``."""
    if os.path.isdir(path) and folder_allowed:
        return path
    if os.path.isdir(path):
        raise ConfigurationError(f"{option} {path}: is a folder, a file is expected")
    if not os.path.exists(path):
        raise ConfigurationError(f"{option} {path}: no such file")
    return path


def read_ner(path, dataset_type, option):
    """Tokens and IOB2 labels ``(x, y)`` of one data file (or OntoNotes folder) of ``dataset_type``."""
    from delft.sequenceLabelling.reader import load_data_and_labels_conll, load_data_and_labels_ontonotes

    existing_path(path, option, folder_allowed=dataset_type != "conll2003")
    print(f"reading {path}", flush=True)
    if dataset_type == "ontonotes" or (dataset_type == "conll2012" and (
            os.path.isdir(path) or path.endswith("gold_conll"))):
        return load_data_and_labels_ontonotes(path)
    return load_data_and_labels_conll(path)


def concatenate(*sets):
    """The (x, y) sets given, one after the other (None entries skipped)."""
    import numpy as np

    sets = [s for s in sets if s is not None]
    return (np.concatenate([s[0] for s in sets]), np.concatenate([s[1] for s in sets]))


def run_with_sets(args, model_name, sequence_kwargs, train=None, valid=None, test=None, tag=None,
                  train_with_validation_set=False):
    """Run ``args.action`` on data already read: ``train``/``valid``/``test`` are ``(x, y)`` or None.

    A missing validation (or, for train_eval, evaluation) set is a seeded 10% split of ``train``.
    ``tag(model)`` tags with the loaded model. ``args.multi_gpu`` goes to every Sequence call.
    """
    from delft.sequenceLabelling import Sequence
    from delft.utilities.devices import StrategyContext

    multi_gpu = args.multi_gpu
    if args.action in ("eval", "tag") or args.incremental:
        # said before TensorFlow starts; Sequence.load checks the files themselves
        path = os.path.join(args.input_model or args.output, model_name)
        if not os.path.isdir(path):
            raise ModelLoadError(f"{path}: no such model directory")
    with StrategyContext(multi_gpu):
        if args.action in ("train", "train_eval"):
            x, y = train
            if args.action == "train_eval" and test is None:
                (x, y, _), (x_test, y_test, _) = common.split(x, y, None, 0.1, args.seed)
                test = (x_test, y_test)
            if train_with_validation_set or args.fold_count > 1:
                # n-fold validates each model on its own fold; every given sequence is trained on
                x, y = concatenate((x, y), valid)
                valid = None
            elif valid is None:
                (x, y, _), (x_valid, y_valid, _) = common.split(x, y, None, 0.1, args.seed)
                valid = (x_valid, y_valid)
            x_valid, y_valid = valid if valid is not None else (None, None)
            print(f"{len(x)} train sequences, {0 if x_valid is None else len(x_valid)} validation "
                  f"sequences" + (f", {len(test[0])} evaluation sequences"
                                  if args.action == "train_eval" else ""), flush=True)
            model = Sequence(model_name, **sequence_kwargs)
            if args.incremental:
                model.load(args.input_model or args.output, multi_gpu=multi_gpu)
                model.training_config = Sequence(model_name, **sequence_kwargs).training_config
            if args.fold_count > 1:
                model.train_nfold(x, y, multi_gpu=multi_gpu)
            else:
                model.train(x, y, None, x_valid, y_valid, None, incremental=args.incremental,
                            multi_gpu=multi_gpu)
            if args.action == "train_eval":
                print("\nEvaluation:", flush=True)
                model.eval(test[0], test[1], multi_gpu=multi_gpu)
            model.save(args.output)
        elif args.action == "eval":
            model = Sequence(model_name).load(args.input_model or args.output, multi_gpu=multi_gpu)
            model.eval(test[0], test[1], multi_gpu=multi_gpu)
        else:
            model = Sequence(model_name).load(args.input_model or args.output, multi_gpu=multi_gpu)
            tag(model)


def check_text_file(path, option):
    """``path`` if it is a readable UTF-8 text file, else a one-line error (before any model loads)."""
    existing_path(path, option)
    with open(path, "rb") as stream:
        for line_number, line in enumerate(stream, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DataFormatError(path, line_number, f"not valid UTF-8 ({error.reason})") from None
    return path


def tag_text_file(model, file_in, output_format, file_out, multi_gpu):
    """``Sequence.tag_file`` on a text file (one text per line); bad UTF-8 is a one-line error."""
    try:
        model.tag_file(file_in, output_format, file_out, multi_gpu=multi_gpu)
    except UnicodeDecodeError as error:
        raise DataFormatError(file_in, None, f"not valid UTF-8 ({error.reason})") from None


def add_tag_options(parser):
    parser.add_argument("--file-in", default=None, help="tag: text file, one text per line")
    parser.add_argument("--file-out", default=None, help="tag: output file (default: stdout)")
    return parser


def parser():
    result = common.new_parser("Train, evaluate or apply a named entity recogniser (CoNLL data).")
    common.add_common_options(result)
    result.add_argument("--dataset-type", default="conll2003", choices=DATASET_TYPES)
    result.add_argument("--lang", default="en", help="language, part of the model name (default en)")
    result.add_argument("--train", default=None, help="training file (e.g. CoNLL-2003 eng.train)")
    result.add_argument("--valid", default=None, help="validation file (e.g. eng.testa)")
    result.add_argument("--test", default=None, help="evaluation file (e.g. eng.testb)")
    result.add_argument("--train-with-validation-set", action="store_true",
                        help="train on --train and --valid together, without early stopping")
    return add_tag_options(result)


@common.user_errors_are_one_line
def main(argv=None):
    args = parser().parse_args(argv)
    kwargs = common.model_options(args, RNN_DEFAULTS, TRANSFORMER_DEFAULTS)
    if args.train_with_validation_set:
        kwargs["early_stop"] = False
    model_name = f"ner-{args.lang}-{args.dataset_type}-{args.architecture}"
    what = {"conll2003": "CoNLL-2003", "conll2012": "CoNLL-2012", "ontonotes": "OntoNotes"}[
        args.dataset_type]

    def read(path, option):
        return None if path is None else read_ner(path, args.dataset_type, option)

    sets = {}
    if args.action in ("train", "train_eval"):
        if args.train and args.input:
            raise ConfigurationError("give the training data as --train or --input, not both")
        train_path, option = (args.train, "--train") if args.train else (args.input, "--input")
        if not train_path:
            raise ConfigurationError(f"{args.action} needs --train FILE (the {what} training data, "
                                     "e.g. eng.train); nothing is downloaded")
        if args.train_with_validation_set and not args.valid:
            raise ConfigurationError("--train-with-validation-set needs --valid FILE")
        sets = dict(train=read(train_path, option), valid=read(args.valid, "--valid"),
                    test=read(args.test, "--test") if args.action == "train_eval" else None)
    elif args.action == "eval":
        test_path, option = (args.test, "--test") if args.test else (args.input, "--input")
        if not test_path:
            raise ConfigurationError(f"eval needs --test FILE (the {what} evaluation data, "
                                     "e.g. eng.testb)")
        sets = dict(test=read(test_path, option))
    else:
        file_in, option = (args.file_in, "--file-in") if args.file_in else (args.input, "--input")
        if not file_in:
            raise ConfigurationError("tag needs --file-in FILE (text, one text per line)")
        check_text_file(file_in, option)

    def tag(model):
        tag_text_file(model, file_in, args.output_format, args.file_out, args.multi_gpu)

    run_with_sets(args, model_name, kwargs, tag=tag,
                  train_with_validation_set=args.train_with_validation_set, **sets)
    return 0


command = common.command_for(main)


if __name__ == "__main__":
    command()
