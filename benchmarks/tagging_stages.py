"""Where the time of tagging and of a training epoch goes: each stage timed apart, per 1,000 sequences.

    python benchmarks/tagging_stages.py [--sequences 20000] [--batch-size 1024] [--cases date,name-header]

For each case (date: BidLSTM_CRF, characters only; name-header: BidLSTM_CRF_FEATURES, with GROBID's
layout features; untrained models, as the stages' times do not depend on the weights), the steps
of ``Sequence.tag`` are run one after the other on the same ``--sequences`` sequences drawn from
the GROBID training file, each timed on its own:

- encoding: the input checks and ``Preprocessor.encode`` (tokens, characters, features to ids);
- bucketing and padding: ``Predictor.batches`` and the padded slices of every batch;
- host to device: the slices copied to the device the step runs on;
- compiled step: the step on those copies, waited for;
- device to host: its outputs copied back to numpy;
- stitching: labels put back in input order, decoded and split per sequence, as ``tag`` gives them;

then a training epoch the same way (encoding with labels; the epoch's random batches padded with
their labels; the train step; the loss read back). The stages run in turn here; ``tag`` pads the
next batches in a background thread while the step runs, so its wall time (printed too) is under
their sum. ``benchmarks/gpu_check.py`` prints the same table for date on the GPU.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))

import encoding_throughput  # noqa: E402

HOST_STAGES = ("encoding", "bucketing and padding", "stitching")
DEVICE_STAGES = ("host to device", "compiled step", "device to host")


def untrained(name, architecture, x, y, features, strategy):
    """A ``Sequence`` of ``architecture`` built on ``strategy`` with fitted vocabularies and
    initial weights, dropout off."""
    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.models import new_preprocessor

    sequence = Sequence(f"{name}-{architecture}", architecture=architecture, dropout=0.0,
                        recurrent_dropout=0.0)
    sequence.p = new_preprocessor(sequence.model_config)
    sequence.p.fit(x, y, features)
    sequence.model = sequence._build(strategy, sequence.p)
    sequence._strategy = strategy
    return sequence


class StageClock:
    """Seconds spent in each stage, summed over the calls of :meth:`timed`."""

    def __init__(self):
        self.seconds = {}

    def timed(self, stage, run, *args):
        start = time.perf_counter()
        result = run(*args)
        self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start
        return result


def step_device():
    import tensorflow as tf

    return "/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"


def to_device(parts):
    """Numpy slices as tensors on the step's device, the copy waited for.

    TensorFlow keeps int32 tensors of a GPU op in host memory (all but the word vectors and
    weights here): their copy, if any, happens inside the step and counts there."""
    import tensorflow as tf

    with tf.device(step_device()):
        tensors = tf.nest.map_structure(tf.identity, parts)
    tf.test.experimental.sync_devices()
    return tensors


def waited(step, tensors):
    """The step's outputs, computed (still on the device)."""
    import tensorflow as tf

    outputs = step(tensors)
    tf.test.experimental.sync_devices()
    return outputs


def tagging_stages(sequence, texts, features, batch_size):
    """``{stage: seconds}`` of tagging ``texts`` stage by stage, and tag's own wall time."""
    from delft.sequenceLabelling import inputs, output
    from delft.sequenceLabelling.tagger import Predictions
    from delft.training.prediction import serving_call

    predictor = sequence._predictor(sequence._strategy)
    clock = StageClock()

    def encode():
        inputs.check_texts(texts)
        inputs.check_features(features, texts)
        return sequence.p.encode(texts, features)

    sequence.tag(texts[:batch_size], features=features and features[:batch_size],
                 batch_size=batch_size)  # the step traced
    with serving_call():  # as in tag
        corpus = clock.timed("encoding", encode)
        batches = clock.timed("bucketing and padding", predictor.batches, corpus, batch_size)
        predictions = Predictions(corpus)
        for rows in batches:
            parts = clock.timed("bucketing and padding", predictor.feeder.slices, corpus, rows)
            tensors = clock.timed("host to device", to_device, parts)
            outputs = clock.timed("compiled step", waited, predictor._step, tensors)
            arrays = clock.timed("device to host", lambda: [value.numpy() for value in outputs])
            clock.timed("stitching", predictions.put, *arrays)
        clock.timed("stitching", lambda: output.token_label_pairs(predictions.tagged(
            sequence.p, [None] * len(texts), texts, None)))
    start = time.perf_counter()
    sequence.tag(texts, features=features, batch_size=batch_size)
    return clock.seconds, time.perf_counter() - start


