"""Where our clean_text (anyascii) differs from DeLFT 0.4.6's (Unidecode) on the shared data.

    DELFT046_PYTHON=/path/to/delft046/bin/python python benchmarks/clean_text_vs_unidecode.py
        [--transliteration ours|anyascii|unicodedata]

DeLFT's own ``clean_text`` and tokenizer run in DeLFT 0.4.6's virtual environment (``pip install
delft==0.4.6``, which brings Unidecode; never one of ours), given as ``--delft-python`` or
``DELFT046_PYTHON``, from a folder outside this repository. For the licences csv and the citation
sentiment corpus (as our readers give their texts) it prints: the texts, those whose cleaned form
differs, those whose tokens differ and how many tokens (the size of the multiset difference),
each character cleaned differently with its occurrences and both forms, and the time each side
took. ``--transliteration anyascii`` measures anyascii without DeLFT's forms
(cleaning.DELFT_FORMS), ``unicodedata`` the standard library's NFKD decomposition with the
non-ASCII rest deleted: the two candidates the package chose between.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from anyascii import anyascii  # noqa: E402

from delft.textClassification.cleaning import clean_text, text_tokens  # noqa: E402
from delft.textClassification.reader import read_citation_sentiment, read_license_data  # noqa: E402
from delft.utilities.Tokenizer import tokenizeAndFilterSimple  # noqa: E402
from delft.utilities.data_path import shared_data_file  # noqa: E402

# run by DeLFT 0.4.6's interpreter: JSON lists of texts on stdin, their cleaning on stdout
DELFT_SIDE = """
import json, sys, time
from delft.textClassification.preprocess import clean_text
from delft.utilities.Tokenizer import tokenizeAndFilterSimple
batches = json.load(sys.stdin)
start = time.perf_counter()
out = [[[clean_text(t), tokenizeAndFilterSimple(clean_text(t))] for t in texts] for texts in batches]
sys.stdout.write(json.dumps({"seconds": time.perf_counter() - start, "batches": out}))
"""

TRANSLITERATIONS = {
    "ours": clean_text,
    # an ASCII text goes through clean_text unchanged but for the characters it deletes
    "anyascii": lambda text: clean_text(anyascii(text)),
    "unicodedata": lambda text: clean_text(
        unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")),
}


def delft_cleaning(python, batches):
    """DeLFT's ``(clean, tokens)`` of each text of each batch, and its seconds."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
    with tempfile.TemporaryDirectory() as outside:
        done = subprocess.run([python, "-c", DELFT_SIDE], input=json.dumps(batches), cwd=outside,
                              env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"DeLFT's side failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout)
    return result["batches"], result["seconds"]


def compare(name, path, texts, delft, delft_chars, clean):
    start = time.perf_counter()
    ours = [(clean(text), tokenizeAndFilterSimple(clean(text))) for text in texts]
    seconds = time.perf_counter() - start
    differing_texts = sum(o[0] != d[0] for o, d in zip(ours, delft))
    token_texts = tokens_off = ours_tokens = delft_tokens = 0
    for (_, our_tokens), (_, their_tokens) in zip(ours, delft):
        ours_tokens += len(our_tokens)
        delft_tokens += len(their_tokens)
        if our_tokens != their_tokens:
            token_texts += 1
            ours_count, delft_count = collections.Counter(our_tokens), collections.Counter(their_tokens)
            tokens_off += sum(((ours_count - delft_count) + (delft_count - ours_count)).values())
    occurrences = collections.Counter(c for text in texts for c in text if ord(c) > 127)
    print(f"{name} ({path}): {len(texts):,} texts, {len(occurrences)} distinct non-ASCII characters "
          f"({sum(occurrences.values()):,} occurrences)")
    print(f"  cleaned form differs: {differing_texts:,} texts")
    print(f"  tokens differ: {token_texts:,} texts, {tokens_off:,} tokens (ours {ours_tokens:,}, "
          f"DeLFT's {delft_tokens:,})")
    differing = [(char, count) for char, count in occurrences.most_common()
                 if clean(char) != delft_chars[char]]
    print(f"  characters cleaned differently: {len(differing)}")
    for char, count in differing:
        print(f"    U+{ord(char):04X} {char!r} {unicodedata.name(char, '(unnamed)')}: {count:,} "
              f"(DeLFT {delft_chars[char]!r}, ours {clean(char)!r})")
    print(f"  time: ours {seconds:.3f} s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delft-python", default=os.environ.get("DELFT046_PYTHON", ""),
                        help="DeLFT 0.4.6's interpreter (default: $DELFT046_PYTHON)")
    parser.add_argument("--transliteration", choices=sorted(TRANSLITERATIONS), default="ours")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.delft_python):
        parser.error("give DeLFT 0.4.6's interpreter: --delft-python or DELFT046_PYTHON")
    licences = shared_data_file("textClassification", "licenses",
                                "copyrights-licenses-data-validated.csv")
    citations = shared_data_file("textClassification", "citations", "citation_sentiment_corpus.txt")
    data = [("licences", licences, read_license_data(licences, "copyright")[0]),
            ("citations", citations, read_citation_sentiment(citations)[0])]
    chars = sorted({c for _, _, texts in data for text in texts for c in text if ord(c) > 127})
    batches, delft_seconds = delft_cleaning(args.delft_python, [texts for _, _, texts in data] + [chars])
    delft_chars = {char: cleaned for char, (cleaned, _) in zip(chars, batches[-1])}
    print(f"clean_text: {args.transliteration} against DeLFT 0.4.6 ({args.delft_python}); DeLFT's "
          f"side took {delft_seconds:.3f} s for both data sets")
    for (name, path, texts), delft in zip(data, batches):
        compare(name, path, texts, delft, delft_chars, TRANSLITERATIONS[args.transliteration])
    # the package's clean_text: text_tokens is its tokenizer on it (checked here, not timed)
    assert all(text_tokens(t) == tokenizeAndFilterSimple(clean_text(t)) for t in chars)


if __name__ == "__main__":
    main()
