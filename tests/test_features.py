"""The feature columns of the FEATURES architectures: which columns a model reads (DeLFT's rule of
at most features_vocabulary_size distinct values, or features_indices), what is saved, the id of
an unseen value, and input with another column count than training as a one-line error (file:line
from a file, expected and found counts from the Python API)."""
import json

import numpy as np
import pytest

from conftest import SAMPLE_DATE, crf_sequences, unlabelled_matrix
from test_cli import SAMPLE, finish, one_error_line, start

from delft.sequenceLabelling import Sequence
from delft.sequenceLabelling.feature_columns import FeatureColumnsError
from delft.sequenceLabelling.preprocess import UNKNOWN_INDEX, WordPreprocessor
from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
from delft.utilities.errors import ConfigurationError, DataFormatError

FEATURES_MODEL = "date-BidLSTM_CRF_FEATURES"


def columns_of(values_per_column, tokens=40):
    """One sequence whose feature column k cycles through values_per_column[k] values."""
    features = [[f"v{t % n}" for n in values_per_column] for t in range(tokens)]
    return [[f"t{t}" for t in range(tokens)]], [["O"] * tokens], [features]


def test_automatic_selection_keeps_columns_of_at_most_12_values():
    x, y, f = columns_of([12, 13, 2, 40])
    p = WordPreprocessor()
    p.fit(x, y, f)
    assert p.features_indices == [0, 2]  # DeLFT's default features_vocabulary_size, 12
    assert p.feature_vocab_sizes == [12 + 2, 12 + 2]  # padding, unseen, then 12 values
    wider = WordPreprocessor(features_vocabulary_size=13)
    wider.fit(x, y, f)
    assert wider.features_indices == [0, 1, 2]


def test_explicit_columns_over_the_limit_or_past_the_row_are_one_line():
    x, y, f = columns_of([3, 30, 2])
    p = WordPreprocessor(features_indices=[0, 2])
    p.fit(x, y, f)
    assert p.features_indices == [0, 2]
    with pytest.raises(ConfigurationError, match=r"column 1 has 30.*features_vocabulary_size"):
        WordPreprocessor(features_indices=[0, 1]).fit(x, y, f)
    with pytest.raises(ConfigurationError, match=r"column 5, but the training rows have 3"):
        WordPreprocessor(features_indices=[0, 5]).fit(x, y, f)


def test_unseen_values_get_the_reserved_id_and_padding_zero():
    x, y, f = columns_of([3, 2], tokens=4)
    p = WordPreprocessor()
    p.fit(x, y, f)
    corpus = p.encode([["a", "b"], ["c"]], [[["v0", "never"], ["v2", "v1"]], [["v9", "v0"]]])
    batch = p.padded_batch(corpus, np.array([0, 1]))
    assert batch["features"].tolist() == [
        [[2, UNKNOWN_INDEX], [4, 3]],
        [[UNKNOWN_INDEX, 2], [0, 0]]]  # values sorted from id 2; the padded token is 0


def test_another_column_count_is_a_value_error_naming_both_counts():
    x, y, f = columns_of([3, 2, 2])
    p = WordPreprocessor()
    p.fit(x, y, f)
    with pytest.raises(FeatureColumnsError) as error:
        p.encode([["a"], ["b", "c"]], [[["v0", "v1", "v0"]], [["v0", "v1", "v0"],
                                                            ["v0", "v1", "v0", "extra"]]])
    assert isinstance(error.value, ValueError)
    assert str(error.value).startswith(
        "features of sequence 1, token 1: 4 feature columns, but the model was trained on 3")


def with_extra_column(sequence):
    """A labelled sequence's lines with one more feature column, before the label."""
    return [" EXTRA ".join(line.rsplit(" ", 1)) for line in sequence]


def small_features_model(features_indices=None, **kwargs):
    x, y, f = (list(part[:80]) for part in load_data_and_labels_crf_file(SAMPLE_DATE))
    model = Sequence(FEATURES_MODEL, architecture="BidLSTM_CRF_FEATURES", max_epoch=1,
                     batch_size=20, word_lstm_units=8, char_lstm_units=5, recurrent_dropout=0.0,
                     seed=1, features_indices=features_indices, **kwargs)
    model.train(x[:60], y[:60], f[:60], x[60:], y[60:], f[60:])
    return model, x, f


def potentials(model, x, f):
    corpus = model.p.encode(x, f)
    batch = model.p.padded_batch(corpus, np.arange(corpus.num_rows))
    return model.model.word_potentials(batch).numpy(), batch["lengths"]


def test_features_indices_are_the_columns_the_model_reads(tmp_path):
    model, x, f = small_features_model(features_indices=[9, 10])
    assert model.p.features_indices == [9, 10]
    assert len(model.model.feature_encoder.vocab_sizes) == 2
    reference, _ = potentials(model, x[:5], f[:5])
    other_columns = [[row[:11] + ["CHANGED"] * (len(row) - 11) for row in seq] for seq in f[:5]]
    np.testing.assert_array_equal(potentials(model, x[:5], other_columns)[0], reference)
    read_column = [[row[:9] + ["CHANGED"] + row[10:] for row in seq] for seq in f[:5]]
    assert not np.allclose(potentials(model, x[:5], read_column)[0], reference)
    model.save(str(tmp_path))
    saved = json.loads((tmp_path / FEATURES_MODEL / "preprocessor.json").read_text())
    assert saved["features_indices"] == [9, 10] and saved["feature_widths"] == [16]
    loaded = Sequence(FEATURES_MODEL)
    loaded.load(str(tmp_path))
    assert loaded.p.features_indices == [9, 10]
    np.testing.assert_array_equal(potentials(loaded, x[:5], f[:5])[0], reference)


