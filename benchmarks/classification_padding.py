"""What padding transformer rows per batch saves: the `bert` classifier trained and run on the same
texts with its rows padded per length group (what ``Classifier`` does) and padded to ``maxlen``
(what it did before, and both DeLFTs do), each in a fresh process, in turn.

    python benchmarks/classification_padding.py --transformer CHECKPOINT_DIR
    python benchmarks/classification_padding.py --transformer DIR --texts 1280 --repeats 2

The texts are the first ``--texts`` training texts of the citations split of seed 1 (made and cached
by ``benchmarks/delft12_classification.py``'s ``make_split``), the settings the benchmark's
(``maxlen`` 150, batch 32, AdamW 2e-5), one epoch, with the CPU settings citationClassifier sets.
Printed per run: training wall and CPU seconds (the first step's tracing included), the steps per
second after the first, the wall seconds of a prediction of the same texts (its second call: the
first traces), the peak RSS of the process, and the mean absolute difference of the two runs'
probabilities after training (the same steps in another float32 summation order).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from delft12_classification import DEFAULT_CACHE, DEFAULT_DATA, make_split  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUN = r'''
import json, resource, sys, time
import numpy as np
from delft.applications.toolkits import TEXT_CLASSIFICATION
# as citationClassifier trains bert
TEXT_CLASSIFICATION.start_tensorflow("bert", TEXT_CLASSIFICATION.architecture("bert").length_groups)
import keras
from delft.textClassification import Classifier
from delft.textClassification.trainer import ClassifierTrainer
split_path, transformer, count, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
split = json.load(open(split_path, encoding="utf-8"))
texts, labels, classes = split["train"]["text"][:count], split["train"]["label"][:count], split["classes"]
model = Classifier("citations_bert", architecture="bert", list_classes=classes, maxlen=150,
                   batch_size=32, max_epoch=1, early_stop=False, learning_rate=2e-5, seed=1,
                   transformer_name=transformer)
keras.utils.set_random_seed(1)
model._new_preprocessor(texts)
strategy = model._use_strategy(False)
model.model = model._build(strategy, model.p, model._transformer_dir)
corpus = model.p.encode(texts)
if rows == "maxlen":  # every row as wide as maxlen: the batches before
    corpus.row_length[:] = model.p.maxlen
one_hot = np.eye(len(classes), dtype=np.float32)[[classes.index(label) for label in labels]]
trainer = ClassifierTrainer(model.model, model.p, model.training_config, strategy, 32, "bert", True)
step_ends, compiled_step = [], trainer._train_step
def timed_step(*args):
    result = compiled_step(*args)
    step_ends.append(time.perf_counter())
    return result
trainer._train_step = timed_step
wall, cpu = time.perf_counter(), time.process_time()
trainer.train(corpus, model.p.label_rows(one_hot))
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
trainer.predictor.predict(corpus, 32)
start = time.perf_counter()
probabilities = trainer.predictor.predict(corpus, 32)
predict_s = time.perf_counter() - start
np.save(sys.argv[5], probabilities)
print(json.dumps(dict(rows=rows, train_s=wall, train_cpu_s=cpu,
                      steps_per_s=(len(step_ends) - 1) / (step_ends[-1] - step_ends[0]),
                      predict_s=predict_s, cells=int(corpus.row_length.sum()),
                      rss_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2)))
'''


def run(split_path, transformer, texts, rows, probabilities_path):
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", RUN, split_path, transformer, str(texts), rows,
                           probabilities_path], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the {rows} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transformer", required=True, help="a BERT checkpoint folder (MiniLM)")
    parser.add_argument("--texts", type=int, default=640)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    args = parser.parse_args()
    split_path, _ = make_split("citations", 1, args.data, args.cache)
    work = tempfile.mkdtemp(prefix="delft-padding-")
    print("| rows padded | train s | train CPU s | steps/s after the first | predict s | "
          "peak RSS GiB |")
    print("|---|---|---|---|---|---|")
    for repeat in range(args.repeats):
        for rows in ("maxlen", "per group"):
            result = run(split_path, args.transformer, args.texts, rows,
                         os.path.join(work, f"{rows.replace(' ', '-')}-{repeat}.npy"))
            print(f"| {rows} | {result['train_s']:.1f} | {result['train_cpu_s']:.1f} | "
                  f"{result['steps_per_s']:.2f} | {result['predict_s']:.2f} | "
                  f"{result['rss_gib']:.2f} |", flush=True)
    ours, before = (np.load(os.path.join(work, f"{rows}-0.npy")) for rows in ("per-group", "maxlen"))
    print(f"mean |probability difference| after one epoch: {np.abs(ours - before).mean():.2e}, "
          f"same class for {int(np.sum(ours.argmax(1) == before.argmax(1)))} of {len(ours)} texts")


if __name__ == "__main__":
    main()
