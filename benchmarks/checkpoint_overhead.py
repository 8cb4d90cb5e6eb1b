"""What preemption-safe training costs: per-epoch checkpoints on the date train_eval, and a resume.

    python benchmarks/checkpoint_overhead.py [--epochs 15] [--seed 1] [--repeats 3]

1. In this process, the date train_eval's training (90/10 eval split, then 90/10 validation, batch
   60, BidLSTM_CRF) with the same seed, without checkpoints and with a checkpoint at every epoch
   end (``checkpoint_interval=0``; the default saves at most once a minute), alternately (each
   first in every other repeat), --repeats times. Prints the time of a checkpoint save against
   the steady epoch time (median of epochs 2..N, validation included) and their ratio (goal: <=
   5%), the steady epochs and training runtimes with and without (medians over the repeats).
2. In fresh processes (``grobidTagger.py date train`` through tests/interrupted_training.py): a run
   killed with SIGKILL in epoch 3, then the same command again. Prints the time from the restart to
   its first training step, against a fresh start's, and the restore time the log reports.

Figures are noisy on a shared machine: run it on a quiet one.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from delft.utilities.data_path import shared_data_file  # noqa: E402

DATE = shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")


def in_process(epochs, seed, repeats):
    from delft.applications.common import split
    from delft.sequenceLabelling import Sequence
    from delft.training.checkpoints import EpochCheckpoints
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file

    x, y, f = load_data_and_labels_crf_file(str(DATE))
    (x, y, f), _ = split(x, y, f, 0.1, seed)
    (x_train, y_train, _), (x_valid, y_valid, _) = split(x, y, f, 0.1, seed)
    saves = []
    original_save = EpochCheckpoints.save

    def timed_save(self):  # the save is written before training goes on
        start = time.perf_counter()
        original_save(self)
        saves.append(time.perf_counter() - start)

    EpochCheckpoints.save = timed_save
    results = {"without": [], "with": []}
    for repeat in range(repeats):
        # alternate which goes first: a second training in one process runs its epochs faster or
        # slower than the first, which a fixed order would count as the checkpoints' cost
        for label in (("without", "with") if repeat % 2 == 0 else ("with", "without")):
            directory = tempfile.mkdtemp() if label == "with" else None
            model = Sequence("date-BidLSTM_CRF", max_epoch=epochs, early_stop=False, batch_size=60,
                             recurrent_dropout=0.0, max_sequence_length=50, seed=seed,
                             checkpoint_interval=0)
            start = time.perf_counter()
            model.train(x_train, y_train, x_valid=x_valid, y_valid=y_valid,
                        checkpoint_dir=os.path.join(directory, "date.checkpoints")
                        if directory else None)
            results[label].append(
                (time.perf_counter() - start,
                 statistics.median(r["seconds"] for r in model.history[1:])))
    runtime = {label: statistics.median(r[0] for r in runs) for label, runs in results.items()}
    steady = {label: statistics.median(r[1] for r in runs) for label, runs in results.items()}
    later = [t for i, t in enumerate(saves) if i % epochs]  # the first save of a run traces
    print(f"date train ({len(x_train)} sequences, batch 60, {epochs} epochs, validation "
          f"{len(x_valid)}), medians of {repeats} runs each:")
    print(f"  steady epoch (median of epochs 2-{epochs}, validation included): "
          f"{steady['with'] * 1000:.0f} ms with checkpoints, {steady['without'] * 1000:.0f} ms "
          "without")
    print(f"  checkpoint save: first {statistics.median(saves[::epochs]) * 1000:.0f} ms (tracing), "
          f"then median {statistics.median(later) * 1000:.1f} ms, max {max(later) * 1000:.1f} ms "
          f"= {statistics.median(later) / steady['without']:.1%} of the steady epoch (goal <= 5%)")
    print(f"  training runtime: {runtime['with']:.2f} s with checkpoints, "
          f"{runtime['without']:.2f} s without ({runtime['with'] / runtime['without'] - 1:+.1%})")


def run_driver(interrupt, output, timing):
    command = [sys.executable, os.path.join(REPO, "tests", "interrupted_training.py"), interrupt,
               timing, "--", "date", "train", "--input", str(DATE), "--output", output,
               "--max-epoch", "4", "--seed", "1", "--batch-size", "60", "--recurrent-dropout", "0",
               "--checkpoint-interval", "0"]
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("DELFT_CPU_REPLICAS", None)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)


def resume_time():
    with tempfile.TemporaryDirectory() as root:
        fresh, killed = os.path.join(root, "fresh"), os.path.join(root, "killed")
        timings = {name: os.path.join(root, name + ".json") for name in ("fresh", "resumed")}
        run_driver("none", fresh, timings["fresh"])
        assert run_driver("SIGKILL:3:4", killed, "-").returncode == -9
        resumed = run_driver("none", killed, timings["resumed"])
        restored = re.search(r"restored in ([\d.]+) s", resumed.stderr)
        first = {name: json.load(open(path))["first_step"] for name, path in timings.items()}
    print("restart after SIGKILL in epoch 3 (date train, batch 60), process start to first step:")
    print(f"  resumed {first['resumed']:.1f} s, fresh start {first['fresh']:.1f} s "
          f"({first['resumed'] - first['fresh']:+.1f} s); restore itself "
          f"{restored.group(1) if restored else '?'} s (log)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not DATE.is_file():
        sys.exit(f"the real date data is needed: {DATE}")
    in_process(args.epochs, args.seed, args.repeats)
    resume_time()


if __name__ == "__main__":
    main()
