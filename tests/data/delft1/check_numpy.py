"""
Recomputes DeLFT 1.2.0's labels for every model folder here with numpy alone (plus
``safetensors`` to read the weights and ``tokenizers`` for the WordPiece of the BERT
models), from the facts README.md gives, and compares them with reference/<folder>.json.

It is a check of README.md, written plainly and slowly (one sequence, one time step at a
time), not a reader: run it with any Python that has numpy, safetensors and tokenizers::

    python tests/data/delft1/check_numpy.py [--no-batch-padding] [FOLDER ...]

With --no-batch-padding every sequence is computed alone, which shows which architectures
depend on the other sequences of their batch (see README.md, "Batching and padding").
"""

import glob
import json
import math
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DIGITS = re.compile(r"[0-9０１２３４５６７８９]")
CASING = {"numeric": 1, "allLower": 2, "allUpper": 3, "initialUpper": 4, "other": 5, "mainly_numeric": 6,
          "contains_digit": 7}
erf = np.vectorize(math.erf)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def rnn_direction(x, W, prefix, suffix, kind, reverse):
    """One direction of a torch nn.LSTM (gates i, f, g, o) or nn.GRU (gates r, z, n), zero initial state."""
    w_ih, w_hh, b_ih, b_hh = (W[f"{prefix}.{n}_l0{suffix}"] for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    size = w_hh.shape[1]
    h = np.zeros(size, np.float32)
    c = np.zeros(size, np.float32)
    out = np.zeros((len(x), size), np.float32)
    for t in range(len(x) - 1, -1, -1) if reverse else range(len(x)):
        if kind == "lstm":
            i, f, g, o = np.split(w_ih @ x[t] + b_ih + w_hh @ h + b_hh, 4)
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
            h = sigmoid(o) * np.tanh(c)
        else:
            gx, gh = w_ih @ x[t] + b_ih, w_hh @ h + b_hh
            r = sigmoid(gx[:size] + gh[:size])
            z = sigmoid(gx[size:2 * size] + gh[size:2 * size])
            n = np.tanh(gx[2 * size:] + r * gh[2 * size:])
            h = (1 - z) * n + z * h
        out[t] = h
    return out, h


def bidirectional(x, W, prefix, kind="lstm"):
    """Outputs [forward, backward] per step, and the final states (forward at the end, backward at the start)."""
    out_f, h_f = rnn_direction(x, W, prefix, "", kind, False)
    out_b, h_b = rnn_direction(x, W, prefix, "_reverse", kind, True)
    return np.concatenate([out_f, out_b], -1), np.concatenate([h_f, h_b])


def viterbi(emissions, start, transitions, end):
    """transitions[i, j]: score of tag j following tag i; the first of equal maxima wins."""
    score = start + emissions[0]
    history = []
    for t in range(1, len(emissions)):
        candidates = score[:, None] + transitions + emissions[t][None, :]
        history.append(candidates.argmax(0))
        score = candidates.max(0)
    best = [int((score + end).argmax())]
    for pointers in reversed(history):
        best.append(int(pointers[best[-1]]))
    return best[::-1]


def casing(word):
    digits = sum(ch.isdigit() for ch in word)
    if word.isdigit():
        return CASING["numeric"]
    if digits / float(len(word)) > 0.5:
        return CASING["mainly_numeric"]
    if word.islower():
        return CASING["allLower"]
    if word.isupper():
        return CASING["allUpper"]
    if word[0].isupper():
        return CASING["initialUpper"]
    return CASING["contains_digit"] if digits > 0 else CASING["other"]


def read_vectors(path):
    vectors = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            fields = line.rstrip("\n").split(" ")
            if number == 0 and len(fields) == 2:
                continue
            vectors[fields[0]] = np.array([float(v) for v in fields[1:]], dtype=np.float32)
    return vectors


def feature_ids(row, feature_preprocessor):
    mapping = feature_preprocessor["features_map_to_index"]
    return [mapping[str(column)].get(row[column], 0) for column in sorted(feature_preprocessor["features_indices"])]


def encode_features(W, ids):
    """The features of one position: an LSTM over its feature columns, its two final states."""
    return bidirectional(W["features_embedding.weight"][ids], W, "features_lstm")[1]


def emissions_to_path(W, em, mask_length):
    if "classifier.weight" in W:
        return [int(i) for i in em.argmax(-1)]
    if "crf.U" in W:  # ChainCRF: every position of the padded batch
        return viterbi(em, W["crf.b_start"], W["crf.U"], W["crf.b_end"])
    return viterbi(em[:mask_length], W["crf.crf.start_transitions"], W["crf.crf.transitions"],
                   W["crf.crf.end_transitions"])


def rnn_labels(folder, config, preprocessor, W, reference, batch_padding):
    architecture = config["architecture"]
    chain = "ChainCRF" in architecture
    cnn = "CNN" in architecture
    masked = not chain  # the token mask, and the character mask of the LSTM character encoder
    vocab_char = preprocessor["vocab_char"]
    max_chars, max_tokens = config["max_char_length"], config["max_sequence_length"]
    features = preprocessor["feature_preprocessor"]
    vectors = read_vectors(os.path.join(HERE, "tiny-vectors.vec")) if config["embeddings_name"] else None
    width = config["word_embedding_size"]
    xs, fs, batch_size = reference["x"], reference["f"], reference["batch_size"]

    def position(token, row):
        word = np.zeros(width, np.float32)
        if vectors is not None and token is not None:
            word = vectors.get(DIGITS.sub("0", token), word)
        chars = [] if token is None else [vocab_char.get(c, 1) for c in token][:max_chars]
        case = 0 if token is None else casing(token)
        ids = None
        if features:
            ids = [0] * len(features["features_indices"]) if row is None else feature_ids(row, features)
        return word, chars, case, ids

    def char_encoding(chars):
        table = W["char_encoder.char_embeddings.weight"]
        if cnn:
            embedded = table[chars + [0] * (max_chars - len(chars))]
            padded = np.concatenate([np.zeros((1, table.shape[1]), np.float32), embedded,
                                     np.zeros((1, table.shape[1]), np.float32)])
            kernel, bias = W["char_encoder.conv.weight"], W["char_encoder.conv.bias"]
            conv = np.stack([np.einsum("fek,ke->f", kernel, padded[t:t + 3]) + bias for t in range(max_chars)])
            return np.tanh(conv).max(0)
        if masked:
            if not chars:
                return np.zeros(2 * W["char_encoder.bilstm.weight_hh_l0"].shape[1], np.float32)
            return bidirectional(table[chars], W, "char_encoder.bilstm")[1]
        return bidirectional(table[chars + [0] * (max_chars - len(chars))], W, "char_encoder.bilstm")[1]

    labels, emissions = [], []
    for first in range(0, len(xs), batch_size):
        batch = []
        for k in range(first, min(first + batch_size, len(xs))):
            tokens = xs[k][:max_tokens]
            rows = fs[k][:max_tokens] if fs is not None else [None] * len(tokens)
            positions = [position(t, r) for t, r in zip(tokens, rows)]
            if len(positions) == 1:  # a sequence of one token is given a second, empty one
                positions.append(position(None, None))
            batch.append((len(tokens), positions))
        length = max(len(p) for _, p in batch) if batch_padding else 0
        for nb_tokens, positions in batch:
            if chain:
                positions = positions + [position(None, None)] * (length - len(positions))
            else:  # the token mask: a position without characters takes no part
                positions = [p for p in positions if p[1]] or positions[:1]
            inputs = []
            for word, chars, case, ids in positions:
                parts = [word, char_encoding(chars)]
                if "casing_embedding.weight" in W:
                    parts.append(W["casing_embedding.weight"][case])
                if features:
                    parts.append(encode_features(W, ids))
                inputs.append(np.concatenate(parts))
            x = np.stack(inputs)
            if architecture == "BidGRU_CRF":
                h = bidirectional(bidirectional(x, W, "bigru1", "gru")[0], W, "bigru2", "gru")[0]
            else:
                h = bidirectional(x, W, "bilstm")[0]
            if "classifier.weight" in W:
                em = h @ W["classifier.weight"].T + W["classifier.bias"]
            else:
                first_dense = "dense1" if "dense1.weight" in W else "dense"
                last = "linear" if "linear.weight" in W else "dense2"
                z = np.tanh(h @ W[f"{first_dense}.weight"].T + W[f"{first_dense}.bias"])
                em = z @ W[f"{last}.weight"].T + W[f"{last}.bias"]
            path = emissions_to_path(W, em, len(em))
            labels.append([preprocessor["indice_tag"][str(i)] for i in path][:nb_tokens])
            emissions.append(em)
    return labels, emissions


def layer_norm(x, gain, bias, eps):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gain + bias


def bert(W, config, ids, attention):
    p = "transformer."
    eps = config["layer_norm_eps"]
    x = (W[p + "embeddings.word_embeddings.weight"][ids] + W[p + "embeddings.position_embeddings.weight"][:len(ids)]
         + W[p + "embeddings.token_type_embeddings.weight"][0])
    x = layer_norm(x, W[p + "embeddings.LayerNorm.weight"], W[p + "embeddings.LayerNorm.bias"], eps)
    heads = config["num_attention_heads"]
    size = config["hidden_size"] // heads
    additive = np.where(np.array(attention) > 0, 0.0, np.finfo(np.float32).min).astype(np.float32)
    for layer in range(config["num_hidden_layers"]):
        q = f"{p}encoder.layer.{layer}."

        def dense(t, name):
            return t @ W[q + name + ".weight"].T + W[q + name + ".bias"]

        def split(t):
            return t.reshape(len(ids), heads, size).transpose(1, 0, 2)

        scores = (split(dense(x, "attention.self.query")) @ split(dense(x, "attention.self.key")).transpose(0, 2, 1)
                  / math.sqrt(size) + additive[None, None, :])
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ split(dense(x, "attention.self.value"))).transpose(1, 0, 2).reshape(len(ids), -1)
        x = layer_norm(dense(context, "attention.output.dense") + x, W[q + "attention.output.LayerNorm.weight"],
                       W[q + "attention.output.LayerNorm.bias"], eps)
        inner = dense(x, "intermediate.dense")
        inner = 0.5 * inner * (1 + erf(inner / math.sqrt(2)))  # "gelu": the exact one
        x = layer_norm(dense(inner, "output.dense") + x, W[q + "output.LayerNorm.weight"],
                       W[q + "output.LayerNorm.bias"], eps)
    return x


