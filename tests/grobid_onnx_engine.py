"""GROBID's Java ONNX engine, re-implemented in Python from its source, to test our bundles.

Source: grobidOrg/grobid @ cb14186735ceec71c51b727c4115ec8d8f5f41bd,
grobid-core/src/main/java/org/grobid/core/engines/tagging/delft/ — ``DeLFTOnnxModel``
(``labelGrobidInput``, ``labelSequenceWithChunking``, ``labelTokensWithFeatures``,
``annotateTokens``, ``delft2grobidLabel``), ``Preprocessor`` (``fromJson``,
``tokensToCharIndices``, ``tokensToFeatureIndices``, ``createMask``), ``OnnxModelRunner``
(``runInference``), ``CRFDecoder`` (``fromJson``, ``decode``) and ``WordEmbeddings``. Each function
below names the Java method it follows; the Java quirks are kept on purpose (UTF-16 units for
characters, the k-th feature value taken from input column k, labels of chunks decoded
independently). Word vectors come from an in-memory ``{word: vector}`` dict standing for the LMDB
(empty: the zero vectors GROBID reads from an empty LMDB).
"""
import json
import re
from pathlib import Path

import numpy as np

# Java's "[\\t\\s]+" without UNICODE_CHARACTER_CLASS: \s is [ \t\n\x0B\f\r]
_JAVA_SPLIT = re.compile(r"[\t\s]+", re.ASCII)


def java_trim_is_empty(line):
    """``line.trim().isEmpty()``: trim() strips every char <= U+0020."""
    return all(ord(c) <= 0x20 for c in line)


def java_split(line):
    """``line.split("[\\\\t\\\\s]+")``: trailing empty strings are dropped, a leading one kept."""
    parts = _JAVA_SPLIT.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def java_normalize_num(word):
    """``WordEmbeddings.normalizeNum``: every UTF-16 unit that is a digit becomes '0'."""
    import unicodedata

    units = [chr(u) for u in np.frombuffer(word.encode("utf-16-le", "surrogatepass"), "<u2")]
    return "".join("0" if unicodedata.category(u) == "Nd" else u for u in units)


def delft2grobid_label(label):
    """``DeLFTOnnxModel.delft2grobidLabel`` (``String.replace`` rewrites every occurrence)."""
    if label == "O":
        return "<other>"
    if label.startswith("B-"):
        return label.replace("B-", "I-")
    if label.startswith("I-"):
        return label.replace("I-", "")
    return label


def java_viterbi(emissions, num_tokens, transitions, start, end):
    """``CRFDecoder.decode`` with the mask of ``createMask(numTokens, maxSeqLength)``.

    float32 arithmetic in Java's order, ``(V[prev] + trans[prev][cur]) + em[t][cur]``; ties go
    to the lowest index (strict ``>``), as ``np.argmax`` does.
    """
    if num_tokens == 0:
        return []
    em = emissions.astype(np.float32)
    score = start + em[0]
    backpointers = []
    for t in range(1, num_tokens):
        candidates = (score[:, None] + transitions) + em[t][None, :]
        best = np.argmax(candidates, axis=0)
        backpointers.append(best)
        score = candidates[best, np.arange(len(score))]
    path = [int(np.argmax(score + end))]
    for best in reversed(backpointers):
        path.append(int(best[path[-1]]))
    return path[::-1]


