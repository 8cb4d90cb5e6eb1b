"""Host memory and epoch time of a `gru` classifier's training under TensorFlow's two host
allocators, with TensorFlow's own thread and kernel settings and with a sequence labeller's RNN's.

The task's seeded split and DeLFT 1.2.0's application settings (``benchmarks/classification.py``:
copyright, batch 256, texts of 300 words), trained ``--epochs`` epochs in a fresh process per
setting: TensorFlow's default host allocator (malloc; oneDNN's own with oneDNN's kernels) or its
BFC allocator (``TF_CPU_ALLOCATOR_USE_BFC=true``, what every CLI sets), each with TensorFlow's
threads and kernels (oneDNN, every core per op: the Python API's, and the classification apps')
and with the small-ops settings a sequence labeller's RNN runs with in the CLIs
(``devices.configure_cpu_ops(False)``: Eigen's kernels, one thread per op). Prints the
median epoch time after the first, the process's peak RSS, and the most tensor memory live at
once in the process (the BFC allocator's own count, so for BFC runs only).

    python benchmarks/host_allocator.py [--task copyright] [--epochs 3] [--repeats 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from delft12_classification import DEFAULT_CACHE, DEFAULT_DATA, defaults, make_split  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUN = r'''
import json, logging, re, resource, sys
split = json.load(open(sys.argv[1], encoding="utf-8"))
settings = json.load(open(sys.argv[2]))
if settings.pop("small_ops"):
    from delft.utilities import devices
    devices.configure_cpu_ops(False)
import tensorflow as tf
from delft.textClassification import Classifier

epochs = []


class EpochTimes(logging.Handler):
    def emit(self, record):
        found = re.match(r"epoch .* ([\d.]+)s$", record.getMessage())
        if found:
            epochs.append(float(found.group(1)))


logging.getLogger("delft.training.loop").addHandler(EpochTimes())
logging.getLogger("delft.training.loop").setLevel(logging.INFO)
weights = settings.pop("class_weights")
model = Classifier(split["task"] + "_gru", architecture="gru", list_classes=split["classes"],
                   class_weights={int(k): v for k, v in weights.items()} if weights else None,
                   **settings)
model.train(split["train"]["text"], split["train"]["label"],
            x_valid=split["valid"]["text"], y_valid=split["valid"]["label"])
try:
    tensor_peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
except ValueError:  # the default allocator may keep no count
    tensor_peak = 0
print(json.dumps({"epochs": epochs, "tensor_peak": tensor_peak,
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
'''


def run(split_path, settings, bfc, small_ops):
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2",
               TF_CPU_ALLOCATOR_USE_BFC="true" if bfc else "false")
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    env.pop("TF_NUM_INTRAOP_THREADS", None)
    with tempfile.TemporaryDirectory(prefix="delft-host-allocator-") as work:
        path = os.path.join(work, "settings.json")
        with open(path, "w") as stream:
            json.dump(dict(settings, small_ops=small_ops), stream)
        done = subprocess.run([sys.executable, "-c", RUN, split_path, path], env=env,
                              capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="copyright", choices=["copyright", "license",
                                                                "citations"])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    split_path, _ = make_split(args.task, args.seed, DEFAULT_DATA, DEFAULT_CACHE)
    settings = defaults(args.task, "gru")
    settings.update(max_epoch=args.epochs, seed=args.seed)
    print(f"gru on {args.task} (seed {args.seed}), batch {settings['batch_size']}, "
          f"{settings['maxlen']} words, {args.epochs} epochs; {args.repeats} fresh processes each")
    for small_ops in (False, True):
        for bfc in (False, True):
            results = [run(split_path, settings, bfc, small_ops) for _ in range(args.repeats)]
            epoch = statistics.median(e for r in results for e in r["epochs"][1:])
            rss = [r["peak_rss"] / 2 ** 30 for r in results]
            tensors = max(r["tensor_peak"] for r in results) / 2 ** 30
            print(f"{'small ops  ' if small_ops else 'TF defaults'}  "
                  f"{'BFC    ' if bfc else 'default'}  epoch {epoch:.2f} s  peak RSS "
                  f"{min(rss):.2f}-{max(rss):.2f} GiB"
                  + (f"  tensors at most {tensors:.2f} GiB" if bfc else ""), flush=True)


if __name__ == "__main__":
    main()
