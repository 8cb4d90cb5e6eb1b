"""Train, evaluate and apply GROBID's sequence labelling models.

    python delft/applications/grobidTagger.py date train_eval [--input FILE] [--multi-gpu]
    python delft/applications/grobidTagger.py date tag --input FILE.crf --output-format iob

Without ``--input`` the newest ``data/sequenceLabelling/grobid/<model>/<model>-*.train`` is used.
Models are saved as ``<output>/grobid-<model>-<architecture>/``.
"""
import glob
import os
import sys

if __package__ in (None, ""):  # run as a script: python delft/applications/grobidTagger.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from delft.applications import common  # noqa: E402

MODELS = ["affiliation-address", "citation", "date", "figure", "fulltext", "funding-acknowledgement",
          "header", "name-citation", "name-header", "patent", "reference-segmenter", "segmentation",
          "software", "table", "dataseer", "ner", "astro", "quantities", "units", "values", "superconductors"]

# (batch size, max sequence length[, max epoch]) per model, as DeLFT sets them
RNN_DEFAULTS = {"date": (60, 50), "citation": (30, 500), "header": (9, 2500, 80),
                "affiliation-address": (20, 600), "reference-segmenter": (5, 3000)}
TRANSFORMER_DEFAULTS = {"date": (80, 30), "citation": (20, 200), "header": (6, 512),
                        "affiliation-address": (20, 200)}
DATA_DIR = os.path.join("data", "sequenceLabelling", "grobid")


def model_defaults(model, uses_transformer):
    table = TRANSFORMER_DEFAULTS if uses_transformer else RNN_DEFAULTS
    values = table.get(model, (20, common.TRANSFORMER_MAX_LENGTH if uses_transformer else 3000))
    defaults = {"batch_size": values[0], "max_sequence_length": values[1]}
    if len(values) > 2:
        defaults["max_epoch"] = values[2]
    return defaults


def default_input(model):
    """The newest training file of ``model`` under data/sequenceLabelling/grobid/."""
    from delft.utilities.errors import ConfigurationError

    candidates = sorted(glob.glob(os.path.join(DATA_DIR, model, f"{model}-*.train")))
    if not candidates:
        raise ConfigurationError(f"no --input given and no {DATA_DIR}/{model}/{model}-*.train")
    return candidates[-1]


def parser():
    result = common.new_parser("Train, evaluate or apply a GROBID sequence labelling model.")
    result.add_argument("model", help=f"one of {', '.join(MODELS)}")
    return common.add_common_options(result)


@common.user_errors_are_one_line
def main(argv=None):
    args = parser().parse_args(argv)
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file

    kwargs = common.model_options(args, model_defaults(args.model, False),
                                  model_defaults(args.model, True))
    model_name = f"grobid-{args.model}-{args.architecture}"
    input_path = args.input

    def data():
        path = input_path or default_input(args.model)
        print(f"reading {path}", flush=True)
        return load_data_and_labels_crf_file(path)

    def tag(model):
        if not input_path:
            from delft.utilities.errors import ConfigurationError

            raise ConfigurationError("tag needs --input (a GROBID feature matrix file)")
        model.tag_file(input_path, args.output_format, None, multi_gpu=args.multi_gpu,
                       input_format="crf")

    common.run_action(args, model_name, data, kwargs, tag)
    return 0


command = common.command_for(main)


if __name__ == "__main__":
    command()
