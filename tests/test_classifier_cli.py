"""The classifier CLIs on bad training data: one line naming the file and the line, exit code 2,
before any training, and no model folder written."""
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, delft_stderr_lines, subprocess_env

APPLICATIONS = REPO_ROOT / "delft" / "applications"
GOOD_ROW = '"Copyright 2019 Elsevier Ltd. All rights reserved.",publisher,copyright\n'
# name: (application, file name, content, line named in the error, words of the reason)
BAD_INPUT = {
    "ragged_row": ("licenseClassifier", "ragged.csv", GOOD_ROW + '"no licence column",authors\n',
                   2, "2 column(s) where the first row has 3"),
    "unknown_class": ("licenseClassifier", "unknown.csv", GOOD_ROW + '"a text",nobody,CC-BY\n',
                      2, "label 'nobody' is not one of the classes"),
    "empty_text": ("licenseClassifier", "empty.csv", GOOD_ROW + '"",authors,CC-BY\n', 2,
                   "empty text"),
    "no_label_column": ("licenseClassifier", "nolabel.csv", '"a text"\n"another text"\n', 1,
                        "no label column"),
    "citation_sentiment": ("citationClassifier", "citations.txt",
                           "P1\tP2\to\tA fine citation.\nP3\tP4\tx\tAnother one.\n", 2,
                           "sentiment 'x' is not one of n, o, p"),
    "citation_fields": ("citationClassifier", "fields.txt", "P1\tP2\to\n", 1,
                        "3 tab-separated field(s) where 4 are expected"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every bad file through ``train_eval`` at once (one process each, in parallel)."""
    folder = tmp_path_factory.mktemp("bad_classification_input")
    processes = {}
    for name, (application, file_name, content, _, _) in BAD_INPUT.items():
        (folder / file_name).write_text(content, encoding="utf-8")
        processes[name] = subprocess.Popen(
            [sys.executable, str(APPLICATIONS / f"{application}.py"), "train_eval", "--input",
             file_name, "--output", str(folder / name), "--max-epoch", "1"],
            cwd=folder, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
    results = {}
    for name, process in processes.items():
        stdout, stderr = process.communicate(timeout=300)
        results[name] = (process.returncode, stdout, stderr)
    return folder, results


@pytest.mark.parametrize("name", sorted(BAD_INPUT))
def test_bad_training_data_is_one_line_naming_file_and_line(runs, name):
    folder, results = runs
    code, stdout, stderr = results[name]
    _, file_name, _, line_number, reason = BAD_INPUT[name]
    assert code == 2, stderr[-3000:]
    assert "Traceback" not in stderr and stdout == ""
    lines = delft_stderr_lines(stderr)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {file_name}:{line_number}: ") and reason in lines[0]
    assert not (folder / name).exists()  # refused before any model folder was made
