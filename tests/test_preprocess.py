"""Preprocessor vocabularies (JSON round trip, unseen chars/labels/features), windows at encoding."""
import json
import re

import numpy as np
import pytest

from delft.sequenceLabelling.models import load_preprocessor
from delft.sequenceLabelling.preprocess import (PAD_INDEX, UNKNOWN_INDEX, Preprocessor,
                                                WordPreprocessor)
from test_windows import positions_per_row, stitched
from delft.utilities.errors import ModelLoadError

X = [["June", "2005"], ["10", "-", "06", "-", "2005"], ["Été", "1999"]]
Y = [["B-<month>", "B-<year>"], ["B-<day>", "O", "B-<month>", "O", "B-<year>"],
     ["O", "B-<year>"]]
F = [[["june", "INITCAP", "v0"], ["2005", "ALLDIGIT", "v1"]],
     [["10", "ALLDIGIT", "v2"], ["-", "HYPHEN", "v3"], ["06", "ALLDIGIT", "v4"],
      ["-", "HYPHEN", "v5"], ["2005", "ALLDIGIT", "v6"]],
     [["été", "INITCAP", "v7"], ["1999", "ALLDIGIT", "v8"]]]


@pytest.fixture
def fitted():
    p = WordPreprocessor(max_char_length=6)
    p.fit(X, Y, F)
    return p


def test_json_round_trip_is_equal(fitted, tmp_path):
    path = tmp_path / "preprocessor.json"
    fitted.save(str(path))
    loaded = load_preprocessor(str(path))
    assert type(loaded) is WordPreprocessor
    assert loaded.to_dict() == fitted.to_dict()
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(json.dumps(fitted.to_dict()))
    # and it encodes exactly as the original
    a, b = fitted.encode(X, F), loaded.encode(X, F)
    rows = np.arange(a.num_rows)
    batch_a, batch_b = fitted.padded_batch(a, rows), loaded.padded_batch(b, rows)
    assert batch_a.keys() == batch_b.keys()
    for key in batch_a:
        np.testing.assert_array_equal(batch_a[key], batch_b[key])


def test_real_data_round_trip(date_corpus, tmp_path):
    x, y, f = date_corpus
    p = WordPreprocessor(30)
    p.fit(x, y, f)
    p.save(str(tmp_path / "p.json"))
    assert load_preprocessor(str(tmp_path / "p.json")).to_dict() == p.to_dict()
    assert p.num_labels == len({label for seq in y for label in seq})


def test_vocabularies(fitted):
    assert fitted.char_index["<PAD>"] == PAD_INDEX and fitted.char_index["<UNK>"] == UNKNOWN_INDEX
    chars = {c for seq in X for t in seq for c in t}
    assert set(fitted.char_index) == chars | {"<PAD>", "<UNK>"}
    assert sorted(fitted.char_index.values()) == list(range(len(chars) + 2))
    assert set(fitted.label_vocabulary.labels) == {l for seq in Y for l in seq}
    # column 2 has 9 distinct values (<= 12): categorical; all three columns are kept
    assert fitted.features_indices == [0, 1, 2]


def test_feature_columns_with_many_values_are_not_categorical():
    features = [[[f"w{i}", "CAP" if i % 2 else "NOCAP"] for i in range(40)]]
    p = WordPreprocessor()
    p.fit([[f"t{i}" for i in range(40)]], [["O"] * 40], features)
    assert p.features_indices == [1]
    assert p.feature_vocab_sizes == [12 + 2]  # padding, unseen, room for 12 values


def test_unseen_characters_map_to_unk():
    fitted = WordPreprocessor(max_char_length=6)
    fitted.fit(X, Y)
    corpus = fitted.encode([["Jüne", "😀"]])
    batch = fitted.padded_batch(corpus, np.array([0]))
    chars = batch["chars"][0]
    j, u = fitted.char_index["J"], fitted.char_index["n"]
    assert chars[0, :4].tolist() == [j, UNKNOWN_INDEX, u, fitted.char_index["e"]]
    assert chars[1, 0] == UNKNOWN_INDEX
    assert chars[1, 1:].tolist() == [PAD_INDEX] * (chars.shape[1] - 1)


