"""Train, evaluate and apply GROBID's copyright and license classifiers (DeLFT's
licenseClassifier).

    python delft/applications/licenseClassifier.py train [--task copyright|license] [--architecture gru]
    python delft/applications/licenseClassifier.py train_eval [--input FILE.csv] [--seed 1]
    python delft/applications/licenseClassifier.py eval --test FILE.csv --task copyright
    python delft/applications/licenseClassifier.py classify [--file-in texts.txt] [--file-out out.json]

Two models, one per ``--task`` (both without it, one after the other): ``copyright`` (who owns the
copyright: publisher, authors, undecided) and ``license`` (CC-0, CC-BY, ... copyright, other,
undecided), saved as ``<output>/copyright_<architecture>/`` and ``license_<architecture>/`` —
GROBID's names. The data is a CSV without header line: text, copyright class, license class
(``--input``; default the shared ``textClassification/licenses/`` file of ``DELFT_SHARED_DATA``).
train early-stops on ``--valid``, else on 10% of the data; train_eval evaluates on ``--test``, else
on 10% held out first. Without ``--embedding`` word embeddings are learned from the training texts
(DeLFT 1.2.0); ``--architecture bert --transformer NAME`` fine-tunes a transformer.
classify prints DeLFT's JSON for the lines of ``--file-in`` (else three example texts).
"""
import os
import sys

if __package__ in (None, ""):  # run as a script: python delft/applications/licenseClassifier.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from delft.applications import classifier_common, common, flow  # noqa: E402
from delft.applications.toolkits import TEXT_CLASSIFICATION  # noqa: E402
from delft.utilities.errors import ConfigurationError  # noqa: E402

TASKS = ("copyright", "license")
DATA = ("licenses", "copyrights-licenses-data-validated.csv")
EXAMPLES = ["This article is licensed under a Creative Commons Attribution 4.0 International "
            "License, which permits use, sharing, adaptation, distribution and reproduction in "
            "any medium or format.",
            "© 2021 Elsevier Ltd. All rights reserved.",
            "Copyright: © 2018 The authors. This is an open access article distributed under the "
            "terms of the Creative Commons Attribution License."]


def add_options(parser):
    parser.add_argument("--task", choices=TASKS, default=None,
                        help="the model to train, evaluate or apply (default: both, in turn)")
    classifier_common.add_data_options(parser)


def training_file(args):
    return classifier_common.shared_file(args, DATA, "a CSV: text, copyright class, license "
                                                     "class")


def read(args):
    from delft.textClassification.reader import read_license_data

    def read_file(path, option):
        return read_license_data(common.existing_path(path, option), args.task)
    return read_file


APPLICATION = flow.Application(
    presets="license", description="Train or apply GROBID's copyright and license classifiers.",
    model_name=lambda args: f"{args.task}_{args.architecture}",
    preset_model=lambda args: args.task or "",
    read_train=lambda args: classifier_common.read_sets(args, read(args), training_file),
    read_eval=lambda args: classifier_common.read_eval_set(args, read(args)),
    tag=lambda model, args: classifier_common.classify(model, args, EXAMPLES),
    add_options=add_options,
    check=lambda args: common.check_action_files(args, training_file),
    toolkit=TEXT_CLASSIFICATION)


@common.user_errors_are_one_line
def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--task" in argv or any(arg.startswith("--task=") for arg in argv) or \
            {"-h", "--help"} & set(argv):
        return flow.main(APPLICATION, argv)
    if "--file-out" in argv:
        raise ConfigurationError("--file-out holds one model's output: give --task")
    for task in TASKS:  # DeLFT's: both models, one after the other
        flow.main(APPLICATION, argv + ["--task", task])
    return 0


command = common.command_for(main)


if __name__ == "__main__":
    command()