def training_stages(sequence, x, y, features, batch_size):
    """``{stage: seconds}`` of one training epoch of ``x`` stage by stage (after a traced one)."""
    import numpy as np

    from delft.sequenceLabelling.trainer import Trainer

    trainer = Trainer(sequence.model, sequence.p, sequence.training_config, sequence._strategy,
                      batch_size)
    trainer.build_optimizer(1)
    clock = StageClock()
    corpus, labels = clock.timed("encoding", lambda: (
        sequence.p.encode(x, features, window_size=sequence.model_config.max_sequence_length),
        sequence.p.encode_labels(y)))
    batches = clock.timed("bucketing and padding", trainer.epoch_batches, corpus,
                          np.random.default_rng(0))
    trainer._train_step(to_device(trainer.feeder.slices(corpus, batches[0], labels)))  # traced
    for rows in batches:
        parts = clock.timed("bucketing and padding", trainer.feeder.slices, corpus, rows, labels)
        tensors = clock.timed("host to device", to_device, parts)
        outputs = clock.timed("compiled step", waited, trainer._train_step, tensors)
        clock.timed("device to host", lambda: [float(value) for value in outputs])
    return clock.seconds


def stage_rows(seconds, sequences):
    """``(stage, milliseconds per 1,000 sequences, share of the stages' sum)`` per stage, and
    a last row: the host stages together."""
    total = sum(seconds.values())
    per_thousand = 1000.0 * 1000.0 / sequences
    rows = [(stage, seconds[stage] * per_thousand, seconds[stage] / total)
            for stage in HOST_STAGES[:2] + DEVICE_STAGES + HOST_STAGES[2:] if stage in seconds]
    host = sum(seconds.get(stage, 0.0) for stage in HOST_STAGES)
    return rows + [("host stages together", host * per_thousand, host / total)]


def print_stages(title, seconds, sequences, tokens):
    print(f"{title}: {sequences:,} sequences, {tokens:,} tokens, stages "
          f"{sum(seconds.values()):.2f} s in all ({tokens / sum(seconds.values()):,.0f} tokens/s)")
    for stage, milliseconds, share in stage_rows(seconds, sequences):
        print(f"  {stage:24s} {milliseconds:9.2f} ms / 1,000 sequences  {share:6.1%}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=1024, help="tagging batch")
    parser.add_argument("--train-batch-size", type=int, default=60)
    parser.add_argument("--cases", default=",".join(encoding_throughput.CASES))
    args = parser.parse_args()
    from delft.utilities import devices

    strategy = devices.get_strategy(False)
    print(f"load average {os.getloadavg()[0]:.2f}; device {step_device()}")
    for name in args.cases.split(","):
        architecture = encoding_throughput.CASES[name][1]
        x, y, f = encoding_throughput.grobid_data(name)
        sequence = untrained(name, architecture, x, y, f, strategy)
        texts, features = encoding_throughput.drawn(args.sequences, x, f)
        tokens = sum(map(len, texts))
        seconds, wall = tagging_stages(sequence, texts, features, args.batch_size)
        print_stages(f"{name} {architecture} tagging, batch {args.batch_size}", seconds,
                     len(texts), tokens)
        print(f"  Sequence.tag wall time {wall:.2f} s ({tokens / wall:,.0f} tokens/s)")
        seconds = training_stages(sequence, x, y, f, args.train_batch_size)
        print_stages(f"{name} {architecture} training epoch, batch {args.train_batch_size}",
                     seconds, len(x), sum(map(len, x)))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
