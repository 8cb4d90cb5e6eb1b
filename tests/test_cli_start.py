"""What a command loads on its way to training: the 90/10 splits without scikit-learn, and
TensorFlow without Keras' optional extras (scikit-learn, IPython, matplotlib's pyplot)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from sklearn.model_selection import train_test_split

from conftest import REPO_ROOT, SAMPLE_DATE, subprocess_env
from delft.applications.common import split


@pytest.mark.parametrize("size", [2, 3, 9, 10, 11, 20, 97, 1000])
@pytest.mark.parametrize("test_size", [0.1, 0.25, 0.5])
@pytest.mark.parametrize("seed", [0, 1, 42, 2 ** 31])
def test_split_gives_the_rows_of_scikit_learns_train_test_split(size, test_size, seed):
    x = [[f"w{i}", "x"] for i in range(size)]
    y = np.array([[f"l{i}"] for i in range(size)], dtype=object)
    f = [[[i]] for i in range(size)]
    kept, held_out = split(x, y, f, test_size, seed)
    x_kept, x_held, y_kept, y_held, f_kept, f_held = train_test_split(
        x, y, f, test_size=test_size, random_state=seed)
    assert kept[0] == x_kept and held_out[0] == x_held
    assert kept[2] == f_kept and held_out[2] == f_held
    assert type(kept[1]) is np.ndarray and np.array_equal(kept[1], y_kept)
    assert np.array_equal(held_out[1], y_held)


def test_split_without_features_keeps_none():
    x, y = [["a"], ["b"], ["c"], ["d"]], [["A"], ["B"], ["C"], ["D"]]
    (x_kept, y_kept, f_kept), (x_held, y_held, f_held) = split(x, y, None, 0.25, 3)
    assert f_kept is None and f_held is None
    assert sorted(x_kept + x_held) == x and len(x_held) == 1
    assert [x.index(row) for row in x_kept] == [y.index([row[0].upper()]) for row in y_kept]


HIDDEN_WHILE_LOADING = r'''
import json, sys
from delft.applications.common import keras_extras_hidden
with keras_extras_hidden():
    import tensorflow, keras
loaded = [m for m in ("sklearn", "IPython", "matplotlib") if m in sys.modules]
from sklearn.metrics import f1_score  # a command's own import still works afterwards
import matplotlib.figure
print(json.dumps({"loaded": loaded, "finders": [type(f).__name__ for f in sys.meta_path],
                  "f1": f1_score([0, 1], [0, 1])}))
'''


def test_tensorflow_loads_without_keras_extras_and_they_import_afterwards():
    done = subprocess.run([sys.executable, "-c", HIDDEN_WHILE_LOADING], env=subprocess_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["loaded"] == [] and result["f1"] == 1.0
    assert "_KerasExtrasHidden" not in result["finders"]


COMMAND = r'''
import importlib, json, os, sys
application = importlib.import_module("delft.applications." + sys.argv[1])
code = application.main(sys.argv[2:])
print(json.dumps({"code": code, "loaded": [m for m in ("sklearn", "IPython", "matplotlib.pyplot")
                                           if m in sys.modules],
                  "bfc": os.environ.get("TF_CPU_ALLOCATOR_USE_BFC")}))
'''


def run_command(application, args, cwd):
    env = {k: v for k, v in subprocess_env().items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    done = subprocess.run([sys.executable, "-c", COMMAND, application] + args, cwd=str(cwd),
                          env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_tagger_train_eval_never_loads_scikit_learn_ipython_or_pyplot(tmp_path):
    result = run_command("grobidTagger", ["date", "train_eval", "--input", str(SAMPLE_DATE),
                                          "--output", str(tmp_path), "--max-epoch", "1",
                                          "--seed", "1"], REPO_ROOT)
    assert result == {"code": 0, "loaded": [], "bfc": "true"}


def test_a_classifier_command_starts_tensorflow_with_its_settings(tmp_path):
    """Its options name an architecture: looking it up must not start TensorFlow before the
    command sets it up (it did: Keras loaded its extras, the BFC allocator was not chosen)."""
    sentiments = "ooonpn"
    (tmp_path / "citations.txt").write_text("".join(
        f"P{i}\tQ{i}\t{sentiments[i % 6]}\tcitation number {i} of the study\n"
        for i in range(36)), encoding="utf-8")
    result = run_command("citationClassifier", ["train", "--input", "citations.txt", "--output",
                                                str(tmp_path / "models"), "--max-epoch", "1"],
                         tmp_path)
    assert result == {"code": 0, "loaded": [], "bfc": "true"}


TOOLKIT_START = r'''
import json, os, sys
from delft.applications import toolkits
getattr(toolkits, sys.argv[1]).start_tensorflow(sys.argv[2], int(sys.argv[3]))
import tensorflow as tf
print(json.dumps({"loaded": [m for m in ("sklearn", "IPython", "matplotlib") if m in sys.modules],
                  "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
                  "bfc": os.environ.get("TF_CPU_ALLOCATOR_USE_BFC"),
                  "threads": tf.config.threading.get_intra_op_parallelism_threads()}))
'''


@pytest.mark.parametrize("toolkit, architecture, passes, onednn, threads", [
    ("SEQUENCE_LABELLING", "BidLSTM_CRF", 1, "0", 1),
    ("SEQUENCE_LABELLING", "BERT_CRF", 1, "1", 0),
    # a training of two length groups: one thread per op where the machine has 2 cores or fewer
    ("SEQUENCE_LABELLING", "BERT_CRF", 2, "1", 1 if (os.cpu_count() or 1) <= 2 else 0),
    ("TEXT_CLASSIFICATION", "gru", 1, "1", 0),
])
def test_a_toolkit_starts_tensorflow_as_its_commands_do(toolkit, architecture, passes, onednn,
                                                        threads):
    """What the commands' flow and the classification benchmarks call: the architecture's CPU
    settings (for a training: its passes side by side), and Keras without its extras."""
    chosen_by_the_caller = ("TF_ENABLE_ONEDNN_OPTS", "TF_CPU_ALLOCATOR_USE_BFC",
                            "TF_NUM_INTRAOP_THREADS")
    env = {k: v for k, v in subprocess_env().items() if k not in chosen_by_the_caller}
    done = subprocess.run([sys.executable, "-c", TOOLKIT_START, toolkit, architecture,
                           str(passes)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"loaded": [], "onednn": onednn, "bfc": "true",
                                       "threads": threads}
