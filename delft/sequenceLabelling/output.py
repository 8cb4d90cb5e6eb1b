"""Writing tagged sequences: (token, label) pairs, DeLFT's JSON with character offsets, IOB, TEI."""
import datetime
import json
from xml.sax.saxutils import escape

import numpy as np


def entities_json(text, tokens, offsets, labels, scores):
    """DeLFT's per-text JSON: ``{"text", "entities": [{text, class, score, beginOffset, endOffset}]}``.

    As DeLFT's: ``endOffset`` is the offset of the entity's *last* character (included) and
    ``text`` is ``text[beginOffset:endOffset + 1]``, the original characters between. Unlike
    DeLFT's, ``score`` is the mean confidence of the entity's words (DeLFT writes 1.0 for CRF
    models), and pre-tokenised input has entities too, with offsets into its tokens joined by
    single spaces (DeLFT gives none).

    >>> entities_json("in June 2005", ["in", "June", "2005"], [(0, 2), (3, 7), (8, 12)],
    ...               ["O", "B-<month>", "B-<year>"], [0.9, 0.8, 0.6])["entities"][0]
    {'text': 'June', 'class': '<month>', 'score': 0.8, 'beginOffset': 3, 'endOffset': 6}
    """
    if text is None:
        text = " ".join(tokens)
    entities = []
    for label_type, first, end, begin, last in get_entities_with_offsets(list(labels), offsets):
        entities.append({
            "text": text[begin:last + 1],
            "class": label_type,
            "score": round(float(np.mean(scores[first:end])), 4),
            "beginOffset": int(begin),
            "endOffset": int(last),
        })
    return {"text": text, "entities": entities}


def token_offsets(tokens):
    """Offsets of tokens joined by single spaces (for input given as tokens, not raw text)."""
    offsets, position = [], 0
    for token in tokens:
        offsets.append((position, position + len(token)))
        position += len(token) + 1
    return offsets


def json_header(model_name):
    return {"software": "DeLFT", "date": datetime.datetime.now().isoformat(),
            "model": model_name}


def iob_lines(tokens, labels):
    """One ``token<TAB>label`` line per token and a blank line after the sequence."""
    return "".join(f"{t}\t{l}\n" for t, l in zip(tokens, labels)) + "\n"


def tei_paragraph(text, tokens, offsets, labels):
    """A ``<p>`` with each entity wrapped in ``<rs type="...">``, the text between kept as it is."""
    if text is None:
        text = " ".join(tokens)
        offsets = token_offsets(tokens)
    parts, position = [], 0
    for label_type, _, _, begin, last in get_entities_with_offsets(list(labels), offsets):
        parts.append(escape(text[position:begin]))
        parts.append(f'<rs type="{escape(label_type, {chr(34): "&quot;"})}">'
                     f"{escape(text[begin:last + 1])}</rs>")
        position = last + 1
    parts.append(escape(text[position:]))
    return "<p>" + "".join(parts) + "</p>\n"


TEI_HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n<TEI xmlns="http://www.tei-c.org/ns/1.0">\n<text>\n<body>\n'
TEI_FOOTER = "</body>\n</text>\n</TEI>\n"


class StreamedDocument:
    """One output document of ``Sequence.tag_file`` written chunk by chunk to ``stream``.

    ``output_format``: ``"json"`` (DeLFT's document, its ``texts`` list streamed), ``"TEI"`` or
    ``"iob"`` (also None). Each chunk is what ``Sequence.tag`` returns for :attr:`tag_format`.
    """

    FORMATS = {"json": "json", "TEI": "TEI", "tei": "TEI", "iob": None, None: None}

    def __init__(self, stream, output_format, model_name):
        if output_format not in self.FORMATS:
            raise ValueError(f"output_format must be json, TEI or iob, not {output_format!r}")
        self.stream = stream
        self.tag_format = self.FORMATS[output_format]
        self.first = True
        if self.tag_format == "json":
            stream.write(json.dumps(json_header(model_name))[:-1] + ', "texts": [\n')
        elif self.tag_format == "TEI":
            stream.write(TEI_HEADER)

    def add(self, tagged):
        """Write one chunk of tagged texts."""
        if self.tag_format == "json":
            for item in tagged["texts"]:
                self.stream.write(("" if self.first else ",\n") +
                                  json.dumps(item, ensure_ascii=False))
                self.first = False
        elif self.tag_format == "TEI":
            self.stream.write(tagged[len(TEI_HEADER):-len(TEI_FOOTER)])
        else:
            for pairs in tagged:
                self.stream.write(iob_lines([t for t, _ in pairs], [label for _, label in pairs]))

    def end(self, runtime):
        """Close the document (``runtime``: seconds, in the JSON document)."""
        if self.tag_format == "json":
            self.stream.write(f'\n], "runtime": {runtime}}}\n')
        elif self.tag_format == "TEI":
            self.stream.write(TEI_FOOTER)


def get_entities_with_offsets(seq, offsets):
    """DeLFT's entities of a tagged sequence, with character offsets (DeLFT's ``tagger.py`` function).

    An entity starts at a ``B-`` label and goes on over the ``I-`` labels of its type; a stray
    ``I-`` (no ``B-`` before it) starts nothing, as in DeLFT. Labels past the offsets are not read.

    Args:
        seq: IOB2 labels of the tokens.
        offsets: ``(start, end)`` character offsets of the tokens (end exclusive).

    Returns:
        ``(type, first token, last token + 1, first character, last character)`` per entity: the
        character span is ``[first character, last character]``, both included, as DeLFT's.

    >>> get_entities_with_offsets(["B-PER", "I-PER", "O", "B-LOC"],
    ...                           [(0, 10), (11, 15), (16, 29), (30, 41)])
    [('PER', 0, 2, 0, 14), ('LOC', 3, 4, 30, 40)]
    >>> get_entities_with_offsets(["I-PER", "B-<ref-marker>", "I-<ref-marker>"],
    ...                           [(0, 1), (2, 3), (4, 5)])
    [('<ref-marker>', 1, 3, 2, 4)]
    """
    count = min(len(seq), len(offsets))
    chunks = []
    i = 0
    while i < count:
        if not seq[i].startswith("B"):
            i += 1
            continue
        kind = _label_type(seq[i])
        j = i + 1
        while j < count and seq[j].startswith("I") and _label_type(seq[j]) == kind:
            j += 1
        chunks.append((kind, i, j, offsets[i][0], offsets[j - 1][1] - 1))
        i = j
    return chunks


def _label_type(label):
    """``<date>`` of ``B-<date>``; what follows the prefix, so ``B-<ref-marker>`` keeps its
    hyphen (DeLFT's ``split("-")[-1]`` would make it ``marker>``)."""
    return label[2:] if label[1:2] == "-" else label
