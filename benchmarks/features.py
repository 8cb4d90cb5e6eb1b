"""BidLSTM_CRF_FEATURES and BidLSTM_CRF on GROBID data: ours against DeLFT 1.2.0, seeds 1-3.

    python benchmarks/features.py [--sets name-header,name-citation,affiliation-address]
        [--architectures BidLSTM_CRF_FEATURES,BidLSTM_CRF] [--seeds 1,2,3]
        [--systems ours,delft] [--results FILE.jsonl] [-- extra options for our grobidTagger]

Each run is a fresh process, what a user runs: ours ``grobidTagger.py <set> train_eval
--architecture A --seed N --input FILE``; DeLFT 1.2.0's ``python -m delft.applications.
grobidTagger`` with the same arguments, from its own virtual environment (``--delft-python``,
default /work/delft12/bin/python), in a scratch folder (it writes its model under the current
directory). Both are char-only (no --embedding), with each model's GROBID defaults.

Prints one line per run (eval micro F1, epochs, wall time) and then, per set and architecture, the
mean F1 of each system, their difference, the summed wall time and ours / DeLFT's. With
``--results`` every run is also appended to a JSON-lines file, and runs already in it (same system,
set, architecture, seed) are not run again: DeLFT's runs take hours, so they can be made once and
the table printed again after ours change.
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

TRAINING_FILES = {"name-header": "name-header-251225.train",
                  "name-citation": "name-citation-251225.train",
                  "affiliation-address": "affiliation-address-251225.train",
                  "date": "date-220311.train"}
MICRO = re.compile(r"all \(micro avg\.\)\s+[\d.]+\s+[\d.]+\s+([\d.]+)")
OUR_EPOCH = re.compile(r"^epoch\s+\d+/\d+ ")
DELFT_EPOCH = re.compile(r"^Epoch \d+: loss=")


def command(system, data_set, architecture, seed, delft_python, extra):
    data = str(shared_data_file("sequenceLabelling", "grobid", data_set, TRAINING_FILES[data_set]))
    arguments = [data_set, "train_eval", "--architecture", architecture, "--seed", str(seed),
                 "--input", data]
    if system == "delft":
        return [delft_python, "-m", "delft.applications.grobidTagger"] + arguments, {}
    return ([sys.executable, os.path.join(REPO, "delft", "applications", "grobidTagger.py")]
            + arguments + extra, {"PYTHONPATH": REPO})


def run(system, data_set, architecture, seed, delft_python, extra):
    """One train_eval process: its eval micro F1 (percent), epochs and wall time (s)."""
    argv, env = command(system, data_set, architecture, seed, delft_python, extra)
    with tempfile.TemporaryDirectory(prefix="features-bench-") as scratch:
        if system == "ours":
            argv += ["--output", scratch]
        start = time.perf_counter()
        process = subprocess.run(argv, cwd=scratch, capture_output=True, text=True,
                                 env=dict(os.environ, **env))
        wall = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"{system} {data_set} {architecture} seed {seed} failed:\n"
                         f"{process.stderr[-3000:]}")
    scores = MICRO.findall(process.stdout)
    epoch_line = OUR_EPOCH if system == "ours" else DELFT_EPOCH
    epochs = sum(1 for line in (process.stdout + process.stderr).splitlines()
                 if epoch_line.match(line))
    return {"system": system, "set": data_set, "architecture": architecture, "seed": seed,
            "f1": float(scores[-1]) * 100, "epochs": epochs, "wall": wall}


def load_results(path):
    if not path or not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def key(record):
    return record["system"], record["set"], record["architecture"], record["seed"]


def summary(results, sets, architectures, systems):
    print("\nset / architecture: mean eval micro F1 (seeds) and summed wall time; "
          "wall times from a shared 2-core machine")
    for data_set in sets:
        for architecture in architectures:
            line = {}
            for system in systems:
                runs = [r for r in results if r["system"] == system and r["set"] == data_set
                        and r["architecture"] == architecture]
                if runs:
                    line[system] = (statistics.mean(r["f1"] for r in runs),
                                    sum(r["wall"] for r in runs),
                                    " / ".join(f"{r['f1']:.2f}" for r in
                                               sorted(runs, key=lambda r: r["seed"])))
            parts = [f"{s} {f1:.2f} ({seeds}) in {wall:.0f} s" for s, (f1, wall, seeds)
                     in line.items()]
            if "ours" in line and "delft" in line:
                parts.append(f"F1 ours - DeLFT {line['ours'][0] - line['delft'][0]:+.2f}, "
                             f"wall ours / DeLFT {line['ours'][1] / line['delft'][1]:.3f}")
            if parts:
                print(f"{data_set:20s} {architecture:22s} " + "; ".join(parts))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", default="name-header,name-citation,affiliation-address")
    parser.add_argument("--architectures", default="BidLSTM_CRF_FEATURES,BidLSTM_CRF")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--systems", default="ours,delft")
    parser.add_argument("--delft-python", default="/work/delft12/bin/python")
    parser.add_argument("--results", default=None, help="JSON-lines file of runs (reused)")
    args, extra = parser.parse_known_args()
    extra = [e for e in extra if e != "--"]
    sets, architectures = args.sets.split(","), args.architectures.split(",")
    systems = args.systems.split(",")
    results = load_results(args.results)
    done = {key(r) for r in results}
    for data_set in sets:
        for architecture in architectures:
            for seed in map(int, args.seeds.split(",")):
                for system in systems:
                    if (system, data_set, architecture, seed) in done:
                        continue
                    record = run(system, data_set, architecture, seed, args.delft_python, extra)
                    results.append(record)
                    print(f"{system:5s} {data_set:20s} {architecture:22s} seed {seed}: "
                          f"eval micro F1 {record['f1']:.2f}  epochs {record['epochs']}  "
                          f"wall {record['wall']:.1f} s", flush=True)
                    if args.results:
                        with open(args.results, "a", encoding="utf-8") as out:
                            out.write(json.dumps(record) + "\n")
    summary(results, sets, architectures, systems)


if __name__ == "__main__":
    main()
