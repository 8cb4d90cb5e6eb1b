"""The CLIs as a server or a batch user runs them: output that always parses, under any replica
count; every check that can fail before the first epoch or model load; output never partial.

Each command is a real subprocess; the independent ones run side by side (a few at a time).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import (MODEL_NAME, REPO_ROOT, crf_sequences, delft_stderr_lines, subprocess_env,
                      unlabelled_matrix, unprivileged_command)

GROBID = "delft/applications/grobidTagger.py"
NER = "delft/applications/nerTagger.py"
INSULT = "delft/applications/insultTagger.py"
NER_MODEL = "ner-en-conll2003-BidLSTM_CRF"
INSULT_MODEL = "insult-BidLSTM_CRF"
REPORT_ROW = re.compile(r"^\s*(<\w+>|all \((micro|macro) avg\.\))(\s+\d+\.\d+){3}\s+\d+\s*$")
ROUNDING = "batch size 15 is not a multiple of the 7 replicas: using 21"


def run(args, replicas=None, unprivileged=False, timeout=600):
    env = subprocess_env(TF_NUM_INTRAOP_THREADS=1, TF_NUM_INTEROP_THREADS=2,
                         **({"DELFT_CPU_REPLICAS": replicas} if replicas else {}))
    command = [sys.executable, *map(str, args)]
    if unprivileged:
        command = unprivileged_command(command)
    completed = subprocess.run(command, cwd=str(REPO_ROOT), env=env, capture_output=True,
                               text=True, timeout=timeout)
    return completed.returncode, completed.stdout, completed.stderr


def run_all(commands, workers=3):
    """``{name: (code, stdout, stderr)}`` of ``{name: (args, options)}``, run side by side."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(run, args, **options)
                   for name, (args, options) in commands.items()}
        return {name: future.result() for name, future in futures.items()}


def ok(result):
    code, stdout, stderr = result
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    return stdout, stderr


