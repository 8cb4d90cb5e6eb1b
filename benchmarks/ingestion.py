"""The input pipeline alone against one device's train step, for BidLSTM_CRF and BERT_CRF batches.

    python benchmarks/ingestion.py [--epochs 5] [--transformer all-MiniLM-L6-v2]

Several GPUs consume batches many times faster than this CPU, so the padding must never be what
they wait on. For each family this prints, on the real date data at its GROBID batch size: the
rows/s and tokens/s the pipeline produces (ReplicaFeeder slices through the background thread,
consumed by a no-op), the rows/s of one device's compiled train step on the same batches, and the
ratio (goal: the pipeline >= 10x the BidLSTM_CRF train step). A third row does the same with
300-d word embeddings (a generated vectors file: the corpus's words and ``--extra-words`` others,
cached in LMDB as DeLFT's), to show the lookup does not starve training.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pipeline_rate(feeder, corpus, labels, batch_size, epochs):
    """Rows and tokens per second of padded slices, the step replaced by nothing."""
    from delft.sequenceLabelling.batching import length_bucketed_batches, prefetched

    rng = np.random.default_rng(0)
    rows = tokens = 0
    start = time.perf_counter()
    for _ in range(epochs):
        batches = length_bucketed_batches(corpus.row_width, batch_size, rng)
        for parts in prefetched(feeder.slices(corpus, b, labels) for b in batches):
            rows += sum(len(p["lengths"]) for p in parts)
            tokens += sum(int(p["lengths"].sum()) for p in parts)
    seconds = time.perf_counter() - start
    return rows / seconds, tokens / seconds


def step_rate(trainer, corpus, labels, epochs):
    """Rows per second of the compiled train step (one device), after its first (traced) epoch."""
    from delft.training.checkpoints import TrainingProgress, run_directly
    from delft.sequenceLabelling.trainer import EarlyStopping

    progress = TrainingProgress(np.random.default_rng(0), EarlyStopping(), {})
    for epoch in range(epochs + 1):  # epoch 0 traces the step
        if epoch == 1:
            start = time.perf_counter()
        trainer._run_epoch(corpus, labels, progress, epoch, 0, run_directly)
        progress.end_epoch(epoch, stopped_early=False)
    return epochs * corpus.num_rows / (time.perf_counter() - start)


def measure(name, architecture, batch_size, x, y, epochs, **kwargs):
    from delft.sequenceLabelling import Sequence, models
    from delft.sequenceLabelling.batching import ReplicaFeeder
    from delft.sequenceLabelling.trainer import Trainer
    from delft.utilities import devices

    sequence = Sequence(name, architecture=architecture, batch_size=batch_size,
                        max_epoch=1, **kwargs)
    sequence.p = models.new_preprocessor(sequence.model_config)
    sequence.p.fit(x, y)
    sequence._open_embeddings()
    strategy = devices.get_strategy(False)
    sequence.model = sequence._build(strategy, sequence.p)
    start = time.perf_counter()
    corpus = sequence.p.encode(x, window_size=None if sequence.uses_transformer else
                               sequence.model_config.max_sequence_length)
    encoding = time.perf_counter() - start
    labels = sequence.p.encode_labels(y)
    rows, tokens = pipeline_rate(ReplicaFeeder(strategy, sequence.p), corpus, labels, batch_size,
                                 epochs)
    trainer = Trainer(sequence.model, sequence.p, sequence.training_config, strategy,
                      batch_size, uses_transformer=sequence.uses_transformer)
    trainer.build_optimizer(1)
    step = step_rate(trainer, corpus, labels, max(1, epochs // 5))
    print(f"{name:22s} batch {batch_size:3d}: pipeline {rows:9.0f} rows/s "
          f"{tokens:10.0f} tokens/s | train step {step:7.0f} rows/s | pipeline / step "
          f"{rows / step:6.1f}x | encoding the corpus {encoding:.2f} s", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--transformer", default="all-MiniLM-L6-v2")
    parser.add_argument("--extra-words", type=int, default=20000)
    args = parser.parse_args()
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
    from delft.utilities.data_path import shared_data_file

    x, y, _ = load_data_and_labels_crf_file(
        str(shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")))
    x, y = list(x), list(y)
    measure("date-BidLSTM_CRF", "BidLSTM_CRF", 60, x, y, args.epochs, max_sequence_length=50,
            recurrent_dropout=0.0)
    with tempfile.TemporaryDirectory() as folder:
        os.environ["DELFT_RESOURCE_REGISTRY"] = write_vectors(folder, x, args.extra_words)
        measure("date-BidLSTM_CRF+300d", "BidLSTM_CRF", 60, x, y, args.epochs,
                max_sequence_length=50, recurrent_dropout=0.0, embeddings_name="bench-vectors")
    measure("date-BERT_CRF", "BERT_CRF", 80, x, y, args.epochs, max_sequence_length=30,
            transformer_name=args.transformer)


def write_vectors(folder, x, extra_words, dimension=300):
    """A vectors file of the corpus words and ``extra_words`` others, and a registry naming it."""
    rng = np.random.default_rng(0)
    words = sorted({t for seq in x for t in seq}) + [f"w{i}" for i in range(extra_words)]
    path = os.path.join(folder, "vectors.vec")
    with open(path, "w", encoding="utf-8") as out:
        out.write(f"{len(words)} {dimension}\n")
        for word in words:
            out.write(word + " " + " ".join(f"{v:.3f}" for v in rng.normal(size=dimension)) + "\n")
    registry = os.path.join(folder, "registry.json")
    with open(registry, "w") as out:
        json.dump({"embedding-lmdb-path": os.path.join(folder, "db"), "embeddings": [
            {"name": "bench-vectors", "path": path, "format": "vec", "lang": "en"}]}, out)
    return registry


if __name__ == "__main__":
    main()
