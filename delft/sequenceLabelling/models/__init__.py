"""Architectures by the names DeLFT users know, what each is made of, and the one function that
builds them."""
from dataclasses import dataclass

from delft.sequenceLabelling.preprocess import WordPreprocessor
from delft.sequenceLabelling.transformers.checkpoint import check_checkpoint, resolve_transformer
from delft.sequenceLabelling.transformers.preprocess import TransformerPreprocessor
from delft.utilities.errors import ConfigurationError, ModelLoadError
from delft.utilities.json_files import read_json_object


@dataclass(frozen=True)
class Architecture:
    """The parts of an architecture.

    Attributes:
        family: ``"rnn"`` (models/bilstm.py, models/bigru.py) or ``"transformer"``
            (models/transformer.py).
        crf: a CRF decodes the labels (else a softmax per word).
        features: the model reads categorical feature columns (GROBID's layout features).
        chars: the model reads each word's characters.
        char_encoder: how the characters of a word are encoded: ``"lstm"`` (a char BiLSTM) or
            ``"cnn"`` (a char CNN).
        casing: the model reads each word's casing class (DeLFT's casing embedding).
        recurrent: the RNN family's word encoder: ``"lstm"`` (one BiLSTM) or ``"gru"`` (two
            stacked BiGRUs).
    """

    family: str
    crf: bool
    features: bool
    chars: bool
    char_encoder: str = "lstm"
    casing: bool = False
    recurrent: str = "lstm"

    @property
    def uses_transformer(self) -> bool:
        """Whether a keras-hub transformer encodes the words (BERT_CRF and the like)."""
        return self.family == "transformer"


def _rnn(crf, features=False, char_encoder="lstm", casing=False, recurrent="lstm"):
    return Architecture("rnn", crf=crf, features=features, chars=True, char_encoder=char_encoder,
                        casing=casing, recurrent=recurrent)


def _transformer(crf, features=False, chars=False):
    return Architecture("transformer", crf=crf, features=features, chars=chars)


# ChainCRF is DeLFT's name for the same linear-chain CRF, with start and end energies
# (tests/test_crf.py computes DeLFT's ChainCRF from its definition and compares)
ARCHITECTURES = {
    "BidLSTM": _rnn(crf=False),
    "BidLSTM_CRF": _rnn(crf=True),
    "BidLSTM_ChainCRF": _rnn(crf=True),
    "BidLSTM_CRF_FEATURES": _rnn(crf=True, features=True),
    "BidLSTM_ChainCRF_FEATURES": _rnn(crf=True, features=True),
    "BidLSTM_CNN": _rnn(crf=False, char_encoder="cnn", casing=True),
    "BidLSTM_CNN_CRF": _rnn(crf=True, char_encoder="cnn"),
    "BidGRU_CRF": _rnn(crf=True, recurrent="gru"),
    "BidLSTM_CRF_CASING": _rnn(crf=True, casing=True),
    "BERT": _transformer(crf=False),
    "BERT_CRF": _transformer(crf=True),
    "BERT_ChainCRF": _transformer(crf=True),
    "BERT_FEATURES": _transformer(crf=False, features=True),
    "BERT_CRF_FEATURES": _transformer(crf=True, features=True),
    "BERT_ChainCRF_FEATURES": _transformer(crf=True, features=True),
    "BERT_CRF_CHAR": _transformer(crf=True, chars=True),
    "BERT_CRF_CHAR_FEATURES": _transformer(crf=True, features=True, chars=True),
}

# preprocessor.json's "kind" -> the class that reads it
PREPROCESSORS = {WordPreprocessor.kind: WordPreprocessor,
                 TransformerPreprocessor.kind: TransformerPreprocessor}


def architecture(name: str) -> Architecture:
    """The parts of the architecture ``name``; a one-line error naming the known ones.

    >>> architecture("BidLSTM_CRF_FEATURES").features
    True
    """
    if name not in ARCHITECTURES:
        raise ConfigurationError(f"unknown architecture {name!r}; known: "
                                 f"{', '.join(sorted(ARCHITECTURES))}")
    return ARCHITECTURES[name]


def check_resources(model_config):
    """Fail now, in one line, when what ``model_config`` names cannot be found (a transformer
    checkpoint), rather than after the data is read."""
    if architecture(model_config.architecture).uses_transformer and \
            model_config.transformer_name:
        check_checkpoint(resolve_transformer(model_config.transformer_name))


def new_preprocessor_class(architecture_name):
    """The class of the preprocessor that the architecture ``architecture_name`` takes.

    >>> new_preprocessor_class("BERT_CRF").kind, new_preprocessor_class("BidLSTM_CRF").kind
    ('transformer', 'bilstm')
    """
    return TransformerPreprocessor if architecture(architecture_name).uses_transformer \
        else WordPreprocessor


def new_preprocessor(model_config):
    """An empty preprocessor for ``model_config``'s architecture."""
    parts = architecture(model_config.architecture)
    if parts.uses_transformer:
        resolve_transformer(model_config.transformer_name)  # none given: one line saying so
        return TransformerPreprocessor(model_config.transformer_name,
                                       model_config.max_sequence_length,
                                       model_config.window_stride, parts.chars,
                                       model_config.max_char_length,
                                       model_config.features_indices,
                                       model_config.features_vocabulary_size)
    return WordPreprocessor(model_config.max_char_length, model_config.features_indices,
                            model_config.features_vocabulary_size, uses_casing=parts.casing)


def load_preprocessor(path):
    """Load ``preprocessor.json`` whatever the model family that wrote it."""
    try:
        values = read_json_object(path)
        return PREPROCESSORS[values.get("kind", WordPreprocessor.kind)].from_dict(values)
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: missing preprocessor file") from None
    except (ValueError, KeyError, TypeError, AttributeError) as error:  # AttributeError: not an object
        raise ModelLoadError(f"{path}: corrupt preprocessor file ({error})") from None


def build_model(model_config, preprocessor):
    """Build (not train) the model ``model_config.architecture``; call inside ``strategy.scope()``."""
    parts = architecture(model_config.architecture)
    if parts.features and not preprocessor.feature_index:
        raise ConfigurationError(f"{model_config.architecture} needs feature columns in the input")
    if parts.family == "rnn" and parts.recurrent == "gru":
        from delft.sequenceLabelling.models.bigru import build_bigru

        return build_bigru(model_config, preprocessor, parts)
    if parts.family == "rnn":
        from delft.sequenceLabelling.models.bilstm import build_bilstm

        return build_bilstm(model_config, preprocessor, parts)
    from delft.sequenceLabelling.models.transformer import build_transformer_model

    return build_transformer_model(model_config, preprocessor, parts)
