"""BidLSTM_CRF_FEATURES and BidLSTM_CRF on GROBID data: ours against DeLFT 1.2.0, seeds 1-3.

    DELFT12_PYTHON=/path/to/delft12/bin/python python benchmarks/features.py
        [--sets name-header,name-citation,affiliation-address]
        [--architectures BidLSTM_CRF_FEATURES,BidLSTM_CRF] [--seeds 1,2,3] [--systems ours,delft]
        [--results FILE.jsonl] [-- extra options for our grobidTagger]

Each run is a fresh process, what a user runs, from a scratch folder: ours ``grobidTagger.py
<set> train_eval --architecture A --seed N --input FILE``, DeLFT 1.2.0's ``python -m
delft.applications.grobidTagger`` with the same arguments (``benchmarks/peers.py``). Both are
char-only (no --embedding), with each model's GROBID defaults; the runs of a set and seed
alternate between the systems.

Prints one line per run (eval micro F1, epochs, wall time, peak RSS) and then, per set and
architecture, each system's F1 per seed and mean, its summed wall time, the F1 difference and ours /
DeLFT's wall time.

DeLFT 1.2.0's runs take minutes each (a name-header FEATURES run 2.5-5 minutes here alone, six times
that beside other jobs): they are kept in ``benchmarks/results/delft-1.2.0-features.jsonl``,
committed, and a run already there (same set, architecture, seed) is not made again, so they add up
across sessions; ``--delft-results NEW.jsonl`` runs them again beside ours (the machine's speed
varies by a quarter from one day to another). With ``--results FILE`` our runs are kept the same way in FILE (not committed: they
change with the code).
"""
import argparse
import json
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402

sys.path.insert(0, peers.REPO)
from delft.utilities.data_path import shared_data_file  # noqa: E402

DELFT_RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                             "delft-1.2.0-features.jsonl")
TRAINING_FILES = {"name-header": "name-header-251225.train",
                  "name-citation": "name-citation-251225.train",
                  "affiliation-address": "affiliation-address-251225.train",
                  "date": "date-220311.train"}
OUR_EPOCH = re.compile(r"^epoch\s+\d+/\d+ ", re.M)
DELFT_EPOCH = re.compile(r"^Epoch \d+: loss=", re.M)


def data_file(data_set):
    return str(shared_data_file("sequenceLabelling", "grobid", data_set, TRAINING_FILES[data_set]))


def run(system, data_set, architecture, seed, extra):
    """One train_eval process: its eval micro F1 (percent), epochs, wall time and peak RSS."""
    args = [data_set, "train_eval", "--architecture", architecture, "--seed", str(seed),
            "--input", data_file(data_set)]
    with tempfile.TemporaryDirectory(prefix="features-bench-") as scratch:
        if system == "ours":
            result = peers.ours("grobidTagger", args + ["--output", scratch] + extra, scratch)
        else:  # DeLFT writes its model under the current directory
            result = peers.delft12("grobidTagger", args, scratch)
    if result.code != 0:
        raise SystemExit(f"{system} {data_set} {architecture} seed {seed} failed:\n"
                         f"{result.err[-3000:]}")
    epochs = (OUR_EPOCH if system == "ours" else DELFT_EPOCH).findall(result.out + result.err)
    return {"system": system, "set": data_set, "architecture": architecture, "seed": seed,
            "f1": result.micro_f1(), "epochs": len(epochs), "wall": result.wall,
            "rss": result.peak_rss_gb}


def column_choice(sets, limits=(12, 32)):
    """Which feature columns the automatic selection keeps on each set's training file, under
    DeLFT's limit of 12 distinct values and the 32 this package used before."""
    from delft.sequenceLabelling.preprocess import WordPreprocessor
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file

    for data_set in sets:
        x, y, f = load_data_and_labels_crf_file(data_file(data_set))
        chosen = []
        for limit in limits:
            preprocessor = WordPreprocessor(features_vocabulary_size=limit)
            preprocessor.fit(x, y, f)
            chosen.append(f"<= {limit} values: {preprocessor.features_indices}")
        print(f"{data_set}: feature columns kept with " + "; ".join(chosen), flush=True)


