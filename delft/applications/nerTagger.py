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

from delft.applications import common, flow  # noqa: E402
from delft.utilities.errors import ConfigurationError  # noqa: E402

DATASET_TYPES = ["conll2003", "conll2012", "ontonotes"]
DATASET_NAMES = {"conll2003": "CoNLL-2003", "conll2012": "CoNLL-2012", "ontonotes": "OntoNotes"}


def read_ner(path, dataset_type, option):
    """Tokens and IOB2 labels ``(x, y, None)`` of one data file (or OntoNotes folder) of ``dataset_type``."""
    from delft.sequenceLabelling.reader import load_data_and_labels_conll, load_data_and_labels_ontonotes

    common.existing_path(path, option, folder_allowed=dataset_type != "conll2003")
    if dataset_type == "ontonotes" or (dataset_type == "conll2012" and (
            os.path.isdir(path) or path.endswith("gold_conll"))):
        return (*load_data_and_labels_ontonotes(path), None)
    return (*load_data_and_labels_conll(path), None)


def add_options(parser):
    parser.add_argument("--dataset-type", default="conll2003", choices=DATASET_TYPES)
    parser.add_argument("--lang", default="en", help="language, part of the model name (default en)")
    parser.add_argument("--train", default=None, help="training file (e.g. CoNLL-2003 eng.train)")
    parser.add_argument("--valid", default=None, help="validation file (e.g. eng.testa)")
    parser.add_argument("--test", default=None, help="evaluation file (e.g. eng.testb)")
    parser.add_argument("--train-with-validation-set", action="store_true",
                        help="train on --train and --valid together, without early stopping")
    common.add_tag_options(parser)


def train_file(args):
    """``(path, option)`` of the training data."""
    if args.train and args.input:
        raise ConfigurationError("give the training data as --train or --input, not both")
    return (args.train, "--train") if args.train else (args.input, "--input")


def eval_file(args):
    return (args.test, "--test") if args.test else (args.input, "--input")


def tag_file(args):
    return (args.file_in, "--file-in") if args.file_in else (args.input, "--input")


def check(args):
    what = DATASET_NAMES[args.dataset_type]
    if args.action in ("train", "train_eval"):
        if not train_file(args)[0]:
            raise ConfigurationError(f"{args.action} needs --train FILE (the {what} training "
                                     "data, e.g. eng.train); nothing is downloaded")
        if args.train_with_validation_set and not args.valid:
            raise ConfigurationError("--train-with-validation-set needs --valid FILE")
    elif args.action == "eval":
        if not eval_file(args)[0]:
            raise ConfigurationError(f"eval needs --test FILE (the {what} evaluation data, "
                                     "e.g. eng.testb)")
    else:
        path, option = tag_file(args)
        if not path:
            raise ConfigurationError("tag needs --file-in FILE (text, one text per line)")
        common.check_text_file(path, option)
        if args.file_out:
            common.check_output_file(args.file_out, "--file-out")


def read(args, path, option):
    return None if path is None else read_ner(path, args.dataset_type, option)


def read_train(args):
    return common.DataSets(
        train=read(args, *train_file(args)), valid=read(args, args.valid, "--valid"),
        test=read(args, args.test, "--test") if args.action == "train_eval" else None)


def read_eval(args):
    return common.DataSets(test=read(args, *eval_file(args)))


def tag(model, args):
    model.tag_file(tag_file(args)[0], args.output_format, args.file_out,
                   batch_size=args.batch_size, multi_gpu=args.multi_gpu)


APPLICATION = flow.Application(
    presets="ner", description="Train, evaluate or apply a named entity recogniser (CoNLL data).",
    model_name=lambda args: f"ner-{args.lang}-{args.dataset_type}-{args.architecture}",
    read_train=read_train, read_eval=read_eval, tag=tag, add_options=add_options, check=check,
    train_with_validation_set=lambda args: args.train_with_validation_set)


main, command = flow.entry_points(APPLICATION)


if __name__ == "__main__":
    command()
