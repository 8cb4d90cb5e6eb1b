"""Export a saved model for serving without delft: GROBID's ONNX bundle, or a TF SavedModel.

``export_model(model_dir, output, "onnx")`` writes the folder GROBID's Java ONNX engine loads
(:mod:`~delft.export.onnx_bundle`); ``"savedmodel"`` a SavedModel with the
Viterbi decoding in the graph (:mod:`~delft.export.saved_model`). See
``doc/export.md``. tf2onnx and onnx are only needed for ONNX (``pip install delft[export]``).
"""
from typing import Optional

from delft.export.common import load_model_dir
from delft.utilities.errors import ConfigurationError

FORMATS = ("onnx", "savedmodel")


def export_model(model_dir: str, output: str, export_format: str,
                 max_sequence_length: Optional[int] = None,
                 embeddings_name: Optional[str] = None) -> str:
    """Export the model saved in ``model_dir`` to ``output`` in ``export_format``.

    Args:
        model_dir: a saved model folder (``.../date-BidLSTM_CRF/``).
        output: the folder to write; replaced atomically, never left half-written.
        export_format: ``"onnx"`` or ``"savedmodel"``.
        max_sequence_length: ONNX only: the bundle's ``maxSequenceLength`` (default: the model's).
        embeddings_name: ONNX only: the bundle's ``embeddingsName`` (default: the model's, or
            ``"none"`` for a model without word embeddings).

    Returns:
        The path written (the bundle folder, or the SavedModel's version folder).

    Raises:
        ConfigurationError: an unknown format, options of the other format, or a model that
            format cannot hold.
        ModelLoadError: a missing or broken model folder.
    """
    if export_format not in FORMATS:
        raise ConfigurationError(f"unknown export format {export_format!r}; known: "
                                 f"{', '.join(FORMATS)}")
    if export_format == "savedmodel" and (max_sequence_length or embeddings_name):
        raise ConfigurationError("--max-sequence-length and --embeddings-name are ONNX bundle "
                                 "options: a SavedModel takes any length and no embeddings name")
    sequence = load_model_dir(model_dir)
    if export_format == "onnx":
        from delft.export.onnx_bundle import export_onnx_bundle

        return export_onnx_bundle(model_dir, output, max_sequence_length, embeddings_name,
                                  sequence=sequence)
    from delft.export.saved_model import export_saved_model

    return export_saved_model(model_dir, output, sequence=sequence)


__all__ = ["FORMATS", "export_model", "load_model_dir"]
