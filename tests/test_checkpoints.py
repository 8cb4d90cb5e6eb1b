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
            "--batch-size", "20", "--dropout", "0", "--recurrent-dropout", "0",
            "--checkpoint-interval", "0", *extra]


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
    """Two trainings of one model into one folder: the one training there writes the checkpoints;
    another neither resumes from them, writes there nor removes them when it saves."""
    import logging

    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.checkpoints import (CLAIM_FILE, CheckpointsClaim,
                                                     remove_checkpoints)

    folder = tmp_path / CHECKPOINTS
    first = CheckpointsClaim.take(str(folder))  # another open file: flock refuses it as a process
    (folder / "checkpoint").write_text("the first training's\n")
    x, y, _ = date_corpus
    model = Sequence(MODEL_NAME, max_epoch=2, batch_size=20, seed=1, word_lstm_units=8,
                     char_lstm_units=8, char_emb_size=8, checkpoint_interval=0)

    def train():
        model.train(x[:40], y[:40], x_valid=x[40:50], y_valid=y[40:50], checkpoint_dir=str(folder))

    with caplog.at_level(logging.INFO):
        train()
        assert f"{folder}: another training of this model is running (pid " in caplog.text
        assert "keeps its checkpoints there; this one keeps none (it cannot be resumed)" \
            in caplog.text and "resuming" not in caplog.text
        model.save(str(tmp_path))
        assert sorted(p.name for p in folder.iterdir()) == [CLAIM_FILE, "checkpoint"]
        assert (folder / "checkpoint").read_text() == "the first training's\n"
        first.release()
        remove_checkpoints(str(folder))  # what the first training's save does
        assert sorted(p.name for p in tmp_path.iterdir()) == [f".{MODEL_NAME}.lock", MODEL_NAME]
        # the folder free: this training claims it and checkpoints; it holds it while it trains
        caplog.clear()
        train()
        assert "another training" not in caplog.text
        assert (folder / "checkpoint").is_file()
        other = CheckpointsClaim.take(str(folder))  # released when the training ended
        model.save(str(tmp_path))  # a training holds the folder now: its checkpoints stay
        assert f"{folder}: kept, another training of this model is writing there" in caplog.text
        assert (folder / "checkpoint").is_file()
        other.release()
        model.train(x[:40], y[:40], x_valid=x[40:50], y_valid=y[40:50], checkpoint_dir=str(folder))
        assert "resuming from" in caplog.text  # the same training: its checkpoint is taken up
        model.save(str(tmp_path))
    assert not folder.exists()


def test_best_weights_are_written_apart_only_once_they_are_not_the_models(tmp_path):
    """The model's variables are the best weights while the last epoch is the best: then no
    best-<epoch> file; after a worse epoch it is written once, read back on resume, and removed
    when a new best makes it stale."""
    import keras

    from delft.sequenceLabelling.checkpoints import (CheckpointsClaim, EpochCheckpoints,
                                                     TrainingProgress)
    from delft.sequenceLabelling.trainer import EarlyStopping
    from delft.utilities import devices

    strategy = devices.get_strategy(False)

    def training():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        progress = TrainingProgress(np.random.default_rng(1), EarlyStopping(),
                                    {"rows": 10, "batch_size": 2, "seed": 1})
        claim = CheckpointsClaim.take(str(tmp_path / "m.checkpoints"))
        return model, progress, claim, EpochCheckpoints(claim, strategy, model, optimizer,
                                                        progress)

    def files():
        return sorted(p.name.split(".")[0] for p in (tmp_path / "m.checkpoints").iterdir()
                      if p.name.endswith(".index"))

    model, progress, claim, checkpoints = training()
    state = progress.early_stopping
    first_weights = [w + 1 for w in model.get_weights()]
    model.set_weights(first_weights)
    state.best_epoch, state.best_weights = 1, model.get_weights()
    progress.end_epoch(1, stopped_early=False)
    checkpoints.save()
    assert files() == ["ckpt-1"]  # the best weights are the model's: nothing apart
    model.set_weights([w * 3 for w in first_weights])  # epoch 2, worse than epoch 1
    progress.end_epoch(2, stopped_early=False)
    checkpoints.save()
    assert files() == ["best-1", "ckpt-2"]
    progress.end_epoch(3, stopped_early=False)  # epoch 3, worse again: best-1 is not rewritten
    written = (tmp_path / "m.checkpoints" / "best-1.index").stat().st_mtime_ns
    checkpoints.save()
    assert files() == ["best-1", "ckpt-3"]
    assert (tmp_path / "m.checkpoints" / "best-1.index").stat().st_mtime_ns == written
    claim.release()

    model, progress, claim, checkpoints = training()  # the same training, run again
    assert checkpoints.restore(resume=True)
    assert progress.next_epoch == 4 and progress.early_stopping.best_epoch == 1
    for restored, expected in zip(progress.early_stopping.best_weights, first_weights):
        np.testing.assert_array_equal(restored, expected)
    for restored, expected in zip(model.get_weights(), first_weights):
        np.testing.assert_array_equal(restored, expected * 3)
    state = progress.early_stopping
    state.best_epoch, state.best_weights = 4, model.get_weights()  # epoch 4, a new best
    progress.end_epoch(4, stopped_early=False)
    checkpoints.save()
    assert files() == ["ckpt-4"]  # best-1 is stale
    progress.begin_epoch()
    progress.step_done(1.0)  # a SIGTERM save in epoch 5: the model has moved on from its best
    checkpoints.save()
    assert files() == ["best-4", "ckpt-5"]
    claim.release()