def test_unseen_feature_values_map_to_unknown(fitted):
    corpus = fitted.encode([["June"]], [[["never", "SEEN", "v0"]]])
    batch = fitted.padded_batch(corpus, np.array([0]))
    assert batch["features"][0, 0].tolist() == [UNKNOWN_INDEX, UNKNOWN_INDEX,
                                               fitted.feature_index[2]["v0"]]
    with pytest.raises(ValueError, match="features"):
        fitted.encode([["June"]])


def test_unseen_labels_are_outside(fitted):
    outside = fitted.label_vocabulary.index["O"]
    encoded = fitted.encode_labels([["B-<year>", "B-<season>", "I-<never>"]])[0]
    assert encoded.tolist() == [fitted.label_vocabulary.index["B-<year>"], outside, outside]
    assert fitted.decode_labels(encoded) == ["B-<year>", "O", "O"]


def test_fit_again_extends_and_keeps_ids(fitted):
    chars, labels = dict(fitted.char_index), list(fitted.label_vocabulary.labels)
    new = fitted.fit([["Ωmega", "2005"]], [["B-<season>", "B-<year>"]])
    assert "Ω" in new["chars"]
    assert new == {"chars": sorted(set("Ωmega") - set(chars)), "labels": ["B-<season>"]}
    assert all(fitted.char_index[c] == i for c, i in chars.items())
    assert fitted.label_vocabulary.labels[:len(labels)] == labels
    assert fitted.num_labels == len(labels) + 1


def test_padded_batch_pads_to_the_batch(fitted):
    corpus = fitted.encode(X, F)
    batch = fitted.padded_batch(corpus, np.array([0, 2]), fitted.encode_labels(Y))
    assert batch["lengths"].tolist() == [2, 2]
    assert batch["chars"].shape == (2, 2, 4)  # the longest token of the batch: "June"/"2005"
    assert batch["labels"].shape == (2, 2)
    full = fitted.padded_batch(corpus, np.array([0, 1]), fitted.encode_labels(Y))
    assert full["chars"].shape == (2, 5, 4)
    assert full["labels"][0, 2:].tolist() == [0, 0, 0]
    assert full["features"].shape == (2, 5, 3)
    long = fitted.encode([["abcdefghijkl"]], [[["x", "y", "z"]]])
    assert fitted.padded_batch(long, np.array([0]))["chars"].shape == (1, 1, 6)  # max_char_length


def test_encode_with_window_size_rows_cover_sequences():
    fitted = WordPreprocessor()
    fitted.fit(X, Y)
    x = [["a"] * 23, ["b"] * 3]
    corpus = fitted.encode(x, window_size=10)
    assert corpus.row_sequence.tolist() == [0, 0, 0, 1]
    assert corpus.row_length.tolist() == [10, 10, 3, 3]
    merged = stitched(corpus, positions_per_row(corpus))
    assert [m.tolist() for m in merged] == [list(range(23)), list(range(3))]
    whole = fitted.encode(x)  # tagging: one row per sequence, whatever its length
    assert whole.row_length.tolist() == [23, 3]


# -- loading a broken preprocessor file -------------------------------------------------------------
@pytest.mark.parametrize("content", ["", "{", "[]", "null", '{"kind": "bilstm"}',
                                     '{"kind": "nope", "labels": []}'])
def test_load_preprocessor_errors(tmp_path, content):
    path = tmp_path / "preprocessor.json"
    path.write_text(content)
    with pytest.raises(ModelLoadError, match=re.escape(str(path))):
        load_preprocessor(str(path))


def test_load_preprocessor_missing(tmp_path):
    with pytest.raises(ModelLoadError, match="missing"):
        load_preprocessor(str(tmp_path / "absent.json"))


def test_every_family_preprocessor_is_a_preprocessor():
    from delft.sequenceLabelling.models import PREPROCESSORS

    for kind, cls in PREPROCESSORS.items():
        assert issubclass(cls, Preprocessor) and cls.kind == kind
        for method in ("encode", "padded_batch", "batch_signature", "from_dict"):
            assert getattr(cls, method) is not getattr(Preprocessor, method), (cls, method)
