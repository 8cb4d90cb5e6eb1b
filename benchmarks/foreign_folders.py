"""Tagging speed of GROBID's shipped DeLFT folders loaded as they are: against our own model of the
same architecture and against DeLFT 0.4.6 on the same folder, in the same run.

    DELFT046_PYTHON=/path/to/delft046/bin/python python benchmarks/foreign_folders.py \
        [--folders date-BidLSTM_CRF_FEATURES,header-BidLSTM_ChainCRF] [--copies 40] [--repeats 3]
        [--onnx header-BidLSTM_ChainCRF,date-BidLSTM_CRF]

The folders and their 150 inputs are the shared sample (``grobid-models/``, its README), with the
sample's glove-840B stand-in (``reference/synth_vec.py``). Each input set is repeated ``--copies``
times and tagged in one ``tag`` call at the folder's own ``batch_size`` (DeLFT's batching, which
the ChainCRF folders need) after a warm-up call; the best of ``--repeats`` calls is reported.

"ours, own model": a model of the same architecture and sizes written by this package (trained
for one epoch on the inputs, for its weights only), in two forms: with the settings our CLIs give
(no recurrent dropout, feature columns concatenated) and with the folder's (recurrent dropout and
DeLFT's feature BiLSTM, i.e. the same layers as the loaded folder). DeLFT 0.4.6 runs in its own
virtual environment (``pip install delft==0.4.6``; never a dependency), named by
``DELFT046_PYTHON``, from a scratch folder, with ``TF_USE_LEGACY_KERAS=1``.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from delft.utilities.data_path import shared_data_file  # noqa: E402
from export_throughput import best_time  # noqa: E402  (this folder is on sys.path)

MODELS = shared_data_file("grobid-models")
REFERENCE = MODELS / "reference"
DELFT046_PYTHON = os.environ.get("DELFT046_PYTHON", "")

TIMED = """
import json, resource, sys, time
from delft.sequenceLabelling import Sequence
folder, models, inputs, copies, repeats, registry = sys.argv[1:7]
data = json.load(open(inputs))
x, f = data["x"] * int(copies), (data["f"] * int(copies) if data["f"] else None)
model = Sequence(folder, resource_registry_path=registry)
model.load(dir_path=models)
tag = (lambda: model.tag(x, None, features=f)) if f else (lambda: model.tag(x, None))
tag()
best = 1e9
for _ in range(int(repeats)):
    start = time.perf_counter(); tag(); best = min(best, time.perf_counter() - start)