class JavaOnnxModel:
    """``DeLFTOnnxModel(Path modelDir)``: reads the bundle as the Java constructor does."""

    def __init__(self, bundle, embeddings=None):
        import onnxruntime

        bundle = Path(bundle)
        config = json.loads((bundle / "config.json").read_text())
        self.embedding_size = int(config["wordEmbeddingSize"])
        self.max_seq_length = int(config["maxSequenceLength"])
        self.embeddings_name = str(config["embeddingsName"])
        vocab = json.loads((bundle / "vocab.json").read_text())
        self.char_vocab = {k: int(v) for k, v in vocab["charVocab"].items()}
        self.unk_index = self.char_vocab.get("<UNK>", 1)
        self.tag_index = {int(k): v for k, v in vocab["tagIndex"].items()}
        self.max_char_length = int(vocab["maxCharLength"])
        self.features_indices = vocab.get("featuresIndices")
        maps = vocab.get("featuresMapToIndex")
        self.features_map = None if maps is None else {
            int(column): {value: int(i) for value, i in values.items()}
            for column, values in maps.items()}
        self.has_features = bool(self.features_indices)
        crf = json.loads((bundle / "crf_params.json").read_text())
        self.transitions = np.asarray(crf["transitions"], np.float32)
        self.start = np.asarray(crf["startTransitions"], np.float32)
        self.end = np.asarray(crf["endTransitions"], np.float32)
        self.session = onnxruntime.InferenceSession(str(bundle / "encoder.onnx"))
        self.graph_has_features = "features_input" in [i.name for i in self.session.get_inputs()]
        self.embeddings = embeddings or {}
        self.calls = 0

    # -- Preprocessor -----------------------------------------------------------------------
    def tokens_to_char_indices(self, tokens, seq_length):
        result = np.zeros((seq_length, self.max_char_length), np.int64)
        for i, word in enumerate(tokens[:seq_length]):
            units = np.frombuffer(word.encode("utf-16-le", "surrogatepass"), "<u2")
            for j, unit in enumerate(units[:self.max_char_length]):
                result[i, j] = self.char_vocab.get(chr(unit), self.unk_index)
        return result

    def tokens_to_feature_indices(self, features, seq_length):
        result = np.zeros((seq_length, len(self.features_indices)), np.int64)
        for t in range(min(len(features), seq_length)):
            for k, column in enumerate(self.features_indices):
                if k < len(features[t]):
                    value = features[t][k]  # the quirk: input column k, map of column `column`
                    value_map = self.features_map.get(column)
                    if value_map is not None and value is not None:
                        result[t, k] = value_map.get(value, 0)
        return result

    # -- DeLFTOnnxModel ---------------------------------------------------------------------
    def annotate_tokens(self, tokens, features):
        """``annotateTokens``: one ONNX call of batch 1 padded to maxSequenceLength; IOB tags."""
        num_tokens = min(len(tokens), self.max_seq_length)
        if num_tokens == 0:
            return []
        emissions = self.session.run(["emissions"], self.encoder_inputs(tokens, features))[0]
        self.calls += 1
        path = java_viterbi(emissions[0], num_tokens, self.transitions, self.start, self.end)
        return [self.tag_index.get(k, "O") for k in path]

    def encoder_inputs(self, tokens, features):
        """The feeds ``annotateTokens`` gives the encoder: batch 1, padded to maxSequenceLength."""
        words = tokens[:self.max_seq_length]
        zero = np.zeros(self.embedding_size, np.float32)
        word_input = np.zeros((1, self.max_seq_length, self.embedding_size), np.float32)
        for i, word in enumerate(words):
            word_input[0, i] = self.embeddings.get(java_normalize_num(word), zero)
        inputs = {"word_input": word_input,
                  "char_input": self.tokens_to_char_indices(words, self.max_seq_length)[None]}
        if self.has_features and features is not None and self.graph_has_features:
            inputs["features_input"] = self.tokens_to_feature_indices(
                features, self.max_seq_length)[None]
        return inputs

    def label_tokens_with_features(self, rows):
        """``labelTokensWithFeatures``: features sized from the first row that has some."""
        if not rows:
            return []
        tokens = [parts[0] for parts in rows]
        features = None
        for i, parts in enumerate(rows):
            if len(parts) > 1 and features is None:
                features = [[None] * (len(parts) - 1) for _ in rows]
            if features is not None:
                for j in range(1, len(parts)):
                    features[i][j - 1] = parts[j]
        return [delft2grobid_label(tag) for tag in self.annotate_tokens(tokens, features)]

    def label_sequence_with_chunking(self, lines):
        """``labelSequenceWithChunking``: consecutive chunks of maxSeqLength, each on its own."""
        rows = [java_split(line) for line in lines]
        if len(rows) <= self.max_seq_length:
            return self.label_tokens_with_features(rows)
        labels = []
        for offset in range(0, len(rows), self.max_seq_length):
            labels += self.label_tokens_with_features(rows[offset:offset + self.max_seq_length])
        return labels

    def label_grobid_input(self, data):
        """``labelGrobidInput``: GROBID's feature matrix in, each line + TAB + label out."""
        lines = data.split("\n")
        sequences, current = [], []
        for line in lines:
            if java_trim_is_empty(line):
                if current:
                    sequences.append(current)
                    current = []
            else:
                current.append(line)
        if current:
            sequences.append(current)
        if not sequences:
            return ""
        labels = [self.label_sequence_with_chunking(seq) for seq in sequences]
        out, seq_idx, token_idx, in_sequence = [], 0, 0, False
        for line in lines:
            if java_trim_is_empty(line):
                if in_sequence and seq_idx < len(sequences):
                    out.append("\n")
                    seq_idx, token_idx, in_sequence = seq_idx + 1, 0, False
            else:
                in_sequence = True
                if seq_idx < len(labels) and token_idx < len(labels[seq_idx]):
                    out.append(f"{line}\t{labels[seq_idx][token_idx]}\n")
                    token_idx += 1
        return "".join(out)
