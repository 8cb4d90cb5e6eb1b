"""Static word embeddings from a local file: loading, training with them, save/load, errors."""
import numpy as np
import pytest

from delft.sequenceLabelling import Sequence
from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
from delft.utilities.embeddings import load_word_vectors, resolve_embeddings
from delft.utilities.errors import ConfigurationError, DataFormatError
from delft.utilities.data_path import REPO_ROOT
from conftest import loaded_sequence

SAMPLE = REPO_ROOT / "data" / "sequenceLabelling" / "grobid" / "date" / "date-sample.train"


def write_vectors(path, words, dimension=6, header=True):
    rng = np.random.default_rng(0)
    lines = [f"{len(words)} {dimension}"] if header else []
    lines += [word + " " + " ".join(f"{v:.4f}" for v in rng.normal(size=dimension)) for word in words]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_keeps_only_the_vocabulary_and_reads_both_formats(tmp_path):
    vec = write_vectors(tmp_path / "a.vec", ["june", "may", "2005"])
    txt = write_vectors(tmp_path / "a.txt", ["june", "may", "2005"], header=False)
    for path in (vec, txt):
        vectors = load_word_vectors(path, {"june", "2005", "absent"})
        assert sorted(vectors) == ["2005", "june"]
        assert vectors["june"].shape == (6,)


def test_ragged_vector_is_an_error_with_file_and_line(tmp_path):
    path = tmp_path / "bad.vec"
    path.write_text("june 1 2 3\nmay 1 2\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad\.vec:2:"):
        load_word_vectors(path, {"june", "may"})


def test_unknown_embeddings_name_is_a_clear_error():
    with pytest.raises(ConfigurationError, match="glove-840B"):
        resolve_embeddings("glove-840B")


def test_train_save_load_tag_with_word_embeddings(tmp_path):
    x, y, _ = load_data_and_labels_crf_file(SAMPLE)
    x, y = list(x[:120]), list(y[:120])
    words = sorted({t.lower() for seq in x for t in seq})[::2]  # half the words have a vector
    path = write_vectors(tmp_path / "words.vec", words)
    model = Sequence("date-BidLSTM_CRF", embeddings_name=str(path), max_epoch=2, batch_size=30,
                     recurrent_dropout=0.0, seed=1)
    model.train(x[:100], y[:100], x_valid=x[100:], y_valid=y[100:])
    embedding = model.model.word_embedding
    assert not embedding.trainable
    expected = load_word_vectors(path, set(words))
    matrix = embedding.get_weights()[0]
    for word in words[:5]:  # frozen: the file's vectors, untouched by training
        np.testing.assert_allclose(matrix[model.p.word_index[word]], expected[word], rtol=1e-6)
    model.save(str(tmp_path / "models"))
    loaded = loaded_sequence("date-BidLSTM_CRF", str(tmp_path / "models"))
    assert loaded.model_config.word_embedding_size == 6
    assert loaded.tag(x[100:], None) == model.tag(x[100:], None)
    assert len(loaded.tag([["unseen", "words", "2005"]], None)[0]) == 3
