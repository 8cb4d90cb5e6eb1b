"""Tokens/s of the host side of tagging, on one CPU core: encoding, then bucketing and padding.

    python benchmarks/encoding_throughput.py [--sequences 50000] [--batch-size 1024] [--repeats 5]

For date (BidLSTM_CRF: characters only) and name-header (BidLSTM_CRF_FEATURES: characters and
GROBID's layout feature columns), ``--sequences`` sequences drawn from the GROBID training file
(read through ``delft.utilities.data_path``) are encoded by a preprocessor fitted on that file
(``Preprocessor.encode``: tokens to ids, characters to ids, features to ids), then cut into
length-sorted batches padded as tagging pads them (``ReplicaFeeder.slices``). Best of
``--repeats`` of each, TensorFlow's threads limited to one (nothing here runs a model). Goal
(issue 31): encoding >= 1,000,000 tokens/s on both.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# the data of each case: GROBID model, training file, architecture
CASES = {"date": ("date-220311.train", "BidLSTM_CRF"),
         "name-header": ("name-header-251225.train", "BidLSTM_CRF_FEATURES")}


def grobid_data(name):
    """``(x, y, f)`` of a GROBID training file, as lists (``f`` None when the model reads none)."""
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
    from delft.utilities.data_path import shared_data_file

    x, y, f = load_data_and_labels_crf_file(
        str(shared_data_file("sequenceLabelling", "grobid", name, CASES[name][0])))
    features = [[list(row) for row in seq] for seq in f] if "FEATURES" in CASES[name][1] else None
    return [list(s) for s in x], [list(s) for s in y], features


def drawn(count, *columns, seed=0):
    """``count`` sequences drawn at random (with replacement) from aligned ``columns``."""
    picked = np.random.default_rng(seed).integers(0, len(columns[0]), count)
    return [None if c is None else [c[i] for i in picked] for c in columns]


def fitted_preprocessor(name, x, y, f):
    from delft.sequenceLabelling.config import ModelConfig
    from delft.sequenceLabelling.models import new_preprocessor

    preprocessor = new_preprocessor(ModelConfig(f"{name}-{CASES[name][1]}",
                                                architecture=CASES[name][1]))
    preprocessor.fit(x, y, f)
    return preprocessor


def best_seconds(run, repeats):
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=50000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from delft.training.batching import ReplicaFeeder, length_bucketed_batches
    from delft.utilities import devices

    strategy = devices.get_strategy(False)
    print(f"load average {os.getloadavg()[0]:.2f}; {args.sequences:,} sequences per case, "
          f"batch {args.batch_size}, best of {args.repeats}")
    for name in CASES:
        x, y, f = grobid_data(name)
        preprocessor = fitted_preprocessor(name, x, y, f)
        texts, features = drawn(args.sequences, x, f)
        tokens = sum(map(len, texts))
        encoding, corpus = best_seconds(lambda: preprocessor.encode(texts, features),
                                        args.repeats)
        feeder = ReplicaFeeder(strategy, preprocessor)
        padding, _ = best_seconds(lambda: [feeder.slices(corpus, rows) for rows in
                                           length_bucketed_batches(corpus.row_width,
                                                                   args.batch_size)],
                                  args.repeats)
        print(f"{name:12s} {CASES[name][1]:21s} {tokens:9,d} tokens: encoding "
              f"{tokens / encoding:12,.0f} tokens/s | bucketing and padding "
              f"{tokens / padding:12,.0f} tokens/s | both {tokens / (encoding + padding):12,.0f} "
              "tokens/s", flush=True)


if __name__ == "__main__":
    main()
