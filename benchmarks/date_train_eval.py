"""`grobidTagger.py date train_eval` on the real date data, seeds 1-3, ours and DeLFT 1.2.0's.

    python benchmarks/date_train_eval.py [--seeds 1,2,3] [--multi-gpu] [--ours-only] [-- options]
    python benchmarks/date_train_eval.py --model name-citation   # another GROBID model's data
    DELFT12_PYTHON=/path/to/delft12/bin/python python benchmarks/date_train_eval.py
    python benchmarks/date_train_eval.py --architecture BERT_CRF --transformer all-MiniLM-L6-v2 \
        --max-epoch 10       # the transformer recipe, both toolkits on the same local checkpoint

Each run is a fresh process (what a user runs), ours and DeLFT 1.2.0's alternating in the same
benchmark run. Prints per seed: eval micro F1, epochs, first-epoch and median steady epoch time
(validation included), whole-process wall time and peak RSS; then the means, the F1 spread and the
wall-time ratio. With --multi-gpu our runs use DELFT_CPU_REPLICAS=2 logical CPU replicas.
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402

EPOCH = re.compile(r"^epoch\s+\d+/\d+ .* ([\d.]+)s$")


sys.path.insert(0, peers.REPO)


def data_file(model):
    """The one training file of ``model`` among the shared GROBID data."""
    from delft.utilities.data_path import shared_data_file

    files = sorted(shared_data_file("sequenceLabelling", "grobid", model).glob("*.train"))
    if len(files) != 1:
        raise SystemExit(f"no single .train file for {model} in the shared data: {files}")
    return str(files[0])


def shared_options(args):
    """The options both toolkits get: architecture, transformer (as a local folder), epochs."""
    options = ["--architecture", args.architecture]
    if args.transformer:
        from delft.sequenceLabelling.transformers.checkpoint import resolve_transformer

        options += ["--transformer", resolve_transformer(args.transformer)]
    if args.max_epoch:
        options += ["--max-epoch", str(args.max_epoch)]
    return options


def run_ours(model, data, seed, multi_gpu, extra):
    with tempfile.TemporaryDirectory() as output:
        args = [model, "train_eval", "--input", data, "--output", output,
                "--seed", str(seed)] + (["--multi-gpu"] if multi_gpu else []) + extra
        result = peers.ours("grobidTagger", args, output, replicas=2 if multi_gpu else None)
    if result.code != 0:
        raise SystemExit(f"seed {seed} failed:\n{result.err[-3000:]}")
    epochs = [float(m.group(1)) for m in map(EPOCH.match, result.err.splitlines()) if m]
    return {"f1": result.micro_f1(), "epochs": len(epochs), "first": epochs[0],
            "steady": statistics.median(epochs[1:]), "wall": result.wall,
            "rss": result.peak_rss_gb}


def run_delft12(model, data, seed, options):
    with tempfile.TemporaryDirectory() as output:
        result = peers.delft12("grobidTagger", [
            model, "train_eval", "--input", data, "--output", output,
            "--seed", str(seed)] + options, output)
    if result.code != 0:
        raise SystemExit(f"DeLFT 1.2.0, seed {seed} failed:\n{result.err[-3000:]}")
    return {"f1": result.micro_f1(), "wall": result.wall, "rss": result.peak_rss_gb}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="date", help="a GROBID model of the shared data")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--multi-gpu", action="store_true")
    parser.add_argument("--ours-only", action="store_true")
    parser.add_argument("--architecture", default="BidLSTM_CRF")
    parser.add_argument("--transformer", default=None)
    parser.add_argument("--max-epoch", type=int, default=None)
    args, extra = parser.parse_known_args()
    options = shared_options(args)
    extra = options + [e for e in extra if e != "--"]
    data = data_file(args.model)
    with_peer = peers.delft12_available() and not args.ours_only
    ours, theirs = [], []
    for seed in map(int, args.seeds.split(",")):
        result = run_ours(args.model, data, seed, args.multi_gpu, extra)
        ours.append(result)
        print(f"seed {seed} ours:  eval micro F1 {result['f1']:.2f}  epochs {result['epochs']}  "
              f"first epoch {result['first']:.2f} s  steady epoch {result['steady']:.3f} s  "
              f"wall {result['wall']:.1f} s  peak RSS {result['rss']:.2f} GB", flush=True)
        if with_peer:
            result = run_delft12(args.model, data, seed, options)
            theirs.append(result)
            print(f"seed {seed} DeLFT 1.2.0: eval micro F1 {result['f1']:.2f}  "
                  f"wall {result['wall']:.1f} s  peak RSS {result['rss']:.2f} GB", flush=True)
    for name, results in (("ours", ours), ("DeLFT 1.2.0", theirs)):
        if results:
            f1s = [r["f1"] for r in results]
            print(f"{name}: mean eval F1 {statistics.mean(f1s):.2f}  spread "
                  f"{max(f1s) - min(f1s):.2f}  total wall {sum(r['wall'] for r in results):.1f} s")
    if theirs:
        ratio = sum(r["wall"] for r in ours) / sum(r["wall"] for r in theirs)
        print(f"wall-time ratio ours / DeLFT 1.2.0: {ratio:.2f}x "
              f"({'2 logical CPU replicas' if args.multi_gpu else '1 device'})")


if __name__ == "__main__":
    main()
