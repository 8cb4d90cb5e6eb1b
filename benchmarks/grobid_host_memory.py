"""Memory of a GROBID-like host that loads several models and tags with each, ours and DeLFT 1.2.0's.

    python benchmarks/grobid_host_memory.py [--models date,name-header,...] [--sequences 2000]
    DELFT12_PYTHON=/path/to/delft12/bin/python python benchmarks/grobid_host_memory.py

GROBID keeps one model per field (date, names, affiliations, ...) loaded in one process, so what a
toolkit costs it is the start-up plus what each further model adds. Each model of ``--models``
(GROBID's default for them, BidLSTM_CRF_FEATURES) is trained for ``--max-epoch`` epochs by each
toolkit's CLI (weights do not change memory); then one fresh process per toolkit runs GROBID's
start-up statements of the grobidOrg line (no ``keras.backend`` import; scikit-learn's), loads the
models one after the other and tags ``--sequences`` of each model's own data with their features,
as GROBID calls it. Prints the RSS after the start-up (both toolkits import their framework at
the first load) and after each model's load and tagging, the peak so far, and what each model
after the first adds to the peak (MB, VmRSS).
"""
import argparse
import json
import os
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402

# the host, run by each toolkit's interpreter: GROBID's start-up, then one JSON line per stage
HOST = textwrap.dedent("""
    import json, resource, sys
    def rss_mb():
        with open("/proc/self/status") as status:
            return next(int(l.split()[1]) for l in status if l.startswith("VmRSS")) / 1024
    def report(stage):
        print(json.dumps({"stage": stage, "rss_mb": rss_mb(), "peak_mb":
                          resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), flush=True)
    from delft.utilities.Embeddings import Embeddings
    import delft.sequenceLabelling
    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
    from delft.sequenceLabelling.reader import load_data_crf_string
    from sklearn.model_selection import train_test_split
    report("start-up")
    models_dir, count = sys.argv[1], int(sys.argv[2])
    loaded = []  # GROBID keeps every model it loaded
    for name, data in json.loads(sys.argv[3]):
        model = Sequence(name + "-BidLSTM_CRF_FEATURES")
        model.load(dir_path=models_dir)
        loaded.append(model)
        x, _, f = load_data_and_labels_crf_file(data)
        texts, features = [list(t) for t in x[:count]], f[:count]
        model.tag(texts, None, features=features)  # DeLFT 1.2.0 cuts what is over 600 tokens
        report(name)
""")


def host(toolkit, models_dir, data, folder, sequences):
    result = peers.script(toolkit, HOST, [models_dir, str(sequences), json.dumps(data)], folder)
    if result.code != 0:
        raise SystemExit(f"{toolkit} host failed:\n{result.err[-3000:]}")
    rows = [json.loads(line) for line in result.out.splitlines() if line.startswith("{")]
    for row in rows:
        print(f"{toolkit:12s} {row['stage']:20s} RSS {row['rss_mb']:6.0f} MB   peak "
              f"{row['peak_mb']:6.0f} MB", flush=True)
    added = (rows[-1]["peak_mb"] - rows[1]["peak_mb"]) / max(len(rows) - 2, 1)
    print(f"{toolkit:12s} peak {rows[1]['peak_mb']:.0f} MB with one model, {rows[-1]['peak_mb']:.0f}"
          f" MB with {len(rows) - 1}: {added:.0f} MB each further model", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="date,name-header,name-citation,affiliation-address")
    parser.add_argument("--sequences", type=int, default=2000)
    parser.add_argument("--max-epoch", type=int, default=2)
    parser.add_argument("--ours-only", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, peers.REPO)
    from delft.utilities.data_path import shared_data_file

    data = []
    for model in args.models.split(","):
        folder = shared_data_file("sequenceLabelling", "grobid", model)
        data.append((model, str(next(folder.glob("*.train")))))
    toolkits = ["ours"] + (["DeLFT 1.2.0"] if peers.delft12_available() and not args.ours_only
                           else [])
    with tempfile.TemporaryDirectory() as folder:
        for toolkit in toolkits:
            models_dir = os.path.join(folder, f"models-{toolkit}")
            for model, path in data:
                peers.grobid_train(toolkit, model, "BidLSTM_CRF_FEATURES", path, models_dir, folder,
                                   ["--max-epoch", str(args.max_epoch), "--seed", "1"])
            host(toolkit, models_dir, data, folder, args.sequences)


if __name__ == "__main__":
    main()
