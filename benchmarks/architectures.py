"""Every RNN architecture on the GROBID date data: eval micro F1 and steady epoch time, one table.

    python benchmarks/architectures.py [--seed 1] [--architectures A,B,...] [-- grobidTagger options]

Each architecture is one fresh ``grobidTagger.py date train_eval --architecture A --seed N``
process (char-only, date's GROBID defaults: batch 60, 60 epochs at most, patience 5). Prints per
architecture: eval micro F1, epochs run, the first epoch's time (tracing included), the median of
the others (validation included) and the process's wall time and peak RSS.
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402

sys.path.insert(0, peers.REPO)
from delft.sequenceLabelling.models import ARCHITECTURES  # noqa: E402
from delft.utilities.data_path import shared_data_file  # noqa: E402

EPOCH = re.compile(r"^epoch\s+\d+/\d+ .* ([\d.]+)s$", re.M)


def rnn_architectures():
    return sorted(name for name, parts in ARCHITECTURES.items() if parts.family == "rnn")


def run(architecture, seed, extra):
    data = str(shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train"))
    with tempfile.TemporaryDirectory() as output:
        result = peers.ours("grobidTagger", ["date", "train_eval", "--architecture", architecture,
                                             "--seed", str(seed), "--input", data, "--output",
                                             output] + extra, output)
    if result.code != 0:
        raise SystemExit(f"{architecture} failed:\n{result.err[-3000:]}")
    epochs = [float(seconds) for seconds in EPOCH.findall(result.err)]
    return {"f1": result.micro_f1(), "epochs": len(epochs), "first": epochs[0],
            "steady": statistics.median(epochs[1:]) if len(epochs) > 1 else float("nan"),
            "wall": result.wall, "rss": result.peak_rss_gb}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--architectures", default=None, help="default: every RNN architecture")
    args, extra = parser.parse_known_args()
    extra = [e for e in extra if e != "--"]
    names = args.architectures.split(",") if args.architectures else rnn_architectures()
    print(f"date, seed {args.seed}, char-only; times from a shared 2-core machine")
    print(f"{'architecture':26s} {'eval F1':>8s} {'epochs':>6s} {'first s':>8s} "
          f"{'steady s':>9s} {'wall s':>7s} {'RSS GB':>7s}")
    for name in names:
        r = run(name, args.seed, extra)
        print(f"{name:26s} {r['f1']:8.2f} {r['epochs']:6d} {r['first']:8.2f} {r['steady']:9.3f} "
              f"{r['wall']:7.1f} {r['rss']:7.2f}", flush=True)


if __name__ == "__main__":
    main()
