"""Tests of the committed synthetic date sample and of the script that writes it."""
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
from conftest import load_module
from delft.utilities.data_path import shared_data_file

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "data" / "make_sample_date.py"
SAMPLE = REPO_ROOT / "data" / "sequenceLabelling" / "grobid" / "date" / "date-sample.train"
REAL = shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")


make_sample_date = load_module(SCRIPT)


def columns(path):
    return [line.split() for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def test_sample_parses_with_all_labels():
    assert SAMPLE.stat().st_size < 300_000
    x, y, f = load_data_and_labels_crf_file(SAMPLE)
    assert len(x) >= 600
    assert all(len(features) == 16 for sequence in f for features in sequence)
    labels = Counter(label for sequence in y for label in sequence)
    assert {"O", "B-<day>", "B-<month>", "B-<year>"} <= set(labels)
    grobid = {row[-1] for row in columns(SAMPLE)}
    assert {label.removeprefix("I-") for label in grobid} == {"<day>", "<month>", "<year>", "<other>"}


def test_sample_formats():
    texts = {" ".join(tokens) for tokens in load_data_and_labels_crf_file(SAMPLE)[0]}
    assert any(text.startswith("Received") for text in texts)
    assert any(text.startswith("(") and text.endswith(")") for text in texts)
    assert any("Sept ." in text for text in texts)
    assert any(" / " in text for text in texts) and any(" - " in text for text in texts)


def test_script_regenerates_identical_bytes(tmp_path):
    assert make_sample_date.sample_text().encode("utf-8") == SAMPLE.read_bytes()
    output = tmp_path / "again.train"
    subprocess.run([sys.executable, str(SCRIPT), str(output)], check=True, capture_output=True)
    assert output.read_bytes() == SAMPLE.read_bytes()


def test_sample_layout_matches_the_real_file():
    if not REAL.exists():
        pytest.skip(f"shared data file {REAL} is absent")
    real, sample = REAL.read_text(encoding="utf-8"), SAMPLE.read_text(encoding="utf-8")
    # Same separator between sequences (an empty line, then one holding a space), same column count.
    for text in (real, sample):
        assert text.count("\n\n \n") == text.count("LINESTART")
    assert {len(row) for row in columns(REAL)} == {len(row) for row in columns(SAMPLE)} == {18}
    for column in range(10, 17):
        assert {row[column] for row in columns(SAMPLE)} <= {row[column] for row in columns(REAL)}


def test_feature_rules_reproduce_the_real_file():
    if not REAL.exists():
        pytest.skip(f"shared data file {REAL} is absent")
    x, _, f = load_data_and_labels_crf_file(REAL)
    for tokens, features in zip(x, f):
        for position, (token, token_features) in enumerate(zip(tokens, features)):
            assert make_sample_date.token_features(token, position, len(tokens)) == token_features, token
