"""Export a saved model for serving without Python's delft: GROBID's ONNX bundle, or a SavedModel.

    python -m delft.applications.export MODEL_DIR --format onnx --output OUT \
        [--max-sequence-length N] [--embeddings-name NAME]
    python -m delft.applications.export MODEL_DIR --format savedmodel --output OUT

``MODEL_DIR`` is a saved model folder (``.../grobid-date-BidLSTM_CRF/``). The ONNX bundle is the
folder GROBID's Java engine loads as ``grobid-home/models/<model>-<architecture>.onnx/``; the
SavedModel goes in ``OUT/1/`` (TF Serving's layout) with ``OUT/vocab.json``. ``OUT`` is written
beside itself first and renamed when complete. Details: ``doc/export.md``.
"""
import os
import sys

if __package__ in (None, ""):  # run as a script: python delft/applications/export.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from delft.applications import common  # noqa: E402


def parser():
    result = common.new_parser("Export a saved delft model: the ONNX bundle GROBID's Java engine "
                               "loads, or a TensorFlow SavedModel with the CRF decoding inside.")
    result.add_argument("model_dir", help="saved model folder (config.json, preprocessor.json, "
                                          "model.weights.h5)")
    result.add_argument("--format", dest="export_format", required=True,
                        choices=["onnx", "savedmodel"])
    result.add_argument("--output", required=True, help="folder to write (replaced if present)")
    result.add_argument("--max-sequence-length", type=int, default=None,
                        help="onnx: the bundle's maxSequenceLength (default: the model's); "
                             "GROBID pads every call to it and labels longer sequences in "
                             "independent chunks of it")
    result.add_argument("--embeddings-name", default=None,
                        help="onnx: the bundle's embeddingsName, the LMDB folder GROBID opens "
                             "under <delft.install>/data/db/ (default: the model's embeddings; "
                             "'none' without word embeddings)")
    common.add_verbose_option(result)
    return result


@common.user_errors_are_one_line
def main(argv=None):
    args = parser().parse_args(argv)
    from delft.export import export_model

    written = export_model(args.model_dir, args.output, args.export_format,
                           args.max_sequence_length, args.embeddings_name)
    print(f"{args.export_format} export of {args.model_dir} written to {written}", flush=True)
    return 0


command = common.command_for(main)


if __name__ == "__main__":
    command()
