"""Nothing silently wrong, nothing outside its folder: each case here once passed silently (or
with a deep traceback); each is now refused in one sentence naming what is wrong, or made safe.
"""
import json
import math
import re
import sys

import pytest

from conftest import REPO_ROOT, SAMPLE_DATE, delft_stderr_lines, run_python, subprocess_env
from delft.utilities.errors import ConfigurationError

GROBID = REPO_ROOT / "delft" / "applications" / "grobidTagger.py"
DRIVER = REPO_ROOT / "tests" / "interrupted_training.py"


def one_line_error(done):
    assert done.returncode == 2, done.stderr[-3000:]
    lines = delft_stderr_lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert done.stdout == ""
    return lines[0]


# -- every number checked in one place: the CLI, the Python API, a model folder ------------------

@pytest.mark.parametrize("setting,value,expected", [
    ("learning_rate", math.nan, "learning_rate must be a finite number, not nan"),
    ("dropout", math.inf, "dropout must be a finite number, not inf"),
    ("batch_size", -1, "batch_size must be >= 1, not -1"),
    ("batch_size", "abc", "batch_size must be an integer, not 'abc'"),
    ("seed", -1, "seed must be >= 0, not -1"),
    ("seed", 8589934592, "seed must be <= 4294967295, not 8589934592"),
    ("max_epoch", 2.5, "max_epoch must be an integer, not 2.5"),
])
def test_sequence_settings_are_checked(setting, value, expected):
    from delft.sequenceLabelling import Sequence

    with pytest.raises(ConfigurationError, match=re.escape(f"Sequence: {expected}")):
        Sequence("date", **{setting: value})


@pytest.mark.parametrize("argument,value,expected", [
    ("batch_size", -1, "tag: batch_size must be >= 1, not -1"),
    ("batch_size", "abc", "tag: batch_size must be an integer, not 'abc'"),
    ("batch_size", 0, "tag: batch_size must be >= 1, not 0"),
    ("window_stride", 0, "tag: window_stride must be >= 1, not 0"),
])
def test_tag_arguments_are_checked(loaded_date, argument, value, expected):
    with pytest.raises(ConfigurationError, match=re.escape(expected)):
        loaded_date.tag([["12", "June", "2005"]], **{argument: value})


def test_training_without_labels_is_one_sentence():
    from delft.sequenceLabelling import Sequence

    with pytest.raises(ValueError, match="training data has no labelled token"):
        Sequence("date").train([], [])


@pytest.mark.parametrize("args,expected", [
    (["date", "tag", "--input", SAMPLE_DATE, "--batch-size", "-1"],
     "command line: batch_size must be >= 1, not -1"),
    (["date", "train", "--input", SAMPLE_DATE, "--learning-rate", "nan"],
     "command line: learning_rate must be a finite number, not nan"),
    (["date", "train", "--input", SAMPLE_DATE, "--dropout", "nan"],
     "command line: dropout must be a finite number, not nan"),
    (["date", "train", "--input", SAMPLE_DATE, "--seed", "-1"],
     "command line: seed must be >= 0, not -1"),
    (["date", "train", "--input", SAMPLE_DATE, "--seed", "8589934592"],
     "command line: seed must be <= 4294967295, not 8589934592"),
])
def test_command_line_numbers_are_checked_before_any_work(tmp_path, args, expected):
    done = run_python([GROBID, *args, "--output", tmp_path / "models"], cwd=tmp_path,
                      timeout=120)
    assert one_line_error(done) == f"error: {expected}"
    assert not (tmp_path / "models").exists()


# -- nothing outside its folder --------------------------------------------------------------------

def test_a_model_name_is_one_folder_name(tmp_path):
    """``grobidTagger.py ../../escaped train --output a/b/out`` wrote outside ``--output``."""
    done = run_python([GROBID, "../../escaped", "train", "--input", SAMPLE_DATE, "--output",
                       "a/b/out"], cwd=tmp_path, timeout=120)
    assert one_line_error(done) == ("error: the model name must be one folder name (no /, \\, .. "
                                    "or NUL), not '../../escaped-BidLSTM_CRF'")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_sequence_refuses_a_path_as_its_name():
    from delft.sequenceLabelling import Sequence

    for name in ("../escaped", "a/b", "..", "x\\y"):
        with pytest.raises(ConfigurationError, match="must be one folder name"):
            Sequence(name)


# -- a resumed run never mixes splits -----------------------------------------------------------

