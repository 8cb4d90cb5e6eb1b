"""DeLFT 1.2.0's text classifier (PyTorch) on the shared classification data: the reference runs.

DeLFT 1.2.0 lives in its own virtual environment, never in ours: point ``DELFT12_PYTHON`` at its
interpreter (``pip install delft==1.2.0`` in a scratch venv). This script imports nothing of our
package; it reads the data, makes a seeded split, writes it as JSON and runs DeLFT's ``Classifier``
on exactly that split in a fresh subprocess (an inline script given to DeLFT's interpreter), from a
working folder outside the repository (both packages are named ``delft``).

    DELFT12_PYTHON=/path/venv/bin/python python benchmarks/delft12_classification.py \\
        --task copyright license citations --seed 1 2 3 --architecture gru

Data (``--data``, default ``$DELFT_SHARED/data/textClassification`` or /work/shared/...):

- copyright, license: ``licenses/copyrights-licenses-data-validated.csv``, read with the csv module:
  every record is a row ``text, copyright class, license class`` (the file has no header line:
  DeLFT's pandas reader takes the first record for one and drops it, we keep it), a row whose label
  for the task is empty or not one of its classes is left out of that task. Classes, in DeLFT's
  licenseClassifier order: copyright publisher/authors/undecided; license CC-0, CC-BY, CC-BY-NC,
  CC-BY-NC-ND, CC-BY-SA, CC-BY-NC-SA, CC-BY-ND, copyright, other, undecided (CC-0 has no example).
- citations: ``citations/citation_sentiment_corpus.txt``: lines that are neither blank nor ``#``
  comments, cut on tabs into 4 fields, text = field 4, label = field 3 (n, o, p -> negative,
  neutral, positive, DeLFT's citationClassifier order). The text loses one pair of surrounding
  double quotes when it has one (DeLFT cuts the first and the last character of every text, which
  for the 593 unquoted ones are letters).

Split (cached as ``<cache>/<task>-seed<seed>.json``, ``--cache``, default
``~/.cache/delft-benchmarks/classification``): scikit-learn ``train_test_split`` of the rows, 10 %
test, ``random_state=seed``, stratified on the class; then the same on the rest, 10 % of it being the
validation set (DeLFT's train_eval: 90 % train / 10 % eval, then ``Classifier.train`` carving 10 %
of the training texts off for early stopping; its own carving is random, ours seeded and
stratified). The JSON holds ``train``, ``valid`` and ``test``, each ``{"index", "text", "label"}``
(row numbers in the task's rows, texts, class names), with ``classes`` and how it was made.

Training: ``Classifier`` with the defaults DeLFT 1.2.0's apps give the task (``configure`` of
licenseClassifier / citationClassifier, their class weights), no pre-trained embeddings (DeLFT
1.2.0 then learns 300-d word embeddings over the vocabulary of the training texts) or a transformer
(``--transformer``, a Hub name or local folder, for ``bert``). With early stopping (the RNN/CNN
architectures), what ``Classifier.train`` does step by step but on our validation set:
``_prepare_training`` on train+valid (DeLFT builds the vocabulary on all the texts given to
``train``, its validation part included), then ``_train_model(model, train, valid)``; without (bert),
``train`` on train+valid. Seeds: Python, NumPy and torch seeded with the seed, as the apps'
``--seed`` does. Test: ``predict`` (class probabilities) and ``eval`` on the test texts.

Scores: ``f1_macro`` = mean over ALL the task's classes of the F1 of the argmax class (exclusive
classes; a class without test example counts 0, as in DeLFT's reports), ``f1_macro_present`` =
the same over the classes that have test examples, per-class precision/recall/F1/support, accuracy,
and ``delft_eval`` = what DeLFT 1.2.0's ``eval`` returns (it thresholds every class at 0.5, as
multi-label). Wall time is that of the whole subprocess, peak RSS (GB) that of its largest process,
``cpu_s`` its CPU time (user + system, data-loader workers included) and ``loadavg_1min`` the load of
the machine before and after (other work on the machine slows the wall time).
A JSON line per run is appended to ``benchmarks/results/delft-1.2.0-classification.jsonl``.
"""
import argparse
import csv
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DELFT12_PYTHON = os.environ.get("DELFT12_PYTHON", "")
RESULTS = os.path.join(REPO, "benchmarks", "results", "delft-1.2.0-classification.jsonl")
DEFAULT_DATA = os.path.join(os.environ.get("DELFT_SHARED", "/work/shared"), "data", "textClassification")
DEFAULT_CACHE = os.path.expanduser("~/.cache/delft-benchmarks/classification")

