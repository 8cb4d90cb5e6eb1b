"""Our weight mappings for the families keras-hub 0.32 has a backbone for but no Hugging Face
converter: ELECTRA and DeBERTa-v3 (``model_type`` "deberta-v2"). Each returns what keras-hub's
converter modules offer (``backbone_cls``, ``convert_backbone_config``, ``convert_weights``), so
:func:`.encoder.load_encoder` treats all families alike.

ELECTRA is BERT with an embedding width of its own and a projection to the hidden width: keras-hub's
``ElectraBackbone`` names its layers as ``BertBackbone`` does, so keras-hub's BERT converter ports
it, the projection aside. DeBERTa-v3's disentangled attention is keras-hub's ``DebertaV3Backbone``,
whose relative-position buckets equal Hugging Face's for every distance of a 512-subtoken row
(measured); the settings it hard-codes are checked in :mod:`.checkpoint` (``FIXED_SETTINGS``).

>>> from delft.sequenceLabelling.transformers.checkpoint import read_encoder_config
>>> config = read_encoder_config(tiny_checkpoint("deberta-v2"))
>>> deberta_v3().convert_backbone_config(config)["bucket_size"]
8
"""
from types import SimpleNamespace

import numpy as np

from delft.sequenceLabelling.transformers.encoder import keras_hub_module


def _port_dense(loader, layer, key):
    """A torch ``Linear`` ([out, in]) onto a Keras Dense or EinsumDense (in, then its out shape)."""
    loader.port_weight(layer.kernel, key + ".weight",
                       hook_fn=lambda tensor, shape: np.reshape(np.transpose(tensor), shape))
    loader.port_weight(layer.bias, key + ".bias",
                       hook_fn=lambda tensor, shape: np.reshape(tensor, shape))


def _port_norm(loader, layer, key):
    loader.port_weight(layer.gamma, key + ".weight")
    loader.port_weight(layer.beta, key + ".bias")


def electra():
    """keras-hub's ``ElectraBackbone`` from a Hugging Face ELECTRA (discriminator) checkpoint."""
    bert = keras_hub_module("keras_hub.src.utils.transformers.convert_bert")

    def convert_backbone_config(config):
        return {"vocab_size": config["vocab_size"], "num_layers": config["num_hidden_layers"],
                "num_heads": config["num_attention_heads"], "hidden_dim": config["hidden_size"],
                "embedding_dim": config.get("embedding_size", config["hidden_size"]),
                "intermediate_dim": config["intermediate_size"],
                "max_sequence_length": config["max_position_embeddings"]}

    def convert_weights(backbone, loader, config):
        bert.convert_weights(backbone, loader, config)  # ELECTRA has no pooler: skipped
        if backbone.embedding_dim != backbone.hidden_dim:
            _port_dense(loader, backbone.get_layer("embeddings_projection"), "embeddings_project")

    return SimpleNamespace(
        backbone_cls=keras_hub_module("keras_hub.src.models.electra.electra_backbone")
        .ElectraBackbone, convert_backbone_config=convert_backbone_config,
        convert_weights=convert_weights)


def deberta_v3():
    """keras-hub's ``DebertaV3Backbone`` from a Hugging Face DeBERTa-v3 checkpoint."""

    def convert_backbone_config(config):
        relative = int(config.get("max_relative_positions", -1))
        return {"vocabulary_size": config["vocab_size"], "num_layers": config["num_hidden_layers"],
                "num_heads": config["num_attention_heads"], "hidden_dim": config["hidden_size"],
                "intermediate_dim": config["intermediate_size"],
                # the largest distance of the log buckets (Hugging Face's max_relative_positions)
                "max_sequence_length": relative if relative > 0 else
                config["max_position_embeddings"],
                "bucket_size": config["position_buckets"]}

    def convert_weights(backbone, loader, config):
        loader.port_weight(backbone.token_embedding.embeddings, "embeddings.word_embeddings.weight")
        _port_norm(loader, backbone.embeddings_layer_norm, "embeddings.LayerNorm")
        relative = backbone.relative_embeddings
        loader.port_weight(relative.rel_embeddings, "encoder.rel_embeddings.weight")
        _port_norm(loader, relative.layer_norm, "encoder.LayerNorm")
        for i, layer in enumerate(backbone.transformer_layers):
            prefix = f"encoder.layer.{i}."
            attention = layer._self_attention_layer
            for ours, theirs in ((attention._query_dense, "query_proj"),
                                 (attention._key_dense, "key_proj"),
                                 (attention._value_dense, "value_proj")):
                _port_dense(loader, ours, prefix + "attention.self." + theirs)
            _port_dense(loader, attention._output_dense, prefix + "attention.output.dense")
            _port_norm(loader, layer._self_attention_layer_norm,
                       prefix + "attention.output.LayerNorm")
            _port_dense(loader, layer._feedforward_intermediate_dense,
                        prefix + "intermediate.dense")
            _port_dense(loader, layer._feedforward_output_dense, prefix + "output.dense")
            _port_norm(loader, layer._feedforward_layer_norm, prefix + "output.LayerNorm")

    return SimpleNamespace(
        backbone_cls=keras_hub_module("keras_hub.src.models.deberta_v3.deberta_v3_backbone")
        .DebertaV3Backbone, convert_backbone_config=convert_backbone_config,
        convert_weights=convert_weights)
