"""Our text classifier on the shared classification data, on the very splits and settings of the
DeLFT 1.2.0 reference runs (``benchmarks/delft12_classification.py``: its seeded splits, cached as
JSON, and its ``defaults``), and the table against those runs.

    python benchmarks/classification.py --task copyright license citations --seed 1 2 3
    python benchmarks/classification.py --table     # ours against DeLFT 1.2.0, from the results

``--apps-settings`` starts TensorFlow as licenseClassifier and citationClassifier start it
(``Toolkit.start_tensorflow``: their CPU threads and kernels, the BFC host allocator, Keras without
its optional extras); without it, TensorFlow's defaults and Keras whole, as the Python API keeps
them.

Each run is a fresh process (its wall time includes starting Python and TensorFlow, as the
reference's does): ``Classifier`` with the task's settings, no pre-trained embeddings (word
embeddings learned from the training texts, as DeLFT 1.2.0 does), early stopping on the split's
validation part, then the class probabilities of the test part. Scores as the reference's:
``f1_macro`` the mean over every class of the task of the F1 of the most probable class (a class
without test example counts 0), ``f1_macro_present`` over the classes with test examples. A JSON
line per run is appended to ``benchmarks/results/delft-classification.jsonl``.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from delft12_classification import (_MEASURED, DEFAULT_CACHE, DEFAULT_DATA,  # noqa: E402
                                    RESULTS as REFERENCE, append_result, defaults,
                                    make_split)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "results", "delft-classification.jsonl")

RUN = r'''
import json, sys, time
import numpy as np
split = json.load(open(sys.argv[1], encoding="utf-8"))
settings = json.load(open(sys.argv[2]))
if settings.pop("apps_settings"):  # as licenseClassifier and citationClassifier run
    from delft.applications.toolkits import TEXT_CLASSIFICATION
    TEXT_CLASSIFICATION.start_tensorflow(
        settings["architecture"],
        TEXT_CLASSIFICATION.architecture(settings["architecture"]).length_groups)
from delft.textClassification import Classifier
from delft.textClassification.evaluation import class_scores
classes = split["classes"]
weights = settings.pop("class_weights")
architecture = settings.pop("architecture")
model = Classifier(split["task"] + "_" + architecture, architecture=architecture,
                   list_classes=classes, transformer_name=settings.pop("transformer"),
                   class_weights={int(k): v for k, v in weights.items()} if weights else None,
                   **settings)
start = time.perf_counter()
model.train(split["train"]["text"], split["train"]["label"],
            x_valid=split["valid"]["text"], y_valid=split["valid"]["label"])
train_s = time.perf_counter() - start
start = time.perf_counter()
probabilities = model.predict(split["test"]["text"], "array")
predict_s = time.perf_counter() - start
truth = np.eye(len(classes))[[classes.index(label) for label in split["test"]["label"]]]
scores = class_scores(truth, probabilities, classes)
present = [c for c in classes if scores["labels"][c]["support"]]
json.dump({"f1_macro": scores["macro"]["f1"],
           "f1_macro_present": float(np.mean([scores["labels"][c]["f1"] for c in present])),
           "accuracy": scores["accuracy"], "roc_auc": scores["roc_auc"],
           "per_class": {c: {k: scores["labels"][c][k] for k in ("precision", "recall", "f1",
                                                                 "support")} for c in classes},
           "epochs": len(model.history), "train_s": train_s, "predict_s": predict_s,
           "architecture_run": model.model_config.architecture,
           "transformer_schedule": model.training_config.transformer_schedule,
           "vocab_size": model.model_config.vocab_size,
           "parameters": int(sum(np.prod(w.shape) for w in model.model.get_weights()))},
          open(sys.argv[3], "w"))
'''


def run_ours(split_path, settings):
    """One run in a fresh process: ``(result, wall seconds, peak RSS GB, CPU seconds)``."""
    work = tempfile.mkdtemp(prefix="delft-classification-")
    settings_path, out = os.path.join(work, "settings.json"), os.path.join(work, "result.json")
    with open(settings_path, "w") as stream:
        json.dump(settings, stream)
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    start = time.perf_counter()
    # the reference's measure: a wrapper process reports its child's CPU time and peak RSS
    done = subprocess.run([sys.executable, "-c", _MEASURED, sys.executable, "-c", RUN, split_path,
                           settings_path, out], cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stderr[-3000:]}")
    err, _, peak = done.stderr.rpartition("\nPEAK_RSS_KB=")
    cpu = float(err.rpartition("\nCPU_S=")[2].strip() or 0)
    rss = int(peak.strip() or 0) / 1024 ** 2
    return json.load(open(out)), wall, rss, cpu


def table(results, reference):
    """Mean macro F1 and wall time per task: ours against DeLFT 1.2.0's, on the same seeds; a row
    per learning rate DeLFT 1.2.0 ran with (its app's, or another given by ``--learning-rate``)."""
    def load(path, system):
        rows = [json.loads(line) for line in open(path)] if os.path.isfile(path) else []
        return [r for r in rows if r["system"] == system]

    ours = {(r["task"], r["architecture"], r["seed"]): r for r in load(results, "delft")}
    theirs = {(r["task"], r["architecture"], r["settings"]["learning_rate"], r["seed"]): r
              for r in load(reference, "delft-1.2.0")}
    print("| task | architecture | DeLFT 1.2.0 lr | seeds | macro F1 delft | macro F1 DeLFT 1.2.0 "
          "| wall s delft | wall s DeLFT 1.2.0 | wall ratio | peak RSS GB delft / DeLFT 1.2.0 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for task, architecture, rate in sorted({key[:3] for key in theirs}):
        seeds = sorted(key[3] for key in theirs if key[:3] == (task, architecture, rate)
                       and (task, architecture, key[3]) in ours)
        if not seeds:
            continue

        def mean(rows, field):
            return sum(r[field] for r in rows) / len(rows)
        a = [ours[(task, architecture, s)] for s in seeds]
        b = [theirs[(task, architecture, rate, s)] for s in seeds]
        print(f"| {task} | {architecture} | {rate:g} | {','.join(map(str, seeds))} | "
              f"{mean(a, 'f1_macro'):.2f} | {mean(b, 'f1_macro'):.2f} | {mean(a, 'wall'):.0f} | "
              f"{mean(b, 'wall'):.0f} | {mean(a, 'wall') / mean(b, 'wall'):.2f} | "
              f"{mean(a, 'rss'):.2f} / {mean(b, 'rss'):.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", nargs="+", default=["copyright", "license", "citations"],
                        choices=["copyright", "license", "citations"])
    parser.add_argument("--seed", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--architecture", default="gru")
    parser.add_argument("--transformer", default=None, help="bert: a checkpoint folder or name")
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument("--results", default=RESULTS)
    parser.add_argument("--class-weights", default=None, metavar="W0,W1,...|none",
                        help="other class weights than the application's (recorded in the "
                             "result): one per class, or none")
    parser.add_argument("--apps-settings", action="store_true",
                        help="TensorFlow started as the apps start it "
                             "(Toolkit.start_tensorflow), not as the Python API does")
    parser.add_argument("--table", action="store_true", help="print the table and stop")
    args = parser.parse_args()
    if args.table:
        table(args.results, REFERENCE)
        return
    class_weights = None if args.class_weights in (None, "none") else dict(
        enumerate(map(float, args.class_weights.split(","))))
    for task in args.task:
        for seed in args.seed:
            split_path, split = make_split(task, seed, args.data, args.cache)
            settings = defaults(task, args.architecture)
            if args.architecture == "bert" and task == "citations":
                settings["learning_rate"] = None  # ours: 2e-5 (DeLFT 1.2.0 passes its 1e-3)
                from delft.textClassification.presets import preset

                # ours: citationClassifier's bert preset (the RNNs' weights weigh DeLFT 1.2.0's
                # per-class sigmoid terms there, each example's softmax loss here)
                settings["class_weights"] = preset("citation", "citations",
                                                   "transformer")["class_weights"]
            settings.update(seed=seed, architecture=args.architecture,
                            transformer=args.transformer, apps_settings=args.apps_settings)
            if args.class_weights:
                settings["class_weights"] = class_weights
            load_before = os.getloadavg()[0]
            result, wall, rss, cpu = run_ours(split_path, settings)
            if result["architecture_run"] != args.architecture:
                raise SystemExit(f"asked for {args.architecture}, "
                                 f"{result['architecture_run']} ran")
            record = dict(
                system="delft", task=task, architecture=args.architecture, seed=seed,
                embeddings=args.transformer or "learned (none pre-trained)",
                class_weights=settings["class_weights"],
                f1_macro=round(100 * result["f1_macro"], 2),
                f1_macro_present=round(100 * result["f1_macro_present"], 2),
                accuracy=round(100 * result["accuracy"], 2), roc_auc=round(result["roc_auc"], 4),
                per_class=result["per_class"], epochs=result["epochs"], wall=round(wall, 1),
                train_s=round(result["train_s"], 1), predict_s=round(result["predict_s"], 2),
                rss=round(rss, 3), cpu_s=round(cpu, 1),
                cpu_settings="apps" if args.apps_settings else "tensorflow's defaults",
                loadavg_1min=[round(load_before, 2), round(os.getloadavg()[0], 2)],
                split={k: len(split[k]["text"]) for k in ("train", "valid", "test")},
                vocab_size=result["vocab_size"], parameters=result["parameters"],
                cpus=os.cpu_count(), machine=platform.machine(),
                date=datetime.date.today().isoformat())
            if args.architecture == "bert":
                record["transformer_schedule"] = result["transformer_schedule"]
            append_result(args.results, record)


if __name__ == "__main__":
    main()