def one_line_error(result):
    code, stdout, stderr = result
    assert code == 2, stderr[-3000:]
    assert stdout == ""  # nothing half-written where the output goes
    lines = delft_stderr_lines(stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert not re.search(r"^epoch\s+\d", stderr, re.M)  # refused before any training
    return lines[0][len("error: "):]


def is_report(stdout):
    """stdout holds the evaluation report alone: its header, label rows and the micro average."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    rows = [line for line in lines if REPORT_ROW.match(line)]
    assert any(line.lstrip().startswith("all (micro avg.)") for line in rows), stdout
    assert len(rows) == len(lines) - 1 and "precision" in lines[0], stdout
    return True


# -- data and models -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def files(tmp_path_factory, trained_date):
    root = tmp_path_factory.mktemp("cli_reliability")
    sequences = crf_sequences(trained_date.corpus_path)
    labelled = ["\n".join(seq) for seq in sequences]
    (root / "one.train").write_text(labelled[0] + "\n")
    (root / "two.train").write_text("\n\n".join(labelled[:2]) + "\n")
    (root / "three.train").write_text("\n\n".join(labelled[:3]) + "\n")
    (root / "small.train").write_text("\n\n".join(labelled[:150]) + "\n")
    matrix = unlabelled_matrix(sequences[:30])
    (root / "tag.crf").write_text(matrix)
    (root / "empty.crf").write_text("")
    (root / "late.crf").write_text(matrix + "\nJune june X\n2005\n")
    (root / "unreadable.crf").write_text(matrix)
    (root / "unreadable.crf").chmod(0o000)
    (root / "texts.txt").write_text("12 June 2005\nMarch 3, 1999\n")
    (root / "afile").write_text("x")
    (root / "ro").mkdir()
    (root / "ro").chmod(0o555)
    models = root / "models"
    for name in (MODEL_NAME, NER_MODEL, INSULT_MODEL):
        shutil.copytree(trained_date.model_dir, models / name)
    for name, change in {"abc": {"word_lstm_units": "abc"}, "neg": {"word_lstm_units": -5},
                         "bidlstm": {"architecture": "BidLSTM"}}.items():
        shutil.copytree(trained_date.model_dir, root / name / MODEL_NAME)
        config = root / name / MODEL_NAME / "config.json"
        config.write_text(json.dumps(dict(json.loads(config.read_text()), **change)))
    (root / "dangling").mkdir()
    (root / "dangling" / MODEL_NAME).symlink_to(root / "gone")
    (root / "store").mkdir()
    (root / "linked").mkdir()
    (root / "linked" / MODEL_NAME).symlink_to(root / "store")
    yield root
    (root / "unreadable.crf").chmod(0o644)
    (root / "ro").chmod(0o755)


@pytest.fixture(scope="module")
def refused(files):
    """Commands that must stop before any model load or epoch, in one line."""
    d = files
    train = [GROBID, "date", "train", "--max-epoch", "1"]
    tag = [GROBID, "date", "tag", "--output", d / "models"]
    commands = {
        "output_is_a_file": ([*train, "--input", d / "three.train", "--output", d / "afile" / "x"],
                             {}),
        "output_read_only": ([*train, "--input", d / "three.train", "--output", d / "ro"],
                             {"unprivileged": True}),
        "output_dangling_link": ([*train, "--input", d / "three.train", "--output",
                                  d / "dangling"], {}),
        "one_sequence": ([*train, "--input", d / "one.train", "--output", d / "out"], {}),
        "two_for_train_eval": ([GROBID, "date", "train_eval", "--input", d / "two.train",
                                "--output", d / "out"], {}),
        "fewer_than_folds": ([GROBID, "date", "train_eval", "--input", d / "three.train",
                              "--fold-count", "5", "--output", d / "out"], {}),
        "config_type": ([GROBID, "date", "tag", "--input", d / "tag.crf", "--output", d / "abc"],
                        {}),
        "config_range": ([GROBID, "date", "eval", "--input", d / "three.train", "--output",
                          d / "neg"], {}),
        "architecture_mismatch": ([GROBID, "date", "tag", "--input", d / "tag.crf", "--output",
                                   d / "bidlstm"], {}),
        "empty_input": ([*tag, "--input", d / "empty.crf"], {}),
        "late_malformed_line": ([*tag, "--input", d / "late.crf"], {}),
        "unreadable_input": ([*tag, "--input", d / "unreadable.crf"], {"unprivileged": True}),
        "missing_input": ([*tag, "--input", d / "absent.crf"], {}),
        "file_out_in_a_file": ([NER, "tag", "--file-in", d / "texts.txt", "--output",
                                d / "models", "--file-out", d / "afile" / "out.json"], {}),
        "file_out_is_a_folder": ([NER, "tag", "--file-in", d / "texts.txt", "--output",
                                  d / "models", "--file-out", d / "models"], {}),
        "replicas_not_a_number": ([*tag, "--input", d / "tag.crf", "--multi-gpu"],
                                  {"replicas": "abc"}),
        "replicas_too_many": ([*tag, "--input", d / "tag.crf", "--multi-gpu"],
                              {"replicas": "1000"}),
    }
    return run_all(commands, workers=4)


EXPECTED_ERRORS = {
    "output_is_a_file": "{d}/afile: is a file, where a folder is expected",
    "output_read_only": "{d}/ro: cannot write there (Permission denied)",
    "output_dangling_link": f"{{d}}/dangling/{MODEL_NAME}: a symbolic link to {{d}}/gone, which is "
                            "missing",
    "one_sequence": "1 training sequence: train needs at least 2 (10% of the rest to validate, "
                    "one to train on)",
    "two_for_train_eval": "2 training sequences: train_eval needs at least 3 (10% held out to "
                          "evaluate, 10% of the rest to validate, one to train on)",
    "fewer_than_folds": "3 training sequences: train_eval needs at least 6 (10% held out to "
                        "evaluate, one per fold)",
    "config_type": f"{{d}}/abc/{MODEL_NAME}/config.json: word_lstm_units must be an integer, not 'abc'",
    "config_range": f"{{d}}/neg/{MODEL_NAME}/config.json: word_lstm_units must be >= 1, not -5",
    "architecture_mismatch": f"{{d}}/bidlstm/{MODEL_NAME}/model.weights.h5: these weights are "
                             "not those of the model config.json describes (the file has layer "
                             "'crf'",
    "empty_input": "{d}/empty.crf: empty: no sequence found",
    "late_malformed_line": "{d}/late.crf:",
    "unreadable_input": "--input {d}/unreadable.crf: cannot read it (Permission denied)",
    "missing_input": "--input {d}/absent.crf: no such file",
    "file_out_in_a_file": "--file-out: {d}/afile: is a file, where a folder is expected",
    "file_out_is_a_folder": "--file-out: {d}/models: is a folder, where an output file",
    "replicas_not_a_number": "DELFT_CPU_REPLICAS must be a number of replicas, not 'abc'",
    "replicas_too_many": "DELFT_CPU_REPLICAS must be from 0 to 64, not 1000",
}


@pytest.mark.parametrize("name", sorted(EXPECTED_ERRORS))
def test_refused_in_one_line_before_any_work(files, refused, name):
    message = one_line_error(refused[name])
    assert message.startswith(EXPECTED_ERRORS[name].format(d=files)), message
    assert not (files / "out").exists()


# -- output that parses, under several replicas ----------------------------------------------------
@pytest.fixture(scope="module")
def outputs(files):
    d = files
    tag = [GROBID, "date", "tag", "--input", d / "tag.crf", "--output", d / "models"]
    seven = {"replicas": 7}
    commands = {  # the two trainings first: they run side by side
        "train_a": ([GROBID, "date", "train", "--input", d / "small.train", "--output",
                     d / "shared", "--max-epoch", "1"], {}),
        "train_b": ([GROBID, "date", "train", "--input", d / "small.train", "--output",
                     d / "shared", "--max-epoch", "1", "--seed", "2"], {}),
        "json_1": ([*tag], {}),
        "json_7": ([*tag, "--multi-gpu", "--batch-size", "14"], seven),
        "TEI_7": ([*tag, "--multi-gpu", "--batch-size", "14", "--output-format", "TEI"], seven),
        "iob_7": ([*tag, "--multi-gpu", "--batch-size", "14", "--output-format", "iob"], seven),
        "grobid_batch_15": ([*tag, "--multi-gpu", "--batch-size", "15"], seven),
        "ner_batch_15": ([NER, "tag", "--file-in", d / "texts.txt", "--output", d / "models",
                          "--multi-gpu", "--batch-size", "15"], seven),
        "insult_batch_15": ([INSULT, "tag", "--output", d / "models", "--multi-gpu",
                             "--batch-size", "15", "--output-format", "iob"], seven),
        "eval_3": ([GROBID, "date", "eval", "--input", d / "small.train", "--output",
                    d / "models", "--multi-gpu"], {"replicas": 3}),
        "train_eval_2": ([GROBID, "date", "train_eval", "--input", d / "small.train", "--output",
                          d / "linked", "--multi-gpu", "--max-epoch", "1"], {"replicas": 2}),
    }
    return run_all(commands, workers=4)


def entities(document):
    return [[(e["class"], e["beginOffset"], e["endOffset"]) for e in item["entities"]]
            for item in document["texts"]]


def test_tag_output_parses_and_is_the_same_on_seven_replicas(outputs):
    one = json.loads(ok(outputs["json_1"])[0])
    seven = json.loads(ok(outputs["json_7"])[0])  # the JSON document alone on stdout
    assert len(seven["texts"]) == 30 and entities(seven) == entities(one)
    tei = ElementTree.fromstring(ok(outputs["TEI_7"])[0])
    assert len(tei.findall(".//{*}p")) == 30
    blocks = ok(outputs["iob_7"])[0].strip("\n").split("\n\n")
    assert len(blocks) == 30
    assert all(re.fullmatch(r"\S+\t(O|[BI]-<\w+>)", row) for b in blocks for row in b.split("\n"))


@pytest.mark.parametrize("name", ["json_7", "TEI_7", "iob_7"])
def test_batch_size_14_on_seven_replicas_needs_no_rounding(outputs, name):
    assert "not a multiple" not in ok(outputs[name])[1]


@pytest.mark.parametrize("name", ["grobid_batch_15", "ner_batch_15", "insult_batch_15"])
def test_batch_size_applies_to_tag(outputs, name):
    """--batch-size reaches tagging: 15 on 7 replicas is rounded to 21, said on stderr (the
    notice the branch point printed on stdout, inside the JSON)."""
    stdout, stderr = ok(outputs[name])
    assert ROUNDING in stderr and ROUNDING not in stdout
    if name != "insult_batch_15":
        json.loads(stdout)


def test_eval_and_train_eval_print_the_report_alone(outputs, files):
    assert is_report(ok(outputs["eval_3"])[0])
    stdout, stderr = ok(outputs["train_eval_2"])
    assert is_report(stdout) and "MirroredStrategy over 2 devices" in stderr
    # --output's model folder is a link to a store: followed, the link kept
    assert os.readlink(files / "linked" / MODEL_NAME) == str(files / "store")
    assert {"config.json", "model.weights.h5"} <= set(os.listdir(files / "store"))


def test_two_trainings_saving_into_one_folder(outputs, files):
    """The branch point: OSError [Errno 39] for one of them. Saves are serialised."""
    for name in ("train_a", "train_b"):
        assert ok(outputs[name])[0] == ""  # train prints no result: stdout stays empty
    assert sorted(os.listdir(files / "shared")) == [f".{MODEL_NAME}.lock", MODEL_NAME]
    assert {"config.json", "preprocessor.json", "model.weights.h5"} <= set(
        os.listdir(files / "shared" / MODEL_NAME))
