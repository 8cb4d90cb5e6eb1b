"""Entity-level metrics checked against seqeval (a test-only dependency) in its default mode."""
import os
import random
import subprocess
import sys
import warnings

import pytest
from seqeval.metrics import accuracy_score as seqeval_accuracy
from seqeval.metrics import classification_report as seqeval_report
from seqeval.metrics import f1_score as seqeval_f1
from seqeval.metrics import precision_score as seqeval_precision
from seqeval.metrics import recall_score as seqeval_recall
from seqeval.metrics.sequence_labeling import get_entities as seqeval_entities

from delft.sequenceLabelling.evaluation import (accuracy_score, classification_report, entity_counts,
                                                f1_score, format_report, get_entities,
                                                precision_recall_f1, precision_score, recall_score)
from delft.utilities.data_path import shared_data_file

TOLERANCE = 1e-12
AVERAGES = {"micro": "micro avg", "macro": "macro avg", "weighted": "weighted avg"}
DATE_TRAIN = shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")


def _quiet(function, *args, **kwargs):
    """seqeval warns about undefined metrics and non-IOB tags; the values are what is compared."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def _close(ours, theirs):
    return abs(ours - float(theirs)) <= TOLERANCE


def assert_entities_match(labels):
    assert get_entities(labels) == _quiet(seqeval_entities, labels)


def assert_matches_seqeval(y_true, y_pred):
    """Every number of ours equals seqeval's for these nested label lists."""
    assert_entities_match(y_true)
    assert_entities_match(y_pred)
    scores = precision_recall_f1(y_true, y_pred)
    micro = scores["micro"]
    assert _close(f1_score(y_true, y_pred), _quiet(seqeval_f1, y_true, y_pred))
    assert _close(precision_score(y_true, y_pred), _quiet(seqeval_precision, y_true, y_pred))
    assert _close(recall_score(y_true, y_pred), _quiet(seqeval_recall, y_true, y_pred))
    assert micro["f1"] == f1_score(y_true, y_pred)
    assert micro["precision"] == precision_score(y_true, y_pred)
    assert micro["recall"] == recall_score(y_true, y_pred)
    if sum(map(len, y_true)):
        assert _close(accuracy_score(y_true, y_pred), seqeval_accuracy(y_true, y_pred))

    report = _quiet(seqeval_report, y_true, y_pred, output_dict=True)
    assert sorted(scores["labels"]) == sorted(set(report) - set(AVERAGES.values()))
    assert list(scores["labels"]) == sorted(scores["labels"])
    for name, block in scores["labels"].items():
        theirs = report[name]
        assert _close(block["precision"], theirs["precision"])
        assert _close(block["recall"], theirs["recall"])
        assert _close(block["f1"], theirs["f1-score"])
        assert block["support"] == theirs["support"]
        assert block["tp"] + block["fn"] == block["support"]
    for ours_key, their_key in AVERAGES.items():
        ours, theirs = scores[ours_key], report[their_key]
        assert ours["support"] == theirs["support"]
        if ours_key == "macro" and not scores["labels"]:
            # seqeval averages an empty array (nan); ours is 0 like every undefined score.
            assert ours["precision"] == ours["recall"] == ours["f1"] == 0.0
            continue
        assert _close(ours["precision"], theirs["precision"])
        assert _close(ours["recall"], theirs["recall"])
        assert _close(ours["f1"], theirs["f1-score"])


# (a) hand cases -------------------------------------------------------------------------------

HAND_CASES = {
    "all O": ([["O", "O"], ["O"]], [["O", "O"], ["O"]]),
    "all O against entities": ([["O", "O"], ["O"]], [["B-a", "I-a"], ["I-b"]]),
    "entities against all O": ([["B-a", "I-a"], ["I-b"]], [["O", "O"], ["O"]]),
    "I- without B-": ([["O", "I-a", "I-a", "O"]], [["O", "B-a", "I-a", "O"]]),
    "I- without B- at start": ([["I-a", "I-a", "O", "I-a"]], [["I-a", "O", "O", "B-a"]]),
    "adjacent same type": ([["B-a", "B-a", "I-a", "O"]], [["B-a", "I-a", "I-a", "O"]]),
    "adjacent B-": ([["B-a", "B-a", "B-a"]], [["B-a", "B-a", "O"]]),
    "type change inside I- run": ([["I-a", "I-b", "I-b", "I-a"]], [["B-a", "I-a", "I-b", "I-a"]]),
    "B- then I- of another type": ([["B-a", "I-b", "I-b"]], [["B-a", "B-b", "I-b"]]),
    "single token B": ([["B-a"]], [["B-a"]]),
    "single token I": ([["I-a"]], [["B-a"]]),
    "single token O": ([["O"]], [["B-a"]]),
    "single tokens": ([["B-a"], ["I-b"], ["O"]], [["I-a"], ["B-b"], ["B-a"]]),
    "entity at sequence boundary": ([["O", "B-a"], ["I-a", "O"]], [["O", "B-a"], ["B-a", "O"]]),
    "angle bracket types": ([["B-<date>", "I-<date>", "I-<other>", "B-<date>"]],
                            [["B-<date>", "I-<date>", "B-<date>", "I-<date>"]]),
    "grobid style": ([["B-<day>", "O", "B-<month>", "O", "B-<year>"]],
                     [["B-<day>", "O", "I-<month>", "I-<year>", "I-<year>"]]),
    "dashes in type": ([["B-x-y", "I-x-y", "O"]], [["B-x-y", "I-x", "O"]]),
    "IOBES": ([["S-a", "B-a", "E-a", "O", "B-b", "I-b", "E-b"]],
              [["S-a", "B-a", "I-a", "O", "B-b", "E-b", "E-b"]]),
    "IOB1": ([["I-a", "I-a", "B-a", "I-b"]], [["I-a", "B-a", "B-a", "I-b"]]),
    "empty sequence among others": ([[], ["B-a"], []], [[], ["B-a"], []]),
    "no sequence content": ([[]], [[]]),
}


