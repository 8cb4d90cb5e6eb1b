"""The model directory: what save writes, atomic replacement, and clear errors for bad model dirs."""
import json
import os
import shutil
import stat
import threading

import numpy as np
import pytest

from conftest import REPO_ROOT, loaded_sequence, MODEL_NAME, run_python
from delft.sequenceLabelling import Sequence
from delft.sequenceLabelling.wrapper import (CONFIG_FILE, CURVE_FILE, HISTORY_FILE,
                                             PREPROCESSOR_FILE, WEIGHTS_FILE)
from delft.utilities.errors import ConfigurationError, ModelLoadError

REQUIRED = [CONFIG_FILE, PREPROCESSOR_FILE, WEIGHTS_FILE]
LOCK = f".{MODEL_NAME}.lock"  # the file saves of the model lock (empty, kept)


def snapshot(directory):
    """{relative path: bytes} of every file under ``directory``."""
    files = {}
    for folder, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as stream:
                files[os.path.relpath(path, directory)] = stream.read()
    return files


@pytest.fixture
def model_copy(tmp_path, trained_date):
    """A copy of the session's saved model dir, free to damage: returns (models dir, model dir)."""
    models_dir = tmp_path / "models"
    shutil.copytree(trained_date.models_dir, models_dir)
    return models_dir, models_dir / MODEL_NAME


def load_error(models_dir):
    with pytest.raises(ModelLoadError) as info:
        loaded_sequence(MODEL_NAME, str(models_dir))
    error = info.value
    message = str(error)
    assert "\n" not in message  # one line for the user
    assert error.__cause__ is None and error.__suppress_context__ or error.__context__ is None
    return message


