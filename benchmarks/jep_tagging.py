"""Tagging through JEP from Java (GROBID's two client lines) vs plain Python, on one model and input.

    python benchmarks/jep_tagging.py [--models-dir DIR --name grobid-date --architecture BidLSTM_CRF]
                                     [--sequences 2000] [--modes sub,shared]

Without --models-dir, trains a model with ``grobidTagger.py date train --output TMP --max-epoch 2``
(weights do not change the speed). The input is ``--sequences`` date sequences of the real data
(``../shared/data``) when present, else of the shipped sample (cycled), label column removed.

Each JEP mode runs tests/jep/GrobidLikeClient.java once: interpreter creation + GROBID's start-up
statements, the model load, one ``label()`` call per sequence (as GROBID labels dates), then the
whole input in one call. Plain Python makes the same calls in one process. Prints seconds and
tokens/s per piece, the process wall time and peak RSS, and the tracebacks each run printed on
stderr.
No asserts.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT / "tests"), str(REPO_ROOT), str(REPO_ROOT / "benchmarks")]
# (tests/ first: its conftest, not the root one)

import peers  # noqa: E402
from conftest import SAMPLE_DATE, crf_sequences, subprocess_env, unlabelled_matrix  # noqa: E402
from delft.utilities.data_path import shared_data_file  # noqa: E402
from test_jep_grobid import (HARNESS, cli_saved_name, find_toolchain, harness_command,  # noqa: E402
                             jvm_env, parse_harness_stdout)

PYTHON_CLIENT = textwrap.dedent("""
    import json, sys, time
    start = time.perf_counter()
    import os
    os.chdir(sys.argv[1])
    from delft.utilities.Embeddings import Embeddings
    import delft.sequenceLabelling
    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
    from delft.sequenceLabelling.reader import load_data_crf_string
    from sklearn.model_selection import train_test_split
    timings = {"startup": time.perf_counter() - start}
    models_dir, name, architecture, input_path, out_path = sys.argv[2:]
    start = time.perf_counter()
    model = Sequence(f"{name}-{architecture}")
    model.load(dir_path=models_dir)
    timings["load"] = time.perf_counter() - start
    data = open(input_path, encoding="utf-8").read()
    sequences = [s for s in data.split("\\n\\n") if s.strip()]
    features = "FEATURE" in architecture

    def label(text):
        x_all, f_all = load_data_crf_string(text)
        return model.tag(x_all, None, features=f_all) if features else model.tag(x_all, None)

    start = time.perf_counter()
    tokens = sum(len(r) for s in sequences for r in label(s + "\\n"))
    timings["per-sequence"] = time.perf_counter() - start
    start = time.perf_counter()
    assert sum(len(r) for r in label(data)) == tokens
    timings["one-call"] = time.perf_counter() - start
    timings["tokens"] = tokens
    timings["calls"] = len(sequences)
    json.dump(timings, open(out_path, "w"))
""")


def build_input(path, count):
    real = shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")
    source = real if real.is_file() else SAMPLE_DATE
    sequences = crf_sequences(source)
    chosen = [sequences[i % len(sequences)] for i in range(count)]
    path.write_text(unlabelled_matrix(chosen), encoding="utf-8")
    return source, sum(len(s) for s in chosen)


def train(models_dir, architecture):
    subprocess.run([sys.executable, "delft/applications/grobidTagger.py", "date", "train",
                    "--architecture", architecture, "--input", str(SAMPLE_DATE),
                    "--output", str(models_dir), "--max-epoch", "2", "--seed", "1"],
                   cwd=str(REPO_ROOT), env=subprocess_env(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cli_saved_name("date", architecture)


def tracebacks(stderr):
    return sum(line.startswith("Traceback") for line in stderr.splitlines())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", default=None)
    parser.add_argument("--name", default=None, help="model name part of Sequence('<name>-<arch>')")
    parser.add_argument("--architecture", default="BidLSTM_CRF")
    parser.add_argument("--sequences", type=int, default=2000)
    parser.add_argument("--modes", default="sub,shared")
    args = parser.parse_args()

    toolchain, reason = find_toolchain()
    if toolchain is None:
        sys.exit(f"cannot run: {reason}")
    work = Path(tempfile.mkdtemp(prefix="jep_bench_"))
    classes = work / "classes"
    subprocess.run([toolchain.javac, "-d", str(classes), "-cp", toolchain.jep_jar, str(HARNESS)],
                   check=True)
    if args.models_dir:
        models_dir = Path(args.models_dir)
        name = args.name or cli_saved_name("date", args.architecture)[0]
    else:
        models_dir = work / "models"
        start = time.perf_counter()
        name, _ = train(models_dir, args.architecture)
        print(f"trained {name}-{args.architecture} with the CLI in "
              f"{time.perf_counter() - start:.1f} s (2 epochs)")
    input_path = work / "input.crf"
    source, tokens = build_input(input_path, args.sequences)
    print(f"input: {args.sequences} sequences, {tokens} tokens, from {source}")
    print(f"java: {toolchain.java}  jep: {toolchain.jep_jar}")

    rows = []
    for mode in args.modes.split(","):
        command = harness_command(toolchain, classes, mode, models_dir,
                                  [(name, args.architecture)], input_path, "--calls", "both",
                                  "--no-labels")
        completed = peers.run(command, str(work), jvm_env())
        if completed.code != 0:
            print(f"{mode}: exit {completed.code}\n{completed.err[-3000:]}")
            continue
        _, timings, _ = parse_harness_stdout(completed.out)
        full = f"{name}-{args.architecture}"
        per_seq = timings[f"tag|{full}|per-sequence|pass0|calls={args.sequences}"][0]
        one_call = timings[f"tag|{full}|one-call|pass0|calls=1"][0]
        rows.append((f"JEP {mode}", timings["startup"][0], timings[f"load|{full}"][0], per_seq,
                     one_call, completed.wall, completed.peak_rss_gb, tracebacks(completed.err)))

    script = work / "python_client.py"
    script.write_text(PYTHON_CLIENT)
    out = work / "python.json"
    completed = peers.run([sys.executable, str(script), str(REPO_ROOT), str(models_dir), name,
                           args.architecture, str(input_path), str(out)], str(work),
                          subprocess_env())
    if completed.code == 0:
        t = json.loads(out.read_text())
        rows.append(("plain Python", t["startup"], t["load"], t["per-sequence"], t["one-call"],
                     completed.wall, completed.peak_rss_gb, tracebacks(completed.err)))
    else:
        print(f"plain Python: exit {completed.code}\n{completed.err[-3000:]}")

    print(f"\n{'client':<14}{'startup s':>10}{'load s':>8}{'per-seq s':>11}{'tok/s':>8}"
          f"{'ms/call':>9}{'1-call s':>10}{'tok/s':>9}{'wall s':>8}{'peak GB':>9}{'tracebacks':>12}")
    for client, startup, load, per_seq, one_call, wall, peak, errors in rows:
        print(f"{client:<14}{startup:>10.2f}{load:>8.2f}{per_seq:>11.2f}{tokens / per_seq:>8.0f}"
              f"{1000 * per_seq / args.sequences:>9.1f}{one_call:>10.2f}{tokens / one_call:>9.0f}"
              f"{wall:>8.1f}{peak:>9.2f}{errors:>12}")
    print("\nstartup: interpreter creation + GROBID's start-up statements (plain Python: the same "
          "statements);\nper-seq: one label() per sequence, as GROBID labels dates; 1-call: the "
          "whole input in one call; peak GB: the process's peak RSS (the JVM's with JEP)")


if __name__ == "__main__":
    main()
