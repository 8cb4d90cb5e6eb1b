"""Tiny random checkpoints in Hugging Face layout, for tests: BERT, DistilBERT, RoBERTa,
XLM-RoBERTa, ELECTRA and DeBERTa-v3 (``model_type`` "deberta-v2", as Hugging Face names it).

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


# SentencePiece-style unigram pieces (XLM-RoBERTa, DeBERTa-v3): words, characters, a few suffixes
_UNIGRAM_PIECES = ([("\u2581" + w, -4.0) for w in _WORDS if not w.startswith("##")] +
                   [(w[2:], -5.0) for w in _WORDS if w.startswith("##")] + [("\u2581", -6.0)] +
                   [("\u2581" + c, -8.0) for c in _CHARS] + [(c, -9.0) for c in _CHARS] +
                   [(c, -9.5) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"])
# the special pieces of each family, in their id order, and the one appended last
_UNIGRAM_SPECIALS = {"xlm-roberta": (["<s>", "<pad>", "</s>", "<unk>"], "<mask>"),
                     "deberta-v2": (["[PAD]", "[CLS]", "[SEP]", "[UNK]"], "[MASK]")}
EMBEDDING = 16  # ELECTRA's embedding width, unlike its hidden width: the projection is exercised
BUCKETS = 8  # DeBERTa-v3's relative position buckets: 12 positions already reach the log buckets


def unigram_vocab(model_type):
    """The (piece, score) list of a unigram tokenizer, specials at the family's ids."""
    first, last = _UNIGRAM_SPECIALS[model_type]
    return [(t, 0.0) for t in first] + _UNIGRAM_PIECES + [(last, 0.0)]


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
    if model_type in ("roberta", "xlm-roberta"):
        config.update(architectures=["XLMRobertaModel" if model_type == "xlm-roberta" else
                                     "RobertaModel"], model_type=model_type,
                      max_position_embeddings=MAX_POSITIONS + 2, type_vocab_size=1,
                      layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    elif model_type == "deberta-v2":
        # the settings of microsoft/deberta-v3-base, smaller
        config.update(architectures=["DebertaV2Model"], model_type=model_type,
                      max_position_embeddings=MAX_POSITIONS, type_vocab_size=0,
                      layer_norm_eps=1e-7, pad_token_id=0, relative_attention=True,
                      max_relative_positions=-1, position_buckets=BUCKETS,
                      norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type="p2c|c2p",
                      position_biased_input=False)
        del config["position_embedding_type"]
    elif model_type == "electra":
        config.update(architectures=["ElectraModel"], model_type=model_type,
                      embedding_size=EMBEDDING, max_position_embeddings=MAX_POSITIONS,
                      type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0)
    else:
        config.update(architectures=["BertModel"], model_type=model_type,
                      max_position_embeddings=MAX_POSITIONS, type_vocab_size=2,
                      layer_norm_eps=1e-12, pad_token_id=0)
    return config


def _weights(model_type, config, rng):
    """Random parameters under the names Hugging Face's ``*Model.save_pretrained`` writes."""
    def normal(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def layer_norm(prefix, out, width=HIDDEN):
        out[prefix + ".weight"] = (1.0 + normal(width, scale=0.1)).astype(np.float32)
        out[prefix + ".bias"] = normal(width, scale=0.1)

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
    # as bert-base-*, xlm-roberta-base and electra-*-discriminator store them (with the prefix
    # of their model class), RoBERTa as RobertaModel does (no prefix)
    p = _PREFIXES.get(model_type, "")
    width = config.get("embedding_size", HIDDEN)
    w[p + "embeddings.word_embeddings.weight"] = normal(vocab, width)
    if model_type == "deberta-v2":  # relative positions only: no position embeddings
        w[p + "encoder.rel_embeddings.weight"] = normal(2 * BUCKETS, HIDDEN)
        layer_norm(p + "encoder.LayerNorm", w)
    else:
        w[p + "embeddings.position_embeddings.weight"] = normal(
            config["max_position_embeddings"], width)
        w[p + "embeddings.token_type_embeddings.weight"] = normal(config["type_vocab_size"],
                                                                  width)
    layer_norm(p + "embeddings.LayerNorm", w, width)
    if width != HIDDEN:
        dense(p + "embeddings_project", HIDDEN, width, w)
    for i in range(LAYERS):
        q = f"{p}encoder.layer.{i}."
        names = ("query_proj", "key_proj", "value_proj") if model_type == "deberta-v2" else (
            "query", "key", "value")
        for name in names:
            dense(q + "attention.self." + name, HIDDEN, HIDDEN, w)
        dense(q + "attention.output.dense", HIDDEN, HIDDEN, w)
        layer_norm(q + "attention.output.LayerNorm", w)
        dense(q + "intermediate.dense", INTERMEDIATE, HIDDEN, w)
        dense(q + "output.dense", HIDDEN, INTERMEDIATE, w)
        layer_norm(q + "output.LayerNorm", w)
    if model_type not in ("electra", "deberta-v2"):  # the two have no pooler
        dense(p + "pooler.dense", HIDDEN, HIDDEN, w)
    return w


_PREFIXES = {"bert": "bert.", "xlm-roberta": "roberta.", "electra": "electra.",
             "deberta-v2": "deberta."}


def _write_tokenizer(model_type, path):
    if model_type in _UNIGRAM_SPECIALS:
        from transformers import DebertaV2Tokenizer, XLMRobertaTokenizer

        vocab = unigram_vocab(model_type)
        cls = XLMRobertaTokenizer if model_type == "xlm-roberta" else DebertaV2Tokenizer
        cls(vocab=vocab, model_max_length=MAX_POSITIONS).save_pretrained(path)
        return len(vocab)
    if model_type == "roberta":
        from transformers import RobertaTokenizerFast

        vocab = roberta_vocab()
        merges = [tuple(pair) for pair in _ROBERTA_MERGES]
        tokenizer = RobertaTokenizerFast(vocab=vocab, merges=merges, add_prefix_space=True,
                                         model_max_length=MAX_POSITIONS)
        tokenizer.save_pretrained(path)
        return len(vocab)
    from transformers import BertTokenizerFast, ElectraTokenizerFast

    vocab_file = os.path.join(path, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as out:
        out.write("\n".join(BERT_VOCAB) + "\n")
    cls = ElectraTokenizerFast if model_type == "electra" else BertTokenizerFast
    tokenizer = cls(vocab=vocab_file, do_lower_case=True, model_max_length=MAX_POSITIONS)
    tokenizer.save_pretrained(path)
    return len(BERT_VOCAB)


MODEL_TYPES = ("bert", "distilbert", "roberta", "xlm-roberta", "electra", "deberta-v2")
_TOKENIZER_TYPES = ("roberta", "xlm-roberta", "electra", "deberta-v2")


def write_tiny_checkpoint(model_type, path, seed=SEED, hidden_act="gelu", weights=True):
    """Write a 2-layer, hidden-32 random ``model_type`` checkpoint into ``path``; returns ``path``.

    ``model_type`` is one of :data:`MODEL_TYPES` (any other name writes a BERT-shaped
    checkpoint that claims that model type, to test the unsupported-type error).
    """
    from safetensors.numpy import save_file

    os.makedirs(path, exist_ok=True)
    vocab_size = _write_tokenizer(model_type if model_type in _TOKENIZER_TYPES else "bert", path)
    config = _config(model_type, vocab_size, hidden_act)
    with open(os.path.join(path, "config.json"), "w") as out:
        json.dump(config, out, indent=1)
    if weights:
        rng = np.random.default_rng(seed + sum(map(ord, model_type)))
        save_file(_weights(model_type, config, rng), os.path.join(path, "model.safetensors"))
    return path


# [CLS]/<s>, [SEP]/</s> and padding ids of each family's tiny tokenizer (BERT's by default)
_SPECIAL_IDS = {"roberta": (0, 2, 1), "xlm-roberta": (0, 2, 1), "deberta-v2": (1, 2, 0)}


def reference_inputs(model_type):
    """Two rows of token ids (the second padded) and their mask, fixed for the reference."""
    if model_type in _UNIGRAM_SPECIALS:
        vocab_size = len(unigram_vocab(model_type)) - 1  # not the mask, last
    else:
        vocab_size = len(roberta_vocab()) if model_type == "roberta" else len(BERT_VOCAB)
    cls, sep, pad_id = _SPECIAL_IDS.get(model_type, (2, 3, 0))
    rng = np.random.default_rng(7)
    ids = rng.integers(5, vocab_size, size=(2, 12)).astype(np.int32)
    mask = np.ones_like(ids)
    ids[1, 8:] = pad_id
    mask[1, 8:] = 0
    ids[:, 0] = cls
    ids[0, 11] = sep
    ids[1, 7] = sep
    return ids, mask


# MiniLM reference sentences (pre-tokenised words, as delft feeds them)
MINILM_SENTENCES = [["Received", "12", "June", "2005", ";", "accepted", "3rd", "July"],
                    ["Published", "online", ":", "March", "2006"]]
