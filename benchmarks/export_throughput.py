"""Throughput of the exported date model against ``Sequence.tag``, on the same real date sequences.

    python benchmarks/export_throughput.py [--model-dir DIR] [--sequences 5000]

Trains a quick BidLSTM_CRF on the GROBID date data when no --model-dir (a saved model folder) is
given, exports the ONNX bundle and the SavedModel into a temporary folder, then prints tokens/s of:

- ``Sequence.tag`` (strings in, labels out) at batch 256;
- the SavedModel's serving signature at batch 256 (ids in, label ids out, Viterbi in the graph);
  these two timed in alternation, ``--rounds`` times each (their best and median, and the ratio of
  the medians): timed one after the other, two runs of the script gave ratios of 0.66 and 0.93;
- ONNX Runtime on ``encoder.onnx`` at batch 1, each call padded to maxSequenceLength as GROBID's
  Java makes it (with ONNX Runtime's default threads, and with one thread as GROBID's newer engine
  sets it), and at batch 256; emissions only: GROBID decodes the CRF in Java;

and the artefact sizes. Id preparation (Python here, Java in GROBID) is outside the ONNX and
SavedModel timings.
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import delft  # noqa: E402,F401
from delft.sequenceLabelling import Sequence  # noqa: E402
from delft.export import export_model, load_model_dir  # noqa: E402
from delft.sequenceLabelling.reader import load_data_and_labels_crf_file  # noqa: E402
from delft.utilities.data_path import shared_data_file  # noqa: E402

BATCH = 256


def folder_size(path):
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def best_time(run, repeats):
    run()  # warm-up (tracing, session start)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def alternated(first, second, rounds):
    """Seconds of ``rounds`` calls of each, alternating (after one warm-up call of each), so
    that both meet the same host conditions."""
    first(), second()
    times = ([], [])
    for _ in range(rounds):
        for run, spent in zip((first, second), times):
            start = time.perf_counter()
            run()
            spent.append(time.perf_counter() - start)
    return times


def java_char_ids(tokens, vocab, steps):
    """``char_input`` as GROBID's ``Preprocessor.tokensToCharIndices`` fills it."""
    chars, unk, width = vocab["charVocab"], vocab["charVocab"].get("<UNK>", 1), vocab["maxCharLength"]
    out = np.zeros((steps, width), np.int64)
    for i, token in enumerate(tokens[:steps]):
        ids = [chars.get(c, unk) for c in token[:width]]
        out[i, :len(ids)] = ids
    return out


def trained_model(args, x, y, workdir):
    if args.model_dir:
        return args.model_dir
    model = Sequence("grobid-date-BidLSTM_CRF", max_epoch=3, batch_size=60,
                     recurrent_dropout=0.0, seed=1, max_sequence_length=50)
    model.train(x, y)
    return model.save(workdir)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", default=None, help="a saved model folder")
    parser.add_argument("--sequences", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=2, help="ONNX Runtime: best of")
    parser.add_argument("--rounds", type=int, default=7,
                        help="Sequence.tag and the SavedModel: alternated rounds")
    args = parser.parse_args()
    import json

    import onnxruntime as ort
    import tensorflow as tf

    x, y, _ = load_data_and_labels_crf_file(
        str(shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")))
    workdir = tempfile.mkdtemp(prefix="export-bench-")
    model_dir = trained_model(args, x, y, workdir)
    bundle = export_model(model_dir, os.path.join(workdir, "bundle.onnx"), "onnx")
    saved = os.path.dirname(export_model(model_dir, os.path.join(workdir, "saved"), "savedmodel"))
    sequence = load_model_dir(model_dir)
    rng = np.random.default_rng(0)
    texts = [list(x[i]) for i in rng.integers(0, len(x), args.sequences)]
    tokens = sum(map(len, texts))
    print(f"{len(texts)} date sequences, {tokens} tokens")

    def report(name, seconds):
        print(f"{name:<52} {tokens / seconds:>10,.0f} tokens/s")

    signature = tf.saved_model.load(os.path.join(saved, "1")).signatures["serving_default"]
    corpus = sequence.p.encode(texts)
    order = np.argsort([len(t) for t in texts], kind="stable")  # as Sequence.tag batches
    batches = [{k: tf.constant(v) for k, v in sequence.p.padded_batch(
        corpus, order[i:i + BATCH]).items()} for i in range(0, len(texts), BATCH)]
    tag_times, signature_times = alternated(
        lambda: sequence.tag(texts, batch_size=BATCH),
        lambda: [[v.numpy() for v in signature(**b).values()] for b in batches], args.rounds)
    for name, times in ((f"Sequence.tag, batch {BATCH}", tag_times),
                        (f"SavedModel signature, batch {BATCH} (Viterbi inside)", signature_times)):
        print(f"{name:<52} {tokens / min(times):>10,.0f} tokens/s best, "
              f"{tokens / np.median(times):>10,.0f} median of {len(times)}")
    print(f"Sequence.tag / SavedModel signature, medians: "
          f"{np.median(signature_times) / np.median(tag_times):.2f}")

    config = json.load(open(os.path.join(bundle, "config.json")))
    vocab = json.load(open(os.path.join(bundle, "vocab.json")))
    steps, width = config["maxSequenceLength"], config["wordEmbeddingSize"]
    chars = np.stack([java_char_ids(t, vocab, steps) for t in texts])
    words = np.zeros((1, steps, width), np.float32)
    encoder = os.path.join(bundle, "encoder.onnx")
    for threads in (0, 1):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        session = ort.InferenceSession(encoder, options)
        label = "default threads" if threads == 0 else "1 thread"
        report(f"ONNX Runtime, batch 1 padded to {steps} ({label})", best_time(
            lambda: [session.run(["emissions"], {"word_input": words, "char_input": c[None]})
                     for c in chars], args.repeats))
    session = ort.InferenceSession(encoder)
    batch_words = np.zeros((BATCH, steps, width), np.float32)
    ordered = chars[order]
    report(f"ONNX Runtime, batch {BATCH} padded to {steps}", best_time(
        lambda: [session.run(["emissions"], {"word_input": batch_words[:len(c)], "char_input": c})
                 for c in (ordered[i:i + BATCH] for i in range(0, len(texts), BATCH))],
        args.repeats))

    print("sizes: model.weights.h5 {:,} B, encoder.onnx {:,} B, ONNX bundle {:,} B, "
          "SavedModel folder {:,} B".format(
              os.path.getsize(os.path.join(model_dir, "model.weights.h5")),
              os.path.getsize(encoder), folder_size(bundle), folder_size(saved)))


if __name__ == "__main__":
    main()
