"""Two loopback workers (MultiWorkerMirroredStrategy, one CPU device each) against one process.

    python benchmarks/multi_worker_loopback.py [--epochs 5] [--batch-size 60] [--sequences N]

Runs ``grobidTagger.py date train`` (dropout off, seed 1) once as a single process, then as two
worker processes on 127.0.0.1 with the same global batch (each worker's replica takes half of it),
one after the other. Prints for each: whole-process wall time, training runtime, first and median
steady epoch time; then the largest relative difference between the two saved models' weights and
whether the validation F1 of every epoch is the same. On one machine the workers share its cores and
talk over loopback gRPC: this measures the cost of the multi-worker engine, not a speed-up.
"""
import argparse
import json
import os
import re
import statistics
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))  # its conftest, before the root one

from conftest import MODEL_NAME, crf_sequences  # noqa: E402
from conftest import REAL_DATE, SAMPLE_DATE, subprocess_env  # noqa: E402
from loopback_workers import free_ports, run_workers, tf_config  # noqa: E402

EPOCH = re.compile(r"^epoch\s+\d+/\d+ .* ([\d.]+)s$", re.M)
RUNTIME = re.compile(r"training runtime: ([\d.]+) s")


def weights_of(model_dir):
    import h5py

    arrays = {}
    with h5py.File(os.path.join(model_dir, "model.weights.h5"), "r") as stream:
        stream.visititems(lambda name, item: arrays.__setitem__(name, item[()])
                          if hasattr(item, "shape") else None)
    return arrays


def summary(name, finished):
    epochs = [float(s) for s in EPOCH.findall(finished.stderr)]
    runtime = RUNTIME.search(finished.stderr)
    print(f"  {name:12s} exit {finished.returncode}, wall {finished.seconds:6.1f} s, training "
          f"{float(runtime.group(1)) if runtime else float('nan'):6.1f} s, first epoch "
          f"{epochs[0] if epochs else float('nan'):5.2f} s, steady epoch "
          f"{statistics.median(epochs[1:]) if len(epochs) > 1 else float('nan'):5.2f} s")


def main():
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=60)
    parser.add_argument("--sequences", type=int, default=None, help="first N sequences only")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="delft-loopback-")
    source = REAL_DATE if REAL_DATE.is_file() else SAMPLE_DATE
    data = os.path.join(root, "date.train")
    with open(data, "w", encoding="utf-8") as out:
        out.write("\n\n".join("\n".join(s) for s in crf_sequences(source, args.sequences)) + "\n")
    options = ["date", "train", "--input", data, "--max-epoch", str(args.epochs), "--seed", "1",
               "--batch-size", str(args.batch_size), "--dropout", "0", "--recurrent-dropout", "0"]
    tagger = os.path.join(REPO, "delft", "applications", "grobidTagger.py")
    single_dir, chief_dir, worker_dir = (os.path.join(root, n) for n in ("one", "chief", "worker"))
    single, = run_workers([[sys.executable, tagger, *options, "--output", single_dir]],
                          [subprocess_env()], cwd=root, timeout=1800)
    ports = free_ports(2)
    chief, worker = run_workers(
        [[sys.executable, tagger, *options, "--multi-gpu", "--output", out]
         for out in (chief_dir, worker_dir)],
        [subprocess_env(TF_CONFIG=tf_config(ports, i)) for i in range(2)], cwd=root, timeout=1800)
    print(f"date train, {os.path.basename(str(source))}"
          f"{f' (first {args.sequences})' if args.sequences else ''}, global batch "
          f"{args.batch_size}, {args.epochs} epochs (shared machine, {os.cpu_count()} cores):")
    summary("one process", single)
    summary("2 workers: 0", chief)
    summary("2 workers: 1", worker)
    if single.returncode or chief.returncode or worker.returncode:
        print(chief.stderr[-2000:], worker.stderr[-2000:], single.stderr[-2000:])
        return 1
    one = weights_of(os.path.join(single_dir, MODEL_NAME))
    two = weights_of(os.path.join(chief_dir, MODEL_NAME))
    difference = max(float(np.linalg.norm(two[k] - one[k]) / max(np.linalg.norm(one[k]), 1e-12))
                     for k in one)
    histories = [json.load(open(os.path.join(d, MODEL_NAME, "history.json")))
                 for d in (single_dir, chief_dir)]
    same_f1 = [r["val_f1"] for r in histories[0]] == [r["val_f1"] for r in histories[1]]
    print(f"  weights: largest relative difference per tensor {difference:.2e}; validation F1 "
          f"per epoch {'identical' if same_f1 else 'different'} "
          f"({histories[1][-1]['val_f1']:.4f} at the last epoch); worker 1 wrote "
          f"{'nothing' if not os.path.exists(worker_dir) else os.listdir(worker_dir)}")
    print(f"  wall time 2 workers / one process: {chief.seconds / single.seconds:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
