"""`grobidTagger.py date train_eval` on the real date data, seeds 1-3, as compat.md measures DeLFT.

    python benchmarks/date_train_eval.py [--seeds 1,2,3] [--multi-gpu] [-- extra grobidTagger options]

Each run is a fresh process (what a user runs). Prints per seed: eval micro F1, epochs, first-epoch
and median steady epoch time (validation included), whole-process wall time and peak RSS; then the
mean and spread of F1. With --multi-gpu the runs use DELFT_CPU_REPLICAS=2 logical CPU replicas
(unless DELFT_CPU_REPLICAS is already set).
"""
import argparse
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

EPOCH = re.compile(r"^epoch\s+\d+/\d+ .* ([\d.]+)s$")
MICRO = re.compile(r"all \(micro avg\.\)\s+[\d.]+\s+[\d.]+\s+([\d.]+)")


def run(seed, multi_gpu, extra):
    data = shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")
    with tempfile.TemporaryDirectory() as output:
        command = [sys.executable, os.path.join(REPO, "delft", "applications", "grobidTagger.py"),
                   "date", "train_eval", "--input", str(data), "--output", output,
                   "--seed", str(seed)] + (["--multi-gpu"] if multi_gpu else []) + extra
        env = dict(os.environ, PYTHONPATH=REPO)
        if multi_gpu:
            env.setdefault("DELFT_CPU_REPLICAS", "2")
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=env)
        out, err = process.communicate()
        wall = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"seed {seed} failed:\n{err[-2000:]}")
    epochs = [float(m.group(1)) for m in map(EPOCH.match, out.splitlines()) if m]
    f1 = float(MICRO.search(out.split("Evaluation:")[-1]).group(1)) * 100
    return {"f1": f1, "epochs": len(epochs), "first": epochs[0],
            "steady": statistics.median(epochs[1:]), "wall": wall}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--multi-gpu", action="store_true")
    args, extra = parser.parse_known_args()
    extra = [e for e in extra if e != "--"]
    results = []
    for seed in map(int, args.seeds.split(",")):
        result = run(seed, args.multi_gpu, extra)
        result["rss"] = _children_peak_rss()
        results.append(result)
        print(f"seed {seed}: eval micro F1 {result['f1']:.2f}  epochs {result['epochs']}  "
              f"first epoch {result['first']:.2f} s  steady epoch {result['steady']:.3f} s  "
              f"wall {result['wall']:.1f} s  peak RSS (max so far) {result['rss']:.2f} GB",
              flush=True)
    f1s = [r["f1"] for r in results]
    print(f"mean eval F1 {statistics.mean(f1s):.2f}  spread {max(f1s) - min(f1s):.2f}  "
          f"({'2 logical CPU replicas' if args.multi_gpu else '1 device'})")


def _children_peak_rss():
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 ** 2


if __name__ == "__main__":
    main()
