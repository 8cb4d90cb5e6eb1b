"""GROBID's training path: `grobidTagger.py date train --output DIR` on all but the last 64
sequences of date-220311.train, then those 64 tagged through GROBID's calls; ours and DeLFT 1.2.0's.

    python benchmarks/grobid_holdout.py [--seeds 1,2,3] [--tail 64] [-- extra options of ours]
    DELFT12_PYTHON=/path/to/delft12/bin/python python benchmarks/grobid_holdout.py

GROBID trains on all its data and then labels documents it never saw: this measures that, token
accuracy on the held-out tail (and its entity micro F1), per seed and on average.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402

# GROBID's in-process calls (DeLFTModel), run by the toolkit's own interpreter
TAGGER = textwrap.dedent("""
    import json, sys
    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.reader import load_data_crf_string
    models, name, matrix, out = sys.argv[1:5]
    model = Sequence(name)
    model.load(dir_path=models)
    x_all, f_all = load_data_crf_string(open(matrix, encoding="utf-8").read())
    tagged = model.tag(x_all, None)
    json.dump([[label for _, label in pairs] for pairs in tagged], open(out, "w"))
""")


def split_file(path, tail, folder):
    """The training file without its last ``tail`` sequences, and those as GROBID sends them."""
    blocks = [b for b in open(path, encoding="utf-8").read().split("\n\n") if b.strip()]
    train = os.path.join(folder, "date-train.train")
    with open(train, "w", encoding="utf-8") as out:
        out.write("\n\n".join(blocks[:-tail]) + "\n")
    held = [[line.split() for line in block.strip().split("\n")] for block in blocks[-tail:]]
    matrix = os.path.join(folder, "held-out.crf")
    with open(matrix, "w", encoding="utf-8") as out:
        out.write("\n\n".join("\n".join(" ".join(row[:-1]) for row in rows) for rows in held)
                  + "\n")
    return train, matrix, [[row[-1] for row in rows] for rows in held]


def gold_iob(grobid_labels):
    sys.path.insert(0, peers.REPO)
    from delft.sequenceLabelling.reader import translate_grobid_label_to_iob

    return [[translate_grobid_label_to_iob(label) for label in seq] for seq in grobid_labels]


def scores(predicted, gold):
    sys.path.insert(0, peers.REPO)
    from delft.sequenceLabelling.evaluation import f1_score

    tokens = sum(len(g) for g in gold)
    correct = sum(p == g for ps, gs in zip(predicted, gold) for p, g in zip(ps, gs))
    return 100.0 * correct / tokens, 100.0 * f1_score(gold, predicted)


def train_and_tag(toolkit, seed, train, matrix, folder, extra):
    models = os.path.join(folder, f"models-{toolkit}-{seed}")
    result = peers.grobid_train(toolkit, "date", "BidLSTM_CRF", train, models, folder,
                                ["--seed", str(seed)] + (extra if toolkit == "ours" else []))
    out = os.path.join(folder, f"tagged-{toolkit}-{seed}.json")
    tagging = peers.script(toolkit, TAGGER, [models, "date-BidLSTM_CRF", matrix, out], folder)
    if tagging.code != 0:
        raise SystemExit(f"{toolkit} tagging failed:\n{tagging.err[-3000:]}")
    return json.load(open(out)), result.wall


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--tail", type=int, default=64)
    parser.add_argument("--ours-only", action="store_true")
    args, extra = parser.parse_known_args()
    extra = [e for e in extra if e != "--"]
    sys.path.insert(0, peers.REPO)
    from delft.utilities.data_path import shared_data_file

    data = str(shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train"))
    toolkits = ["ours"] + (["DeLFT 1.2.0"] if peers.delft12_available() and not args.ours_only
                           else [])
    results = {t: [] for t in toolkits}
    with tempfile.TemporaryDirectory() as folder:
        train, matrix, held_labels = split_file(data, args.tail, folder)
        gold = gold_iob(held_labels)
        for seed in map(int, args.seeds.split(",")):
            for toolkit in toolkits:
                predicted, wall = train_and_tag(toolkit, seed, train, matrix, folder, extra)
                accuracy, f1 = scores(predicted, gold)
                results[toolkit].append(accuracy)
                print(f"seed {seed} {toolkit:12s} held-out token accuracy {accuracy:.2f}  "
                      f"entity micro F1 {f1:.2f}  training wall {wall:.1f} s", flush=True)
    for toolkit, accuracies in results.items():
        print(f"{toolkit}: mean held-out token accuracy {statistics.mean(accuracies):.2f} "
              f"({' / '.join(f'{a:.2f}' for a in accuracies)})")


if __name__ == "__main__":
    main()
