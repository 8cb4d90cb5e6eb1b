"""Train, evaluate and apply GROBID's sequence labelling models.

    python delft/applications/grobidTagger.py date train_eval [--input FILE] [--multi-gpu]
    python delft/applications/grobidTagger.py date train --input FILE --output GROBID_HOME/models
    python delft/applications/grobidTagger.py date tag --input FILE.crf --output-format iob
    python delft/applications/grobidTagger.py date tag --file-in texts.txt

Any model name is accepted (DeLFT's per-model defaults apply to the ones it knows:
``delft/sequenceLabelling/presets.py``; ``--help`` after the model name shows its values). Without
``--input`` the newest ``data/sequenceLabelling/grobid/<model>/<model>-YYMMDD.train[.gz]`` is used.
Models are saved as ``<output>/<model>-<architecture>[-<suffix>]/`` when ``--output`` is given (the
folder GROBID loads), else as ``data/models/sequenceLabelling/grobid-<model>-<architecture>/``.
tag labels a GROBID feature matrix (``--input``) or the lines of a text file (``--file-in``, one
text per line, tokenised as DeLFT does: models without features only, as DeLFT's tag of raw texts).
"""
import datetime
import logging
import os
import re
import sys

if __package__ in (None, ""):  # run as a script: python delft/applications/grobidTagger.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from delft.applications import common, flow  # noqa: E402
from delft.utilities.errors import ConfigurationError  # noqa: E402

MODELS = ["affiliation-address", "citation", "date", "figure", "fulltext", "funding-acknowledgement",
          "header", "name-citation", "name-header", "patent-citation", "reference-segmenter",
          "segmentation", "software", "table"]
GROBID_PREFIX = "grobid-"
DATA_DIR = os.path.join("data", "sequenceLabelling", "grobid")


def default_input(model):
    """The newest ``<model>-YYMMDD.train[.gz]`` of data/sequenceLabelling/grobid/<model>/ (a plain
    file before a .gz of the same date), as DeLFT picks it."""
    folder = os.path.join(DATA_DIR, model)
    pattern = re.compile(rf"^{re.escape(model)}-(\d{{6}})\.train(\.gz)?$")
    candidates = []
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        match = pattern.match(name)
        if not match:
            continue
        try:
            date = datetime.datetime.strptime(match.group(1), "%y%m%d")
        except ValueError:
            continue
        candidates.append((date, match.group(2) is None, os.path.join(folder, name)))
    if not candidates:
        raise ConfigurationError(
            f"no --input FILE given, and no {folder}/{model}-YYMMDD.train[.gz] (DeLFT's layout of "
            "GROBID's training data) under the current directory; give --input (this package "
            "ships data/sequenceLabelling/grobid/date/date-sample.train)")
    return max(candidates)[2]


def model_name(model, architecture, suffix, prefixed):
    """``[grobid-]<model>-<architecture>[-<suffix>]``: without the prefix under ``--output`` (the
    folder name GROBID loads), with it in delft's default models directory."""
    if suffix is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", suffix):
        raise ConfigurationError(f"--suffix {suffix!r}: letters, digits, '.', '_' and '-' only")
    name = f"{GROBID_PREFIX if prefixed else ''}{model}-{architecture}"
    return f"{name}-{suffix}" if suffix else name


def add_options(parser):
    parser.add_argument("model", help=f"the model name, e.g. {', '.join(MODELS)}")
    parser.add_argument("--suffix", default=None,
                        help="appended to the model name: <model>-<architecture>-<suffix>")
    common.add_tag_options(parser)


def saved_name(args):
    """The folder of the model: ``<model>-<architecture>`` under ``--output`` (GROBID's name),
    ``grobid-<model>-<architecture>`` in delft's models folder; to load (eval, tag,
    --incremental), whichever of the two the folder holds."""
    if args.action in ("eval", "tag") or args.incremental:
        from delft.sequenceLabelling.model_dir import DEFAULT_MODELS_DIR

        folder = args.input_model or args.output or DEFAULT_MODELS_DIR
        names = [model_name(args.model, args.architecture, args.suffix, prefixed=p)
                 for p in (True, False)]
        found = next((n for n in names if os.path.isdir(os.path.join(folder, n))), None)
        if found:
            return found
    return model_name(args.model, args.architecture, args.suffix, prefixed=args.output is None)


def check(args):
    if args.action == "tag":
        if args.input and args.file_in:
            raise ConfigurationError("tag: give --input (a GROBID feature matrix file) or "
                                     "--file-in (a text file), not both")
        if args.file_in:
            common.check_text_file(args.file_in, "--file-in")
        elif args.input:
            common.check_matrix_file(args.input, "--input")
        else:
            raise ConfigurationError("tag needs --input (a GROBID feature matrix file) or "
                                     "--file-in (a text file, one text per line)")
        if args.file_out:
            common.check_output_file(args.file_out, "--file-out")


def read_train(args):
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file

    path = args.input
    if path is None:
        path = default_input(args.model)
        logging.getLogger(__name__).info("using the newest training file: %s", path)
    return common.DataSets(train=load_data_and_labels_crf_file(
        common.existing_path(path, "--input")))


def read_eval(args):
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file

    path = common.existing_path(args.input or default_input(args.model), "--input")
    return common.DataSets(test=load_data_and_labels_crf_file(path), test_file=path)


def tag(model, args):
    if args.file_in:
        from delft.sequenceLabelling.models import architecture

        name = model.model_config.architecture
        if architecture(name).features:
            raise ConfigurationError(f"--file-in {args.file_in}: a {name} model reads GROBID's "
                                     "feature columns, which a text has not; give --input FILE "
                                     "(a feature matrix)")
    model.tag_file(args.file_in or args.input, args.output_format, args.file_out,
                   batch_size=args.batch_size, multi_gpu=args.multi_gpu,
                   input_format="text" if args.file_in else "crf")


APPLICATION = flow.Application(
    presets="grobid", description="Train, evaluate or apply a GROBID sequence labelling model.",
    model_name=saved_name, read_train=read_train, read_eval=read_eval, tag=tag,
    preset_model=lambda args: args.model, add_options=add_options, check=check)


main, command = flow.entry_points(APPLICATION)


if __name__ == "__main__":
    command()
