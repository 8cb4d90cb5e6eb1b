"""Experiment tracking: each epoch's record, the settings, and the per-label F1 at the end, to
TensorBoard (``--tensorboard DIR``, TensorFlow's own summary writer) and to Weights & Biases
(DeLFT's ``--wandb``; ``pip install wandb``, an optional dependency; ``WANDB_MODE=offline`` works
without network). Only the chief of several workers reports.

>>> trackers_for(tensorboard=None, report_to_wandb=False)
[]
"""
import dataclasses
import logging
import os
from typing import List, Optional

from delft.utilities.errors import ConfigurationError

logger = logging.getLogger(__name__)


class Tracker:
    """Where a training reports: :meth:`start` once, :meth:`epoch` per epoch, :meth:`end`."""

    def start(self, name: str, settings: dict):
        """A new run named ``name``, described by ``settings`` (the configs' fields)."""

    def epoch(self, record: dict):
        """One epoch's record: ``epoch``, ``loss``, ``learning_rate``, ``val_f1``, ``seconds``."""

    def end(self, scores: Optional[dict]):
        """The run's end; ``scores``: the per-label scores of the restored model on the
        validation set (``evaluation.precision_recall_f1``), when there is one."""


class TensorBoardTracker(Tracker):
    """Scalars per epoch under ``train/``, the final per-label F1 under ``validation/``, the
    settings as text, in ``directory/<run name>/``.

    Written with TensorFlow's own summary ops and the metadata of TensorBoard's scalar and text
    plugins, so that the ``tensorboard`` package is needed to view them only, not to write them.
    """

    def __init__(self, directory):
        self.directory = directory
        self.writer = None

    def start(self, name, settings):
        import tensorflow as tf

        self.writer = tf.summary.create_file_writer(os.path.join(self.directory, name))
        text = "\n".join(f"    {key}: {value}" for key, value in sorted(settings.items()))
        self._write("settings", tf.constant(text), 0, "text")

    def epoch(self, record):
        for key, value in record.items():
            if key != "epoch" and isinstance(value, (int, float)):
                self._write(f"train/{key}", value, record["epoch"])
        self.writer.flush()

    def end(self, scores):
        for label, values in (scores or {}).get("labels", {}).items():
            self._write(f"validation/f1/{label}", values["f1"], 0)
        if scores:
            self._write("validation/f1/micro", scores["micro"]["f1"], 0)
        self.writer.close()

    def _write(self, tag, value, step, plugin="scalars"):
        import tensorflow as tf
        from tensorflow.core.framework import summary_pb2

        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin))
        tensor = value if plugin == "text" else tf.constant(float(value), tf.float32)
        with self.writer.as_default():
            tf.summary.write(tag, tensor, step=step, metadata=metadata)


class WandbTracker(Tracker):
    """A Weights & Biases run as DeLFT 1.2 makes it: its ``project`` (else ``WANDB_PROJECT``),
    the settings as its config, one log per epoch, the per-label F1 in its summary."""

    def __init__(self, project=None, run_id=None):
        try:
            import wandb
        except ImportError:
            raise ConfigurationError("--wandb needs the wandb package: pip install wandb") from None
        offline = os.environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun")
        if not offline and not os.environ.get("WANDB_API_KEY"):
            raise ConfigurationError("--wandb needs WANDB_API_KEY (or WANDB_MODE=offline to keep "
                                     "the run on this machine)")
        self.wandb = wandb
        self.project = project or os.environ.get("WANDB_PROJECT")
        self.run_id = run_id
        self.run = None

    def start(self, name, settings):
        resume = {"id": self.run_id, "resume": "allow"} if self.run_id else {"name": name}
        self.run = self.wandb.init(project=self.project, config=settings, **resume)

    def epoch(self, record):
        self.run.log({k: v for k, v in record.items() if k != "epoch"}, step=record["epoch"])

    def end(self, scores):
        for label, values in (scores or {}).get("labels", {}).items():
            self.run.summary[f"validation/f1/{label}"] = values["f1"]
        if scores:
            self.run.summary["validation/f1/micro"] = scores["micro"]["f1"]
        self.run.finish()


def trackers_for(tensorboard: Optional[str], report_to_wandb: bool, wandb_project=None,
                 wandb_run_id=None) -> List[Tracker]:
    """The trackers a training config asks for (made before any training starts, so that a
    missing package or key is a one-line error first)."""
    trackers: List[Tracker] = []
    if tensorboard:
        trackers.append(TensorBoardTracker(tensorboard))
    if report_to_wandb:
        trackers.append(WandbTracker(wandb_project, wandb_run_id))
    return trackers


def started_trackers(model_config, training_config, chief=True) -> List[Tracker]:
    """The trackers ``training_config`` asks for, started with both configs as the run's
    settings; none but on the ``chief`` of several workers."""
    if not chief:
        return []
    trackers = trackers_for(training_config.tensorboard, training_config.report_to_wandb,
                            training_config.wandb_project, training_config.wandb_run_id)
    settings = dict(dataclasses.asdict(model_config), **dataclasses.asdict(training_config))
    for tracker in trackers:
        tracker.start(model_config.model_name, settings)
    return trackers
