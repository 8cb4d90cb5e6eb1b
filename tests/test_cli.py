"""grobidTagger.py as a user runs it: train_eval, eval, tag, and one-line errors for bad input.

Each command is a real subprocess (``python delft/applications/grobidTagger.py ...`` from the repo
root); independent commands are started together to keep the wall time down.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import (REPO_ROOT, SAMPLE_DATE, crf_sequences, delft_stderr_lines, subprocess_env,
                      unlabelled_matrix)

SCRIPT = "delft/applications/grobidTagger.py"
SAMPLE = SAMPLE_DATE.relative_to(REPO_ROOT)
SAVED = "date-BidLSTM_CRF"  # under --output: the folder name GROBID loads
NUMBER = r"(\d+\.\d+)"
TEXTS = ["January 2006", "March the 27th, 2001", " on  April 27, 2001. . "]  # DeLFT's tag examples


def start(*args):
    return subprocess.Popen([sys.executable, SCRIPT, *map(str, args)], cwd=str(REPO_ROOT),
                            env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(process, timeout=400):
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        pytest.fail(f"timed out: {process.args}\n{stderr[-2000:]}")
    return process.returncode, stdout, stderr


def assert_ok(result):
    code, stdout, stderr = result
    assert code == 0, stderr[-4000:]
    assert "Traceback" not in stderr and "Traceback" not in stdout


# -- a model trained by the CLI --------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli_models(tmp_path_factory):
    output = tmp_path_factory.mktemp("cli_models")
    result = finish(start("date", "train_eval", "--input", SAMPLE, "--output", output,
                          "--max-epoch", "2", "--seed", "1"))
    return output, result


@pytest.fixture(scope="module")
def tag_input(tmp_path_factory):
    sequences = crf_sequences(SAMPLE_DATE, limit=30)
    path = tmp_path_factory.mktemp("tag_input") / "dates.crf"
    path.write_text(unlabelled_matrix(sequences), encoding="utf-8")
    return path, [[line.split()[0] for line in seq] for seq in sequences]


@pytest.fixture(scope="module")
def text_input(tmp_path_factory):
    path = tmp_path_factory.mktemp("text_input") / "dates.txt"
    path.write_text("".join(f"{text}\n" for text in TEXTS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def after_training(cli_models, tag_input, text_input):
    """eval, tag (iob, json, a text file) on the saved model, run side by side."""
    output, _ = cli_models
    path, _ = tag_input
    processes = {
        "text": start("date", "tag", "--file-in", text_input, "--output", output),
        "eval": start("date", "eval", "--input", SAMPLE, "--output", output),
        "iob": start("date", "tag", "--input", path, "--output", output, "--output-format", "iob"),
        "json": start("date", "tag", "--input", path, "--output", output),
        "verbose": start("date", "tag", "--input", path, "--output", output, "--verbose"),
    }
    return {name: finish(process) for name, process in processes.items()}


def report_rows(stdout):
    rows = {}
    for line in stdout.splitlines():
        match = re.match(rf"^\s*(<\w+>|all \(micro avg\.\))\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+(\d+)\s*$",
                         line)
        if match:
            name, p, r, f, support = match.groups()
            rows[name] = (float(p), float(r), float(f), int(support))
    return rows


def test_train_eval_reports_and_saves(cli_models):
    output, result = cli_models
    assert_ok(result)
    _, stdout, stderr = result
    n = len(crf_sequences(SAMPLE_DATE))
    n_eval = math.ceil(n * 0.1)
    n_valid = math.ceil((n - n_eval) * 0.1)
    assert (f"{n - n_eval - n_valid} train sequences, {n_valid} validation sequences, "
            f"{n_eval} evaluation sequences") in stderr  # logs on stderr, results on stdout
    rows = report_rows(stdout)
    assert {"<day>", "<month>", "<year>", "all (micro avg.)"} <= set(rows)
    assert rows["all (micro avg.)"][3] == sum(rows[k][3] for k in ("<day>", "<month>", "<year>"))
    for p, r, f, _ in rows.values():
        assert 0.0 <= p <= 1.0 and 0.0 <= r <= 1.0 and 0.0 <= f <= 1.0
    assert len(re.findall(r"^epoch\s+\d+/2\b", stderr, re.M)) in (1, 2)
    model_dir = output / SAVED
    assert {"config.json", "preprocessor.json", "model.weights.h5"} <= {
        p.name for p in model_dir.iterdir()}
    config = json.loads((model_dir / "config.json").read_text())
    assert config["architecture"] == "BidLSTM_CRF"
    assert (config["batch_size"], config["max_sequence_length"]) == (60, 50)  # date's defaults
    # the model folder, and the hidden lock that serialises saves into it (doc/usage.md)
    assert sorted(p.name for p in output.iterdir()) == [f".{SAVED}.lock", SAVED]


def test_eval_on_the_saved_model(after_training):
    result = after_training["eval"]
    assert_ok(result)
    rows = report_rows(result[1])
    assert {"<day>", "<month>", "<year>", "all (micro avg.)"} <= set(rows)
    # the whole sample is evaluated
    assert rows["all (micro avg.)"][3] > 1000


def test_stderr_holds_no_tensorflow_line_unless_verbose(cli_models, after_training):
    """TensorFlow's C++ lines (absl's notice, CUDA probing, cuInit's error without a GPU) are
    held back; ``--verbose`` shows them."""
    from delft.utilities.native_logs import is_tensorflow_line

    for name, (code, _, stderr) in [("train_eval", cli_models[1])] + [
            (key, after_training[key]) for key in ("eval", "iob", "json")]:
        assert code == 0, stderr[-2000:]
        assert [line for line in stderr.splitlines() if is_tensorflow_line(line)] == [], name
    assert_ok(after_training["verbose"])
    assert any(is_tensorflow_line(line) for line in after_training["verbose"][2].splitlines())


def test_tag_iob(after_training, tag_input):
    result = after_training["iob"]
    assert_ok(result)
    _, expected_tokens = tag_input
    blocks, current = [], []
    for line in result[1].splitlines():
        if "\t" in line:
            token, label = line.split("\t")
            assert re.match(r"^(O|[BI]-<\w+>)$", label), line
            current.append(token)
        elif not line.strip() and current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    assert blocks == expected_tokens


def test_tag_json_stdout_is_json(after_training, tag_input):
    result = after_training["json"]
    assert_ok(result)
    _, expected_tokens = tag_input
    document = json.loads(result[1])  # nothing but the JSON document on stdout
    assert document["model"] == SAVED
    assert [item["text"] for item in document["texts"]] == [" ".join(t) for t in expected_tokens]


def test_tag_file_in_tags_its_lines(after_training):
    result = after_training["text"]
    assert_ok(result)
    document = json.loads(result[1])
    assert [item["text"] for item in document["texts"]] == TEXTS
    assert all("entities" in item for item in document["texts"])


# -- user errors: one line on stderr, no traceback --------------------------------------------------
BAD_FILES = {
    "ragged": (b"June june I-<month>\n2005 2005 X I-<year>\n", 2),
    "no_label_column": (b"June\n2005\n", 1),
    "empty": (b"", None),
    "blank_only": (b"\n  \n\n", None),
    "undecodable": (b"June june I-<month>\n\n20\xff05 2005 I-<year>\n", 3),
    "ragged_later": (b"a b I-<x>\nc d <x>\n\ne f I-<y>\ng h i <y>\n", 5),
}


@pytest.fixture(scope="module")
def error_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad_input")
    runs = {}
    for name, (content, _) in BAD_FILES.items():
        path = folder / f"{name}.train"
        path.write_bytes(content)
        runs[name] = (path, start("date", "train", "--input", path, "--output", folder / "out",
                                  "--max-epoch", "1"))
    runs["eval_without_model"] = (folder / "no_models", start(
        "date", "eval", "--input", SAMPLE, "--output", folder / "no_models"))
    runs["unknown_architecture"] = (None, start(
        "date", "train", "--input", SAMPLE, "--output", folder / "out", "--architecture",
        "BidLSTM_NOPE"))
    runs["missing_input"] = (folder / "absent.train", start(
        "date", "train", "--input", folder / "absent.train", "--output", folder / "out"))
    runs["missing_file_in"] = (folder / "absent.txt", start(
        "date", "tag", "--file-in", folder / "absent.txt", "--output", folder / "out"))
    runs["train_folds"] = (None, start(
        "date", "train", "--input", SAMPLE, "--output", folder / "out", "--fold-count", "2"))
    results = {name: (path, finish(process)) for name, (path, process) in runs.items()}
    results["out_dir"] = folder / "out"
    return results


def one_error_line(result):
    code, stdout, stderr = result
    assert code != 0
    assert "Traceback" not in stderr and "Traceback" not in stdout
    lines = delft_stderr_lines(stderr)
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_malformed_input_is_one_line_naming_file_and_line(error_runs, name):
    path, result = error_runs[name]
    line = one_error_line(result)
    assert str(path) in line
    line_number = BAD_FILES[name][1]
    if line_number is not None:
        assert f"{path}:{line_number}:" in line
    else:
        assert "empty" in line
    # nothing was saved
    assert not (error_runs["out_dir"] / SAVED).exists()


def test_eval_without_a_saved_model(error_runs):
    path, result = error_runs["eval_without_model"]
    line = one_error_line(result)
    assert str(path / SAVED) in line


def test_unknown_architecture(error_runs):
    _, result = error_runs["unknown_architecture"]
    line = one_error_line(result)
    assert "BidLSTM_NOPE" in line and "BidLSTM_CRF" in line


def test_fold_count_with_train_is_refused(error_runs):
    """A folder keeps one model, the best fold, which only evaluation picks (DeLFT's save of
    unevaluated folds writes no weights): train refuses --fold-count before training."""
    _, result = error_runs["train_folds"]
    line = one_error_line(result)
    assert "--fold-count" in line and "train_eval" in line
    assert not (error_runs["out_dir"] / SAVED).exists()


@pytest.mark.parametrize("name", ["missing_input", "missing_file_in"])
def test_missing_input_file(error_runs, name):
    path, result = error_runs[name]
    line = one_error_line(result)
    assert str(path) in line


# -- the transformer family through the CLI -----------------------------------------------------
BERT_SAVED = "date-BERT_CRF"


@pytest.fixture(scope="module")
def bert_cli(tmp_path_factory, tag_input):
    """train_eval BERT_CRF on a tiny random checkpoint, then tag with the saved model, with the
    checkpoint directory removed (the model directory must carry the encoder and tokenizer)."""
    from tiny_transformers import write_tiny_checkpoint

    root = tmp_path_factory.mktemp("bert_cli")
    checkpoint = write_tiny_checkpoint("bert", str(root / "checkpoint"))
    output = root / "models"
    trained = finish(start("date", "train_eval", "--input", SAMPLE, "--output", output,
                           "--architecture", "BERT_CRF", "--transformer", checkpoint,
                           "--max-epoch", "1", "--learning-rate", "1e-3", "--seed", "1"))
    shutil.rmtree(checkpoint)
    path, _ = tag_input
    tagged = finish(start("date", "tag", "--input", path, "--output", output, "--architecture",
                          "BERT_CRF", "--output-format", "iob"))
    return output, trained, tagged


def test_bert_crf_train_eval_then_tag_without_the_checkpoint(bert_cli, tag_input):
    output, trained, tagged = bert_cli
    assert_ok(trained)
    rows = report_rows(trained[1])
    assert "all (micro avg.)" in rows
    model_dir = output / BERT_SAVED
    config = json.loads((model_dir / "config.json").read_text())
    assert config["architecture"] == "BERT_CRF"
    assert (config["batch_size"], config["max_sequence_length"]) == (80, 30)  # date's defaults
    resources = {p.name for p in (model_dir / "transformer").iterdir()}
    assert "config.json" in resources and ("tokenizer.json" in resources
                                           or "vocab.txt" in resources)
    assert_ok(tagged)
    _, expected_tokens = tag_input
    tokens = [[line.split("\t")[0] for line in block.splitlines() if "\t" in line]
              for block in tagged[1].split("\n\n")]
    assert [t for t in tokens if t] == expected_tokens


@pytest.fixture(scope="module")
def bert_error_runs(tmp_path_factory):
    from tiny_transformers import write_tiny_checkpoint

    root = tmp_path_factory.mktemp("bert_errors")
    unsupported = write_tiny_checkpoint("bert", str(root / "unsupported"))
    config_path = os.path.join(unsupported, "config.json")
    with open(config_path, encoding="utf-8") as stream:
        config = json.load(stream)
    config["model_type"] = "gpt2"
    with open(config_path, "w", encoding="utf-8") as stream:
        json.dump(config, stream)
    runs = {"absent": (root / "absent", start(
                "date", "train", "--input", SAMPLE, "--output", root / "out", "--architecture",
                "BERT_CRF", "--transformer", root / "absent")),
            "unsupported": (unsupported, start(
                "date", "train", "--input", SAMPLE, "--output", root / "out", "--architecture",
                "BERT_CRF", "--transformer", unsupported))}
    results = {name: (path, finish(process)) for name, (path, process) in runs.items()}
    return results, root / "out"


@pytest.mark.parametrize("name, words", [("absent", "no such checkpoint"),
                                         ("unsupported", "'gpt2' is not supported")])
def test_bad_transformer_is_one_line(bert_error_runs, name, words):
    results, out_dir = bert_error_runs
    path, result = results[name]
    line = one_error_line(result)
    assert str(path) in line and words in line
    assert not out_dir.exists() or not any(out_dir.iterdir())
