"""Preemption-safe training: a run killed in epoch 3 and run again ends with the uninterrupted
run's weights, on one device and on 2 replicas.

Every run is ``grobidTagger.py date train`` through tests/interrupted_training.py, which sends the
signal to its own process just before a chosen step, so the interruption falls at the same point
each time: SIGKILL (nothing runs; the epoch-2 checkpoint is what is left) and SIGTERM
(PreemptionCheckpointHandler saves at the next step boundary and the process exits with 143).
"""
import json
import sys

import h5py
import numpy as np
import pytest

from conftest import MODEL_NAME, REPO_ROOT, crf_sequences, delft_stderr_lines, subprocess_env
from loopback_workers import run_workers

DRIVER = REPO_ROOT / "tests" / "interrupted_training.py"
CHECKPOINTS = MODEL_NAME + ".checkpoints"
EPOCHS, STEP = 4, 4  # 270 training rows at batch 20: 14 steps per epoch; stop before step 4 of 3


@pytest.fixture(scope="module")
def data(tmp_path_factory, date_corpus_path):
    path = tmp_path_factory.mktemp("data") / "date-slice.train"
    path.write_text("\n\n".join("\n".join(s) for s in crf_sequences(date_corpus_path, 300)) + "\n")
    return path


def command(data, output, interrupt="none", *extra):
    return [sys.executable, str(DRIVER), interrupt, "-", "--", "date", "train", "--input",
            str(data), "--output", str(output), "--max-epoch", str(EPOCHS), "--seed", "1",
            "--batch-size", "20", "--dropout", "0", "--recurrent-dropout", "0", *extra]


def run_all(commands, cwd, replicas=1):
    env = subprocess_env(DELFT_CPU_REPLICAS=replicas) if replicas > 1 else subprocess_env()
    return run_workers(commands, [env] * len(commands), cwd=cwd, timeout=600)


def weights_of(model_dir):
    arrays = {}
    with h5py.File(model_dir / "model.weights.h5", "r") as stream:
        stream.visititems(lambda name, item: arrays.__setitem__(name, item[()])
                          if isinstance(item, h5py.Dataset) else None)
    return arrays


def relative_difference(a, b):
    assert a.keys() == b.keys()
    return max(np.linalg.norm(a[k] - b[k]) / max(np.linalg.norm(b[k]), 1e-12) for k in b)


def epochs_logged(stderr):
    return [int(line.split()[1].split("/")[0]) for line in delft_stderr_lines(stderr)
            if line.startswith("epoch ")]


@pytest.mark.parametrize("replicas", [1, 2])
def test_killed_in_epoch_3_and_rerun_ends_as_uninterrupted(tmp_path, data, replicas):
    extra = ["--multi-gpu"] if replicas > 1 else []
    reference, killed, terminated = (tmp_path / name for name in ("reference", "kill", "term"))
    first = run_all([command(data, reference, "none", *extra),
                     command(data, killed, f"SIGKILL:3:{STEP}", *extra),
                     command(data, terminated, f"SIGTERM:3:{STEP}", *extra)], tmp_path, replicas)
    assert first[0].returncode == 0, first[0].stderr[-3000:]
    assert first[1].returncode == -9  # SIGKILL: nothing ran, the epoch-2 checkpoint is left
    assert first[2].returncode == 143, first[2].stderr[-3000:]
    assert f"SIGTERM: checkpoint saved in {terminated / CHECKPOINTS} after {STEP + 1} step(s) " \
           "of epoch 3" in first[2].stderr
    assert "model_checkpoint_path: \"ckpt-2\"" in (killed / CHECKPOINTS / "checkpoint").read_text()
    for output in (killed, terminated):
        assert sorted(p.name for p in output.iterdir()) == [CHECKPOINTS]  # no model yet
    again = run_all([command(data, killed, "none", *extra),
                     command(data, terminated, "none", *extra)], tmp_path, replicas)
    expected = weights_of(reference / MODEL_NAME)
    history = json.loads((reference / MODEL_NAME / "history.json").read_text())
    assert [r["epoch"] for r in history] == list(range(1, EPOCHS + 1))
    for output, run, where in ((killed, again[0], ""),
                               (terminated, again[1], f" at step {STEP + 2} of it")):
        assert run.returncode == 0, run.stderr[-3000:]
        assert f"resuming from {output / CHECKPOINTS}/ckpt-" in run.stderr
        assert f"2 epoch(s) done, going on with epoch 3{where} (restored in" in run.stderr
        # only epochs 3 and 4 were trained again, from the checkpoint (a fresh start with the
        # same seed would give the same weights, but train 4 epochs)
        assert epochs_logged(run.stderr) == [3, 4]
        resumed = json.loads((output / MODEL_NAME / "history.json").read_text())
        assert [r["epoch"] for r in resumed] == [r["epoch"] for r in history]
        assert [r["val_f1"] for r in resumed] == [r["val_f1"] for r in history]
        assert relative_difference(weights_of(output / MODEL_NAME), expected) < 1e-5
        assert not (output / CHECKPOINTS).exists()  # removed once the model is saved