def bert_labels(folder, config, preprocessor, W, reference, batch_padding):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(os.path.join(folder, "transformer-tokenizer", "tokenizer.json"))
    max_length = config["max_sequence_length"]
    tokenizer.enable_truncation(max_length)
    transformer_config = json.load(open(os.path.join(folder, "transformer-config.json")))
    features = preprocessor["feature_preprocessor"]
    xs, fs, batch_size = reference["x"], reference["f"], reference["batch_size"]
    labels, emissions = [], []
    for first in range(0, len(xs), batch_size):
        batch = []
        for k in range(first, min(first + batch_size, len(xs))):
            encoding = tokenizer.encode(xs[k][:max_length], is_pretokenized=True, add_special_tokens=True)
            starts, ids, previous = [], [], None
            for word in encoding.word_ids:
                starts.append(word is not None and word != previous)
                if features:
                    ids.append([0] * len(features["features_indices"]) if word is None
                               else feature_ids(fs[k][word], features))
                previous = word
            batch.append((list(encoding.ids), starts, ids))
        length = max(len(b[0]) for b in batch)
        for input_ids, starts, ids in batch:
            n = len(input_ids)
            total = length if batch_padding else n
            h = bert(W, transformer_config, input_ids + [0] * (total - n), [1] * n + [0] * (total - n))
            if features:
                ids = ids + [[0] * len(features["features_indices"])] * (total - n)
                h = bidirectional(np.concatenate([h, np.stack([encode_features(W, i) for i in ids])], -1),
                                  W, "bilstm")[0]
            if "classifier.weight" in W:
                em = h @ W["classifier.weight"].T + W["classifier.bias"]
            elif "dense2.weight" in W:
                em = np.tanh(h @ W["dense.weight"].T + W["dense.bias"]) @ W["dense2.weight"].T + W["dense2.bias"]
            elif "linear.weight" in W:
                em = h @ W["linear.weight"].T + W["linear.bias"]
            else:
                em = h @ W["dense.weight"].T + W["dense.bias"]
            path = emissions_to_path(W, em, n)
            labels.append([preprocessor["indice_tag"][str(i)] for i, start in zip(path, starts) if start])
            emissions.append(em)
    return labels, emissions