tokens = sum(map(len, x))
sys.stderr.write("RESULT " + json.dumps({"tokens_per_s": tokens / best, "seconds": best,
    "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2}) + "\\n")
"""


def standin_registry(directory):
    """A registry naming the sample's glove-840B stand-in, in DeLFT's shape (both read it)."""
    vectors = os.path.join(directory, "glove-standin.vec")
    subprocess.run([sys.executable, str(REFERENCE / "synth_vec.py"), str(shared_data_file()),
                    vectors], check=True)
    registry = os.path.join(directory, "registry.json")
    with open(registry, "w") as out:
        json.dump({"embedding-lmdb-path": os.path.join(directory, "db"),
                   "embeddings": [{"name": "glove-840B", "path": vectors, "type": "glove",
                                   "format": "vec", "lang": "en", "item": "word"}],
                   "transformers": [], "embeddings-contextualized": []}, out)
    return registry


def own_model(folder, loaded, x, f, y, directory, folder_settings):
    """A model of ``loaded``'s architecture and sizes written by this package, reloaded."""
    from delft.sequenceLabelling import Sequence

    config = loaded.model_config
    options = dict(recurrent_dropout=config.recurrent_dropout,
                   features_encoder=config.features_encoder) if folder_settings else \
        dict(recurrent_dropout=0.0)
    name = f"own-{folder}-{'folder' if folder_settings else 'cli'}"
    model = Sequence(name, architecture=config.architecture, embeddings_name=config.embeddings_name,
                     batch_size=config.batch_size, max_epoch=1, seed=1,
                     max_sequence_length=config.max_sequence_length, **options)
    model.train(x, y, f)
    model.save(directory)
    reloaded = Sequence(name)
    reloaded.load(dir_path=directory)
    return reloaded


def measure(folder, copies, repeats, registry, directory):
    from delft.sequenceLabelling import Sequence

    data = json.loads((REFERENCE / "inputs" / f"{folder}.json").read_text())
    labels = json.loads((REFERENCE / "delft-0.4.6" / f"{folder}.json").read_text())
    x = data["x"] * copies
    f = data["f"] * copies if data["f"] else None
    tokens = sum(map(len, x))
    loaded = Sequence(folder)
    loaded.load(dir_path=str(MODELS))
    rows = {"ours, the folder": best_time(lambda: loaded.tag(x, None, features=f), repeats)}
    for folder_settings in (False, True):
        own = own_model(folder, loaded, data["x"], data["f"], labels, directory, folder_settings)
        key = "ours, own model (" + ("the folder's settings" if folder_settings
                                     else "our CLI's settings") + ")"
        rows[key] = best_time(lambda: own.tag(x, None, features=f), repeats)
    result = {key: {"tokens_per_s": tokens / seconds, "seconds": seconds}
              for key, seconds in rows.items()}
    if DELFT046_PYTHON:
        work = os.path.join(directory, "delft046")
        os.makedirs(work, exist_ok=True)
        completed = subprocess.run(
            [DELFT046_PYTHON, "-c", TIMED, folder, str(MODELS),
             str(REFERENCE / "inputs" / f"{folder}.json"), str(copies), str(repeats), registry],
            cwd=work, capture_output=True, text=True,
            env=dict(os.environ, TF_USE_LEGACY_KERAS="1", PYTHONPATH=""))
        found = [line for line in completed.stderr.splitlines() if line.startswith("RESULT ")]
        if completed.returncode or not found:
            raise SystemExit(f"DeLFT 0.4.6 failed on {folder}:\n{completed.stderr[-3000:]}")
        result["DeLFT 0.4.6, the folder"] = json.loads(found[-1][len("RESULT "):])
    return tokens, result


def onnx_agreement(folder, registry, directory):
    """GROBID's Java ONNX engine (tests/grobid_onnx_engine.py) on the folder's bundle, against
    DeLFT 0.4.6's labels (its batches) and ours at batch 1: the share of equal labels."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from grobid_onnx_engine import JavaOnnxModel, java_normalize_num

    from delft.sequenceLabelling import Sequence
    from delft.export import export_model

    data = json.loads((REFERENCE / "inputs" / f"{folder}.json").read_text())
    delft046 = json.loads((REFERENCE / "delft-0.4.6" / f"{folder}.json").read_text())
    x, f = data["x"], data["f"]
    bundle = export_model(str(MODELS / folder), os.path.join(directory, f"{folder}.onnx"), "onnx")
    wanted = {java_normalize_num(token) for tokens in x for token in tokens}
    vectors = {}
    with open(json.load(open(registry))["embeddings"][0]["path"], encoding="utf-8") as lines:
        for line in lines:
            word, _, values = line.rstrip("\n").partition(" ")
            if word in wanted:
                vectors[word] = [float(v) for v in values.split()]
    java = JavaOnnxModel(bundle, embeddings={k: __import__("numpy").asarray(v, "float32")
                                             for k, v in vectors.items()})
    got = [java.annotate_tokens(tokens, rows) for tokens, rows in zip(x, f or [None] * len(x))]
    model = Sequence(folder)
    model.load(dir_path=str(MODELS))
    alone = [[label for _, label in pairs]
             for pairs in model.tag(x, None, features=f, batch_size=1)]
    total = sum(map(len, x))

    def equal(a, b):
        return sum(p == q for s, t in zip(a, b) for p, q in zip(s, t))

    return {"tokens": total, "max_sequence_length": java.max_seq_length,
            "onnx = DeLFT 0.4.6 (its batches)": equal(got, delft046) / total,
            "onnx = ours, batch 1": equal(got, alone) / total,
            "ours batch 1 = DeLFT 0.4.6 (its batches)": equal(alone, delft046) / total,
            "<PAD> labels, onnx / DeLFT 0.4.6": (sum(l == "<PAD>" for s in got for l in s),
                                                 sum(l == "<PAD>" for s in delft046 for l in s))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folders", default="date-BidLSTM_CRF,date-BidLSTM_CRF_FEATURES,"
                                              "header-BidLSTM_ChainCRF_FEATURES")
    parser.add_argument("--copies", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--onnx", default="",
                        help="folders (comma-separated) whose ONNX bundle is run as GROBID's "
                             "Java engine runs it, its labels compared with DeLFT 0.4.6's")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        registry = standin_registry(directory)
        os.environ["DELFT_RESOURCE_REGISTRY"] = registry
        for folder in filter(None, args.onnx.split(",")):
            print(f"{folder}, ONNX bundle through GROBID's Java engine:")
            for key, value in onnx_agreement(folder, registry, directory).items():
                print(f"  {key}: {value:.4f}" if isinstance(value, float) else
                      f"  {key}: {value}")
        for folder in filter(None, args.folders.split(",")):
            tokens, result = measure(folder, args.copies, args.repeats, registry, directory)
            folder_rate = result["ours, the folder"]["tokens_per_s"]
            print(f"{folder}: {tokens} tokens, batch as its config.json")
            for key, values in result.items():
                print(f"  {key:48s} {values['tokens_per_s']:10,.0f} tokens/s  "
                      f"(the folder / this: {folder_rate / values['tokens_per_s']:.2f}x)")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
