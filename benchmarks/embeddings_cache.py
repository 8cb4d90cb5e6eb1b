"""The LMDB embeddings cache at full size: build time, reload time, RSS, lookup rate.

    python benchmarks/embeddings_cache.py [--words 1000000] [--dim 300] [--dir DIR]

Writes a word2vec text file of ``--words`` x ``--dim`` in a temporary directory (or ``--dir``, kept),
then, each in a fresh process so that the figures are its own: builds the cache (time, peak RSS),
reopens it (time, RSS after the reopen), and times ``get_word_vectors`` on batches of typical sizes
(1 word; a date sequence; a citation; GROBID's longest sequences; a whole document), with words
drawn Zipf-like from the vocabulary plus 5% unknown ones. Values cycle through 10,000 distinct rows
so that writing the file does not take longer than parsing it; parsing costs the same.
Prints numbers, asserts nothing. The page cache is warm for the reload (the file was just written).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import numpy as np  # noqa: E402

BATCH_SIZES = (1, 30, 500, 3000, 30000)
NAME = "bench-embeddings"
_LETTERS = str.maketrans("0123456789", "abcdefghij")


def word(i):
    # no digits: the model lookup would normalise them and collapse the vocabulary
    return "w" + str(i).translate(_LETTERS)


def write_source(path, words, dim):
    rng = np.random.default_rng(0)
    rows = [" ".join(f"{v:.5f}" for v in row) for row in rng.normal(scale=0.4, size=(10000, dim))]
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(f"{words} {dim}\n")
        for start in range(0, words, 10000):
            stream.write("".join(f"{word(i)} {rows[i % 10000]}\n"
                                 for i in range(start, min(start + 10000, words))))


def rss_mb(kind="VmRSS"):
    """Resident MB: ``VmRSS`` in all, ``RssAnon`` the process' own memory, ``RssFile`` the pages
    of mapped files (the cache), shared and reclaimable."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(kind + ":")) / 1024


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase_build(registry):
    from delft.utilities.Embeddings import Embeddings

    start = time.perf_counter()
    emb = Embeddings(NAME, resource_registry=registry)
    took = time.perf_counter() - start
    print(f"cache build: {took:.1f} s for {emb.vocab_size} words x {emb.embed_size} "
          f"({emb.vocab_size / took:,.0f} words/s); peak RSS {peak_rss_mb():.0f} MB; "
          f"data.mdb {os.path.getsize(os.path.join(emb.cache_path, 'data.mdb')) / 2**30:.2f} GiB")


def phase_reload(registry, words):
    before = rss_mb()
    start = time.perf_counter()
    from delft.utilities.Embeddings import Embeddings
    imported = time.perf_counter() - start
    start = time.perf_counter()
    emb = Embeddings(NAME, resource_registry=registry)
    took = time.perf_counter() - start
    print(f"reload (fresh process): import {imported * 1000:.0f} ms, open and check "
          f"{took * 1000:.1f} ms; RSS {before:.0f} MB before, {rss_mb():.0f} MB after "
          f"({rss_mb('RssAnon'):.0f} MB anonymous)")
    start = time.perf_counter()
    Embeddings(NAME, resource_registry=registry)
    print(f"reload (fresh object, same process): {(time.perf_counter() - start) * 1000:.1f} ms")
    rng = np.random.default_rng(1)
    ranks = np.minimum(rng.zipf(1.1, size=200000), words) - 1
    pool = [word(int(r)) if rng.random() > 0.05 else f"unknown{i}" for i, r in enumerate(ranks)]
    for size in BATCH_SIZES:
        done, start, offset = 0, time.perf_counter(), 0
        while time.perf_counter() - start < 1.5:
            batch = pool[offset:offset + size] if offset + size <= len(pool) else pool[:size]
            offset = (offset + size) % len(pool)
            emb.get_word_vectors(batch)
            done += len(batch)
        rate = done / (time.perf_counter() - start)
        print(f"get_word_vectors, batch {size:>6}: {rate:>12,.0f} words/s")
    print(f"RSS after lookups: {rss_mb():.0f} MB, of which {rss_mb('RssAnon'):.0f} MB the process' "
          f"own and {rss_mb('RssFile'):.0f} MB mapped file pages (the cache pages touched: "
          "shared with other processes and reclaimable)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--words", type=int, default=1000000)
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--dir", default=None, help="work directory, kept (default: a temporary one)")
    parser.add_argument("--phase", choices=["build", "reload"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        registry = json.load(open(os.path.join(args.dir, "registry.json")))
        phase_build(registry) if args.phase == "build" else phase_reload(registry, args.words)
        return
    with tempfile.TemporaryDirectory() as scratch:
        work = args.dir or scratch
        os.makedirs(work, exist_ok=True)
        source = os.path.join(work, "vectors.vec")
        start = time.perf_counter()
        write_source(source, args.words, args.dim)
        print(f"source: {args.words} x {args.dim}, {os.path.getsize(source) / 2**30:.2f} GiB, "
              f"written in {time.perf_counter() - start:.0f} s")
        registry = {"embedding-lmdb-path": os.path.join(work, "db"),
                    "embeddings": [{"name": NAME, "path": source, "format": "vec", "lang": "en"}]}
        with open(os.path.join(work, "registry.json"), "w") as stream:
            json.dump(registry, stream)
        for phase in ("build", "reload"):
            subprocess.run([sys.executable, __file__, "--phase", phase, "--dir", work,
                            "--words", str(args.words)], check=True)


if __name__ == "__main__":
    main()
