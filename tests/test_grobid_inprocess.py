"""GROBID's in-process calls (its DeLFTModel, doc/usage.md), run exactly in its order against a model saved here.

GROBID's Java side (DeLFTModel) embeds CPython, imports delft, loads ``<models dir>/date-BidLSTM_CRF``,
overrides two runtime settings, reads the feature matrix it built (no label column) with
``load_data_crf_string`` and calls ``tag(x, None)``; it then maps every label with
``delft2grobidLabel`` (``B-<x>`` -> ``I-<x>``, ``I-<x>`` -> ``<x>``, ``O`` -> ``<other>``).
"""
import json
import re
import textwrap

import pytest

from conftest import MODEL_NAME, crf_sequences, run_python, token_accuracy, unlabelled_matrix

IOB2 = re.compile(r"^(O|[BI]-<[^<>\s]+>)$")
GROBID_LABEL = re.compile(r"^(I-)?<[^<>\s]+>$")


@pytest.fixture(scope="module")
def grobid_text(date_corpus_path):
    """The date matrix (all of it: train, validation and eval lines) without its label column."""
    sequences = crf_sequences(date_corpus_path)
    return unlabelled_matrix(sequences), sequences


@pytest.fixture(scope="module")
def grobid_result(trained_date, grobid_text):
    text, _ = grobid_text
    # ---- GROBID's calls, in its order -----------------------------------------------------
    import delft.sequenceLabelling  # noqa: F401
    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file, load_data_crf_string  # noqa: F401
    model = Sequence('date-BidLSTM_CRF')
    model.load(dir_path=str(trained_date.models_dir))
    model.model_config.max_sequence_length = 3000
    model.model_config.batch_size = 20
    x_all, f_all = load_data_crf_string(text)
    result = model.tag(x_all, None)
    result_with_features = model.tag(x_all, None, features=f_all)
    # ---------------------------------------------------------------------------------------
    return x_all, f_all, result, result_with_features


def test_result_shape_one_pair_per_input_token(grobid_result, grobid_text):
    x_all, _, result, _ = grobid_result
    _, sequences = grobid_text
    assert isinstance(result, list)
    assert len(result) == len(x_all) == len(sequences)
    for pairs, tokens, lines in zip(result, x_all, sequences):
        assert isinstance(pairs, list)
        assert len(pairs) == len(tokens) == len(lines)
        for pair, token, line in zip(pairs, tokens, lines):
            assert isinstance(pair, list) and len(pair) == 2
            assert isinstance(pair[0], str) and isinstance(pair[1], str)
            # same token, same position: the first column of the matrix line
            assert pair[0] == token == line.split()[0]


def test_labels_are_iob2_and_map_to_grobid_labels(grobid_result):
    from delft.sequenceLabelling.reader import (translate_grobid_label_to_iob,
                                                translate_iob_label_to_grobid)

    _, _, result, _ = grobid_result
    labels = {label for pairs in result for _, label in pairs}
    assert labels, "no label at all"
    assert all(IOB2.match(label) for label in labels), labels
    for label in labels:
        grobid = translate_iob_label_to_grobid(label)
        assert GROBID_LABEL.match(grobid), (label, grobid)
        assert translate_grobid_label_to_iob(grobid) == label
    assert {"B-<day>", "B-<month>", "B-<year>", "O"} <= labels


def test_tagged_labels_match_gold_of_training_data(grobid_result, grobid_text, date_corpus):
    from delft.sequenceLabelling.reader import translate_iob_label_to_grobid

    _, _, result, _ = grobid_result
    _, sequences = grobid_text
    _, y_gold, _ = date_corpus
    assert token_accuracy(result, y_gold) > 0.9
    # and in GROBID's own form, against the label column of the file itself
    # (GROBID writes the first <other> of a run as I-<other>; delft2grobidLabel gives <other>)
    gold_column = [[line.split()[-1].replace("I-<other>", "<other>") for line in seq]
                   for seq in sequences]
    mapped = [[translate_iob_label_to_grobid(label) for _, label in pairs] for pairs in result]
    total = sum(map(len, gold_column))
    correct = sum(a == b for p, g in zip(mapped, gold_column) for a, b in zip(p, g))
    assert correct / total > 0.9


def test_features_argument_gives_the_same_result_for_a_model_without_features(grobid_result):
    _, f_all, result, result_with_features = grobid_result
    assert len(f_all) == len(result)
    assert result_with_features == result


def test_real_date_lines(real_date_path, trained_date):
    """The same calls on lines of the real GROBID date data (skipped without it)."""
    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file, load_data_crf_string

    sequences = crf_sequences(real_date_path, limit=200)
    model = Sequence('date-BidLSTM_CRF')
    model.load(dir_path=str(trained_date.models_dir))
    model.model_config.max_sequence_length = 3000
    model.model_config.batch_size = 20
    x_all, f_all = load_data_crf_string(unlabelled_matrix(sequences))
    result = model.tag(x_all, None)
    _, y_gold, _ = load_data_and_labels_crf_file(real_date_path)
    assert [[t for t, _ in pairs] for pairs in result] == [list(x) for x in x_all]
    assert token_accuracy(result, y_gold[:200]) > 0.9


def test_fresh_interpreter_gives_the_same_result(tmp_path, trained_date, grobid_text,
                                                 grobid_result):
    """Nothing may depend on test state: the same calls in a new process, outside the repo."""
    text, _ = grobid_text
    matrix = tmp_path / "matrix.txt"
    matrix.write_text(text, encoding="utf-8")
    out = tmp_path / "result.json"
    script = tmp_path / "grobid_calls.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys
        import delft.sequenceLabelling
        from delft.sequenceLabelling import Sequence
        from delft.sequenceLabelling.reader import load_data_and_labels_crf_file, load_data_crf_string
        model = Sequence('{MODEL_NAME}')
        model.load(dir_path={str(trained_date.models_dir)!r})
        model.model_config.max_sequence_length = 3000
        model.model_config.batch_size = 20
        text = open({str(matrix)!r}, encoding="utf-8").read()
        x_all, f_all = load_data_crf_string(text)
        result = model.tag(x_all, None)
        result_f = model.tag(x_all, None, features=f_all)
        json.dump({{"result": result, "result_f": result_f}}, open({str(out)!r}, "w"))
    """), encoding="utf-8")
    completed = run_python([script], cwd=tmp_path, timeout=240)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr
    child = json.loads(out.read_text())
    _, _, result, result_with_features = grobid_result
    assert child["result"] == result
    assert child["result_f"] == result_with_features
