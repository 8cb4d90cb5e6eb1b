"""Architectures by the names DeLFT users know, and the one function that builds them."""
from delft.utilities.errors import ConfigurationError

# name -> (family, uses a CRF, uses feature columns); the family names the preprocessor too
ARCHITECTURES = {
    "BidLSTM_CRF": ("bilstm", True, False),
    "BidLSTM_ChainCRF": ("bilstm", True, False),
    "BidLSTM": ("bilstm", False, False),
    "BidLSTM_CRF_FEATURES": ("bilstm", True, True),
    "BidLSTM_ChainCRF_FEATURES": ("bilstm", True, True),
    # transformer family (models/transformer.py); *_CHAR adds the char BiLSTM per word
    "BERT": ("transformer", False, False),
    "BERT_CRF": ("transformer", True, False),
    "BERT_FEATURES": ("transformer", False, True),
    "BERT_CRF_FEATURES": ("transformer", True, True),
    "BERT_CRF_CHAR": ("transformer", True, False),
    "BERT_CRF_CHAR_FEATURES": ("transformer", True, True),
    "BERT_ChainCRF": ("transformer", True, False),
    "BERT_ChainCRF_FEATURES": ("transformer", True, True),
}


def architecture_family(architecture):
    if architecture not in ARCHITECTURES:
        raise ConfigurationError(f"unknown architecture {architecture!r}; known: "
                                 f"{', '.join(sorted(ARCHITECTURES))}")
    return ARCHITECTURES[architecture][0]


def uses_features(architecture):
    architecture_family(architecture)
    return ARCHITECTURES[architecture][2]


def build_model(model_config, preprocessor):
    """Build (not train) the model ``model_config.architecture``; call inside ``strategy.scope()``."""
    family, use_crf, use_features = ARCHITECTURES[model_config.architecture]
    if family == "bilstm":
        from delft.sequenceLabelling.models.bilstm import build_bilstm

        return build_bilstm(model_config, preprocessor, use_crf, use_features)
    from delft.sequenceLabelling.models.transformer import build_transformer_model

    return build_transformer_model(model_config, preprocessor, use_crf, use_features)
