"""Tiny random BERT, DistilBERT and RoBERTa checkpoints in Hugging Face layout, for tests.

Each writer puts ``config.json``, ``model.safetensors`` (parameter names as Hugging Face writes
them) and the tokenizer files into a directory. Weights come from a seeded numpy generator, so the
same call always writes the same checkpoint: ``tests/data/make_transformer_reference.py`` loads
these very checkpoints in PyTorch to compute the reference hidden states kept in
``tests/data/transformer_reference.npz``.

Only numpy, safetensors and transformers' tokenizers are needed (no torch, no network).

>>> import tempfile
>>> path = write_tiny_checkpoint("bert", tempfile.mkdtemp())
>>> sorted(os.listdir(path))[:2]
['config.json', 'model.safetensors']
"""
import json
import os

import numpy as np

HIDDEN = 32
LAYERS = 2
HEADS = 4
INTERMEDIATE = 64
MAX_POSITIONS = 64
SEED = 20240611

# a small WordPiece vocabulary: specials, characters, continuation pieces and a few words
_WORDS = ["the", "of", "and", "in", "on", "june", "july", "may", "march", "2005", "2006", "19",
          "20", "day", "year", "month", "date", "received", "accepted", "un", "##believ",
          "##ably", "##s", "##ed", "##ing", "##th", "1st", "2nd"]
_CHARS = list("abcdefghijklmnopqrstuvwxyz0123456789") + list(".,;:-/()[]'\"!?&%")
BERT_VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _CHARS +
              ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"] + _WORDS)

# byte-level BPE for RoBERTa: specials, the 256 byte symbols, a few merges
_ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
_ROBERTA_MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("Ġ", "J"), ("u", "n"), ("Ġ", "2"),
                   ("0", "0"), ("Ġ2", "00"), ("Ġ", "o"), ("Ġo", "f"), ("Ġ", "M"), ("a", "y"),
                   ("ĠM", "ay"), ("e", "d"), ("Ġ", "1"), ("Ġ", "a"), ("n", "d"), ("Ġa", "nd")]


def _byte_alphabet():
    from tokenizers import pre_tokenizers

    return sorted(pre_tokenizers.ByteLevel.alphabet())


def roberta_vocab():
    vocab = _ROBERTA_SPECIALS + _byte_alphabet() + ["".join(pair) for pair in _ROBERTA_MERGES]
    return {token: i for i, token in enumerate(vocab)}