# -- what save writes ----------------------------------------------------------------------------
def test_save_writes_the_model_files(trained_date):
    directory = trained_date.model_dir
    names = set(os.listdir(directory))
    assert set(REQUIRED + [CURVE_FILE, HISTORY_FILE]) <= names
    config = json.loads((directory / CONFIG_FILE).read_text())
    assert config["architecture"] == "BidLSTM_CRF"
    assert config["model_name"] == MODEL_NAME
    assert config["delft_version"]
    preprocessor = json.loads((directory / PREPROCESSOR_FILE).read_text(encoding="utf-8"))
    assert "B-<year>" in preprocessor["labels"]
    history = json.loads((directory / HISTORY_FILE).read_text())
    assert len(history) == len(trained_date.model.history) > 0
    assert (directory / CURVE_FILE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (directory / WEIGHTS_FILE).read_bytes()[:8] == b"\x89HDF\r\n\x1a\n"
    # nothing but the model (and its lock) in the models dir: no staging folder left behind
    assert sorted(os.listdir(trained_date.models_dir)) == [LOCK, MODEL_NAME]


def test_saved_dir_is_readable_like_any_new_directory(trained_date):
    mode = stat.S_IMODE(os.stat(trained_date.model_dir).st_mode)
    umask = os.umask(0o022)
    os.umask(umask)
    assert mode == 0o777 & ~umask  # not mkdtemp's 0700: GROBID may run as another user


def test_reload_gives_identical_tags(trained_date):
    loaded = trained_date.load()
    sequences = trained_date.x_eval + trained_date.x_valid
    assert loaded.tag(sequences, None) == trained_date.model.tag(sequences, None)
    assert loaded.p.to_dict() == trained_date.model.p.to_dict()
    for a, b in zip(loaded.model.get_weights(), trained_date.model.model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_save_over_an_older_model_replaces_it(trained_date, tmp_path):
    model = trained_date.load()
    (tmp_path / MODEL_NAME).mkdir()
    (tmp_path / MODEL_NAME / "stale.txt").write_text("old")
    target = model.save(str(tmp_path))
    assert os.path.samefile(target, tmp_path / MODEL_NAME)
    assert sorted(os.listdir(tmp_path)) == [LOCK, MODEL_NAME]
    assert "stale.txt" not in os.listdir(target)
    assert set(REQUIRED) <= set(os.listdir(target))


# -- a save that crashes midway --------------------------------------------------------------------
def crash(*args, **kwargs):
    raise RuntimeError("disk full (simulated)")


def interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("where, exception", [
    ("weights", RuntimeError), ("plot", RuntimeError), ("plot", KeyboardInterrupt)])
def test_crashed_save_leaves_no_model_and_keeps_the_older_one(trained_date, tmp_path, monkeypatch,
                                                              where, exception):
    from delft.sequenceLabelling import trainer

    model = trained_date.load()
    model.history = list(trained_date.model.history)  # so that the curve is drawn
    older = tmp_path / "with_older"
    fresh = tmp_path / "fresh"
    model.save(str(older))
    before = snapshot(older)
    raiser = crash if exception is RuntimeError else interrupt
    if where == "weights":
        monkeypatch.setattr(type(model.model), "save_weights", raiser)
    else:
        monkeypatch.setattr(trainer, "plot_history", raiser)
    for directory in (older, fresh):
        with pytest.raises(exception):
            model.save(str(directory))
    monkeypatch.undo()
    # the older model is intact, byte for byte, and nothing else is there
    assert sorted(os.listdir(older)) == [LOCK, MODEL_NAME]
    assert snapshot(older) == before
    # no model (and no temp folder) where there was none
    assert not fresh.exists() or os.listdir(fresh) == [LOCK]
    loaded_sequence(MODEL_NAME, str(older))
    with pytest.raises(ModelLoadError):
        loaded_sequence(MODEL_NAME, str(fresh))


# -- saves under kills, concurrency, links ----------------------------------------------------------
def test_a_save_removes_leftovers_of_killed_saves_and_nothing_else(trained_date, tmp_path):
    model = trained_date.load()
    model.save(str(tmp_path))
    leftover = tmp_path / f".{MODEL_NAME}.k1ll3d_x"  # as a SIGKILL during a save leaves it
    shutil.copytree(tmp_path / MODEL_NAME, leftover)
    os.remove(leftover / WEIGHTS_FILE)
    checkpoints = tmp_path / f"{MODEL_NAME}.checkpoints"  # the trainer's: never touched
    checkpoints.mkdir()
    (checkpoints / "epoch-3.weights.h5").write_text("x")
    model.save(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == [LOCK, MODEL_NAME, checkpoints.name]
    assert os.listdir(checkpoints) == ["epoch-3.weights.h5"]


def test_a_symlinked_model_folder_is_followed(trained_date, tmp_path):
    """GROBID's models folder linking to a versioned store: the store's folder is replaced, the
    link stays (the branch point replaced the link by a folder and a stray .previous link)."""
    store = tmp_path / "store" / "date-v3"
    shutil.copytree(trained_date.model_dir, store)
    (store / "stale.txt").write_text("old")
    models = tmp_path / "models"
    models.mkdir()
    (models / MODEL_NAME).symlink_to(store)
    model = trained_date.load()
    for _ in range(2):  # and again: every later save works too
        model.save(str(models))
    assert os.readlink(models / MODEL_NAME) == str(store)
    assert sorted(os.listdir(models)) == [MODEL_NAME]
    assert "stale.txt" not in os.listdir(store) and set(REQUIRED) <= set(os.listdir(store))
    loaded_sequence(MODEL_NAME, str(models))


def test_a_save_onto_a_file_or_a_dangling_link_is_one_line(trained_date, tmp_path):
    model = trained_date.load()
    (tmp_path / MODEL_NAME).write_text("not a model")
    with pytest.raises(ConfigurationError, match="is a file, where a model folder"):
        model.save(str(tmp_path))
    os.remove(tmp_path / MODEL_NAME)
    (tmp_path / MODEL_NAME).symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigurationError, match="a symbolic link to .*gone, which is missing"):
        model.save(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == [MODEL_NAME]


def test_concurrent_saves_into_one_folder_are_serialised(trained_date, tmp_path):
    """Two trainings saving into one folder (the branch point: OSError [Errno 39])."""
    models = [trained_date.load() for _ in range(4)]
    errors = []

    def save(model):
        try:
            for _ in range(3):
                model.save(str(tmp_path))
        except Exception as error:  # collected: asserted empty below
            errors.append(error)

    threads = [threading.Thread(target=save, args=(model,)) for model in models]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(os.listdir(tmp_path)) == [LOCK, MODEL_NAME]
    loaded_sequence(MODEL_NAME, str(tmp_path))


def test_a_load_during_a_save_reads_one_model_whole(trained_date, tmp_path, monkeypatch):
    """A save replacing the folder while it is being loaded: the load reads it again, whole (not
    the old config and preprocessor with the new weights)."""
    from delft.sequenceLabelling import wrapper

    trained_date.load().save(str(tmp_path))
    newer = trained_date.load()
    newer.model.set_weights([w * 2 for w in newer.model.get_weights()])
    read_folder, reads = wrapper.read_folder, []

    def read_folder_then_save(path):
        contents = read_folder(path)
        reads.append(path)
        if len(reads) == 1:
            newer.save(str(tmp_path))  # swapped in after config and preprocessor were read
        return contents

    monkeypatch.setattr(wrapper, "read_folder", read_folder_then_save)
    loaded = loaded_sequence(MODEL_NAME, str(tmp_path))
    assert len(reads) == 2
    for a, b in zip(loaded.model.get_weights(), newer.model.get_weights()):
        np.testing.assert_array_equal(a, b)


KILLS = 20  # the suite's loop; benchmarks/save_safety.py runs 50 for doc/reliability.md


@pytest.mark.slow
def test_kills_during_saves_leave_a_loadable_model(trained_date, tmp_path):
    """benchmarks/save_safety.py: SIGKILLs at random moments of saves (a fork of a process with
    the model loaded, saving in a loop), the target loaded and tagging after each; and no reader
    ever finds the target missing or incomplete across as many saves."""
    completed = run_python([REPO_ROOT / "benchmarks" / "save_safety.py", "--saves", str(KILLS),
                            "--kills", str(KILLS), "--fork", "--models-dir",
                            trained_date.models_dir, "--json"], cwd=tmp_path, timeout=1800)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout)
    assert result["gap_watch"]["exchange"]["saves_with_a_gap"] == 0
    assert result["gap_watch"]["exchange"]["reads"] > KILLS
    kills = result["kill_loop"]
    assert kills["kills"] == kills["loadable_after_kill"] == KILLS
    assert kills["inside_a_save"] > KILLS // 2 and kills["kills_that_left_a_staging_folder"] > 0
    assert kills["after_the_next_save"] == [LOCK, MODEL_NAME]


# -- loading bad model dirs ------------------------------------------------------------------------
def test_missing_model_dir(tmp_path):
    message = load_error(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere" / MODEL_NAME) in message


@pytest.mark.parametrize("name", REQUIRED)
def test_model_dir_missing_a_file(model_copy, name):
    models_dir, model_dir = model_copy
    os.remove(model_dir / name)
    message = load_error(models_dir)
    assert str(model_dir) in message
    assert name in message


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage", "zeroed tail"])
def test_corrupt_weights(model_copy, damage):
    models_dir, model_dir = model_copy
    path = model_dir / WEIGHTS_FILE
    data = path.read_bytes()
    damaged = {"truncated": data[:len(data) // 2], "empty": b"",
               "garbage": bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)),
               "zeroed tail": data[:2000] + b"\0" * (len(data) - 2000)}[damage]
    path.write_bytes(damaged)
    message = load_error(models_dir)
    assert str(path) in message


def test_weights_not_matching_the_preprocessor(model_copy):
    models_dir, model_dir = model_copy
    path = model_dir / PREPROCESSOR_FILE
    values = json.loads(path.read_text(encoding="utf-8"))
    values["char_index"]["☃"] = len(values["char_index"])  # one more char: embedding shape differs
    path.write_text(json.dumps(values), encoding="utf-8")
    message = load_error(models_dir)
    assert str(model_dir / WEIGHTS_FILE) in message


@pytest.mark.parametrize("name", [CONFIG_FILE, PREPROCESSOR_FILE])
@pytest.mark.parametrize("content", ['{"architecture": "BidLS', "", "[1, 2]", "null",
                                     '{"architecture": 5}', "\xff\xfe garbage"])
def test_corrupt_json(model_copy, name, content):
    models_dir, model_dir = model_copy
    path = model_dir / name
    if name == PREPROCESSOR_FILE and content == '{"architecture": 5}':
        content = '{"kind": "bilstm", "labels": []}'  # a JSON object missing its vocabularies
    path.write_bytes(content.encode("latin-1"))
    message = load_error(models_dir)
    assert str(path) in message