def check(folder, batch_padding=True):
    from safetensors.numpy import load_file

    name = os.path.basename(folder)
    config = json.load(open(os.path.join(folder, "config.json")))
    preprocessor = json.load(open(os.path.join(folder, "preprocessor.json")))
    reference = json.load(open(os.path.join(HERE, "reference", name + ".json")))
    W = load_file(os.path.join(folder, "model.safetensors"))
    compute = bert_labels if config["transformer_name"] else rnn_labels
    labels, emissions = compute(folder, config, preprocessor, W, reference, batch_padding)
    different = [i for i, (a, b) in enumerate(zip(labels, reference["labels"])) if a != b]
    error = max(float(np.abs(np.array(reference["emissions"][i])[:len(e)] - e[:len(reference["emissions"][i])]).max())
                for i, e in enumerate(emissions[:len(reference["emissions"])]))
    print(f"{name}: {len(labels) - len(different)}/{len(reference['labels'])} sequences with DeLFT's labels, "
          f"emissions of the first {len(reference['emissions'])} within {error:.1e}"
          + (f", different: {different[:8]}" if different else ""))
    return not different


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if not a.startswith("--")]
    padding = "--no-batch-padding" not in sys.argv
    folders = arguments or sorted(glob.glob(os.path.join(HERE, "date-*")))
    results = [check(os.path.join(HERE, os.path.basename(f.rstrip("/"))), padding) for f in folders]
    sys.exit(0 if all(results) or not padding else 1)
