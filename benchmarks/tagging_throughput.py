"""Tagging throughput of BidLSTM_CRF on 50,000 real date sequences, as compat.md measures DeLFT.

    python benchmarks/tagging_throughput.py [--model-dir DIR] [--batch-sizes 60,256,1024]
    DELFT_CPU_REPLICAS=2 python benchmarks/tagging_throughput.py --replicas   # 1 vs 2 replicas

Trains a quick model on the date data when no --model-dir is given (weights do not change the
speed). Prints tokens/s per batch size, peak RSS, and with --replicas the 2-replica / 1-device ratio
measured in the same process.
"""
import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import delft  # noqa: E402,F401
from delft.sequenceLabelling import Sequence  # noqa: E402
from delft.sequenceLabelling.reader import load_data_and_labels_crf_file  # noqa: E402
from delft.utilities.data_path import shared_data_file  # noqa: E402


def peak_rss_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", default=None)
    parser.add_argument("--sequences", type=int, default=50000)
    parser.add_argument("--batch-sizes", default="60,256,1024")
    parser.add_argument("--replicas", action="store_true", help="also time multi_gpu=True")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    x, y, _ = load_data_and_labels_crf_file(
        str(shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")))
    if args.model_dir:
        model = Sequence("grobid-date-BidLSTM_CRF")
        model.load(args.model_dir)
    else:
        model = Sequence("grobid-date-BidLSTM_CRF", max_epoch=3, batch_size=60,
                         recurrent_dropout=0.0, seed=1)
        model.train(x, y)
    rng = np.random.default_rng(0)
    texts = [list(x[i]) for i in rng.integers(0, len(x), args.sequences)]
    tokens = sum(len(t) for t in texts)
    print(f"{len(texts)} sequences, {tokens} tokens")
    modes = [False, True] if args.replicas else [False]
    for batch_size in map(int, args.batch_sizes.split(",")):
        speeds = {}
        for multi_gpu in modes:
            model.tag(texts[:2000], None, batch_size=batch_size, multi_gpu=multi_gpu)  # warm-up
            best = float("inf")
            for _ in range(args.repeats):
                start = time.perf_counter()
                result = model.tag(texts, None, batch_size=batch_size, multi_gpu=multi_gpu)
                best = min(best, time.perf_counter() - start)
            assert sum(len(r) for r in result) == tokens
            speeds[multi_gpu] = tokens / best
            label = "2 replicas" if multi_gpu else "1 device"
            print(f"batch {batch_size:5d} {label:10s}: {tokens / best:9.0f} tokens/s "
                  f"({best:.2f} s)  peak RSS {peak_rss_gb():.2f} GB", flush=True)
        if args.replicas:
            print(f"batch {batch_size:5d} slowdown 2 replicas vs 1 device: "
                  f"{speeds[False] / speeds[True]:.2f}x")


if __name__ == "__main__":
    main()