def test_checkpoint_of_another_training_is_refused_and_no_resume_starts_afresh(tmp_path, data):
    output = tmp_path / "models"
    first = run_all([command(data, output, f"SIGKILL:3:{STEP}"),
                     command(data, tmp_path / "reference")], tmp_path)
    assert first[0].returncode == -9 and first[1].returncode == 0, first[1].stderr[-3000:]
    other_seed = command(data, output)
    other_seed[other_seed.index("--seed") + 1] = "2"
    refused = run_all([other_seed], tmp_path)[0]
    assert refused.returncode == 2
    assert delft_stderr_lines(refused.stderr)[-1] == (
        f"error: {output / CHECKPOINTS}/ckpt-2: a checkpoint of another training (seed 1 there, "
        "2 here); --no-resume starts afresh")
    afresh = run_all([command(data, output, "none", "--no-resume")], tmp_path)[0]
    assert afresh.returncode == 0, afresh.stderr[-3000:]
    assert f"--no-resume: removed the checkpoints of an earlier run in {output / CHECKPOINTS}" \
        in afresh.stderr and "resuming" not in afresh.stderr
    assert epochs_logged(afresh.stderr) == list(range(1, EPOCHS + 1))
    assert relative_difference(weights_of(output / MODEL_NAME),
                               weights_of(tmp_path / "reference" / MODEL_NAME)) < 1e-5


def test_a_second_training_into_a_claimed_folder_keeps_no_checkpoints(tmp_path, date_corpus,
                                                                       caplog):
    """Two trainings of one model into one folder: the first to start writes the checkpoints, the
    second neither resumes from them, writes there nor removes them when it saves."""
    import logging

    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.checkpoints import CLAIM_FILE, CheckpointsClaim

    folder = tmp_path / CHECKPOINTS
    first = CheckpointsClaim.take(str(folder))  # another open file: flock refuses it as a process
    (folder / "checkpoint").write_text("the first training's\n")
    x, y, _ = date_corpus
    model = Sequence(MODEL_NAME, max_epoch=2, batch_size=20, seed=1, word_lstm_units=8,
                     char_lstm_units=8, char_emb_size=8)
    with caplog.at_level(logging.INFO):
        model.train(x[:40], y[:40], x_valid=x[40:50], y_valid=y[40:50],
                    checkpoint_dir=str(folder))
    assert (f"{folder}: another training of this model is running (pid ") in caplog.text
    assert "keeps its checkpoints there; this one keeps none (it cannot be resumed)" in caplog.text
    assert "resuming" not in caplog.text
    model.save(str(tmp_path))
    assert sorted(p.name for p in folder.iterdir()) == [CLAIM_FILE, "checkpoint"]
    assert (folder / "checkpoint").read_text() == "the first training's\n"
    first.remove()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".{MODEL_NAME}.lock", MODEL_NAME]
    # the folder free again, the next training claims it, checkpoints, and removes it with its save
    model.train(x[:40], y[:40], x_valid=x[40:50], y_valid=y[40:50], checkpoint_dir=str(folder))
    assert (folder / "checkpoint").is_file()
    model.save(str(tmp_path))
    assert not folder.exists()
