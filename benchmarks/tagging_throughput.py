"""Tagging throughput and memory of BidLSTM_CRF on 50,000 real date sequences, ours and DeLFT 1.2.0's.

    python benchmarks/tagging_throughput.py [--batch-sizes 60,256,1024] [--repeats 10]
    DELFT_CPU_REPLICAS=2 python benchmarks/tagging_throughput.py --replicas   # 1 vs 2 replicas
    DELFT12_PYTHON=/path/to/delft12/bin/python python benchmarks/tagging_throughput.py

A model is trained for 3 epochs (ours and, when DELFT12_PYTHON is set, DeLFT's) by their CLIs and
saved; each is then loaded in a fresh process per batch size that tags, so the peak RSS is that of
a process tagging at that batch size (as GROBID's), not of one that trained. Per batch size:
tokens/s as min / median / max of ``--repeats`` identical calls, their spread (the p90 / median
and max / min of the call times), the peak RSS, and the
ratio of our best batch to DeLFT's best. With --replicas, the 2-replica / 1-device time ratio of
the medians.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import textwrap

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402

# the tagging side, run by each toolkit's interpreter: prints one JSON line per batch size
TAGGER = textwrap.dedent("""
    import json, resource, sys, time
    import numpy as np
    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
    models, data, sizes, repeats, count, modes = sys.argv[1:7]
    model = Sequence("date-BidLSTM_CRF")
    model.load(dir_path=models)
    x, _, _ = load_data_and_labels_crf_file(data)
    rng = np.random.default_rng(0)
    texts = [list(x[i]) for i in rng.integers(0, len(x), int(count))]
    tokens = sum(len(t) for t in texts)
    for multi_gpu in map(int, modes.split(",")):
        for batch_size in map(int, sizes.split(",")):
            options = {"multi_gpu": True} if multi_gpu else {}
            model.tag(texts[:2000], None, batch_size=batch_size, **options)  # warm-up (tracing)
            seconds = []
            for _ in range(int(repeats)):
                start = time.perf_counter()
                result = model.tag(texts, None, batch_size=batch_size, **options)
                seconds.append(time.perf_counter() - start)
            assert sum(len(r) for r in result) == tokens
            print(json.dumps({"batch": batch_size, "replicas": 2 if multi_gpu else 1,
                              "tokens": tokens, "seconds": seconds,
                              "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                              / 1024 ** 2}), flush=True)
""")


def train(toolkit, data, folder):
    models = os.path.join(folder, f"models-{toolkit}")
    peers.grobid_train(toolkit, "date", "BidLSTM_CRF", data, models, folder,
                       ["--max-epoch", "3", "--seed", "1"])
    return models


def tag(toolkit, models, data, folder, args, modes):
    """One fresh process per batch size and mode: each peak RSS is that batch size's alone."""
    rows = []
    for mode in modes.split(","):
        for batch_size in args.batch_sizes.split(","):
            result = peers.script(toolkit, TAGGER, [models, data, batch_size, str(args.repeats),
                                                    str(args.sequences), mode], folder)
            if result.code != 0:
                raise SystemExit(f"{toolkit} tagging failed:\n{result.err[-3000:]}")
            rows += [json.loads(line) for line in result.out.splitlines()
                     if line.startswith("{")]
    return rows


def report(toolkit, rows):
    best = 0.0
    for row in rows:
        speeds = sorted(row["tokens"] / s for s in row["seconds"])
        best = max(best, speeds[-1])
        p90 = float(np.percentile(row["seconds"], 90)) / statistics.median(row["seconds"])
        print(f"{toolkit:12s} batch {row['batch']:5d} {row['replicas']} replica(s): tokens/s "
              f"min {speeds[0]:8.0f}  median {statistics.median(speeds):8.0f}  max "
              f"{speeds[-1]:8.0f}  (time p90/median {p90:.2f}, max/min {speeds[-1] / speeds[0]:.2f})"
              f"  peak RSS {row['peak_rss_gb']:.2f} GB", flush=True)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", default=None, help="a folder holding date-BidLSTM_CRF/")
    parser.add_argument("--sequences", type=int, default=50000)
    parser.add_argument("--batch-sizes", default="60,256,1024")
    parser.add_argument("--replicas", action="store_true", help="also time multi_gpu=True")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--ours-only", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, peers.REPO)
    from delft.utilities.data_path import shared_data_file

    data = str(shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train"))
    with tempfile.TemporaryDirectory() as folder:
        models = args.model_dir or train("ours", data, folder)
        rows = tag("ours", models, data, folder, args, "0,1" if args.replicas else "0")
        ours = report("ours", rows)
        if args.replicas:
            for batch in sorted({r["batch"] for r in rows}):
                one, two = (statistics.median(r["seconds"]) for r in rows if r["batch"] == batch)
                print(f"batch {batch}: 2 replicas / 1 device, median time ratio {two / one:.2f}x")
        if peers.delft12_available() and not args.ours_only:
            theirs = report("DeLFT 1.2.0", tag("DeLFT 1.2.0", train("DeLFT 1.2.0", data, folder),
                                               data, folder, args, "0"))
            print(f"best tokens/s, ours / DeLFT 1.2.0: {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