@pytest.mark.parametrize("name", sorted(HAND_CASES))
def test_hand_case_matches_seqeval(name):
    y_true, y_pred = HAND_CASES[name]
    assert_matches_seqeval(y_true, y_pred)


ODD_LABELS = [
    [], ["O"], ["O", "O"], ["I-a"], ["B-a", "I-a", "O", "B-b"], ["B-PER", "I-PER", "O", "B-LOC"],
    ["B-<date>", "I-<date>", "I-<date>"], ["I-<b>", "B-<b>", "I-a", "I-c"],
    ["O", "PER", "PER", "O"], ["B", "I", "O", "I"], ["X", "O", "X", "B-a"], ["E-a", "E-a"],
    ["S-a", "I-a", "E-a"], [".", "I-a", ".", "."], [".-a", "I-a"], ["B-", "I-"], ["B-a-b", "I-a-b"],
    ["Ba-b", "I-b"], ["O", "E-a", "O", "S-b", "B-b", "S-b"],
]


@pytest.mark.parametrize("labels", ODD_LABELS, ids=[" ".join(labels) or "empty" for labels in ODD_LABELS])
def test_get_entities_matches_seqeval_on_odd_tags(labels):
    assert_entities_match(labels)
    assert_entities_match([labels])
    assert_entities_match([labels, labels[::-1]])


def test_get_entities_nested_offsets_include_separators():
    assert get_entities([["B-a"], ["I-a", "B-b"]]) == [("a", 0, 0), ("a", 2, 2), ("b", 3, 3)]
    assert get_entities((("I-a",), ("I-a",))) == get_entities([["I-a"], ["I-a"]])


def test_empty_inputs_are_zero():
    assert get_entities([]) == seqeval_entities([]) == []
    for y in ([], [[]], [["O"]]):
        assert f1_score(y, y) == precision_score(y, y) == recall_score(y, y) == 0.0
    assert accuracy_score([], []) == 0.0
    scores = precision_recall_f1([], [])
    assert scores["labels"] == {}
    for key in ("micro", "macro", "weighted"):
        assert scores[key]["precision"] == scores[key]["recall"] == scores[key]["f1"] == 0.0
        assert scores[key]["support"] == 0


def test_flat_lists_score_as_one_sequence():
    y_true = ["B-a", "I-a", "O", "B-b", "I-c"]
    y_pred = ["B-a", "I-a", "B-b", "I-b", "I-c"]
    assert precision_recall_f1(y_true, y_pred) == precision_recall_f1([y_true], [y_pred])
    assert accuracy_score(y_true, y_pred) == accuracy_score([y_true], [y_pred]) == 0.6
    assert_matches_seqeval([y_true], [y_pred])


def test_entity_counts():
    y_true = [["B-a", "I-a", "O", "B-b"], ["I-c", "O"]]
    y_pred = [["B-a", "O", "O", "B-b"], ["O", "B-a"]]
    assert entity_counts(y_true, y_pred) == {"a": (0, 2, 1), "b": (1, 1, 1), "c": (0, 0, 1)}
    assert list(entity_counts(y_pred, y_true)) == ["a", "b", "c"]
    block = precision_recall_f1(y_true, y_pred)["labels"]["a"]
    assert (block["tp"], block["fp"], block["fn"]) == (0, 2, 1)


@pytest.mark.parametrize("y_true, y_pred, error", [
    ([["O", "O"]], [["O"]], ValueError),
    ([["O"], ["O"]], [["O"]], ValueError),
    (["O", "O"], ["O"], ValueError),
    ([["O"]], ["O"], TypeError),
    ([["O"], "O"], [["O"], "O"], TypeError),
])
def test_inconsistent_inputs_raise(y_true, y_pred, error):
    with pytest.raises(error):
        precision_recall_f1(y_true, y_pred)
    with pytest.raises(error):
        accuracy_score(y_true, y_pred)


