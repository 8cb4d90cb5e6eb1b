"""Several workers: MultiWorkerMirroredStrategy on loopback processes, as on several machines.

Each worker is a real process with one CPU device, started by tests/loopback_workers.py on free
127.0.0.1 ports and ended by it within a bounded time whatever happens. The cluster is named by
TF_CONFIG, or by the variables srun sets (TF's SlurmClusterResolver).
"""
import json
import sys
import textwrap

import h5py
import numpy as np
import pytest

from conftest import MODEL_NAME, REPO_ROOT, crf_sequences, delft_stderr_lines, run_python, \
    subprocess_env
from loopback_workers import free_ports, run_workers, slurm_environment, tf_config
from delft.sequenceLabelling.batching import LENGTH_GROUPS

GROBID_TAGGER = REPO_ROOT / "delft" / "applications" / "grobidTagger.py"


# -- which cluster (no strategy made) ---------------------------------------------------------
@pytest.fixture
def no_cluster(monkeypatch):
    for name in ("TF_CONFIG", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_PROCID",
                 "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "DELFT_SLURM_PORT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_tf_config_of_several_workers_is_a_cluster(no_cluster):
    from delft.utilities import devices

    assert devices.cluster_resolver() is None
    no_cluster.setenv("TF_CONFIG", tf_config([1111], 0))  # one worker: a single process
    assert devices.cluster_resolver() is None
    no_cluster.setenv("TF_CONFIG", json.dumps({"cluster": {"chief": ["a:1"], "worker": ["b:2"]},
                                               "task": {"type": "worker", "index": 0}}))
    resolver = devices.cluster_resolver()
    assert resolver.cluster_spec().as_dict() == {"chief": ["a:1"], "worker": ["b:2"]}
    assert (resolver.task_type, resolver.task_id) == ("worker", 0)


def test_malformed_tf_config_is_one_line(no_cluster):
    from delft.utilities import devices
    from delft.utilities.errors import ConfigurationError

    no_cluster.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ConfigurationError, match="TF_CONFIG is not a cluster description"):
        devices.cluster_resolver()


def test_slurm_job_step_is_resolved_by_tf(no_cluster):
    from delft.utilities import devices

    for name, value in {"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "3",
                        "SLURM_STEP_NODELIST": "node[07-08]", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
                        "DELFT_SLURM_PORT": "9100"}.items():
        no_cluster.setenv(name, value)
    resolver = devices.cluster_resolver()
    assert resolver.cluster_spec().as_dict() == {
        "worker": ["node07:9100", "node07:9101", "node08:9100", "node08:9101"]}
    assert (resolver.task_type, resolver.task_id) == ("worker", 3)
    assert resolver.num_accelerators() == {"GPU": 0}  # this machine has none
    no_cluster.setenv("TF_CONFIG", tf_config([1111], 0))  # TF_CONFIG comes first
    assert devices.cluster_resolver() is None


def test_slurm_allocation_without_srun_is_one_process_and_says_so(no_cluster, caplog):
    from delft.utilities import devices

    no_cluster.setenv("SLURM_NTASKS", "2")
    assert devices.cluster_resolver() is None
    assert "start the workers with srun" in caplog.text


def test_single_process_is_its_own_chief():
    from delft.utilities import devices
    from delft.utilities.errors import ConfigurationError

    strategy = devices.get_strategy(False)
    assert devices.is_chief(strategy) and devices.worker_count(strategy) == 1
    assert devices.common_seed(strategy, None) is None and devices.common_seed(strategy, 3) == 3
    assert devices.all_workers_agree(strategy, 5)
    with pytest.raises(ConfigurationError, match="one of nccl, hierarchical_copy"):
        devices.get_strategy(True, cross_device_ops="fast")


