"""Memory of one loaded model under repetition, as a server lives with it: two RSS curves.

    python benchmarks/rss_repetition.py [--calls 10000] [--matrix-mb 200] [--models-dir DIR] [--json]

1. Calls: ``tag([["12", "June", "2005"]] * 3)`` --calls times on one loaded model (GROBID's date
   calls); RSS after call 1, 100, then every tenth of the run, with the live ``EncodedCorpus``
   count. Reported: RSS after the last call / RSS after call 100.
2. Files: ``tag_file`` (JSON out, to a file) over a GROBID matrix of 2 MB, then of --matrix-mb MB,
   generated from the real date sequences (label column removed), RSS sampled every 0.25 s.
   Reported: peak RSS of the large run / peak RSS of the 2 MB run.

Without --models-dir a date model is trained first (2 epochs, the shipped sample). RSS is the
process' VmRSS (Linux). ``--json`` prints one JSON object instead of the table.
"""
import argparse
import gc
import json
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import delft  # noqa: E402,F401
from delft.sequenceLabelling import Sequence  # noqa: E402
from delft.sequenceLabelling.preprocess import EncodedCorpus  # noqa: E402
from delft.sequenceLabelling.reader import load_data_and_labels_crf_file  # noqa: E402
from delft.utilities.data_path import REPO_ROOT, shared_data_file  # noqa: E402

MODEL_NAME = "date-BidLSTM_CRF"
CALL = [["12", "June", "2005"]] * 3
SAMPLE = REPO_ROOT / "data" / "sequenceLabelling" / "grobid" / "date" / "date-sample.train"


def rss_mb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def live_corpora():
    gc.collect()
    return sum(isinstance(item, EncodedCorpus) for item in gc.get_objects())


def date_matrix_text():
    """The real date sequences (else the shipped sample) as GROBID sends them: no label column."""
    real = shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")
    source = real if real.is_file() else SAMPLE
    sequences = [[line.rsplit(maxsplit=1)[0] for line in block.splitlines() if line.strip()]
                 for block in source.read_text(encoding="utf-8").split("\n\n")]
    return "\n\n".join("\n".join(lines) for lines in sequences if lines) + "\n\n"


def write_matrix(path, megabytes, block):
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < megabytes * 1e6:
            out.write(block)
            written += len(block.encode("utf-8"))
    return written


def load_model(models_dir, scratch):
    if models_dir is None:
        x, y, _ = load_data_and_labels_crf_file(SAMPLE)
        trained = Sequence(MODEL_NAME, max_epoch=2, batch_size=60, recurrent_dropout=0.0, seed=1)
        trained.train(x, y)
        trained.save(scratch)
        models_dir = scratch
    model = Sequence(MODEL_NAME)
    model.load(models_dir)
    return model


def repeated_calls(model, calls):
    curve = []
    marks = {1, min(100, calls), calls} | {calls * k // 10 for k in range(1, 10)}
    for call in range(1, calls + 1):
        model.tag(CALL, None)
        if call in marks:
            curve.append({"call": call, "rss_mb": round(rss_mb(), 1),
                          "live_encoded_corpora": live_corpora()})
    after_100 = next(p["rss_mb"] for p in curve if p["call"] == min(100, calls))
    return {"curve": curve, "rss_after_100_mb": after_100, "rss_last_mb": curve[-1]["rss_mb"],
            "ratio": round(curve[-1]["rss_mb"] / after_100, 4)}


def sampled_tag_file(model, matrix, output):
    """Peak RSS and the RSS curve (seconds, MB) while tag_file runs."""
    samples, stop = [], threading.Event()
    start = time.perf_counter()

    def sample():
        while not stop.is_set():
            samples.append((round(time.perf_counter() - start, 2), round(rss_mb(), 1)))
            stop.wait(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        model.tag_file(matrix, "json", output, input_format="crf")
    finally:
        stop.set()
        sampler.join()
    samples.append((round(time.perf_counter() - start, 2), round(rss_mb(), 1)))
    return {"seconds": samples[-1][0], "peak_rss_mb": max(mb for _, mb in samples),
            "curve": samples}


def tag_files(model, megabytes, scratch):
    block = date_matrix_text()
    runs = {}
    for size in (2, megabytes):
        matrix = os.path.join(scratch, f"matrix-{size:g}MB.crf")
        written = write_matrix(matrix, size, block)
        runs[f"{size:g}MB"] = dict(sampled_tag_file(model, matrix, matrix + ".json"),
                                 bytes=written, output_bytes=os.path.getsize(matrix + ".json"))
        os.remove(matrix)
        os.remove(matrix + ".json")
    small, large = runs["2MB"], runs[f"{megabytes:g}MB"]
    return {"runs": runs, "ratio": round(large["peak_rss_mb"] / small["peak_rss_mb"], 4)}


def print_table(result, megabytes):
    calls = result["calls"]
    print("tag([['12', 'June', '2005']] * 3), repeated on one loaded model:")
    print(f"{'call':>8} {'RSS MB':>8} {'live EncodedCorpus':>19}")
    for point in calls["curve"]:
        print(f"{point['call']:>8} {point['rss_mb']:>8.1f} {point['live_encoded_corpora']:>19}")
    print(f"RSS after the last call / after call 100: {calls['ratio']:.4f}")
    files = result["files"]
    print("\ntag_file (JSON to a file) over a generated GROBID date matrix:")
    for name, run in files["runs"].items():
        curve = " ".join(f"{mb:.0f}" for _, mb in run["curve"][::max(1, len(run["curve"]) // 12)])
        print(f"{name:>6}: {run['bytes'] / 1e6:7.1f} MB in {run['seconds']:7.1f} s, peak RSS "
              f"{run['peak_rss_mb']:.1f} MB; RSS curve (MB): {curve}")
    print(f"peak RSS {megabytes:g} MB run / 2 MB run: {files['ratio']:.4f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--matrix-mb", type=float, default=200)
    parser.add_argument("--models-dir", default=None, help=f"holds {MODEL_NAME}/")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        model = load_model(args.models_dir, scratch)
        result = {"rss_after_load_mb": round(rss_mb(), 1),
                  "calls": repeated_calls(model, args.calls),
                  "files": tag_files(model, args.matrix_mb, scratch)}
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result, args.matrix_mb)


if __name__ == "__main__":
    main()
