"""Experiment tracking: TensorBoard (``--tensorboard DIR``) and Weights & Biases (``--wandb``,
offline here): one record per epoch, the settings, the per-label validation F1 at the end."""
import glob

import pytest

from conftest import SAMPLE_DATE, run_python
from delft.utilities.errors import ConfigurationError

X = [["June", "2005"], ["12", "May", "1999"], ["March", "3"]] * 8
Y = [["B-<month>", "B-<year>"], ["B-<day>", "B-<month>", "B-<year>"], ["B-<month>", "B-<day>"]] * 8


def test_tensorboard_gets_each_epoch_and_the_per_label_f1(tmp_path):
    import tensorflow as tf

    from delft.sequenceLabelling import Sequence

    model = Sequence("date-tracked", max_epoch=3, early_stop=False, batch_size=6,
                     recurrent_dropout=0.0, seed=1, tensorboard=str(tmp_path / "tb"))
    model.train(X, Y, x_valid=X[:6], y_valid=Y[:6])
    events = glob.glob(str(tmp_path / "tb" / "date-tracked" / "events.out.tfevents.*"))
    assert len(events) == 1
    scalars, texts = {}, {}
    for event in tf.compat.v1.train.summary_iterator(events[0]):
        for value in event.summary.value:
            content = tf.make_ndarray(value.tensor)
            if value.metadata.plugin_data.plugin_name == "text":
                texts[value.tag] = content.item().decode()
            else:
                scalars.setdefault(value.tag, []).append((event.step, float(content)))
    assert [step for step, _ in scalars["train/loss"]] == [1, 2, 3]
    assert [round(v, 6) for _, v in scalars["train/val_f1"]] == \
        [round(r["val_f1"], 6) for r in model.history]
    for label in ("<day>", "<month>", "<year>"):
        assert 0.0 <= scalars[f"validation/f1/{label}"][0][1] <= 1.0
    assert "max_epoch: 3" in texts["settings"] and "model_name: date-tracked" in texts["settings"]


def test_wandb_offline_run_from_the_cli(tmp_path):
    pytest.importorskip("wandb", reason="the optional wandb package is not installed")
    done = run_python(["delft/applications/grobidTagger.py", "date", "train", "--input",
                       SAMPLE_DATE, "--output", tmp_path / "models", "--max-epoch", "2",
                       "--seed", "1", "--wandb", "--wandb-project", "delft-test"],
                      timeout=300, WANDB_MODE="offline", WANDB_DIR=tmp_path, WANDB_SILENT="true")
    assert done.returncode == 0, done.stderr[-3000:]
    (records,) = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "run-*.wandb"))
    # the offline run's records (protocol buffers): the keys are there as UTF-8 strings
    data = open(records, "rb").read()
    assert data.count(b"val_f1") >= 2  # one log per epoch
    for key in (b"learning_rate", b"validation/f1/micro", b"validation/f1/<year>",
                b"max_epoch", b"date-BidLSTM_CRF"):
        assert key in data, key


def test_wandb_online_without_a_key_is_one_line(monkeypatch):
    pytest.importorskip("wandb", reason="the optional wandb package is not installed")
    from delft.utilities.tracking import trackers_for

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    with pytest.raises(ConfigurationError, match="WANDB_API_KEY .*WANDB_MODE=offline"):
        trackers_for(None, True)