def test_multi_worker_strategy_made_late_is_one_line(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(textwrap.dedent("""
        import tensorflow as tf
        from delft.utilities import devices
        from delft.utilities.errors import ConfigurationError
        tf.constant(1.0) + 1  # TensorFlow has run something: too late for collectives
        try:
            devices.get_strategy(True)
        except ConfigurationError as error:
            print(error)
    """))
    ports = free_ports(2)
    done = run_python([script], cwd=tmp_path, timeout=120, TF_CONFIG=tf_config(ports, 0))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("MultiWorkerMirroredStrategy must be made before TensorFlow")


# -- real workers -----------------------------------------------------------------------------
def test_every_row_once_per_epoch_across_slurm_workers(tmp_path):
    """Two srun-like tasks: the global batch is split across both workers' replicas, each pads
    only its own slice, and one epoch takes every row exactly once (a ragged last batch of one
    row gives the groups without a row weight-0 copies); no seed given, the workers agree on one."""
    port = free_ports(2, consecutive=True)[0]
    outputs = [tmp_path / f"worker{i}.json" for i in range(2)]
    finished = run_workers(
        [[sys.executable, str(REPO_ROOT / "tests" / "multi_worker_rows.py"), str(out)]
         for out in outputs],
        [subprocess_env(PYTHONPATH=f"{REPO_ROOT}:{REPO_ROOT / 'tests'}",
                        **slurm_environment(port, i, 2)) for i in range(2)],
        cwd=tmp_path, timeout=420)
    for worker in finished:
        assert worker.returncode == 0, worker.stderr[-3000:]
    chief, other = (json.loads(out.read_text()) for out in outputs)
    assert chief["resolver"] == other["resolver"] == "SimpleClusterResolver"
    assert (chief["chief"], other["chief"]) == (True, False)
    assert chief["workers"] == other["workers"] == 2 and chief["replicas"] == 2
    assert (chief["local_replicas"], other["local_replicas"]) == ([0], [1])
    assert chief["seeds"] == other["seeds"] and chief["seeds"][0] is not None
    real = [i for worker in (chief, other) for i, weight in worker["trained"] if weight > 0]
    assert sorted(real) == list(range(chief["rows"]))  # each row once, none skipped
    padding = [(i, w) for worker in (chief, other) for i, w in worker["trained"] if w == 0]
    # 101 rows at batch 10: the last batch has one row, in worker 0's first length group; its
    # other groups and all of worker 1's are weight-0 copies
    assert padding == [(-1, 0.0)] * (2 * LENGTH_GROUPS - 1)
    assert not set(i for i, w in chief["trained"] if w) & set(i for i, w in other["trained"] if w)
    assert chief["labels"] == other["labels"] and len(chief["labels"]) == 40


def weights_of(model_dir):
    arrays = {}
    with h5py.File(model_dir / "model.weights.h5", "r") as stream:
        stream.visititems(lambda name, item: arrays.__setitem__(name, item[()])
                          if isinstance(item, h5py.Dataset) else None)
    return arrays


def test_two_loopback_workers_train_as_one_process(tmp_path, date_corpus_path):
    """grobidTagger date train_eval --multi-gpu on 2 workers (one CPU device each) against one
    process at the same global batch: same weights (1e-4 relative), same validation F1 per epoch
    and evaluation report; only the chief writes (model, history, plot, report, checkpoints), the
    other leaves its --output empty and stdout silent; both exit 0."""
    data = tmp_path / "date-slice.train"
    data.write_text("\n\n".join("\n".join(s) for s in crf_sequences(date_corpus_path, 300)) + "\n")
    options = ["date", "train_eval", "--input", str(data), "--max-epoch", "2", "--seed", "3",
               "--batch-size", "20", "--dropout", "0", "--recurrent-dropout", "0",
               "--checkpoint-interval", "0"]
    ports = free_ports(2)
    outputs = [tmp_path / "chief", tmp_path / "worker1", tmp_path / "single"]
    commands = [[sys.executable, str(GROBID_TAGGER), *options, "--output", str(out)]
                + (["--multi-gpu"] if i < 2 else []) for i, out in enumerate(outputs)]
    environments = [subprocess_env(TF_CONFIG=tf_config(ports, i)) for i in range(2)] + \
        [subprocess_env()]
    chief, worker, single = run_workers(commands, environments, cwd=tmp_path, timeout=540)
    for process in (chief, worker, single):
        assert process.returncode == 0, process.stderr[-3000:]
        assert not [line for line in delft_stderr_lines(process.stderr) if "Traceback" in line]
    assert "MultiWorkerMirroredStrategy: 2 workers, 2 replicas in all" in chief.stderr
    assert "(chief)" in chief.stderr and "(chief)" not in worker.stderr
    # only the chief wrote: the model (and its save lock), and the checkpoints it removed once
    # the model was saved
    assert not outputs[1].exists()
    assert worker.stdout == ""
    assert f"checkpoints removed: {outputs[0] / (MODEL_NAME + '.checkpoints')}" in chief.stderr
    assert sorted(p.name for p in outputs[0].iterdir()) == [f".{MODEL_NAME}.lock", MODEL_NAME]
    saved = {p.name for p in (outputs[0] / MODEL_NAME).iterdir()}
    assert {"history.json", "training_curve.png", "model.weights.h5"} <= saved
    # corpus-level metrics across workers: the same as one process
    assert chief.stdout == single.stdout and "all (micro avg.)" in chief.stdout
    histories = [json.loads((out / MODEL_NAME / "history.json").read_text())
                 for out in (outputs[0], outputs[2])]
    assert [r["val_f1"] for r in histories[0]] == [r["val_f1"] for r in histories[1]]
    assert [r["loss"] for r in histories[0]] == pytest.approx([r["loss"] for r in histories[1]],
                                                             rel=1e-4)
    two, one = weights_of(outputs[0] / MODEL_NAME), weights_of(outputs[2] / MODEL_NAME)
    assert two.keys() == one.keys()
    difference = max(np.linalg.norm(two[k] - one[k]) / max(np.linalg.norm(one[k]), 1e-12)
                     for k in one)
    assert difference < 1e-4, difference


def test_two_workers_resume_what_one_process_left(tmp_path, date_corpus_path):
    """A run killed (SIGKILL) in epoch 3 leaves the epoch-2 checkpoint in --output; two workers
    sharing that folder (a shared filesystem) both restore it, train epochs 3-4 and end with the
    uninterrupted one-process run's weights (1e-4 relative): the checkpoint holds no trace of the
    device count, only the global batch, the seed and the data order."""
    data = tmp_path / "date-slice.train"
    data.write_text("\n\n".join("\n".join(s) for s in crf_sequences(date_corpus_path, 300)) + "\n")
    driver = REPO_ROOT / "tests" / "interrupted_training.py"

    def command(output, interrupt="none", *extra):
        return [sys.executable, str(driver), interrupt, "-", "--", "date", "train", "--input",
                str(data), "--output", str(output), "--max-epoch", "4", "--seed", "1",
                "--batch-size", "20", "--dropout", "0", "--recurrent-dropout", "0",
                "--checkpoint-interval", "0", *extra]

    shared, reference = tmp_path / "shared", tmp_path / "reference"
    killed, uninterrupted = run_workers([command(shared, "SIGKILL:3:4"), command(reference)],
                                        [subprocess_env()] * 2, cwd=tmp_path, timeout=300)
    assert killed.returncode == -9 and uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    ports = free_ports(2)
    workers = run_workers([command(shared, "none", "--multi-gpu")] * 2,
                          [subprocess_env(TF_CONFIG=tf_config(ports, i)) for i in range(2)],
                          cwd=tmp_path, timeout=420)
    for worker in workers:
        assert worker.returncode == 0, "\n---\n".join(w.stderr[-3000:] for w in workers)
        assert "2 epoch(s) done, going on with epoch 3 (restored in" in worker.stderr
        assert "MultiWorkerMirroredStrategy: 2 workers" in worker.stderr
    # no checkpoints left: the model and its save lock only
    assert sorted(p.name for p in shared.iterdir()) == [f".{MODEL_NAME}.lock", MODEL_NAME]
    two, one = weights_of(shared / MODEL_NAME), weights_of(reference / MODEL_NAME)
    difference = max(np.linalg.norm(two[k] - one[k]) / max(np.linalg.norm(one[k]), 1e-12)
                     for k in one)
    assert difference < 1e-4, difference
