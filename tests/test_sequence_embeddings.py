"""A Sequence with word embeddings: trained, saved, loaded with the embeddings reopened by name,
and tagging words unseen in training with their pretrained vectors (the whole vocabulary)."""
import json

import numpy as np
import pytest

from delft.sequenceLabelling import Sequence
from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
from delft.utilities.Embeddings import open_embeddings
from delft.utilities.data_path import REPO_ROOT
from delft.utilities.errors import ConfigurationError, ModelLoadError
from conftest import loaded_sequence

SAMPLE = REPO_ROOT / "data" / "sequenceLabelling" / "grobid" / "date" / "date-sample.train"
DIMENSION = 6


def write_vectors(path, words, dimension=DIMENSION):
    rng = np.random.default_rng(0)
    lines = [f"{len(words)} {dimension}"]
    lines += [word + " " + " ".join(f"{v:.4f}" for v in rng.normal(size=dimension)) for word in words]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """A registry naming a small vectors file, with its cache in the test's folder."""
    x, _, _ = load_data_and_labels_crf_file(SAMPLE)
    words = sorted({t for seq in x[:100] for t in seq})[::2] + ["Zanzibar"]
    source = write_vectors(tmp_path / "words.vec", words)
    path = tmp_path / "registry.json"
    path.write_text(json.dumps({"embedding-lmdb-path": str(tmp_path / "db"), "embeddings": [
        {"name": "tiny-vectors", "path": str(source), "type": "glove", "format": "vec",
         "lang": "en"}]}))
    monkeypatch.setenv("DELFT_RESOURCE_REGISTRY", str(path))
    return source


def test_train_save_load_tag_with_word_embeddings(tmp_path, registry):
    x, y, _ = load_data_and_labels_crf_file(SAMPLE)
    x, y = list(x[:120]), list(y[:120])
    model = Sequence("date-BidLSTM_CRF", embeddings_name="tiny-vectors", max_epoch=2,
                     batch_size=30, recurrent_dropout=0.0, seed=1)
    model.train(x[:100], y[:100], x_valid=x[100:], y_valid=y[100:])
    assert model.model_config.word_embedding_size == DIMENSION
    # the model holds no embedding matrix: vectors come with the batch, from the whole vocabulary
    assert not any("embedding" in w.path and "char" not in w.path and "feature" not in w.path
                   for w in model.model.weights)
    corpus = model.p.encode([["Zanzibar", "never-seen", "2005"]])
    vectors = model.p.padded_batch(corpus, np.array([0]))["word_vectors"][0]
    expected = open_embeddings("tiny-vectors").get_word_vectors(["Zanzibar", "never-seen"])
    np.testing.assert_allclose(vectors[:2], expected, rtol=1e-6)
    assert np.abs(vectors[0]).sum() > 0  # a word absent from training still has its vector
    assert np.abs(vectors[1]).sum() == 0  # and an unknown word the zero vector
    model.save(str(tmp_path / "models"))
    config = json.loads((tmp_path / "models" / "date-BidLSTM_CRF" / "config.json").read_text())
    assert (config["embeddings_name"], config["word_embedding_size"]) == ("tiny-vectors", DIMENSION)
    loaded = loaded_sequence("date-BidLSTM_CRF", str(tmp_path / "models"))
    assert loaded.tag(x[100:], None) == model.tag(x[100:], None)
    assert len(loaded.tag([["unseen", "words", "2005"]], None)[0]) == 3


def test_a_vectors_file_path_works_as_a_name(tmp_path, registry):
    x, y, _ = load_data_and_labels_crf_file(SAMPLE)
    model = Sequence("date-BidLSTM_CRF", embeddings_name=str(registry), max_epoch=1,
                     batch_size=30, recurrent_dropout=0.0)
    model.train(list(x[:60]), list(y[:60]))
    assert model.model_config.word_embedding_size == DIMENSION
    assert len(model.tag([["June", "2005"]], None)[0]) == 2


def test_embeddings_missing_at_load_is_one_line_naming_them(tmp_path, registry, monkeypatch):
    x, y, _ = load_data_and_labels_crf_file(SAMPLE)
    model = Sequence("date-BidLSTM_CRF", embeddings_name="tiny-vectors", max_epoch=1,
                     batch_size=30, recurrent_dropout=0.0)
    model.train(list(x[:60]), list(y[:60]))
    model.save(str(tmp_path / "models"))
    empty = tmp_path / "empty-registry.json"
    empty.write_text(json.dumps({"embedding-lmdb-path": str(tmp_path / "db"), "embeddings": []}))
    monkeypatch.setenv("DELFT_RESOURCE_REGISTRY", str(empty))
    with pytest.raises(ModelLoadError, match="word embeddings 'tiny-vectors' cannot be opened") \
            as error:
        loaded_sequence("date-BidLSTM_CRF", str(tmp_path / "models"))
    assert "\n" not in str(error.value)


def test_unknown_embeddings_name_is_a_clear_error_before_training(registry):
    with pytest.raises(ConfigurationError, match="glove-840B"):
        Sequence("x", embeddings_name="glove-840B").train([["a"]], [["O"]])
