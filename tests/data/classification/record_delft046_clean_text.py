"""Record DeLFT 0.4.6's ``clean_text`` and its tokens for the texts tests/test_clean_text.py checks.

Run with a DeLFT 0.4.6 venv (``pip install delft==0.4.6``, which brings Unidecode; never a
dependency of this project), from a folder outside this repository (its package is also called
``delft``):

    TF_USE_LEGACY_KERAS=1 python record_delft046_clean_text.py SHARED_DATA_DIR OUT.json.gz

SHARED_DATA_DIR is ../shared/data (it holds textClassification/). The texts recorded, each once:

- every text of the licences csv holding a non-ASCII character (the only ones where a
  transliteration can differ from Unidecode's), and every 6th of its ASCII-only texts;
- every 87th text of the citation sentiment corpus (field 4 without its surrounding quotes) and
  its first 20 unquoted texts;
- every character of U+0080-U+017F and U+2000-U+206F alone (the blocks where
  delft.textClassification.cleaning follows DeLFT character by character), and a few texts of
  other scripts and symbols, whitespace, digits and punctuation;
- every non-ASCII character of all those texts alone.

Writes ``{"recorded_with": ..., "cases": [{"source", "text", "clean", "tokens"}, ...]}``, one case
a line, gzipped (``zcat`` shows it; plain it would be half a megabyte).
"""
import csv
import gzip
import io
import json
import os
import sys

import unidecode
from delft.textClassification.preprocess import clean_text
from delft.utilities.Tokenizer import tokenizeAndFilterSimple

SYNTHETIC = [
    "", " ", "a\nb", "a\tb\r\nc", "x_y it's (a) [b] {c} <d> \"e\" 'f' `g` ~h ^i *j +k =l |m /n \\o",
    "Attribution 3.0 license", "author(s)", "authors&apos; moral", "© 2005 Elsevier Inc. a\nb",
    ".-?!,#@% kept: ; & $ deleted", "0123456789", "a\u00a0b\u2009c\u3000d", "CC-BY . x",
    "Café naïve Œuvre Æsop Straße Ørsted ĸ Ŋŋ", "authors&apos; moral rights (x_y), it's Café — naïve",
    "Licensed under CC BY-NC 4.0: ok?", "Attribution 3.0 license (CC-BY)",
    "αβγδ ΑΒΓΔ μ-opioid η φ χ υ", "日本語 中文 한국어", "Москва Ёж", "عربى עברית", "→ ← ∞ ∑ ∫ √ ≤ ≥",
    "™ ℠ ℗ № ℃ Ω ℏ", "😀 👍 🇫🇷", "\ufeffBOM \ufffd replacement \uf25e private", "ﬁ ﬂ ﬀ ligatures",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ", "x² H₂O ½ ⅓", "\u1b67 Balinese", "ǅ ǈ ǋ Ǳ", "ĳ Ĳ ŉ ſ",
]


def unique(items):
    seen = set()
    return [item for item in items if item not in seen and not seen.add(item)]


def main(shared, out):
    licences = os.path.join(shared, "textClassification", "licenses",
                            "copyrights-licenses-data-validated.csv")
    citations = os.path.join(shared, "textClassification", "citations",
                             "citation_sentiment_corpus.txt")
    cases = []
    with open(licences, encoding="utf-8", newline="") as stream:
        rows = [(reader.line_num, row[0]) for reader in [csv.reader(stream)] for row in reader]
    non_ascii = [(line, text) for line, text in rows if any(ord(c) > 127 for c in text)]
    ascii_only = [(line, text) for line, text in rows if all(ord(c) < 128 for c in text)]
    cases += [("licenses:%d" % line, text) for line, text in non_ascii + ascii_only[::6]]
    cited = []
    with open(citations, encoding="utf-8") as stream:
        for line_number, line in enumerate(stream, start=1):
            line = line.strip()
            if line and not line.startswith("#"):
                text = line.split("\t")[3]
                quoted = len(text) > 1 and text[0] == text[-1] == '"'
                cited.append((line_number, text[1:-1] if quoted else text, quoted))
    cases += [("citations:%d" % line, text) for line, text, _ in cited[::87]]
    cases += [("citations:%d" % line, text) for line, text, quoted in cited if not quoted][:20]
    cases += [("U+%04X" % code, chr(code)) for block in ((0x80, 0x180), (0x2000, 0x2070))
              for code in range(*block)]
    cases += [("synthetic", text) for text in SYNTHETIC]
    cases += [("U+%04X" % ord(c), c) for c in sorted(set("".join(SYNTHETIC + [t for _, t in cases])))
              if ord(c) > 127]
    seen, kept = set(), []
    for source, text in cases:
        if text not in seen:
            seen.add(text)
            kept.append({"source": source, "text": text, "clean": clean_text(text),
                         "tokens": tokenizeAndFilterSimple(clean_text(text))})
    version = getattr(unidecode, "__version__", None) or _distribution_version("Unidecode")
    # mtime 0: recording the same cases again gives the same bytes
    with io.TextIOWrapper(gzip.GzipFile(out, "wb", 9, mtime=0), encoding="utf-8") as stream:
        stream.write('{"recorded_with": %s,\n "cases": [\n' % json.dumps(
            "DeLFT 0.4.6 delft.textClassification.preprocess.clean_text, Unidecode " + version))
        stream.write(",\n".join(json.dumps(case, ensure_ascii=False) for case in kept))
        stream.write("\n]}\n")
    print(len(kept), "cases written to", out)


def _distribution_version(name):
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main(*sys.argv[1:3])