def tiny_date_model(**settings):
    from delft.sequenceLabelling import Sequence

    return Sequence(MODEL_NAME, max_epoch=4, early_stop=False, batch_size=20, seed=1,
                    word_lstm_units=8, char_lstm_units=8, char_emb_size=8, **settings)


def train_tiny(model, date_corpus, **options):
    x, y, _ = date_corpus
    model.train(x[:40], y[:40], x_valid=x[40:50], y_valid=y[40:50], **options)


@pytest.fixture(scope="module")
def weights_without_checkpoints(date_corpus):
    model = tiny_date_model()
    train_tiny(model, date_corpus)
    return model.model.get_weights()


@pytest.mark.parametrize("interval, saved_after", [(0, [1, 2, 3, 4]), (15, [2, 4]),
                                                   (60, [])])
def test_an_epoch_ends_with_a_checkpoint_once_the_interval_has_passed(
        tmp_path, date_corpus, weights_without_checkpoints, monkeypatch, interval, saved_after):
    """``checkpoint_interval`` seconds of training between two saves, counted from the start (a
    clock that says 10 s per epoch here): 0 saves at every epoch end; a training shorter than
    the interval writes none; saving or not, training ends with the weights of a training
    without checkpoints."""
    from delft.training import checkpoints, loop

    ended, saved = [], []
    end_epoch, save = checkpoints.TrainingProgress.end_epoch, checkpoints.EpochCheckpoints.save

    def counting_end_epoch(self, epoch, stopped_early):
        ended.append(epoch)
        return end_epoch(self, epoch, stopped_early)

    def recording_save(self):
        saved.append(ended[-1])
        return save(self)

    class EpochClock:
        perf_counter = staticmethod(loop.time.perf_counter)

        @staticmethod
        def monotonic():
            return 10.0 * len(ended)

    monkeypatch.setattr(checkpoints.TrainingProgress, "end_epoch", counting_end_epoch)
    monkeypatch.setattr(checkpoints.EpochCheckpoints, "save", recording_save)
    monkeypatch.setattr(loop, "time", EpochClock)
    model = tiny_date_model(checkpoint_interval=interval)
    folder = tmp_path / CHECKPOINTS
    train_tiny(model, date_corpus, checkpoint_dir=str(folder))
    assert ended == [1, 2, 3, 4] and saved == saved_after
    state_file = folder / "checkpoint"
    if saved_after:
        latest = f"ckpt-{len(saved_after)}"
        assert state_file.read_text() == (f'model_checkpoint_path: "{latest}"\n'
                                          f'all_model_checkpoint_paths: "{latest}"\n')
    else:
        assert not state_file.exists()
    weights = model.model.get_weights()
    model.save(str(tmp_path))
    assert not folder.exists()
    for ours, reference in zip(weights, weights_without_checkpoints):
        np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-6)
