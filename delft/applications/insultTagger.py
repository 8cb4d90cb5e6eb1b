"""Train and apply the insult / threat recogniser on TEI data (``<rs type="insult">...</rs>``).

    python delft/applications/insultTagger.py train [--input FILE.xml] [--valid FILE.xml] [--multi-gpu]
    python delft/applications/insultTagger.py train_eval --input FILE.xml [--test FILE.xml]
    python delft/applications/insultTagger.py tag [--file-in texts.txt] [--output-format json|iob|TEI]

Without ``--input`` the model is trained on the shared toxic comments data, ``corrected.xml``, and
early-stopped on its ``valid.xml`` (as DeLFT); with ``--input`` and no ``--valid``, on 10% of the
input. train_eval evaluates on ``--test``, else on 10% of the input held out first. tag labels the
lines of ``--file-in`` (one text per line), else a few example sentences, and writes to
``--file-out`` or stdout. Models are saved as ``<output>/insult-<architecture>/``.
"""
import json
import os
import sys

if __package__ in (None, ""):  # run as a script: python delft/applications/insultTagger.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from delft.applications import common  # noqa: E402
from delft.utilities.errors import ConfigurationError  # noqa: E402

# DeLFT's insultTagger defaults: batch 20, max length 300, 50 epochs, patience 5 (transformers 10/3)
RNN_DEFAULTS = {"batch_size": 20, "max_sequence_length": 300, "max_epoch": 50, "patience": 5}
TRANSFORMER_DEFAULTS = {"batch_size": 10, "max_sequence_length": 300, "max_epoch": 3, "patience": 5}
EXAMPLES = ["This is a gentle test.",
            "you're a moronic wimp who is too lazy to do research! die in hell !!",
            "This is a fucking test."]


def shared_toxic_file(name):
    from delft.utilities.data_path import shared_data_file

    return str(shared_data_file("sequenceLabelling", "toxic", name))


def read_tei(path, option):
    from delft.sequenceLabelling.reader import load_data_and_labels_xml_file

    common.existing_path(path, option)
    return (*load_data_and_labels_xml_file(path), None)


def write_tagged(model, texts, output_format, file_out, multi_gpu, batch_size=None):
    """Tag ``texts`` (a list of strings) and write them in ``output_format`` to ``file_out`` or
    stdout, once complete (a failure leaves an existing ``file_out`` as it was)."""
    from delft.sequenceLabelling.output import iob_lines
    from delft.utilities.atomic import replaced_file

    result = model.tag(texts, output_format if output_format != "iob" else None,
                       batch_size=batch_size, multi_gpu=multi_gpu)
    if output_format == "json":
        text = json.dumps(result, indent=4, ensure_ascii=False) + "\n"
    elif output_format == "iob":
        text = "".join(iob_lines([t for t, _ in pairs], [label for _, label in pairs])
                       for pairs in result)
    else:
        text = result
    with replaced_file(file_out) as out:
        out.write(text)


def parser():
    result = common.new_parser("Train or apply the insult / threat recogniser (TEI data).")
    common.add_common_options(result)
    result.add_argument("--valid", default=None, help="validation file (TEI)")
    result.add_argument("--test", default=None, help="evaluation file of train_eval and eval (TEI)")
    return common.add_tag_options(result)


@common.user_errors_are_one_line
def main(argv=None):
    args = common.parse(parser(), argv)
    kwargs = common.model_options(args, RNN_DEFAULTS, TRANSFORMER_DEFAULTS)
    model_name = f"insult-{args.architecture}"

    def read_sets():
        if args.action in ("train", "train_eval"):
            train_path, valid_path = args.input, args.valid
            if train_path is None:
                train_path = shared_toxic_file("corrected.xml")
                if valid_path is None and os.path.isfile(shared_toxic_file("valid.xml")):
                    valid_path = shared_toxic_file("valid.xml")
            return common.DataSets(
                train=read_tei(train_path, "--input"),
                valid=None if valid_path is None else read_tei(valid_path, "--valid"),
                test=read_tei(args.test, "--test") if args.action == "train_eval" and args.test
                else None)
        if args.action == "eval":
            return common.DataSets(test=read_tei(test_path, test_option))
        return common.DataSets()

    if args.action == "eval":
        test_path, test_option = (args.test, "--test") if args.test else (args.input, "--input")
        if not test_path:
            raise ConfigurationError("eval needs --test FILE (TEI with <rs type=...> annotations)")
    elif args.action == "tag" and args.file_in:
        common.check_text_file(args.file_in, "--file-in")
    if args.action == "tag" and args.file_out:
        common.check_output_file(args.file_out, "--file-out")

    def tag(model):
        if args.file_in:
            model.tag_file(args.file_in, args.output_format, args.file_out,
                           batch_size=args.batch_size, multi_gpu=args.multi_gpu)
        else:
            write_tagged(model, EXAMPLES, args.output_format, args.file_out, args.multi_gpu,
                         args.batch_size)

    common.run_action(args, model_name, read_sets, kwargs, tag)
    return 0


command = common.command_for(main)


if __name__ == "__main__":
    command()
