"""The step of tagging and of training BidLSTM_CRF each way: on cuDNN's fused LSTM against the
portable BlockLSTM (a GPU), and with XLA's auto-clustering against without (any device).

    python benchmarks/kernels_and_xla.py [--sequences 20000] [--batch-size 1024]
        [--train-batch-size 60] [--ways xla|kernels] [--rounds 1]

One untrained date BidLSTM_CRF (dropout off) is copied into one model per way, the same weights;
each way traces its own steps inside its setting. Tagging: ``--sequences`` date sequences tagged
twice by ``Sequence.tag`` (the first call traces, and XLA compiles every shape it meets; the
second is the steady speed); training: one epoch of the date training file at
``--train-batch-size``, twice, the same batches. Printed per way: tokens/s of both tag calls and
sequences/s of both epochs; the largest difference of the word potentials from the first way's on
one padded batch, and whether the labels are the same.

``--ways kernels`` (a GPU): ``recurrent_kernels.portable_kernels`` gives the BlockLSTM way,
TensorFloat-32 off on both ways. ``--ways xla``: ``tf.config.optimizer.set_jit("autoclustering")``
(XLA compiles the parts of a step it can: not BlockLSTM, nor the characters' ``tf.unique``, so a
step cannot be ``jit_compile=True`` as a whole; a way that fails to compile ends the round, said
in one line); on a CPU this needs ``TF_XLA_FLAGS=--tf_xla_cpu_global_jit``, which this script
sets before TensorFlow starts. ``benchmarks/gpu_check.py`` runs the kernels way.
"""
import argparse
import contextlib
import os
import sys
import time

os.environ.setdefault("TF_XLA_FLAGS", "--tf_xla_cpu_global_jit")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))

import encoding_throughput  # noqa: E402
import tagging_stages  # noqa: E402


@contextlib.contextmanager
def autoclustering(enabled):
    import tensorflow as tf

    previous = tf.config.optimizer.get_jit()
    tf.config.optimizer.set_jit("autoclustering" if enabled else False)
    try:
        yield
    finally:
        tf.config.optimizer.set_jit(previous)


@contextlib.contextmanager
def float32_kernels(portable):
    """cuDNN's kernels, or the portable ones; TensorFloat-32 off either way (it rounds cuDNN's
    and the matmuls' inputs to a 10-bit mantissa)."""
    import tensorflow as tf

    from delft.sequenceLabelling.recurrent_kernels import portable_kernels

    enabled = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    try:
        with portable_kernels() if portable else contextlib.nullcontext():
            yield
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(enabled)


WAYS = {"kernels": {"cuDNN": lambda: float32_kernels(False),
                    "BlockLSTM": lambda: float32_kernels(True)},
        "xla": {"no XLA": lambda: autoclustering(False),
                "XLA auto-clustering": lambda: autoclustering(True)}}


def twins(x, y, strategy, count):
    """``count`` untrained date BidLSTM_CRF models with the same weights."""
    models = [tagging_stages.untrained("date", "BidLSTM_CRF", x, y, None, strategy)
              for _ in range(count)]
    for model in models[1:]:
        model.model.set_weights(models[0].model.get_weights())
    return models


def timed(run):
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


def measure(sequence, setting, texts, x, y, batch_size, train_batch_size):
    """``{measure: value}`` of one way: both tag calls and both epochs, its potentials, labels."""
    import numpy as np

    from delft.sequenceLabelling.trainer import Trainer

    import tensorflow as tf

    tokens, result = sum(map(len, texts)), {}
    encoded = sequence.p.encode(texts[:batch_size])
    batch = sequence.p.padded_batch(encoded, np.arange(encoded.num_rows))
    with setting():
        result["potentials"] = tf.function(sequence.model.word_potentials)(batch).numpy()
        result["lengths"] = batch["lengths"]
        for call in ("first", "second"):
            result["labels"], seconds = timed(lambda: sequence.tag(texts, None,
                                                                   batch_size=batch_size))
            result[f"tag {call} call tokens/s"] = tokens / seconds
        trainer = Trainer(sequence.model, sequence.p, sequence.training_config,
                          sequence._strategy, train_batch_size)
        trainer.build_optimizer(1)
        corpus, labels = sequence.p.encode(x), sequence.p.encode_labels(y)
        slices = [trainer.feeder.slices(corpus, rows, labels)
                  for rows in trainer.epoch_batches(corpus, np.random.default_rng(0))]
        for epoch in ("first", "second"):
            _, seconds = timed(lambda: [float(trainer._train_step(s)[0]) for s in slices])
            result[f"training {epoch} epoch sequences/s"] = len(x) / seconds
    return result


def compare(ways, x, y, texts, strategy, batch_size, train_batch_size):
    """``(way, {measure: value})`` of each way in turn, with its ``max potential difference``
    from the first way's potentials and whether its labels are the same (``same labels``)."""
    import numpy as np

    reference = None
    for sequence, (way, setting) in zip(twins(x, y, strategy, len(ways)), ways.items()):
        result = measure(sequence, setting, texts, x, y, batch_size, train_batch_size)
        reference = reference or dict(result)
        valid = np.arange(result["potentials"].shape[1])[None, :] < result["lengths"][:, None]
        result["max potential difference"] = float(np.abs(
            result.pop("potentials") - reference["potentials"])[valid].max())
        result["same labels"] = result.pop("labels") == reference["labels"]
        del result["lengths"]
        yield way, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=1024, help="tagging batch")
    parser.add_argument("--train-batch-size", type=int, default=60)
    parser.add_argument("--ways", choices=sorted(WAYS), default="xla")
    parser.add_argument("--rounds", type=int, default=1,
                        help="times every way is measured, in turn (a loaded host is noisy)")
    args = parser.parse_args()
    import tensorflow as tf

    from delft.utilities import devices

    x, y, _ = encoding_throughput.grobid_data("date")
    texts, = encoding_throughput.drawn(args.sequences, x)
    print(f"load average {os.getloadavg()[0]:.2f}; device {tagging_stages.step_device()}; "
          f"{len(texts):,} sequences ({sum(map(len, texts)):,} tokens) tagged at batch "
          f"{args.batch_size}; {len(x):,} training sequences at batch {args.train_batch_size}")
    for _ in range(args.rounds):
        ways = compare(WAYS[args.ways], x, y, texts, devices.get_strategy(False),
                       args.batch_size, args.train_batch_size)
        try:
            for way, result in ways:
                print(way)
                for name, value in result.items():
                    print(f"  {name:40s} {value:,.6g}" if isinstance(value, float) else
                          f"  {name:40s} {value}")
                sys.stdout.flush()
        except tf.errors.InvalidArgumentError as error:  # XLA could not compile a step
            lines = error.message.strip().splitlines()
            print("the next way failed: " + next(
                (line for line in lines if "compile" in line), lines[0]).strip())
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
