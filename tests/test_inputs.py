"""Python API inputs of the wrong shape or type: one readable sentence, before any work.

``tag`` given a bare string, None, a number, a mix of texts and token lists, a token that is not a
string, features that do not align; ``train``/``eval`` given tokens and labels that do not align:
a TypeError or ValueError in one line. Data whose labels are all one label: a logged warning.
"""
import logging

import numpy as np
import pytest

from delft.sequenceLabelling import Sequence, inputs

NOT_A_LIST = [
    ("12 June 2005", "not a str: to tag one text, pass [text]"),
    (None, "not None"),
    (5, "not an int"),
    (b"12 June", "not a bytes"),
]
BAD_ITEMS = [
    (["12 June", ["2005"]], "all raw strings or all token lists: texts[0] is a str, texts[1] a list"),
    ([["12", "June"], "2005"], "all raw strings or all token lists: texts[0] is a list, texts[1] a str"),
    ([["12", "June"], None], "texts[1] must be a token list (or a raw string), not None"),
    ([["12", 6]], "texts[0][1] must be a token (a str), not an int"),
    ([5], "texts[0] must be a token list (or a raw string), not an int"),
]


def one_sentence(error):
    message = str(error.value)
    assert "\n" not in message and message.strip() == message
    return message


@pytest.mark.parametrize("texts, expected", NOT_A_LIST + BAD_ITEMS)
def test_tag_refuses_what_is_not_texts_or_token_lists(loaded_date, texts, expected):
    with pytest.raises(TypeError) as error:
        loaded_date.tag(texts, None)
    assert expected in one_sentence(error)


def test_what_grobid_and_users_pass_is_accepted(loaded_date):
    """numpy object arrays of lists (GROBID's load_data_crf_string), tuples, numpy strings."""
    texts = [["12", "June"], ["2005"]]
    as_lists = loaded_date.tag(texts, None)
    assert [len(r) for r in as_lists] == [2, 1]
    grobid = np.empty(2, dtype=object)
    grobid[0], grobid[1] = ["12", "June"], ["2005"]
    assert loaded_date.tag(grobid, None) == as_lists
    assert loaded_date.tag(tuple(map(tuple, texts)), None) == as_lists
    assert loaded_date.tag([np.array(t) for t in texts], None) == as_lists
    # the caller's token lists are read as they are, never changed, whatever the output
    for output_format in (None, "json", "tei", "iob"):
        loaded_date.tag(texts, output_format)
    assert texts == [["12", "June"], ["2005"]]
    assert [len(r) for r in loaded_date.tag(np.array(["12 June 2005"]), None)] == [3]


def test_features_that_do_not_align_are_a_value_error(trained_date, tmp_path):
    x, f = trained_date.x_eval[:3], trained_date.f_eval[:3]
    with pytest.raises(ValueError, match="features has 2 sequences for 3 token sequences"):
        inputs.check_features(f[:2], x)
    with pytest.raises(ValueError, match=r"features\[1\] has \d+ feature rows for \d+ tokens"):
        inputs.check_features([f[0], f[1][:-1], f[2]], x)


@pytest.mark.parametrize("x, y, error, expected", [
    ([["12", "June"]], [["B-<day>", "B-<month>"], ["O"]], ValueError,
     "training data has 1 token sequences but 2 label sequences"),
    ([["12", "June"], ["2005"]], [["B-<day>"], ["B-<year>"]], ValueError,
     "training sequence 0 has 2 tokens but 1 labels"),
    ("12 June", [["O"]], TypeError, "training tokens must be a list of sequences, not a str"),
    ([["12", "June"]], None, TypeError, "training labels must be a list of sequences, not None"),
    ([["12", 5]], [["O", "O"]], TypeError, "training sequence 0, token[1] must be a token"),
])
def test_train_refuses_data_that_does_not_align(x, y, error, expected):
    model = Sequence("aligned", max_epoch=1)
    with pytest.raises(error) as info:
        model.train(x, y)
    assert expected in one_sentence(info)
    assert model.model is None  # refused before anything was built


def test_validation_and_evaluation_data_are_checked_too(loaded_date):
    with pytest.raises(ValueError, match="validation sequence 0 has 1 tokens but 2 labels"):
        Sequence("aligned", max_epoch=1).train([["12"]], [["O"]], x_valid=[["12"]],
                                                y_valid=[["O", "O"]])
    with pytest.raises(ValueError, match="evaluation data has 1 token sequences but 0 label"):
        loaded_date.eval([["12"]], [])


def test_data_labelled_all_o_is_a_warning(trained_date, caplog):
    x = trained_date.x_train[:40]
    y = [["O"] * len(seq) for seq in x]
    model = Sequence("all-o", max_epoch=1, batch_size=20, seed=1)
    with caplog.at_level(logging.WARNING, logger="delft.sequenceLabelling.inputs"):
        model.train(x, y)
    assert ["every label of the training data is 'O': there is no entity to learn and the entity "
            "F1 will be 0"] == [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_one_label_other_than_o_and_varied_labels():
    assert inputs.warn_if_one_label([["B-<year>"], ["B-<year>"]]) == "B-<year>"
    assert inputs.warn_if_one_label([["O", "B-<year>"]]) is None