# (b) random sequences -------------------------------------------------------------------------

RANDOM_TAGS = ["O", "B-a", "I-a", "B-<b>", "I-<b>", "I-c"]


def _random_sequences(rng, tags, count, max_length):
    return [[rng.choice(tags) for _ in range(rng.randint(1, max_length))] for _ in range(count)]


def _random_pairs(seed, tags, pairs):
    rng = random.Random(seed)
    cases = []
    for _ in range(pairs):
        y_true = _random_sequences(rng, tags, rng.randint(1, 4), 12)
        y_pred = [[rng.choice(tags) if rng.random() < 0.4 else label for label in sequence]
                  for sequence in y_true]
        cases.append((y_true, y_pred))
    return cases


RANDOM_CASES = _random_pairs(20240311, RANDOM_TAGS, 400)


@pytest.mark.parametrize("index", range(len(RANDOM_CASES)))
def test_random_pair_matches_seqeval(index):
    y_true, y_pred = RANDOM_CASES[index]
    assert_matches_seqeval(y_true, y_pred)


def test_random_corpus_matches_seqeval():
    y_true = [sequence for pair in RANDOM_CASES for sequence in pair[0]]
    y_pred = [sequence for pair in RANDOM_CASES for sequence in pair[1]]
    assert_matches_seqeval(y_true, y_pred)


def test_random_iobes_and_odd_tags_match_seqeval():
    tags = RANDOM_TAGS + ["E-a", "S-a", "S-<b>", "E-c", "B", "I", ".", "X", "B-a-b", "I-a-b"]
    for y_true, y_pred in _random_pairs(7, tags, 150):
        assert_matches_seqeval(y_true, y_pred)


# (c) realistic GROBID date data ---------------------------------------------------------------

def _read_grobid_labels(path):
    """Label sequences of a GROBID training file, converted to IOB2."""
    sequences, current = [], []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                if current:
                    sequences.append(current)
                    current = []
                continue
            label = line.split()[-1]
            if label.endswith("other>"):
                current.append("O")
            elif label.startswith("I-"):
                current.append("B-" + label[2:])
            else:
                current.append("I-" + label)
    if current:
        sequences.append(current)
    return sequences


@pytest.mark.skipif(not DATE_TRAIN.exists(), reason="shared GROBID date data absent: {}".format(DATE_TRAIN))
def test_grobid_date_corpus_matches_seqeval():
    y_true = _read_grobid_labels(DATE_TRAIN)
    assert len(y_true) > 100
    inventory = sorted({label for sequence in y_true for label in sequence})
    assert "B-<year>" in inventory and "I-<day>" in inventory and "O" in inventory
    rng = random.Random(220311)
    y_pred = [[rng.choice(inventory) if rng.random() < 0.1 else label for label in sequence]
              for sequence in y_true]
    assert y_pred != y_true
    assert_matches_seqeval(y_true, y_pred)
    assert_matches_seqeval(y_true, y_true)
    assert f1_score(y_true, y_true) == 1.0
    assert 0.0 < f1_score(y_true, y_pred) < 1.0


# report ---------------------------------------------------------------------------------------

def test_classification_report_table():
    y_true = [["B-zeta", "O", "B-<date>", "I-<date>"], ["I-alpha"]]
    y_pred = [["B-zeta", "O", "B-<date>", "O"], ["B-alpha"]]
    scores = precision_recall_f1(y_true, y_pred)
    text = classification_report(y_true, y_pred)
    assert text == format_report(scores, digits=4)
    lines = text.splitlines()
    assert lines[0].split() == ["precision", "recall", "f1-score", "support"]
    rows = [line.split() for line in lines[2:5]]
    assert [row[0] for row in rows] == ["<date>", "alpha", "zeta"]
    for row in rows:
        block = scores["labels"][row[0]]
        assert row[1:] == ["{:.4f}".format(block[key]) for key in ("precision", "recall", "f1")] + [
            str(block["support"])]
    assert lines[5] == ""
    assert lines[6].startswith("all (micro avg.)") and lines[7].startswith("all (macro avg.)")
    assert lines[6].split()[-4:] == ["{:.4f}".format(scores["micro"][key])
                                     for key in ("precision", "recall", "f1")] + ["3"]
    assert len({len(line) for line in lines if line}) == 1
    assert "0.667" in classification_report(y_true, y_pred, digits=3)


def test_classification_report_without_entities():
    text = classification_report([["O"]], [["O"]], digits=2)
    assert text.splitlines()[-1].split() == ["all", "(macro", "avg.)", "0.00", "0.00", "0.00", "0"]


# module hygiene -------------------------------------------------------------------------------

def test_module_imports_neither_tensorflow_nor_seqeval():
    env = {key: value for key, value in os.environ.items() if key != "DELFT_CPU_REPLICAS"}
    code = ("import sys, delft.sequenceLabelling.evaluation; "
            "assert not {'tensorflow', 'seqeval'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, env=env,
                   cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