CLASSES = {
    "copyright": ["publisher", "authors", "undecided"],
    "license": ["CC-0", "CC-BY", "CC-BY-NC", "CC-BY-NC-ND", "CC-BY-SA", "CC-BY-NC-SA", "CC-BY-ND",
                "copyright", "other", "undecided"],
    "citations": ["negative", "neutral", "positive"],
}
CITATION_LABELS = {"n": "negative", "o": "neutral", "p": "positive"}


def append_result(path, record):
    """Append a run's JSON line to ``path`` and print its summary line."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
    print(f"{record['task']} {record['architecture']} seed {record['seed']}: macro F1 "
          f"{record['f1_macro']} (present {record['f1_macro_present']}), {record['epochs']} epochs, "
          f"wall {record['wall']} s, rss {record['rss']:.2f} GB", flush=True)


def defaults(task, architecture):
    """What DeLFT 1.2.0's apps train the task with (licenseClassifier.configure/train_and_eval,
    citationClassifier.configure/train_and_eval)."""
    if task in ("copyright", "license"):
        settings = dict(batch_size=256, maxlen=300, patience=5, early_stop=True, max_epoch=60, learning_rate=0.001)
        if architecture == "bert":
            settings.update(batch_size=16, early_stop=False, max_epoch=6, maxlen=200, learning_rate=2e-5)
        # train_and_eval: copyright with {0: 1, 1: 1, 2: 1} (no effect), license with None
        settings["class_weights"] = {0: 1.0, 1: 1.0, 2: 1.0} if task == "copyright" else None
    else:
        settings = dict(batch_size=256, maxlen=150, patience=5, early_stop=True, max_epoch=60,
                        # not passed by citationClassifier: Classifier's default, 0.001 even for bert
                        learning_rate=0.001)
        if architecture == "bert":
            settings.update(batch_size=32, early_stop=False, max_epoch=3)
        settings["class_weights"] = {0: 25.0, 1: 1.0, 2: 9.0}
    return settings


def read_task(task, data):
    """The (text, label) rows of the task, as documented above."""
    rows = []
    if task in ("copyright", "license"):
        column = 1 if task == "copyright" else 2
        path = os.path.join(data, "licenses", "copyrights-licenses-data-validated.csv")
        with open(path, encoding="utf-8", newline="") as f:
            for record in csv.reader(f):
                if len(record) > column and record[column].strip() in CLASSES[task]:
                    rows.append((record[0], record[column].strip()))
    else:
        path = os.path.join(data, "citations", "citation_sentiment_corpus.txt")
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                fields = line.split("\t")
                if len(fields) != 4 or fields[2] not in CITATION_LABELS:
                    continue
                text = fields[3]
                if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
                    text = text[1:-1]
                rows.append((text, CITATION_LABELS[fields[2]]))
    return rows, path


def _stratify(labels):
    """The labels to stratify on, or None when a class has a single row (train_test_split refuses)."""
    counts = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return labels if min(counts.values()) >= 2 else None


def make_split(task, seed, data, cache):
    """The seeded train/valid/test split of the task, written to (and read back from) the cache."""
    from sklearn.model_selection import train_test_split

    path = os.path.join(cache, f"{task}-seed{seed}.json")
    if os.path.isfile(path):
        return path, json.load(open(path, encoding="utf-8"))
    rows, source = read_task(task, data)
    indices = list(range(len(rows)))
    labels = [label for _, label in rows]
    rest, test = train_test_split(indices, test_size=0.1, random_state=seed, stratify=_stratify(labels))
    rest_labels = [labels[i] for i in rest]
    train, valid = train_test_split(rest, test_size=0.1, random_state=seed, stratify=_stratify(rest_labels))

    def part(ids):
        return {"index": ids, "text": [rows[i][0] for i in ids], "label": [rows[i][1] for i in ids]}

    split = {
        "task": task, "seed": seed, "classes": CLASSES[task], "source": source, "rows": len(rows),
        "how": "sklearn train_test_split(test_size=0.1, random_state=seed, stratify=label) twice: "
               "test from all rows, then valid from the rest",
        "train": part(train), "valid": part(valid), "test": part(test),
    }
    os.makedirs(cache, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(split, f, ensure_ascii=False)
    return path, split


# Runs in DeLFT 1.2.0's interpreter: argv = split.json settings.json out.json
INLINE = r'''
import importlib.metadata, json, os, random, sys, time
import numpy as np
import torch
split = json.load(open(sys.argv[1], encoding="utf-8"))
settings = json.load(open(sys.argv[2]))
import delft
from delft.textClassification import Classifier
from delft.textClassification.models import getModel
assert "site-packages" in delft.__file__, delft.__file__
seed = settings["seed"]
random.seed(seed); np.random.seed(seed); torch.manual_seed(seed)
classes = split["classes"]
def onehot(labels):
    y = np.zeros((len(labels), len(classes)), dtype=np.float32)
    for i, label in enumerate(labels):
        y[i, classes.index(label)] = 1.0
    return y
x_train, y_train = np.asarray(split["train"]["text"], dtype=object), onehot(split["train"]["label"])
x_valid, y_valid = np.asarray(split["valid"]["text"], dtype=object), onehot(split["valid"]["label"])
x_test, y_test = np.asarray(split["test"]["text"], dtype=object), onehot(split["test"]["label"])
weights = settings["class_weights"]
model = Classifier(
    split["task"] + "_" + settings["architecture"] + "_bench",
    architecture=settings["architecture"], list_classes=classes, embeddings_name=None,
    transformer_name=settings["transformer"], max_epoch=settings["max_epoch"],
    patience=settings["patience"], batch_size=settings["batch_size"], maxlen=settings["maxlen"],
    early_stop=settings["early_stop"], learning_rate=settings["learning_rate"], use_roc_auc=True,
    class_weights={int(k): v for k, v in weights.items()} if weights else None)
start = time.perf_counter()
if settings["early_stop"]:
    # Classifier.train_single, with our validation set in place of the one it carves
    x_all = np.concatenate([x_train, x_valid]); y_all = np.concatenate([y_train, y_valid])
    model._prepare_training(x_all, y_all, False)
    model.model = getModel(model.model_config, model.training_config)
    model.models = None
    model._train_model(model.model, x_train, y_train, x_valid, y_valid)
else:
    model.train(np.concatenate([x_train, x_valid]), np.concatenate([y_train, y_valid]))
train_s = time.perf_counter() - start
start = time.perf_counter()
probs = np.asarray(model.predict(list(x_test), output_format="array"))
predict_s = time.perf_counter() - start
evaluation = model.eval(x_test, y_test)
from sklearn.metrics import accuracy_score, precision_recall_fscore_support
gold, pred = y_test.argmax(1), probs.argmax(1)
p, r, f, s = precision_recall_fscore_support(gold, pred, labels=list(range(len(classes))), average=None, zero_division=0)
present = [i for i in range(len(classes)) if s[i] > 0]
n_params = sum(t.numel() for t in model.model.parameters())
json.dump({
    "f1_macro": float(np.mean(f)), "f1_macro_present": float(np.mean([f[i] for i in present])),
    "accuracy": float(accuracy_score(gold, pred)),
    "per_class": {c: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]), "support": int(s[i])}
                  for i, c in enumerate(classes)},
    "delft_eval": evaluation, "train_s": train_s, "predict_s": predict_s,
    "vocab_size": model.model_config.vocab_size, "word_embedding_size": model.model_config.word_embedding_size,
    "parameters": int(n_params), "nb_workers": model.nb_workers, "torch_threads": torch.get_num_threads(),
    "delft_version": importlib.metadata.version("delft"), "delft_file": delft.__file__,
    "torch_version": torch.__version__,
}, open(sys.argv[3], "w"))
'''

# a wrapper process whose only child is the command: its RUSAGE_CHILDREN is that command's peak
# (and its CPU time, user + system, its workers' included)
_MEASURED = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
             "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
             "sys.stderr.write('\\nCPU_S=%.1f\\nPEAK_RSS_KB=%d\\n' % (u.ru_utime + u.ru_stime, u.ru_maxrss)); "
             "sys.exit(code)")


def run_delft12(split_path, settings, log):
    """DeLFT 1.2.0 on the split, in its interpreter, from a fresh folder outside the repository."""
    work = tempfile.mkdtemp(prefix="delft12-classification-")
    with open(os.path.join(work, "settings.json"), "w") as f:
        json.dump(settings, f)
    out = os.path.join(work, "result.json")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONUNBUFFERED"] = "1"  # the log shows the epochs as they go
    command = [sys.executable, "-c", _MEASURED, DELFT12_PYTHON, "-c", INLINE, split_path,
               os.path.join(work, "settings.json"), out]
    start = time.perf_counter()
    with open(log, "w") as stream:
        process = subprocess.Popen(command, cwd=work, env=env, stdout=stream, stderr=subprocess.PIPE, text=True)
        _, err = process.communicate()
    wall = time.perf_counter() - start
    err, _, peak = err.rpartition("\nPEAK_RSS_KB=")
    err, _, cpu = err.rpartition("\nCPU_S=")
    with open(log, "a") as stream:
        stream.write(err)
    if process.returncode != 0 or not os.path.isfile(out):
        raise SystemExit(f"DeLFT 1.2.0 failed ({process.returncode}), see {log}:\n{err[-3000:]}")
    result = json.load(open(out))
    shutil.rmtree(work, ignore_errors=True)
    with open(log) as stream:
        result["epochs"] = sum(1 for line in stream if line.startswith("Epoch "))
    result["cpu_s"] = float(cpu.strip() or 0)
    return result, wall, int(peak.strip() or 0) / 1024 ** 2


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", nargs="+", choices=sorted(CLASSES), default=["copyright", "license", "citations"])
    parser.add_argument("--seed", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--architecture", default="gru")
    parser.add_argument("--transformer", default=None, help="Hub name or local folder (bert)")
    parser.add_argument("--transformer-label", default=None, help="how the results name the transformer")
    parser.add_argument("--max-epoch", type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument("--results", default=RESULTS)
    parser.add_argument("--splits-only", action="store_true", help="write the splits and stop")
    args = parser.parse_args()

    if not args.splits_only and not (DELFT12_PYTHON and os.path.isfile(DELFT12_PYTHON)):
        raise SystemExit("DELFT12_PYTHON must name the python of a venv with delft==1.2.0")
    for task in args.task:
        for seed in args.seed:
            split_path, split = make_split(task, seed, args.data, args.cache)
            sizes = {k: len(split[k]["text"]) for k in ("train", "valid", "test")}
            print(f"{task} seed {seed}: {sizes} -> {split_path}", flush=True)
            if args.splits_only:
                continue
            settings = defaults(task, args.architecture)
            if args.max_epoch is not None:
                settings["max_epoch"] = args.max_epoch
            if args.learning_rate is not None:
                settings["learning_rate"] = args.learning_rate
            settings.update(seed=seed, architecture=args.architecture, transformer=args.transformer)
            log = os.path.join(args.cache, f"{task}-seed{seed}-{args.architecture}.log")
            load_before = os.getloadavg()[0]
            result, wall, rss = run_delft12(split_path, settings, log)
            load_after = os.getloadavg()[0]
            record = {
                "system": "delft-1.2.0", "task": task, "architecture": args.architecture, "seed": seed,
                "embeddings": (args.transformer_label or args.transformer) if args.transformer
                else "learned (none pre-trained)",
                "f1_macro": round(100 * result["f1_macro"], 2),
                "f1_macro_present": round(100 * result["f1_macro_present"], 2),
                "accuracy": round(100 * result["accuracy"], 2),
                "per_class": result["per_class"], "delft_eval": result["delft_eval"],
                "epochs": result["epochs"], "wall": round(wall, 1), "train_s": round(result["train_s"], 1),
                "predict_s": round(result["predict_s"], 2), "rss": round(rss, 3),
                "cpu_s": result["cpu_s"], "loadavg_1min": [round(load_before, 2), round(load_after, 2)],
                "split": {**sizes, "file": os.path.basename(split_path)},
                "settings": {k: v for k, v in settings.items() if k not in ("seed", "architecture")},
                "vocab_size": result["vocab_size"], "word_embedding_size": result["word_embedding_size"],
                "parameters": result["parameters"], "nb_workers": result["nb_workers"],
                "torch_threads": result["torch_threads"], "delft_version": result["delft_version"],
                "torch_version": result["torch_version"], "cpus": os.cpu_count(), "machine": platform.machine(),
                "date": datetime.date.today().isoformat(),
            }
            append_result(args.results, record)


if __name__ == "__main__":
    main()