def load_results(path):
    if not path or not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def paired_spread(ours, delft):
    """`` (± s.e. X, N seeds)``: the standard error of the per-seed F1 differences. A seed fixes
    the train/validation/evaluation split in both systems (the same sklearn split), so the
    difference per seed leaves the split's luck out; empty when fewer than two seeds pair up."""
    theirs = {r["seed"]: r["f1"] for r in delft}
    differences = [r["f1"] - theirs[r["seed"]] for r in ours if r["seed"] in theirs]
    if len(differences) < 2:
        return ""
    error = statistics.stdev(differences) / len(differences) ** 0.5
    return f" (± s.e. {error:.2f} over {len(differences)} paired seeds)"


def summary(results, sets, architectures, systems, seeds):
    print("\nset / architecture: eval micro F1 per seed (mean) and summed wall time (a run's wall "
          "time grows several-fold when other jobs share the machine)")
    for data_set in sets:
        for architecture in architectures:
            line, runs_of = {}, {}
            for system in systems:
                runs = sorted((r for r in results if r["system"] == system and r["seed"] in seeds
                               and r["set"] == data_set and r["architecture"] == architecture),
                              key=lambda r: r["seed"])
                runs_of[system] = runs
                if runs:
                    line[system] = (statistics.mean(r["f1"] for r in runs),
                                    sum(r["wall"] for r in runs),
                                    " / ".join(f"{r['f1']:.2f}" for r in runs), len(runs))
            parts = [f"{s} {seeds} ({f1:.2f}) in {wall:.0f} s" for s, (f1, wall, seeds, _)
                     in line.items()]
            if "ours" in line and "delft" in line and line["ours"][3] == line["delft"][3]:
                parts.append(f"F1 ours - DeLFT {line['ours'][0] - line['delft'][0]:+.2f}"
                             f"{paired_spread(runs_of['ours'], runs_of['delft'])}, "
                             f"wall ours / DeLFT {line['ours'][1] / line['delft'][1]:.3f}")
            if parts:
                print(f"{data_set:20s} {architecture:22s} " + "; ".join(parts))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", default="name-header,name-citation,affiliation-address")
    parser.add_argument("--architectures", default="BidLSTM_CRF_FEATURES,BidLSTM_CRF")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--systems", default="ours,delft")
    parser.add_argument("--results", default=None, help="JSON-lines file of runs (reused)")
    parser.add_argument("--delft-results", default=DELFT_RESULTS,
                        help="JSON-lines file of DeLFT's runs (reused); a new file measures "
                             "DeLFT again, beside ours on the same day")
    args, extra = parser.parse_known_args()
    extra = [e for e in extra if e != "--"]
    sets, architectures = args.sets.split(","), args.architectures.split(",")
    seeds = [int(seed) for seed in args.seeds.split(",")]
    systems = [s for s in args.systems.split(",") if s == "ours" or peers.delft12_available()]
    column_choice(sets)
    results = load_results(args.results)
    # the same file given twice (or a run in both) counts once
    results += [r for r in load_results(args.delft_results) if r not in results]
    done = {(r["system"], r["set"], r["architecture"], r["seed"]) for r in results}
    for data_set in sets:
        for architecture in architectures:
            for seed in seeds:
                for system in systems:
                    if (system, data_set, architecture, seed) in done:
                        continue
                    record = run(system, data_set, architecture, seed, extra)
                    results.append(record)
                    print(f"{system:5s} {data_set:20s} {architecture:22s} seed {seed}: "
                          f"eval micro F1 {record['f1']:.2f}  epochs {record['epochs']}  "
                          f"wall {record['wall']:.1f} s  peak RSS {record['rss']:.2f} GB",
                          flush=True)
                    keep = args.delft_results if system == "delft" else args.results
                    if keep:
                        with open(keep, "a", encoding="utf-8") as out:
                            out.write(json.dumps(record) + "\n")
    summary(results, sets, architectures, args.systems.split(","), seeds)


if __name__ == "__main__":
    main()
