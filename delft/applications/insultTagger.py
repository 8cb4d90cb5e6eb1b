"""Train and apply the insult / threat recogniser on TEI data (``<rs type="insult">...</rs>``).

    python delft/applications/insultTagger.py train [--input FILE.xml] [--valid FILE.xml] [--multi-gpu]
    python delft/applications/insultTagger.py train_eval --input FILE.xml [--test FILE.xml]
    python delft/applications/insultTagger.py tag [--file-in texts.txt] [--output-format json|iob|TEI]

Without ``--input`` the model is trained on the shared toxic comments data (``DELFT_SHARED_DATA``),
``corrected.xml``, and early-stopped on its ``valid.xml`` (as DeLFT); with ``--input`` and no ``--valid``, on 10% of the
input. train_eval evaluates on ``--test``, else on 10% of the input held out first. tag labels the
lines of ``--file-in`` (one text per line), else a few example sentences, and writes to
``--file-out`` or stdout. Models are saved as ``<output>/insult-<architecture>/``.
"""
import os
import sys

if __package__ in (None, ""):  # run as a script: python delft/applications/insultTagger.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from delft.applications import common, flow  # noqa: E402
from delft.utilities.errors import ConfigurationError  # noqa: E402

EXAMPLES = ["This is a gentle test.",
            "you're a moronic wimp who is too lazy to do research! die in hell !!",
            "This is a fucking test."]


def shared_toxic_file(name):
    """The shared toxic comments file ``name`` (DeLFT's data, ``DELFT_SHARED_DATA``)."""
    from delft.utilities.data_path import shared_data_file

    return str(shared_data_file("sequenceLabelling", "toxic", name))


def read_tei(path, option):
    from delft.sequenceLabelling.reader import load_data_and_labels_xml_file

    common.existing_path(path, option)
    return (*load_data_and_labels_xml_file(path), None)


def add_options(parser):
    parser.add_argument("--valid", default=None, help="validation file (TEI)")
    parser.add_argument("--test", default=None, help="evaluation file of train_eval and eval (TEI)")
    common.add_tag_options(parser)


def training_files(args):
    """``(train, valid)`` paths: ``--input`` and ``--valid``, else the shared toxic data."""
    if args.input is not None:
        return args.input, args.valid
    train_path = shared_toxic_file("corrected.xml")
    if not os.path.isfile(train_path):
        raise ConfigurationError(
            f"{args.action} needs --input FILE.xml (TEI with <rs type=...> annotations); without "
            f"it the shared toxic comments data is used, absent here ({train_path}): set "
            "DELFT_SHARED_DATA to the folder holding sequenceLabelling/toxic/")
    valid_path = args.valid
    if valid_path is None and os.path.isfile(shared_toxic_file("valid.xml")):
        valid_path = shared_toxic_file("valid.xml")
    return train_path, valid_path


def check(args):
    common.check_action_files(args, training_files,
                              "--test FILE (TEI with <rs type=...> annotations)")


def read_train(args):
    train_path, valid_path = training_files(args)
    return common.DataSets(
        train=read_tei(train_path, "--input"),
        valid=None if valid_path is None else read_tei(valid_path, "--valid"),
        test=read_tei(args.test, "--test") if args.action == "train_eval" and args.test else None)


def read_eval(args):
    path, option = (args.test, "--test") if args.test else (args.input, "--input")
    return common.DataSets(test=read_tei(path, option))


def tag(model, args):
    model.tag_file(args.file_in or EXAMPLES, args.output_format, args.file_out,
                   batch_size=args.batch_size, multi_gpu=args.multi_gpu)


APPLICATION = flow.Application(
    presets="insult", description="Train or apply the insult / threat recogniser (TEI data).",
    model_name=lambda args: f"insult-{args.architecture}", read_train=read_train,
    read_eval=read_eval, tag=tag, add_options=add_options, check=check)


main, command = flow.entry_points(APPLICATION)


if __name__ == "__main__":
    command()