def test_a_resumed_train_eval_without_seed_keeps_its_splits(tmp_path):
    """Killed after its first epoch and run again, both without ``--seed``: the second run takes
    the seed of the checkpoint, so its 90/10 splits are the first run's (a new draw could train
    on what the first validated or evaluated on)."""
    args = ["date", "train_eval", "--input", SAMPLE_DATE, "--output", tmp_path / "models",
            "--max-epoch", "3", "--early-stop", "false", "--checkpoint-interval", "0"]
    killed = run_python([DRIVER, "SIGKILL:2:0", "-", "--", *args], cwd=tmp_path, timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    drawn = re.search(r"no --seed given: seed (\d+)", killed.stderr)
    assert drawn, killed.stderr[-2000:]
    resumed = run_python([GROBID, *args], cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming a training of seed {drawn.group(1)}" in resumed.stderr
    assert "no --seed given" not in resumed.stderr
    sizes = re.compile(r"(\d+) train sequences, (\d+) validation sequences, (\d+) evaluation")
    assert sizes.search(killed.stderr).groups() == sizes.search(resumed.stderr).groups()


# -- a model folder is validated before it is used ------------------------------------------------

def copy_of(trained_date, tmp_path, change_preprocessor=None, change_config=None):
    import shutil

    target = tmp_path / "models" / trained_date.model_dir.name
    shutil.copytree(trained_date.model_dir, target)
    for name, change in (("preprocessor.json", change_preprocessor),
                         ("config.json", change_config)):
        if change:
            values = json.loads((target / name).read_text())
            change(values)
            (target / name).write_text(json.dumps(values))
    return target


def load_error(folder):
    from conftest import loaded_sequence
    from delft.utilities.errors import ModelLoadError

    with pytest.raises(ModelLoadError) as raised:
        loaded_sequence(folder.name, folder.parent)
    message = str(raised.value)
    assert "\n" not in message and str(folder) in message
    return message


def first_char(values):
    return next(c for c, i in values["char_index"].items() if i == 2)


@pytest.mark.parametrize("change,expected", [
    (lambda p: p.update(labels=p["labels"][:-1] + [p["labels"][0]]),
     "labels: '{label}' appears more than once"),
    (lambda p: p.update(labels=list(range(len(p["labels"])))),
     "labels must be a non-empty list of strings"),
    (lambda p: p["char_index"].update({first_char(p): 500}), "char_index: the ids must be 0.."),
    (lambda p: p.update(max_char_length=-3), "max_char_length must be a positive integer, not -3"),
    (lambda p: p.update(max_char_length="30"), "max_char_length must be a positive integer"),
    (lambda p: p["char_index"].update({"\u2603": len(p["char_index"])}),
     "these weights are not those of the model config.json describes"),
])
def test_a_damaged_preprocessor_is_refused_when_loaded(trained_date, tmp_path, change, expected):
    folder = copy_of(trained_date, tmp_path, change_preprocessor=change)
    labels = json.loads((trained_date.model_dir / "preprocessor.json").read_text())["labels"]
    assert expected.format(label=labels[0]) in load_error(folder)


def test_json_nested_too_deep_or_too_large_is_one_line(trained_date, tmp_path):
    folder = copy_of(trained_date, tmp_path)
    (folder / "preprocessor.json").write_text("[" * 100000 + "]" * 100000)
    assert "corrupt (nested too deep)" in load_error(folder)
    with open(folder / "preprocessor.json", "wb") as out:  # sparse: nothing read, nothing written
        out.truncate(65 * 1024 * 1024)
    assert "over the 64 MB a file of this kind can be: not read" in load_error(folder)


def test_a_folder_naming_any_file_as_its_vectors_is_refused_and_writes_nothing(
        trained_date, tmp_path, monkeypatch):
    """``embeddings_name: "/etc/passwd"`` made the tag command parse that file as vectors and
    write a lock file in the current directory."""
    folder = copy_of(trained_date, tmp_path, change_config=lambda c: c.update(
        embeddings_name="/etc/passwd", word_embedding_size=300))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    message = load_error(folder)
    assert "config.json names '/etc/passwd' as its word embeddings, which is not a vectors file" \
        in message
    assert list(work.iterdir()) == []


def test_a_folder_naming_a_transformer_path_for_word_weights_is_refused(trained_date, tmp_path):
    """``architecture: BERT_CRF, transformer_name: "/etc"`` in a BidLSTM folder's config.json
    was an AttributeError when tagging; /etc is never opened (an own transformer folder reads its
    own ``transformer/``, tests/test_transformer.py)."""
    folder = copy_of(trained_date, tmp_path, change_config=lambda c: c.update(
        architecture="BERT_CRF", transformer_name="/etc"))
    assert load_error(folder).endswith(
        "preprocessor.json: a preprocessor of kind 'bilstm', where the architecture of "
        "config.json, BERT_CRF, takes one of kind 'transformer'")
