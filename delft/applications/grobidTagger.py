"""Train, evaluate and apply GROBID's sequence labelling models.

    python delft/applications/grobidTagger.py date train_eval [--input FILE] [--multi-gpu]
    python delft/applications/grobidTagger.py date train --input FILE --output GROBID_HOME/models
    python delft/applications/grobidTagger.py date tag --input FILE.crf --output-format iob

Any model name is accepted (DeLFT's per-model defaults apply to the ones it knows). Without
``--input`` the newest ``data/sequenceLabelling/grobid/<model>/<model>-YYMMDD.train[.gz]`` is used.
Models are saved as ``<output>/<model>-<architecture>[-<suffix>]/`` when ``--output`` is given (the
folder GROBID loads), else as ``data/models/sequenceLabelling/grobid-<model>-<architecture>/``.
"""
import datetime
import logging
import os
import re
import sys

if __package__ in (None, ""):  # run as a script: python delft/applications/grobidTagger.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from delft.applications import common  # noqa: E402
from delft.utilities.errors import ConfigurationError  # noqa: E402

MODELS = ["affiliation-address", "citation", "date", "figure", "fulltext", "funding-acknowledgement",
          "header", "name-citation", "name-header", "patent-citation", "reference-segmenter",
          "segmentation", "software", "table"]
GROBID_PREFIX = "grobid-"
DATA_DIR = os.path.join("data", "sequenceLabelling", "grobid")

# DeLFT 1.2.0's grobidTagger: (batch size, max sequence length[, max epoch]) per model; a name
# ending in "*" matches every model that starts with it; other models take GENERIC_*
RNN_DEFAULTS = {"citation": (30, 500), "header": (9, 3500, 80), "date": (60, 50),
                "affiliation-address": (20, 600), "software*": (20, 1500),
                "reference-segmenter": (5, 3000), "funding-acknowledgement": (30, 800),
                "patent-citation": (40, 1000), "figure": (3, 1000), "table": (3, 3000)}
TRANSFORMER_DEFAULTS = {"citation": (20, 200), "header": (6, 512), "date": (80, 30),
                        "affiliation-address": (20, 200), "software*": (8, 512, 30),
                        "funding-acknowledgement*": (8, 512), "patent-citation": (8, 512)}
GENERIC_RNN = (20, 3000)
GENERIC_TRANSFORMER = (20, 200)
# every GROBID model: 60 epochs, patience 5; the RNNs without recurrent dropout (DeLFT 0.4.6's 0.5
# scored 88 on date where 0.0 scores 97: compat.md; DeLFT 1.2's 0.5 has no effect in torch)
COMMON_DEFAULTS = {"max_epoch": 60, "patience": 5}
RNN_ONLY_DEFAULTS = {"recurrent_dropout": 0.0}


def model_defaults(model, uses_transformer):
    """The ``Sequence`` field defaults of ``model`` for the RNN or the transformer family.

    >>> model_defaults("header", False)["max_epoch"], model_defaults("software-mention", True)["batch_size"]
    (80, 8)
    """
    table = TRANSFORMER_DEFAULTS if uses_transformer else RNN_DEFAULTS
    values = table.get(model) or next(
        (v for k, v in table.items() if k.endswith("*") and model.startswith(k[:-1])),
        GENERIC_TRANSFORMER if uses_transformer else GENERIC_RNN)
    defaults = dict(COMMON_DEFAULTS, batch_size=values[0], max_sequence_length=values[1])
    if len(values) > 2:
        defaults["max_epoch"] = values[2]
    if not uses_transformer:
        defaults.update(RNN_ONLY_DEFAULTS)
    return defaults


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
        raise ConfigurationError(f"no --input given and no {folder}/{model}-YYMMDD.train[.gz]")
    return max(candidates)[2]


def model_name(model, architecture, suffix, prefixed):
    """``[grobid-]<model>-<architecture>[-<suffix>]``: without the prefix under ``--output`` (the
    folder name GROBID loads), with it in delft's default models directory."""
    if suffix is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", suffix):
        raise ConfigurationError(f"--suffix {suffix!r}: letters, digits, '.', '_' and '-' only")
    name = f"{GROBID_PREFIX if prefixed else ''}{model}-{architecture}"
    return f"{name}-{suffix}" if suffix else name


def parser():
    result = common.new_parser("Train, evaluate or apply a GROBID sequence labelling model.")
    result.add_argument("model", help=f"the model name, e.g. {', '.join(MODELS)}")
    common.add_common_options(result)
    result.add_argument("--suffix", default=None,
                        help="appended to the model name: <model>-<architecture>-<suffix>")
    return result


@common.user_errors_are_one_line
def main(argv=None):
    args = common.parse(parser(), argv)
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file

    kwargs = common.model_options(args, model_defaults(args.model, False),
                                  model_defaults(args.model, True))
    name = model_name(args.model, args.architecture, args.suffix, prefixed=args.output is None)
    if args.action in ("eval", "tag") or args.incremental:
        # the model delft trained (prefixed) or the one GROBID's --output layout holds
        folder = args.input_model or args.models_dir
        names = [model_name(args.model, args.architecture, args.suffix, prefixed=p)
                 for p in (True, False)]
        name = next((n for n in names if os.path.isdir(os.path.join(folder, n))), name)
    if args.action == "tag":
        if not args.input:
            raise ConfigurationError("tag needs --input (a GROBID feature matrix file)")
        common.check_matrix_file(args.input, "--input")

    def read_sets():
        if args.action == "tag":
            return common.DataSets()
        path = args.input
        if path is None:
            path = default_input(args.model)
            logging.getLogger(__name__).info("using the newest training file: %s", path)
        data = load_data_and_labels_crf_file(path)
        if args.action == "eval":
            return common.DataSets(test=data, test_file=path)
        return common.DataSets(train=data)

    def tag(model):
        model.tag_file(args.input, args.output_format, None, batch_size=args.batch_size,
                       multi_gpu=args.multi_gpu, input_format="crf")

    common.run_action(args, name, read_sets, kwargs, tag)
    return 0


command = common.command_for(main)


if __name__ == "__main__":
    command()