@pytest.mark.parametrize("encoder, width", [("concat", 2 * 4), ("lstm", 2 * 3)])
def test_features_encoder_is_saved_and_reloads_the_same_model(tmp_path, encoder, width):
    model, x, f = small_features_model(features_indices=[9, 10], features_encoder=encoder,
                                       features_lstm_units=3)
    assert model.model.feature_encoder.encoder == encoder
    assert model.model.feature_encoder.output_width == width
    reference, _ = potentials(model, x[:5], f[:5])
    model.save(str(tmp_path))
    saved = json.loads((tmp_path / FEATURES_MODEL / "config.json").read_text())
    assert saved["features_encoder"] == encoder
    loaded = Sequence(FEATURES_MODEL)
    loaded.load(str(tmp_path))
    assert loaded.model.feature_encoder.encoder == encoder
    np.testing.assert_allclose(potentials(loaded, x[:5], f[:5])[0], reference, rtol=1e-6)
    assert loaded.tag(x[:3], None, features=f[:3]) == model.tag(x[:3], None, features=f[:3])


def test_unknown_features_encoder_is_one_line():
    with pytest.raises(ConfigurationError, match="features_encoder"):
        Sequence(FEATURES_MODEL, architecture="BidLSTM_CRF_FEATURES", features_encoder="gru")


def test_tag_file_with_another_column_count_names_the_line(tmp_path):
    model, _, _ = small_features_model(features_vocabulary_size=3)
    assert model.p.features_indices == [9, 10, 11, 12, 13, 14]  # columns of <= 3 values
    sequences = crf_sequences(SAMPLE_DATE, limit=6)
    sequences[4] = with_extra_column(sequences[4])
    path = tmp_path / "input.crf"
    path.write_text(unlabelled_matrix(sequences), encoding="utf-8")
    line = 1 + sum(len(seq) + 1 for seq in sequences[:4])  # one blank line after each sequence
    assert path.read_text().splitlines()[line - 1].endswith(" EXTRA")
    with pytest.raises(DataFormatError, match=rf"^{path}:{line}: 17 feature columns, but the "
                                              r"model was trained on 16"):
        model.tag_file(str(path), "iob", str(tmp_path / "out.txt"), input_format="crf")


@pytest.fixture(scope="module")
def cli_features(tmp_path_factory):
    """grobidTagger train with --features-indices 9-11, and with --features-vocabulary-size 2,
    side by side; then eval and tag, each on a file whose 3rd sequence has an extra column."""
    folder = tmp_path_factory.mktemp("cli_features")
    common = ["date", "train", "--input", SAMPLE, "--architecture", "BidLSTM_CRF_FEATURES",
              "--max-epoch", "1", "--word-lstm-units", "8", "--seed", "1"]
    trainings = {"indices": start(*common, "--output", folder / "indices",
                                  "--features-indices", "9-11"),
                 "vocabulary": start(*common, "--output", folder / "vocabulary",
                                     "--features-vocabulary-size", "2")}
    results = {name: finish(process) for name, process in trainings.items()}
    sequences = crf_sequences(SAMPLE_DATE, limit=5)
    labelled = [list(seq) for seq in sequences]
    labelled[2] = with_extra_column(labelled[2])
    eval_input = folder / "eval.train"
    eval_input.write_text("\n\n".join("\n".join(seq) for seq in labelled) + "\n")
    tag_input = folder / "tag.crf"
    tag_input.write_text(unlabelled_matrix(labelled))
    line = 1 + sum(len(seq) + 1 for seq in sequences[:2])
    runs = {"eval": start("date", "eval", "--input", eval_input, "--output", folder / "indices",
                          "--architecture", "BidLSTM_CRF_FEATURES"),
            "tag": start("date", "tag", "--input", tag_input, "--output", folder / "indices",
                         "--architecture", "BidLSTM_CRF_FEATURES", "--output-format", "iob")}
    results.update({name: finish(process) for name, process in runs.items()})
    return folder, results, {"eval": (eval_input, line), "tag": (tag_input, line)}


@pytest.mark.parametrize("option,columns", [("indices", [9, 10, 11]),
                                            ("vocabulary", [12, 13, 14])])
def test_cli_options_choose_the_columns_and_they_are_saved(cli_features, option, columns):
    folder, results, _ = cli_features
    assert results[option][0] == 0, results[option][2][-2000:]
    model_dir = folder / option / FEATURES_MODEL
    saved = json.loads((model_dir / "preprocessor.json").read_text())
    assert saved["features_indices"] == columns
    config = json.loads((model_dir / "config.json").read_text())
    assert config["features_vocabulary_size"] == (2 if option == "vocabulary" else 12)


@pytest.mark.parametrize("action", ["eval", "tag"])
def test_cli_input_with_another_column_count_is_one_line_naming_file_and_line(cli_features,
                                                                             action):
    _, results, inputs = cli_features
    path, line = inputs[action]
    message = one_error_line(results[action])
    assert f"{path}:{line}: 17 feature columns, but the model was trained on 16" in message