def _config(model_type, vocab_size, hidden_act="gelu"):
    if model_type == "distilbert":
        return {"architectures": ["DistilBertModel"], "model_type": "distilbert",
                "vocab_size": vocab_size, "dim": HIDDEN, "n_layers": LAYERS, "n_heads": HEADS,
                "hidden_dim": INTERMEDIATE, "activation": hidden_act, "dropout": 0.1,
                "attention_dropout": 0.1, "max_position_embeddings": MAX_POSITIONS,
                "sinusoidal_pos_embds": False, "pad_token_id": 0, "initializer_range": 0.02,
                "qa_dropout": 0.1, "seq_classif_dropout": 0.2, "tie_weights_": True}
    config = {"vocab_size": vocab_size, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "intermediate_size": INTERMEDIATE,
              "hidden_act": hidden_act, "hidden_dropout_prob": 0.1,
              "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
              "position_embedding_type": "absolute"}
    if model_type == "roberta":
        config.update(architectures=["RobertaModel"], model_type="roberta",
                      max_position_embeddings=MAX_POSITIONS + 2, type_vocab_size=1,
                      layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    else:
        config.update(architectures=["BertModel"], model_type=model_type,
                      max_position_embeddings=MAX_POSITIONS, type_vocab_size=2,
                      layer_norm_eps=1e-12, pad_token_id=0)
    return config


def _weights(model_type, config, rng):
    """Random parameters under the names Hugging Face's ``*Model.save_pretrained`` writes."""
    def normal(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def layer_norm(prefix, out):
        out[prefix + ".weight"] = (1.0 + normal(HIDDEN, scale=0.1)).astype(np.float32)
        out[prefix + ".bias"] = normal(HIDDEN, scale=0.1)

    def dense(prefix, n_out, n_in, out):
        out[prefix + ".weight"] = normal(n_out, n_in)  # torch Linear: [out, in]
        out[prefix + ".bias"] = normal(n_out, scale=0.05)

    w = {}
    vocab = config["vocab_size"]
    if model_type == "distilbert":
        # as distilbert-base-* checkpoints store them (saved from the masked-LM head model)
        p = "distilbert."
        w[p + "embeddings.word_embeddings.weight"] = normal(vocab, HIDDEN)
        w[p + "embeddings.position_embeddings.weight"] = normal(MAX_POSITIONS, HIDDEN)
        layer_norm(p + "embeddings.LayerNorm", w)
        for i in range(LAYERS):
            q = f"{p}transformer.layer.{i}."
            for name in ("q_lin", "k_lin", "v_lin", "out_lin"):
                dense(q + "attention." + name, HIDDEN, HIDDEN, w)
            layer_norm(q + "sa_layer_norm", w)
            dense(q + "ffn.lin1", INTERMEDIATE, HIDDEN, w)
            dense(q + "ffn.lin2", HIDDEN, INTERMEDIATE, w)
            layer_norm(q + "output_layer_norm", w)
        return w
    # BERT as bert-base-* stores it (prefix "bert."), RoBERTa as RobertaModel does (no prefix)
    p = "bert." if model_type == "bert" else ""
    w[p + "embeddings.word_embeddings.weight"] = normal(vocab, HIDDEN)
    w[p + "embeddings.position_embeddings.weight"] = normal(config["max_position_embeddings"],
                                                            HIDDEN)
    w[p + "embeddings.token_type_embeddings.weight"] = normal(config["type_vocab_size"], HIDDEN)
    layer_norm(p + "embeddings.LayerNorm", w)
    for i in range(LAYERS):
        q = f"{p}encoder.layer.{i}."
        for name in ("query", "key", "value"):
            dense(q + "attention.self." + name, HIDDEN, HIDDEN, w)
        dense(q + "attention.output.dense", HIDDEN, HIDDEN, w)
        layer_norm(q + "attention.output.LayerNorm", w)
        dense(q + "intermediate.dense", INTERMEDIATE, HIDDEN, w)
        dense(q + "output.dense", HIDDEN, INTERMEDIATE, w)
        layer_norm(q + "output.LayerNorm", w)
    dense(p + "pooler.dense", HIDDEN, HIDDEN, w)
    return w


def _write_tokenizer(model_type, path):
    if model_type == "roberta":
        from transformers import RobertaTokenizerFast

        vocab = roberta_vocab()
        merges = [tuple(pair) for pair in _ROBERTA_MERGES]
        tokenizer = RobertaTokenizerFast(vocab=vocab, merges=merges, add_prefix_space=True,
                                         model_max_length=MAX_POSITIONS)
        tokenizer.save_pretrained(path)
        return len(vocab)
    from transformers import BertTokenizerFast

    vocab_file = os.path.join(path, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as out:
        out.write("\n".join(BERT_VOCAB) + "\n")
    tokenizer = BertTokenizerFast(vocab=vocab_file, do_lower_case=True,
                                  model_max_length=MAX_POSITIONS)
    tokenizer.save_pretrained(path)
    return len(BERT_VOCAB)


def write_tiny_checkpoint(model_type, path, seed=SEED, hidden_act="gelu", weights=True):
    """Write a 2-layer, hidden-32 random ``model_type`` checkpoint into ``path``; returns ``path``.

    ``model_type`` is "bert", "distilbert" or "roberta" (any other name writes a BERT-shaped
    checkpoint that claims that model type, to test the unsupported-type error).
    """
    from safetensors.numpy import save_file

    os.makedirs(path, exist_ok=True)
    vocab_size = _write_tokenizer("roberta" if model_type == "roberta" else "bert", path)
    config = _config(model_type, vocab_size, hidden_act)
    with open(os.path.join(path, "config.json"), "w") as out:
        json.dump(config, out, indent=1)
    if weights:
        rng = np.random.default_rng(seed + sum(map(ord, model_type)))
        save_file(_weights(model_type, config, rng), os.path.join(path, "model.safetensors"))
    return path


def reference_inputs(model_type):
    """Two rows of token ids (the second padded) and their mask, fixed for the reference."""
    vocab_size = len(roberta_vocab()) if model_type == "roberta" else len(BERT_VOCAB)
    rng = np.random.default_rng(7)
    first_id, pad_id = (5, 1) if model_type == "roberta" else (5, 0)
    ids = rng.integers(first_id, vocab_size, size=(2, 12)).astype(np.int32)
    mask = np.ones_like(ids)
    ids[1, 8:] = pad_id
    mask[1, 8:] = 0
    cls, sep = (0, 2) if model_type == "roberta" else (2, 3)
    ids[:, 0] = cls
    ids[0, 11] = sep
    ids[1, 7] = sep
    return ids, mask


# MiniLM reference sentences (pre-tokenised words, as delft feeds them)
MINILM_SENTENCES = [["Received", "12", "June", "2005", ";", "accepted", "3rd", "July"],
                    ["Published", "online", ":", "March", "2006"]]
