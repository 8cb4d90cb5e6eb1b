"""TensorFlow's start: a plain ``import tensorflow`` against delft's ``import_tensorflow`` (its
start-up pages handed back, delft/utilities/tensorflow_pages.py), in alternating fresh processes.

    python benchmarks/tensorflow_start.py [--rounds 5]

Per way: the import's wall time, the process's peak RSS, and its RSS and file-backed RSS after
the import (medians over the rounds, and their range).
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402

START = r'''
import json, re, resource, sys, time
start = time.perf_counter()
if sys.argv[1] == "plain":
    import tensorflow
else:
    from delft.utilities.tensorflow_pages import import_tensorflow
    import_tensorflow()
seconds = time.perf_counter() - start
status = open("/proc/self/status").read()
after = {key: int(re.search(key + r":\s+(\d+)", status).group(1)) / 1024
         for key in ("VmRSS", "RssFile")}
print(json.dumps({"seconds": seconds, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                  / 1024, "rss_mb": after["VmRSS"], "file_mb": after["RssFile"]}))
'''
WAYS = ("plain", "import_tensorflow")


def start(way):
    done = peers.script("ours", START, [way], peers.REPO)
    if done.code != 0:
        raise SystemExit(f"{way} failed:\n{done.err[-3000:]}")
    return json.loads(done.out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    runs = {way: [] for way in WAYS}
    for _ in range(args.rounds):
        for way in WAYS:
            runs[way].append(start(way))
    for way in WAYS:
        line = [f"{way:18s}"]
        for key, unit, digits in (("seconds", "s", 2), ("peak_mb", "MB", 0), ("rss_mb", "MB", 0),
                                  ("file_mb", "MB", 0)):
            values = [run[key] for run in runs[way]]
            line.append(f"{key} {statistics.median(values):.{digits}f} {unit} "
                        f"({min(values):.{digits}f}-{max(values):.{digits}f})")
        print("  ".join(line), flush=True)


if __name__ == "__main__":
    main()
