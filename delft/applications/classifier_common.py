"""What the classifier applications share: their data options, the shared data they read by
default, and the ``classify`` action (DeLFT's JSON, with its runtime, on stdout or a file).
"""
import json
import os
import time

from delft.applications import common
from delft.utilities import atomic
from delft.utilities.errors import ConfigurationError


def add_data_options(parser):
    parser.add_argument("--valid", default=None, help="validation file (early stopping)")
    parser.add_argument("--test", default=None, help="evaluation file of train_eval and eval")
    parser.add_argument("--file-in", default=None, help="classify: text file, one text per line")
    parser.add_argument("--file-out", default=None,
                        help="classify: the JSON output file (default: stdout)")


def shared_file(args, parts, what):
    """``--input`` when given, else the shared data file ``parts`` (DeLFT's data,
    ``DELFT_SHARED_DATA``); a one-line error when neither is there."""
    from delft.utilities.data_path import shared_data_file

    if args.input is not None:
        return common.existing_path(args.input, "--input")
    path = str(shared_data_file("textClassification", *parts))
    if not os.path.isfile(path):
        raise ConfigurationError(
            f"{args.action} needs --input FILE ({what}); without it the shared data is used, "
            f"absent here ({path}): set DELFT_SHARED_DATA to the folder holding "
            "textClassification/")
    return path


def read_sets(args, read, training_file):
    """The data of train/train_eval: ``read(path, option)`` of the training file, ``--valid`` and
    (train_eval) ``--test``, each ``(texts, classes, None)``."""
    def labelled(path, option):
        return (*read(path, option), None)

    return common.DataSets(
        train=labelled(training_file(args), "--input"),
        valid=labelled(args.valid, "--valid") if args.valid else None,
        test=labelled(args.test, "--test") if args.action == "train_eval" and args.test
        else None)


def read_eval_set(args, read):
    path, option = (args.test, "--test") if args.test else (args.input, "--input")
    return common.DataSets(test=(*read(path, option), None), test_file=path)


def classify(model, args, examples):
    """The classes of the lines of ``--file-in`` (else ``examples``), DeLFT's JSON with its
    runtime, written whole to ``--file-out`` or stdout."""
    from delft.sequenceLabelling.reader import iter_text_file

    texts = [text for chunk in iter_text_file(args.file_in) for text in chunk] \
        if args.file_in else list(examples)
    start = time.perf_counter()
    result = model.predict(texts, "json", batch_size=args.batch_size, multi_gpu=args.multi_gpu)
    result["runtime"] = round(time.perf_counter() - start, 3)
    with atomic.replaced_file(args.file_out) as out:
        json.dump(result, out, indent=2, ensure_ascii=False)
        out.write("\n")
